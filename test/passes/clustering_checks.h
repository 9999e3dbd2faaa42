// Independent checks of a ClusteringResult against the clustering rules, shared by the
// unit tests and the randomized property test. They recompute everything from the graph
// rather than trusting the pass's bookkeeping.
#ifndef BRAZE_TEST_PASSES_CLUSTERING_CHECKS_H_
#define BRAZE_TEST_PASSES_CLUSTERING_CHECKS_H_

#include <algorithm>
#include <string>
#include <vector>

#include "braze/graph.h"
#include "gtest/gtest.h"
#include "passes/mark_for_compilation.h"

namespace braze {
namespace testing_internal {

inline bool Lowerable(OpKind op) {
  return op != OpKind::kPlaceholder && op != OpKind::kVariable && op != OpKind::kAssign &&
         op != OpKind::kAssignAdd && op != OpKind::kAssignSub && op != OpKind::kHostCall;
}

// The contracted graph: one vertex per cluster, one per unclustered node.
struct Quotient {
  std::vector<int> vertex_of;  // per node
  std::vector<std::vector<int>> succ;
};

inline Quotient BuildQuotient(const Graph& g, const ClusteringResult& r) {
  Quotient q;
  const int num_clusters = static_cast<int>(r.clusters.size());
  int next = num_clusters;
  q.vertex_of.resize(g.num_nodes());
  for (int id = 0; id < g.num_nodes(); ++id) {
    q.vertex_of[id] = r.nodes[id].cluster >= 0 ? r.nodes[id].cluster : next++;
  }
  q.succ.resize(next);
  for (int id = 0; id < g.num_nodes(); ++id) {
    for (const Tensor& in : g.node(id).inputs()) {
      const int a = q.vertex_of[in.node_id()], b = q.vertex_of[id];
      if (a != b) q.succ[a].push_back(b);
    }
  }
  return q;
}

inline bool IsAcyclic(const Quotient& q) {
  std::vector<int> indegree(q.succ.size(), 0);
  for (const auto& s : q.succ) {
    for (int v : s) ++indegree[v];
  }
  std::vector<int> ready;
  for (size_t v = 0; v < q.succ.size(); ++v) {
    if (indegree[v] == 0) ready.push_back(static_cast<int>(v));
  }
  size_t seen = 0;
  while (!ready.empty()) {
    const int v = ready.back();
    ready.pop_back();
    ++seen;
    for (int w : q.succ[v]) {
      if (--indegree[w] == 0) ready.push_back(w);
    }
  }
  return seen == q.succ.size();
}

// Whether `to` is reachable from `from` without using a direct from->to edge.
inline bool HasIndirectPath(const Quotient& q, int from, int to) {
  std::vector<bool> seen(q.succ.size(), false);
  std::vector<int> stack;
  for (int s : q.succ[from]) {
    if (s != to && !seen[s]) {
      seen[s] = true;
      stack.push_back(s);
    }
  }
  while (!stack.empty()) {
    const int v = stack.back();
    stack.pop_back();
    if (v == to) return true;
    for (int w : q.succ[v]) {
      if (!seen[w]) {
        seen[w] = true;
        stack.push_back(w);
      }
    }
  }
  return false;
}

// Checks every rule; `needed` empty means all nodes.
inline void ExpectValidClustering(const Graph& g, const ClusteringOptions& opts,
                                  const std::vector<bool>& needed, const ClusteringResult& r) {
  const int n = g.num_nodes();
  ASSERT_EQ(static_cast<int>(r.nodes.size()), n);
  auto is_needed = [&](int id) { return needed.empty() || needed[id]; };

  // Per node: cluster xor reason, and the reasons that follow from the node alone.
  for (int id = 0; id < n; ++id) {
    const Node& node = g.node(id);
    const NodeClustering& nc = r.nodes[id];
    SCOPED_TRACE(node.name());
    EXPECT_EQ(nc.cluster >= 0, nc.reason == ExclusionReason::kNone);
    if (nc.cluster < 0) {
      EXPECT_NE(nc.explanation.find(node.name()), std::string::npos) << nc.explanation;
    }
    EXPECT_EQ(nc.node_name, node.name());
    if (!is_needed(id)) {
      EXPECT_EQ(nc.reason, ExclusionReason::kNotNeeded);
    } else if (!Lowerable(node.op())) {
      EXPECT_TRUE(nc.reason == ExclusionReason::kNoLowering ||
                  nc.reason == ExclusionReason::kStateful);
    } else if (node.jit().compile == false) {
      EXPECT_EQ(nc.reason, ExclusionReason::kMarkedNoCompile);
    } else if (node.jit().compile == true) {
      EXPECT_GE(nc.cluster, 0) << "explicitly compiled ops always compile";
    } else if (nc.cluster < 0) {
      EXPECT_NE(nc.reason, ExclusionReason::kNotNeeded);
      EXPECT_NE(nc.reason, ExclusionReason::kMarkedNoCompile);
      EXPECT_NE(nc.reason, ExclusionReason::kNoLowering);
      if (!opts.auto_cluster) {
        EXPECT_NE(nc.reason, ExclusionReason::kClusterTooSmall);
      } else {
        EXPECT_NE(nc.reason, ExclusionReason::kJitOff);
      }
    }
  }

  // Per cluster: membership, ordering and the merge rules.
  for (size_t c = 0; c < r.clusters.size(); ++c) {
    const Cluster& cl = r.clusters[c];
    SCOPED_TRACE(cl.name);
    EXPECT_EQ(cl.name, "cluster_" + std::to_string(c));
    ASSERT_FALSE(cl.nodes.empty());
    EXPECT_TRUE(std::is_sorted(cl.nodes.begin(), cl.nodes.end()));
    if (c > 0) {
      EXPECT_LT(r.clusters[c - 1].nodes[0], cl.nodes[0]);
    }
    EXPECT_LE(static_cast<int>(cl.nodes.size()), opts.max_cluster_size);
    bool has_explicit = false;
    for (int id : cl.nodes) {
      const Node& node = g.node(id);
      EXPECT_EQ(r.nodes[id].cluster, static_cast<int>(c));
      EXPECT_TRUE(is_needed(id));
      EXPECT_TRUE(Lowerable(node.op()));
      EXPECT_NE(node.jit().compile, false);
      EXPECT_EQ(node.device().value_or(Device{}), cl.device);
      if (!node.jit().scope.empty()) {
        EXPECT_EQ(node.jit().scope, cl.scope);
      }
      has_explicit = has_explicit || node.jit().compile == true;
    }
    EXPECT_EQ(cl.explicit_scope, has_explicit);
    if (!has_explicit) {
      EXPECT_TRUE(opts.auto_cluster);
      EXPECT_GE(static_cast<int>(cl.nodes.size()), opts.min_cluster_size);
    }
    // Merges happen along edges only, so a cluster is weakly connected.
    std::vector<int> members = cl.nodes;
    std::vector<bool> reached(n, false);
    std::vector<int> stack = {members[0]};
    reached[members[0]] = true;
    while (!stack.empty()) {
      const int v = stack.back();
      stack.pop_back();
      auto visit = [&](int w) {
        if (r.nodes[w].cluster == static_cast<int>(c) && !reached[w]) {
          reached[w] = true;
          stack.push_back(w);
        }
      };
      for (const Tensor& in : g.node(v).inputs()) visit(in.node_id());
      for (int w : members) {
        for (const Tensor& in : g.node(w).inputs()) {
          if (in.node_id() == v) visit(w);
        }
      }
    }
    for (int id : members) EXPECT_TRUE(reached[id]) << g.node(id).name() << " is detached";
  }

  const Quotient q = BuildQuotient(g, r);
  EXPECT_TRUE(IsAcyclic(q)) << "cluster graph has a cycle\n" << r.DebugString();

  // Local maximality: two kept clusters joined by an edge were not merged for a reason
  // that still holds. (Both kept clusters were whole during the pass's final sweep.)
  for (int id = 0; id < n; ++id) {
    for (const Tensor& in : g.node(id).inputs()) {
      const int a = r.nodes[in.node_id()].cluster, b = r.nodes[id].cluster;
      if (a < 0 || b < 0 || a == b) continue;
      const Cluster& ca = r.clusters[a];
      const Cluster& cb = r.clusters[b];
      const bool blocked =
          ca.device != cb.device ||
          (!ca.scope.empty() && !cb.scope.empty() && ca.scope != cb.scope) ||
          static_cast<int>(ca.nodes.size() + cb.nodes.size()) > opts.max_cluster_size ||
          HasIndirectPath(q, a, b);
      EXPECT_TRUE(blocked) << ca.name << " -> " << cb.name << " could have merged\n"
                           << r.DebugString();
    }
  }
}

}  // namespace testing_internal
}  // namespace braze

#endif  // BRAZE_TEST_PASSES_CLUSTERING_CHECKS_H_
