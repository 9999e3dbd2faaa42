// Communicators: the collectives between the processes of a job (braze/distributed.h),
// behind one small interface, on existing engines only (no sockets, no collective
// algorithms of Braze's own):
//   MpiCommunicator   Open MPI (mpi_communicator.cc): host memory; also what launches the
//                     job, numbers the ranks and hands NCCL its unique id. Each call is
//                     non-blocking MPI (MPI_Iallreduce, ...) polled against a deadline,
//                     with MPI_ERRORS_RETURN: a lost rank is a Status, never a hang.
//   NcclCommunicator  NCCL (nccl_communicator.cc), dlopen'ed at run time as cuBLASLt is:
//                     CUDA device memory, so a gradient on the GPU stays there.
// Buffers are raw pointers (host, or CUdeviceptr for NCCL) with an element count and a
// dtype. A communicator whose call failed stays failed: later calls return the same
// Status at once (the peers' state is unknown). An MPI call that returned with requests
// still in flight (timed out) ends all MPI use of the process (mpi_communicator.cc).
//
// CommQueue: the communication thread. The runtime enqueues each collective step there
// in plan order (the same order on every rank, as MPI requires) and goes on with the
// steps that do not read its result; consumers wait on the returned future.
#ifndef BRAZE_DEVICE_COMMUNICATOR_H_
#define BRAZE_DEVICE_COMMUNICATOR_H_

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <future>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "braze/device.h"
#include "braze/dtype.h"

