// Fusion through the Session: kernel counts, cluster inspection, the compile cache,
// strict vs best effort. Numbers are checked against the reference executor.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "braze/jit_scope.h"
#include "braze/ops.h"
#include "braze/session.h"
#include "common/reference_check.h"

namespace braze {
namespace {

using ::testing::HasSubstr;

using testing_util::ExpectMatchesReference;

TEST(Fusion, SoftmaxUnderOneScopeIsOneClusterLaunch) {
  Graph g;
  Tensor x = Placeholder(g, DType::kF32, {-1, 33}, "x");
  Tensor y;
  {
    JitScope scope(g);
    y = Softmax(x);
  }
  Session s(g);
  Feeds feeds = {{x, HostTensor::RandomUniform(DType::kF32, {7, 33}, 1, -3, 3)}};
  auto out = s.Run(feeds, {y});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(s.stats().cluster_launches, 1);
  EXPECT_EQ(s.stats().single_op_launches, 0);
  EXPECT_EQ(s.stats().reference_launches, 0);
  EXPECT_TRUE(s.ClusterOf(y).has_value());
  EXPECT_FALSE(s.ClusterOf(x).has_value());
  ExpectMatchesReference(g, feeds, {y}, *out);
}

TEST(Fusion, TenOpElementwiseChainIsOneLaunchUnderAutoJit) {
  Graph g;
  Tensor x = Placeholder(g, DType::kF32, {17, 33, 65}, "x");
  Tensor y = x;
  y = Exp(y * 0.1);
  y = y + 1.0;  // Const + Add
  y = Sqrt(y);
  y = Tanh(y);
  y = Sigmoid(y);
  y = Square(y);
  y = Relu(y - 0.25);
  y = Abs(y);
  SessionOptions opts;
  opts.global_jit_level = JitLevel::kOn1;
  Session s(g, opts);
  Feeds feeds = {{x, HostTensor::RandomUniform(DType::kF32, {17, 33, 65}, 2)}};
  auto out = s.Run(feeds, {y});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(s.stats().cluster_launches, 1);
  EXPECT_EQ(s.stats().single_op_launches, 0);
  ExpectMatchesReference(g, feeds, {y}, *out);

  // The unfused path: the same graph with no JIT runs one compiled kernel per op.
  Session unfused(g);
  auto out2 = unfused.Run(feeds, {y});
  ASSERT_TRUE(out2.ok()) << out2.status();
  EXPECT_EQ(unfused.stats().cluster_launches, 0);
  EXPECT_GE(unfused.stats().single_op_launches, 10);
  ExpectMatchesReference(g, feeds, {y}, *out2);
}

TEST(Fusion, CacheHitsAcrossRunsSessionsAndShapeChanges) {
  Graph g;
  Tensor x = Placeholder(g, DType::kF32, {-1, 8}, "x");
  Tensor y;
  {
    JitScope scope(g);
    y = Sum(Exp(x) * 2.0, {-1});
  }
  Session s(g);
  auto feed = [&](int rows, int seed) {
    return Feeds{{x, HostTensor::RandomUniform(DType::kF32, {rows, 8}, seed)}};
  };
  ASSERT_TRUE(s.Run(feed(5, 1), {y}).ok());
  const SessionStats first = s.stats();
  EXPECT_EQ(first.compiles + first.cache_hits, 1);
  ASSERT_TRUE(s.Run(feed(5, 2), {y}).ok());
  EXPECT_EQ(s.stats().compiles, first.compiles);  // memoized on the plan
  EXPECT_EQ(s.stats().cache_hits, first.cache_hits);
  ASSERT_TRUE(s.Run(feed(9, 3), {y}).ok());  // new shape: a new kernel
  const SessionStats third = s.stats();
  EXPECT_EQ(third.compiles + third.cache_hits, 2);
  auto out = s.Run(feed(5, 4), {y});  // back to 5 rows: a cache hit
  ASSERT_TRUE(out.ok());
  EXPECT_EQ(s.stats().cache_hits, third.cache_hits + 1);
  EXPECT_EQ(s.stats().compiles, third.compiles);
  ExpectMatchesReference(g, feed(5, 4), {y}, *out);

  Session other(g);  // another session finds the kernels in the process-wide cache
  ASSERT_TRUE(other.Run(feed(9, 5), {y}).ok());
  EXPECT_EQ(other.stats().compiles, 0);
  EXPECT_EQ(other.stats().cache_hits, 1);
  EXPECT_GE(s.stats().compile_ms, 0.0);
}

TEST(Fusion, BestEffortFallsBackOpByOpAndStrictFails) {
  Graph g;
  Tensor x = Placeholder(g, DType::kF32, {6, 5}, "x");
  Tensor y;
  {
    JitScope scope(g);
    y = LayerNorm(x, Const(g, HostTensor::RandomUniform(DType::kF32, {5}, 3)),
                  Const(g, HostTensor::RandomUniform(DType::kF32, {5}, 4)));
  }
  Feeds feeds = {{x, HostTensor::RandomUniform(DType::kF32, {6, 5}, 5)}};
  SessionOptions opts;
  opts.inject_compile_failure = [](const std::string& name) {
    return name.rfind("cluster_", 0) == 0;
  };
  Session best(g, opts);
  auto out = best.Run(feeds, {y});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(best.stats().cluster_launches, 0);
  EXPECT_GT(best.stats().single_op_launches, 3);
  ExpectMatchesReference(g, feeds, {y}, *out);

  opts.strict = true;
  Session strict(g, opts);
  auto err = strict.Run(feeds, {y});
  ASSERT_FALSE(err.ok());
  EXPECT_EQ(err.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(err.status().message()), HasSubstr("cluster 'cluster_0'"));
  EXPECT_THAT(std::string(err.status().message()), HasSubstr("strict"));
}

TEST(Fusion, HostCallStaysOutsideAndStrictNamesIt) {
  Graph g;
  Tensor x = Placeholder(g, DType::kF32, {4}, "x");
  Tensor y;
  {
    JitScope scope(g);
    Tensor a = Exp(x);
    auto h =
        HostCall(g, "on_host", {a}, {{DType::kF32, {4}}},
                 [](absl::Span<const HostTensor> in) -> absl::StatusOr<std::vector<HostTensor>> {
                   return std::vector<HostTensor>{in[0]};
                 });
    y = Log(h[0]) * 3.0;
  }
  Feeds feeds = {{x, HostTensor::RandomUniform(DType::kF32, {4}, 6)}};
  Session s(g);
  auto out = s.Run(feeds, {y});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_FALSE(s.ClusterOf(Tensor(&g, g.FindTensor("on_host")->node_id())).has_value());
  EXPECT_EQ(s.stats().reference_launches, 1);
  ExpectMatchesReference(g, feeds, {y}, *out);

  SessionOptions strict;
  strict.strict = true;
  Session st(g, strict);
  auto err = st.Run(feeds, {y});
  ASSERT_FALSE(err.ok());
  EXPECT_THAT(std::string(err.status().message()), HasSubstr("'on_host' (HostCall)"));
}

TEST(Fusion, ClusteringDebugStringExplainsExclusions) {
  Graph g;
  Tensor x = Placeholder(g, DType::kF32, {4}, "x");
  Tensor y;
  {
    JitScope scope(g);
    y = Exp(x) + 1.0;
  }
  Tensor z;
  {
    JitScope off(g, false);
    z = Log(y);
  }
  Session s(g);
  ASSERT_TRUE(s.Run({{x, HostTensor::RandomUniform(DType::kF32, {4}, 7, 0.5, 2)}}, {z}).ok());
  std::string dbg = s.ClusteringDebugString();
  EXPECT_THAT(dbg, HasSubstr("cluster_0"));
  EXPECT_THAT(dbg, HasSubstr("Log"));
  EXPECT_FALSE(s.ClusterOf(z).has_value());
  EXPECT_TRUE(s.ClusterOf(y).has_value());
}

}  // namespace
}  // namespace braze

namespace braze {
namespace {

// A pure tensor run as a target (not fetched) is computed by its cluster, which has it
// as an output: one fused launch, no fallback, no warning.
TEST(FusionTargets, APureTargetRunsInItsCluster) {
  Graph g;
  Tensor x = Placeholder(g, DType::kF32, {4, 6}, "x");
  Tensor y;
  {
    JitScope scope(g);
    y = Softmax(Tanh(x) * 2.0);
  }
  SessionOptions options;
  options.strict = true;  // a fallback would be an error
  Session session(g, options);
  auto out = session.Run({{x, HostTensor::RandomUniform(DType::kF32, {4, 6}, 1)}}, {}, {y});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(session.stats().cluster_launches, 1);
}

}  // namespace
}  // namespace braze
