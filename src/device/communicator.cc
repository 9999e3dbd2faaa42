// The process's communicator and communication thread, and braze/distributed.h's
// InitDistributed / FinalizeDistributed: see communicator.h.
#include "device/communicator.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <map>
#include <mutex>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "braze/distributed.h"
#include "device/thread_pool.h"
#include "ir/world.h"

namespace braze {
namespace comm {
namespace {

struct Process {
  std::mutex mu;
  bool initialized = false;
  bool asked_mpi = false;  // InitDistributed asked for an MPI communicator (MPI may be started)
  bool finalized = false;  // FinalizeDistributed ended the job: no collective runs again
  double timeout_seconds = 300;
  std::unique_ptr<Communicator> world;
  // NCCL communicators by CUDA device index (CommunicatorFor), or why there is none.
  std::map<int, std::unique_ptr<Communicator>> nccl;
  std::map<int, absl::Status> nccl_failed;
};

Process& TheProcess() {
  static Process* p = new Process();  // never destroyed: the comm thread may outlive main
  return *p;
}

// The ranks an MPI launcher announced in the environment (Open MPI's, PMIx's, MPICH's
// Hydra), or 0 when none did.
int LauncherWorldSize() {
  for (const char* var : {"OMPI_COMM_WORLD_SIZE", "PMIX_SIZE", "PMI_SIZE"}) {
    const char* v = std::getenv(var);
    if (v != nullptr && *v != '\0') return std::atoi(v);
  }
  return 0;
}

}  // namespace

// Every rank must cut an all-reduce into the same pieces (one collective call per piece
// on one communicator): ranks with different DistributedOptions::allreduce_piece_bytes
// would make different numbers of calls, an erroneous MPI program (a hang, or sums of
// mismatched pieces). One all-gather of every rank's value, so each rank sees them all
// and returns the same verdict.
absl::StatusOr<std::vector<int64_t>> ValueOfEveryRank(Communicator& world, int64_t value) {
  // An int64 travels as two int32 (the collectives' dtypes), its bytes unchanged.
  std::vector<int64_t> all(static_cast<size_t>(world.size()));
  if (absl::Status s = world.AllGather(&value, 2, DType::kI32, all.data()); !s.ok()) return s;
  return all;
}

absl::Status SamePieceBytesOnEveryRank(Communicator& world, int64_t piece_bytes) {
  const int n = world.size();
  absl::StatusOr<std::vector<int64_t>> every = ValueOfEveryRank(world, piece_bytes);
  if (!every.ok()) return every.status();
  const std::vector<int64_t>& all = *every;
  const auto [low, high] = std::minmax_element(all.begin(), all.end());
  if (*low == *high) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      "DistributedOptions::allreduce_piece_bytes must be the same on every rank: rank ",
      low - all.begin(), " has ", *low, ", rank ", high - all.begin(), " has ", *high,
      " (this is rank ", world.rank(), " of ", n, ")"));
}

bool LaunchedByMpi() { return LauncherWorldSize() > 0; }

std::pair<int, int> LauncherRankAndSize() {
  const int size = LauncherWorldSize();
  if (size == 0) return {0, 0};
  for (const char* var : {"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK"}) {
    const char* v = std::getenv(var);
    if (v != nullptr && *v != '\0') return {std::atoi(v), size};
  }
  return {0, size};
}

Communicator* World() { return TheProcess().world.get(); }

absl::StatusOr<Communicator*> CommunicatorFor(const Device& memory) {
  Process& p = TheProcess();
  std::lock_guard<std::mutex> lock(p.mu);
  if (p.finalized) return comm::FinalizedError();
  if (p.world == nullptr) {
    return absl::FailedPreconditionError("no distributed job: a world of one (InitDistributed)");
  }
  if (memory.kind != Device::Kind::kCuda) return p.world.get();
  if (auto it = p.nccl.find(memory.index); it != p.nccl.end()) return it->second.get();
  // A failure is kept: every rank agreed on it, and a new try would mean a new agreement.
  if (auto it = p.nccl_failed.find(memory.index); it != p.nccl_failed.end()) return it->second;
  absl::StatusOr<std::unique_ptr<Communicator>> made =
      CreateNcclCommunicator(*p.world, memory, p.timeout_seconds);
  if (!made.ok()) {
    p.nccl_failed[memory.index] = made.status();
    return made.status();
  }
  Communicator* c = made->get();
  p.nccl[memory.index] = *std::move(made);
  return c;
}

