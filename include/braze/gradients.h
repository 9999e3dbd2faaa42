// Reverse-mode automatic differentiation, as TensorFlow's tf.gradients.
//
//   Tensor loss = Mean(Square(MatMul(x, w) - y));
//   absl::StatusOr<std::vector<Tensor>> dw = Gradients({loss}, {w});
//
// Gradients are ordinary graph ops built with the builders of braze/ops.h, so they are
// clustered, fused and compiled like the forward pass. Every op built by one call lives
// under the name scope `name` ("gradients/", "gradients_1/", ...).
//
// Which ops have a gradient
//   Differentiable: Neg Abs Exp Log Sqrt Rsqrt Tanh Sigmoid Relu Square Reciprocal Erf,
//   Cast between floating types; Add Sub Mul Div Maximum Minimum Pow (numpy broadcasting:
//   the gradient is summed back to each operand's shape), Select (to the branches);
//   Sum Mean Max Min; MatMul and BatchMatMul with any transpose flags; Reshape Transpose
//   BroadcastTo Concat Slice Pad. Composites (Softmax, LogSoftmax, cross entropy,
//   LayerNorm, Gelu, Dense) are built from these and differentiate through them.
//   Zero almost everywhere: Sign and Floor (they pass nothing back).
//   StopGradient (tf.stop_gradient): x itself, and it passes nothing back.
//   No gradient (TF's None; nothing flows through them): Cast to or from a non-floating
//   type, ArgMax, Greater Less Equal, Select's condition, OneHot, HostCall, and the
//   sources and state ops Placeholder Const Variable Assign AssignAdd AssignSub (an
//   Assign's value does not receive the gradient of the Assign's result).
//
// Tie rules, as TensorFlow: Maximum(a, b) sends the gradient to `a` where a >= b and
// Minimum(a, b) to `a` where a <= b, to `b` elsewhere (where either is NaN too);
// Max/Min reductions split the gradient evenly among
// all positions that attain the extreme value. Relu passes the gradient where x > 0.
// Pow(x, y)'s gradient for y is 0 where x <= 0 (log x is taken only where x > 0); its
// gradient for x is 0 where y == 0 (x^0 is 1 for every x, 0 included: JAX's and torch's
// rule, where y x^(y-1) alone is 0 * inf = NaN at x = 0).
//
// Unconnected xs (the rule, like TF's unconnected_gradients=ZERO): when no y depends on
// an x through differentiable ops (including every x of a non-floating dtype), its
// result is a zeros tensor of x's dtype and shape, never an invalid Tensor. When x's
// shape is fully defined the zeros are a broadcast scalar constant (nothing is read from
// x, so an unconnected placeholder need not be fed). When it has unknown dims they are
// Select(Equal(x, x), 0, 0), which takes x's runtime shape and is 0 also where x is NaN
// or infinite (x * 0 would not be).
//
// Unknown dims (-1, e.g. the batch) are supported:
//   - Mean's divisor is a constant when the reduced dims are known, else it is counted
//     at run time as Sum(OnesLike(x)) over the reduced axes, with OnesLike built NaN-safe
//     as Select(Equal(x, x), 1, 1).
//   - Broadcasting a gradient back to an input's shape uses BroadcastTo when that shape
//     is fully defined and adds a runtime ZerosLike otherwise.
//   - An unknown dim of a broadcast operand may be 1 only at run time (x [-1, 3] fed one
//     row against y's four): where it may be, the operand's gradient is summed back by
//     SumToShapeOf(grad, operand), which decides when the Run knows the sizes (TF's
//     BroadcastGradientArgs). It may be unless the result's dim there is a static 1, or
//     every other operand's dim there is absent, a static 1, or a -1 copied from the same
//     source through ops that keep a dim (elementwise ops, reductions over other axes,
//     a MatMul's rows or columns): x - Max(x, {1}, true) needs no run-time sum.
//   - A grad_y's shape is checked against its y's where both dims are known when the
//     graph is built. Where either is unknown, grad_y may broadcast against y at run
//     time (a 1 where y has 3, or y's 1 where grad_y has 2): the gradients are then those
//     of sum(y * grad_y) under broadcasting (grad_y spread to the common shape and summed
//     back to y's), each of its x's shape; a grad_y that does not broadcast against y
//     fails the Run (InvalidArgument naming the seed's op).
//   - Reshape's gradient needs at most one unknown dim in the input shape; Concat's needs
//     the concat-axis sizes of all but the last input; Slice with an explicit size and
//     Pad with trailing padding need the sliced/padded dim. Otherwise Gradients returns
//     Unimplemented naming the op.
//
// JIT scopes (separate_compiled_gradients, see braze/jit_scope.h): the gradient ops of a
// forward op built under a JitScope inherit its compile decision and scope; with
// separate_compiled_gradients they get the scope `<forward scope>_grad_<name>`, so they
// compile apart from the forward pass and from another Gradients call. Gradient ops of
// forward ops built outside any scope are built under whatever JitScope is active when
// Gradients is called (none: unscoped). Summing several contributions to one tensor
// happens under the scope of the op that produced that tensor, and the default seed
// (ones) of a y under y's.
//
// Errors (all found before anything is built): InvalidArgument for no ys; a y, x or
// grad_y that is not a tensor, comes from another graph than ys[0] or is an op with a
// build error (naming it); a y that is not floating; a grad_ys list whose size differs
// from ys's, or a grad_y whose dtype or shape does not match its y. Unimplemented for
// the unknown-dim cases above.
#ifndef BRAZE_GRADIENTS_H_
#define BRAZE_GRADIENTS_H_

#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "braze/graph.h"

namespace braze {

// Returns, for each x, the gradient of sum_i(sum(ys[i] * grad_ys[i])) with respect to x
// (with grad_ys empty: of the sum of all elements of all ys). Result i has xs[i]'s dtype
// and shape. An x may be any tensor of the graph, including an intermediate one; a y
// that is itself an x contributes grad_y directly.
absl::StatusOr<std::vector<Tensor>> Gradients(const std::vector<Tensor>& ys,
                                              const std::vector<Tensor>& xs,
                                              const std::vector<Tensor>& grad_ys = {},
                                              std::string_view name = "gradients");

}  // namespace braze

#endif  // BRAZE_GRADIENTS_H_
