// Braze's thread pool; see thread_pool.h.
//
// One job at a time. The launching thread publishes it (job_, then serial_), runs
// indices itself, waits until every index has run, retires the job (job_ = nullptr) and
// waits until no worker still holds it (active_ == 0); the job lives on its stack.
// A worker counts itself in active_ before it reads job_, so with sequentially
// consistent operations on both sides either the worker sees the job retired or the
// launcher sees the worker and waits for it: no worker touches a job that has
// returned. The same pairing (serial_ against sleepers_) makes sure a worker going to
// sleep either sees a new job or is notified of it.
#include "device/thread_pool.h"

#include <pthread.h>
#include <sched.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <new>
#include <thread>

namespace braze {
namespace device {
namespace {

thread_local bool in_task = false;    // running a task: a nested loop runs serially
thread_local int kernel_threads = 0;  // ScopedKernelThreads

std::atomic<int64_t> pooled_count{0}, serial_count{0}, busy_count{0}, wakeup_count{0};

void CpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

// One thread's share of a job's indices: [first, end), the next not yet taken at `next`.
struct alignas(64) Share {
  std::atomic<int> next{0};
  int end = 0;
};

struct Job {
  ParallelTask f;
  void* user_context;
  uint8_t* closure;
  int min;
  int extent;
  int workers;  // workers 0 .. workers - 1 take part (the launcher is one more thread)
  uint64_t serial;
  Share* shares;  // workers + 1 of them: the launcher's, then worker w's at w + 1
  std::atomic<int> remaining{0};
  std::atomic<int> status{0};
};

// Marks the thread as running tasks while it lives (nested loops then run serially).
class InTask {
 public:
  InTask() : was_(in_task) { in_task = true; }
  ~InTask() { in_task = was_; }

 private:
  bool was_;
};

// Cuts [0, extent) into `threads` contiguous shares of nearly equal size.
void DealShares(Job& job, int threads) {
  for (int t = 0; t < threads; ++t) {
    job.shares[t].next.store(static_cast<int>(int64_t{job.extent} * t / threads),
                             std::memory_order_relaxed);
    job.shares[t].end = static_cast<int>(int64_t{job.extent} * (t + 1) / threads);
  }
}

// Runs the job's indices until none is left: thread `self`'s own share first, in order,
// then what is left of the others' (one index at a time, so uneven tasks still
// balance). A thread thus gets the same indices at every launch of a loop, as OpenMP's
// static schedule gives them, and what it wrote or read last time may still be in its
// own caches (docs/THREAD_POOL.md, "Shares").
void RunIndices(Job& job, int self) {
  InTask mark;
  const int threads = job.workers + 1;
  for (int k = 0; k < threads; ++k) {
    Share& share = job.shares[(self + k) % threads];
    for (int i; (i = share.next.fetch_add(1, std::memory_order_relaxed)) < share.end;) {
      const int s = job.f(job.user_context, job.min + i, job.closure);
      if (s != 0) {
        int expected = 0;
        job.status.compare_exchange_strong(expected, s, std::memory_order_relaxed);
      }
      job.remaining.fetch_sub(1, std::memory_order_acq_rel);
    }
  }
}

int RunSerially(void* user_context, ParallelTask f, int min, int extent, uint8_t* closure) {
  serial_count.fetch_add(1, std::memory_order_relaxed);
  InTask mark;
  int status = 0;
  for (int i = min; i < min + extent; ++i) {
    const int s = f(user_context, i, closure);
    if (s != 0 && status == 0) status = s;
  }
  return status;
}

// Threads a kernel may use by default: HL_NUM_THREADS (or HL_NUMTHREADS) when set, as
// Halide's pool reads it, else the CPUs this process may run on (its affinity mask, which
// containers narrow), at most 256 as Halide's.
int DefaultThreads() {
  for (const char* name : {"HL_NUM_THREADS", "HL_NUMTHREADS"}) {
    if (const char* env = std::getenv(name)) {
      const int n = std::atoi(env);
      if (n > 0) return std::min(n, 256);
    }
  }
  int n = static_cast<int>(std::thread::hardware_concurrency());
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof(set), &set) == 0) n = CPU_COUNT(&set);
  return std::clamp(n, 1, 256);
}

class Pool {
 public:
  // Starts threads - 1 workers, or as many as the system allows.
  explicit Pool(int threads) {
    for (int id = 0; id < threads - 1; ++id) {
      try {
        std::thread([this, id] { Work(id); }).detach();
      } catch (...) {  // a thread limit, or no memory: fewer workers
        break;
      }
      ++workers_;
    }
  }

