// cf (issue 40): shape inference and checks of the control-flow ops (Cond, While, Scan;
// braze/control_flow.h). A body's output types for given parameter types are inferred by
// walking its graph in node order, so a body traced with -1 dims gets concrete types at
// run time, and a nested control-flow op infers through its own bodies.
#ifndef BRAZE_IR_CONTROL_FLOW_H_
#define BRAZE_IR_CONTROL_FLOW_H_

#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "braze/graph.h"

namespace braze {
namespace ir {

// The types of `body`'s results when its params have `params` (their stored types when
// these equal the params' declared ones). Errors name the body and its node.
absl::StatusOr<std::vector<TensorType>> InferBodyTypes(const Body& body,
                                                       absl::Span<const TensorType> params);

// Output types of a kCond, kWhile or kScan node with inputs of types `in` (unnamed: the
// caller prefixes the node's label).
absl::StatusOr<std::vector<TensorType>> ControlFlowTypes(OpKind op, const ControlFlowAttrs& a,
                                                         absl::Span<const TensorType> in);

// Same rank and every dim equal or -1 on either side.
bool ShapesCompatible(const Shape& a, const Shape& b);

// The nodes of `body`'s graph its results need, by node id (a body's graph may hold
// ops its results do not use: they are never run, cloned or differentiated).
std::vector<bool> BodyNodesNeeded(const Body& body);

// How many outputs a Scan node has per group: carry, stacked step outputs, stacked carry.
int ScanNumStepOutputs(const ControlFlowAttrs& a);

}  // namespace ir
}  // namespace braze

#endif  // BRAZE_IR_CONTROL_FLOW_H_
