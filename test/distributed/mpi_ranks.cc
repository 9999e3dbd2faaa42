// Run by ctest under `mpirun -np 2` (test/CMakeLists.txt): the collectives between two
// real processes on random inputs, and data-parallel training whose per-step losses
// match one process's at the same global batch, through a Session and through a
// Function; the communication bars on the timeline. Its own main joins the job.
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <set>
#include <sstream>
#include <string>

#include "braze/braze.h"
#include "braze/distributed.h"
#include "device/communicator.h"
#include "distributed/dp_model.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace braze {
namespace {

constexpr int64_t kGlobalBatch = 12;  // 6 rows per rank
constexpr int kSteps = 4;

SessionOptions Compiled() {
  SessionOptions o;
  o.device = "cpu";
  return o;
}

// Rank r's input of a collective test: the same on every rank for a given r.
HostTensor InputOf(int rank, DType dtype, const Shape& shape) {
  return dtype == DType::kI32 ? HostTensor::RandomUniform(dtype, shape, 100 + rank, -50, 50)
                              : HostTensor::RandomUniform(dtype, shape, 100 + rank);
}

TEST(Mpi, CollectivesBetweenRanks) {
  const int n = WorldSize(), me = WorldRank();
  ASSERT_GE(n, 2) << "run under mpirun -np 2";
  for (DType dtype : {DType::kF32, DType::kF64, DType::kI32}) {
    for (Shape shape : {Shape{7, 5}, Shape{1}, Shape{3, 1, 11}}) {
      Graph g;
      Tensor x = Placeholder(g, dtype, shape, "x");
      Tensor sum, bcast, gathered;
      {
        JitScope scope(g);
        Tensor y = x + x;  // compiled before and after the collectives
        sum = AllReduce(y) - x;
        bcast = Broadcast(y, n - 1) + x;
        gathered = AllGather(y);
      }
      Session s(g, Compiled());
      auto out = s.Run({{x, InputOf(me, dtype, shape)}}, {sum, bcast, gathered});
      ASSERT_TRUE(out.ok()) << out.status();
      EXPECT_EQ(s.stats().collectives, 3);
      EXPECT_EQ(s.stats().collectives_in_place, 0);  // y has three readers
      const HostTensor mine = InputOf(me, dtype, shape);
      const int64_t count = mine.num_elements();
      for (int64_t i = 0; i < count; ++i) {
        double total = 0;
        for (int r = 0; r < n; ++r) total += 2 * InputOf(r, dtype, shape).GetDouble(i);
        EXPECT_NEAR((*out)[0].GetDouble(i), total - mine.GetDouble(i), 1e-5);
        EXPECT_NEAR((*out)[1].GetDouble(i),
                    2 * InputOf(n - 1, dtype, shape).GetDouble(i) + mine.GetDouble(i), 1e-5);
        for (int r = 0; r < n; ++r) {
          EXPECT_NEAR((*out)[2].GetDouble(r * count + i), 2 * InputOf(r, dtype, shape).GetDouble(i),
                      1e-5);
        }
      }
    }
  }
}

// An AllReduce or Broadcast whose input dies there (a compiled step's output, read by
// nothing else, not fetched) works in place on that buffer; the results are the same as
// out of place, run after run with new inputs. A value also fetched, or read by another
// op too, is left intact (the collective writes a buffer of its own).
TEST(Mpi, CollectivesWorkInPlaceOnlyOnDeadInputs) {
  const int n = WorldSize(), me = WorldRank();
  ASSERT_GE(n, 2) << "run under mpirun -np 2";
  for (DType dtype : {DType::kF32, DType::kF64, DType::kI32}) {
    for (Shape shape : {Shape{7, 5}, Shape{1}, Shape{3, 1, 11}, Shape{1031}}) {
      Graph g;
      Tensor x = Placeholder(g, dtype, shape, "x");
      Tensor sum, bcast, kept, sum_kept, shared;
      {
        JitScope scope(g);
        sum = AllReduce(x * x);       // dies at the AllReduce: in place
        bcast = Broadcast(x + x, 0);  // dies at the Broadcast: in place
        kept = x - x * x;             // fetched: not in place
        sum_kept = AllReduce(kept);
        Tensor twice = x + x + x;  // read by the AllReduce and the Add: not in place
        shared = AllReduce(twice) + twice;
      }
      Session s(g, Compiled());
      for (int run = 0; run < 2; ++run) {
        const HostTensor mine = InputOf(me + 10 * run, dtype, shape);
        auto out = s.Run({{x, mine}}, {sum, bcast, kept, sum_kept, shared});
        ASSERT_TRUE(out.ok()) << out.status();
        const int64_t count = mine.num_elements();
        for (int64_t i = 0; i < count; ++i) {
          double squares = 0, kepts = 0, triples = 0;
          for (int r = 0; r < n; ++r) {
            const double v = InputOf(r + 10 * run, dtype, shape).GetDouble(i);
            squares += v * v;
            kepts += v - v * v;
            triples += 3 * v;
          }
          const double v = mine.GetDouble(i);
          const double root = InputOf(10 * run, dtype, shape).GetDouble(i);
          const double tol = 1e-4 * (1 + std::abs(squares));
          EXPECT_NEAR((*out)[0].GetDouble(i), squares, tol) << i;
          EXPECT_NEAR((*out)[1].GetDouble(i), 2 * root, 1e-5) << i;
          EXPECT_NEAR((*out)[2].GetDouble(i), v - v * v, tol) << i;
          EXPECT_NEAR((*out)[3].GetDouble(i), kepts, tol) << i;
          EXPECT_NEAR((*out)[4].GetDouble(i), triples + 3 * v, tol) << i;
        }
      }
      EXPECT_EQ(s.stats().collectives, 8);
      EXPECT_EQ(s.stats().collectives_in_place, 4);  // sum and bcast, in both runs
    }
  }
}

// The output of an Assign, AssignAdd or AssignSub is also the variable's new value (and
// Assign's is its value's own buffer): an AllReduce of it that nothing else reads is not
// done in place, or the variable took the sum over the ranks (and so did the value
// Assign passed on). Each variable gets its own rank's update; the sums are the ranks'.
TEST(Mpi, ACollectiveOfAStateOpsOutputLeavesTheVariablesUpdate) {
  const int n = WorldSize(), me = WorldRank();
  ASSERT_GE(n, 2) << "run under mpirun -np 2";
  const Shape shape{3, 5};
  Graph g;
  Tensor x = Placeholder(g, DType::kF32, shape, "x");
  Tensor counter = Variable(g, HostTensor::Filled(DType::kF32, shape, 1.0), "counter");
  Tensor lower = Variable(g, HostTensor::Filled(DType::kF32, shape, 0.0), "lower");
  Tensor set = Variable(g, HostTensor::Filled(DType::kF32, shape, 0.0), "set");
  Tensor x2;
  {
    JitScope scope(g);
    x2 = x * 2.0;
  }
  Tensor added = AllReduce(AssignAdd(counter, x));
  Tensor subtracted = AllReduce(AssignSub(lower, x));
  Tensor assigned = AllReduce(Assign(set, x2));
  Tensor doubled;
  {
    JitScope scope(g);
    doubled = x2 + 0.0;  // reads Assign's value after the collective
  }
  Session s(g, Compiled());
  const HostTensor mine = InputOf(me, DType::kF32, shape);
  auto out = s.Run({{x, mine}}, {added, subtracted, assigned, doubled});
  ASSERT_TRUE(out.ok()) << out.status();
  auto c = s.VariableValue(counter), l = s.VariableValue(lower), a = s.VariableValue(set);
  ASSERT_TRUE(c.ok() && l.ok() && a.ok());
  for (int64_t i = 0; i < mine.num_elements(); ++i) {
    double total = 0;
    for (int r = 0; r < n; ++r) total += InputOf(r, DType::kF32, shape).GetDouble(i);
    const double v = mine.GetDouble(i);
    EXPECT_NEAR(c->GetDouble(i), 1 + v, 1e-5) << i;
    EXPECT_NEAR(l->GetDouble(i), -v, 1e-5) << i;
    EXPECT_NEAR(a->GetDouble(i), 2 * v, 1e-5) << i;
    EXPECT_NEAR((*out)[0].GetDouble(i), n + total, 1e-4) << i;
    EXPECT_NEAR((*out)[1].GetDouble(i), -total, 1e-4) << i;
    EXPECT_NEAR((*out)[2].GetDouble(i), 2 * total, 1e-4) << i;
    EXPECT_NEAR((*out)[3].GetDouble(i), 2 * v, 1e-5) << i;
  }
  EXPECT_EQ(s.stats().collectives, 3);
  EXPECT_EQ(s.stats().collectives_in_place, 0);
}

// A dynamic dim (-1) takes whatever each rank feeds: ranks that feed other sizes get
// InvalidArgument naming the node and each rank's size (MPI given other counts crashed
// the process), every rank alike, and the job goes on: the same sizes then work.
TEST(Mpi, ACollectiveOfDynamicShapesRefusesRanksThatDisagree) {
  const int n = WorldSize(), me = WorldRank();
  ASSERT_GE(n, 2) << "run under mpirun -np 2";
  Graph g;
  Tensor x = Placeholder(g, DType::kF32, {-1, 3}, "x");
  Tensor sum = AllReduce(x);
  Tensor all = AllGather(x);
  Tensor root = Broadcast(x, 0);
  Session s(g, Compiled());
  for (Tensor fetch : {sum, all, root}) {
    auto out = s.Run({{x, InputOf(me, DType::kF32, {2 + me, 3})}}, {fetch});
    ASSERT_FALSE(out.ok());
    EXPECT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument) << out.status();
    EXPECT_THAT(std::string(out.status().message()),
                ::testing::AllOf(::testing::HasSubstr(OpName(fetch.node().op())),
                                 ::testing::HasSubstr("rank 0: 6, rank 1: 9")));
  }
  auto out = s.Run({{x, InputOf(me, DType::kF32, {4, 3})}}, {sum, all, root});
  ASSERT_TRUE(out.ok()) << out.status();
  for (int64_t i = 0; i < 12; ++i) {
    double total = 0;
    for (int r = 0; r < n; ++r) total += InputOf(r, DType::kF32, {4, 3}).GetDouble(i);
    EXPECT_NEAR((*out)[0].GetDouble(i), total, 1e-5) << i;
    EXPECT_EQ((*out)[1].GetDouble(12 + i), InputOf(1, DType::kF32, {4, 3}).GetDouble(i)) << i;
    EXPECT_EQ((*out)[2].GetDouble(i), InputOf(0, DType::kF32, {4, 3}).GetDouble(i)) << i;
  }
}

