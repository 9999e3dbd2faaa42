// Gradient functions, following TensorFlow's math_grad.cc / array_grad.cc formulas so
// results (including tie rules) match what TF users expect.
#include "autodiff/grad_ops.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "absl/strings/str_cat.h"
#include "autodiff/grad_util.h"
#include "braze/ops.h"
#include "braze/status.h"

namespace braze {
namespace autodiff_internal {
namespace {

absl::Status Unsupported(const Node& node, const std::string& why) {
  return absl::UnimplementedError(
      absl::StrCat("gradient of node '", node.name(), "' (", node.op_name(), "): ", why));
}

// Reshape's gradient reshapes back to the input's shape; Reshape infers one -1 only.
absl::StatusOr<Shape> ReshapeBackTarget(const Node& node) {
  const Shape& shape = node.input(0).shape();
  if (std::count(shape.begin(), shape.end(), kUnknownDim) > 1) {
    return Unsupported(
        node, absl::StrCat("input shape ", ShapeString(shape), " has more than one unknown dim"));
  }
  return shape;
}

// Where each Concat input starts along the axis. Slice needs static begins, so every
// input but the last needs a known size there (the last one's slice runs to the end).
absl::StatusOr<std::vector<int64_t>> ConcatOffsets(const Node& node) {
  const int axis = node.attrs_as<ConcatAttrs>().axis;
  std::vector<int64_t> offsets;
  int64_t offset = 0;
  for (int i = 0; i < node.num_inputs(); ++i) {
    offsets.push_back(offset);
    const int64_t size = node.input(i).shape()[axis];
    if (size < 0 && i + 1 < node.num_inputs()) {
      return Unsupported(node, absl::StrCat("input ", i, " has an unknown size along axis ", axis,
                                            " and is not the last input"));
    }
    offset += size;
  }
  return offsets;
}

// Slice's gradient pads back: (begin, dim - begin - size) per dim.
absl::StatusOr<std::vector<std::pair<int64_t, int64_t>>> SlicePaddings(const Node& node) {
  const auto& attrs = node.attrs_as<SliceAttrs>();
  const Shape& shape = node.input(0).shape();
  std::vector<std::pair<int64_t, int64_t>> paddings;
  for (size_t d = 0; d < shape.size(); ++d) {
    int64_t after = 0;
    if (attrs.size[d] != -1) {
      if (shape[d] < 0) {
        return Unsupported(node, absl::StrCat("dim ", d, " of the input is unknown"));
      }
      after = shape[d] - attrs.begin[d] - attrs.size[d];
    }
    paddings.emplace_back(attrs.begin[d], after);
  }
  return paddings;
}

// Pad's gradient slices the input's window back out.
absl::StatusOr<std::vector<int64_t>> PadWindowSizes(const Node& node) {
  const auto& attrs = node.attrs_as<PadAttrs>();
  const Shape& shape = node.input(0).shape();
  std::vector<int64_t> sizes;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] >= 0) {
      sizes.push_back(shape[d]);
    } else if (attrs.paddings[d].second == 0) {
      sizes.push_back(-1);  // the window runs to the end
    } else {
      return Unsupported(node, absl::StrCat("dim ", d, " of the input is unknown"));
    }
  }
  return sizes;
}

using MatMulFn = Tensor (*)(Tensor, Tensor, bool, bool);

// d/dA and d/dB of op(A) x op(B), for all four transpose combinations (as TF's
// _MatMulGrad); BatchMatMul applies the same per batch.
std::pair<Tensor, Tensor> MatMulGrads(MatMulFn mm, const MatMulAttrs& t, const Tensor& a,
                                      const Tensor& b, const Tensor& dy, bool need_a, bool need_b) {
  Tensor da, db;
  if (!t.transpose_a && !t.transpose_b) {
    if (need_a) da = mm(dy, b, false, true);
    if (need_b) db = mm(a, dy, true, false);
  } else if (!t.transpose_a && t.transpose_b) {
    if (need_a) da = mm(dy, b, false, false);
    if (need_b) db = mm(dy, a, true, false);
  } else if (t.transpose_a && !t.transpose_b) {
    if (need_a) da = mm(b, dy, false, true);
    if (need_b) db = mm(a, dy, false, false);
  } else {
    if (need_a) da = mm(b, dy, true, true);
    if (need_b) db = mm(dy, a, true, true);
  }
  return {da, db};
}

