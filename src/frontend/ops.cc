// Op builders: thin wrappers that normalize arguments (negative axes) and add nodes.
// Composites are written with the primitives under a name scope.
#include "braze/ops.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace braze {
namespace {

// The graph a builder adds to: the first valid input's. Builders given no valid input
// return an invalid Tensor, which Session::Run rejects.
Graph* GraphOf(std::initializer_list<Tensor> ts) {
  for (const Tensor& t : ts) {
    if (t.valid()) return t.graph();
  }
  return nullptr;
}

Tensor Add1(OpKind op, Tensor x, Attrs attrs = NoAttrs{}) {
  if (!x.valid()) return Tensor();
  return x.graph()->AddNode(op, {x}, std::move(attrs));
}

Tensor Add2(OpKind op, Tensor a, Tensor b) {
  Graph* g = GraphOf({a, b});
  if (g == nullptr) return Tensor();
  return g->AddNode(op, {a, b}, NoAttrs{});
}

// A negative axis counts from the end; one still negative after that is kept as given,
// so that shape inference names the axis the caller wrote (-4, not -1, for rank 3).
int NormalizeAxis(int axis, int rank) { return axis < 0 && axis + rank >= 0 ? axis + rank : axis; }

// Negative axes count from the end; {} means all axes. Out-of-range axes are kept as
// given so shape inference reports them against the node, and so are repeated ones
// ({1, 1}, {-1, 1} of a matrix): an error there, as in TensorFlow, NumPy and JAX, where
// they were taken as a set.
std::vector<int> NormalizeAxes(std::vector<int> axes, int rank) {
  if (axes.empty()) {
    for (int d = 0; d < rank; ++d) axes.push_back(d);
    return axes;
  }
  for (int& a : axes) {
    if (a < 0 && a + rank >= 0) a += rank;
  }
  std::sort(axes.begin(), axes.end());
  return axes;
}

// A perm entry may be negative, counted from the end (as numpy's, JAX's and torch's
// transpose take it: Transpose(x, {-1, 0}) of a matrix is its transpose; it was refused).
// A perm that is not a permutation once normalized is kept as given, so that shape
// inference names the perm the caller wrote.
std::vector<int> NormalizePerm(std::vector<int> perm, int rank) {
  if (static_cast<int>(perm.size()) != rank) return perm;
  std::vector<int> normalized = perm;
  for (int& p : normalized) p = NormalizeAxis(p, rank);
  std::vector<int> sorted = normalized;
  std::sort(sorted.begin(), sorted.end());
  for (int d = 0; d < rank; ++d) {
    if (sorted[d] != d) return perm;
  }
  return normalized;
}

Tensor Reduce(OpKind op, Tensor x, std::vector<int> axes, bool keep_dims) {
  if (!x.valid()) return Tensor();
  return Add1(op, x, ReduceAttrs{NormalizeAxes(std::move(axes), x.rank()), keep_dims});
}

// `op` applied to tensor t and scalar v (v first when `scalar_first`), v a constant of
// t's dtype. An i32 t has no constant for a fraction: it truncated toward zero, so
// x * 0.5 was x * 0 and x / 2.5 was x / 2, silently, where numpy and JAX promote to a
// float and TensorFlow refuses the conversion. It is an error on the graph naming t.
Tensor WithScalar(Tensor (*op)(Tensor, Tensor), const Tensor& t, double v, const char* symbol,
                  bool scalar_first) {
  if (!t.valid()) return Tensor();
  Graph& g = *t.graph();
  if (t.dtype() == DType::kI32 && std::isfinite(v) && v != std::trunc(v)) {
    const std::string tensor = absl::StrCat("'", t.name(), "'");
    const std::string scalar = absl::StrCat(v);
    g.RecordError(absl::InvalidArgumentError(
        absl::StrCat(scalar_first ? scalar : tensor, " ", symbol, " ",
                     scalar_first ? tensor : scalar, ": ", scalar, " is not an i32, the dtype of ",
                     tensor, " (operators do not promote: Cast it to a floating dtype first)")));
    return Tensor();
  }
  const Tensor s = ScalarConst(g, v, t.dtype());
  if (!s.valid()) return Tensor();
  return scalar_first ? op(s, t) : op(t, s);
}

}  // namespace

