// The communication path in one process: the communication queue's order when the
// executor helps run it (CommQueue::Wait, RunHere), the poll loops' "awaited" signal,
// the plan's run_here marks, and which communicator a collective's memory selects
// (MPI for host memory, NCCL on a CUDA device, refused with a reason where NCCL cannot
// run). The 2-rank behaviour is in mpi_ranks.cc.
#include <atomic>
#include <chrono>
#include <future>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "braze/braze.h"
#include "braze/distributed.h"
#include "device/communicator.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/plan.h"

namespace braze {
namespace {

using ::testing::HasSubstr;

// Work that records its index, the thread it ran on and whether the poll loops would see
// it awaited.
struct Recorder {
  std::mutex mu;
  std::vector<int> order;
  std::vector<std::thread::id> threads;
  std::vector<bool> awaited;
  std::function<absl::Status()> Task(int i, absl::Status result = absl::OkStatus()) {
    return [this, i, result] {
      std::lock_guard<std::mutex> lock(mu);
      order.push_back(i);
      threads.push_back(std::this_thread::get_id());
      awaited.push_back(comm::Awaited());
      return result;
    };
  }
};

TEST(CommQueue, RunHereOnAnIdleQueueRunsOnTheCallingThreadAwaited) {
  comm::CommQueue q;
  Recorder r;
  EXPECT_FALSE(comm::Awaited());
  ASSERT_TRUE(q.RunHere(r.Task(0)).ok());
  const absl::Status failed = q.RunHere(r.Task(1, absl::DataLossError("bad bucket")));
  EXPECT_EQ(failed.code(), absl::StatusCode::kDataLoss);
  ASSERT_EQ(r.order, (std::vector<int>{0, 1}));
  EXPECT_EQ(r.threads[0], std::this_thread::get_id());
  EXPECT_EQ(r.threads[1], std::this_thread::get_id());
  EXPECT_TRUE(r.awaited[0]);
  EXPECT_FALSE(comm::Awaited());  // only while a thread waits
}

// Work run here on an idle queue leaves the queue's thread asleep: woken for nothing, it
// took the rank's core twice per collective (MPI binds each rank to one core), which
// braze_dp_bench showed as 2 context switches per all-reduce. Work enqueued wakes it.
TEST(CommQueue, RunHereLeavesTheSleepingThreadAsleep) {
  comm::CommQueue q;
  Recorder r;
  // The thread spins 50 us for work, then sleeps; give it time to get there, and a
  // thread woken for nothing time to count it and sleep again between the calls.
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  for (int i = 0; i < 50; ++i) {
    ASSERT_TRUE(q.RunHere(r.Task(i)).ok());
    std::this_thread::sleep_for(std::chrono::microseconds(500));
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(5));
  EXPECT_LE(q.thread_wakeups(), 2);  // not one per call (a spurious futex wake-up is rare)
  std::shared_future<absl::Status> done = q.Enqueue(r.Task(50));
  done.wait();  // not Wait: the thread itself must run it
  EXPECT_TRUE(done.get().ok());
  EXPECT_NE(r.threads[50], std::this_thread::get_id());
}

// Work enqueued, then waited for (the waiter runs what the thread has not started) or
// run here behind it: always in enqueueing order, whoever runs it, and each waiter gets
// its own task's status.
TEST(CommQueue, HelpingKeepsTheOrderOfEnqueueing) {
  comm::CommQueue q;
  Recorder r;
  for (int round = 0; round < 50; ++round) {
    const int base = 10 * round;
    std::vector<std::shared_future<absl::Status>> done;
    for (int i = 0; i < 4; ++i) {
      done.push_back(q.Enqueue(
          r.Task(base + i, i == 2 ? absl::UnavailableError("rank lost") : absl::OkStatus())));
    }
    const absl::Status here = q.RunHere(r.Task(base + 4));
    EXPECT_TRUE(here.ok()) << here;
    EXPECT_EQ(q.Wait(done[2]).code(), absl::StatusCode::kUnavailable);
    EXPECT_TRUE(q.Wait(done[3]).ok());
    EXPECT_TRUE(q.Wait(done[0]).ok());
  }
  ASSERT_EQ(r.order.size(), 250u);
  for (size_t i = 0; i < r.order.size(); ++i) {
    EXPECT_EQ(r.order[i], static_cast<int>(10 * (i / 5) + i % 5)) << i;
  }
}

// Several threads enqueueing and waiting at once (sessions on threads): each task runs
// once, and no two at the same time (a communicator is called by one thread at a time).
TEST(CommQueue, OneTaskAtATimeAcrossThreads) {
  comm::CommQueue q;
  std::atomic<int> running{0}, overlapped{0}, ran{0};
  auto task = [&] {
    if (running.fetch_add(1) != 0) overlapped.fetch_add(1);
    std::this_thread::sleep_for(std::chrono::microseconds(50));
    running.fetch_sub(1);
    ran.fetch_add(1);
    return absl::OkStatus();
  };
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 25; ++i) {
        if ((i + t) % 2 == 0) {
          EXPECT_TRUE(q.RunHere(task).ok());
        } else {
          EXPECT_TRUE(q.Wait(q.Enqueue(task)).ok());
        }
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(ran.load(), 100);
  EXPECT_EQ(overlapped.load(), 0);
}

// The plan's run_here marks: a collective whose output the next step reads runs on the
// calling thread; one with an independent step after it goes to the communication thread.
TEST(CollectivePlan, RunHereWhenNothingCouldOverlap) {
  Graph g;
  Tensor x = Placeholder(g, DType::kF32, {64}, "x");
  Tensor w = Placeholder(g, DType::kF32, {64}, "w");
  Tensor alone, overlapped, independent;
  {
    JitScope scope(g);
    alone = AllReduce(x * x);
    overlapped = AllReduce(x + x);
    independent = Exp(w) * w;  // needs nothing of the collectives
  }
  SessionOptions o;
  o.device = "cpu";
  auto plan_of = [&](const std::vector<Tensor>& fetches) {
    return BuildPlan(g, o, Device{}, fetches, {}, std::vector<bool>(g.num_nodes(), false));
  };
  auto run_here_of = [](const Plan& plan) {
    std::vector<bool> marks;
    for (const Step& s : plan.steps) {
      if (s.kind == Step::Kind::kCollective) marks.push_back(s.run_here);
    }
    return marks;
  };
  auto one = plan_of({alone});
  ASSERT_TRUE(one.ok()) << one.status();
  EXPECT_EQ(run_here_of(**one), std::vector<bool>{true});  // only the fetch after it
  auto two = plan_of({overlapped, independent});
  ASSERT_TRUE(two.ok()) << two.status();
  EXPECT_EQ(run_here_of(**two), std::vector<bool>{false});  // the Exp runs meanwhile
  // Two collectives: the kernel computing the second's input runs while the first is
  // on the communication thread; the second has nothing after it.
  auto both = plan_of({alone, overlapped});
  ASSERT_TRUE(both.ok()) << both.status();
  EXPECT_EQ(run_here_of(**both), (std::vector<bool>{false, true}));
}

// Which communicator a collective's memory selects: in a world of one there is none;
// CheckNccl says why NCCL cannot run (no GPU here, or no NCCL), and a collective on
// a CUDA device's memory is a device step of the plan (NCCL), on the host's a host step.
TEST(CollectivePlan, CudaMemorySelectsNccl) {
  if (comm::World() == nullptr) {
    const auto none = comm::CommunicatorFor(Device{});
    EXPECT_EQ(none.status().code(), absl::StatusCode::kFailedPrecondition);
  }
  Device cuda;
  cuda.kind = Device::Kind::kCuda;
  EXPECT_EQ(comm::CheckNccl(Device{}).code(), absl::StatusCode::kInvalidArgument);
  const absl::Status nccl = comm::CheckNccl(cuda);
  if (!comm::LoadNccl().ok()) {
    EXPECT_EQ(nccl.code(), absl::StatusCode::kFailedPrecondition);
    EXPECT_THAT(std::string(nccl.message()), HasSubstr("NCCL is not available"));
  } else if (!CheckCudaAvailable().ok()) {
    EXPECT_EQ(nccl.code(), absl::StatusCode::kFailedPrecondition);
    EXPECT_THAT(std::string(nccl.message()), HasSubstr("NCCL needs a CUDA device"));
  } else {
    EXPECT_TRUE(nccl.ok()) << nccl;
    Device absent = cuda;
    absent.index = CudaDeviceCount();
    EXPECT_THAT(std::string(comm::CheckNccl(absent).message()), HasSubstr("does not exist"));
  }
  // The plan: host memory gives a host step; a CUDA placement (planned only where a GPU
  // is) gives a device step on that device.
  Graph g;
  Tensor x = Placeholder(g, DType::kF32, {8}, "x");
  Tensor on_host = AllReduce(x * x);
  Tensor on_gpu;
  {
    DeviceScope gpu(g, "cuda:0");
    on_gpu = AllReduce(x + x);
  }
  SessionOptions o;
  o.device = "cpu";
  const std::vector<bool> fed(g.num_nodes(), false);
  auto host_plan = BuildPlan(g, o, Device{}, {on_host}, {}, fed);
  ASSERT_TRUE(host_plan.ok()) << host_plan.status();
  for (const Step& s : (*host_plan)->steps) {
    if (s.kind == Step::Kind::kCollective) EXPECT_EQ(s.space, Space::kHost);
  }
  auto gpu_plan = BuildPlan(g, o, Device{}, {on_gpu}, {}, fed);
  if (!CheckCudaAvailable().ok()) {
    ASSERT_FALSE(gpu_plan.ok());
    EXPECT_THAT(std::string(gpu_plan.status().message()), HasSubstr("is placed on cuda:0"));
    return;
  }
  ASSERT_TRUE(gpu_plan.ok()) << gpu_plan.status();
  int device_steps = 0;
  for (const Step& s : (*gpu_plan)->steps) {
    if (s.kind != Step::Kind::kCollective) continue;
    EXPECT_EQ(s.space, Space::kDevice);
    EXPECT_EQ(s.device, cuda);
    ++device_steps;
  }
  EXPECT_EQ(device_steps, 1);
}

}  // namespace
}  // namespace braze