// A collective whose result the next step reads runs on the calling thread (nothing
// could overlap it: no hand-off); one with an independent kernel after it runs on the
// communication thread beside that kernel. The same sums either way.
TEST(Mpi, CollectivesRunHereOnlyWithNothingToOverlap) {
  const int n = WorldSize(), me = WorldRank();
  const Shape shape{257};
  Graph g;
  Tensor x = Placeholder(g, DType::kF32, shape, "x");
  Tensor alone, overlapped, independent;
  {
    JitScope scope(g);
    alone = AllReduce(x * x);
    overlapped = AllReduce(x + x);
    independent = Exp(x) * x;
  }
  Session s(g, Compiled());
  const HostTensor mine = InputOf(me, DType::kF32, shape);
  auto first = s.Run({{x, mine}}, {alone});
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_EQ(s.stats().collectives_run_here, 1);
  auto second = s.Run({{x, mine}}, {overlapped, independent});
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_EQ(s.stats().collectives, 2);
  EXPECT_EQ(s.stats().collectives_run_here, 1);  // the second overlapped the Exp
  for (int64_t i = 0; i < mine.num_elements(); ++i) {
    double squares = 0, doubles = 0;
    for (int r = 0; r < n; ++r) {
      const double v = InputOf(r, DType::kF32, shape).GetDouble(i);
      squares += v * v;
      doubles += 2 * v;
    }
    EXPECT_NEAR((*first)[0].GetDouble(i), squares, 1e-5 * (1 + squares)) << i;
    EXPECT_NEAR((*second)[0].GetDouble(i), doubles, 1e-5 * (1 + std::abs(doubles))) << i;
  }
}