Tensor Placeholder(Graph& g, DType dtype, Shape shape, std::string_view name) {
  return g.AddNode(OpKind::kPlaceholder, {}, PlaceholderAttrs{dtype, std::move(shape)},
                   name.empty() ? "Placeholder" : name);
}

Tensor Const(Graph& g, HostTensor value, std::string_view name) {
  return g.AddNode(OpKind::kConst, {},
                   ConstAttrs{std::make_shared<const HostTensor>(std::move(value))}, name);
}

Tensor ScalarConst(Graph& g, double value, DType dtype, std::string_view name) {
  // An i32 constant the value does not fit would saturate (HostTensor's conversion, as
  // Cast's): 1e10 silently became 2147483647. A fraction truncates toward zero, as in C++.
  if (dtype == DType::kI32 && !(value > -2147483649.0 && value < 2147483648.0)) {
    g.RecordError(absl::InvalidArgumentError(
        absl::StrCat("ScalarConst", name.empty() ? "" : absl::StrCat(" '", std::string(name), "'"),
                     ": ", value, " does not fit i32 (its range is [-2147483648, 2147483647])")));
    return Tensor();
  }
  return Const(g, HostTensor::Filled(dtype, {}, value), name);
}

Tensor Variable(Graph& g, HostTensor initial_value, std::string_view name) {
  DType dtype = initial_value.dtype();
  Shape shape = initial_value.shape();
  return g.AddNode(
      OpKind::kVariable, {},
      VariableAttrs{dtype, shape, std::make_shared<const HostTensor>(std::move(initial_value))},
      name);
}

Tensor Variable(Graph& g, DType dtype, Shape shape, std::string_view name) {
  return g.AddNode(OpKind::kVariable, {}, VariableAttrs{dtype, std::move(shape), nullptr}, name);
}

#define BRAZE_ASSIGN_BUILDER(Fn, Kind)                              \
  Tensor Fn(Tensor var, Tensor value, std::string_view name) {      \
    Graph* g = GraphOf({var, value});                               \
    if (g == nullptr) return Tensor();                              \
    return g->AddNode(OpKind::Kind, {var, value}, NoAttrs{}, name); \
  }
BRAZE_ASSIGN_BUILDER(Assign, kAssign)
BRAZE_ASSIGN_BUILDER(AssignAdd, kAssignAdd)
BRAZE_ASSIGN_BUILDER(AssignSub, kAssignSub)
#undef BRAZE_ASSIGN_BUILDER

Tensor Neg(Tensor x) { return Add1(OpKind::kNeg, x); }
Tensor Abs(Tensor x) { return Add1(OpKind::kAbs, x); }
Tensor Exp(Tensor x) { return Add1(OpKind::kExp, x); }
Tensor Log(Tensor x) { return Add1(OpKind::kLog, x); }
Tensor Sqrt(Tensor x) { return Add1(OpKind::kSqrt, x); }
Tensor Rsqrt(Tensor x) { return Add1(OpKind::kRsqrt, x); }
Tensor Tanh(Tensor x) { return Add1(OpKind::kTanh, x); }
Tensor Sigmoid(Tensor x) { return Add1(OpKind::kSigmoid, x); }
Tensor Relu(Tensor x) { return Add1(OpKind::kRelu, x); }
Tensor Square(Tensor x) { return Add1(OpKind::kSquare, x); }
Tensor Reciprocal(Tensor x) { return Add1(OpKind::kReciprocal, x); }
Tensor Sign(Tensor x) { return Add1(OpKind::kSign, x); }
Tensor Floor(Tensor x) { return Add1(OpKind::kFloor, x); }
Tensor StopGradient(Tensor x) { return Add1(OpKind::kStopGradient, x); }
Tensor Erf(Tensor x) { return Add1(OpKind::kErf, x); }
Tensor Sin(Tensor x) { return Add1(OpKind::kSin, x); }
Tensor Cos(Tensor x) { return Add1(OpKind::kCos, x); }
Tensor Cast(Tensor x, DType dtype) { return Add1(OpKind::kCast, x, CastAttrs{dtype}); }

