// cf (issue 40): what Cond, While and Scan do, once, for every executor. The loop (which
// branch, how many iterations, slicing the elems and stacking the step outputs, checking
// that carried values keep their types) is RunControlFlow; running a body is the caller's
// BodyRunner: the reference kernels op by op (RunBodyReference, the oracle), or a
// body's own compiled plan (runtime/step_control_flow.cc).
#ifndef BRAZE_REFERENCE_CONTROL_FLOW_H_
#define BRAZE_REFERENCE_CONTROL_FLOW_H_

#include <cstdint>
#include <functional>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "braze/graph.h"
#include "braze/host_tensor.h"

namespace braze {

// Runs body `index` of the node's ControlFlowAttrs on `params` (read only, alive during
// the call: the loop passes its carries, slices and captures by reference). `results`
// holds this body's results of an earlier iteration (or nothing): the runner leaves the
// new results there, written in place into those buffers where the types agree, so a
// loop reuses the same buffers every iteration.
using BodyRunner = std::function<absl::Status(int index, absl::Span<const HostTensor* const> params,
                                              std::vector<HostTensor>* results)>;

// What a loop did, for SessionStats: bodies run, and the bytes it copied on the host
// (the elems' rows, rows stacked into the outputs, the initial carry).
struct LoopCounters {
  int64_t body_runs = 0;
  int64_t copied_bytes = 0;
};

// The outputs of a kCond, kWhile or kScan node for `inputs` (output_types: its output
// types re-inferred for them). Errors do not name the node; the caller prefixes it.
absl::StatusOr<std::vector<HostTensor>> RunControlFlow(const Node& node,
                                                       absl::Span<const HostTensor> inputs,
                                                       absl::Span<const TensorType> output_types,
                                                       const BodyRunner& run,
                                                       LoopCounters* counters = nullptr);

// A body run op by op on the reference kernels (errors name the body and its node).
absl::Status RunBodyReference(const Body& body, absl::Span<const HostTensor* const> params,
                              std::vector<HostTensor>* results);

}  // namespace braze

#endif  // BRAZE_REFERENCE_CONTROL_FLOW_H_