// An all-reduce larger than DistributedOptions::allreduce_piece_bytes goes as pieces,
// two in flight (a communicator of its own here, with pieces of 12 bytes: 3 f32 or i32
// elements, 1 f64): counts of 0, 1 piece, one piece and a remainder, whole pieces, many
// pieces; in place and out of place; against the exact sums of every rank's random input
// and beside the job's communicator (one call each: its pieces are 4 MiB).
TEST(Mpi, AllReduceInPiecesMatchesOneCall) {
  const int n = WorldSize(), me = WorldRank();
  ASSERT_GE(n, 2) << "run under mpirun -np 2";
  auto pieces = comm::CreateMpiCommunicator(/*timeout_seconds=*/60, /*allreduce_piece_bytes=*/12);
  ASSERT_TRUE(pieces.ok()) << pieces.status();
  comm::Communicator* whole = comm::World();
  ASSERT_NE(whole, nullptr);
  for (DType dtype : {DType::kF32, DType::kF64, DType::kI32}) {
    for (int64_t count : {0, 1, 2, 3, 5, 7, 13, 1031}) {
      const HostTensor mine = InputOf(me + 20, dtype, {count});
      HostTensor in_place = mine, out_of_place(dtype, {count}), one_call = mine;
      ASSERT_TRUE(
          (*pieces)->AllReduceSum(in_place.raw_data(), in_place.raw_data(), count, dtype).ok());
      ASSERT_TRUE(
          (*pieces)->AllReduceSum(mine.raw_data(), out_of_place.raw_data(), count, dtype).ok());
      ASSERT_TRUE(whole->AllReduceSum(one_call.raw_data(), one_call.raw_data(), count, dtype).ok());
      for (int64_t i = 0; i < count; ++i) {
        double want = 0;
        for (int r = 0; r < n; ++r) want += InputOf(r + 20, dtype, {count}).GetDouble(i);
        const double tol = 1e-5 * (1 + std::abs(want));
        EXPECT_NEAR(in_place.GetDouble(i), want, tol)
            << DTypeName(dtype) << " " << count << " " << i;
        EXPECT_NEAR(out_of_place.GetDouble(i), want, tol) << DTypeName(dtype) << " " << count;
        EXPECT_NEAR(one_call.GetDouble(i), want, tol) << DTypeName(dtype) << " " << count;
      }
      if (count > 0) {
        EXPECT_EQ(mine.GetDouble(count - 1), InputOf(me + 20, dtype, {count}).GetDouble(count - 1))
            << "out of place must leave the input";
      }
    }
  }
}

