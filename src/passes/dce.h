// Dead-code analysis: the nodes `roots` depend on, the transitive closure of their
// inputs. The plan does not call it: its prune stage (runtime/plan.cc) walks the same
// closure but stops at fed tensors, and hands the result to mark_for_compilation as
// `needed` (the rest is left out of clusters, reason "not needed"). Tests use LiveNodes
// to build that `needed` for a Run that feeds nothing.
#ifndef BRAZE_PASSES_DCE_H_
#define BRAZE_PASSES_DCE_H_

#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "braze/graph.h"

namespace braze {

// result[i] is true when node i is one of `roots`' nodes or an input (transitively) of
// one. InvalidArgument when a root is invalid or belongs to another graph.
absl::StatusOr<std::vector<bool>> LiveNodes(const Graph& graph, absl::Span<const Tensor> roots);

}  // namespace braze

#endif  // BRAZE_PASSES_DCE_H_
