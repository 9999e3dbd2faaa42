// Braze's thread pool (src/device/thread_pool.h): every index once, the first error,
// nested loops serially, contended loops on the other pool, a kernel's thread count, workers woken
// from sleep, and compiled kernels running their parallel loops on it.
#include "device/thread_pool.h"

#include <atomic>
#include <chrono>
#include <mutex>
#include <set>
#include <thread>
#include <utility>
#include <vector>

#include "braze/ops.h"
#include "gtest/gtest.h"
#include "lower/lower_test_util.h"

namespace braze {
namespace device {
namespace {

bool PoolHasWorkers() { return GetThreadPoolStats().workers > 0; }

struct Counts {
  int min = 0;
  std::vector<std::atomic<int>> hits;
  explicit Counts(int min, int extent) : min(min), hits(extent) {}
};

int CountTask(void* user_context, int index, uint8_t* closure) {
  auto* c = reinterpret_cast<Counts*>(closure);
  EXPECT_EQ(user_context, c);
  c->hits[index - c->min].fetch_add(1);
  return 0;
}

TEST(ThreadPoolTest, EveryIndexRunsOnce) {
  for (int extent : {1, 2, 3, 97, 1000}) {
    for (int min : {0, -5, 7}) {
      Counts c(min, extent);
      const ThreadPoolStats before = GetThreadPoolStats();
      ASSERT_EQ(ParallelFor(&c, CountTask, min, extent, reinterpret_cast<uint8_t*>(&c)), 0);
      for (int i = 0; i < extent; ++i)
        ASSERT_EQ(c.hits[i].load(), 1) << extent << " " << min << " " << i;
      if (extent > 1 && PoolHasWorkers()) {
        EXPECT_EQ(GetThreadPoolStats().pooled, before.pooled + 1) << extent;
      }
    }
  }
  EXPECT_EQ(ParallelFor(nullptr, CountTask, 0, 0, nullptr), 0);  // empty: no task runs
}

int FailingTask(void* /*user_context*/, int index, uint8_t* closure) {
  reinterpret_cast<std::atomic<int>*>(closure)->fetch_add(1);
  return index % 10 == 3 ? -(index + 1) : 0;
}

TEST(ThreadPoolTest, ReturnsAnErrorOfATaskAndStillRunsTheOthers) {
  std::atomic<int> ran{0};
  const int status = ParallelFor(nullptr, FailingTask, 0, 100, reinterpret_cast<uint8_t*>(&ran));
  EXPECT_LT(status, 0);
  EXPECT_EQ((-status - 1) % 10, 3) << "one of the failing tasks' statuses";
  EXPECT_EQ(ran.load(), 100);
}

int NestingTask(void* /*user_context*/, int /*index*/, uint8_t* closure) {
  Counts inner(0, 16);
  const int s = ParallelFor(&inner, CountTask, 0, 16, reinterpret_cast<uint8_t*>(&inner));
  for (auto& h : inner.hits) EXPECT_EQ(h.load(), 1);
  reinterpret_cast<std::atomic<int>*>(closure)->fetch_add(1);
  return s;
}

TEST(ThreadPoolTest, NestedLoopsRunSeriallyInsideTheirTask) {
  std::atomic<int> outer{0};
  const ThreadPoolStats before = GetThreadPoolStats();
  ASSERT_EQ(ParallelFor(nullptr, NestingTask, 0, 8, reinterpret_cast<uint8_t*>(&outer)), 0);
  EXPECT_EQ(outer.load(), 8);
  EXPECT_GE(GetThreadPoolStats().serial - before.serial, 8) << "each inner loop";
}

TEST(ThreadPoolTest, ConcurrentLaunchersEachGetAllTheirIndices) {
  std::vector<std::thread> launchers;
  std::atomic<int> wrong{0};
  for (int t = 0; t < 4; ++t) {
    launchers.emplace_back([&] {
      for (int round = 0; round < 200; ++round) {
        Counts c(0, 50);
        if (ParallelFor(&c, CountTask, 0, 50, reinterpret_cast<uint8_t*>(&c)) != 0) ++wrong;
        for (auto& h : c.hits) wrong += h.load() != 1;
      }
    });
  }
  for (auto& t : launchers) t.join();
  EXPECT_EQ(wrong.load(), 0);
}

std::atomic<int> busy_calls{0};

// Stands in for Halide's pool: counts the call, then runs the loop serially.
int FakeHalidePool(void* user_context, ParallelTask f, int min, int extent, uint8_t* closure) {
  busy_calls.fetch_add(1);
  for (int i = min; i < min + extent; ++i) f(user_context, i, closure);
  return 0;
}

// Holds the pool from another thread until released: its loop's index 0 says it has
// started, then waits.
class PoolHolder {
 public:
  PoolHolder()
      : thread_([this] { ParallelFor(nullptr, Hold, 0, 2, reinterpret_cast<uint8_t*>(this)); }) {
    while (!started_.load()) std::this_thread::yield();
  }
  ~PoolHolder() {
    released_.store(true);
    thread_.join();
  }

