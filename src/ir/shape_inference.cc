// Output types of every op. Runs at build time (dims may be -1) and again at run time
// with the concrete shapes of the feeds, so one function is the single source of truth.
#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "braze/graph.h"
#include "braze/status.h"
#include "ir/changing_dims.h"
#include "ir/control_flow.h"
#include "ir/window_geometry.h"

namespace braze {
namespace {

using Types = std::vector<TensorType>;

absl::Status Invalid(std::string msg) { return absl::InvalidArgumentError(std::move(msg)); }

absl::Status CheckDType(DType d, bool allow_int, bool allow_bool, const char* what) {
  if (IsFloating(d) || (allow_int && d == DType::kI32) || (allow_bool && d == DType::kBool)) {
    return absl::OkStatus();
  }
  return Invalid(absl::StrCat(what, " does not support dtype ", DTypeName(d)));
}

// Unknown dims are compatible with anything; known dims must agree.
bool DimsCompatible(int64_t a, int64_t b) { return a < 0 || b < 0 || a == b; }

absl::Status CheckAxes(const std::vector<int>& axes, int rank) {
  for (size_t i = 0; i < axes.size(); ++i) {
    if (axes[i] < 0 || axes[i] >= rank) {
      return Invalid(absl::StrCat("reduction axis ", axes[i], " out of range for rank ", rank));
    }
    if (i > 0 && axes[i] <= axes[i - 1]) {
      return Invalid(absl::StrCat("reduction axes must be unique: ", absl::StrJoin(axes, ",")));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<Types> Unary(OpKind op, const TensorType& x) {
  const bool int_ok = op == OpKind::kNeg || op == OpKind::kAbs || op == OpKind::kRelu ||
                      op == OpKind::kSquare || op == OpKind::kSign;
  BRAZE_RETURN_IF_ERROR(CheckDType(x.dtype, int_ok, false, OpName(op)));
  return Types{x};
}

absl::StatusOr<Types> Binary(OpKind op, const TensorType& a, const TensorType& b) {
  if (a.dtype != b.dtype) {
    return Invalid(
        absl::StrCat("operand dtypes differ: ", DTypeName(a.dtype), " and ", DTypeName(b.dtype)));
  }
  BRAZE_ASSIGN_OR_RETURN(Shape shape, BroadcastShapes(a.shape, b.shape));
  const bool is_cmp = op == OpKind::kGreater || op == OpKind::kLess || op == OpKind::kEqual;
  BRAZE_RETURN_IF_ERROR(CheckDType(a.dtype, op != OpKind::kPow, op == OpKind::kEqual, OpName(op)));
  return Types{{is_cmp ? DType::kBool : a.dtype, shape}};
}

absl::StatusOr<Types> Reduce(OpKind op, const ReduceAttrs& attrs, const TensorType& x) {
  BRAZE_RETURN_IF_ERROR(CheckDType(x.dtype, op != OpKind::kMean, false, OpName(op)));
  const int rank = static_cast<int>(x.shape.size());
  BRAZE_RETURN_IF_ERROR(CheckAxes(attrs.axes, rank));
  Shape out;
  for (int d = 0; d < rank; ++d) {
    bool reduced = std::find(attrs.axes.begin(), attrs.axes.end(), d) != attrs.axes.end();
    if (!reduced) {
      out.push_back(x.shape[d]);
    } else if (attrs.keep_dims) {
      out.push_back(1);
    }
  }
  return Types{{x.dtype, out}};
}

// SumToShapeOf(x, like): like's shape, which must broadcast to x's; a -1 on either side
// is checked when the Run knows it.
absl::StatusOr<Types> SumToShapeOfTypes(const TensorType& x, const TensorType& like) {
  BRAZE_RETURN_IF_ERROR(CheckDType(x.dtype, true, false, "SumToShapeOf"));
  const size_t rank = x.shape.size(), like_rank = like.shape.size();
  bool fits = like_rank <= rank;
  for (size_t i = 0; fits && i < like_rank; ++i) {
    const int64_t l = like.shape[i], d = x.shape[rank - like_rank + i];
    fits = l == -1 || d == -1 || l == 1 || l == d;
  }
  if (!fits) {
    return Invalid(absl::StrCat("cannot sum ", ShapeString(x.shape), " to ",
                                ShapeString(like.shape), ": that shape does not broadcast to x's"));
  }
  return Types{{x.dtype, like.shape}};
}

absl::StatusOr<Types> MatMulTypes(OpKind op, const MatMulAttrs& attrs, const TensorType& a,
                                  const TensorType& b) {
  if (a.dtype != b.dtype) {
    return Invalid(
        absl::StrCat("operand dtypes differ: ", DTypeName(a.dtype), " and ", DTypeName(b.dtype)));
  }
  BRAZE_RETURN_IF_ERROR(CheckDType(a.dtype, true, false, OpName(op)));
  const size_t ra = a.shape.size(), rb = b.shape.size();
  if (op == OpKind::kMatMul && (ra != 2 || rb != 2)) {
    return Invalid(absl::StrCat("MatMul needs rank-2 operands, got ", ShapeString(a.shape), " and ",
                                ShapeString(b.shape)));
  }
  if (op == OpKind::kBatchMatMul && (ra < 3 || ra != rb)) {
    return Invalid(absl::StrCat("BatchMatMul needs operands of equal rank >= 3, got ",
                                ShapeString(a.shape), " and ", ShapeString(b.shape)));
  }
  Shape out;
  for (size_t i = 0; i + 2 < ra; ++i) {
    if (!DimsCompatible(a.shape[i], b.shape[i])) {
      return Invalid(
          absl::StrCat("batch dims differ: ", ShapeString(a.shape), " and ", ShapeString(b.shape)));
    }
    out.push_back(a.shape[i] >= 0 ? a.shape[i] : b.shape[i]);
  }
  int64_t m = attrs.transpose_a ? a.shape[ra - 1] : a.shape[ra - 2];
  int64_t ka = attrs.transpose_a ? a.shape[ra - 2] : a.shape[ra - 1];
  int64_t kb = attrs.transpose_b ? b.shape[rb - 1] : b.shape[rb - 2];
  int64_t n = attrs.transpose_b ? b.shape[rb - 2] : b.shape[rb - 1];
  if (!DimsCompatible(ka, kb)) {
    return Invalid(absl::StrCat("matmul inner dimensions differ: ", ShapeString(a.shape),
                                attrs.transpose_a ? "^T" : "", " x ", ShapeString(b.shape),
                                attrs.transpose_b ? "^T" : "", " (", ka, " vs ", kb, ")"));
  }
  out.push_back(m);
  out.push_back(n);
  return Types{{a.dtype, out}};
}

absl::StatusOr<Types> ReshapeTypes(const ReshapeAttrs& attrs, const TensorType& x) {
  int unknown = -1;
  int64_t known = 1;
  for (size_t i = 0; i < attrs.shape.size(); ++i) {
    if (attrs.shape[i] == -1) {
      if (unknown >= 0) return Invalid("reshape target has more than one -1");
      unknown = static_cast<int>(i);
    } else if (attrs.shape[i] < 0) {
      return Invalid(absl::StrCat("bad reshape target ", ShapeString(attrs.shape)));
    } else {
      known *= attrs.shape[i];
    }
  }
  Shape out = attrs.shape;
  const int64_t total = NumElements(x.shape);
  if (total < 0) return Types{{x.dtype, out}};  // resolved at run time
  if (unknown >= 0) {
    if (known == 0 || total % known != 0) {
      return Invalid(absl::StrCat("reshape size mismatch: cannot reshape ", ShapeString(x.shape),
                                  " (", total, " elements) to ", ShapeString(attrs.shape)));
    }
    out[unknown] = total / known;
  } else if (known != total) {
    return Invalid(absl::StrCat("reshape size mismatch: cannot reshape ", ShapeString(x.shape),
                                " (", total, " elements) to ", ShapeString(attrs.shape), " (",
                                known, " elements)"));
  }
  return Types{{x.dtype, out}};
}

absl::StatusOr<Types> TransposeTypes(const TransposeAttrs& attrs, const TensorType& x) {
  const size_t rank = x.shape.size();
  std::vector<int> sorted = attrs.perm;
  std::sort(sorted.begin(), sorted.end());
  std::vector<int> iota(rank);
  std::iota(iota.begin(), iota.end(), 0);
  if (sorted != iota) {
    return Invalid(
        absl::StrCat("invalid perm [", absl::StrJoin(attrs.perm, ","), "] for rank ", rank));
  }
  Shape out;
  for (int p : attrs.perm) out.push_back(x.shape[p]);
  return Types{{x.dtype, out}};
}

absl::StatusOr<Types> ConcatTypes(const ConcatAttrs& attrs, absl::Span<const TensorType> xs) {
  if (xs.empty()) return Invalid("Concat needs at least one input");
  const int rank = static_cast<int>(xs[0].shape.size());
  if (attrs.axis < 0 || attrs.axis >= rank) {
    return Invalid(absl::StrCat("concat axis ", attrs.axis, " out of range for rank ", rank));
  }
  Shape out = xs[0].shape;
  for (size_t i = 1; i < xs.size(); ++i) {
    if (xs[i].dtype != xs[0].dtype || static_cast<int>(xs[i].shape.size()) != rank) {
      return Invalid(absl::StrCat("concat input ", i, " is ", TypeString(xs[i]),
                                  ", expected dtype/rank of ", TypeString(xs[0])));
    }
    for (int d = 0; d < rank; ++d) {
      if (d == attrs.axis) {
        if (out[d] < 0 || xs[i].shape[d] < 0) {
          out[d] = -1;
        } else if (__builtin_add_overflow(out[d], xs[i].shape[d], &out[d])) {
          return Invalid(absl::StrCat("concat axis ", attrs.axis,
                                      ": the sum of the inputs' dims "
                                      "overflows a 64-bit integer"));
        }
      } else if (!DimsCompatible(out[d], xs[i].shape[d])) {
        return Invalid(absl::StrCat("concat input ", i, " has shape ", ShapeString(xs[i].shape),
                                    ", incompatible with ", ShapeString(xs[0].shape)));
      } else if (out[d] < 0) {
        out[d] = xs[i].shape[d];
      }
    }
  }
  return Types{{xs[0].dtype, out}};
}

absl::StatusOr<Types> SliceTypes(const SliceAttrs& attrs, const TensorType& x) {
  const size_t rank = x.shape.size();
  if (attrs.begin.size() != rank || attrs.size.size() != rank) {
    return Invalid(absl::StrCat("slice begin/size need ", rank, " entries"));
  }
  Shape out(rank);
  for (size_t d = 0; d < rank; ++d) {
    const int64_t b = attrs.begin[d], s = attrs.size[d], dim = x.shape[d];
    if (b < 0 || s < -1) return Invalid(absl::StrCat("bad slice in dim ", d));
    if (s == -1) {
      out[d] = dim < 0 ? -1 : dim - b;
    } else {
      out[d] = s;
    }
    // out[d] > dim - b, not b + out[d] > dim: that sum wraps for a size near 2^63.
    if (dim >= 0 && (b > dim || out[d] < 0 || out[d] > dim - b)) {
      return Invalid(
          absl::StrCat("slice [", b, ", +", s, ") out of bounds for dim ", d, " of size ", dim));
    }
  }
  return Types{{x.dtype, out}};
}

// A value attribute (Pad's value, OneHot's on and off values) converts to the result's
// dtype as a Cast does (JAX's and torch's rule): an i32 truncates toward zero (Pad of an
// i32 by 2.7 pads with 2), a bool is value != 0. For an i32, NaN and a value outside its
// range have no conversion (C++'s is undefined, and the compiled code's differed from
// the reference's): an error naming the node.
absl::Status CheckValueOfDType(double value, DType dtype, const char* what) {
  if (dtype != DType::kI32 ||
      (std::trunc(value) >= -2147483648.0 && std::trunc(value) <= 2147483647.0)) {
    return absl::OkStatus();
  }
  return Invalid(absl::StrCat(what, " ", value, " has no i32 value (NaN, or out of its range)"));
}

absl::StatusOr<Types> PadTypes(const PadAttrs& attrs, const TensorType& x) {
  if (attrs.paddings.size() != x.shape.size()) {
    return Invalid(absl::StrCat("pad needs ", x.shape.size(), " (before, after) pairs"));
  }
  BRAZE_RETURN_IF_ERROR(CheckValueOfDType(attrs.value, x.dtype, "pad value"));
  Shape out = x.shape;
  for (size_t d = 0; d < out.size(); ++d) {
    const auto [lo, hi] = attrs.paddings[d];
    if (lo < 0 || hi < 0) return Invalid(absl::StrCat("negative padding in dim ", d));
    // Checked: a wrapped sum (x[3] padded by 2^63 - 1 on each side) was a dim of 1.
    if (out[d] >= 0 && (__builtin_add_overflow(out[d], lo, &out[d]) ||
                        __builtin_add_overflow(out[d], hi, &out[d]))) {
      return Invalid(absl::StrCat("padding ", lo, " + ", hi, " of dim ", d, " (", x.shape[d],
                                  ") overflows a 64-bit integer"));
    }
  }
  return Types{{x.dtype, out}};
}

// A shape whose dims are all >= -1 and whose byte size fits in an int64 (unknown dims
// count as 1): a larger one cannot be allocated, and its element count would overflow.
absl::Status CheckTensorSize(const TensorType& t) {
  int64_t bytes = static_cast<int64_t>(SizeOf(t.dtype));
  if (bytes == 0) {  // a value outside the DType enum (a Cast or Placeholder given one)
    return absl::InvalidArgumentError(
        absl::StrCat("unknown dtype ", static_cast<int>(t.dtype), " (not a braze::DType)"));
  }
  for (int64_t d : t.shape) {
    if (d < -1) return absl::InvalidArgumentError(absl::StrCat("dimension ", d, " is negative"));
    const int64_t n = std::max<int64_t>(d, 1);
    if (bytes > std::numeric_limits<int64_t>::max() / n) {
      return absl::InvalidArgumentError(absl::StrCat("shape ", ShapeString(t.shape),
                                                     " is too large: its byte size overflows "
                                                     "a 64-bit integer"));
    }
    bytes *= n;
  }
  return absl::OkStatus();
}

absl::Status CheckWindowDTypes(OpKind op, absl::Span<const TensorType> in) {
  for (const TensorType& t : in) {
    BRAZE_RETURN_IF_ERROR(CheckDType(t.dtype, false, false, OpName(op)));
    if (t.dtype != in[0].dtype) {
      return Invalid(absl::StrCat(OpName(op), " operand dtypes differ: ", TypeString(in[0]),
                                  " and ", TypeString(t)));
    }
  }
  return absl::OkStatus();
}

// `what` must have the shape `want` (dims unknown on either side match).
absl::Status CheckShape(const char* what, const Shape& got, const Shape& want) {
  if (got.size() != want.size() || !ShapeMatches(got, want)) {
    return Invalid(absl::StrCat(what, " is ", ShapeString(got), "; expected ", ShapeString(want)));
  }
  return absl::OkStatus();
}

// The input shape a gradient op carries (Conv2DBackpropInput's, AvgPoolGrad's), with an
// unknown batch (a placeholder's -1) taken from dy's: the other dims must be known.
absl::StatusOr<Shape> BatchFrom(DataFormat format, const Shape& x, const Shape& dy) {
  const int n = AxesOf(format).n;
  for (size_t d = 0; d < x.size(); ++d) {
    if (x[d] < 0 && static_cast<int>(d) != n) {
      return Invalid("the input shape " + ShapeString(x) + " must be known but for its batch dim");
    }
  }
  Shape out = x;
  if (x.size() == 4 && dy.size() == 4 && x[n] < 0) out[n] = dy[n];
  return out;
}

// Conv2D(x, filter), Conv2DBackpropInput(filter, dy), Conv2DBackpropFilter(x, dy).
absl::StatusOr<Types> ConvTypes(OpKind op, const Conv2DAttrs& a, absl::Span<const TensorType> in) {
  BRAZE_RETURN_IF_ERROR(CheckWindowDTypes(op, in));
  const DType dt = in[0].dtype;
  switch (op) {
    case OpKind::kConv2D: {
      BRAZE_ASSIGN_OR_RETURN(Conv2DGeometry g,
                             Conv2DGeometryOf(a.window, in[0].shape, in[1].shape));
      return Types{{dt, g.OutputShape()}};
    }
    case OpKind::kConv2DBackpropInput: {
      BRAZE_ASSIGN_OR_RETURN(Shape x, BatchFrom(a.window.format, a.shape, in[1].shape));
      BRAZE_ASSIGN_OR_RETURN(Conv2DGeometry g, Conv2DGeometryOf(a.window, x, in[0].shape));
      BRAZE_RETURN_IF_ERROR(CheckShape("the output gradient", in[1].shape, g.OutputShape()));
      return Types{{dt, x}};
    }
    default: {  // kConv2DBackpropFilter
      if (!IsFullyDefined(a.shape)) {
        return Invalid("Conv2DBackpropFilter's filter shape " + ShapeString(a.shape) +
                       " must be fully defined");
      }
      BRAZE_ASSIGN_OR_RETURN(Conv2DGeometry g, Conv2DGeometryOf(a.window, in[0].shape, a.shape));
      BRAZE_RETURN_IF_ERROR(CheckShape("the output gradient", in[1].shape, g.OutputShape()));
      return Types{{dt, a.shape}};
    }
  }
}

// MaxPool(x), AvgPool(x), MaxPoolGrad(x, dy), MaxPoolGradGrad(x, g), AvgPoolGrad(dy).
absl::StatusOr<Types> PoolTypes(OpKind op, const Pool2DAttrs& a, absl::Span<const TensorType> in) {
  BRAZE_RETURN_IF_ERROR(CheckWindowDTypes(op, in));
  const DType dt = in[0].dtype;
  if (op == OpKind::kAvgPoolGrad) {
    BRAZE_ASSIGN_OR_RETURN(Shape x, BatchFrom(a.window.format, a.shape, in[0].shape));
    BRAZE_ASSIGN_OR_RETURN(Pool2DGeometry g, Pool2DGeometryOf(a, x));
    BRAZE_RETURN_IF_ERROR(CheckShape("the output gradient", in[0].shape, g.OutputShape()));
    return Types{{dt, x}};
  }
  BRAZE_ASSIGN_OR_RETURN(Pool2DGeometry g, Pool2DGeometryOf(a, in[0].shape));
  switch (op) {
    case OpKind::kMaxPoolGrad:  // dy has the pool's output shape; dx is x's
      BRAZE_RETURN_IF_ERROR(CheckShape("the output gradient", in[1].shape, g.OutputShape()));
      return Types{{dt, in[0].shape}};
    case OpKind::kMaxPoolGradGrad:  // g has x's shape; the result the pool's output's
      BRAZE_RETURN_IF_ERROR(CheckShape("the gradient's gradient", in[1].shape, in[0].shape));
      return Types{{dt, g.OutputShape()}};
    default:
      return Types{{dt, g.OutputShape()}};
  }
}

// Gather, UnsortedSegmentSum and Iota (graph.h's GatherAttrs, SegmentSumAttrs, IotaAttrs).
absl::StatusOr<Types> GatherTypes(const GatherAttrs& a, const TensorType& params,
                                  const TensorType& indices) {
  const int rank = static_cast<int>(params.shape.size());
  if (a.axis < 0 || a.axis >= rank) {
    return Invalid(
        absl::StrCat("Gather axis ", a.axis, " out of range for params ", TypeString(params)));
  }
  if (indices.dtype != DType::kI32) {
    return Invalid(absl::StrCat("Gather indices must be i32, got ", TypeString(indices)));
  }
  Shape out(params.shape.begin(), params.shape.begin() + a.axis);
  out.insert(out.end(), indices.shape.begin(), indices.shape.end());
  out.insert(out.end(), params.shape.begin() + a.axis + 1, params.shape.end());
  return Types{{params.dtype, out}};
}

absl::StatusOr<Types> SegmentSumTypes(const SegmentSumAttrs& a, const TensorType& data,
                                      const TensorType& ids) {
  BRAZE_RETURN_IF_ERROR(CheckDType(data.dtype, true, false, "UnsortedSegmentSum"));
  if (ids.dtype != DType::kI32) {
    return Invalid(
        absl::StrCat("UnsortedSegmentSum segment_ids must be i32, got ", TypeString(ids)));
  }
  if (a.num_segments < 0) {
    return Invalid(
        absl::StrCat("UnsortedSegmentSum num_segments must be >= 0, got ", a.num_segments));
  }
  const int rank = static_cast<int>(data.shape.size());
  const int ids_rank = static_cast<int>(ids.shape.size());
  if (a.axis < 0 || a.axis + ids_rank > rank) {
    return Invalid(absl::StrCat("UnsortedSegmentSum axis ", a.axis, " with segment_ids ",
                                TypeString(ids), " does not fit data ", TypeString(data)));
  }
  for (int d = 0; d < ids_rank; ++d) {
    if (!DimsCompatible(ids.shape[d], data.shape[a.axis + d])) {
      return Invalid(absl::StrCat("UnsortedSegmentSum segment_ids ", TypeString(ids),
                                  " do not match data ", TypeString(data), " at axis ", a.axis));
    }
  }
  Shape out(data.shape.begin(), data.shape.begin() + a.axis);
  out.push_back(a.num_segments);
  out.insert(out.end(), data.shape.begin() + a.axis + ids_rank, data.shape.end());
  return Types{{data.dtype, out}};
}

absl::StatusOr<Types> IotaTypes(const IotaAttrs& a, const TensorType& like) {
  const int rank = static_cast<int>(like.shape.size());
  if (a.axis < 0 || a.axis >= rank) {
    return Invalid(absl::StrCat("Iota axis ", a.axis, " out of range for ", TypeString(like)));
  }
  BRAZE_RETURN_IF_ERROR(CheckDType(a.dtype, true, false, "Iota"));
  return Types{{a.dtype, Shape{like.shape[a.axis]}}};
}

// The attention ops (graph.h's AttentionAttrs): q [..., Tq, D], k [..., Tk, D],
// v [..., Tk, Dv] (rank >= 2, equal leading dims), a float dtype for all, and for the
// gradients dO [..., Tq, Dv], lse and delta [..., Tq].
absl::StatusOr<Types> AttentionTypes(OpKind op, const AttentionAttrs& a,
                                     absl::Span<const TensorType> in) {
  const char* name = OpName(op);
  if (!(a.dropout >= 0 && a.dropout < 1)) {
    return Invalid(absl::StrCat(name, " dropout rate must be in [0, 1), got ", a.dropout));
  }
  // The step, last, exactly when there is dropout (not for the logsumexp).
  const size_t base = op == OpKind::kAttention ? 3 : op == OpKind::kAttentionLogSumExp ? 2 : 6;
  const bool dropout = a.dropout != 0 && op != OpKind::kAttentionLogSumExp;
  if (in.size() != base + (dropout ? 1 : 0)) {
    return Invalid(absl::StrCat(name, " expects ", base + (dropout ? 1 : 0), " inputs",
                                dropout ? " (the last the dropout's step)" : "", ", got ",
                                in.size()));
  }
  if (dropout && (in[base].dtype != DType::kI32 || !in[base].shape.empty())) {
    return Invalid(
        absl::StrCat(name, " dropout step must be an i32 scalar, got ", TypeString(in[base])));
  }
  const TensorType& q = in[0];
  const TensorType& k = in[1];
  BRAZE_RETURN_IF_ERROR(CheckDType(q.dtype, false, false, name));
  if (!(a.scale == a.scale) || std::isinf(a.scale)) {
    return Invalid(absl::StrCat(name, " scale must be finite, got ", a.scale));
  }
  const char* arg_names[] = {"q", "k", "v", "dO", "lse", "delta"};
  for (size_t i = 1; i < base; ++i) {
    if (in[i].dtype != q.dtype) {
      return Invalid(absl::StrCat(name, " ", arg_names[i], " is ", TypeString(in[i]), "; q is ",
                                  TypeString(q)));
    }
  }
  const size_t rank = q.shape.size();
  if (rank < 2) return Invalid(absl::StrCat(name, " q must be [..., T, D], got ", TypeString(q)));
  // Each argument's expected rank and its last dims (-2: unknown, matched below).
  auto check = [&](size_t i, size_t want_rank) -> absl::Status {
    if (in[i].shape.size() != want_rank) {
      return Invalid(absl::StrCat(name, " ", arg_names[i], " ", TypeString(in[i]),
                                  " must have rank ", want_rank, " (q is ", TypeString(q), ")"));
    }
    for (size_t d = 0; d + 2 < rank; ++d) {
      if (!DimsCompatible(in[i].shape[d], q.shape[d])) {
        return Invalid(absl::StrCat(name, " ", arg_names[i], " ", TypeString(in[i]), " and q ",
                                    TypeString(q), " differ in leading dim ", d));
      }
    }
    return absl::OkStatus();
  };
  auto mismatch = [&](size_t i, size_t j, const char* what) {
    return Invalid(absl::StrCat(name, " ", arg_names[i], " ", TypeString(in[i]), " and ",
                                arg_names[j], " ", TypeString(in[j]), " differ in ", what));
  };
  BRAZE_RETURN_IF_ERROR(check(1, rank));
  if (!DimsCompatible(q.shape[rank - 1], k.shape[rank - 1])) return mismatch(0, 1, "D");
  const int64_t tq = q.shape[rank - 2], tk = k.shape[rank - 2];
  Shape lead(q.shape.begin(), q.shape.end() - 2);
  if (op == OpKind::kAttentionLogSumExp) {
    Shape out = lead;
    out.push_back(tq);
    return Types{{q.dtype, out}};
  }
  const TensorType& v = in[2];
  BRAZE_RETURN_IF_ERROR(check(2, rank));
  if (!DimsCompatible(v.shape[rank - 2], tk)) return mismatch(2, 1, "T");
  const int64_t dv = v.shape[rank - 1];
  if (op != OpKind::kAttention) {
    BRAZE_RETURN_IF_ERROR(check(3, rank));
    if (!DimsCompatible(in[3].shape[rank - 2], tq)) return mismatch(3, 0, "T");
    if (!DimsCompatible(in[3].shape[rank - 1], dv)) return mismatch(3, 2, "D");
    for (size_t i : {4, 5}) {
      BRAZE_RETURN_IF_ERROR(check(i, rank - 1));
      if (!DimsCompatible(in[i].shape[rank - 2], tq)) return mismatch(i, 0, "T");
    }
  }
  Shape out = lead;
  switch (op) {
    case OpKind::kAttention:
      out.insert(out.end(), {tq, dv});
      break;
    case OpKind::kAttentionGradQ:
      return Types{{q.dtype, q.shape}};
    case OpKind::kAttentionGradK:
      return Types{{q.dtype, k.shape}};
    default:  // kAttentionGradV
      return Types{{q.dtype, v.shape}};
  }
  return Types{{q.dtype, out}};
}

// RandomUniform and RandomNormal (graph.h's RandomAttrs): like's shape, step an i32 scalar.
absl::StatusOr<Types> RandomTypes(OpKind op, const RandomAttrs& a, const TensorType& like,
                                  const TensorType& step) {
  const bool f64_ok = op == OpKind::kRandomUniform;
  if (a.dtype != DType::kF32 && !(f64_ok && a.dtype == DType::kF64)) {
    return Invalid(absl::StrCat(OpName(op), " does not support dtype ", DTypeName(a.dtype),
                                f64_ok ? " (f32 or f64)" : " (f32 only)"));
  }
  if (step.dtype != DType::kI32 || !step.shape.empty()) {
    return Invalid(absl::StrCat(OpName(op), " step must be an i32 scalar, got ", TypeString(step)));
  }
  return Types{{a.dtype, like.shape}};
}

// dp (issue 37): the collectives keep their input's type, except that AllGather
// stacks the world's values along dim 0.
absl::StatusOr<Types> CollectiveTypes(OpKind op, const CollectiveAttrs& a, const TensorType& x) {
  if (a.world_size < 1 || a.rank < 0 || a.rank >= a.world_size) {
    return Invalid(
        absl::StrCat("rank ", a.rank, " of a world of ", a.world_size, " processes is not a rank"));
  }
  if (op == OpKind::kAllReduce && x.dtype == DType::kBool) {
    return Invalid("AllReduce sums: it does not support dtype bool");
  }
  // MPI has no 16-bit float sum, and a sum rounded to 16 bits at every hop would not be
  // the f32 accumulation docs/MIXED_PRECISION.md promises: reduce in f32 (Cast first).
  if (op == OpKind::kAllReduce && Is16BitFloat(x.dtype)) {
    return Invalid(absl::StrCat("AllReduce of ", DTypeName(x.dtype),
                                " is not supported: Cast to f32 first and reduce in f32"));
  }
  if (op == OpKind::kBroadcast && (a.root < 0 || a.root >= a.world_size)) {
    return Invalid(absl::StrCat("Broadcast root ", a.root, " is not a rank of a world of ",
                                a.world_size, " processes"));
  }
  if (op != OpKind::kAllGather) return Types{x};
  if (x.shape.empty()) return Invalid("AllGather stacks along dim 0: a scalar has none");
  TensorType out = x;
  if (out.shape[0] >= 0) out.shape[0] *= a.world_size;
  return Types{out};
}

absl::StatusOr<std::vector<TensorType>> InferUnchecked(OpKind op, const Attrs& attrs,
                                                       absl::Span<const TensorType> in) {
  const int arity = OpArity(op);
  if (arity >= 0 && static_cast<int>(in.size()) != arity) {
    return Invalid(absl::StrCat(OpName(op), " expects ", arity, " inputs, got ", in.size()));
  }
  auto attr_error = [&]() {
    return absl::InternalError(absl::StrCat(OpName(op), " has attributes of the wrong kind"));
  };
#define BRAZE_ATTRS(T)                 \
  const T* a = std::get_if<T>(&attrs); \
  if (a == nullptr) return attr_error()
  switch (op) {
    case OpKind::kPlaceholder: {
      BRAZE_ATTRS(PlaceholderAttrs);
      return Types{{a->dtype, a->shape}};
    }
    case OpKind::kConst: {
      BRAZE_ATTRS(ConstAttrs);
      if (a->value == nullptr) return Invalid("Const without a value");
      if (a->value->num_elements() < 0) {
        return Invalid("Const value's " + BadValueShape(a->value->shape()));
      }
      return Types{a->value->type()};
    }
    case OpKind::kVariable: {
      BRAZE_ATTRS(VariableAttrs);
      if (!IsFullyDefined(a->shape)) return Invalid("variable shapes must be fully defined");
      if (a->initial_value && a->initial_value->num_elements() < 0) {
        return Invalid("variable initial value's " + BadValueShape(a->initial_value->shape()));
      }
      if (a->initial_value && a->initial_value->type() != TensorType{a->dtype, a->shape}) {
        return Invalid("variable initial value does not match its type");
      }
      return Types{{a->dtype, a->shape}};
    }
    case OpKind::kAssign:
    case OpKind::kAssignAdd:
    case OpKind::kAssignSub: {
      // in[0] is the variable (fully defined); the value may have unknown dims.
      if (in[0].dtype != in[1].dtype || !ShapeMatches(in[1].shape, in[0].shape)) {
        return Invalid(absl::StrCat("cannot assign ", TypeString(in[1]), " to a variable of ",
                                    TypeString(in[0])));
      }
      if (op != OpKind::kAssign) {
        BRAZE_RETURN_IF_ERROR(CheckDType(in[0].dtype, true, false, OpName(op)));
      }
      return Types{in[0]};
    }
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
    case OpKind::kSign:
    case OpKind::kFloor:
    case OpKind::kErf:
    case OpKind::kSin:
    case OpKind::kCos:
      return Unary(op, in[0]);
    case OpKind::kStopGradient:
      return Types{in[0]};
    case OpKind::kCast: {
      BRAZE_ATTRS(CastAttrs);
      return Types{{a->dtype, in[0].shape}};
    }
    case OpKind::kAdd:
    case OpKind::kSub:
    case OpKind::kMul:
    case OpKind::kDiv:
    case OpKind::kMaximum:
    case OpKind::kMinimum:
    case OpKind::kPow:
    case OpKind::kGreater:
    case OpKind::kLess:
    case OpKind::kEqual:
      return Binary(op, in[0], in[1]);
    case OpKind::kSelect: {
      if (in[0].dtype != DType::kBool) {
        return Invalid(absl::StrCat("Select condition must be bool, got ", TypeString(in[0])));
      }
      if (in[1].dtype != in[2].dtype) {
        return Invalid(absl::StrCat("Select branches differ: ", TypeString(in[1]), " and ",
                                    TypeString(in[2])));
      }
      BRAZE_ASSIGN_OR_RETURN(Shape s, BroadcastShapes(in[1].shape, in[2].shape));
      BRAZE_ASSIGN_OR_RETURN(s, BroadcastShapes(in[0].shape, s));
      return Types{{in[1].dtype, s}};
    }
    case OpKind::kSum:
    case OpKind::kMean:
    case OpKind::kMax:
    case OpKind::kMin: {
      BRAZE_ATTRS(ReduceAttrs);
      return Reduce(op, *a, in[0]);
    }
    case OpKind::kSumToShapeOf:
      return SumToShapeOfTypes(in[0], in[1]);
    case OpKind::kArgMax: {
      BRAZE_ATTRS(ArgMaxAttrs);
      BRAZE_RETURN_IF_ERROR(CheckDType(in[0].dtype, true, false, "ArgMax"));
      const int rank = static_cast<int>(in[0].shape.size());
      if (a->axis < 0 || a->axis >= rank) {
        return Invalid(absl::StrCat("reduction axis ", a->axis, " out of range for rank ", rank));
      }
      if (in[0].shape[a->axis] == 0) return Invalid("ArgMax over an empty axis");
      Shape out = in[0].shape;
      out.erase(out.begin() + a->axis);
      return Types{{DType::kI32, out}};
    }
    case OpKind::kMatMul:
    case OpKind::kBatchMatMul: {
      BRAZE_ATTRS(MatMulAttrs);
      return MatMulTypes(op, *a, in[0], in[1]);
    }
    case OpKind::kReshape: {
      BRAZE_ATTRS(ReshapeAttrs);
      return ReshapeTypes(*a, in[0]);
    }
    case OpKind::kTranspose: {
      BRAZE_ATTRS(TransposeAttrs);
      return TransposeTypes(*a, in[0]);
    }
    case OpKind::kBroadcastTo: {
      BRAZE_ATTRS(BroadcastToAttrs);
      // A -1 in the target keeps the input's dim aligned with it (from the right), so a
      // dynamic batch can be broadcast along the others: [-1, 1] to [-1, 5] is [n, 5].
      // It was accepted and then never ran ("f32[?,5] is not fully defined").
      Shape target = a->shape;
      const int64_t lead =
          static_cast<int64_t>(target.size()) - static_cast<int64_t>(in[0].shape.size());
      for (int64_t i = 0; i < static_cast<int64_t>(target.size()); ++i) {
        if (target[i] != -1) continue;
        if (i < lead) {
          return Invalid(absl::StrCat("BroadcastTo's shape ", ShapeString(a->shape), " has -1 at ",
                                      i, ", where ", ShapeString(in[0].shape),
                                      " has no dim to keep"));
        }
        target[i] = in[0].shape[i - lead];
      }
      auto s = BroadcastShapes(in[0].shape, target);
      if (!s.ok() || s->size() != target.size() || !ShapeMatches(target, *s)) {
        return Invalid(absl::StrCat("cannot broadcast ", ShapeString(in[0].shape), " to ",
                                    ShapeString(a->shape)));
      }
      return Types{{in[0].dtype, target}};
    }
    case OpKind::kConcat: {
      BRAZE_ATTRS(ConcatAttrs);
      return ConcatTypes(*a, in);
    }
    case OpKind::kSlice: {
      BRAZE_ATTRS(SliceAttrs);
      return SliceTypes(*a, in[0]);
    }
    case OpKind::kPad: {
      BRAZE_ATTRS(PadAttrs);
      return PadTypes(*a, in[0]);
    }
    case OpKind::kOneHot: {
      BRAZE_ATTRS(OneHotAttrs);
      if (in[0].dtype != DType::kI32) {
        return Invalid(absl::StrCat("OneHot indices must be i32, got ", TypeString(in[0])));
      }
      if (a->depth < 0) return Invalid("OneHot depth must be >= 0");
      BRAZE_RETURN_IF_ERROR(CheckValueOfDType(a->on_value, a->dtype, "OneHot on_value"));
      BRAZE_RETURN_IF_ERROR(CheckValueOfDType(a->off_value, a->dtype, "OneHot off_value"));
      Shape out = in[0].shape;
      out.push_back(a->depth);
      return Types{{a->dtype, out}};
    }
    case OpKind::kGather: {
      BRAZE_ATTRS(GatherAttrs);
      return GatherTypes(*a, in[0], in[1]);
    }
    case OpKind::kUnsortedSegmentSum: {
      BRAZE_ATTRS(SegmentSumAttrs);
      return SegmentSumTypes(*a, in[0], in[1]);
    }
    case OpKind::kIota: {
      BRAZE_ATTRS(IotaAttrs);
      return IotaTypes(*a, in[0]);
    }
    case OpKind::kRandomUniform:
    case OpKind::kRandomNormal: {
      BRAZE_ATTRS(RandomAttrs);
      return RandomTypes(op, *a, in[0], in[1]);
    }
    case OpKind::kConv2D:
    case OpKind::kConv2DBackpropInput:
    case OpKind::kConv2DBackpropFilter: {
      BRAZE_ATTRS(Conv2DAttrs);
      return ConvTypes(op, *a, in);
    }
    case OpKind::kMaxPool:
    case OpKind::kMaxPoolGrad:
    case OpKind::kMaxPoolGradGrad:
    case OpKind::kAvgPool:
    case OpKind::kAvgPoolGrad: {
      BRAZE_ATTRS(Pool2DAttrs);
      return PoolTypes(op, *a, in);
    }
    case OpKind::kAttention:
    case OpKind::kAttentionLogSumExp:
    case OpKind::kAttentionGradQ:
    case OpKind::kAttentionGradK:
    case OpKind::kAttentionGradV: {
      BRAZE_ATTRS(AttentionAttrs);
      return AttentionTypes(op, *a, in);
    }
    case OpKind::kAllReduce:
    case OpKind::kBroadcast:
    case OpKind::kAllGather: {
      BRAZE_ATTRS(CollectiveAttrs);
      return CollectiveTypes(op, *a, in[0]);
    }
    case OpKind::kCond:  // cf (issue 40): through the bodies (ir/control_flow.h)
    case OpKind::kWhile:
    case OpKind::kScan: {
      BRAZE_ATTRS(ControlFlowAttrs);
      return ir::ControlFlowTypes(op, *a, in);
    }
    case OpKind::kHostCall: {
      BRAZE_ATTRS(HostCallAttrs);
      if (!a->fn) return Invalid("HostCall without a function");
      Types out;
      for (const TensorSpec& s : a->outputs) out.push_back({s.dtype, s.shape});
      return out;
    }
  }
#undef BRAZE_ATTRS
  return absl::InternalError("unknown op");
}

}  // namespace

// Every output, at build time and at run time: a shape inferred from fed shapes (a Sum
// of a {0, 2^32, 2^32} feed is {2^32, 2^32}) was allocated with a wrapped count.
absl::StatusOr<std::vector<TensorType>> InferOutputTypes(OpKind op, const Attrs& attrs,
                                                         absl::Span<const TensorType> in) {
  absl::StatusOr<std::vector<TensorType>> types = InferUnchecked(op, attrs, in);
  if (!types.ok()) return types;
  for (const TensorType& t : *types) BRAZE_RETURN_IF_ERROR(CheckTensorSize(t));
  return types;
}

}  // namespace braze
