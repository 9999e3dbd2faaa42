#include "passes/mark_for_compilation.h"

#include <algorithm>
#include <map>
#include <optional>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "braze/device_type.h"
#include "passes/graph_cycles.h"

namespace braze {

namespace {

std::string Quoted(const Node& node) { return absl::StrCat("'", node.name(), "'"); }

// Placed on a forced-compilation "jit:" device, by a DeviceScope or as the session's
// default device (device.h: XLA_CPU's rule): compiled as under a compiling JitScope.
bool ForcedCompile(const Node& node, const ClusteringOptions& options) {
  return EffectiveDevice(node, options).force_compile;
}

// A refused merge, kept on both clusters: if a cluster ends up dissolved, the refusal is
// the real reason its ops are left out, more useful than "too small".
struct Refusal {
  ExclusionReason reason = ExclusionReason::kNone;
  std::string text;
};

// Union-find over node ids plus the contracted (cluster) graph. Every id is its own
// cluster at first; non-candidates stay singletons so paths through them are still seen
// by the cycle check. A cluster is named by its representative, which is also its node
// in `cycles_`.
class Clusterer {
 public:
  Clusterer(const Graph& graph, const ClusteringOptions& options,
            const std::vector<bool>& candidate)
      : graph_(graph), options_(options), candidate_(candidate), cycles_(graph.num_nodes()) {
    const int n = graph.num_nodes();
    parent_.resize(n);
    size_.assign(n, 1);
    matmuls_.assign(n, 0);
    explicit_.assign(n, false);
    scope_.resize(n);
    refusal_.resize(n);
    for (int id = 0; id < n; ++id) {
      parent_[id] = id;
      const Node& node = graph.node(id);
      // Convolutions count as matmuls: each is a library call or a big loop nest of its
      // own, as XLA keeps convolutions and dots out of fusions.
      const OpKind op = node.op();
      matmuls_[id] = OpCategoryOf(op) == OpCategory::kMatMul || op == OpKind::kConv2D ||
                             op == OpKind::kConv2DBackpropInput ||
                             op == OpKind::kConv2DBackpropFilter
                         ? 1
                         : 0;
      // Ops on a forced-compilation "jit:" device count as explicitly compiled.
      explicit_[id] = node.jit().compile.value_or(false) || ForcedCompile(node, options_);
      scope_[id] = node.jit().scope;
      // Ids are topological, so these insertions never reorder or fail.
      for (int p : Producers(id)) cycles_.InsertEdge(p, id);
    }
    for (const auto& [from, to] : options.extra_edges) {
      if (from >= 0 && from < to && to < n) cycles_.InsertEdge(from, to);
    }
  }

  // Contracts edges until nothing merges. With `explicit_only`, one side of every merge
  // must hold a compile=true op: unscoped ops then attach to scoped clusters before any
  // auto-clustering can claim them, and under kOff no pointless merges happen.
  void ContractEdges(bool explicit_only) {
    bool changed = true;
    while (changed) {
      changed = false;
      // Refusals are recomputed each sweep: the last sweep merges nothing and tries every
      // edge, so what it records is current.
      for (Refusal& r : refusal_) r = Refusal();
      edge_refusals_.clear();
      for (int id = 0; id < graph_.num_nodes(); ++id) {
        if (!candidate_[id]) continue;
        for (int p : Producers(id)) {
          if (!candidate_[p]) continue;
          const int from = Find(p);
          const int to = Find(id);
          if (from == to) continue;
          if (explicit_only && !explicit_[from] && !explicit_[to]) continue;
          if (TryMerge(from, to, p, id)) changed = true;
        }
      }
    }
  }

  int Find(int id) {
    while (parent_[id] != id) {
      parent_[id] = parent_[parent_[id]];
      id = parent_[id];
    }
    return id;
  }
  int size(int rep) const { return size_[rep]; }
  bool is_explicit(int rep) const { return explicit_[rep]; }
  const std::string& scope(int rep) const { return scope_[rep]; }
  const Refusal& refusal(int rep) const { return refusal_[rep]; }
  std::vector<MergeRefusal> TakeEdgeRefusals() { return std::move(edge_refusals_); }

 private:
  std::vector<int> Producers(int id) const {
    std::vector<int> out;
    for (const Tensor& in : graph_.node(id).inputs()) {
      // Inputs of erroneous nodes may be invalid; the graph's status reports those.
      if (in.valid() && in.graph() == &graph_ && in.node_id() >= 0 && in.node_id() < id) {
        out.push_back(in.node_id());
      }
    }
    return out;
  }

