// Reduction reference kernels: Sum, Mean, Max, Min over axes, and ArgMax.
//
// Floating reductions accumulate in double, i32 ones in int64 (exact; the final Sum
// wraps to i32 like compiled code). Max and Min propagate NaN (numpy) and order -0 < +0;
// ArgMax returns the first maximum, or the first NaN when there is one.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <utility>

#include "absl/strings/str_cat.h"
#include "braze/status.h"
#include "reference/kernel_util.h"

namespace braze {
namespace reference_internal {
namespace {

template <typename T>
using Acc = std::conditional_t<kIsFloat<T>, double, int64_t>;

template <typename T>
Acc<T> Identity(OpKind op) {
  if (op != OpKind::kMax && op != OpKind::kMin) return 0;  // Sum, Mean
  const bool is_max = op == OpKind::kMax;
  if constexpr (kIsFloat<T>) {
    const double inf = std::numeric_limits<double>::infinity();
    return is_max ? -inf : inf;
  } else {
    return is_max ? std::numeric_limits<T>::min() : std::numeric_limits<T>::max();
  }
}

template <typename A>
bool IsNan(A v) {
  if constexpr (std::is_floating_point_v<A>) return std::isnan(v);
  return false;
}

// x is -0 and y is +0.
template <typename A>
bool NegZeroThenPos(A x, A y) {
  if constexpr (std::is_floating_point_v<A>) {
    return x == 0 && y == 0 && std::signbit(x) && !std::signbit(y);
  }
  return false;
}

// Reduces x into out. `out_strides` maps each input dim to its output stride (0 for
// reduced dims); `count` is the number of input elements per output element.
template <typename T>
void Reduce(OpKind op, const HostTensor& x, const std::vector<int64_t>& out_strides, int64_t count,
            HostTensor& out) {
  using A = Acc<T>;
  std::vector<A> acc(out.num_elements(), Identity<T>(op));
  const T* px = x.data<T>();
  auto fold = [&](auto combine) {
    ForEachIndex<1>(x.shape(), {&out_strides}, [&](int64_t i, const std::array<int64_t, 1>& off) {
      A& a = acc[off[0]];
      a = combine(a, static_cast<A>(px[i]));
    });
  };
  switch (op) {
    // Keeps a NaN accumulator; takes v when it is larger (smaller) or NaN. Of the zeros,
    // -0 < +0 (IEEE 754-2019's maximum and minimum): the result does not depend on the
    // order compiled code combines lanes and threads in.
    case OpKind::kMax:
      fold([](A a, A v) { return IsNan(a) || a > v || (a == v && !NegZeroThenPos(a, v)) ? a : v; });
      break;
    case OpKind::kMin:
      fold([](A a, A v) { return IsNan(a) || a < v || (a == v && !NegZeroThenPos(v, a)) ? a : v; });
      break;
    default:  // Sum, Mean
      fold([](A a, A v) { return a + v; });
      break;
  }
  T* o = out.data<T>();
  for (size_t j = 0; j < acc.size(); ++j) {
    A v = acc[j];
    if (op == OpKind::kMean) {
      if constexpr (kIsFloat<T>) v /= static_cast<double>(count);  // 0 / 0: NaN
    }
    if constexpr (kIsFloat<T>) {
      o[j] = static_cast<T>(v);
    } else {
      o[j] = WrapToI32(v);
    }
  }
}

}  // namespace

Kernel RunReduce(OpKind op, const ReduceAttrs& attrs, const HostTensor& x,
                 const TensorType& out_type) {
  const int rank = x.rank();
  std::vector<bool> reduced(rank, false);
  for (size_t i = 0; i < attrs.axes.size(); ++i) {
    const int axis = attrs.axes[i];
    if (axis < 0 || axis >= rank || (i > 0 && axis <= attrs.axes[i - 1])) {
      return absl::InvalidArgumentError(absl::StrCat(OpName(op),
                                                     " axes must be sorted, unique and in [0, ",
                                                     rank, "); got ", axis, " at position ", i));
    }
    reduced[axis] = true;
  }
  // The output in keep_dims form (reduced dims as 1) shares the row-major layout of the
  // output either way, so its strides address the output buffer.
  Shape kept_shape;
  Shape expected_shape;
  int64_t count = 1;
  for (int d = 0; d < rank; ++d) {
    if (reduced[d]) {
      count *= x.dim(d);
      kept_shape.push_back(1);
      if (attrs.keep_dims) expected_shape.push_back(1);
    } else {
      kept_shape.push_back(x.dim(d));
      expected_shape.push_back(x.dim(d));
    }
  }
  const TensorType expected{x.dtype(), expected_shape};
  if (out_type != expected) {
    return absl::InvalidArgumentError(absl::StrCat(OpName(op), " of ", TypeString(x.type()),
                                                   " gives ", TypeString(expected), ", not ",
                                                   TypeString(out_type)));
  }
  std::vector<int64_t> out_strides = RowMajorStrides(kept_shape);
  for (int d = 0; d < rank; ++d) {
    if (reduced[d]) out_strides[d] = 0;
  }
  HostTensor out(out_type.dtype, out_type.shape);
  auto run = [&](auto tag) -> absl::Status {
    using T = decltype(tag);
    if constexpr (std::is_same_v<T, uint8_t>) {
      return absl::InternalError("unreachable: bool reduction");
    } else if (attrs.axes.empty()) {
      // Each element is its own sum, mean, max or min, -0 kept (0 + -0 would be +0): as
      // the lowering reads it, and as TF's reduction over no axes is the identity.
      std::copy(x.data<T>(), x.data<T>() + x.num_elements(), out.data<T>());
      return absl::OkStatus();
    } else {
      Reduce<T>(op, x, out_strides, count, out);
      return absl::OkStatus();
    }
  };
  BRAZE_RETURN_IF_ERROR(op == OpKind::kMean ? VisitFloating(x.dtype(), OpName(op), run)
                                            : VisitNumeric(x.dtype(), OpName(op), run));
  return std::vector<HostTensor>{std::move(out)};
}

Kernel RunSumToShapeOf(const HostTensor& x, const HostTensor& like, const TensorType& out_type) {
  const int rank = x.rank();
  const int lead = rank - like.rank();
  if (lead < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "SumToShapeOf: cannot sum ", TypeString(x.type()), " to ", ShapeString(like.shape())));
  }
  // A Sum keeping its dims over the leading dims and like's 1s has out's elements in
  // out's order, behind `lead` ones.
  ReduceAttrs attrs{{}, /*keep_dims=*/true};
  for (int d = 0; d < rank; ++d) {
    if (d < lead || (like.dim(d - lead) == 1 && x.dim(d) != 1)) attrs.axes.push_back(d);
  }
  Shape kept = x.shape();
  for (int axis : attrs.axes) kept[axis] = 1;
  BRAZE_ASSIGN_OR_RETURN(std::vector<HostTensor> sum,
                         RunReduce(OpKind::kSum, attrs, x, TensorType{x.dtype(), kept}));
  return RunReshape(sum[0], out_type);
}