 private:
  static int Hold(void*, int index, uint8_t* closure) {
    auto* self = reinterpret_cast<PoolHolder*>(closure);
    if (index == 0) {
      self->started_.store(true);
      while (!self->released_.load()) std::this_thread::yield();
    }
    return 0;
  }
  std::atomic<bool> started_{false}, released_{false};
  std::thread thread_;
};

// A loop launched while another thread's loop holds the pool goes to the `busy` pool.
TEST(ThreadPoolTest, ALoopLaunchedWhileThePoolIsBusyGoesToHalidesPool) {
  if (!PoolHasWorkers()) GTEST_SKIP() << "one thread: the pool has no workers";
  Counts c(0, 10);
  const int calls = busy_calls.load();
  const ThreadPoolStats before = GetThreadPoolStats();
  {
    PoolHolder holder;
    ASSERT_EQ(ParallelFor(&c, CountTask, 0, 10, reinterpret_cast<uint8_t*>(&c), FakeHalidePool), 0);
  }
  for (auto& h : c.hits) EXPECT_EQ(h.load(), 1);
  EXPECT_EQ(busy_calls.load(), calls + 1);
  EXPECT_EQ(GetThreadPoolStats().busy, before.busy + 1);
}

TEST(ThreadPoolTest, AKernelOfOneThreadRunsSerially) {
  ScopedKernelThreads one(1);
  EXPECT_EQ(CurrentKernelThreads(), 1);
  Counts c(0, 64);
  const ThreadPoolStats before = GetThreadPoolStats();
  ASSERT_EQ(ParallelFor(&c, CountTask, 0, 64, reinterpret_cast<uint8_t*>(&c)), 0);
  for (auto& h : c.hits) EXPECT_EQ(h.load(), 1);
  EXPECT_EQ(GetThreadPoolStats().pooled, before.pooled);
  EXPECT_EQ(GetThreadPoolStats().serial, before.serial + 1);
}

// Past the spin every worker sleeps: waited for, up to a second (a loaded machine may
// be slow to get there).
bool WaitUntilEveryWorkerSleeps() {
  for (int i = 0; i < 1000 && GetThreadPoolStats().sleeping < GetThreadPoolStats().workers; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return GetThreadPoolStats().sleeping == GetThreadPoolStats().workers;
}

struct SlowCounts {
  std::atomic<int> ran{0};
  std::mutex mu;
  std::set<std::thread::id> threads;
};

int SlowTask(void* /*user_context*/, int /*index*/, uint8_t* closure) {
  std::this_thread::sleep_for(std::chrono::microseconds(200));
  auto* c = reinterpret_cast<SlowCounts*>(closure);
  c->ran.fetch_add(1);
  std::lock_guard<std::mutex> lock(c->mu);
  c->threads.insert(std::this_thread::get_id());
  return 0;
}

// Tasks of 200 us each: the workers take part (more than one thread runs them).
TEST(ThreadPoolTest, WorkersRunTasks) {
  if (!PoolHasWorkers()) GTEST_SKIP() << "one thread: the pool has no workers";
  SlowCounts c;
  ASSERT_EQ(ParallelFor(nullptr, SlowTask, 0, 64, reinterpret_cast<uint8_t*>(&c)), 0);
  EXPECT_EQ(c.ran.load(), 64);
  EXPECT_GE(c.threads.size(), 2u);
}

struct Order {
  std::mutex mu;
  std::vector<std::pair<std::thread::id, int>> runs;  // (thread, index) as they started
};

int OrderTask(void* /*user_context*/, int index, uint8_t* closure) {
  auto* o = reinterpret_cast<Order*>(closure);
  {
    std::lock_guard<std::mutex> lock(o->mu);
    o->runs.emplace_back(std::this_thread::get_id(), index);
  }
  std::this_thread::sleep_for(std::chrono::microseconds(100));
  return 0;
}

// Shares: with two threads, the launcher runs its share [0, 32) in order (the worker
// may take some of it once its own is done), and the worker starts in its own share
// [32, 64) (the launcher takes from it only when its own is done). Every index still
// runs once.
TEST(ThreadPoolTest, EachThreadStartsWithItsOwnShareInOrder) {
  if (!PoolHasWorkers()) GTEST_SKIP() << "one thread: the pool has no workers";
  ScopedKernelThreads two(2);
  int worker_launches = 0;  // launches in which the worker ran something
  for (int launch = 0; launch < 5; ++launch) {
    Order o;
    ASSERT_EQ(ParallelFor(nullptr, OrderTask, 100, 64, reinterpret_cast<uint8_t*>(&o)), 0);
    ASSERT_EQ(o.runs.size(), 64u);
    const std::thread::id launcher = std::this_thread::get_id();
    std::set<int> seen;
    int last_own = 99;  // the launcher's last index in its own share
    bool worker_started = false;
    for (const auto& [thread, index] : o.runs) {
      EXPECT_TRUE(seen.insert(index).second) << index;
      if (thread == launcher) {
        if (index < 132) {
          EXPECT_GT(index, last_own) << "the launcher's share out of order";
          last_own = index;
        }
      } else if (!worker_started) {
        EXPECT_GE(index, 132) << "the worker began outside its share";
        worker_started = true;
      }
    }
    EXPECT_EQ(seen.size(), 64u);
    worker_launches += worker_started;
  }
  // 64 tasks of 100 us: the worker takes part (as in WorkersRunTasks).
  EXPECT_GE(worker_launches, 1);
}

TEST(ThreadPoolTest, SleepingWorkersWakeForTheNextLoop) {
  if (!PoolHasWorkers()) GTEST_SKIP() << "one thread: the pool has no workers";
  SlowCounts c;
  ASSERT_EQ(ParallelFor(nullptr, SlowTask, 0, 4, reinterpret_cast<uint8_t*>(&c)), 0);
  // Past the spin, every worker sleeps (waited for: a loaded machine may be slow).
  ASSERT_TRUE(WaitUntilEveryWorkerSleeps());
  const ThreadPoolStats before = GetThreadPoolStats();
  ASSERT_EQ(ParallelFor(nullptr, SlowTask, 0, 64, reinterpret_cast<uint8_t*>(&c)), 0);
  EXPECT_EQ(c.ran.load(), 68);
  EXPECT_GE(GetThreadPoolStats().wakeups, before.wakeups + 1);
}

struct Held {
  std::atomic<int> entered{0};
  std::atomic<bool> release{false};
};

int HeldTask(void* /*user_context*/, int /*index*/, uint8_t* closure) {
  auto* h = reinterpret_cast<Held*>(closure);
  h->entered.fetch_add(1);
  while (!h->release.load()) std::this_thread::sleep_for(std::chrono::microseconds(50));
  return 0;
}

// ParkWorkers says whether a worker was awake to park: a thread whose wait for a
// collective ends wakes the workers only then (comm's AwaitScope), since waking workers
// that slept before the wait would only make them spin.
TEST(ThreadPoolTest, ParkWorkersSaysWhetherAWorkerWasAwake) {
  if (!PoolHasWorkers()) GTEST_SKIP() << "one thread: the pool has no workers";
  ASSERT_TRUE(WaitUntilEveryWorkerSleeps());
  EXPECT_FALSE(ParkWorkers());
  Held h;
  std::thread launcher([&h] {
    ScopedKernelThreads two(2);  // the launcher holds index 0, a worker index 1
    EXPECT_EQ(ParallelFor(nullptr, HeldTask, 0, 2, reinterpret_cast<uint8_t*>(&h)), 0);
  });
  for (int i = 0; i < 10000 && h.entered.load() < 2; ++i) {
    std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
  const bool both_in = h.entered.load() == 2;
  const bool awake = ParkWorkers();  // a worker is in a task
  h.release.store(true);
  launcher.join();
  ASSERT_TRUE(both_in);
  EXPECT_TRUE(awake);
  ASSERT_TRUE(WaitUntilEveryWorkerSleeps());
  EXPECT_FALSE(ParkWorkers());
}

// A loop that can use fewer threads than the pool has wakes only those: the others
// sleep on (with one thread of work, no worker wakes at all).
TEST(ThreadPoolTest, ALoopWakesOnlyTheWorkersItCanUse) {
  if (!PoolHasWorkers()) GTEST_SKIP() << "one thread: the pool has no workers";
  SlowCounts c;
  ASSERT_TRUE(WaitUntilEveryWorkerSleeps());
  const ThreadPoolStats before = GetThreadPoolStats();
  {
    ScopedKernelThreads two(2);
    ASSERT_EQ(ParallelFor(nullptr, SlowTask, 0, 16, reinterpret_cast<uint8_t*>(&c)), 0);
  }
  EXPECT_EQ(c.ran.load(), 16);
  EXPECT_LE(GetThreadPoolStats().wakeups - before.wakeups, 1) << "one worker for two threads";
}

// A softmax over rows of 1031, compiled by the safe default (a parallel loop over rows).
struct SoftmaxCase {
  lowertest::Case c;
  ClusterSpec spec;
  std::vector<HostTensor> expected;
  SoftmaxCase(int64_t rows, uint64_t seed) {
    Tensor x = c.Input(DType::kF32, {rows, 1031}, seed);
    c.outputs = {Softmax(x * 1.5f)};
    spec = lowertest::SpecOf(c);
    auto reference = lowertest::ReferenceOutputs(spec, c.values);
    if (reference.ok()) expected = *std::move(reference);
  }
  absl::StatusOr<std::unique_ptr<CompiledKernel>> Compile() const {
    CompileOptions options;
    options.scheduler = Scheduler::kSafeDefault;
    return CompileCluster(spec, options);
  }
  ::testing::AssertionResult RunsRight(CompiledKernel& kernel) const {
    auto actual = lowertest::RunKernel(kernel, c.values);
    if (expected.empty()) return ::testing::AssertionFailure() << "no reference result";
    if (!actual.ok()) return ::testing::AssertionFailure() << actual.status();
    std::string why;
    if (!AllClose((*actual)[0], expected[0], 1e-5, 1e-6, &why)) {
      return ::testing::AssertionFailure() << why;
    }
    return ::testing::AssertionSuccess();
  }
};

// A compiled kernel's parallel loop runs on the pool, with the reference's results.
TEST(ThreadPoolTest, CompiledKernelsRunTheirParallelLoopsOnThePool) {
  if (!PoolHasWorkers()) GTEST_SKIP() << "one thread: the pool has no workers";
  SoftmaxCase sc(509, 5);
  auto kernel = sc.Compile();
  ASSERT_TRUE(kernel.ok()) << kernel.status();
  const ThreadPoolStats before = GetThreadPoolStats();
  for (int run = 0; run < 3; ++run) EXPECT_TRUE(sc.RunsRight(**kernel));
  EXPECT_GE(GetThreadPoolStats().pooled - before.pooled, 3) << (*kernel)->schedule_text();
}

// Kernels launched from two threads at once: one holds Braze's pool, the other's loops
// go to the JIT runtime's own pool (the compile layer hands it over); both right.
TEST(ThreadPoolTest, ConcurrentKernelsShareTheWorkThroughHalidesPool) {
  if (!PoolHasWorkers()) GTEST_SKIP() << "one thread: the pool has no workers";
  SoftmaxCase sc(263, 7);
  auto a = sc.Compile();
  auto b = sc.Compile();  // one launch at a time per kernel
  ASSERT_TRUE(a.ok() && b.ok());
  ASSERT_TRUE(sc.RunsRight(**a));  // the JIT runtime exists now
  {
    // While another thread holds Braze's pool, the kernel's loop goes to Halide's.
    const ThreadPoolStats before = GetThreadPoolStats();
    PoolHolder holder;
    EXPECT_TRUE(sc.RunsRight(**b));
    EXPECT_GE(GetThreadPoolStats().busy, before.busy + 1) << (*b)->schedule_text();
  }
  // Both kernels from two threads at once, 50 times each: every result right.
  std::atomic<int> wrong{0};
  auto runner = [&](CompiledKernel* kernel) {
    for (int run = 0; run < 50; ++run) wrong += !sc.RunsRight(*kernel);
  };
  std::thread t1(runner, a->get()), t2(runner, b->get());
  t1.join();
  t2.join();
  EXPECT_EQ(wrong.load(), 0);
}

}  // namespace
}  // namespace device
}  // namespace braze