  // Tries to contract the edge from cluster `from` (holding producer `p`) to cluster
  // `to` (holding consumer `c`).
  bool TryMerge(int from, int to, int p, int c) {
    const Node& pn = graph_.node(p);
    const Node& cn = graph_.node(c);
    const Device pd = EffectiveDevice(pn, options_), cd = EffectiveDevice(cn, options_);
    if (pd != cd) {
      Refuse(from, to, p, c, ExclusionReason::kDifferentDevice,
             absl::StrCat(Quoted(pn), " is on device \"", pd.ToString(), "\" but its consumer ",
                          Quoted(cn), " is on \"", cd.ToString(), "\""));
      return false;
    }
    if (!scope_[from].empty() && !scope_[to].empty() && scope_[from] != scope_[to]) {
      Refuse(from, to, p, c, ExclusionReason::kScopeConflict,
             absl::StrCat("merging ", Quoted(pn), " (", scope_[from], ") with ", Quoted(cn), " (",
                          scope_[to], ") would mix two JIT scopes"));
      return false;
    }
    if (size_[from] > options_.max_cluster_size - size_[to]) {
      Refuse(from, to, p, c, ExclusionReason::kMaxClusterSize,
             absl::StrCat("merging the clusters of ", Quoted(pn), " and ", Quoted(cn),
                          " would make ", size_[from] + size_[to], " ops, over max_cluster_size ",
                          options_.max_cluster_size));
      return false;
    }
    if (matmuls_[from] + matmuls_[to] > options_.max_matmuls_per_cluster) {
      Refuse(from, to, p, c, ExclusionReason::kMatMulLimit,
             absl::StrCat("merging the clusters of ", Quoted(pn), " and ", Quoted(cn),
                          " would put ", matmuls_[from] + matmuls_[to],
                          " matmuls in one cluster, over max_matmuls_per_cluster ",
                          options_.max_matmuls_per_cluster));
      return false;
    }
    const std::optional<int> survivor = cycles_.ContractEdge(from, to);
    if (!survivor.has_value()) {
      const int via = cycles_.PathWitness(from, to);
      Refuse(from, to, p, c, ExclusionReason::kWouldFormCycle,
             absl::StrCat("merging ", Quoted(pn), " with its consumer ", Quoted(cn),
                          " would form a cycle through ",
                          via >= 0 ? Quoted(graph_.node(via)) : "another path"));
      return false;
    }
    const int keep = *survivor;
    const int gone = keep == from ? to : from;
    parent_[gone] = keep;
    size_[keep] += size_[gone];
    matmuls_[keep] += matmuls_[gone];
    explicit_[keep] = explicit_[keep] || explicit_[gone];
    if (scope_[keep].empty()) scope_[keep] = scope_[gone];
    if (refusal_[keep].reason == ExclusionReason::kNone) refusal_[keep] = refusal_[gone];
    return true;
  }

  void Refuse(int a, int b, int p, int c, ExclusionReason reason, std::string text) {
    for (int rep : {a, b}) {
      if (refusal_[rep].reason == ExclusionReason::kNone) refusal_[rep] = {reason, text};
    }
    edge_refusals_.push_back({p, c, reason, std::move(text)});
  }

