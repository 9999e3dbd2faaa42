// mark_for_compilation: the seed documentation's scope examples, cycles, sizes, devices,
// jit levels and exclusion reasons.
#include "passes/mark_for_compilation.h"

#include <string>
#include <vector>

#include "braze/device.h"
#include "braze/jit_scope.h"
#include "braze/ops.h"
#include "braze/session.h"  // JitLevel, as users name the levels
#include "gtest/gtest.h"
#include "passes/clustering_checks.h"
#include "passes/dce.h"

namespace braze {
namespace {

const Device kGpu0{Device::Kind::kCuda, 0};

using testing_internal::BuildQuotient;
using testing_internal::ExpectValidClustering;
using testing_internal::IsAcyclic;

ClusteringOptions Level(JitLevel level, int min_size = 4,
                        int max_size = ClusteringOptions().max_cluster_size) {
  ClusteringOptions o;
  o.auto_cluster = level != JitLevel::kOff;
  o.min_cluster_size = min_size;
  o.max_cluster_size = max_size;
  return o;
}

ClusteringResult Cluster(const Graph& g, const ClusteringOptions& o,
                         const std::vector<bool>& needed = {}) {
  absl::StatusOr<ClusteringResult> r = MarkForCompilation(g, o, needed);
  EXPECT_TRUE(r.ok()) << r.status();
  if (!r.ok()) return {};
  ExpectValidClustering(g, o, needed, *r);
  return *std::move(r);
}

int C(const ClusteringResult& r, const Tensor& t) { return r.ClusterOf(t.node_id()); }
ExclusionReason Why(const ClusteringResult& r, const Tensor& t) { return r.ReasonOf(t.node_id()); }

HostFunction Identity() {
  return [](absl::Span<const HostTensor> in) -> absl::StatusOr<std::vector<HostTensor>> {
    return std::vector<HostTensor>{in[0]};
  };
}
Tensor Host(Tensor x) {
  return HostCall(*x.graph(), "host", {x}, {TensorSpec{x.dtype(), x.shape()}}, Identity())[0];
}

class ClusteringTest : public ::testing::Test {
 protected:
  ClusteringTest()
      : a(Placeholder(g, DType::kF32, {2, 2}, "a")), b(Placeholder(g, DType::kF32, {2, 2}, "b")) {}
  Graph g;
  Tensor a;
  Tensor b;
};

// Seed example 1, clustering side (node flags are checked in jit_scope_test).
TEST_F(ClusteringTest, SeedExampleMatMulScopes) {
  Tensor c, d, mm, e;
  {
    JitScope s(g);
    c = MatMul(a, b);
  }
  {
    JitScope s(g, false);
    d = MatMul(a, c);
  }
  {
    JitScope s(g, [](const NodeDef& n) {
      return std::string(n.op()).find("MatMul") != std::string::npos;
    });
    mm = MatMul(a, b);
    e = mm + d;
  }
  for (JitLevel level : {JitLevel::kOff, JitLevel::kOn1, JitLevel::kOn2}) {
    ClusteringResult r = Cluster(g, Level(level));
    EXPECT_GE(C(r, c), 0);
    EXPECT_EQ(Why(r, d), ExclusionReason::kMarkedNoCompile);
    EXPECT_GE(C(r, mm), 0);
    EXPECT_EQ(Why(r, e), ExclusionReason::kMarkedNoCompile);
    EXPECT_NE(C(r, c), C(r, mm));  // two outermost scopes
    EXPECT_EQ(Why(r, a), ExclusionReason::kNoLowering);
    ASSERT_EQ(r.clusters.size(), 2u);
    EXPECT_EQ(r.clusters[C(r, c)].scope, "jit_scope_0");
    EXPECT_EQ(r.clusters[C(r, mm)].scope, "jit_scope_2");
    EXPECT_EQ(r.clusters[C(r, mm)].nodes, std::vector<int>{mm.node_id()});
  }
}

// Seed example 2: x in a scope, y in a false scope, loss outside any scope.
TEST_F(ClusteringTest, SeedExampleUnscopedLossJoinsScopedCluster) {
  Tensor x, y;
  {
    JitScope s(g);
    x = Exp(a);
  }
  {
    JitScope s(g, false);
    y = Exp(b);
  }
  Tensor loss = x + y;
  for (JitLevel level : {JitLevel::kOff, JitLevel::kOn1}) {
    ClusteringResult r = Cluster(g, Level(level));
    ASSERT_GE(C(r, x), 0);
    EXPECT_EQ(C(r, loss), C(r, x));
    EXPECT_EQ(Why(r, y), ExclusionReason::kMarkedNoCompile);
    EXPECT_EQ(r.clusters.size(), 1u);
    EXPECT_EQ(r.clusters[0].scope, "jit_scope_0");
    EXPECT_TRUE(r.clusters[0].explicit_scope);
  }
}

// Seed example 3: wrapping with an outer false scope compiles only the inner ops.
TEST_F(ClusteringTest, SeedExampleOuterFalseInnerTrue) {
  Tensor x, y1, y2, z;
  {
    JitScope off(g, false);
    x = Exp(a);
    {
      JitScope on(g);
      y1 = Neg(x);
      y2 = Exp(y1);
    }
    z = Sqrt(y2);
  }
  ClusteringResult r = Cluster(g, Level(JitLevel::kOff));
  ASSERT_EQ(r.clusters.size(), 1u);
  EXPECT_EQ(r.clusters[0].nodes, (std::vector<int>{y1.node_id(), y2.node_id()}));
  EXPECT_EQ(Why(r, x), ExclusionReason::kMarkedNoCompile);
  EXPECT_EQ(Why(r, z), ExclusionReason::kMarkedNoCompile);
}

// The classic diamond: a -> b -> c and a -> HostCall -> c. Merging {a,b} with c would
// put the HostCall both after and before the cluster.
TEST_F(ClusteringTest, AvoidsCycleThroughNonCompilableOp) {
  Tensor x, y, h, z;
  {
    JitScope s(g);
    x = Exp(a);
    y = Neg(x);
    h = Host(x);
    z = y + h;
  }
  EXPECT_EQ(h.node().jit().compile, true);  // in scope, but HostCall has no lowering
  ClusteringResult r = Cluster(g, Level(JitLevel::kOff));
  EXPECT_EQ(Why(r, h), ExclusionReason::kNoLowering);
  EXPECT_EQ(C(r, x), C(r, y));
  ASSERT_GE(C(r, z), 0);  // explicit: compiles alone
  EXPECT_NE(C(r, z), C(r, x));
  EXPECT_TRUE(IsAcyclic(BuildQuotient(g, r)));
  ASSERT_EQ(r.refusals.size(), 1u);
  EXPECT_EQ(r.refusals[0].reason, ExclusionReason::kWouldFormCycle);
  EXPECT_EQ(r.refusals[0].consumer, z.node_id());
  EXPECT_NE(r.refusals[0].text.find(h.name()), std::string::npos) << r.refusals[0].text;

  // Force the naive merge to show the check is what prevents the cycle.
  ClusteringResult naive = r;
  naive.nodes[z.node_id()].cluster = C(r, x);
  EXPECT_FALSE(IsAcyclic(BuildQuotient(g, naive)));
}

// A Const is bound once (and copied to a device once): an auto-cluster of nothing but
// Consts would copy it again on every Run. On an H200 a Const whose only consumer was a
// cuBLAS GEMM (a library call, outside clusters) was such a kernel, launched every Run.
TEST_F(ClusteringTest, AnAutoClusterOfOnlyConstantsIsDissolved) {
  Tensor k = Const(g, HostTensor::Filled(DType::kF32, {2, 2}, 3.0), "k");
  Tensor h = Host(k);  // k's only consumer is never compiled
  Tensor y = Exp(h) + Const(g, HostTensor::Filled(DType::kF32, {2, 2}, 1.0), "one");
  ClusteringResult r = Cluster(g, Level(JitLevel::kOn1, /*min_size=*/1));
  EXPECT_EQ(C(r, k), -1);
  EXPECT_EQ(Why(r, k), ExclusionReason::kClusterTooSmall);
  EXPECT_NE(r.nodes[k.node_id()].explanation.find("only constants"), std::string::npos)
      << r.nodes[k.node_id()].explanation;
  // A Const with compute beside it stays in that cluster.
  ASSERT_EQ(r.clusters.size(), 1u);
  EXPECT_GE(C(r, y), 0);
}

TEST_F(ClusteringTest, CycleRefusalIsTheReasonForDissolvedAutoClusters) {
  Tensor x = Exp(a);
  Tensor y = Neg(x);
  Tensor h = Host(x);
  Tensor z = y + h;
  ClusteringResult r = Cluster(g, Level(JitLevel::kOn1, /*min_size=*/3));
  EXPECT_TRUE(r.clusters.empty());
  EXPECT_EQ(Why(r, x), ExclusionReason::kWouldFormCycle);
  EXPECT_EQ(Why(r, z), ExclusionReason::kWouldFormCycle);
  EXPECT_NE(r.nodes[z.node_id()].explanation.find("min_cluster_size 3"), std::string::npos);
  // With min size 1 the same graph forms two clusters and no cycle.
  ClusteringResult r1 = Cluster(g, Level(JitLevel::kOn1, /*min_size=*/1));
  EXPECT_EQ(r1.clusters.size(), 2u);
  EXPECT_EQ(C(r1, x), C(r1, y));
}

TEST_F(ClusteringTest, CycleThroughFalseScopedOp) {
  Tensor x, y, f, z;
  {
    JitScope s(g);
    x = Exp(a);
    y = Neg(x);
    {
      JitScope off(g, false);
      f = Sqrt(x);
    }
    z = y + f;
  }
  ClusteringResult r = Cluster(g, Level(JitLevel::kOn2, 1));
  EXPECT_EQ(C(r, x), C(r, y));
  EXPECT_NE(C(r, z), C(r, x));
  EXPECT_EQ(Why(r, f), ExclusionReason::kMarkedNoCompile);
}

TEST_F(ClusteringTest, DifferentScopesNeverMerge) {
  Tensor x, y, u, w;
  {
    JitScope s(g);
    x = Exp(a);
  }
  u = Neg(x);  // unscoped: may bridge into one scope, never join two
  {
    JitScope s(g);
    y = Exp(u);
    w = Sqrt(y);
  }
  ClusteringResult r = Cluster(g, Level(JitLevel::kOff));
  ASSERT_EQ(r.clusters.size(), 2u);
  EXPECT_EQ(C(r, u), C(r, x));
  EXPECT_EQ(C(r, y), C(r, w));
  EXPECT_NE(C(r, x), C(r, y));
  EXPECT_EQ(r.clusters[C(r, x)].scope, "jit_scope_0");
  EXPECT_EQ(r.clusters[C(r, y)].scope, "jit_scope_1");
  ASSERT_EQ(r.refusals.size(), 1u);
  EXPECT_EQ(r.refusals[0].reason, ExclusionReason::kScopeConflict);
  EXPECT_NE(r.DebugString().find("scope conflict"), std::string::npos) << r.DebugString();
}

TEST_F(ClusteringTest, NestedScopesShareOneCluster) {
  Tensor x, y, z;
  {
    JitScope s(g);
    x = Exp(a);
    {
      JitScope inner(g, JitScope::Options{true, true});
      y = Neg(x);
    }
    z = Sqrt(y);
  }
  ClusteringResult r = Cluster(g, Level(JitLevel::kOff));
  ASSERT_EQ(r.clusters.size(), 1u);
  EXPECT_EQ(r.clusters[0].nodes.size(), 3u);
  EXPECT_TRUE(y.node().jit().separate_compiled_gradients);
  EXPECT_FALSE(x.node().jit().separate_compiled_gradients);
}

TEST_F(ClusteringTest, OffWithoutScopesCompilesNothing) {
  Tensor t = a;
  for (int i = 0; i < 10; ++i) t = Exp(t) + ScalarConst(g, 1.0);
  ClusteringResult off = Cluster(g, Level(JitLevel::kOff));
  EXPECT_TRUE(off.clusters.empty());
  EXPECT_EQ(Why(off, t), ExclusionReason::kJitOff);
  EXPECT_EQ(Why(off, a), ExclusionReason::kNoLowering);
  // Auto-clustering takes the whole chain, constants included, as one cluster.
  ClusteringResult on1 = Cluster(g, Level(JitLevel::kOn1));
  ASSERT_EQ(on1.clusters.size(), 1u);
  EXPECT_EQ(static_cast<int>(on1.clusters[0].nodes.size()), g.num_nodes() - 2);  // not a, b
  EXPECT_FALSE(on1.clusters[0].explicit_scope);
  EXPECT_EQ(on1.clusters[0].scope, "");
  // kOn1 and kOn2 are documented as identical.
  ClusteringResult on2 = Cluster(g, Level(JitLevel::kOn2));
  EXPECT_EQ(on2.clusters[0].nodes, on1.clusters[0].nodes);
}

TEST_F(ClusteringTest, MinClusterSizeAppliesToAutoClustersOnly) {
  Tensor t = a;
  for (int i = 0; i < 3; ++i) t = Exp(t);
  ClusteringResult r3 = Cluster(g, Level(JitLevel::kOn1));  // default min 4
  EXPECT_TRUE(r3.clusters.empty());
  EXPECT_EQ(Why(r3, t), ExclusionReason::kClusterTooSmall);
  EXPECT_NE(r3.nodes[t.node_id()].explanation.find("3 op(s)"), std::string::npos);
  t = Exp(t);
  ClusteringResult r4 = Cluster(g, Level(JitLevel::kOn1));
  ASSERT_EQ(r4.clusters.size(), 1u);
  EXPECT_EQ(r4.clusters[0].nodes.size(), 4u);

  Graph g2;
  Tensor p = Placeholder(g2, DType::kF32, {3});
  Tensor s;
  {
    JitScope scope(g2);
    s = Exp(p);
  }
  ClusteringResult r = Cluster(g2, Level(JitLevel::kOn1, /*min_size=*/100));
  ASSERT_EQ(r.clusters.size(), 1u);  // explicit scopes compile any size
  EXPECT_EQ(r.clusters[0].nodes, std::vector<int>{s.node_id()});
}

TEST_F(ClusteringTest, MaxClusterSizeSplitsChains) {
  std::vector<Tensor> chain;
  {
    JitScope s(g);
    Tensor t = a;
    for (int i = 0; i < 10; ++i) chain.push_back(t = Exp(t));
  }
  ClusteringResult r = Cluster(g, Level(JitLevel::kOff, 4, /*max_size=*/4));
  EXPECT_EQ(r.clusters.size(), 3u);  // 4 + 4 + 2, greedily along the chain
  for (const Tensor& t : chain) EXPECT_GE(C(r, t), 0);
  EXPECT_EQ(r.refusals.size(), 2u);
  for (const MergeRefusal& m : r.refusals) EXPECT_EQ(m.reason, ExclusionReason::kMaxClusterSize);

  Graph g2;
  Tensor t = Placeholder(g2, DType::kF32, {3});
  std::vector<Tensor> auto_chain;
  for (int i = 0; i < 7; ++i) auto_chain.push_back(t = Neg(t));
  ClusteringResult ra = Cluster(g2, Level(JitLevel::kOn1, /*min=*/3, /*max=*/3));
  EXPECT_EQ(ra.clusters.size(), 2u);
  EXPECT_EQ(Why(ra, auto_chain[6]), ExclusionReason::kMaxClusterSize);
}

TEST_F(ClusteringTest, DifferentDevicesAreNotMerged) {
  Tensor x, y, z;
  {
    JitScope s(g);
    x = Exp(a);
    g.set_device(kGpu0);
    y = Neg(x);
    g.set_device(std::nullopt);
    z = Sqrt(y);
  }
  ClusteringResult r = Cluster(g, Level(JitLevel::kOff));
  ASSERT_EQ(r.clusters.size(), 3u);
  EXPECT_EQ(r.clusters[C(r, y)].device.ToString(), "cuda:0");
  EXPECT_EQ(r.clusters[C(r, x)].device.ToString(), "cpu");  // unplaced: the default device
  EXPECT_EQ(r.refusals.size(), 2u);
  EXPECT_EQ(r.refusals[0].reason, ExclusionReason::kDifferentDevice);

  Graph g2;
  Tensor t = Placeholder(g2, DType::kF32, {3});
  for (int i = 0; i < 3; ++i) t = Neg(t);
  g2.set_device(kGpu0);
  Tensor u = Exp(t);
  for (int i = 0; i < 4; ++i) u = Exp(u);
  ClusteringResult r2 = Cluster(g2, Level(JitLevel::kOn1));
  ASSERT_EQ(r2.clusters.size(), 1u);
  EXPECT_EQ(r2.clusters[0].device, kGpu0);
  EXPECT_EQ(Why(r2, t), ExclusionReason::kDifferentDevice);
}

// A small GPU auto-cluster X = {x3, x2, x1} sits on a path A -> x1 ... x2 -> B, so A and B
// cannot merge while X is one cluster. X is then dropped (3 < min 4); split into single
// ops it no longer links A to B, and a second round merges them.
TEST_F(ClusteringTest, DissolvingAClusterUnblocksMerges) {
  g.set_device(kGpu0);
  Tensor x3 = Neg(a);
  Tensor x2 = Abs(x3);
  g.set_device(std::nullopt);
  Tensor t = a;
  std::vector<Tensor> cpu_ops;
  for (int i = 0; i < 4; ++i) cpu_ops.push_back(t = Exp(t));
  g.set_device(kGpu0);
  Tensor x1 = t + x3;
  g.set_device(std::nullopt);
  t = t + x2;
  cpu_ops.push_back(t);
  for (int i = 0; i < 3; ++i) cpu_ops.push_back(t = Exp(t));
  ClusteringResult r = Cluster(g, Level(JitLevel::kOn1));
  ASSERT_EQ(r.clusters.size(), 1u) << r.DebugString();
  EXPECT_EQ(r.clusters[0].nodes.size(), cpu_ops.size());
  for (const Tensor& x : {x1, x2, x3}) {
    EXPECT_EQ(Why(r, x), ExclusionReason::kDifferentDevice) << r.DebugString();
  }
}

TEST_F(ClusteringTest, StateAndHostOpsAreExcludedConstIsNot) {
  Tensor v = Variable(g, HostTensor::Filled(DType::kF32, {2, 2}, 1.0), "v");
  Tensor k, sum, assign, host;
  {
    JitScope s(g);
    k = Const(g, HostTensor::Filled(DType::kF32, {2, 2}, 2.0), "k");
    sum = v + k;
    assign = Assign(v, sum);
    host = Host(sum);
  }
  ClusteringResult r = Cluster(g, Level(JitLevel::kOn1));
  EXPECT_EQ(Why(r, v), ExclusionReason::kStateful);
  EXPECT_EQ(Why(r, assign), ExclusionReason::kStateful);
  EXPECT_EQ(Why(r, host), ExclusionReason::kNoLowering);
  EXPECT_GE(C(r, k), 0);
  EXPECT_EQ(C(r, k), C(r, sum));
}

TEST_F(ClusteringTest, OnlyNeededOpsAreClustered) {
  Tensor x, y, z;
  {
    JitScope s(g);
    x = Exp(a);
    y = Neg(x);
    z = Sqrt(y);
  }
  absl::StatusOr<std::vector<bool>> live = LiveNodes(g, {y});
  ASSERT_TRUE(live.ok()) << live.status();
  EXPECT_EQ(*live, (std::vector<bool>{true, false, true, true, false}));
  ClusteringResult r = Cluster(g, Level(JitLevel::kOff), *live);
  EXPECT_EQ(Why(r, z), ExclusionReason::kNotNeeded);
  EXPECT_EQ(Why(r, b), ExclusionReason::kNotNeeded);
  ASSERT_EQ(r.clusters.size(), 1u);
  EXPECT_EQ(r.clusters[0].nodes, (std::vector<int>{x.node_id(), y.node_id()}));

  Graph other;
  Tensor foreign = Placeholder(other, DType::kF32, {1});
  EXPECT_EQ(LiveNodes(g, {foreign}).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(LiveNodes(g, {Tensor()}).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(ClusteringTest, BadArgumentsAreErrors) {
  EXPECT_EQ(MarkForCompilation(g, Level(JitLevel::kOn1), {true}).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(MarkForCompilation(g, Level(JitLevel::kOn1, 0)).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(MarkForCompilation(g, Level(JitLevel::kOn1, 4, 0)).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST_F(ClusteringTest, DebugStringSummarizes) {
  Tensor x, y, f;
  {
    JitScope s(g);
    x = Exp(a);
    y = Exp(x) + b;
    JitScope off(g, false);
    f = Neg(y);
  }
  ClusteringResult r = Cluster(g, Level(JitLevel::kOff));
  const std::string d = r.DebugString();
  EXPECT_NE(d.find("1 cluster(s), 3 of 6 op(s) clustered"), std::string::npos) << d;
  EXPECT_NE(d.find("cluster_0: 3 op(s), jit_scope_0, device cpu; Add x1, Exp x2"),
            std::string::npos)
      << d;
  EXPECT_NE(d.find("[marked compile=false] '" + f.name() + "'"), std::string::npos) << d;
  EXPECT_NE(d.find("reasons: marked compile=false: 1, no lowering: 2"), std::string::npos) << d;
  EXPECT_EQ(r.ClusterNameOf(x.node_id()), "cluster_0");
  EXPECT_EQ(r.ClusterNameOf(f.node_id()), "");
  EXPECT_EQ(r.ClusterOf(-1), -1);
  EXPECT_EQ(r.ClusterOf(1000), -1);
}

TEST_F(ClusteringTest, PassInterface) {
  MarkForCompilationPass off(Level(JitLevel::kOff));
  EXPECT_EQ(off.name(), "mark_for_compilation");
  Exp(Exp(Exp(Exp(a))));
  absl::StatusOr<bool> changed = off.Run(g);
  ASSERT_TRUE(changed.ok());
  EXPECT_FALSE(*changed);
  MarkForCompilationPass on(Level(JitLevel::kOn1));
  changed = on.Run(g);
  ASSERT_TRUE(changed.ok());
  EXPECT_TRUE(*changed);
  EXPECT_EQ(on.result().clusters.size(), 1u);
  MarkForCompilationPass bad(Level(JitLevel::kOn1), {true});
  EXPECT_FALSE(bad.Run(g).ok());
}

// Devices as DeviceScope places them: never one cluster across two, and a jit: device
// compiles its ops with no JitScope.
TEST(ClusteringDevices, NeverMergesDevicesAndJitDevicesAlwaysCompile) {
  Graph g;
  Tensor a = Placeholder(g, DType::kF32, {4}, "a");
  Tensor x, y, z;
  {
    DeviceScope d(g, "jit:cpu");
    x = Tanh(Exp(a));  // no JitScope, jit level off: compiled because of the device
  }
  y = Log(x);  // unplaced: the default device (cpu)
  {
    DeviceScope d(g, "cpu");
    JitScope s(g);
    z = Sqrt(y) + y;  // explicitly cpu: clusters with the unplaced Log
  }
  ClusteringOptions opts;  // kOff
  auto r = MarkForCompilation(g, opts);
  ASSERT_TRUE(r.ok()) << r.status();
  const int cx = r->ClusterOf(x.node_id());
  const int cy = r->ClusterOf(y.node_id());
  const int cz = r->ClusterOf(z.node_id());
  ASSERT_GE(cx, 0);
  EXPECT_EQ(cx, r->ClusterOf(x.node().input(0).node_id()));
  EXPECT_EQ(r->clusters[cx].device.ToString(), "jit:cpu");
  ASSERT_GE(cz, 0);
  EXPECT_EQ(cy, cz);
  EXPECT_NE(cx, cz);
  EXPECT_EQ(r->clusters[cz].device.ToString(), "cpu");
}

}  // namespace
}  // namespace braze

namespace braze {
namespace {

// Convolutions count as matmuls (max_matmuls_per_cluster, default 1): two convolutions
// joined by batch norms and ReLUs in one JitScope make two clusters, each with the ops
// around it; pools are cheap and fuse with either.
TEST(ClusteringWindowOps, ConvolutionsCountAsMatMuls) {
  Graph g;
  Tensor x = Placeholder(g, DType::kF32, {2, 8, 8, 4}, "x");
  Tensor w1 = Placeholder(g, DType::kF32, {3, 3, 4, 4}, "w1");
  Tensor w2 = Placeholder(g, DType::kF32, {3, 3, 4, 4}, "w2");
  Tensor c1, c2, pool;
  {
    JitScope scope(g);
    c1 = Conv2D(x, w1, {1, 1}, Padding::kSame);
    Tensor h = Relu(c1 * 2.0 + 1.0);
    c2 = Conv2D(h, w2, {1, 1}, Padding::kSame);
    pool = MaxPool(Relu(c2 + x), {2, 2}, {2, 2});
  }
  ClusteringOptions o;
  o.max_matmuls_per_cluster = 1;  // SessionOptions' default
  absl::StatusOr<ClusteringResult> r = MarkForCompilation(g, o, {});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_GE(r->ClusterOf(c1.node_id()), 0);
  EXPECT_GE(r->ClusterOf(c2.node_id()), 0);
  EXPECT_NE(r->ClusterOf(c1.node_id()), r->ClusterOf(c2.node_id()));
  EXPECT_EQ(r->ClusterOf(c2.node_id()), r->ClusterOf(pool.node_id()));
}

// The session's default device is placement too: "jit:cpu" there compiles every op
// placed nowhere else (XLA_CPU's rule, device.h), with no JitScope, the jit level off,
// and under a JitScope(false).
TEST(ClusteringDevices, AJitDefaultDeviceCompilesWhatNothingPlacesElsewhere) {
  Graph g;
  Tensor a = Placeholder(g, DType::kF32, {4}, "a");
  Tensor x = Tanh(Exp(a));
  Tensor y;
  {
    JitScope off(g, false);
    y = Log(x);
  }
  Tensor z;
  {
    DeviceScope d(g, "cpu");
    z = Sqrt(y);  // placed on the plain CPU: not forced
  }
  ClusteringOptions opts;  // kOff
  auto parsed = ParseDevice("jit:cpu");
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  opts.default_device = *parsed;
  auto r = MarkForCompilation(g, opts);
  ASSERT_TRUE(r.ok()) << r.status();
  const int cx = r->ClusterOf(x.node_id());
  ASSERT_GE(cx, 0);
  EXPECT_EQ(r->ClusterOf(x.node().input(0).node_id()), cx);
  EXPECT_EQ(r->ClusterOf(y.node_id()), cx);
  EXPECT_EQ(r->clusters[cx].device.ToString(), "jit:cpu");
  EXPECT_LT(r->ClusterOf(z.node_id()), 0);
}

}  // namespace
}  // namespace braze
