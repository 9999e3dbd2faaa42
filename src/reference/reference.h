// Reference kernels: plain, obviously-correct loops over HostTensors. They are the oracle
// every compiled result is checked against, and the fallback for ops without a Halide
// lowering. Favour clarity over speed; reductions accumulate in double.
#ifndef BRAZE_REFERENCE_REFERENCE_H_
#define BRAZE_REFERENCE_REFERENCE_H_

#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "braze/graph.h"
#include "braze/host_tensor.h"

namespace braze {

// Computes `node` on concrete `inputs`. `output_types` are the node's output types
// re-inferred for these inputs (fully defined shapes). Placeholder and Variable are the
// executor's business and return an Internal error here. The Assign family computes the
// variable's new value (Assign: input 1; AssignAdd: in0 + in1; AssignSub: in0 - in1); the
// executor stores it. Errors do not name the node; the caller prefixes it.
absl::StatusOr<std::vector<HostTensor>> RunReferenceKernel(
    const Node& node, absl::Span<const HostTensor> inputs,
    absl::Span<const TensorType> output_types);

}  // namespace braze

#endif  // BRAZE_REFERENCE_REFERENCE_H_
