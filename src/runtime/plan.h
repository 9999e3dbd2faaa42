// An execution plan for one (fetches, targets, fed tensors) combination: which nodes must
// run, how they are clustered, and an ordered list of steps (cluster launches, compiled
// single-op kernels, reference kernels) whose order respects every data dependency.
// Compiled kernels and output buffers are memoized on the steps per input signature, so
// a plan run again with the same shapes neither looks anything up nor allocates.
#ifndef BRAZE_RUNTIME_PLAN_H_
#define BRAZE_RUNTIME_PLAN_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "braze/graph.h"
#include "braze/session.h"
#include "passes/mark_for_compilation.h"
#include "runtime/compile_cache.h"

namespace braze {

struct Step {
  enum class Kind { kCluster, kSingleOp, kReference };
  Kind kind = Kind::kReference;
  std::string name;             // the cluster's or the node's name
  std::vector<int> nodes;       // ascending ids (a topological order)
  std::vector<Tensor> inputs;   // values read from outside the step
  std::vector<Tensor> outputs;  // values the step produces for others

  // Memoized per input signature.
  std::vector<TensorType> input_types;
  std::shared_ptr<SharedKernel> kernel;
  std::vector<HostTensor> buffers;  // one per output; reused across runs

  // A cluster (or single op) whose compile failed runs these instead, one op each.
  bool fell_back = false;
  std::vector<Step> fallback;
};

struct Plan {
  std::vector<bool> needed;  // by node id
  ClusteringResult clustering;
  std::vector<Step> steps;
};

// Builds the plan. `fed[i]` marks nodes whose (single) output is fed.
absl::StatusOr<std::unique_ptr<Plan>> BuildPlan(const Graph& graph, const SessionOptions& options,
                                                const std::vector<Tensor>& fetches,
                                                const std::vector<Tensor>& targets,
                                                const std::vector<bool>& fed);

// The session's default device, canonical ("cpu", "cuda:0", "jit:cpu").
absl::StatusOr<std::string> ResolveDefaultDevice(const SessionOptions& options);

// One step per op of `nodes` (used for a cluster's op-by-op fallback).
std::vector<Step> OpByOpSteps(const Graph& graph, const std::vector<int>& nodes,
                              const SessionOptions& options);

}  // namespace braze

#endif  // BRAZE_RUNTIME_PLAN_H_
