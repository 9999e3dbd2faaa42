// Dead-code analysis: which nodes a Run must execute. The executor uses it to plan only
// what its fetches and targets depend on, and mark_for_compilation to leave the rest out
// of clusters (reason "not needed").
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