  const Graph& graph_;
  const ClusteringOptions& options_;
  const std::vector<bool>& candidate_;
  GraphCycles cycles_;
  std::vector<int> parent_;
  std::vector<int> matmuls_;  // MatMul/BatchMatMul ops per cluster representative
  std::vector<int> size_;
  std::vector<bool> explicit_;
  std::vector<std::string> scope_;
  std::vector<Refusal> refusal_;
  std::vector<MergeRefusal> edge_refusals_;
};

// The reason a node is not even a candidate, or kNone.
ExclusionReason CandidateCheck(const Node& node, bool needed, const ClusteringOptions& options,
                               std::string* text) {
  if (!needed) {
    *text = absl::StrCat(Quoted(node), " is not needed by the fetches or targets");
    return ExclusionReason::kNotNeeded;
  }
  if (!OpIsCompilable(node.op())) {
    if (node.op() == OpKind::kHostCall) {
      *text = absl::StrCat(Quoted(node), " (HostCall) runs a user C++ function; never compiled");
      return ExclusionReason::kNoLowering;
    }
    if (OpCategoryOf(node.op()) == OpCategory::kControlFlow) {  // cf (issue 40)
      *text = absl::StrCat(Quoted(node), " (", node.op_name(),
                           ") is control flow: a step of its own, its bodies compiled apart");
      return ExclusionReason::kNoLowering;
    }
    if (node.op() == OpKind::kPlaceholder) {
      *text = absl::StrCat(Quoted(node), " (Placeholder) is fed at run time; no lowering");
      return ExclusionReason::kNoLowering;
    }
    *text = absl::StrCat(Quoted(node), " (", node.op_name(),
                         ") is stateful: variables and their updates live on the host");
    return ExclusionReason::kStateful;
  }
  if (node.jit().compile == false && !ForcedCompile(node, options)) {
    *text = absl::StrCat(Quoted(node), " was built under JitScope ", node.jit().scope,
                         " whose compile_ops is false for it");
    return ExclusionReason::kMarkedNoCompile;
  }
  return ExclusionReason::kNone;
}

}  // namespace

Device EffectiveDevice(const Node& node, const ClusteringOptions& options) {
  return node.device().value_or(options.default_device);
}

const char* ExclusionReasonName(ExclusionReason reason) {
  switch (reason) {
    case ExclusionReason::kNone:
      return "clustered";
    case ExclusionReason::kNotNeeded:
      return "not needed";
    case ExclusionReason::kNoLowering:
      return "no lowering";
    case ExclusionReason::kStateful:
      return "stateful";
    case ExclusionReason::kMarkedNoCompile:
      return "marked compile=false";
    case ExclusionReason::kJitOff:
      return "jit off";
    case ExclusionReason::kScopeConflict:
      return "scope conflict";
    case ExclusionReason::kWouldFormCycle:
      return "would form a cycle";
    case ExclusionReason::kDifferentDevice:
      return "different device";
    case ExclusionReason::kMatMulLimit:
      return "matmul limit";
    case ExclusionReason::kMaxClusterSize:
      return "over max cluster size";
    case ExclusionReason::kClusterTooSmall:
      return "cluster too small";
    case ExclusionReason::kLibraryCall:
      return "library call";
    case ExclusionReason::kGatedUpdate:
      return "gated update";
  }
  return "?";
}

int ClusteringResult::ClusterOf(int node_id) const {
  if (node_id < 0 || node_id >= static_cast<int>(nodes.size())) return -1;
  return nodes[node_id].cluster;
}

std::string ClusteringResult::ClusterNameOf(int node_id) const {
  const int c = ClusterOf(node_id);
  return c < 0 ? "" : clusters[c].name;
}

std::string ClusteringResult::DebugString() const {
  int clustered = 0;
  for (const Cluster& c : clusters) clustered += static_cast<int>(c.nodes.size());
  std::string out = absl::StrCat("mark_for_compilation: ", clusters.size(), " cluster(s), ",
                                 clustered, " of ", nodes.size(), " op(s) clustered\n");
  for (const Cluster& c : clusters) {
    std::map<std::string, int> histogram;
    for (int id : c.nodes) ++histogram[OpName(nodes[id].op)];
    std::vector<std::string> parts;
    for (const auto& [op, count] : histogram) parts.push_back(absl::StrCat(op, " x", count));
    std::vector<std::string> names;
    for (int id : c.nodes) names.push_back(nodes[id].node_name);
    absl::StrAppend(&out, "  ", c.name, ": ", c.nodes.size(), " op(s), ",
                    c.scope.empty() ? "auto" : c.scope, ", device ", c.device.ToString(), "; ",
                    absl::StrJoin(parts, ", "), "\n    ", absl::StrJoin(names, " "), "\n");
  }
  for (const MergeRefusal& r : refusals) {
    absl::StrAppend(&out, "  not merged [", ExclusionReasonName(r.reason), "] ", r.text, "\n");
  }
  std::map<std::string, int> reason_counts;
  for (const NodeClustering& n : nodes) {
    if (n.reason == ExclusionReason::kNone) continue;
    ++reason_counts[ExclusionReasonName(n.reason)];
    absl::StrAppend(&out, "  not clustered [", ExclusionReasonName(n.reason), "] ", n.explanation,
                    "\n");
  }
  if (!reason_counts.empty()) {
    std::vector<std::string> parts;
    for (const auto& [reason, count] : reason_counts) {
      parts.push_back(absl::StrCat(reason, ": ", count));
    }
    absl::StrAppend(&out, "  reasons: ", absl::StrJoin(parts, ", "), "\n");
  }
  return out;
}

absl::StatusOr<ClusteringResult> MarkForCompilation(const Graph& graph,
                                                    const ClusteringOptions& options,
                                                    const std::vector<bool>& needed) {
  const int n = graph.num_nodes();
  if (!needed.empty() && static_cast<int>(needed.size()) != n) {
    return absl::InvalidArgumentError(absl::StrCat("MarkForCompilation: `needed` has ",
                                                   needed.size(), " entries for ", n, " nodes"));
  }
  if (options.min_cluster_size < 1 || options.max_cluster_size < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("MarkForCompilation: cluster size limits must be positive (min ",
                     options.min_cluster_size, ", max ", options.max_cluster_size, ")"));
  }
  const bool auto_jit = options.auto_cluster;

