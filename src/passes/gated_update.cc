// Gated update match; see gated_update.h.
#include "passes/gated_update.h"

#include <unordered_map>

namespace braze {

std::optional<GatedUpdate> MatchGatedUpdate(const Graph& g, int assign) {
  const Node& a = g.node(assign);
  if (a.op() != OpKind::kAssign || !a.status().ok()) return std::nullopt;
  const Tensor variable = a.input(0);
  const Tensor selected = a.input(1);
  const Node& s = selected.node();
  if (s.op() != OpKind::kSelect || !s.status().ok() || variable.node().op() != OpKind::kVariable) {
    return std::nullopt;
  }
  const Tensor gate = s.input(0), value = s.input(1);
  // The Select's result is the value or the variable whole: no broadcast of either.
  const TensorType want = variable.type();
  const bool whole = value.type() == want && selected.type() == want && IsFullyDefined(want.shape);
  if (s.input(2) != variable || gate.dtype() != DType::kBool || gate.rank() != 0 || !whole) {
    return std::nullopt;
  }
  return GatedUpdate{s.id(), assign, gate, value, variable};
}

std::vector<GatedUpdate> MatchGatedUpdates(const Graph& g, const std::vector<bool>& needed,
                                           const std::set<std::pair<int, int>>& fetched) {
  const int n = g.num_nodes();
  std::vector<int> readers(n, 0);
  std::unordered_map<int, int> updates_of;  // variable node id -> needed updates
  for (int id = 0; id < n; ++id) {
    if (!needed[id]) continue;
    const Node& node = g.node(id);
    for (const Tensor& in : node.inputs()) ++readers[in.node_id()];
    if (OpCategoryOf(node.op()) == OpCategory::kState) ++updates_of[node.input(0).node_id()];
  }
  std::vector<GatedUpdate> matches;
  for (int id = 0; id < n; ++id) {
    if (!needed[id]) continue;
    std::optional<GatedUpdate> m = MatchGatedUpdate(g, id);
    if (!m || !needed[m->select] || readers[m->select] != 1 || fetched.count({m->select, 0}) ||
        updates_of[m->variable.node_id()] != 1) {
      continue;
    }
    matches.push_back(*m);
  }
  return matches;
}

}  // namespace braze