Tensor Add(Tensor a, Tensor b) { return Add2(OpKind::kAdd, a, b); }
Tensor Sub(Tensor a, Tensor b) { return Add2(OpKind::kSub, a, b); }
Tensor Mul(Tensor a, Tensor b) { return Add2(OpKind::kMul, a, b); }
Tensor Div(Tensor a, Tensor b) { return Add2(OpKind::kDiv, a, b); }
Tensor Maximum(Tensor a, Tensor b) { return Add2(OpKind::kMaximum, a, b); }
Tensor Minimum(Tensor a, Tensor b) { return Add2(OpKind::kMinimum, a, b); }
Tensor Pow(Tensor a, Tensor b) { return Add2(OpKind::kPow, a, b); }
Tensor Greater(Tensor a, Tensor b) { return Add2(OpKind::kGreater, a, b); }
Tensor Less(Tensor a, Tensor b) { return Add2(OpKind::kLess, a, b); }
Tensor Equal(Tensor a, Tensor b) { return Add2(OpKind::kEqual, a, b); }

Tensor Select(Tensor cond, Tensor a, Tensor b) {
  Graph* g = GraphOf({cond, a, b});
  if (g == nullptr) return Tensor();
  return g->AddNode(OpKind::kSelect, {cond, a, b}, NoAttrs{});
}

Tensor Sum(Tensor x, std::vector<int> axes, bool keep_dims) {
  return Reduce(OpKind::kSum, x, std::move(axes), keep_dims);
}
Tensor Mean(Tensor x, std::vector<int> axes, bool keep_dims) {
  return Reduce(OpKind::kMean, x, std::move(axes), keep_dims);
}
Tensor Max(Tensor x, std::vector<int> axes, bool keep_dims) {
  return Reduce(OpKind::kMax, x, std::move(axes), keep_dims);
}
Tensor Min(Tensor x, std::vector<int> axes, bool keep_dims) {
  return Reduce(OpKind::kMin, x, std::move(axes), keep_dims);
}
Tensor SumToShapeOf(Tensor x, Tensor like) { return Add2(OpKind::kSumToShapeOf, x, like); }
Tensor ArgMax(Tensor x, int axis) {
  if (!x.valid()) return Tensor();
  return Add1(OpKind::kArgMax, x, ArgMaxAttrs{NormalizeAxis(axis, x.rank())});
}

Tensor MatMul(Tensor a, Tensor b, bool transpose_a, bool transpose_b) {
  Graph* g = GraphOf({a, b});
  if (g == nullptr) return Tensor();
  return g->AddNode(OpKind::kMatMul, {a, b}, MatMulAttrs{transpose_a, transpose_b});
}
Tensor BatchMatMul(Tensor a, Tensor b, bool transpose_a, bool transpose_b) {
  Graph* g = GraphOf({a, b});
  if (g == nullptr) return Tensor();
  return g->AddNode(OpKind::kBatchMatMul, {a, b}, MatMulAttrs{transpose_a, transpose_b});
}

Tensor Reshape(Tensor x, Shape shape) {
  return Add1(OpKind::kReshape, x, ReshapeAttrs{std::move(shape)});
}
Tensor Transpose(Tensor x, std::vector<int> perm) {
  if (!x.valid()) return Tensor();
  return Add1(OpKind::kTranspose, x, TransposeAttrs{NormalizePerm(std::move(perm), x.rank())});
}
Tensor BroadcastTo(Tensor x, Shape shape) {
  return Add1(OpKind::kBroadcastTo, x, BroadcastToAttrs{std::move(shape)});
}
Tensor Concat(std::vector<Tensor> xs, int axis) {
  Graph* g = nullptr;
  for (const Tensor& t : xs) {
    if (t.valid()) {
      g = t.graph();
      break;
    }
  }
  if (g == nullptr) return Tensor();
  const int rank = xs[0].valid() && xs[0].graph() == g ? xs[0].rank() : 0;
  return g->AddNode(OpKind::kConcat, std::move(xs), ConcatAttrs{NormalizeAxis(axis, rank)});
}
Tensor Slice(Tensor x, std::vector<int64_t> begin, std::vector<int64_t> size) {
  return Add1(OpKind::kSlice, x, SliceAttrs{std::move(begin), std::move(size)});
}
Tensor Pad(Tensor x, std::vector<std::pair<int64_t, int64_t>> paddings, double value) {
  return Add1(OpKind::kPad, x, PadAttrs{std::move(paddings), value});
}
Tensor OneHot(Tensor indices, int64_t depth, double on_value, double off_value, DType dtype) {
  return Add1(OpKind::kOneHot, indices, OneHotAttrs{depth, on_value, off_value, dtype});
}

