// Rematerialization of cheap elementwise values across cluster steps (a plan stage
// between Steps and Order: runtime/plan.h).
//
// A cluster that computes an elementwise chain (GELU's tanh form, a softmax's exp and
// scaling, dropout's select) hands every value of the chain that a later cluster reads
// to it through memory: the forward pass of a training step writes each intermediate
// the backward pass reads, and the backward reads them all again. XLA duplicates cheap
// elementwise producers into each consumer fusion instead. This stage does the same at
// the step level: when a cluster step C reads a value E computed by an elementwise op of
// another cluster step P (same device), C gets its own copy of E's elementwise cone in
// P (E and its elementwise and Const ancestors in P, at most kMaxRematCone ops) and
// reads the cone's leaves instead of E, provided the leaves C does not read already
// take no more bytes than E. P stops writing E when no other step reads it.
//
// A step takes no cone that would make it hold more than `max_step_ops` ops (the plan
// passes SessionOptions::max_cluster_size + kMaxRematCone): copies must not undo the
// bound on a cluster's size, which bounds Halide's lowering time (with clusters of at
// most 256 ops, a chain's gradient steps took up to 92 ops of copies: 348 ops, 67 and
// 116 s to compile, against 14 s for a step of 259; docs/FUZZING_FAMILIES.md).
//
// Never rematerialized: random ops (their cost), reductions, matmuls, layout ops, and
// any cone with a leaf read from a Variable (a later step may have assigned it: the
// copy must read what P read). Leaves come from P or from steps before P, so C, which
// already ran after P, can read them with no new cycle.
#ifndef BRAZE_RUNTIME_REMAT_H_
#define BRAZE_RUNTIME_REMAT_H_

#include <set>
#include <utility>
#include <vector>

#include "braze/graph.h"
#include "runtime/plan.h"

namespace braze {

inline constexpr int kMaxRematCone = 16;

// Rewrites `steps` (the Steps stage's, unordered): cluster steps get their copies and
// new inputs, and every cluster step's outputs are recomputed from what the steps read
// and `fetched` ({node, output} pairs). Returns the indices of the steps whose nodes
// changed (their op-by-op fallbacks must be rebuilt).
std::vector<int> RematerializeElementwise(const Graph& g,
                                          const std::set<std::pair<int, int>>& fetched,
                                          int max_step_ops, std::vector<Step>* steps);

}  // namespace braze

#endif  // BRAZE_RUNTIME_REMAT_H_