// Collectives of values on a CUDA device run on NCCL there: the values stay on the device
// (only the fetches leave it). Without a GPU the graph cannot be placed there: every rank
// gets the same Status naming the node, and none waits for the other. With a GPU but
// without NCCL, every rank gets NCCL's reason, naming the node.
TEST(Mpi, CollectivesOnCudaMemoryRunOnNccl) {
  const int n = WorldSize(), me = WorldRank();
  const Shape shape{5, 3};
  // One GPU per rank (NCCL refuses two ranks of a communicator on one device).
  const std::string device = "cuda:" + std::to_string(me);
  if (CheckCudaAvailable().ok() && CudaDeviceCount() < n) {
    GTEST_SKIP() << CudaDeviceCount() << " CUDA devices for " << n << " ranks";
  }
  Graph g;
  Tensor x = Placeholder(g, DType::kF32, shape, "x");
  Tensor sum, bcast, gathered;
  {
    DeviceScope gpu(g, device);
    sum = AllReduce(x * x);
    bcast = Broadcast(x + x, 1);
    gathered = AllGather(x * 3.0f);
  }
  Session s(g, Compiled());
  const HostTensor mine = InputOf(me, DType::kF32, shape);
  auto out = s.Run({{x, mine}}, {sum, bcast, gathered});
  if (!CheckCudaAvailable().ok()) {
    ASSERT_FALSE(out.ok());
    EXPECT_EQ(out.status().code(), absl::StatusCode::kFailedPrecondition) << out.status();
    EXPECT_THAT(std::string(out.status().message()), ::testing::HasSubstr("placed on " + device));
    GTEST_SKIP() << "no CUDA device: checked the refusal only; " << out.status();
  }
  if (!comm::CheckNccl(Device{Device::Kind::kCuda, me}).ok()) {
    ASSERT_FALSE(out.ok());
    EXPECT_EQ(out.status().code(), absl::StatusCode::kFailedPrecondition) << out.status();
    EXPECT_THAT(std::string(out.status().message()), ::testing::HasSubstr("NCCL"));
    EXPECT_THAT(std::string(out.status().message()), ::testing::HasSubstr("AllReduce"));
    GTEST_SKIP() << "a GPU without NCCL: checked the refusal only; " << out.status();
  }
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(s.stats().collectives_on_device, 3);
  EXPECT_EQ(s.stats().device_to_host_copies, 3);  // the fetches, nothing else
  for (int64_t i = 0; i < mine.num_elements(); ++i) {
    double squares = 0;
    for (int r = 0; r < n; ++r) {
      const double v = InputOf(r, DType::kF32, shape).GetDouble(i);
      squares += v * v;
      EXPECT_NEAR((*out)[2].GetDouble(r * mine.num_elements() + i), 3 * v, 1e-5);
    }
    EXPECT_NEAR((*out)[0].GetDouble(i), squares, 1e-5 * (1 + squares)) << i;
    EXPECT_NEAR((*out)[1].GetDouble(i), 2 * InputOf(1, DType::kF32, shape).GetDouble(i), 1e-5);
  }
}