Tensor Gather(Tensor params, Tensor indices, int axis) {
  Graph* g = GraphOf({params, indices});
  if (g == nullptr) return Tensor();
  const int rank = params.valid() ? params.rank() : 0;
  return g->AddNode(OpKind::kGather, {params, indices}, GatherAttrs{NormalizeAxis(axis, rank)});
}
Tensor UnsortedSegmentSum(Tensor data, Tensor segment_ids, int64_t num_segments, int axis) {
  Graph* g = GraphOf({data, segment_ids});
  if (g == nullptr) return Tensor();
  // A negative axis counts from the end of the output, whose rank is data's minus the
  // ids' plus one (as Gather's axis counts in params, the shape of this op's output).
  const int out_rank =
      data.valid() && segment_ids.valid() ? data.rank() - segment_ids.rank() + 1 : 0;
  return g->AddNode(OpKind::kUnsortedSegmentSum, {data, segment_ids},
                    SegmentSumAttrs{NormalizeAxis(axis, out_rank), num_segments});
}
Tensor Iota(Tensor like, int axis, DType dtype) {
  if (!like.valid()) return Tensor();
  return Add1(OpKind::kIota, like, IotaAttrs{NormalizeAxis(axis, like.rank()), dtype});
}

Tensor RandomUniform(Tensor like, Tensor step, uint64_t seed, DType dtype,
                     std::optional<uint64_t> op_key) {
  Graph* g = GraphOf({like, step});
  if (g == nullptr) return Tensor();
  return g->AddNode(OpKind::kRandomUniform, {like, step}, RandomAttrs{seed, op_key, dtype});
}
Tensor RandomNormal(Tensor like, Tensor step, uint64_t seed, std::optional<uint64_t> op_key) {
  Graph* g = GraphOf({like, step});
  if (g == nullptr) return Tensor();
  return g->AddNode(OpKind::kRandomNormal, {like, step}, RandomAttrs{seed, op_key, DType::kF32});
}

Tensor Conv2D(Tensor x, Tensor filter, const Window2D& window) {
  Graph* g = GraphOf({x, filter});
  if (g == nullptr) return Tensor();
  return g->AddNode(OpKind::kConv2D, {x, filter}, Conv2DAttrs{window, {}});
}

namespace {

// Conv2D's strides or dilations must be {h, w}. Any other length was read as a stride
// (dilation) of 0, and the node's "stride along H must be in [1, 2^20], got 0" named a 0
// the caller never wrote (TensorFlow's strides {1, 2, 2, 1}, say).
absl::Status CheckHeightWidth(const Tensor& x, const char* what, std::initializer_list<int> list) {
  if (list.size() == 2) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat("Conv2D of '", x.valid() ? x.name() : std::string("?"), "': ", what, " {",
                   absl::StrJoin(list, ", "), "}: Conv2D takes 2 ({h, w}), not ", list.size()));
}

}  // namespace

Tensor Conv2D(Tensor x, Tensor filter, std::initializer_list<int> strides, Padding padding,
              DataFormat format, std::initializer_list<int> dilations) {
  Graph* g = GraphOf({x, filter});
  if (g == nullptr) return Tensor();
  for (const absl::Status& s :
       {CheckHeightWidth(x, "strides", strides), CheckHeightWidth(x, "dilations", dilations)}) {
    if (s.ok()) continue;
    g->RecordError(s);
    return Tensor();
  }
  Window2D w;
  w.stride_h = *strides.begin();
  w.stride_w = *(strides.begin() + 1);
  w.dilation_h = *dilations.begin();
  w.dilation_w = *(dilations.begin() + 1);
  w.padding = padding;
  w.format = format;
  return Conv2D(x, filter, w);
}

