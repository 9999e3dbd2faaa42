// cf (issue 40): what Cond, While and Scan do, once, for every executor. The loop (which
// branch, how many iterations, slicing the elems and stacking the step outputs, checking
// that carried values keep their types) is RunControlFlow; running a body is the caller's
// BodyRunner: the reference kernels op by op (RunBodyReference, the oracle), or a
// body's own compiled plan (runtime/step_control_flow.cc).
#ifndef BRAZE_REFERENCE_CONTROL_FLOW_H_
#define BRAZE_REFERENCE_CONTROL_FLOW_H_

#include <functional>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "braze/graph.h"
#include "braze/host_tensor.h"

namespace braze {

// Runs body `index` of the node's ControlFlowAttrs on `params`; returns its results.
using BodyRunner = std::function<absl::StatusOr<std::vector<HostTensor>>(
    int index, std::vector<HostTensor> params)>;

// The outputs of a kCond, kWhile or kScan node for `inputs` (output_types: its output
// types re-inferred for them). Errors do not name the node; the caller prefixes it.
absl::StatusOr<std::vector<HostTensor>> RunControlFlow(const Node& node,
                                                       absl::Span<const HostTensor> inputs,
                                                       absl::Span<const TensorType> output_types,
                                                       const BodyRunner& run);

// A body run op by op on the reference kernels (errors name the body and its node).
absl::StatusOr<std::vector<HostTensor>> RunBodyReference(const Body& body,
                                                         std::vector<HostTensor> params);

}  // namespace braze

#endif  // BRAZE_REFERENCE_CONTROL_FLOW_H_
