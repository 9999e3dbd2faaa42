// Reductions of one cluster that can share a pass over their input (docs/CONVOLUTIONS.md,
// "fewer passes over the activations"):
//  - sibling Sums and Means: over inputs of one shape and the same axes, none reading
//    another's result, each its own reduction before; lowered as one multi-output
//    reduction (a Tuple accumulator over one RDom: lower_reduce.cc LowerSiblingSums).
//    A batch norm's backward sums (of dy, of dy * (x - mean), ...) are such siblings.
//  - moments: m = Mean(x, axes, keep_dims) and v = Mean(Square(x - m), axes), a batch
//    norm's statistics, which read x twice (the variance after the mean); lowered as
//    one pass over x (LowerMoments: the sums of x, of x - k and of (x - k)^2, with k an
//    element of x's reduced domain, in f64).
// Only column reductions (x's innermost dim is not reduced) are taken: a row reduction
// (LayerNorm's, softmax's) is a row pipeline of the safe default, which already reads
// each row once from cache. CPU only, static shapes only, f32 inputs only.
//
// The plan also gives the order to lower the nodes in: spec.nodes' order, but for each
// group of siblings lowered at once where the last of their inputs is ready (its
// members' consumers after it). A plan whose groups would make a cycle has no groups.
#ifndef BRAZE_LOWER_SIBLING_REDUCTIONS_H_
#define BRAZE_LOWER_SIBLING_REDUCTIONS_H_

#include <cstddef>
#include <map>
#include <set>
#include <vector>

#include "lower/cluster_spec.h"

namespace braze {
namespace lower {

struct SiblingReductions {
  std::vector<size_t> order;               // positions in spec.nodes, in lowering order
  std::map<int, std::vector<int>> groups;  // leader id -> every member's id (2+), leader first
  std::set<int> followers;                 // members lowered by their leader
  std::map<int, int> moments;              // mean's id -> variance's id
};

// `enabled` false (a GPU lowering): no groups and no moments, spec.nodes' order.
SiblingReductions FindSiblingReductions(const ClusterSpec& spec, bool enabled);

}  // namespace lower
}  // namespace braze

#endif  // BRAZE_LOWER_SIBLING_REDUCTIONS_H_