namespace braze {
namespace comm {

class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual const char* engine() const = 0;  // "mpi", "nccl"
  // `out` (count elements) becomes the element-wise sum over the ranks of their `in`;
  // in place when in == out (out of place saves the caller a copy).
  virtual absl::Status AllReduceSum(const void* in, void* out, int64_t count, DType dtype) = 0;
  // `data` becomes rank `root`'s, in place.
  virtual absl::Status Broadcast(void* data, int64_t count, DType dtype, int root) = 0;
  // `out` (size() * count elements) gets rank r's `in` at elements [r count, (r+1) count).
  virtual absl::Status AllGather(const void* in, int64_t count, DType dtype, void* out) = 0;
  virtual absl::Status Barrier() = 0;
  // A call failed (timed out, or the engine reported an error): every later one fails.
  virtual bool failed() const = 0;
};

// The communicator InitDistributed made (MPI), or nullptr in a world of one.
Communicator* World();
// The communicator for collectives on values in `memory`'s memory: World() (MPI) for
// the host's (cpu, jit:cpu; OpenCL values are brought to the host first), and on a CUDA
// device the process's NCCL communicator there, made at the first call with World() as
// its bootstrap: a collective call itself, so every rank makes it at the same point of
// its sequence of collectives (on the communication queue). FailedPrecondition saying
// why (on every rank alike: they agree first, CreateNcclCommunicator) when NCCL cannot
// run there, and at every later call; FailedPrecondition in a world of one.
absl::StatusOr<Communicator*> CommunicatorFor(const Device& memory);

// Open MPI over MPI_COMM_WORLD (MPI already initialized); the timeout is per call; an
// all-reduce of more than `allreduce_piece_bytes` (> 0) goes as pieces of that size
// (DistributedOptions::allreduce_piece_bytes). Returns an Unimplemented Status when Braze
// was built without MPI.
absl::StatusOr<std::unique_ptr<Communicator>> CreateMpiCommunicator(double timeout_seconds,
                                                                    int64_t allreduce_piece_bytes);
// Every rank's `value`, in rank order, on every rank: one all-gather, a collective call
// that every rank must make at the same point of its sequence.
absl::StatusOr<std::vector<int64_t>> ValueOfEveryRank(Communicator& world, int64_t value);
// OK when every rank of `world` passed the same `piece_bytes`
// (DistributedOptions::allreduce_piece_bytes), else InvalidArgument naming it, on every
// rank alike. A collective call (an all-gather): InitDistributed makes it on every rank.
absl::Status SamePieceBytesOnEveryRank(Communicator& world, int64_t piece_bytes);
// Whether this build has MPI, and whether this process was started by an MPI launcher.
bool MpiBuilt();
bool LaunchedByMpi();
// This process's rank and the number of ranks as an MPI launcher announced them in the
// environment (before any InitDistributed), or {0, 0} when none did.
std::pair<int, int> LauncherRankAndSize();
// Leaves MPI: MPI_Finalize, or MPI_Abort (exit code 1 for every rank) when `abort`.
absl::Status FinalizeMpi(bool abort);
// FailedPrecondition: FinalizeDistributed was called (what a collective or InitDistributed
// returns after it).
absl::Status FinalizedError();

// NCCL, loaded once per process: OK and its version (e.g. 22703 for 2.27.3) when
// libnccl.so.2 loads and has every entry point Braze calls; otherwise
// FailedPrecondition saying why (not installed, missing symbols). Needs no GPU.
absl::StatusOr<int> LoadNccl();
// Whether NCCL can run on `device` in this process: OK when NCCL loads and the device
// is a usable CUDA device; FailedPrecondition naming the reason otherwise (NCCL not
// installed, CheckCudaAvailable's reason, no such device), InvalidArgument for a device
// that is not CUDA. Collective calls none.
absl::Status CheckNccl(const Device& device);
// An NCCL communicator over the ranks of `bootstrap` on CUDA device `device`, each call
// bounded by `timeout_seconds`. The ranks first agree over `bootstrap` (an all-reduce of
// CheckNccl's verdicts), so all of them fail alike when any cannot (FailedPrecondition:
// this rank's reason, or how many ranks could not) instead of some waiting for the
// others forever in ncclCommInitRank; then rank 0's NCCL id is broadcast.
absl::StatusOr<std::unique_ptr<Communicator>> CreateNcclCommunicator(Communicator& bootstrap,
                                                                     const Device& device,
                                                                     double timeout_seconds);

// One worker thread running enqueued work in order. A thread that needs a result
// helps instead of sleeping: Wait runs queued work itself, in order, while no other
// thread runs any, and RunHere runs work on the calling thread when nothing is queued
// or running before it. So a collective the executor would only wait for costs no
// hand-off between threads (no wake-up of the communication thread, none of the
// executor's), and the order of the calls into MPI stays the order of enqueueing.
class CommQueue {
 public:
  CommQueue();
  ~CommQueue();  // finishes the queued work first
  CommQueue(const CommQueue&) = delete;
  CommQueue& operator=(const CommQueue&) = delete;
  std::shared_future<absl::Status> Enqueue(std::function<absl::Status()> work);
  // `done`'s status (a future Enqueue returned), running queued work on this thread
  // meanwhile; the communicators poll without backing off while it waits (Awaited).
  absl::Status Wait(const std::shared_future<absl::Status>& done);
  // `work` run on this thread after everything enqueued before it: at once when the
  // queue is idle, else enqueued and waited for as Wait does.
  absl::Status RunHere(std::function<absl::Status()> work);
  // How many times the queue's thread woke from its sleep (for tests: work run here, on
  // an idle queue, must not wake it).
  int64_t thread_wakeups() const { return wakeups_.load(std::memory_order_relaxed); }

 private:
  void Loop();
  // Runs queue_.front() on this thread; `lock` holds mu_, not busy_, queue_ not empty.
  void RunFront(std::unique_lock<std::mutex>& lock);
  // A task ended (mu_ held): clears busy_ and wakes whoever can go on.
  void Release();
  std::mutex mu_;
  std::condition_variable cv_;       // work queued, or busy_ cleared: for the thread
  std::condition_variable idle_cv_;  // a task finished: for waiters
  std::deque<std::packaged_task<absl::Status()>> queue_;
  std::atomic<int> queued_{0};  // queue_.size(), read without the lock while spinning
  std::atomic<int64_t> wakeups_{0};
  bool busy_ = false;  // a thread runs a task (at most one at a time)
  bool stop_ = false;
  std::thread thread_;
};

// Whether a thread is blocked on a collective's result (CommQueue::Wait or RunHere):
// then nothing else runs beside the call, and a communicator polls its engine without
// yielding or sleeping, as MPI_Wait does; otherwise it backs off, leaving the cores to
// the kernels that run meanwhile.
bool Awaited();

// The process's communication thread, started at the first use.
CommQueue& ProcessCommQueue();

}  // namespace comm
}  // namespace braze

#endif  // BRAZE_DEVICE_COMMUNICATOR_H_