  int sleeping() const { return sleepers_.load(); }
  int workers() const { return workers_; }
  // Returns whether a worker was awake (spinning, or finishing a task) to be parked.
  bool Park() {
    park_.fetch_add(1, std::memory_order_relaxed);
    return sleepers_.load() < workers_;
  }
  // Every sleeping worker wakes and spins for the next loop (then sleeps again).
  void Wake() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      wake_.fetch_add(1);
    }
    cv_.notify_all();
  }

  int Run(void* user_context, ParallelTask f, int min, int extent, uint8_t* closure,
          ParallelForFunction busy) {
    int threads = kernel_threads > 0 ? kernel_threads : workers_ + 1;
    threads = std::min({threads, workers_ + 1, extent});
    if (threads <= 1 || in_task) return RunSerially(user_context, f, min, extent, closure);
    if (!submit_.try_lock()) {
      if (busy == nullptr) return RunSerially(user_context, f, min, extent, closure);
      busy_count.fetch_add(1, std::memory_order_relaxed);
      return busy(user_context, f, min, extent, closure);
    }
    pooled_count.fetch_add(1, std::memory_order_relaxed);
    Job job;
    job.f = f;
    job.user_context = user_context;
    job.closure = closure;
    job.min = min;
    job.extent = extent;
    job.workers = threads - 1;
    job.serial = ++last_serial_;
    // The shares live with the job; a pool of more than kInlineShares threads allocates.
    constexpr int kInlineShares = 8;
    Share inline_shares[kInlineShares];
    std::unique_ptr<Share[]> heap_shares;
    if (threads > kInlineShares) heap_shares.reset(new Share[threads]);
    job.shares = threads > kInlineShares ? heap_shares.get() : inline_shares;
    DealShares(job, threads);
    job.remaining.store(extent, std::memory_order_relaxed);
    job_.store(&job);
    wanted_.store(job.workers);
    serial_.store(job.serial);
    if (sleepers_.load() > 0) {
      std::lock_guard<std::mutex> lock(mu_);
      cv_.notify_all();
    }
    RunIndices(job, 0);
    for (int round = 0; job.remaining.load(std::memory_order_acquire) != 0; ++round) Backoff(round);
    job_.store(nullptr);
    for (int round = 0; active_.load() != 0; ++round) Backoff(round);
    submit_.unlock();
    return job.status.load(std::memory_order_relaxed);
  }

 private:
  static void Backoff(int round) {
    if (round % 64 == 63) {
      sched_yield();
    } else {
      CpuRelax();
    }
  }

  void Work(int id) {
    uint64_t seen = 0;
    bool spin = false;  // only a worker that took part in the last job spins
    for (;;) {
      Job* job = WaitForJob(id, &seen, spin);
      spin = id < job->workers;
      if (spin) RunIndices(*job, id + 1);
      active_.fetch_sub(1);
    }
  }

  // Returns a job newer than *seen with this worker counted in active_. With `spin`,
  // waits for one spinning for kSpinMicros first; then (or at once) sleeps until a job
  // that wants this worker is published.
  Job* WaitForJob(int id, uint64_t* seen, bool spin) {
    if (!spin) Sleep(id, *seen);
    auto spin_start = std::chrono::steady_clock::now();
    uint64_t parked = park_.load(std::memory_order_relaxed);
    for (int round = 0;; ++round) {
      const uint64_t published = serial_.load();
      if (published != *seen) {
        active_.fetch_add(1);
        Job* job = job_.load();
        if (job != nullptr && job->serial != *seen) {
          *seen = job->serial;
          return job;
        }
        active_.fetch_sub(1);
        // job_ is set before serial_: a job `published` gone from job_ has returned.
        if (job == nullptr) *seen = published;
      }
      if (round % 64 == 63 && (park_.load(std::memory_order_relaxed) != parked ||
                               std::chrono::steady_clock::now() - spin_start >
                                   std::chrono::microseconds(kSpinMicros))) {
        Sleep(id, *seen);
        spin_start = std::chrono::steady_clock::now();
        parked = park_.load(std::memory_order_relaxed);
      } else {
        Backoff(round);  // its sched_yield lets another thread that needs this core run
      }
    }
  }

  // Sleeps until a job newer than `seen` wants worker `id` (wanted_ is stored before
  // serial_, so the predicate sees the job's own count).
  void Sleep(int id, uint64_t seen) {
    std::unique_lock<std::mutex> lock(mu_);
    const uint64_t woken = wake_.load();
    sleepers_.fetch_add(1);
    cv_.wait(lock, [&] {
      return (serial_.load() != seen && id < wanted_.load()) || wake_.load() != woken;
    });
    sleepers_.fetch_sub(1);
    wakeup_count.fetch_add(1, std::memory_order_relaxed);
  }

  int workers_ = 0;  // started; set before any job
  // ParkWorkers calls: a spinning worker that sees the count change sleeps. WakeWorkers
  // calls: a sleeping worker that sees it change spins.
  std::atomic<uint64_t> park_{0};
  std::atomic<uint64_t> wake_{0};
  std::mutex submit_;         // one job at a time
  uint64_t last_serial_ = 0;  // under submit_
  std::atomic<Job*> job_{nullptr};
  std::atomic<uint64_t> serial_{0};
  std::atomic<int> wanted_{0};  // the newest job's workers
  std::atomic<int> active_{0};
  std::mutex mu_;
  std::condition_variable cv_;
  std::atomic<int> sleepers_{0};
};