// One process training on the whole global batch (no collectives in its graph), on the
// reference kernels (the data-parallel runs compile theirs: the comparison checks both).
std::vector<double> ComputeOneProcessLosses() {
  Graph g;
  dp_test::Params p = dp_test::MakeParams(g, /*seed=*/1);  // rank 0's initial values
  Tensor x = Placeholder(g, DType::kF32, {kGlobalBatch, dp_test::kFeatures}, "x");
  Tensor labels = Placeholder(g, DType::kI32, {kGlobalBatch}, "labels");
  Tensor loss = dp_test::Loss(p, x, labels);
  auto train = Minimize(Optimizer::Adam(0.05), loss, p.all());
  std::vector<double> losses;
  if (!train.ok()) return losses;
  SessionOptions o = Compiled();
  o.reference_only = true;
  Session s(g, o);
  for (int step = 0; step < kSteps; ++step) {
    dp_test::Batch b = dp_test::GlobalBatch(kGlobalBatch, step);
    auto out = s.Run({{x, b.x}, {labels, b.labels}}, {loss}, *train);
    if (!out.ok()) return {};
    losses.push_back((*out)[0].GetDouble(0));
  }
  return losses;
}

const std::vector<double>& OneProcessLosses() {
  static const std::vector<double> losses = ComputeOneProcessLosses();
  return losses;
}

// Each rank trains on its rows of the global batch; the loss fetched is the mean of the
// ranks' losses (an AllReduce), which is the global batch's mean loss.
TEST(Mpi, DataParallelLossesMatchOneProcessSession) {
  const int n = WorldSize(), me = WorldRank();
  const int64_t local = kGlobalBatch / n;
  Graph g;
  dp_test::Params p = dp_test::MakeParams(g, /*seed=*/1 + 7 * me);  // differ until broadcast
  Tensor x = Placeholder(g, DType::kF32, {local, dp_test::kFeatures}, "x");
  Tensor labels = Placeholder(g, DType::kI32, {local}, "labels");
  Tensor loss = dp_test::Loss(p, x, labels);
  Tensor global_loss = AllReduce(loss, Reduction::kMean);
  // Buckets of 400 bytes, in backward order: b2 + w2 (20 + 340 bytes), b1 (68: 428 would
  // not fit), w1 (884 bytes, alone).
  auto train = Minimize(Optimizer::Adam(0.05).WithDataParallel(400), loss, p.all());
  ASSERT_TRUE(train.ok()) << train.status();
  auto sync = BroadcastVariables(p.all());
  ASSERT_TRUE(sync.ok()) << sync.status();
  Session s(g, Compiled());
  ASSERT_TRUE(s.Run({}, {}, *sync).ok());
  const std::vector<double> want = OneProcessLosses();
  ASSERT_EQ(want.size(), static_cast<size_t>(kSteps));
  s.ResetStats();
  for (int step = 0; step < kSteps; ++step) {
    dp_test::Batch shard =
        dp_test::Shard(dp_test::GlobalBatch(kGlobalBatch, step), me * local, local);
    auto out = s.Run({{x, shard.x}, {labels, shard.labels}}, {global_loss}, *train);
    ASSERT_TRUE(out.ok()) << out.status();
    EXPECT_NEAR((*out)[0].GetDouble(0), want[step], 1e-5 * (1 + std::abs(want[step])))
        << "step " << step;
  }
  // Per step: the loss's all-reduce and three gradient buckets, every one in place: the
  // buckets (a concatenation or a reshape of gradients) and the loss are read by nothing
  // else (the loss's gradient does not read its value).
  EXPECT_EQ(s.stats().collectives, 4 * kSteps);
  EXPECT_EQ(s.stats().collectives_in_place, 4 * kSteps);
}

