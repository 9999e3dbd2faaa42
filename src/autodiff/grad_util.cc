#include "autodiff/grad_util.h"

#include <algorithm>
#include <map>
#include <numeric>
#include <optional>
#include <tuple>
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

namespace {

// Where a -1 dim's size comes from: (node id, output, dim) of the value it is copied
// from through ops that keep a dim as it is. Two dims with one source are equal at run
// time. Conservative: any op not followed is its own source, and so is every dim once
// the walk has spent its budget (a residual chain, h = h + f(h), reaches each value by
// two paths at every step: the memo keeps that linear).
using DimOrigin = std::tuple<int, int, int>;

class DimWalk {
 public:
  DimOrigin Source(const Tensor& t, int d) {
    const DimOrigin self{t.node_id(), t.index(), d};
    if (auto it = memo_.find(self); it != memo_.end()) return it->second;
    const DimOrigin found = budget_-- > 0 ? Follow(t, d) : self;
    memo_[self] = found;
    return found;
  }

 private:
  DimOrigin Follow(const Tensor& t, int d) {
    const DimOrigin self{t.node_id(), t.index(), d};
    if (d < 0 || d >= t.rank()) return self;
    const Node& n = t.node();
    const OpCategory category = OpCategoryOf(n.op());
    if (category == OpCategory::kUnary) return Source(n.input(0), d);  // Cast, StopGradient too
    if (category == OpCategory::kBinary || category == OpCategory::kSelect) {
      // The result's dim is its inputs' where they have one that is not a static 1; a
      // source when all such inputs share it.
      std::optional<DimOrigin> common;
      for (const Tensor& in : n.inputs()) {
        const int id = d - (t.rank() - in.rank());
        if (id < 0 || in.shape()[id] == 1) continue;
        const DimOrigin o = Source(in, id);
        if (common && *common != o) return self;
        common = o;
      }
      return common ? *common : self;
    }
    if (n.op() == OpKind::kSum || n.op() == OpKind::kMean || n.op() == OpKind::kMax ||
        n.op() == OpKind::kMin) {
      const ReduceAttrs& a = n.attrs_as<ReduceAttrs>();
      for (int k = 0, kept = 0; k < n.input(0).rank(); ++k) {
        const bool reduced = std::find(a.axes.begin(), a.axes.end(), k) != a.axes.end();
        if (reduced && !a.keep_dims) continue;
        if (kept++ == d) return reduced ? self : Source(n.input(0), k);
      }
      return self;
    }
    if (n.op() == OpKind::kSumToShapeOf) return Source(n.input(1), d);  // like's shape
    if (n.op() == OpKind::kMatMul || n.op() == OpKind::kBatchMatMul) {
      const MatMulAttrs& a = n.attrs_as<MatMulAttrs>();
      const int r = t.rank();
      if (d < r - 2) return Source(n.input(0), d);  // a batch dim: a's and b's are equal
      if (d == r - 2) return Source(n.input(0), a.transpose_a ? r - 1 : r - 2);
      return Source(n.input(1), a.transpose_b ? r - 2 : r - 1);
    }
    return self;
  }

  std::map<DimOrigin, DimOrigin> memo_;
  int budget_ = 1024;  // values visited (and so the recursion's depth); then its own source
};

// Whether input i of `node` may be broadcast in a -1 dim at run time: the result's dim
// there is a static size other than 1, or another input has that dim as a -1 of
// another source or as a size other than 1.
bool MayBroadcastAtRunTime(const Node& node, int i) {
  const Tensor& x = node.input(i);
  const Shape& out = node.output(0).shape;
  const int lead = static_cast<int>(out.size()) - x.rank();
  DimWalk walk;
  for (int d = 0; d < x.rank(); ++d) {
    if (x.shape()[d] != -1 || lead < 0) continue;
    const int64_t size = out[lead + d];
    if (size != -1) {
      if (size != 1) return true;
      continue;
    }
    for (int j = 0; j < node.num_inputs(); ++j) {
      const Tensor& y = node.input(j);
      const int yd = lead + d - (static_cast<int>(out.size()) - y.rank());
      if (j == i || yd < 0 || y.shape()[yd] == 1) continue;
      if (y.shape()[yd] != -1 || walk.Source(x, d) != walk.Source(y, yd)) return true;
    }
  }
  return false;
}

}  // namespace

Tensor ReduceToOperand(Tensor grad, const Node& node, int i) {
  const Tensor& x = node.input(i);
  if (MayBroadcastAtRunTime(node, i)) return SumToShapeOf(grad, x);
  return ReduceToShape(grad, x.shape());
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
