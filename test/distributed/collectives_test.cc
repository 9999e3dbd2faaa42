// The collective ops in one process (a world of one; the 2-rank runs are mpi_ranks.cc):
// their shapes, identity semantics next to fused kernels, that they never join a
// cluster while the mean's Mul does, their gradients (also as built for a larger world),
// bad input, the data-parallel helpers' buckets, and NCCL's loading and its refusal
// without a GPU.
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>

#include "braze/braze.h"
#include "braze/distributed.h"
#include "device/communicator.h"
#include "distributed/dp_model.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "lower/cluster_text.h"
#include "runtime/flags.h"

namespace braze {
namespace {

using ::testing::HasSubstr;

SessionOptions Compiled() {
  SessionOptions o;
  o.device = "cpu";
  return o;
}

int CountOps(const Graph& g, OpKind op) {
  int n = 0;
  for (int i = 0; i < g.num_nodes(); ++i) n += g.node(i).op() == op;
  return n;
}

TEST(Collectives, WorldOfOneIsTheIdentityBesideFusedKernels) {
  ASSERT_EQ(WorldSize(), 1);
  for (DType dtype : {DType::kF32, DType::kF64}) {
    for (Shape shape : {Shape{7, 13}, Shape{1}, Shape{3, 5, 2}}) {
      Graph g;
      Tensor x = Placeholder(g, dtype, shape, "x");
      Tensor sum, mean, bcast, gathered;
      {
        JitScope scope(g);
        Tensor e = Exp(x) * 2.0;
        sum = AllReduce(e) + 1.0;
        mean = Square(AllReduce(e, Reduction::kMean));
        bcast = Broadcast(e) - 3.0;
        gathered = AllGather(e) * 0.5;
      }
      const HostTensor xv = HostTensor::RandomUniform(dtype, shape, 7);
      Session s(g, Compiled());
      auto out = s.Run({{x, xv}}, {sum, mean, bcast, gathered});
      ASSERT_TRUE(out.ok()) << out.status();
      Session ref(g, [] {
        SessionOptions o = Compiled();
        o.reference_only = true;
        return o;
      }());
      auto want = ref.Run({{x, xv}}, {sum, mean, bcast, gathered});
      ASSERT_TRUE(want.ok()) << want.status();
      for (int i = 0; i < 4; ++i) {
        std::string why;
        EXPECT_TRUE(AllClose((*out)[i], (*want)[i], 1e-5, 1e-6, &why)) << i << ": " << why;
      }
      // And against the arithmetic itself: e + 1.
      for (int64_t i = 0; i < xv.num_elements(); ++i) {
        EXPECT_NEAR((*out)[0].GetDouble(i), 2 * std::exp(xv.GetDouble(i)) + 1, 1e-4);
      }
      EXPECT_EQ(s.stats().collectives, 0);  // no communicator: nothing to send
    }
  }
}

TEST(Collectives, NeverJoinAClusterButTheMeansMulDoes) {
  Graph g;
  Tensor x = Placeholder(g, DType::kF32, {4, 9}, "x");
  Tensor reduced, scaled, after;
  {
    JitScope scope(g);
    Tensor e = Exp(x) + 1.0;
    reduced = AllReduce(e);
    scaled = AllReduce(e, Reduction::kMean);  // AllReduce then a Mul
    after = Sqrt(scaled) + 2.0;
  }
  ASSERT_EQ(scaled.node().op(), OpKind::kMul);
  Session s(g, Compiled());
  ASSERT_TRUE(
      s.Run({{x, HostTensor::RandomUniform(DType::kF32, {4, 9}, 3)}}, {reduced, after}).ok());
  EXPECT_EQ(s.ClusterOf(reduced), std::nullopt);
  EXPECT_EQ(s.ClusterOf(scaled.node().input(0)), std::nullopt);
  ASSERT_TRUE(s.ClusterOf(scaled).has_value());
  EXPECT_EQ(s.ClusterOf(scaled), s.ClusterOf(after));  // the Mul fused with what follows
}

// The plan dump (BRAZE_FLAGS=--dump_to) says how each collective runs.
TEST(Collectives, DumpsShowTheCollectiveSteps) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / ("braze_dp_dump_" + std::to_string(getpid()));
  fs::remove_all(dir);
  BrazeFlags flags;
  flags.dump_to = dir.string();
  SetBrazeFlagsForTesting(flags);
  {
    Graph g;
    Tensor x = Placeholder(g, DType::kF32, {5}, "x");
    Tensor y;
    {
      JitScope scope(g);
      y = AllGather(AllReduce(Exp(x), Reduction::kMean)) + 1.0;
    }
    Session s(g, Compiled());
    ASSERT_TRUE(s.Run({{x, HostTensor::RandomUniform(DType::kF32, {5}, 2)}}, {y}).ok());
  }
  SetBrazeFlagsForTesting(BrazeFlags{});
  std::string dot;
  for (const auto& entry : fs::directory_iterator(dir)) {
    if (entry.path().string().find("after_clustering.dot") == std::string::npos) continue;
    std::ifstream in(entry.path());
    std::stringstream text;
    text << in.rdbuf();
    dot = text.str();
  }
  fs::remove_all(dir);
  ASSERT_FALSE(dot.empty());
  EXPECT_THAT(dot, HasSubstr("AllReduce"));
  EXPECT_THAT(dot, HasSubstr("AllGather"));
  EXPECT_THAT(dot, HasSubstr("runs: collective"));
}

// The collectives' text form (lower/cluster_text.h) reads back to the same attributes.
TEST(Collectives, TextFormRoundTrips) {
  Graph g;
  Tensor x = Placeholder(g, DType::kF32, {3, 2}, "x");
  Tensor gathered = g.AddNode(OpKind::kAllGather, {x}, CollectiveAttrs{4, 3, 0}, "gathered");
  Tensor sent = g.AddNode(OpKind::kBroadcast, {gathered}, CollectiveAttrs{4, 3, 2}, "sent");
  ClusterSpec spec;
  spec.graph = &g;
  spec.name = "collectives";
  spec.nodes = {gathered.node_id(), sent.node_id()};
  spec.inputs = {x};
  spec.input_types = {x.type()};
  spec.outputs = {sent};
  auto text = ClusterToText(spec);
  ASSERT_TRUE(text.ok()) << text.status();
  EXPECT_THAT(*text, HasSubstr("world_size=4 rank=3 root=2"));
  auto back = ClusterFromText(*text, "test");
  ASSERT_TRUE(back.ok()) << back.status();
  const Node& b = back->graph->node(back->spec.nodes.back());
  EXPECT_EQ(b.op(), OpKind::kBroadcast);
  EXPECT_EQ(b.attrs_as<CollectiveAttrs>().root, 2);
  EXPECT_EQ(b.attrs_as<CollectiveAttrs>().rank, 3);
  EXPECT_EQ(b.output(0).shape, (Shape{12, 2}));
}

TEST(Collectives, ShapesAndBadInputNameTheNode) {
  Graph g;
  Tensor m = Placeholder(g, DType::kF32, {3, 4}, "m");
  EXPECT_EQ(AllGather(m).shape(), (Shape{3, 4}));  // a world of one
  Tensor s = Placeholder(g, DType::kF32, {}, "s");
  Tensor bad_gather = AllGather(s);
  EXPECT_THAT(std::string(bad_gather.node().status().message()), HasSubstr("scalar"));
  Tensor flags = Placeholder(g, DType::kBool, {5}, "flags");
  EXPECT_THAT(std::string(AllReduce(flags).node().status().message()), HasSubstr("bool"));
  // 16-bit floats are summed in f32 (docs/MIXED_PRECISION.md), never at 16 bits per hop;
  // they travel as their bits through Broadcast and AllGather.
  for (DType half : {DType::kBF16, DType::kF16}) {
    Tensor h = Placeholder(g, half, {2, 3}, "h");
    EXPECT_THAT(std::string(AllReduce(h).node().status().message()),
                HasSubstr("Cast to f32 first"));
    EXPECT_TRUE(Broadcast(h, 0).node().status().ok());
    EXPECT_EQ(AllGather(h).shape(), (Shape{2, 3}));
  }
  EXPECT_THAT(std::string(Broadcast(m, 1).node().status().message()),
              HasSubstr("root 1 is not a rank"));
  // A graph built for another world fails at run time, naming the node.
  Graph other;
  Tensor m2 = Placeholder(other, DType::kF32, {3, 4}, "m");
  Tensor foreign = other.AddNode(OpKind::kAllReduce, {m2}, CollectiveAttrs{2, 1, 0}, "foreign");
  ASSERT_TRUE(foreign.node().status().ok());
  EXPECT_EQ(foreign.shape(), (Shape{3, 4}));
  Session session(other, Compiled());
  auto out = session.Run({{m2, HostTensor::RandomUniform(DType::kF32, {3, 4}, 1)}}, {foreign});
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(out.status().message()),
              HasSubstr("node 'foreign' (AllReduce) was built for rank 1 of a world of 2"));
  // AllGather stacks the world's rows.
  Tensor wide = g.AddNode(OpKind::kAllGather, {m}, CollectiveAttrs{3, 2, 0});
  EXPECT_EQ(wide.shape(), (Shape{9, 4}));
}

