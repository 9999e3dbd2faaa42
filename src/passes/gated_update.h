// Gated update match: which variable updates are `Assign(v, Select(p, x, v))` with `p`
// a bool scalar, "v takes x if p, else keeps its value" (the form of a step that
// dynamic loss scaling skips when a gradient is not finite: optimizers.cc's Update).
// A planning stage (runtime/step_gated_update.cc claims the matches before clustering):
// the runtime commits x, or nothing, by the predicate, so the Select is never computed.
//
//   ... -> x --------------> Select(p, x, v) -> Assign(v, .)
//   p (bool scalar) ----------^            ^
//   v (the Variable itself) ---------------'
//
// Why: as an elementwise op the Select would join the cluster computing x, which then
// waits for p; when p reads every gradient of a training step (loss scaling's "all
// finite"), no update can be computed in its gradient's cluster, and every gradient
// and the optimizer's intermediates cross cluster boundaries (the f16 MLP step's 7.5 MB
// of activations, docs/MIXED_PRECISION.md). Claimed, the Select is a cluster boundary
// that computes nothing: x is computed where its inputs are, and p decides the commit.
//
// Pure graph logic, tested on the CPU (test/passes/gated_update_test.cc).
#ifndef BRAZE_PASSES_GATED_UPDATE_H_
#define BRAZE_PASSES_GATED_UPDATE_H_

#include <optional>
#include <set>
#include <utility>
#include <vector>

#include "braze/graph.h"

namespace braze {

struct GatedUpdate {
  int select = -1;  // node ids
  int assign = -1;
  Tensor gate;      // p: bool, rank 0
  Tensor value;     // x: the variable's static type
  Tensor variable;  // v: the Variable
};

// The pattern at Assign node `assign` alone (node ids, types and inputs; not whether
// anything else reads the Select), or nothing.
std::optional<GatedUpdate> MatchGatedUpdate(const Graph& graph, int assign);

// Every match among the `needed` nodes (by node id) whose Select has no other needed
// reader and is not fetched (`fetched`: (node id, output index) pairs), on a variable
// that no other needed op updates (several updates of one variable chain, plan.h).
std::vector<GatedUpdate> MatchGatedUpdates(const Graph& graph, const std::vector<bool>& needed,
                                           const std::set<std::pair<int, int>>& fetched);

}  // namespace braze

#endif  // BRAZE_PASSES_GATED_UPDATE_H_