TEST(Mpi, DataParallelLossesMatchOneProcessFunction) {
  const int n = WorldSize(), me = WorldRank();
  const int64_t local = kGlobalBatch / n;
  Graph g;
  dp_test::Params p = dp_test::MakeParams(g, /*seed=*/1 + 7 * me);
  {  // rank 0's initial values, by a Function whose body only assigns
    FunctionOptions o;
    o.graph = &g;
    o.name = "broadcast";
    Function broadcast(
        [&](Graph&, const std::vector<Tensor>&) -> std::vector<Tensor> {
          auto assigns = BroadcastVariables(p.all());
          if (!assigns.ok()) return {};
          return {assigns->front()};
        },
        o);
    auto done = broadcast({});
    ASSERT_TRUE(done.ok()) << done.status();
    auto w1 = ReadVariable(p.w1);
    ASSERT_TRUE(w1.ok()) << w1.status();
    Graph g0;
    EXPECT_TRUE(AllClose(
        *w1, *dp_test::MakeParams(g0, 1).w1.node().attrs_as<VariableAttrs>().initial_value, 0, 0));
  }
  FunctionOptions o;
  o.graph = &g;
  o.name = "train_step";
  o.jit_compile = true;
  o.session = Compiled();
  o.input_signature =
      std::vector<TensorSpec>{{DType::kF32, {-1, dp_test::kFeatures}}, {DType::kI32, {-1}}};
  Function step(
      [&](Graph&, const std::vector<Tensor>& args) -> std::vector<Tensor> {
        Tensor loss = dp_test::Loss(p, args[0], args[1]);
        auto train = Minimize(Optimizer::Adam(0.05).WithDataParallel(400), loss, p.all());
        if (!train.ok()) return {};
        return {AllReduce(loss, Reduction::kMean)};
      },
      o);
  const std::vector<double> want = OneProcessLosses();
  ASSERT_EQ(want.size(), static_cast<size_t>(kSteps));
  for (int s = 0; s < kSteps; ++s) {
    dp_test::Batch shard = dp_test::Shard(dp_test::GlobalBatch(kGlobalBatch, s), me * local, local);
    auto out = step({shard.x, shard.labels});
    ASSERT_TRUE(out.ok()) << out.status();
    ASSERT_EQ(out->size(), 1u);
    EXPECT_NEAR((*out)[0].GetDouble(0), want[s], 1e-5 * (1 + std::abs(want[s]))) << "step " << s;
  }
  EXPECT_EQ(step.tracing_count(), 1);
}