// Max/Min reductions: the gradient goes to every position equal to the result, split
// evenly among ties (TF's _MinOrMaxGrad).
Tensor ExtremumGrad(Graph& g, const Node& node, const Tensor& dy) {
  const Tensor x = node.input(0);
  const auto& attrs = node.attrs_as<ReduceAttrs>();
  Tensor y(&g, node.id(), 0);
  Tensor y_kept = attrs.keep_dims ? y : KeepDims(y, x.shape(), attrs.axes);
  Tensor dy_kept = attrs.keep_dims ? dy : KeepDims(dy, x.shape(), attrs.axes);
  Tensor hits = Cast(Equal(x, y_kept), x.dtype());
  Tensor count = Sum(hits, attrs.axes, /*keep_dims=*/true);
  return hits * (dy_kept / count);
}

Tensor MeanGrad(const Node& node, const Tensor& dy) {
  const Tensor x = node.input(0);
  const auto& attrs = node.attrs_as<ReduceAttrs>();
  Tensor dy_kept = attrs.keep_dims ? dy : KeepDims(dy, x.shape(), attrs.axes);
  int64_t count = 1;
  for (int a : attrs.axes) count = (count < 0 || x.shape()[a] < 0) ? -1 : count * x.shape()[a];
  if (count >= 0) return BroadcastLike(dy_kept / static_cast<double>(count), x);
  // A reduced dim is unknown: count the elements at run time.
  Tensor runtime_count = Sum(OnesLike(x), attrs.axes, /*keep_dims=*/true);
  return BroadcastLike(dy_kept / runtime_count, x);
}