namespace {
Pool2DAttrs PoolAttrs(std::array<int64_t, 2> size, std::array<int, 2> strides, Padding padding,
                      DataFormat format) {
  Pool2DAttrs a;
  a.size_h = size[0];
  a.size_w = size[1];
  a.window.stride_h = strides[0];
  a.window.stride_w = strides[1];
  a.window.padding = padding;
  a.window.format = format;
  return a;
}
}  // namespace

Tensor MaxPool(Tensor x, std::array<int64_t, 2> size, std::array<int, 2> strides, Padding padding,
               DataFormat format) {
  return MaxPool(x, PoolAttrs(size, strides, padding, format));
}

Tensor AvgPool(Tensor x, std::array<int64_t, 2> size, std::array<int, 2> strides, Padding padding,
               DataFormat format) {
  return AvgPool(x, PoolAttrs(size, strides, padding, format));
}

Tensor MaxPool(Tensor x, const Pool2DAttrs& attrs) {
  Pool2DAttrs a = attrs;
  a.shape.clear();
  return Add1(OpKind::kMaxPool, x, std::move(a));
}

Tensor AvgPool(Tensor x, const Pool2DAttrs& attrs) {
  Pool2DAttrs a = attrs;
  a.shape.clear();
  return Add1(OpKind::kAvgPool, x, std::move(a));
}

Tensor Conv2DBackpropInput(Shape input_shape, Tensor filter, Tensor dy, const Window2D& window) {
  Graph* g = GraphOf({filter, dy});
  if (g == nullptr) return Tensor();
  return g->AddNode(OpKind::kConv2DBackpropInput, {filter, dy},
                    Conv2DAttrs{window, std::move(input_shape)});
}

Tensor Conv2DBackpropFilter(Tensor x, Shape filter_shape, Tensor dy, const Window2D& window) {
  Graph* g = GraphOf({x, dy});
  if (g == nullptr) return Tensor();
  return g->AddNode(OpKind::kConv2DBackpropFilter, {x, dy},
                    Conv2DAttrs{window, std::move(filter_shape)});
}

Tensor MaxPoolGrad(Tensor x, Tensor dy, const Pool2DAttrs& attrs) {
  Graph* g = GraphOf({x, dy});
  if (g == nullptr) return Tensor();
  Pool2DAttrs a = attrs;
  a.shape.clear();
  return g->AddNode(OpKind::kMaxPoolGrad, {x, dy}, std::move(a));
}

Tensor MaxPoolGradGrad(Tensor x, Tensor grad, const Pool2DAttrs& attrs) {
  Graph* g = GraphOf({x, grad});
  if (g == nullptr) return Tensor();
  Pool2DAttrs a = attrs;
  a.shape.clear();
  return g->AddNode(OpKind::kMaxPoolGradGrad, {x, grad}, std::move(a));
}

Tensor AvgPoolGrad(Shape input_shape, Tensor dy, Pool2DAttrs attrs) {
  attrs.shape = std::move(input_shape);
  return Add1(OpKind::kAvgPoolGrad, dy, std::move(attrs));
}

std::vector<Tensor> HostCall(Graph& g, std::string_view name, std::vector<Tensor> inputs,
                             std::vector<TensorSpec> outputs, HostFunction fn) {
  Tensor t = g.AddNode(OpKind::kHostCall, std::move(inputs),
                       HostCallAttrs{std::move(fn), std::move(outputs)}, name);
  return g.Outputs(t);
}

// ---- Composites ----

