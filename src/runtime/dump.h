// Dumps for BRAZE_FLAGS --dump_to=DIR and --clustering_debug (runtime/flags.h): what the
// compiler did to a session's graph, in files a person can open.
//
// Each session that dumps gets a number, in the order it first dumps (session_0, ...),
// and each plan it builds (one per fetch/target/feed combination) a number too. In DIR:
//
//   session_S.plan_P.before_clustering.dot  the ops the plan runs (fed values included),
//                                           coloured by JitScope, edges with shapes
//   session_S.plan_P.after_clustering.dot   the same, clusters as `subgraph cluster_N`,
//                                           ops left out labelled with their exclusion
//                                           reason, refused merges as dashed red edges
//   session_S.<step>.<signature>.txt        per kernel a step gets (cluster or single
//                                           op; compiled or found in the compile cache):
//                                           its input/output types, the scheduler used,
//                                           and the lowered Halide statement / schedule
//   session_S.<step>.<signature>.cluster    beside each .txt: the step's cluster as text
//                                           (lower/cluster_text.h: ops, typed attrs,
//                                           constants byte for byte, argument types and
//                                           symbolic dims), from which ClusterFromText
//                                           rebuilds it to compile again (braze-tune)
//
// <signature> spells the input types ("f32_7x33__f32_33") or, when long, a stable hash
// of them. tools/braze-dump renders the .dot files. With --clustering_debug each new
// plan's ClusteringResult::DebugString() is logged (info, verbosity 0; braze/logging.h),
// so it goes to stderr unless the program installed a log sink.
#ifndef BRAZE_RUNTIME_DUMP_H_
#define BRAZE_RUNTIME_DUMP_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "braze/graph.h"
#include "compile/compile.h"
#include "runtime/plan.h"

namespace braze {

// One session's dump state. Not thread-safe: the session calls it under its own lock.
// Does nothing unless GetBrazeFlags() asks for dumps or clustering debug.
class SessionDumper {
 public:
  // A plan was built. Errors: the dump directory or a file could not be written.
  absl::Status OnPlanBuilt(const Graph& graph, const Plan& plan);
  // `step` got `kernel` for inputs of `types`; `input_symbols` are the symbolic dims the
  // kernel was compiled with (ClusterSpec::input_symbols; empty: concrete), which the
  // .cluster file records. Writes each .cluster file once per session and content.
  // `input_symbols` and `compiled_types`: a symbolic kernel's classes and the input
  // types it was compiled for (its estimates; empty: `types`), which its .cluster holds.
  absl::Status OnKernelReady(const Graph& graph, const Step& step,
                             const std::vector<TensorType>& types, const CompiledKernel& kernel,
                             const std::vector<std::vector<int>>& input_symbols = {},
                             const std::vector<TensorType>& compiled_types = {});

 private:
  int SessionId();  // assigned on first use, process-wide order

  int session_id_ = -1;
  int num_plans_ = 0;
  // .cluster files written: path -> hash of the text (a later plan may name another
  // cluster alike; that one is written over it, as its .txt is).
  std::map<std::string, uint64_t> cluster_files_;
};

enum class DotStage { kBeforeClustering, kAfterClustering };

// The plan's ops as a Graphviz digraph named `title` (also its caption).
std::string PlanToDot(const Graph& graph, const Plan& plan, DotStage stage,
                      const std::string& title);

// "f32_7x33__f32_33": `types` as a file-name fragment (a hash when over 80 characters).
std::string SignatureFileName(const std::vector<TensorType>& types);

}  // namespace braze

#endif  // BRAZE_RUNTIME_DUMP_H_
