#include "autodiff/grad_util.h"

#include <algorithm>
#include <numeric>
#include <utility>
#include <vector>

#include "braze/ops.h"

namespace braze {
namespace autodiff_internal {

Tensor FilledLike(const Tensor& x, double value) {
  Graph& g = *x.graph();
  Tensor s = ScalarConst(g, value, x.dtype());
  if (IsFullyDefined(x.shape())) return x.rank() == 0 ? s : BroadcastTo(s, x.shape());
  // Equal(x, x) only lends its shape: both branches are the same scalar, so NaN in x
  // (where Equal is false) still gives `value`.
  return Select(Equal(x, x), s, s);
}

Tensor ReduceToShape(Tensor grad, const Shape& shape) {
  const int out_rank = grad.rank();
  const int rank = static_cast<int>(shape.size());
  const int lead = out_rank - rank;
  if (lead < 0) return grad;  // not a broadcast: shape inference rejected it already
  std::vector<int> ones;
  for (int i = 0; i < rank; ++i) {
    if (shape[i] == 1 && grad.shape()[lead + i] != 1) ones.push_back(lead + i);
  }
  if (!ones.empty()) grad = Sum(grad, ones, /*keep_dims=*/true);
  if (lead > 0) {
    std::vector<int> leading(lead);
    std::iota(leading.begin(), leading.end(), 0);
    grad = Sum(grad, leading, /*keep_dims=*/false);
  }
  return grad;
}

Tensor KeepDims(Tensor t, const Shape& x_shape, const std::vector<int>& axes) {
  const int rank = static_cast<int>(x_shape.size());
  auto reduced = [&](int d) { return std::binary_search(axes.begin(), axes.end(), d); };
  Shape kept_shape = x_shape;
  int unknown = 0;
  for (int d = 0; d < rank; ++d) {
    if (reduced(d)) {
      kept_shape[d] = 1;
    } else if (kept_shape[d] < 0) {
      ++unknown;
    }
  }
  if (unknown <= 1) return Reshape(t, kept_shape);  // the one -1 is inferred
  // Several unknown dims: prepend one 1 per reduced axis by broadcasting against a tiny
  // zeros constant ([1, ..., 1] of full rank), then move those 1s into place.
  Graph& g = *t.graph();
  Tensor unit_zeros = Const(g, HostTensor(t.dtype(), Shape(rank, 1)));
  Tensor padded = Add(t, unit_zeros);
  std::vector<int> perm(rank);
  int next_reduced = 0;
  int next_kept = static_cast<int>(axes.size());
  for (int d = 0; d < rank; ++d) perm[d] = reduced(d) ? next_reduced++ : next_kept++;
  return Transpose(padded, perm);
}

Tensor BroadcastLike(Tensor t, const Tensor& x) {
  if (IsFullyDefined(x.shape())) {
    return t.shape() == x.shape() ? t : BroadcastTo(t, x.shape());
  }
  return Add(t, ZerosLike(x));
}

Tensor BackwardRead(const Tensor& t) {
  const Node& n = t.node();
  if (n.op() != OpKind::kCast || !IsFloating(t.dtype())) return t;
  const Tensor& src = n.input(0);
  if (src.node().op() != OpKind::kPlaceholder || !IsFloating(src.dtype())) return t;
  return Cast(src, t.dtype());
}

ScopedJitFrame::ScopedJitFrame(Graph& g, JitScopeFrame frame) : g_(g) {
  frame.token = token_ = g.NextToken();
  g.mutable_jit_frames().push_back(std::move(frame));
}

ScopedJitFrame::~ScopedJitFrame() {
  std::vector<JitScopeFrame>& frames = g_.mutable_jit_frames();
  auto it = std::find_if(frames.begin(), frames.end(),
                         [&](const JitScopeFrame& f) { return f.token == token_; });
  if (it != frames.end()) frames.erase(it);
}

}  // namespace autodiff_internal
}  // namespace braze