// The communication runs on a thread of its own: its bars ("collective") sit on another
// row of the timeline than the kernels' ("op": this session compiles op by op).
TEST(Mpi, TimelineShowsCollectivesOnTheCommunicationThread) {
  const int me = WorldRank();
  Graph g;
  dp_test::Params p = dp_test::MakeParams(g, 1);
  Tensor x = Placeholder(g, DType::kF32, {6, dp_test::kFeatures}, "x");
  Tensor labels = Placeholder(g, DType::kI32, {6}, "labels");
  Tensor loss = dp_test::Loss(p, x, labels);
  auto train = Minimize(Optimizer::Sgd(0.1).WithDataParallel(400), loss, p.all());
  ASSERT_TRUE(train.ok());
  Session s(g, Compiled());
  dp_test::Batch b = dp_test::GlobalBatch(6, 0);
  ASSERT_TRUE(s.Run({{x, b.x}, {labels, b.labels}}, {loss}, *train).ok());  // compiles
  const std::string path = ::testing::TempDir() + "dp_timeline_" + std::to_string(me) + ".json";
  ASSERT_TRUE(StartTimeline(path).ok());
  // Several runs (as many on every rank: their collectives pair up). Bars of calls the
  // executor made itself (it needed a bucket the communication thread had not started)
  // sit on the communication row too (ir/timeline.cc), so the rows do not depend on which
  // thread won that race.
  for (int run = 0; run < 5; ++run) {
    ASSERT_TRUE(s.Run({{x, b.x}, {labels, b.labels}}, {loss}, *train).ok());
  }
  ASSERT_TRUE(StopTimeline().ok());
  EXPECT_GT(s.stats().collectives, s.stats().collectives_run_here);  // some were handed off
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  const std::string json = text.str();
  auto tids_of = [&](const std::string& cat) {
    std::set<std::string> tids;
    for (size_t at = json.find("\"cat\":\"" + cat + "\""); at != std::string::npos;
         at = json.find("\"cat\":\"" + cat + "\"", at + 1)) {
      const size_t tid = json.find("\"tid\":", at);
      tids.insert(json.substr(tid, json.find_first_of(",}", tid) - tid));
    }
    return tids;
  };
  const std::set<std::string> comm_tids = tids_of("collective"), kernel_tids = tids_of("op");
  ASSERT_FALSE(comm_tids.empty()) << json;
  ASSERT_FALSE(kernel_tids.empty()) << json;
  bool apart = false;
  for (const std::string& t : comm_tids) apart = apart || kernel_tids.count(t) == 0;
  EXPECT_TRUE(apart) << "no collective bar off the kernels' row";
}

}  // namespace
}  // namespace braze

// This process's rank as the launcher announced it (before InitDistributed), or -1.
int LauncherRank() {
  for (const char* var : {"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK"}) {
    const char* v = std::getenv(var);
    if (v != nullptr && *v != '\0') return std::atoi(v);
  }
  return -1;
}

// After FinalizeDistributed a collective and InitDistributed are refused with a Status
// saying so: Open MPI aborted the process on either (an MPI call after MPI_Finalize).
// 0 when they are.
int AfterFinalizeIsRefused(const braze::DistributedOptions& options) {
  using namespace braze;
  Graph g;
  Tensor x = Placeholder(g, DType::kF32, {5}, "x");
  Tensor total = AllReduce(x);
  Session s(g, Compiled());
  auto run = s.Run({{x, HostTensor::Filled(DType::kF32, {5}, 1.0)}}, {total});
  const absl::Status init = InitDistributed(options);
  for (const absl::Status& st : {run.status(), init}) {
    if (st.code() != absl::StatusCode::kFailedPrecondition ||
        st.message().find("FinalizeDistributed was called") == absl::string_view::npos) {
      std::fprintf(stderr, "rank %d: after FinalizeDistributed: %s\n", LauncherRank(),
                   st.ToString().c_str());
      return 1;
    }
  }
  return 0;
}

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  braze::DistributedOptions options;
  options.timeout_seconds = 60;  // a rank that failed an assertion must not hang the other
  // Ranks that pass different DistributedOptions::allreduce_piece_bytes would cut an
  // all-reduce into different numbers of pieces: every rank is refused, and stays out of
  // the job (the InitDistributed below then joins it).
  braze::DistributedOptions mismatched = options;
  mismatched.allreduce_piece_bytes = (int64_t{4} << 20) + LauncherRank();
  const absl::Status refused = braze::InitDistributed(mismatched);
  if (refused.code() != absl::StatusCode::kInvalidArgument ||
      refused.message().find("allreduce_piece_bytes") == absl::string_view::npos ||
      braze::WorldSize() != 1) {
    std::fprintf(stderr, "rank %d: mismatched piece sizes were not refused: %s\n", LauncherRank(),
                 refused.ToString().c_str());
    return 1;
  }
  if (absl::Status s = braze::InitDistributed(options); !s.ok()) {
    std::fprintf(stderr, "InitDistributed: %s\n", s.ToString().c_str());
    return 1;
  }
  // Only rank 0 prints gtest's progress; every rank's failures still fail the job.
  if (braze::WorldRank() != 0) {
    delete ::testing::UnitTest::GetInstance()->listeners().Release(
        ::testing::UnitTest::GetInstance()->listeners().default_result_printer());
  }
  const int rc = RUN_ALL_TESTS();
  if (absl::Status s = braze::FinalizeDistributed(); !s.ok()) return 1;
  return rc != 0 ? rc : AfterFinalizeIsRefused(options);
}
