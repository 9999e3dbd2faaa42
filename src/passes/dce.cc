#include "passes/dce.h"

#include "absl/strings/str_cat.h"

namespace braze {

absl::StatusOr<std::vector<bool>> LiveNodes(const Graph& graph, absl::Span<const Tensor> roots) {
  const int n = graph.num_nodes();
  std::vector<bool> live(n, false);
  for (const Tensor& t : roots) {
    if (!t.valid() || t.graph() != &graph || t.node_id() < 0 || t.node_id() >= n) {
      return absl::InvalidArgumentError(
          absl::StrCat("LiveNodes: a fetch or target ",
                       t.valid() ? "belongs to another graph" : "is an invalid (default) Tensor"));
    }
    live[t.node_id()] = true;
  }
  // Inputs precede their consumers, so one backward sweep over ids is the closure.
  for (int id = n - 1; id >= 0; --id) {
    if (!live[id]) continue;
    for (const Tensor& in : graph.node(id).inputs()) {
      if (in.valid() && in.graph() == &graph && in.node_id() >= 0 && in.node_id() < id) {
        live[in.node_id()] = true;
      }
    }
  }
  return live;
}

}  // namespace braze