namespace {

// bf16 and f16 statistics are computed in f32 (docs/MIXED_PRECISION.md): a 16-bit
// operand is cast up, anything else is left as it is.
Tensor Wide(Tensor x) { return x.valid() && Is16BitFloat(x.dtype()) ? Cast(x, DType::kF32) : x; }

// `y` cast back to `like`'s dtype when that is 16-bit (y is then f32).
Tensor NarrowLike(Tensor y, DType like) { return Is16BitFloat(like) ? Cast(y, like) : y; }

// Softmax and LogSoftmax under a mixed-precision policy (braze/precision.h) stay f32,
// as in torch.autocast's fp32 list: the loss reads them, and a matmul after them casts
// down itself. Otherwise they round to the logits' dtype.
Tensor NarrowSoftmax(Tensor y, DType like) {
  return y.valid() && y.graph()->compute_dtype() != DType::kF32 ? y : NarrowLike(y, like);
}

}  // namespace

Tensor Softmax(Tensor logits, int axis) {
  if (!logits.valid()) return Tensor();
  NameScope scope(*logits.graph(), "Softmax");
  if (Is16BitFloat(logits.dtype())) {
    return NarrowSoftmax(Softmax(Wide(logits), axis), logits.dtype());
  }
  // Subtracting the max keeps exp in range; it cancels in the ratio. One reciprocal per
  // row and a multiply per element, as TensorFlow's and oneDNN's kernels do: a division
  // per element costs a quarter of a fused softmax on AVX-512, and the sum is >= 1 (the
  // max's own term), so 1/sum is a normal number and the product is within 1.5 ulp of
  // the quotient.
  Tensor m = Max(logits, {axis}, true);
  Tensor e = Exp(logits - m);
  return e * Reciprocal(Sum(e, {axis}, true));
}

Tensor LogSoftmax(Tensor logits, int axis) {
  if (!logits.valid()) return Tensor();
  NameScope scope(*logits.graph(), "LogSoftmax");
  if (Is16BitFloat(logits.dtype())) {
    return NarrowSoftmax(LogSoftmax(Wide(logits), axis), logits.dtype());
  }
  Tensor shifted = logits - Max(logits, {axis}, true);
  return shifted - Log(Sum(Exp(shifted), {axis}, true));
}

Tensor SoftmaxCrossEntropyWithLogits(Tensor logits, Tensor labels) {
  if (!logits.valid()) return Tensor();
  NameScope scope(*logits.graph(), "SoftmaxCrossEntropyWithLogits");
  // Through log-softmax, never log(softmax): stable for large logits.
  return -Sum(labels * LogSoftmax(logits, -1), {-1});
}

// Whether `a` is one of Activation's values: a switch with no default, so a new one is
// a -Werror=switch error here until Dense applies it.
bool KnownActivation(Activation a) {
  switch (a) {
    case Activation::kNone:
    case Activation::kRelu:
    case Activation::kGelu:
    case Activation::kSigmoid:
    case Activation::kTanh:
      return true;
  }
  return false;
}

Tensor Dense(Tensor x, Tensor w, Tensor b, Activation activation) {
  if (!x.valid()) return Tensor();
  // An int cast to Activation (as a window op's Padding was, in the third audit) matched
  // no case and gave x @ w + b without its activation, silently.
  if (!KnownActivation(activation)) {
    x.graph()->RecordError(absl::InvalidArgumentError(
        absl::StrCat("Dense of '", x.name(), "': unknown activation ", static_cast<int>(activation),
                     " (not a braze::Activation: kNone, kRelu, kGelu, kSigmoid or kTanh)")));
    return Tensor();
  }
  NameScope scope(*x.graph(), "Dense");
  Tensor y = MatMul(x, w) + b;
  switch (activation) {
    case Activation::kNone:
      return y;
    case Activation::kRelu:
      return Relu(y);
    case Activation::kGelu:
      return Gelu(y);
    case Activation::kSigmoid:
      return Sigmoid(y);
    case Activation::kTanh:
      return Tanh(y);
  }
  return y;
}

Tensor LayerNorm(Tensor x, Tensor gamma, Tensor beta, double epsilon) {
  if (!x.valid()) return Tensor();
  NameScope scope(*x.graph(), "LayerNorm");
  if (Is16BitFloat(x.dtype())) {
    return NarrowLike(LayerNorm(Wide(x), Wide(gamma), Wide(beta), epsilon), x.dtype());
  }
  Tensor centered = x - Mean(x, {-1}, true);
  Tensor variance = Mean(Square(centered), {-1}, true);
  return centered * Rsqrt(variance + epsilon) * gamma + beta;
}

