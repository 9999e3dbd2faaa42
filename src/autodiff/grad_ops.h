// The gradient function of every op: one switch over OpKind with no default, so a new op
// that autodiff forgets does not compile (-Werror=switch).
#ifndef BRAZE_AUTODIFF_GRAD_OPS_H_
#define BRAZE_AUTODIFF_GRAD_OPS_H_

#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "braze/graph.h"

namespace braze {
namespace autodiff_internal {

// Whether a gradient can flow through `node` to any input: false for sources and state,
// comparisons, ArgMax, OneHot, HostCall, Sign, Floor and casts to or from non-floating
// types; exactly the nodes for which OpGradient builds nothing. Gradients uses it to
// find the differentiable paths, so no op is built whose result would go nowhere.
bool HasGradient(const Node& node);

// OK when OpGradient can build `node`'s gradient for the static shapes it has, else
// Unimplemented naming the node (the unknown-dim limits listed in braze/gradients.h).
// Gradients checks every op on the path before building anything.
absl::Status CheckGradientSupported(const Node& node);

// Builds the gradient contributions to `node`'s inputs given `dy`, the gradient of its
// output 0 (every differentiable op has exactly one output). Only inputs with
// `needs[i]` are built. Entry i of the result is an invalid Tensor when input i gets no
// gradient: not needed, not differentiable (TF's None) or zero almost everywhere.
absl::StatusOr<std::vector<Tensor>> OpGradient(Graph& g, const Node& node, const Tensor& dy,
                                               const std::vector<bool>& needs);

// cf (issue 40): the gradient of a Cond, Scan or bounded While (grad_control_flow.cc),
// given `dys`, the gradients of its outputs (invalid where none flows), and the
// contributions to its inputs (invalid where not needed or not differentiable).
absl::StatusOr<std::vector<Tensor>> ControlFlowGradient(Graph& g, const Node& node,
                                                        const std::vector<Tensor>& dys,
                                                        const std::vector<bool>& needs);
// Unimplemented naming the node for a While with no bound.
absl::Status CheckControlFlowGradient(const Node& node);

}  // namespace autodiff_internal
}  // namespace braze

#endif  // BRAZE_AUTODIFF_GRAD_OPS_H_
