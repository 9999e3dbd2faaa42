// Randomized property test: hundreds of seeded random DAGs with random JitScopes
// (true/false/predicate, nested), devices, stateful and host ops, needed sets and size
// limits. Every result must satisfy every clustering rule (clustering_checks.h): an
// acyclic cluster graph, one device and at most one scope per cluster, size limits,
// explicit ops always compiled, a reason for every excluded op, and no two adjacent kept
// clusters that could still merge.
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "braze/jit_scope.h"
#include "braze/ops.h"
#include "gtest/gtest.h"
#include "passes/clustering_checks.h"
#include "passes/dce.h"
#include "passes/mark_for_compilation.h"

namespace braze {
namespace {

struct RandomCase {
  std::unique_ptr<Graph> graph = std::make_unique<Graph>();
  std::vector<bool> needed;  // empty: all
  ClusteringOptions options;
};

RandomCase MakeRandomCase(uint32_t seed) {
  std::mt19937 rng(seed);
  auto uniform = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  RandomCase rc;
  Graph& g = *rc.graph;
  const Shape shape = {4};
  std::vector<Tensor> pool;
  std::vector<Tensor> variables;
  // Picks an input, favouring recent values so that long paths (and so cycle hazards)
  // are common.
  auto pick = [&]() -> Tensor {
    const int n = static_cast<int>(pool.size());
    if (uniform(0, 2) == 0) return pool[uniform(0, n - 1)];
    return pool[std::max(0, n - 1 - uniform(0, 3))];
  };
  HostFunction host_fn =
      [](absl::Span<const HostTensor> in) -> absl::StatusOr<std::vector<HostTensor>> {
    return std::vector<HostTensor>{in[0]};
  };

  std::vector<std::unique_ptr<JitScope>> scopes;
  const int num_sources = uniform(1, 3);
  for (int i = 0; i < num_sources; ++i) pool.push_back(Placeholder(g, DType::kF32, shape));
  const int num_ops = uniform(5, 60);
  for (int i = 0; i < num_ops; ++i) {
    const int scope_roll = uniform(0, 99);
    if (scope_roll < 12) {
      const int kind = uniform(0, 3);
      if (kind <= 1) {
        scopes.push_back(std::make_unique<JitScope>(g));
      } else if (kind == 2) {
        scopes.push_back(std::make_unique<JitScope>(g, false));
      } else {
        scopes.push_back(
            std::make_unique<JitScope>(g, JitScope::Options{[](const NodeDef& n) {
                                                              return n.op_kind() == OpKind::kExp ||
                                                                     n.op_kind() == OpKind::kAdd;
                                                            },
                                                            uniform(0, 1) == 1}));
      }
    } else if (scope_roll < 22 && !scopes.empty()) {
      scopes.pop_back();
    }
    if (uniform(0, 99) < 6) {
      g.set_device(uniform(0, 1) ? std::optional<Device>(Device{Device::Kind::kCuda, 0})
                                 : std::nullopt);
    }

    const int op_roll = uniform(0, 99);
    if (op_roll < 4) {
      pool.push_back(Placeholder(g, DType::kF32, shape));
    } else if (op_roll < 9) {
      pool.push_back(Const(g, HostTensor::Filled(DType::kF32, shape, 1.5)));
    } else if (op_roll < 12) {
      variables.push_back(Variable(g, HostTensor::Filled(DType::kF32, shape, 0.5)));
      pool.push_back(variables.back());
    } else if (op_roll < 15 && !variables.empty()) {
      pool.push_back(Assign(variables[uniform(0, static_cast<int>(variables.size()) - 1)], pick()));
    } else if (op_roll < 25) {
      std::vector<Tensor> ins = {pick()};
      if (uniform(0, 1)) ins.push_back(pick());
      pool.push_back(HostCall(g, "host", ins, {TensorSpec{DType::kF32, shape}}, host_fn)[0]);
    } else if (op_roll < 60) {
      Tensor x = pick();
      switch (uniform(0, 3)) {
        case 0:
          pool.push_back(Exp(x));
          break;
        case 1:
          pool.push_back(Neg(x));
          break;
        case 2:
          pool.push_back(Abs(x));
          break;
        default:
          pool.push_back(Tanh(x));
          break;
      }
    } else {
      Tensor x = pick(), y = pick();
      switch (uniform(0, 2)) {
        case 0:
          pool.push_back(Add(x, y));
          break;
        case 1:
          pool.push_back(Mul(x, y));
          break;
        default:
          pool.push_back(Maximum(x, y));
          break;
      }
    }
  }
  while (!scopes.empty()) scopes.pop_back();

  if (uniform(0, 1)) {
    std::vector<Tensor> roots;
    for (const Tensor& t : pool) {
      if (uniform(0, 3) == 0) roots.push_back(t);
    }
    rc.needed = *LiveNodes(g, roots);
  }
  const int level = uniform(0, 2);
  rc.options.auto_cluster = level != 0;  // kOn1 and kOn2 behave alike
  rc.options.min_cluster_size = uniform(1, 5);
  if (uniform(0, 1)) rc.options.max_cluster_size = uniform(2, 8);
  return rc;
}

TEST(ClusteringPropertyTest, RandomGraphsSatisfyEveryRule) {
  constexpr int kCases = 600;
  std::map<ExclusionReason, int> node_reasons;
  std::map<ExclusionReason, int> merge_refusals;
  int clusters = 0, explicit_clusters = 0, auto_clusters = 0;
  for (uint32_t seed = 1; seed <= kCases; ++seed) {
    RandomCase rc = MakeRandomCase(seed);
    const Graph& g = *rc.graph;
    SCOPED_TRACE("seed " + std::to_string(seed));
    ASSERT_TRUE(g.status().ok()) << g.status();
    ASSERT_TRUE(g.jit_frames().empty());
    absl::StatusOr<ClusteringResult> r = MarkForCompilation(g, rc.options, rc.needed);
    ASSERT_TRUE(r.ok()) << r.status();
    testing_internal::ExpectValidClustering(g, rc.options, rc.needed, *r);
    if (::testing::Test::HasFailure()) {
      FAIL() << g.DebugString() << "\n" << r->DebugString();
    }
    // Deterministic: the executor caches plans keyed on the result.
    absl::StatusOr<ClusteringResult> again = MarkForCompilation(g, rc.options, rc.needed);
    ASSERT_TRUE(again.ok());
    EXPECT_EQ(again->DebugString(), r->DebugString());

    for (const NodeClustering& n : r->nodes) ++node_reasons[n.reason];
    for (const MergeRefusal& m : r->refusals) ++merge_refusals[m.reason];
    for (const Cluster& c : r->clusters) {
      ++clusters;
      ++(c.explicit_scope ? explicit_clusters : auto_clusters);
    }
  }
  // The generator must reach every interesting situation, or the rules above were
  // checked on easy graphs only.
  EXPECT_GT(explicit_clusters, 100);
  EXPECT_GT(auto_clusters, 100);
  for (ExclusionReason reason :
       {ExclusionReason::kNone, ExclusionReason::kNotNeeded, ExclusionReason::kNoLowering,
        ExclusionReason::kStateful, ExclusionReason::kMarkedNoCompile, ExclusionReason::kJitOff,
        ExclusionReason::kWouldFormCycle, ExclusionReason::kDifferentDevice,
        ExclusionReason::kMaxClusterSize, ExclusionReason::kClusterTooSmall}) {
    EXPECT_GT(node_reasons[reason], 0) << ExclusionReasonName(reason);
  }
  for (ExclusionReason reason :
       {ExclusionReason::kScopeConflict, ExclusionReason::kWouldFormCycle,
        ExclusionReason::kDifferentDevice, ExclusionReason::kMaxClusterSize}) {
    EXPECT_GT(merge_refusals[reason], 0) << ExclusionReasonName(reason);
  }
  std::string summary;
  for (const auto& [reason, count] : node_reasons) {
    summary += std::string(ExclusionReasonName(reason)) + "=" + std::to_string(count) + " ";
  }
  RecordProperty("node_reasons", summary);
}

}  // namespace
}  // namespace braze