namespace {

std::atomic<int> awaiting{0};  // threads in CommQueue::Wait or RunHere
// Whether a wait parked workers that were awake (spinning for the next loop): only then
// does the last waiter wake them when it is done.
std::atomic<bool> parked_awake{false};

// Counts the calling thread as blocked on a collective while it lives.
// The kernel pool's workers stop spinning then: nothing for them to do until this
// thread's next kernel, and on a machine with few cores their spin would slow the poll
// loop that drives the collective (a 4 MiB all-reduce of 2 ranks on 2 cores took
// 0.4x MPI_Allreduce's time beside them; docs/DISTRIBUTED.md).
class AwaitScope {
 public:
  AwaitScope() {
    awaiting.fetch_add(1, std::memory_order_relaxed);
    if (device::ParkWorkers()) parked_awake.store(true, std::memory_order_relaxed);
  }
  // The wait is over: the thread launches its next kernels soon, and a parked worker
  // takes longer to wake than that (the next kernel then ran alone on this thread:
  // 4 MiB's negation 137 us after an all-reduce, 66 us back to back). Wake them now,
  // if the wait parked any: workers that slept before it (the last kernel ran on one
  // thread, or long ago) would only spin for nothing, on a core the other ranks' poll
  // loops need, and the wake-up costs a system call on this thread's critical path.
  ~AwaitScope() {
    if (awaiting.fetch_sub(1, std::memory_order_relaxed) == 1 &&
        parked_awake.exchange(false, std::memory_order_relaxed)) {
      device::WakeWorkers();
    }
  }
};

}  // namespace

bool Awaited() { return awaiting.load(std::memory_order_relaxed) > 0; }

CommQueue::CommQueue() : thread_([this] { Loop(); }) {}

CommQueue::~CommQueue() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_one();
  thread_.join();
}

std::shared_future<absl::Status> CommQueue::Enqueue(std::function<absl::Status()> work) {
  std::packaged_task<absl::Status()> task(std::move(work));
  std::shared_future<absl::Status> done = task.get_future().share();
  {
    std::lock_guard<std::mutex> lock(mu_);
    queue_.push_back(std::move(task));
    queued_.fetch_add(1, std::memory_order_release);
  }
  cv_.notify_one();
  return done;
}

void CommQueue::RunFront(std::unique_lock<std::mutex>& lock) {
  std::packaged_task<absl::Status()> task = std::move(queue_.front());
  queue_.pop_front();
  queued_.fetch_sub(1, std::memory_order_relaxed);
  busy_ = true;
  lock.unlock();
  task();
  lock.lock();
  Release();
}

void CommQueue::Release() {
  busy_ = false;
  idle_cv_.notify_all();
  // The thread waits for queued work (or stop_) with busy_ clear: woken with nothing
  // queued, it would only sleep again (a context switch per collective run here).
  if (!queue_.empty() || stop_) cv_.notify_one();
}

absl::Status CommQueue::Wait(const std::shared_future<absl::Status>& done) {
  if (done.wait_for(std::chrono::seconds(0)) == std::future_status::ready) return done.get();
  AwaitScope awaiting_it;
  std::unique_lock<std::mutex> lock(mu_);
  while (done.wait_for(std::chrono::seconds(0)) != std::future_status::ready) {
    if (!busy_ && !queue_.empty()) {
      RunFront(lock);  // the work before ours, or ours: in order either way
    } else {
      idle_cv_.wait(lock);
    }
  }
  return done.get();
}

absl::Status CommQueue::RunHere(std::function<absl::Status()> work) {
  {
    std::unique_lock<std::mutex> lock(mu_);
    if (!busy_ && queue_.empty()) {
      AwaitScope awaiting_it;
      busy_ = true;
      lock.unlock();
      absl::Status s = work();
      lock.lock();
      Release();
      return s;
    }
  }
  return Wait(Enqueue(std::move(work)));
}

