// mark_for_compilation: partitions a graph's compilable ops into clusters, each of which
// becomes one Halide pipeline. This is TensorFlow's MarkForCompilationPass:
//
// 1. Candidates. An op is a candidate when it must run, has a Halide lowering (every op
//    except Placeholder, Variable, Assign/AssignAdd/AssignSub and HostCall; Const is a
//    candidate) and was not built under a compile=false JitScope. Ops built under a
//    compile=true scope are always candidates. Ops built outside any scope are candidates
//    too, but under global_jit_level kOff they survive only inside a cluster that also
//    holds a compile=true op ("ops outside any scope may join a cluster of compile=true
//    ops", per the seed documentation).
// 2. Union-find plus edge contraction. Producer->consumer edges are visited with the
//    consumer in topological order, repeatedly until nothing merges. Two clusters merge
//    only when they are on the same device (EffectiveDevice, equal), their
//    scopes are compatible (equal, or at least one side holds only unscoped ops: unscoped
//    ops may bridge into a scope but never join two different scopes), the merged size is
//    at most max_cluster_size, and contracting the edge creates no cycle, i.e. no other
//    path leads from the producer's cluster to the consumer's through a third cluster
//    (checked with GraphCycles, passes/graph_cycles.h). Edges touching a compile=true
//    cluster are contracted first, so unscoped ops join scopes before auto-clustering.
// 3. Pruning. A cluster with no compile=true op is an auto-cluster: it is dissolved under
//    kOff, and under kOn1/kOn2 when smaller than min_cluster_size. Clusters that hold an
//    explicitly compiled op are kept however small. Merges stop at max_cluster_size for
//    explicit scopes too: a larger scope becomes several clusters, each compiled (the
//    plan says so in the log: runtime/plan.cc).
//    Dissolved ops leave the candidates and steps 2-3 rerun, since a dissolved cluster
//    may have been the only obstacle between two others.
//
// The result is deterministic: the same graph and options give the same clusters.
//
// kOn1 and kOn2 behave identically, as in TensorFlow, whose config.proto documents the
// two levels as "at present, no distinction" (higher was meant to mean more aggressive).
//
// Every op left out of all clusters carries a reason and a sentence naming the ops
// involved; ClusteringResult::DebugString() prints clusters, an op histogram per cluster
// and every exclusion.
#ifndef BRAZE_PASSES_MARK_FOR_COMPILATION_H_
#define BRAZE_PASSES_MARK_FOR_COMPILATION_H_

#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "braze/graph.h"
#include "passes/pass.h"