// The gradient ops carry the shape of what they differentiate (x's, the filter's): all
// of it known but the batch dim, which they take from dy at run time.
absl::Status WindowShapesKnown(const Node& node) {
  for (const Tensor& in : node.inputs()) {
    const Shape& s = in.shape();
    for (size_t d = 1; d < s.size(); ++d) {  // dim 0 is N in both formats
      if (s[d] < 0) {
        return Unsupported(node, absl::StrCat("input '", in.name(), "' has shape ", ShapeString(s),
                                              "; only its batch dim may be unknown"));
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace

bool HasGradient(const Node& node) {
  switch (node.op()) {
    case OpKind::kPlaceholder:
    case OpKind::kConst:
    case OpKind::kVariable:
    case OpKind::kAssign:
    case OpKind::kAssignAdd:
    case OpKind::kAssignSub:
    case OpKind::kSign:
    case OpKind::kFloor:
    case OpKind::kStopGradient:  // tf.stop_gradient: the point of the op
    case OpKind::kGreater:
    case OpKind::kLess:
    case OpKind::kEqual:
    case OpKind::kArgMax:
    case OpKind::kOneHot:
    case OpKind::kIota:           // positions: constant in `like`'s values
    case OpKind::kRandomUniform:  // constant in `like`'s values; `step` is an integer
    case OpKind::kRandomNormal:
    case OpKind::kHostCall:
      return false;
    case OpKind::kCond:  // cf (issue 40): ControlFlowGradient (grad_control_flow.cc)
    case OpKind::kWhile:
    case OpKind::kScan:
      return true;
    case OpKind::kCast:
      return IsFloating(node.input(0).dtype()) && IsFloating(node.output(0).dtype);
    case OpKind::kNeg:
    case OpKind::kAbs:
    case OpKind::kExp:
    case OpKind::kLog:
    case OpKind::kSqrt:
    case OpKind::kRsqrt:
    case OpKind::kTanh:
    case OpKind::kSigmoid:
    case OpKind::kRelu:
    case OpKind::kSquare:
    case OpKind::kReciprocal:
    case OpKind::kErf:
    case OpKind::kSin:
    case OpKind::kCos:
    case OpKind::kGather:
    case OpKind::kUnsortedSegmentSum:
    case OpKind::kSumToShapeOf:  // to x; `like` lends only its shape
    case OpKind::kAdd:
    case OpKind::kSub:
    case OpKind::kMul:
    case OpKind::kDiv:
    case OpKind::kMaximum:
    case OpKind::kMinimum:
    case OpKind::kPow:
    case OpKind::kSelect:
    case OpKind::kSum:
    case OpKind::kMean:
    case OpKind::kMax:
    case OpKind::kMin:
    case OpKind::kMatMul:
    case OpKind::kBatchMatMul:
    case OpKind::kReshape:
    case OpKind::kTranspose:
    case OpKind::kBroadcastTo:
    case OpKind::kConcat:
    case OpKind::kSlice:
    case OpKind::kPad:
    case OpKind::kConv2D:
    case OpKind::kConv2DBackpropInput:
    case OpKind::kConv2DBackpropFilter:
    case OpKind::kMaxPool:
    case OpKind::kMaxPoolGrad:
    case OpKind::kMaxPoolGradGrad:
    case OpKind::kAvgPool:
    case OpKind::kAvgPoolGrad:
    // The backward ops report that they have no gradient (CheckGradientSupported).
    case OpKind::kAttention:
    case OpKind::kAttentionLogSumExp:
    case OpKind::kAttentionGradQ:
    case OpKind::kAttentionGradK:
    case OpKind::kAttentionGradV:
    case OpKind::kAllReduce:  // dp (issue 37): collectives (CollectiveGradient)
    case OpKind::kBroadcast:
    case OpKind::kAllGather:
      return true;
  }
  return false;
}

absl::Status CheckGradientSupported(const Node& node) {
  // Only these four need static sizes; every other gradient is shape-agnostic. (Not a
  // switch: a default there would defeat -Werror=switch, which guards OpGradient.)
  if (node.op() == OpKind::kReshape) return ReshapeBackTarget(node).status();
  if (OpCategoryOf(node.op()) == OpCategory::kControlFlow) return CheckControlFlowGradient(node);
  if (node.op() == OpKind::kConcat) return ConcatOffsets(node).status();
  if (node.op() == OpKind::kSlice) return SlicePaddings(node).status();
  if (node.op() == OpKind::kPad) return PadWindowSizes(node).status();
  if (OpCategoryOf(node.op()) == OpCategory::kWindow) return WindowShapesKnown(node);
  if (OpCategoryOf(node.op()) == OpCategory::kAttention && node.op() != OpKind::kAttention) {
    return Unsupported(node,
                       "attention's backward ops have no gradient (second derivatives of "
                       "fused attention are not built; use the unfused composite)");
  }
  if (node.op() == OpKind::kGather) {
    // The gradient's segment count is the table's size along the axis, an attribute.
    const int axis = node.attrs_as<GatherAttrs>().axis;
    if (node.input(0).shape()[axis] < 0) {
      return absl::UnimplementedError(
          absl::StrCat("the gradient of Gather '", node.name(), "' needs params' dim ", axis,
                       " known at build time, got ", TypeString(node.input(0).type())));
    }
  }
  return absl::OkStatus();
}

// dp (issue 37): every rank's loss depends on every rank's input of a collective, so
// its gradient is itself a collective, built for the same world as the forward op:
//   AllReduce (sum):  dx = AllReduce(dy)
//   Broadcast(root):  dx = AllReduce(dy) on the root, zero elsewhere (every rank takes
//                     part in the all-reduce; the others scale it by 0)
//   AllGather:        dx = rows [rank d0, (rank + 1) d0) of AllReduce(dy)
absl::StatusOr<Tensor> CollectiveGradient(Graph& g, const Node& node, const Tensor& dy) {
  const CollectiveAttrs& a = node.attrs_as<CollectiveAttrs>();
  CollectiveAttrs sum = a;
  sum.root = 0;
  const Tensor summed = g.AddNode(OpKind::kAllReduce, {dy}, sum);
  switch (node.op()) {
    case OpKind::kBroadcast:
      return a.rank == a.root ? summed : summed * ScalarConst(g, 0.0, dy.dtype());
    case OpKind::kAllGather: {
      const Shape& shape = node.input(0).shape();
      if (shape[0] < 0) {
        return Unsupported(node, "the gradient of an AllGather needs its input's dim 0");
      }
      std::vector<int64_t> begin(shape.size(), 0), size(shape.size(), -1);
      begin[0] = a.rank * shape[0];
      size[0] = shape[0];
      return Slice(summed, begin, size);
    }
    default:
      return summed;
  }
}

absl::StatusOr<std::vector<Tensor>> OpGradient(Graph& g, const Node& node, const Tensor& dy,
                                               const std::vector<bool>& needs) {
  std::vector<Tensor> dx(node.num_inputs());
  if (node.num_inputs() == 0) return dx;
  const Tensor x = node.input(0);
  const Tensor y(&g, node.id(), 0);
  // Built on use only, so ops without a gradient leave no dead constant behind.
  auto zero = [&] { return ScalarConst(g, 0.0, dy.dtype()); };
  // Binary ops: each side's contribution is reduced back over broadcast dims.
  auto set_binary = [&](Tensor da, Tensor db) {
    if (needs[0] && da.valid()) dx[0] = ReduceToOperand(da, node, 0);
    if (needs[1] && db.valid()) dx[1] = ReduceToOperand(db, node, 1);
  };
  switch (node.op()) {
    // Sources and state: nothing flows into an Assign's value through its result.
    case OpKind::kPlaceholder:
    case OpKind::kConst:
    case OpKind::kVariable:
    case OpKind::kAssign:
    case OpKind::kAssignAdd:
    case OpKind::kAssignSub:
      break;

    case OpKind::kNeg:
      dx[0] = Neg(dy);
      break;
    case OpKind::kAbs:
      dx[0] = dy * Sign(x);
      break;
    case OpKind::kExp:
      dx[0] = dy * y;
      break;
    case OpKind::kLog:
      dx[0] = dy / x;
      break;
    case OpKind::kSqrt:
      dx[0] = (dy / y) * 0.5;
      break;
    case OpKind::kRsqrt:
      dx[0] = (dy * (y * Square(y))) * -0.5;
      break;
    case OpKind::kTanh:
      dx[0] = dy * (1.0 - Square(y));
      break;
    // sigmoid(x) sigmoid(-x): y (1 - y) is 0 once y rounds to 1 (x >= 17 in f32, 37 in
    // f64), where this keeps its value (4.2e-18 at 40).
    case OpKind::kSigmoid:
      dx[0] = dy * (y * Sigmoid(Neg(x)));
      break;
    // The mask from the output (relu(x) > 0 exactly where x > 0, NaN included), as TF's
    // ReluGrad: the backward pass reads y, which the next layer's weight gradient reads
    // anyway, so the forward pass keeps no mask of its own, and a fused matmul + bias +
    // ReLU keeps its ReLU in the library call (lower/gemm_epilogue.h: the Add has one
    // reader). Policy, issue 38: the MLP step's activation memory.
    case OpKind::kRelu:
      dx[0] = Select(Greater(y, zero()), dy, zero());
      break;
    case OpKind::kSquare:
      dx[0] = dy * (x * 2.0);
      break;
    case OpKind::kReciprocal:
      dx[0] = Neg(dy * Square(y));
      break;
    // Zero almost everywhere: contributing nothing gives the same sum.
    case OpKind::kSign:
    case OpKind::kFloor:
      break;
    case OpKind::kStopGradient:  // HasGradient is false: never asked
      break;
    case OpKind::kErf:
      dx[0] = dy * (Exp(Neg(Square(x))) * (2.0 / std::sqrt(M_PI)));
      break;
    case OpKind::kSin:
      dx[0] = dy * Cos(x);
      break;
    case OpKind::kCos:
      dx[0] = Neg(dy * Sin(x));
      break;
    case OpKind::kCast:
      // Integers carry no gradient; a float->float cast's gradient is cast back.
      if (IsFloating(x.dtype()) && IsFloating(y.dtype())) {
        dx[0] = x.dtype() == dy.dtype() ? dy : Cast(dy, x.dtype());
      }
      break;

    case OpKind::kAdd:
      set_binary(dy, dy);
      break;
    case OpKind::kSub:
      set_binary(dy, needs[1] ? Neg(dy) : Tensor());
      break;
    case OpKind::kMul: {
      const Tensor a = node.input(0), b = node.input(1);
      set_binary(needs[0] ? dy * b : Tensor(), needs[1] ? dy * a : Tensor());
      break;
    }
    case OpKind::kDiv: {
      const Tensor a = node.input(0), b = node.input(1);
      set_binary(needs[0] ? dy / b : Tensor(), needs[1] ? dy * ((Neg(a) / b) / b) : Tensor());
      break;
    }
    case OpKind::kMaximum:
    case OpKind::kMinimum: {
      // To `a` where a >= b (a <= b for Minimum), as TF; elsewhere to `b`, NaN included
      // (a >= b is false when either is NaN: a strict `b wins` test gave those to a).
      const Tensor a = node.input(0), b = node.input(1);
      const Tensor a_beats = node.op() == OpKind::kMaximum ? Greater(a, b) : Less(a, b);
      const Tensor tie = Equal(a, b);
      set_binary(needs[0] ? Select(a_beats, dy, Select(tie, dy, zero())) : Tensor(),
                 needs[1] ? Select(a_beats, zero(), Select(tie, zero(), dy)) : Tensor());
      break;
    }
    case OpKind::kPow: {
      const Tensor a = node.input(0), b = node.input(1);
      Tensor da, db;
      // d/da a^b = b a^(b-1), and 0 where b == 0 (a^0 is 1 for every a): the product was
      // 0 * inf = NaN at a = 0 (JAX's and torch's rule; their gradient there is 0).
      if (needs[0]) {
        da = Select(Equal(b, zero()), zero(), dy * (b * Pow(a, b - 1.0)));
      }
      if (needs[1]) {
        // d/db a^b = a^b log a; TF takes log only where a > 0 (0 elsewhere) so that the
        // unselected branch never computes log(0) or log(negative).
        Tensor positive = Greater(a, zero());
        Tensor safe_a = Select(positive, a, ScalarConst(g, 1.0, a.dtype()));
        // Selected after the product: at a = 0 with b < 0, y is inf and inf * 0 was NaN.
        db = Select(positive, dy * (y * Log(safe_a)), zero());
      }
      set_binary(da, db);
      break;
    }
    case OpKind::kGreater:
    case OpKind::kLess:
    case OpKind::kEqual:
      break;
    case OpKind::kSelect: {
      // The condition gets no gradient; each branch gets dy where it was selected.
      const Tensor cond = node.input(0);
      if (needs[1]) dx[1] = ReduceToOperand(Select(cond, dy, zero()), node, 1);
      if (needs[2]) dx[2] = ReduceToOperand(Select(cond, zero(), dy), node, 2);
      break;
    }

    case OpKind::kSum: {
      const auto& attrs = node.attrs_as<ReduceAttrs>();
      dx[0] = BroadcastLike(attrs.keep_dims ? dy : KeepDims(dy, x.shape(), attrs.axes), x);
      break;
    }
    case OpKind::kMean:
      dx[0] = MeanGrad(node, dy);
      break;
    case OpKind::kMax:
    case OpKind::kMin:
      dx[0] = ExtremumGrad(g, node, dy);
      break;
    case OpKind::kArgMax:
      break;
    case OpKind::kSumToShapeOf:  // each of x's elements went into one sum: dy back to x
      if (needs[0]) dx[0] = BroadcastLike(dy, x);
      break;

    case OpKind::kMatMul:
    case OpKind::kBatchMatMul: {
      MatMulFn mm = node.op() == OpKind::kMatMul ? &MatMul : &BatchMatMul;
      // a is read only for db, b only for da.
      const Tensor a = needs[1] ? BackwardRead(node.input(0)) : node.input(0);
      const Tensor b = needs[0] ? BackwardRead(node.input(1)) : node.input(1);
      auto [da, db] = MatMulGrads(mm, node.attrs_as<MatMulAttrs>(), a, b, dy, needs[0], needs[1]);
      dx[0] = da;
      dx[1] = db;
      break;
    }

    case OpKind::kReshape: {
      BRAZE_ASSIGN_OR_RETURN(Shape shape, ReshapeBackTarget(node));
      dx[0] = Reshape(dy, shape);
      break;
    }
    case OpKind::kTranspose: {
      const std::vector<int>& perm = node.attrs_as<TransposeAttrs>().perm;
      std::vector<int> inverse(perm.size());
      for (size_t i = 0; i < perm.size(); ++i) inverse[perm[i]] = static_cast<int>(i);
      dx[0] = Transpose(dy, inverse);
      break;
    }
    case OpKind::kBroadcastTo:
      dx[0] = ReduceToOperand(dy, node, 0);
      break;
    case OpKind::kConcat: {
      BRAZE_ASSIGN_OR_RETURN(std::vector<int64_t> offsets, ConcatOffsets(node));
      const int axis = node.attrs_as<ConcatAttrs>().axis;
      for (int i = 0; i < node.num_inputs(); ++i) {
        if (!needs[i]) continue;
        std::vector<int64_t> begin(x.rank(), 0), size(x.rank(), -1);
        begin[axis] = offsets[i];
        size[axis] = node.input(i).shape()[axis];  // -1 (to the end) only for the last
        dx[i] = Slice(dy, begin, size);
      }
      break;
    }
    case OpKind::kSlice: {
      BRAZE_ASSIGN_OR_RETURN(auto paddings, SlicePaddings(node));
      dx[0] = Pad(dy, std::move(paddings));
      break;
    }
    case OpKind::kPad: {
      BRAZE_ASSIGN_OR_RETURN(std::vector<int64_t> sizes, PadWindowSizes(node));
      std::vector<int64_t> begin;
      for (const auto& p : node.attrs_as<PadAttrs>().paddings) begin.push_back(p.first);
      dx[0] = Slice(dy, std::move(begin), std::move(sizes));
      break;
    }
    case OpKind::kConv2D: {
      const Window2D& w = node.attrs_as<Conv2DAttrs>().window;
      const Tensor filter = node.input(1);
      if (needs[0]) dx[0] = Conv2DBackpropInput(x.shape(), filter, dy, w);
      if (needs[1]) dx[1] = Conv2DBackpropFilter(BackwardRead(x), filter.shape(), dy, w);
      break;
    }
    case OpKind::kConv2DBackpropInput: {  // (filter, dy') -> dx': linear in each
      const Window2D& w = node.attrs_as<Conv2DAttrs>().window;
      const Tensor filter = node.input(0);
      const Tensor conv_dy = node.input(1);
      if (needs[0]) dx[0] = Conv2DBackpropFilter(dy, filter.shape(), conv_dy, w);
      if (needs[1]) dx[1] = Conv2D(dy, filter, w);
      break;
    }
    case OpKind::kConv2DBackpropFilter: {  // (x, dy') -> dfilter: linear in each
      const Window2D& w = node.attrs_as<Conv2DAttrs>().window;
      const Tensor conv_dy = node.input(1);
      if (needs[0]) dx[0] = Conv2DBackpropInput(x.shape(), dy, conv_dy, w);
      if (needs[1]) dx[1] = Conv2D(x, dy, w);
      break;
    }
    // Max pooling's routing is piecewise constant in x: x gets no gradient from its
    // gradient ops, only the routed values do (TF's MaxPoolGrad / MaxPoolGradGrad).
    case OpKind::kMaxPool:
      dx[0] = MaxPoolGrad(x, dy, node.attrs_as<Pool2DAttrs>());
      break;
    case OpKind::kMaxPoolGrad:
      if (needs[1]) dx[1] = MaxPoolGradGrad(x, dy, node.attrs_as<Pool2DAttrs>());
      break;
    case OpKind::kMaxPoolGradGrad:
      if (needs[1]) dx[1] = MaxPoolGrad(x, dy, node.attrs_as<Pool2DAttrs>());
      break;
    case OpKind::kAvgPool:
      dx[0] = AvgPoolGrad(x.shape(), dy, node.attrs_as<Pool2DAttrs>());
      break;
    case OpKind::kAvgPoolGrad:
      dx[0] = AvgPool(dy, node.attrs_as<Pool2DAttrs>());
      break;
    // Gather and UnsortedSegmentSum are each other's adjoint, out-of-range indices
    // included (a zero read is a dropped slice): the pair is closed under
    // differentiation. The indices carry no gradient.
    case OpKind::kGather: {
      const int axis = node.attrs_as<GatherAttrs>().axis;
      dx[0] = UnsortedSegmentSum(dy, node.input(1), x.shape()[axis], axis);
      break;
    }
    case OpKind::kUnsortedSegmentSum:
      dx[0] = Gather(dy, node.input(1), node.attrs_as<SegmentSumAttrs>().axis);
      break;
    // FlashAttention-2's backward (docs/ATTENTION.md): the logsumexp recomputed from q
    // and k (a pass over key tiles) and delta = rowsum(dO * O), then one fused op per
    // input, each recomputing its tiles of the weights.
    case OpKind::kAttention: {
      const AttentionAttrs& a = node.attrs_as<AttentionAttrs>();
      // With dropout, the same mask from the same step (the step gets no gradient).
      const Tensor k = node.input(1), v = node.input(2);
      const Tensor step = node.num_inputs() > 3 ? node.input(3) : Tensor();
      const Tensor lse = AttentionLogSumExp(x, k, a);
      const Tensor delta = Sum(dy * y, {-1});
      const OpKind grad[] = {OpKind::kAttentionGradQ, OpKind::kAttentionGradK,
                             OpKind::kAttentionGradV};
      for (int i = 0; i < 3; ++i) {
        if (needs[i]) dx[i] = AttentionGrad(grad[i], x, k, v, dy, lse, delta, a, step);
      }
      break;
    }
    case OpKind::kAttentionLogSumExp:
    case OpKind::kAttentionGradQ:
    case OpKind::kAttentionGradK:
    case OpKind::kAttentionGradV:
      return Unsupported(node, "attention's backward ops have no gradient");
    case OpKind::kAllReduce:
    case OpKind::kBroadcast:
    case OpKind::kAllGather: {
      BRAZE_ASSIGN_OR_RETURN(dx[0], CollectiveGradient(g, node, dy));
      break;
    }
    case OpKind::kOneHot:
    case OpKind::kIota:
    case OpKind::kRandomUniform:
    case OpKind::kRandomNormal:
    case OpKind::kHostCall:
      break;
    case OpKind::kCond:   // cf (issue 40): several outputs, so Gradients calls
    case OpKind::kWhile:  // ControlFlowGradient with each output's gradient instead
    case OpKind::kScan:
      return absl::InternalError(absl::StrCat(node.op_name(), " takes ControlFlowGradient"));
  }
  for (size_t i = 0; i < dx.size(); ++i) {
    if (!needs[i]) dx[i] = Tensor();
  }
  return dx;
}

}  // namespace autodiff_internal
}  // namespace braze
