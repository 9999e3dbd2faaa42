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
// Status at once (the peers' state is unknown).
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

// Open MPI over MPI_COMM_WORLD (MPI already initialized); the timeout is per call.
// Unimplemented when Braze was built without MPI.
absl::StatusOr<std::unique_ptr<Communicator>> CreateMpiCommunicator(double timeout_seconds);
// Whether this build has MPI, and whether this process was started by an MPI launcher.
bool MpiBuilt();
bool LaunchedByMpi();
// Leaves MPI: MPI_Finalize, or MPI_Abort (exit code 1 for every rank) when `abort`.
absl::Status FinalizeMpi(bool abort);

// NCCL, loaded once per process: OK and its version (e.g. 22703 for 2.27.3) when
// libnccl.so.2 loads and has every entry point Braze calls; otherwise
// FailedPrecondition saying why (not installed, missing symbols). Needs no GPU.
absl::StatusOr<int> LoadNccl();
// An NCCL communicator over the ranks of `bootstrap` (which broadcasts rank 0's NCCL id)
// on CUDA device `device`. FailedPrecondition naming the reason when NCCL does not load
// or no CUDA device is usable (CheckCudaAvailable's reason).
absl::StatusOr<std::unique_ptr<Communicator>> CreateNcclCommunicator(Communicator& bootstrap,
                                                                     const Device& device);

// One worker thread running enqueued work in order.
class CommQueue {
 public:
  CommQueue();
  ~CommQueue();  // finishes the queued work first
  CommQueue(const CommQueue&) = delete;
  CommQueue& operator=(const CommQueue&) = delete;
  std::shared_future<absl::Status> Enqueue(std::function<absl::Status()> work);

 private:
  void Loop();
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::packaged_task<absl::Status()>> queue_;
  std::atomic<int> queued_{0};  // queue_.size(), read without the lock while spinning
  bool stop_ = false;
  std::thread thread_;
};

// The process's communication thread, started at the first use.
CommQueue& ProcessCommQueue();

}  // namespace comm
}  // namespace braze

#endif  // BRAZE_DEVICE_COMMUNICATOR_H_