namespace braze {

// Why an op is in no cluster. kNone: it is in one.
enum class ExclusionReason {
  kNone,
  kNotNeeded,        // not in the set of ops that must run
  kNoLowering,       // Placeholder (fed or host input) or HostCall (user C++ function)
  kStateful,         // Variable, Assign, AssignAdd, AssignSub: state lives on the host
  kMarkedNoCompile,  // built under a compile=false JitScope (or its predicate said no)
  kJitOff,           // outside any scope, global_jit_level kOff, joined no scoped cluster
  kScopeConflict,    // its only merges would have mixed two different scopes
  kWouldFormCycle,   // its merges would have made the cluster graph cyclic
  kDifferentDevice,  // its neighbours are placed on another device
  kMaxClusterSize,   // merging would have exceeded max_cluster_size
  kMatMulLimit,      // merging would have put more matmuls in one cluster than allowed
  kClusterTooSmall,  // auto-cluster smaller than min_cluster_size
  kLibraryCall,      // runs as a library call (a cuBLAS GEMM on CUDA), a cluster boundary
  kGatedUpdate,      // a Select(p, x, v) that only gates Assign(v, .): the commit decides
};
const char* ExclusionReasonName(ExclusionReason reason);  // "would form a cycle"

struct ClusteringOptions {
  // Session-level auto-clustering (SessionOptions::global_jit_level kOn1/kOn2): every
  // compilable op may be clustered. false (kOff): only ops under a compiling JitScope,
  // and unscoped ops that join them.
  bool auto_cluster = false;
  // Smallest auto-cluster kept (TensorFlow's default); explicit scopes ignore it.
  int min_cluster_size = 4;
  int max_cluster_size = std::numeric_limits<int>::max();
  // Most MatMul/BatchMatMul ops one cluster may hold (a cluster is one pipeline, one
  // schedule: see SessionOptions::max_matmuls_per_cluster).
  int max_matmuls_per_cluster = std::numeric_limits<int>::max();
  // The device of ops built with no placement, so that they cluster with ops explicitly
  // placed on the session's default device.
  Device default_device;
  // By node id: ops a step kind of the runtime runs instead, and why (kNone: not
  // claimed): kLibraryCall, cuBLAS GEMMs on CUDA with their folded epilogue;
  // kGatedUpdate, a variable update gated by a bool scalar (passes/gated_update.h).
  // Never clustered. Empty: none.
  std::vector<ExclusionReason> claimed;
  // Ordering edges (from, to), from < to, besides the ops' inputs: the runtime runs
  // several updates of one variable in order, each reading the one before (no cluster
  // may hold an op before the first and one after the second).
  std::vector<std::pair<int, int>> extra_edges;
};

// A node's device, no placement resolved to `default_device`.
Device EffectiveDevice(const Node& node, const ClusteringOptions& options);

struct NodeClustering {
  int cluster = -1;  // index into ClusteringResult::clusters, or -1
  ExclusionReason reason = ExclusionReason::kNone;
  std::string explanation;  // a sentence naming the op (and what blocked it); empty if clustered
  std::string node_name;    // copies, so the result prints without the graph
  OpKind op = OpKind::kPlaceholder;
};

struct Cluster {
  std::string name;        // "cluster_0", numbered by first op in topological order
  std::vector<int> nodes;  // node ids, ascending (ids are a topological order)
  std::string scope;       // the JitScope id, or "" for an auto-cluster
  Device device;
  bool explicit_scope = false;  // holds at least one compile=true op
};

// An edge whose endpoints' clusters were not merged, and why (as of the final sweep).
struct MergeRefusal {
  int producer = -1;  // node ids of the edge
  int consumer = -1;
  ExclusionReason reason = ExclusionReason::kNone;
  std::string text;
};

struct ClusteringResult {
  std::vector<NodeClustering> nodes;  // indexed by node id
  std::vector<Cluster> clusters;
  // Edges between two candidates left in different clusters by a merge rule. Scope
  // conflicts and cycles between two kept clusters show up only here, not on nodes.
  std::vector<MergeRefusal> refusals;

  // The cluster index of node `node_id`, or -1 (also for ids out of range).
  int ClusterOf(int node_id) const;
  // The cluster's name, or "" when the node is in none.
  std::string ClusterNameOf(int node_id) const;
  ExclusionReason ReasonOf(int node_id) const { return nodes.at(node_id).reason; }
  // Clusters with sizes, scopes and an op histogram each; refused merges; every excluded
  // op with its reason; a count per reason.
  std::string DebugString() const;
};

// Clusters `graph`. `needed[i]` says whether node i must run (the plan's prune stage
// passes what its fetches and targets need, stopping at fed tensors: runtime/plan.cc;
// LiveNodes in passes/dce.h computes it when nothing is fed); empty means all.
// Errors: InvalidArgument for a `needed` of the wrong size or non-positive size limits.
absl::StatusOr<ClusteringResult> MarkForCompilation(const Graph& graph,
                                                    const ClusteringOptions& options,
                                                    const std::vector<bool>& needed = {});

// The same as a GraphPass, for pipelines and dumps. Run returns true when at least one
// cluster formed.
class MarkForCompilationPass : public GraphPass {
 public:
  explicit MarkForCompilationPass(ClusteringOptions options, std::vector<bool> needed = {})
      : options_(options), needed_(std::move(needed)) {}
  std::string name() const override { return "mark_for_compilation"; }
  absl::StatusOr<bool> Run(const Graph& graph) override;
  // The result of the last successful Run.
  const ClusteringResult& result() const { return result_; }

 private:
  ClusteringOptions options_;
  std::vector<bool> needed_;
  ClusteringResult result_;
};

}  // namespace braze

#endif  // BRAZE_PASSES_MARK_FOR_COMPILATION_H_