void CommQueue::Loop() {
  for (;;) {
    // A step's buckets come microseconds apart: spin a little before sleeping, so the
    // next one does not wait for the thread to wake (as the kernels' pool does).
    const auto spin_until = std::chrono::steady_clock::now() + std::chrono::microseconds(50);
    while (queued_.load(std::memory_order_acquire) == 0 &&
           std::chrono::steady_clock::now() < spin_until) {
    }
    std::unique_lock<std::mutex> lock(mu_);
    while (busy_ || (!stop_ && queue_.empty())) {
      cv_.wait(lock);
      wakeups_.fetch_add(1, std::memory_order_relaxed);
    }
    if (queue_.empty()) return;  // stop_ and nothing left
    RunFront(lock);
  }
}

CommQueue& ProcessCommQueue() {
  // Leaked on purpose: joining a thread from a static destructor after main returned
  // races with the rest of the process' teardown.
  static CommQueue* queue = new CommQueue();
  return *queue;
}

}  // namespace comm

absl::Status InitDistributed(const DistributedOptions& options) {
  comm::Process& p = comm::TheProcess();
  std::lock_guard<std::mutex> lock(p.mu);
  if (p.initialized) return absl::FailedPreconditionError("InitDistributed was called already");
  if (!(options.timeout_seconds > 0)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "DistributedOptions::timeout_seconds must be > 0, got ", options.timeout_seconds));
  }
  if (options.allreduce_piece_bytes < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("DistributedOptions::allreduce_piece_bytes must be >= 0, got ",
                     options.allreduce_piece_bytes));
  }
  const int launched = comm::LauncherWorldSize();
  if (!comm::MpiBuilt()) {
    if (launched > 1) {
      return absl::FailedPreconditionError(absl::StrCat(
          "this process is one of ", launched, " started by an MPI launcher, but Braze was ",
          "built without MPI (tools/setup.sh installs Open MPI; then re-run CMake): each rank ",
          "would train alone"));
    }
    p.initialized = true;  // a world of one
    return absl::OkStatus();
  }
  if (launched == 0) {  // not under mpirun: a world of one, no MPI at all
    p.initialized = true;
    return absl::OkStatus();
  }
  p.timeout_seconds = options.timeout_seconds;
  auto world = comm::CreateMpiCommunicator(options.timeout_seconds, options.allreduce_piece_bytes);
  p.asked_mpi = true;
  if (!world.ok()) return world.status();
  if (absl::Status same = comm::SamePieceBytesOnEveryRank(**world, options.allreduce_piece_bytes);
      !same.ok()) {
    return same;  // on every rank alike; the process stays out of the job, as before the call
  }
  p.world = *std::move(world);
  SetCurrentWorld(World{p.world->rank(), p.world->size()});
  p.initialized = true;
  return absl::OkStatus();
}

absl::Status FinalizeDistributed() {
  comm::Process& p = comm::TheProcess();
  std::lock_guard<std::mutex> lock(p.mu);
  if (p.world == nullptr) {
    p.initialized = false;
    // A refused InitDistributed (the ranks' options differed) started MPI: ended here, as
    // the launcher expects of every rank (FinalizeMpi: nothing if MPI never started).
    return p.asked_mpi ? comm::FinalizeMpi(false) : absl::OkStatus();
  }
  // After a lost rank MPI_Finalize would wait for it: end the job instead. A rank lost
  // during an NCCL call fails only that device's communicator, not MPI's.
  bool abort = p.world->failed();
  for (const auto& [device, nccl] : p.nccl) abort = abort || nccl->failed();
  // The communicator stays: a collective may still be queued on the comm thread.
  absl::Status s = comm::FinalizeMpi(abort);
  p.initialized = false;
  p.finalized = true;
  return s;
}

const char* DistributedEngine() { return comm::MpiBuilt() ? "mpi" : "none"; }

}  // namespace braze