BatchNormOutput BatchNorm(Tensor x, Tensor gamma, Tensor beta, Tensor moving_mean,
                          Tensor moving_variance, bool training, double momentum, double epsilon,
                          int axis) {
  BatchNormOutput out;
  if (!x.valid()) return out;
  Graph& g = *x.graph();
  NameScope scope(g, "BatchNorm");
  // bf16 and f16: statistics and normalization in f32; the moving statistics keep
  // their own dtype (f32 masters, or 16-bit), and y is x's dtype.
  const DType x_dtype = x.dtype();
  const bool narrow = Is16BitFloat(x_dtype);
  const int rank = x.rank();
  const int channel = NormalizeAxis(axis, rank);
  // Out of range, every axis was reduced: one mean and variance for the whole batch.
  if (channel < 0 || channel >= rank) {
    g.RecordError(absl::InvalidArgumentError(
        absl::StrCat("BatchNorm of '", x.name(), "': channel axis ", axis, " is out of range for ",
                     TypeString(x.type()))));
    return out;
  }
  auto stat_update = [&](Tensor batch, Tensor moving) {
    return narrow && moving.valid() && batch.valid() && batch.dtype() != moving.dtype()
               ? Cast(batch, moving.dtype())
               : batch;
  };
  if (narrow) {
    x = Wide(x);
    gamma = Wide(gamma);
    beta = Wide(beta);
  }
  std::vector<int> axes;
  for (int d = 0; d < rank; ++d) {
    if (d != channel) axes.push_back(d);
  }
  // [C] as x's rank with ones elsewhere, so that it broadcasts along the channel axis
  // in either format (a plain [C] would meet W in NCHW).
  auto per_channel = [&](Tensor v) {
    Shape shape(rank, 1);
    shape[channel] = -1;
    return Reshape(v, shape);
  };
  Tensor mean, variance;
  if (training) {
    mean = Mean(x, axes, /*keep_dims=*/true);
    variance = Mean(Square(x - mean), axes, /*keep_dims=*/true);
    const double decay = 1.0 - momentum;
    const Shape flat = {-1};
    const Tensor batch_mean = stat_update(Reshape(mean, flat), moving_mean);
    const Tensor batch_variance = stat_update(Reshape(variance, flat), moving_variance);
    out.updates.push_back(AssignSub(moving_mean, (moving_mean - batch_mean) * decay));
    out.updates.push_back(AssignSub(moving_variance, (moving_variance - batch_variance) * decay));
  } else {
    mean = per_channel(narrow ? Wide(moving_mean) : moving_mean);
    variance = per_channel(narrow ? Wide(moving_variance) : moving_variance);
  }
  const Tensor scale = Rsqrt(variance + epsilon) * per_channel(gamma);
  out.y = NarrowLike((x - mean) * scale + per_channel(beta), x_dtype);
  return out;
}

Tensor GlobalAvgPool(Tensor x, DataFormat format) {
  if (!x.valid()) return Tensor();
  // Any format but NHWC was read as NCHW (an int cast to DataFormat included), and an x
  // of rank 3 or 5 was averaged over two of its axes as if it had rank 4, silently.
  auto bad = [&](const std::string& why) {
    x.graph()->RecordError(
        absl::InvalidArgumentError(absl::StrCat("GlobalAvgPool of '", x.name(), "': ", why)));
    return Tensor();
  };
  if (format != DataFormat::kNHWC && format != DataFormat::kNCHW) {
    return bad(absl::StrCat("unknown data format ", static_cast<int>(format),
                            " (not a braze::DataFormat: NHWC or NCHW)"));
  }
  if (x.rank() != 4) {
    return bad(absl::StrCat("x is ", TypeString(x.type()), ", not of rank 4 (",
                            format == DataFormat::kNHWC ? "[N, H, W, C]" : "[N, C, H, W]", ")"));
  }
  NameScope scope(*x.graph(), "GlobalAvgPool");
  return format == DataFormat::kNHWC ? Mean(x, {1, 2}) : Mean(x, {2, 3});
}

