// Large scopes are split into clusters of at most SessionOptions::max_cluster_size ops
// (docs/FUZZING_FAMILIES.md, "Large clusters"). One cluster is one Halide pipeline, and
// Halide 14 lowers a pipeline in time about the square of the values it stores at root
// times its size: a 150-op chain and its gradient, one cluster of ~1,600 ops, did not
// compile in 10 minutes. The tests check the split (the plan alone, nothing compiled)
// and that results across the split match the reference; never time.
#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

#include "braze/jit_scope.h"
#include "braze/logging.h"
#include "braze/ops.h"
#include "braze/session.h"
#include "common/reference_check.h"
#include "device/features.h"
#include "runtime/plan.h"
#include "runtime/remat.h"
#include "tools/probe/large_programs.h"

namespace braze {
namespace {

// The plan of `fetches` under `options` with nothing fed.
absl::StatusOr<std::unique_ptr<const Plan>> PlanOf(const Graph& g, const SessionOptions& options,
                                                   const std::vector<Tensor>& fetches) {
  absl::StatusOr<Device> device = device::ResolveSessionDevice(options.device);
  if (!device.ok()) return device.status();
  return BuildPlan(g, options, *device, fetches, {}, std::vector<bool>(g.num_nodes(), false));
}

// The 150-op chain and its gradient under one scope: about 1,150 ops, every one
// compiled, in clusters of at most the default bound (before: one cluster of them all).
TEST(LargeClusterTest, AHugeScopeIsSplitIntoClustersOfAtMostTheDefaultSize) {
  Graph g;
  Tensor x = Placeholder(g, DType::kF32, {37, 29}, "x");
  std::vector<Tensor> fetches;
  {
    JitScope scope(g);
    auto built = probe::ChainAndGradient(x, 150);
    ASSERT_TRUE(built.ok()) << built.status();
    fetches = *built;
  }
  SessionOptions options;
  options.device = "cpu";
  options.strict = true;
  const int bound = options.max_cluster_size;
  EXPECT_LE(bound, 128);
  std::vector<std::string> infos;
  SetLogSink([&](LogSeverity severity, int, std::string_view text) {
    if (severity == LogSeverity::kInfo) infos.emplace_back(text);
  });
  auto plan = PlanOf(g, options, fetches);
  SetLogSink(nullptr);
  ASSERT_TRUE(plan.ok()) << plan.status();
  // The split is said (once, naming the scope), not silent.
  int said = 0;
  for (const std::string& line : infos) {
    said += line.find("JIT scope jit_scope_0:") != std::string::npos &&
            line.find("clusters of at most 128 ops") != std::string::npos;
  }
  EXPECT_EQ(said, 1) << infos.size() << " info lines";
  int clustered = 0;
  for (const Cluster& c : (*plan)->clustering.clusters) {
    EXPECT_LE(static_cast<int>(c.nodes.size()), bound) << c.name;
    clustered += static_cast<int>(c.nodes.size());
  }
  // Every op but the placeholder is compiled: the bound splits, it leaves nothing out.
  EXPECT_EQ(clustered, g.num_nodes() - 1);
  EXPECT_GE(static_cast<int>((*plan)->clustering.clusters.size()), clustered / bound);
  // Remat's copies of cheap producers take a step past the bound by at most one cone.
  for (const Step& s : (*plan)->steps) {
    EXPECT_EQ(s.kind, Step::Kind::kCluster) << s.name;
    EXPECT_LE(static_cast<int>(s.nodes.size()), bound + kMaxRematCone) << s.name;
  }
}

// A chain and its gradient split into clusters of at most 24 ops (forward values one
// cluster computes, another reads), on odd and tiny extents: the results match the
// reference kernels.
TEST(LargeClusterTest, ASplitChainAndItsGradientMatchTheReference) {
  for (const std::vector<int64_t>& shape : std::vector<std::vector<int64_t>>{{7, 3}, {1, 1}}) {
    Graph g;
    Tensor x = Placeholder(g, DType::kF32, shape, "x");
    std::vector<Tensor> fetches;
    {
      JitScope scope(g);
      auto built = probe::ChainAndGradient(x, 10);
      ASSERT_TRUE(built.ok()) << built.status();
      fetches = *built;
    }
    SessionOptions options;
    options.device = "cpu";
    options.strict = true;
    options.max_cluster_size = 24;
    Session session(g, options);
    const Feeds feeds = {{x, HostTensor::RandomUniform(DType::kF32, shape, 61, -1, 1)}};
    auto got = session.Run(feeds, fetches);
    ASSERT_TRUE(got.ok()) << got.status();
    EXPECT_GE(session.stats().cluster_launches, g.num_nodes() / 24);
    EXPECT_EQ(session.stats().single_op_launches + session.stats().reference_launches, 0);
    testing_util::ExpectMatchesReference(g, feeds, fetches, *got);
  }
}

}  // namespace
}  // namespace braze