Kernel RunArgMax(const ArgMaxAttrs& attrs, const HostTensor& x, const TensorType& out_type) {
  const int rank = x.rank();
  const int axis = attrs.axis < 0 ? attrs.axis + rank : attrs.axis;
  if (axis < 0 || axis >= rank) {
    return absl::InvalidArgumentError(
        absl::StrCat("ArgMax axis ", attrs.axis, " is out of range for ", TypeString(x.type())));
  }
  if (x.dim(axis) == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("ArgMax over the empty axis ", axis, " of ", TypeString(x.type())));
  }
  Shape expected_shape = x.shape();
  expected_shape.erase(expected_shape.begin() + axis);
  const TensorType expected{DType::kI32, expected_shape};
  if (out_type != expected) {
    return absl::InvalidArgumentError(absl::StrCat("ArgMax of ", TypeString(x.type()), " gives ",
                                                   TypeString(expected), ", not ",
                                                   TypeString(out_type)));
  }
  int64_t outer = 1;
  for (int d = 0; d < axis; ++d) outer *= x.dim(d);
  const int64_t n = x.dim(axis);
  int64_t inner = 1;
  for (int d = axis + 1; d < rank; ++d) inner *= x.dim(d);

  HostTensor out(out_type.dtype, out_type.shape);
  int32_t* o = out.data<int32_t>();
  BRAZE_RETURN_IF_ERROR(VisitDType(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T* px = x.data<T>();
    for (int64_t i = 0; i < outer; ++i) {
      for (int64_t k = 0; k < inner; ++k) {
        const T* row = px + i * n * inner + k;
        int64_t best = 0;
        for (int64_t j = 1; j < n; ++j) {
          const T v = row[j * inner];
          const T b = row[best * inner];
          if (IsNan(b)) break;  // the first NaN wins
          if (v > b || IsNan(v)) best = j;
        }
        o[i * inner + k] = static_cast<int32_t>(best);
      }
    }
    return absl::OkStatus();
  }));
  return std::vector<HostTensor>{std::move(out)};
}

}  // namespace reference_internal
}  // namespace braze
