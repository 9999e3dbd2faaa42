// The Remat plan stage (runtime/remat.h): a cluster step recomputes the cheap
// elementwise values it reads from another cluster when their leaves cost no more
// bytes; it never copies a cone that reads a Variable or whose leaves cost more; the
// producing step stops writing what no step reads; and a session's results (compiled,
// with and without the stage, and with odd extents) match the reference kernels.
#include "runtime/remat.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "braze/gradients.h"
#include "braze/jit_scope.h"
#include "braze/ops.h"
#include "braze/optimizers.h"
#include "braze/session.h"
#include "common/reference_check.h"
#include "device/features.h"
#include "runtime/plan.h"

namespace braze {
namespace {

SessionOptions CpuOptions(bool remat = true) {
  SessionOptions o;
  o.device = "cpu";
  o.rematerialize = remat;
  return o;
}

absl::StatusOr<std::unique_ptr<const Plan>> Build(const Graph& g, const SessionOptions& options,
                                                  const std::vector<Tensor>& fetches) {
  absl::StatusOr<Device> device = device::ResolveSessionDevice(options.device);
  if (!device.ok()) return device.status();
  return BuildPlan(g, options, *device, fetches, {}, std::vector<bool>(g.num_nodes(), false));
}

bool Contains(const std::vector<Tensor>& values, const Tensor& t) {
  return std::find(values.begin(), values.end(), t) != values.end();
}
bool Contains(const std::vector<int>& ids, int id) {
  return std::find(ids.begin(), ids.end(), id) != ids.end();
}

// The cluster step holding `t`'s node first (its original step).
const Step* OwnerOf(const Plan& p, const Tensor& t) {
  for (const Step& s : p.steps) {
    if (s.kind == Step::Kind::kCluster && Contains(s.outputs, t)) return &s;
  }
  for (const Step& s : p.steps) {
    if (s.kind == Step::Kind::kCluster && Contains(s.nodes, t.node_id())) return &s;
  }
  return nullptr;
}

// Two clusters (one matmul each): the first computes a = x w1 and the elementwise
// s = sigmoid(a), t = 3 s; the second reads t (its matmul's operand), s and a.
struct TwoClusters {
  Graph g;
  Tensor x, w1, w2, a, s, t, y;
  explicit TwoClusters(int64_t m = 37, int64_t k = 29, int64_t n = 31) {
    x = Placeholder(g, DType::kF32, {m, k}, "x");
    w1 = Const(g, HostTensor::RandomNormal(DType::kF32, {k, k}, 7));
    w2 = Const(g, HostTensor::RandomNormal(DType::kF32, {k, n}, 8));
    JitScope scope(g);
    a = MatMul(x, w1);
    s = Sigmoid(a);
    t = s * 3.0;
    Tensor u = MatMul(t, w2);
    y = Sum(u, {1}, true) * s * a;
  }
  Feeds feeds() const { return {{x, HostTensor::RandomNormal(DType::kF32, x.shape(), 9)}}; }
};

TEST(RematTest, AConsumerRecomputesElementwiseValuesFromWhatItReadsAlready) {
  TwoClusters m;
  auto plan = Build(m.g, CpuOptions(), {m.y});
  ASSERT_TRUE(plan.ok()) << plan.status();
  const Plan& p = **plan;
  const Step* producer = OwnerOf(p, m.a);
  ASSERT_NE(producer, nullptr);
  const Step* consumer = nullptr;
  for (const Step& s : p.steps) {
    if (s.kind == Step::Kind::kCluster && Contains(s.outputs, m.y)) consumer = &s;
  }
  ASSERT_NE(consumer, nullptr);
  ASSERT_NE(producer, consumer);
  // The consumer computes s and t itself from a, which it read anyway.
  EXPECT_TRUE(Contains(consumer->inputs, m.a));
  EXPECT_FALSE(Contains(consumer->inputs, m.s));
  EXPECT_FALSE(Contains(consumer->inputs, m.t));
  EXPECT_TRUE(Contains(consumer->nodes, m.s.node_id()));
  EXPECT_TRUE(Contains(consumer->nodes, m.t.node_id()));
  // The producer writes a alone; its nodes are unchanged.
  EXPECT_THAT(producer->outputs, ::testing::ElementsAre(m.a));
  EXPECT_TRUE(Contains(producer->nodes, m.s.node_id()));
  // The consumer's op-by-op fallback covers its new nodes.
  int ops = 0;
  for (int id : consumer->nodes) ops += m.g.node(id).op() != OpKind::kConst;
  EXPECT_EQ(static_cast<int>(consumer->fallback.size()), ops);
}

TEST(RematTest, OffLeavesTheClustersAsTheyWere) {
  TwoClusters m;
  auto plan = Build(m.g, CpuOptions(/*remat=*/false), {m.y});
  ASSERT_TRUE(plan.ok()) << plan.status();
  const Step* producer = OwnerOf(**plan, m.a);
  ASSERT_NE(producer, nullptr);
  EXPECT_TRUE(Contains(producer->outputs, m.s));
  EXPECT_TRUE(Contains(producer->outputs, m.t));
}

TEST(RematTest, FetchedValuesAreStillWritten) {
  TwoClusters m;
  auto plan = Build(m.g, CpuOptions(), {m.y, m.t});
  ASSERT_TRUE(plan.ok()) << plan.status();
  const Step* producer = OwnerOf(**plan, m.a);
  ASSERT_NE(producer, nullptr);
  EXPECT_TRUE(Contains(producer->outputs, m.t));
}

TEST(RematTest, ACopyNeverReadsAVariable) {
  Graph g;
  Tensor x = Placeholder(g, DType::kF32, {13, 7}, "x");
  Tensor v = Variable(g, HostTensor::RandomNormal(DType::kF32, {7}, 3), "v");
  Tensor w = Const(g, HostTensor::RandomNormal(DType::kF32, {7, 5}, 4));
  Tensor e, y;
  {
    JitScope scope(g);
    Tensor a = MatMul(x, Const(g, HostTensor::RandomNormal(DType::kF32, {7, 7}, 5)));
    e = a * v;  // elementwise, a leaf read from a Variable
    y = MatMul(e, w);
  }
  auto plan = Build(g, CpuOptions(), {y});
  ASSERT_TRUE(plan.ok()) << plan.status();
  for (const Step& s : (*plan)->steps) {
    if (s.kind == Step::Kind::kCluster && Contains(s.outputs, y)) {
      EXPECT_TRUE(Contains(s.inputs, e));
      EXPECT_FALSE(Contains(s.nodes, e.node_id()));
    }
  }
}

TEST(RematTest, LeavesLargerThanTheValueAreNotCopied) {
  Graph g;
  Tensor x = Placeholder(g, DType::kF32, {11, 6}, "x");
  Tensor z = Placeholder(g, DType::kF32, {6, 11}, "z");
  Tensor e, y;
  {
    JitScope scope(g);
    Tensor a = MatMul(x, Const(g, HostTensor::RandomNormal(DType::kF32, {6, 6}, 5)));
    e = a + Transpose(z, {1, 0});  // two [11, 6] leaves (a matmul, a transpose)
    y = MatMul(e, Const(g, HostTensor::RandomNormal(DType::kF32, {6, 3}, 6)));
  }
  auto plan = Build(g, CpuOptions(), {y});
  ASSERT_TRUE(plan.ok()) << plan.status();
  for (const Step& s : (*plan)->steps) {
    if (s.kind == Step::Kind::kCluster && Contains(s.outputs, y)) {
      EXPECT_TRUE(Contains(s.inputs, e));
    }
  }
}

// A ReLU gradient's mask (policy, issue 38): Greater(y, 0) is computed in y's cluster,
// which writes y (or its pre-activation) anyway for another cluster, and read by one
// cluster alone. Its copy there reads that value (2 or 4 bytes an element where the
// mask is 1): allowed, since it is stored anyway and the mask then is not, so nothing
// is kept from P to C for the mask. A mask a second cluster reads too stays where it is
// (P writes it anyway).
struct MaskedGradient {
  Graph g;
  Tensor x, y, mask, masked, other;
  MaskedGradient(DType dtype, bool second_reader) {
    x = Placeholder(g, dtype, {37, 29}, "x");
    auto weight = [&](int64_t k, int64_t n, uint64_t seed) {
      return Cast(Const(g, HostTensor::RandomNormal(DType::kF32, {k, n}, seed)), dtype);
    };
    JitScope scope(g);
    y = Relu(MatMul(x, weight(29, 31, 1)));
    Tensor next = MatMul(y, weight(31, 31, 2));  // y leaves its cluster
    mask = Greater(y, ScalarConst(g, 0.0, dtype));
    masked = Select(mask, MatMul(next, weight(31, 31, 3)), ScalarConst(g, 0.0, dtype));
    if (second_reader) other = Select(mask, MatMul(next, weight(31, 31, 4)), next);
  }
  Feeds feeds() const { return {{x, HostTensor::RandomNormal(x.dtype(), x.shape(), 5)}}; }
};

TEST(RematTest, AMaskIsComputedWhereItIsReadWhenItsOperandIsStoredAnyway) {
  for (DType dtype : {DType::kF32, DType::kBF16}) {
    SCOPED_TRACE(DTypeName(dtype));
    MaskedGradient m(dtype, /*second_reader=*/false);
    auto plan = Build(m.g, CpuOptions(), {m.masked});
    ASSERT_TRUE(plan.ok()) << plan.status();
    const Step* producer = OwnerOf(**plan, m.y);
    ASSERT_NE(producer, nullptr);
    EXPECT_FALSE(Contains(producer->outputs, m.mask));
    for (const Step& s : (*plan)->steps) {
      if (s.kind == Step::Kind::kCluster && Contains(s.outputs, m.masked)) {
        EXPECT_TRUE(Contains(s.nodes, m.mask.node_id()));
        // It reads what the other cluster reads too (y, or the pre-activation when that
        // cluster recomputes the ReLU itself), never the mask.
        EXPECT_FALSE(Contains(s.inputs, m.mask));
      }
    }
    Session session(m.g, CpuOptions());
    auto got = session.Run(m.feeds(), {m.masked});
    ASSERT_TRUE(got.ok()) << got.status();
    testing_util::ExpectMatchesReference(m.g, m.feeds(), {m.masked}, *got);
  }
  MaskedGradient shared(DType::kF32, /*second_reader=*/true);
  auto plan = Build(shared.g, CpuOptions(), {shared.masked, shared.other});
  ASSERT_TRUE(plan.ok()) << plan.status();
  const Step* producer = OwnerOf(**plan, shared.y);
  ASSERT_NE(producer, nullptr);
  EXPECT_TRUE(Contains(producer->outputs, shared.mask));
}

// Compiled (with and without the stage) against the reference kernels, at odd, prime
// and tiny extents; the matmuls are small enough for Halide's loops and, with
// cpu_gemm_min_work 1 in braze-fuzz, oneDNN's (docs/CPU_GEMM.md).
TEST(RematTest, SessionResultsMatchTheReference) {
  for (int64_t m : {1, 2, 37, 131}) {
    for (bool remat : {true, false}) {
      TwoClusters model(m, 29, 17);
      Session session(model.g, CpuOptions(remat));
      auto got = session.Run(model.feeds(), {model.y, model.a});
      ASSERT_TRUE(got.ok()) << got.status();
      testing_util::ExpectMatchesReference(model.g, model.feeds(), {model.y, model.a}, *got);
    }
  }
}

// Clusters of at most 3 ops (max_cluster_size) over an elementwise chain and its
// gradient: Remat copies some clusters' whole value into every reader, which left those
// clusters with no outputs, and a strict session failed ("cluster_9: no outputs"). Such
// a cluster is now dropped from the plan; the results match the reference.
TEST(RematTest, AClusterWhoseValuesAreAllCopiedIsDropped) {
  Graph g;
  Tensor x = Placeholder(g, DType::kF32, {7, 5}, "x");
  std::vector<Tensor> fetches;
  {
    JitScope scope(g);
    Tensor a = x, b = x * 0.5;
    for (int i = 0; i < 8; ++i) {
      Tensor c = i % 4 == 0   ? a + b
                 : i % 4 == 1 ? Tanh(a) * 0.9
                 : i % 4 == 2 ? a * b * 0.5
                              : Sigmoid(a) - b;
      b = a;
      a = c;
    }
    Tensor loss = Sum(a);
    auto grads = Gradients({loss}, {x});
    ASSERT_TRUE(grads.ok()) << grads.status();
    fetches = {loss, (*grads)[0]};
  }
  SessionOptions options = CpuOptions();
  options.strict = true;
  options.max_cluster_size = 3;
  auto plan = Build(g, options, fetches);
  ASSERT_TRUE(plan.ok()) << plan.status();
  size_t cluster_steps = 0;
  for (const Step& s : (*plan)->steps) {
    if (s.kind == Step::Kind::kCluster) {
      EXPECT_FALSE(s.outputs.empty()) << s.name;
      ++cluster_steps;
    }
  }
  // Some cluster was copied whole (within max_cluster_size + kMaxRematCone ops a step).
  EXPECT_LT(cluster_steps, (*plan)->clustering.clusters.size());
  const Feeds feeds = {{x, HostTensor::RandomUniform(DType::kF32, {7, 5}, 21, -1, 1)}};
  Session session(g, options);
  auto got = session.Run(feeds, fetches);
  ASSERT_TRUE(got.ok()) << got.status();
  testing_util::ExpectMatchesReference(g, feeds, fetches, *got);
}

// A GELU MLP's training step (the GPT's pattern: the backward pass reads the forward's
// GELU intermediates), two steps of SGD, against the reference kernels.
TEST(RematTest, AGeluTrainingStepMatchesTheReference) {
  Graph g;
  Tensor x = Placeholder(g, DType::kF32, {23, 13}, "x");
  Tensor w1 = Variable(g, HostTensor::RandomNormal(DType::kF32, {13, 19}, 11, 0, 0.3), "w1");
  Tensor w2 = Variable(g, HostTensor::RandomNormal(DType::kF32, {19, 5}, 12, 0, 0.3), "w2");
  Tensor loss;
  std::vector<Tensor> train;
  {
    JitScope scope(g);
    Tensor h = Gelu(MatMul(x, w1));
    loss = Mean(Square(MatMul(h, w2)));
    auto ops = Minimize(Optimizer::Sgd(0.1), loss, {w1, w2});
    ASSERT_TRUE(ops.ok()) << ops.status();
    train = *ops;
  }
  const Feeds feeds = {{x, HostTensor::RandomNormal(DType::kF32, {23, 13}, 13)}};
  SessionOptions ref_options;
  ref_options.reference_only = true;
  Session compiled(g, CpuOptions()), reference(g, ref_options);
  for (int step = 0; step < 2; ++step) {
    auto got = compiled.Run(feeds, {loss, w1}, train);
    auto want = reference.Run(feeds, {loss, w1}, train);
    ASSERT_TRUE(got.ok()) << got.status();
    ASSERT_TRUE(want.ok()) << want.status();
    for (size_t i = 0; i < got->size(); ++i) {
      std::string why;
      EXPECT_TRUE(AllClose((*got)[i], (*want)[i], 1e-4, 1e-5, &why)) << step << ": " << why;
    }
  }
}

}  // namespace
}  // namespace braze
