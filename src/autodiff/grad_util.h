// Shape helpers for gradient functions: filled tensors that work with unknown dims, and
// the reverse of broadcasting and of reductions. Everything is built from ordinary ops
// so gradients fuse like the forward pass (see braze/gradients.h for the rules).
#ifndef BRAZE_AUTODIFF_GRAD_UTIL_H_
#define BRAZE_AUTODIFF_GRAD_UTIL_H_

#include <cstdint>
#include <vector>

#include "braze/graph.h"

namespace braze {
namespace autodiff_internal {

// A tensor of x's dtype and shape filled with `value`. Fully defined shape: a broadcast
// scalar constant (reads nothing of x). Otherwise Select(Equal(x, x), v, v), which takes
// x's runtime shape and is `value` also where x is NaN or infinite.
Tensor FilledLike(const Tensor& x, double value);
inline Tensor ZerosLike(const Tensor& x) { return FilledLike(x, 0.0); }
inline Tensor OnesLike(const Tensor& x) { return FilledLike(x, 1.0); }

// Sums `grad` (the gradient of a broadcast result) back to an operand of `shape`: over
// the leading dims the operand lacks, and over dims where the operand is a static 1 and
// the result is not. Unknown operand dims are taken as not broadcast: for operands that
// may be broadcast at run time, ReduceToOperand.
Tensor ReduceToShape(Tensor grad, const Shape& shape);

// Sums `grad`, the gradient of `node`'s broadcast result, back to its input i. Where a
// -1 dim of that input may be 1 at run time while the result's is not (a static size
// there, or another input's -1 dim not known to be the same one: DimWalk), the sum is
// SumToShapeOf(grad, input), decided when the Run knows the sizes (TF's
// BroadcastGradientArgs); otherwise ReduceToShape.
Tensor ReduceToOperand(Tensor grad, const Node& node, int i);

// `t` is the result of reducing a tensor of `x_shape` over `axes` (sorted, unique)
// without keep_dims; returns it with the reduced dims put back as 1, so it broadcasts
// against the input. Uses Reshape when at most one kept dim is unknown, else a
// shape-agnostic broadcast-and-transpose.
Tensor KeepDims(Tensor t, const Shape& x_shape, const std::vector<int>& axes);

// `t` broadcast to x's shape: BroadcastTo when that is fully defined, else t + ZerosLike(x).
Tensor BroadcastLike(Tensor t, const Tensor& x);

// The forward value `t` as a gradient reads it: `t` itself, except that a float Cast of
// a Placeholder (the precision policy's 16-bit copy of a fed batch, braze/precision.h)
// is cast again in the backward pass. The fed value is held for the whole Run anyway,
// and casting it again is one elementwise op fused into the gradient's cluster, where
// the forward pass's copy would be kept from the forward pass to the backward pass: an
// activation the size of the batch (policy, issue 38, docs/MIXED_PRECISION.md).
Tensor BackwardRead(const Tensor& t);

// Pushes `frame` on the graph's JIT scope stack for its lifetime: ops built meanwhile
// take its compile decision and scope id. Removed by its token (set here), leaving the
// caller's stack as it was.
class ScopedJitFrame {
 public:
  ScopedJitFrame(Graph& g, JitScopeFrame frame);
  ~ScopedJitFrame();
  ScopedJitFrame(const ScopedJitFrame&) = delete;
  ScopedJitFrame& operator=(const ScopedJitFrame&) = delete;

 private:
  Graph& g_;
  uint64_t token_ = 0;
};

}  // namespace autodiff_internal
}  // namespace braze

#endif  // BRAZE_AUTODIFF_GRAD_UTIL_H_
