// Braze's thread pool for the parallel loops of CPU kernels: Halide's halide_do_par_for,
// for JIT-compiled kernels (a pipeline's JITHandlers) and for the disk cache's
// ahead-of-time kernels (their runtime's halide_set_custom_do_par_for).
//
// Why not Halide's own pool: its workers spin for 40 sched_yield calls (a few
// microseconds) and then sleep, so nearly every kernel launch of a training loop or a
// benchmark woke a sleeping worker, and the kernel ran on one thread until it came
// (docs/THREAD_POOL.md; bench/RESULTS.md has the measurement). Here a worker that took
// part in a loop spins for kSpinMicros before it sleeps, as the thread pools of XLA's
// CPU runtime (Eigen's) and of TBB do; the spin calls sched_yield every 64 rounds of
// `pause`, offering the core to any other runnable thread (oneDNN's OpenMP team). A
// worker a loop cannot use (its thread count is lower) goes back to sleep at once.
//
// Semantics of ParallelFor, Halide's halide_do_par_for: every index in [min, min +
// extent) runs once; the call returns when all have run, with 0 or the first nonzero
// status a task returned. Each thread runs a contiguous share of the indices, the same
// at every launch, then helps with the others' one index at a time, so uneven tasks
// balance. A call from inside one of this pool's tasks (a nested parallel loop) runs
// its indices serially on the calling thread. A call while another thread's loop has the pool goes
// to `busy`, Halide's own pool (halide_default_do_par_for of the kernel's runtime), as
// before there was this one, or runs serially when there is none: no deadlock, no
// wait.
#ifndef BRAZE_DEVICE_THREAD_POOL_H_
#define BRAZE_DEVICE_THREAD_POOL_H_

#include <cstdint>

namespace braze {
namespace device {

// Halide's task signature (halide_task_t).
using ParallelTask = int (*)(void* user_context, int index, uint8_t* closure);

// halide_do_par_for's signature.
using ParallelForFunction = int (*)(void* user_context, ParallelTask f, int min, int extent,
                                    uint8_t* closure);

// Runs f(user_context, i, closure) for i in [min, min + extent) on the calling thread
// and the pool's workers, at most CurrentKernelThreads() threads in all.
int ParallelFor(void* user_context, ParallelTask f, int min, int extent, uint8_t* closure,
                ParallelForFunction busy = nullptr);

// Whether the calling thread is running one of the pool's tasks: a loop it launches runs
// serially there (a library call that would cut its work into the pool's loop asks first).
bool InPoolTask();

// The JIT runtime's halide_default_do_par_for, for JIT kernels' loops launched while the
// pool is busy (the JIT runtime exists only after the first JIT compile, so the compile
// layer finds it).
void SetJitHalidePool(ParallelForFunction halide_default_do_par_for);

// The thread count of the kernel the calling thread is launching (0: the pool's size). Set
// by a kernel's launch for its duration (ScopedKernelThreads).
int CurrentKernelThreads();
class ScopedKernelThreads {
 public:
  explicit ScopedKernelThreads(int threads);
  ~ScopedKernelThreads();
  ScopedKernelThreads(const ScopedKernelThreads&) = delete;
  ScopedKernelThreads& operator=(const ScopedKernelThreads&) = delete;

 private:
  int previous_;
};

// How long a worker spins for new work after its last task before it sleeps.
inline constexpr int kSpinMicros = 200;

// Ends the spin of the workers waiting for the next loop: they sleep now (and wake at
// the next loop that wants them). For a thread about to wait for something that is not a
// kernel (a collective's poll loop, comm::CommQueue): the workers' spin would only take
// cores from it. Returns whether any worker was awake then (false before the pool
// exists): only those are worth waking again when the wait ends.
bool ParkWorkers();
// Wakes the sleeping workers to spin for the next loop (kSpinMicros, then they sleep
// again): for a thread whose wait (above) ends and that launches kernels next, so that
// those do not start on one thread while the workers wake.
void WakeWorkers();

// Counters for tests: parallel loops run on the pool, run serially (nested, one
// thread, or contended with no `busy`), handed to `busy`, how many times a worker was woken from
// sleep; the pool's workers and how many sleep now.
struct ThreadPoolStats {
  int64_t pooled = 0;
  int64_t serial = 0;
  int64_t busy = 0;
  int64_t wakeups = 0;
  int workers = 0;
  int sleeping = 0;
};
ThreadPoolStats GetThreadPoolStats();

}  // namespace device
}  // namespace braze

#endif  // BRAZE_DEVICE_THREAD_POOL_H_
