// Symbolic shapes: which dims of the values a cluster computes are symbolic, given
// which dims of its inputs are (ClusterSpec::input_symbols).
//
// No op-by-op rules: the cluster's shapes are inferred three times, at the estimate
// signature and at two probe signatures where every symbol class takes another, large
// and distinct size. A value's dim is concrete when it never moved and belongs to class
// k when it followed class k's size exactly at all three; any other dim (a Reshape that
// merges a symbolic dim into another, a Concat or a Pad along one, ...) depends on a
// symbolic size in a way one kernel cannot hold, and the cluster is refused
// (Unimplemented): the caller compiles it for its concrete shapes instead.
//
// No Halide include.
#ifndef BRAZE_LOWER_SYMBOLIC_H_
#define BRAZE_LOWER_SYMBOLIC_H_

#include <map>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "lower/cluster_spec.h"

namespace braze {
namespace lower {

// (node id, output index) -> per row-major dim, the class or -1. Holds every input and
// every node output of the cluster; empty when no input dim is symbolic.
using SymbolMap = std::map<std::pair<int, int>, std::vector<int>>;

absl::StatusOr<SymbolMap> InferSymbols(const ClusterSpec& spec);

}  // namespace lower
}  // namespace braze

#endif  // BRAZE_LOWER_SYMBOLIC_H_