TEST(Collectives, GradientsInAWorldOfOne) {
  Graph g;
  Tensor x = Placeholder(g, DType::kF64, {5, 3}, "x");
  const HostTensor wv = HostTensor::RandomUniform(DType::kF64, {5, 3}, 11);
  Tensor w = Const(g, wv);
  Tensor loss = Sum(AllReduce(x) * w) + Sum(Broadcast(x) * w) + Sum(AllGather(x) * w) +
                Sum(AllReduce(x, Reduction::kMean) * w);
  auto grads = Gradients({loss}, {x});
  ASSERT_TRUE(grads.ok()) << grads.status();
  Session s(g, Compiled());
  auto out = s.Run({{x, HostTensor::RandomUniform(DType::kF64, {5, 3}, 12)}}, {(*grads)[0]});
  ASSERT_TRUE(out.ok()) << out.status();
  for (int64_t i = 0; i < 15; ++i) EXPECT_NEAR((*out)[0].GetDouble(i), 4 * wv.GetDouble(i), 1e-12);
}

TEST(Collectives, GradientsAsBuiltForALargerWorld) {
  Graph g;
  Tensor x = Placeholder(g, DType::kF32, {3, 2}, "x");
  // Rank 1 of 4: AllGather's gradient is rows [3, 6) of the all-reduced dy.
  Tensor gathered = g.AddNode(OpKind::kAllGather, {x}, CollectiveAttrs{4, 1, 0});
  auto dg = Gradients({Sum(gathered)}, {x});
  ASSERT_TRUE(dg.ok()) << dg.status();
  const Node& slice = (*dg)[0].node();
  ASSERT_EQ(slice.op(), OpKind::kSlice);
  EXPECT_EQ(slice.attrs_as<SliceAttrs>().begin, (std::vector<int64_t>{3, 0}));
  EXPECT_EQ(slice.input(0).node().op(), OpKind::kAllReduce);
  EXPECT_EQ(slice.input(0).node().attrs_as<CollectiveAttrs>().world_size, 4);
  // Broadcast from root 0 seen from rank 1: the all-reduced dy times 0.
  Tensor b = g.AddNode(OpKind::kBroadcast, {x}, CollectiveAttrs{4, 1, 0});
  auto db = Gradients({Sum(b)}, {x});
  ASSERT_TRUE(db.ok()) << db.status();
  EXPECT_EQ((*db)[0].node().op(), OpKind::kMul);
  // AllReduce's gradient is an AllReduce.
  Tensor r = g.AddNode(OpKind::kAllReduce, {x}, CollectiveAttrs{4, 1, 0});
  auto dr = Gradients({Sum(r)}, {x});
  ASSERT_TRUE(dr.ok()) << dr.status();
  EXPECT_EQ((*dr)[0].node().op(), OpKind::kAllReduce);
}