  ClusteringResult result;
  result.nodes.resize(n);
  std::vector<bool> candidate(n, false);
  for (int id = 0; id < n; ++id) {
    const Node& node = graph.node(id);
    NodeClustering& nc = result.nodes[id];
    nc.node_name = node.name();
    nc.op = node.op();
    nc.reason = CandidateCheck(node, needed.empty() || needed[id], options, &nc.explanation);
    const ExclusionReason claimed = id < static_cast<int>(options.claimed.size())
                                        ? options.claimed[id]
                                        : ExclusionReason::kNone;
    if (nc.reason == ExclusionReason::kNone && claimed != ExclusionReason::kNone) {
      nc.reason = claimed;
      nc.explanation =
          claimed == ExclusionReason::kGatedUpdate
              ? absl::StrCat(Quoted(node), " (", node.op_name(),
                             ") gates a variable update: the runtime commits its value or none")
              : absl::StrCat(Quoted(node), " (", node.op_name(), ") runs as a cuBLAS GEMM on ",
                             EffectiveDevice(node, options).ToString());
    }
    candidate[id] = nc.reason == ExclusionReason::kNone;
  }

  // Dissolving a cluster can unblock merges between its neighbours (a path through it
  // may be gone), so cluster again without the dissolved ops until nothing dissolves.
  // Candidates only shrink, so this ends; usually after one or two rounds.
  for (;;) {
    Clusterer clusterer(graph, options, candidate);
    clusterer.ContractEdges(/*explicit_only=*/true);
    if (auto_jit) clusterer.ContractEdges(/*explicit_only=*/false);

    // Keep explicit clusters at any size; auto-clusters only with auto-jit and min size,
    // and with something to compute: Consts are bound once and copied to a device once,
    // while a cluster of only Consts would copy them again every Run (a Const whose only
    // consumer is a cuBLAS GEMM was such a kernel launch on an H200).
    std::vector<int> computing(n, 0);
    for (int id = 0; id < n; ++id) {
      if (candidate[id] && graph.node(id).op() != OpKind::kConst) ++computing[clusterer.Find(id)];
    }
    auto keep = [&](int rep) {
      return clusterer.is_explicit(rep) ||
             (auto_jit && clusterer.size(rep) >= options.min_cluster_size && computing[rep] > 0);
    };
    bool dissolved_any = false;
    for (int id = 0; id < n; ++id) {
      if (!candidate[id]) continue;
      const int rep = clusterer.Find(id);
      if (keep(rep)) continue;
      dissolved_any = true;
      candidate[id] = false;
      const Node& node = graph.node(id);
      std::string why =
          auto_jit && computing[rep] == 0
              ? absl::StrCat(Quoted(node),
                             "'s auto-cluster holds only constants, which are "
                             "bound once: nothing to compute")
          : auto_jit ? absl::StrCat(Quoted(node), "'s auto-cluster has ", clusterer.size(rep),
                                    " op(s), under min_cluster_size ", options.min_cluster_size)
                     : absl::StrCat(Quoted(node),
                                    " is outside any JitScope and global_jit_level is kOff, so "
                                    "it may only join a cluster of compile=true ops");
      NodeClustering& nc = result.nodes[id];
      const Refusal& refusal = clusterer.refusal(rep);
      if (refusal.reason != ExclusionReason::kNone) {
        nc.reason = refusal.reason;
        nc.explanation = absl::StrCat(refusal.text, "; ", why);
      } else {
        nc.reason = auto_jit ? ExclusionReason::kClusterTooSmall : ExclusionReason::kJitOff;
        nc.explanation = std::move(why);
      }
    }
    if (dissolved_any) continue;

    result.refusals = clusterer.TakeEdgeRefusals();
    std::vector<int> cluster_of_rep(n, -1);
    for (int id = 0; id < n; ++id) {
      if (!candidate[id]) continue;
      const int rep = clusterer.Find(id);
      if (cluster_of_rep[rep] < 0) {
        // Ids ascend, so clusters are numbered by their first op in topological order.
        cluster_of_rep[rep] = static_cast<int>(result.clusters.size());
        Cluster cluster;
        cluster.name = absl::StrCat("cluster_", result.clusters.size());
        cluster.scope = clusterer.scope(rep);
        cluster.device = EffectiveDevice(graph.node(id), options);
        cluster.explicit_scope = clusterer.is_explicit(rep);
        result.clusters.push_back(std::move(cluster));
      }
      result.nodes[id].cluster = cluster_of_rep[rep];
      result.clusters[cluster_of_rep[rep]].nodes.push_back(id);
    }
    return result;
  }
}

absl::StatusOr<bool> MarkForCompilationPass::Run(const Graph& graph) {
  absl::StatusOr<ClusteringResult> result = MarkForCompilation(graph, options_, needed_);
  if (!result.ok()) return result.status();
  result_ = *std::move(result);
  return !result_.clusters.empty();
}

}  // namespace braze