Tensor Flatten(Tensor x) {
  if (!x.valid()) return Tensor();
  int64_t inner = 1;
  for (int d = 1; d < x.rank(); ++d) {
    if (x.shape()[d] < 0) {
      // Reshape reports a second -1 against its node.
      return Reshape(x, {x.rank() > 0 ? x.shape()[0] : 1, -1});
    }
    inner *= x.shape()[d];
  }
  return Reshape(x, {-1, inner});
}

Tensor Dropout(Tensor x, double rate, Tensor step, uint64_t seed) {
  if (!x.valid()) return Tensor();
  Graph& g = *x.graph();
  if (!(rate >= 0 && rate < 1)) {
    g.RecordError(absl::InvalidArgumentError(
        absl::StrCat("Dropout of '", x.name(), "': rate ", rate, " is outside [0, 1)")));
    return Tensor();
  }
  // An integer x was scaled by 1 / (1 - rate) cast to its dtype (1 for rate < 0.5).
  if (!IsFloating(x.dtype())) {
    g.RecordError(absl::InvalidArgumentError(absl::StrCat("Dropout of '", x.name(), "': x is ",
                                                          TypeString(x.type()), ", not floating")));
    return Tensor();
  }
  if (rate == 0) return x;
  NameScope scope(g, "Dropout");
  // Dropped where u < rate: with u a multiple of 2^-24 (or 2^-53), exactly
  // ceil(rate 2^24) / 2^24 of the uniforms fall there.
  const Tensor u =
      RandomUniform(x, step, seed, x.dtype() == DType::kF64 ? DType::kF64 : DType::kF32);
  const Tensor drop = Less(u, ScalarConst(g, rate, u.dtype()));
  return Select(drop, ScalarConst(g, 0, x.dtype()), x * (1.0 / (1.0 - rate)));
}

Tensor Gelu(Tensor x) {
  if (!x.valid()) return Tensor();
  NameScope scope(*x.graph(), "Gelu");
  // A composite: in f32 for bf16 and f16, rounded once (its chain of 16-bit ops rounded
  // at each op and its constants to 16 bits: 33 bf16 ulps off at x = -4.9).
  if (Is16BitFloat(x.dtype())) return NarrowLike(Gelu(Wide(x)), x.dtype());
  const double k = std::sqrt(2.0 / M_PI);
  Tensor inner = (x + 0.044715 * x * x * x) * k;
  // 0.5 * (1 + tanh(u)) is sigmoid(2u): the same function without 1 + tanh's cancellation
  // for x < 0 (Gelu(-5) was 30% off, Gelu(-9) 0 for -1.3e-28), and x * 1 = x where the
  // cube overflows.
  return x * Sigmoid(inner * 2.0);
}

Tensor operator+(Tensor a, Tensor b) { return Add(a, b); }
Tensor operator-(Tensor a, Tensor b) { return Sub(a, b); }
Tensor operator*(Tensor a, Tensor b) { return Mul(a, b); }
Tensor operator/(Tensor a, Tensor b) { return Div(a, b); }
Tensor operator-(Tensor a) { return Neg(a); }
Tensor operator+(Tensor a, double b) { return WithScalar(Add, a, b, "+", false); }
Tensor operator-(Tensor a, double b) { return WithScalar(Sub, a, b, "-", false); }
Tensor operator*(Tensor a, double b) { return WithScalar(Mul, a, b, "*", false); }
Tensor operator/(Tensor a, double b) { return WithScalar(Div, a, b, "/", false); }
Tensor operator+(double a, Tensor b) { return WithScalar(Add, b, a, "+", true); }
Tensor operator-(double a, Tensor b) { return WithScalar(Sub, b, a, "-", true); }
Tensor operator*(double a, Tensor b) { return WithScalar(Mul, b, a, "*", true); }
Tensor operator/(double a, Tensor b) { return WithScalar(Div, b, a, "/", true); }

}  // namespace braze