TEST(DataParallel, BucketsPackGradientsInBackwardOrder) {
  Graph g;
  Tensor a = Placeholder(g, DType::kF32, {10}, "a");      // 40 bytes
  Tensor b = Placeholder(g, DType::kF32, {10, 10}, "b");  // 400
  Tensor c = Placeholder(g, DType::kF32, {1000}, "c");    // 4000
  Tensor d = Placeholder(g, DType::kF64, {3}, "d");       // another dtype
  auto avg = AverageGradients({a, b, c, d}, 500);
  ASSERT_TRUE(avg.ok()) << avg.status();
  // Backward order d, c, b, a: [d] (f64), [c] (over 500 alone), [b, a].
  EXPECT_EQ(CountOps(g, OpKind::kAllReduce), 3);
  for (int i = 0; i < 4; ++i)
    EXPECT_EQ((*avg)[i].shape(), (std::vector<Tensor>{a, b, c, d})[i].shape());
  Graph g2;
  Tensor p = Placeholder(g2, DType::kF32, {7}, "p");
  Tensor q = Placeholder(g2, DType::kF32, {2, 3}, "q");
  auto one = AverageGradients({p, q});
  ASSERT_TRUE(one.ok());
  EXPECT_EQ(CountOps(g2, OpKind::kAllReduce), 1);  // 25 MB holds both
  // The values come back in place (a world of one: the mean is the value).
  Session s(g2, Compiled());
  const HostTensor pv = HostTensor::RandomUniform(DType::kF32, {7}, 1);
  const HostTensor qv = HostTensor::RandomUniform(DType::kF32, {2, 3}, 2);
  auto out = s.Run({{p, pv}, {q, qv}}, {(*one)[0], (*one)[1]});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_TRUE(AllClose((*out)[0], pv, 0, 0));
  EXPECT_TRUE(AllClose((*out)[1], qv, 0, 0));
  EXPECT_EQ(AverageGradients({}, 10).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(AverageGradients({p}, 0).status().code(), absl::StatusCode::kInvalidArgument);
  Tensor flags = Placeholder(g2, DType::kBool, {2}, "flags");
  EXPECT_EQ(AverageGradients({flags}).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(BroadcastVariables({p}).status().code(), absl::StatusCode::kInvalidArgument);
}

// In a world of one, Minimize with DataParallel trains exactly as without.
TEST(DataParallel, WorldOfOneTrainsAsWithout) {
  std::vector<double> losses[2];
  for (int dp = 0; dp < 2; ++dp) {
    Graph g;
    dp_test::Params p = dp_test::MakeParams(g, 5);
    Tensor x = Placeholder(g, DType::kF32, {6, dp_test::kFeatures}, "x");
    Tensor labels = Placeholder(g, DType::kI32, {6}, "labels");
    Tensor loss = dp_test::Loss(p, x, labels);
    Optimizer opt = Optimizer::Adam(0.05);
    if (dp) opt = opt.WithDataParallel(64);
    auto train = Minimize(opt, loss, p.all());
    ASSERT_TRUE(train.ok()) << train.status();
    auto sync = BroadcastVariables(p.all());
    ASSERT_TRUE(sync.ok()) << sync.status();
    Session s(g, Compiled());
    ASSERT_TRUE(s.Run({}, {}, *sync).ok());
    for (int step = 0; step < 3; ++step) {
      dp_test::Batch b = dp_test::GlobalBatch(6, step);
      auto out = s.Run({{x, b.x}, {labels, b.labels}}, {loss}, *train);
      ASSERT_TRUE(out.ok()) << out.status();
      losses[dp].push_back((*out)[0].GetDouble(0));
    }
  }
  EXPECT_EQ(losses[0], losses[1]);
}

TEST(Nccl, LoadsAtRunTimeAndRefusesWithoutAGpu) {
  auto version = comm::LoadNccl();
  if (!version.ok()) GTEST_SKIP() << "NCCL is not installed here: " << version.status();
  EXPECT_GE(*version, 20000) << "NCCL 2.x reports MAJOR*10000 + MINOR*100 + PATCH";
  // A bootstrap of one rank that never needs to send (rank 0 keeps its own id).
  class Loopback : public comm::Communicator {
   public:
    int rank() const override { return 0; }
    int size() const override { return 1; }
    const char* engine() const override { return "loopback"; }
    absl::Status AllReduceSum(const void* in, void* out, int64_t n, DType d) override {
      std::memmove(out, in, n * SizeOf(d));
      return absl::OkStatus();
    }
    absl::Status Broadcast(void*, int64_t, DType, int) override { return absl::OkStatus(); }
    absl::Status AllGather(const void* in, int64_t n, DType d, void* out) override {
      std::memcpy(out, in, n * SizeOf(d));
      return absl::OkStatus();
    }
    absl::Status Barrier() override { return absl::OkStatus(); }
    bool failed() const override { return false; }
  } loopback;
  EXPECT_EQ(comm::CreateNcclCommunicator(loopback, Device{}, 60).status().code(),
            absl::StatusCode::kInvalidArgument);  // NCCL is for CUDA devices
  Device cuda;
  cuda.kind = Device::Kind::kCuda;
  auto nccl = comm::CreateNcclCommunicator(loopback, cuda, 60);
  if (!CheckCudaAvailable().ok()) {
    ASSERT_FALSE(nccl.ok());
    EXPECT_EQ(nccl.status().code(), absl::StatusCode::kFailedPrecondition);
    EXPECT_THAT(std::string(nccl.status().message()), HasSubstr("NCCL needs a CUDA device"));
    return;
  }
  ASSERT_TRUE(nccl.ok()) << nccl.status();
  EXPECT_EQ((*nccl)->size(), 1);
}

TEST(Distributed, InitOutsideMpirunIsAWorldOfOne) {
  if (comm::LaunchedByMpi()) GTEST_SKIP() << "run under an MPI launcher";
  DistributedOptions bad;
  bad.timeout_seconds = 0;
  EXPECT_EQ(InitDistributed(bad).code(), absl::StatusCode::kInvalidArgument);
  DistributedOptions bad_pieces;
  bad_pieces.allreduce_piece_bytes = -1;
  const absl::Status refused = InitDistributed(bad_pieces);
  EXPECT_EQ(refused.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(refused.message()), HasSubstr("allreduce_piece_bytes"));
  ASSERT_TRUE(InitDistributed().ok());
  EXPECT_EQ(InitDistributed().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(WorldSize(), 1);
  EXPECT_EQ(WorldRank(), 0);
  EXPECT_EQ(comm::World(), nullptr);
  EXPECT_TRUE(FinalizeDistributed().ok());
}

}  // namespace
}  // namespace braze