// The pool, created at first use and never destroyed (workers outlive main). A child
// of fork() has none of its threads and may have copied it mid-job: the child forgets
// it (leaks the copy) and makes a new one when it first needs one.
std::atomic<Pool*> the_pool{nullptr};
std::mutex the_pool_mu;

void ForgetPoolInChild() {
  the_pool.store(nullptr);
  new (&the_pool_mu) std::mutex();  // another thread may have held it at the fork
}

Pool& ThePool() {
  if (Pool* pool = the_pool.load(std::memory_order_acquire)) return *pool;
  std::lock_guard<std::mutex> lock(the_pool_mu);
  static const bool registered = pthread_atfork(nullptr, nullptr, ForgetPoolInChild) == 0;
  (void)registered;
  if (the_pool.load() == nullptr) the_pool.store(new Pool(DefaultThreads()));
  return *the_pool.load();
}

}  // namespace

int ParallelFor(void* user_context, ParallelTask f, int min, int extent, uint8_t* closure,
                ParallelForFunction busy) {
  if (extent <= 0) return 0;
  return ThePool().Run(user_context, f, min, extent, closure, busy);
}

bool ParkWorkers() {
  Pool* pool = the_pool.load(std::memory_order_acquire);
  return pool != nullptr && pool->Park();
}

void WakeWorkers() {
  if (Pool* pool = the_pool.load(std::memory_order_acquire)) pool->Wake();
}

int CurrentKernelThreads() { return kernel_threads; }

bool InPoolTask() { return in_task; }

ScopedKernelThreads::ScopedKernelThreads(int threads) : previous_(kernel_threads) {
  kernel_threads = threads;
}
ScopedKernelThreads::~ScopedKernelThreads() { kernel_threads = previous_; }

ThreadPoolStats GetThreadPoolStats() {
  ThreadPoolStats s;
  s.pooled = pooled_count.load(std::memory_order_relaxed);
  s.serial = serial_count.load(std::memory_order_relaxed);
  s.busy = busy_count.load(std::memory_order_relaxed);
  s.wakeups = wakeup_count.load(std::memory_order_relaxed);
  s.workers = ThePool().workers();
  s.sleeping = ThePool().sleeping();
  return s;
}

}  // namespace device
}  // namespace braze
