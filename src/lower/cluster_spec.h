// What the lowering turns into one Halide pipeline: a cluster of a graph's nodes with
// concrete input types. No Halide include.
#ifndef BRAZE_LOWER_CLUSTER_SPEC_H_
#define BRAZE_LOWER_CLUSTER_SPEC_H_

#include <string>
#include <vector>

#include "braze/graph.h"

namespace braze {

// A cluster to compile for concrete input types.
struct ClusterSpec {
  const Graph* graph = nullptr;
  std::string name;                     // "cluster_0"; names the pipeline and its errors
  std::vector<int> nodes;               // node ids, topological (increasing id) order
  std::vector<Tensor> inputs;           // external values read by the cluster: arguments
  std::vector<TensorType> input_types;  // concrete (fully defined) types of `inputs`
  std::vector<Tensor> outputs;          // values used outside the cluster: results
  // The concrete type of each node's output (parallel to `nodes`), when the caller has
  // inferred them already (the runtime does, once per input signature, to report a bad
  // shape against its node). Empty: the lowering infers them.
  std::vector<TensorType> node_types;
  // Symbolic shapes: for input i and row-major dim d, input_symbols[i][d] is the class of
  // a symbolic dim (0, 1, ...; dims of one class have one size) or -1 for a concrete
  // one; empty: every dim is concrete. The kernel then serves every size >=
  // kMinSymbolicExtent (schedule/scheduler.h) of each class, and `input_types` (and
  // `node_types`) hold one such signature: the schedule's estimates.
  std::vector<std::vector<int>> input_symbols;
};

}  // namespace braze

#endif  // BRAZE_LOWER_CLUSTER_SPEC_H_
