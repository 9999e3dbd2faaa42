// Elementwise reference kernels: unary math, Cast, broadcasting binary ops and Select.
//
// NaN handling follows numpy: Maximum, Minimum, Relu and Sign propagate NaN.
#include <cmath>
#include <cstdint>
#include <utility>

#include "absl/strings/str_cat.h"
#include "braze/status.h"
#include "reference/kernel_util.h"

namespace braze {
namespace reference_internal {
namespace {

// out[i] = f(x[i]) with In/Out the element types.
template <typename In, typename Out, typename F>
void MapUnary(const HostTensor& x, HostTensor& out, F f) {
  const In* in = x.data<In>();
  Out* o = out.data<Out>();
  const int64_t n = x.num_elements();
  for (int64_t i = 0; i < n; ++i) o[i] = f(in[i]);
}

// out[i] = f(a[.], b[.]) under numpy broadcasting.
template <typename In, typename Out, typename F>
absl::Status MapBinary(const HostTensor& a, const HostTensor& b, HostTensor& out, F f) {
  BRAZE_ASSIGN_OR_RETURN(std::vector<int64_t> sa, BroadcastStrides(a.shape(), out.shape()));
  BRAZE_ASSIGN_OR_RETURN(std::vector<int64_t> sb, BroadcastStrides(b.shape(), out.shape()));
  const In* pa = a.data<In>();
  const In* pb = b.data<In>();
  Out* o = out.data<Out>();
  if (a.shape() == out.shape() && b.shape() == out.shape()) {
    const int64_t n = out.num_elements();
    for (int64_t i = 0; i < n; ++i) o[i] = f(pa[i], pb[i]);
    return absl::OkStatus();
  }
  ForEachIndex<2>(out.shape(), {&sa, &sb}, [&](int64_t i, const std::array<int64_t, 2>& off) {
    o[i] = f(pa[off[0]], pb[off[1]]);
  });
  return absl::OkStatus();
}

// i32 floor division with x / 0 = 0. Computed in 64 bits so INT32_MIN / -1 wraps
// instead of trapping.
int32_t FloorDivI32(int32_t a, int32_t b) {
  if (b == 0) return 0;
  const int64_t a64 = a;
  const int64_t b64 = b;
  int64_t q = a64 / b64;
  if (a64 % b64 != 0 && ((a64 < 0) != (b64 < 0))) --q;
  return WrapToI32(q);
}

template <typename T>
T Max2(T a, T b) {
  if constexpr (kIsFloat<T>) {
    if (std::isnan(a)) return a;
  }
  return a >= b ? a : b;  // false when b is NaN: returns b
}

template <typename T>
T Min2(T a, T b) {
  if constexpr (kIsFloat<T>) {
    if (std::isnan(a)) return a;
  }
  return a <= b ? a : b;
}

template <typename T>
absl::Status UnaryAnyNumeric(OpKind op, const HostTensor& x, HostTensor& out) {
  switch (op) {
    case OpKind::kNeg:
      if constexpr (std::is_integral_v<T>) {
        MapUnary<T, T>(x, out, [](T v) { return WrapToI32(-int64_t{v}); });
      } else {
        MapUnary<T, T>(x, out, [](T v) { return -v; });
      }
      return absl::OkStatus();
    case OpKind::kAbs:
      if constexpr (std::is_integral_v<T>) {
        MapUnary<T, T>(x, out, [](T v) { return WrapToI32(v < 0 ? -int64_t{v} : v); });
      } else {
        MapUnary<T, T>(x, out, [](T v) { return std::abs(v); });
      }
      return absl::OkStatus();
    case OpKind::kRelu:
      // `v < 0 ? 0 : v` keeps NaN.
      MapUnary<T, T>(x, out, [](T v) { return v < T(0) ? T(0) : v; });
      return absl::OkStatus();
    case OpKind::kSquare:
      if constexpr (std::is_integral_v<T>) {
        MapUnary<T, T>(x, out, [](T v) { return WrapToI32(int64_t{v} * int64_t{v}); });
      } else {
        MapUnary<T, T>(x, out, [](T v) { return v * v; });
      }
      return absl::OkStatus();
    case OpKind::kSign:
      // Zero (and NaN) map to themselves.
      MapUnary<T, T>(x, out, [](T v) { return v > T(0) ? T(1) : (v < T(0) ? T(-1) : v); });
      return absl::OkStatus();
    default:
      return absl::InternalError(absl::StrCat(OpName(op), " is not a numeric unary op"));
  }
}

template <typename T>
absl::Status UnaryFloating(OpKind op, const HostTensor& x, HostTensor& out) {
  switch (op) {
    case OpKind::kExp:
      MapUnary<T, T>(x, out, [](T v) { return std::exp(v); });
      return absl::OkStatus();
    case OpKind::kLog:
      MapUnary<T, T>(x, out, [](T v) { return std::log(v); });
      return absl::OkStatus();
    case OpKind::kSqrt:
      MapUnary<T, T>(x, out, [](T v) { return std::sqrt(v); });
      return absl::OkStatus();
    case OpKind::kRsqrt:
      MapUnary<T, T>(x, out, [](T v) { return T(1) / std::sqrt(v); });
      return absl::OkStatus();
    case OpKind::kTanh:
      MapUnary<T, T>(x, out, [](T v) { return std::tanh(v); });
      return absl::OkStatus();
    case OpKind::kSigmoid:
      // e = exp(-|v|) never overflows, and e / (1 + e) for v < 0 keeps the small results
      // that 1 / (1 + exp(-v)) loses to exp's overflow (sigmoid(-90) = 8e-40, not 0).
      MapUnary<T, T>(x, out, [](T v) {
        const T e = std::exp(-std::abs(v));
        return (v < 0 ? e : T(1)) / (T(1) + e);
      });
      return absl::OkStatus();
    case OpKind::kReciprocal:
      MapUnary<T, T>(x, out, [](T v) { return T(1) / v; });
      return absl::OkStatus();
    case OpKind::kFloor:
      MapUnary<T, T>(x, out, [](T v) { return std::floor(v); });
      return absl::OkStatus();
    case OpKind::kErf:
      MapUnary<T, T>(x, out, [](T v) { return std::erf(v); });
      return absl::OkStatus();
    case OpKind::kSin:
      MapUnary<T, T>(x, out, [](T v) { return std::sin(v); });
      return absl::OkStatus();
    case OpKind::kCos:
      MapUnary<T, T>(x, out, [](T v) { return std::cos(v); });
      return absl::OkStatus();
    default:
      return UnaryAnyNumeric<T>(op, x, out);
  }
}

bool IsNumericUnary(OpKind op) {
  return op == OpKind::kNeg || op == OpKind::kAbs || op == OpKind::kRelu || op == OpKind::kSquare ||
         op == OpKind::kSign;
}

bool IsComparison(OpKind op) {
  return op == OpKind::kGreater || op == OpKind::kLess || op == OpKind::kEqual;
}

template <typename T>
absl::Status BinaryArithmetic(OpKind op, const HostTensor& a, const HostTensor& b,
                              HostTensor& out) {
  constexpr bool kInt = std::is_integral_v<T>;
  switch (op) {
    case OpKind::kAdd:
      if constexpr (kInt) {
        return MapBinary<T, T>(a, b, out,
                               [](T x, T y) { return WrapToI32(int64_t{x} + int64_t{y}); });
      } else {
        return MapBinary<T, T>(a, b, out, [](T x, T y) { return x + y; });
      }
    case OpKind::kSub:
      if constexpr (kInt) {
        return MapBinary<T, T>(a, b, out,
                               [](T x, T y) { return WrapToI32(int64_t{x} - int64_t{y}); });
      } else {
        return MapBinary<T, T>(a, b, out, [](T x, T y) { return x - y; });
      }
    case OpKind::kMul:
      if constexpr (kInt) {
        return MapBinary<T, T>(a, b, out,
                               [](T x, T y) { return WrapToI32(int64_t{x} * int64_t{y}); });
      } else {
        return MapBinary<T, T>(a, b, out, [](T x, T y) { return x * y; });
      }
    case OpKind::kDiv:
      if constexpr (kInt) {
        return MapBinary<T, T>(a, b, out, FloorDivI32);
      } else {
        return MapBinary<T, T>(a, b, out, [](T x, T y) { return x / y; });
      }
    case OpKind::kPow:
      if constexpr (kInt) {
        return absl::InvalidArgumentError("Pow needs a floating dtype, got i32");
      } else {
        return MapBinary<T, T>(a, b, out, [](T x, T y) { return std::pow(x, y); });
      }
    default:
      return absl::InternalError(absl::StrCat(OpName(op), " is not an arithmetic op"));
  }
}

template <typename T>
absl::Status BinaryAnyType(OpKind op, const HostTensor& a, const HostTensor& b, HostTensor& out) {
  using B = uint8_t;
  switch (op) {
    case OpKind::kMaximum:
      return MapBinary<T, T>(a, b, out, Max2<T>);
    case OpKind::kMinimum:
      return MapBinary<T, T>(a, b, out, Min2<T>);
    case OpKind::kGreater:
      return MapBinary<T, B>(a, b, out, [](T x, T y) { return B(x > y); });
    case OpKind::kLess:
      return MapBinary<T, B>(a, b, out, [](T x, T y) { return B(x < y); });
    case OpKind::kEqual:
      return MapBinary<T, B>(a, b, out, [](T x, T y) { return B(x == y); });
    default:
      if constexpr (std::is_same_v<T, B>) {
        return absl::InvalidArgumentError(absl::StrCat(OpName(op), " does not support bool"));
      } else {
        return BinaryArithmetic<T>(op, a, b, out);
      }
  }
}

}  // namespace

Kernel RunUnary(OpKind op, const HostTensor& x, const TensorType& out_type) {
  if (out_type != x.type()) {
    return absl::InvalidArgumentError(absl::StrCat(OpName(op), " of ", TypeString(x.type()),
                                                   " cannot produce ", TypeString(out_type)));
  }
  HostTensor out(out_type.dtype, out_type.shape);
  if (IsNumericUnary(op)) {
    BRAZE_RETURN_IF_ERROR(VisitNumeric(x.dtype(), OpName(op), [&](auto tag) {
      return UnaryAnyNumeric<decltype(tag)>(op, x, out);
    }));
  } else {
    BRAZE_RETURN_IF_ERROR(VisitFloating(x.dtype(), OpName(op), [&](auto tag) {
      if constexpr (kIsFloat<decltype(tag)>) {
        return UnaryFloating<decltype(tag)>(op, x, out);
      } else {
        return absl::InternalError("unreachable: not a floating dtype");
      }
    }));
  }
  return std::vector<HostTensor>{std::move(out)};
}

Kernel RunCast(const HostTensor& x, const TensorType& out_type) {
  if (out_type.shape != x.shape()) {
    return absl::InvalidArgumentError(
        absl::StrCat("Cast of ", TypeString(x.type()), " cannot produce ", TypeString(out_type)));
  }
  HostTensor out(out_type.dtype, out_type.shape);
  BRAZE_RETURN_IF_ERROR(VisitDType(x.dtype(), [&](auto from_tag) {
    using From = decltype(from_tag);
    return VisitDType(out_type.dtype, [&](auto to_tag) {
      using To = decltype(to_tag);
      MapUnary<From, To>(x, out, [](From v) { return ConvertValue<To>(v); });
      return absl::OkStatus();
    });
  }));
  return std::vector<HostTensor>{std::move(out)};
}

Kernel RunBinary(OpKind op, const HostTensor& a, const HostTensor& b, const TensorType& out_type) {
  if (a.dtype() != b.dtype()) {
    return absl::InvalidArgumentError(
        absl::StrCat(OpName(op), " operands differ in dtype: ", DTypeName(a.dtype()), " vs ",
                     DTypeName(b.dtype())));
  }
  const DType expected = IsComparison(op) ? DType::kBool : a.dtype();
  if (out_type.dtype != expected) {
    return absl::InvalidArgumentError(absl::StrCat(OpName(op), " of ", DTypeName(a.dtype()),
                                                   " cannot produce ", DTypeName(out_type.dtype)));
  }
  HostTensor out(out_type.dtype, out_type.shape);
  BRAZE_RETURN_IF_ERROR(
      VisitDType(a.dtype(), [&](auto tag) { return BinaryAnyType<decltype(tag)>(op, a, b, out); }));
  return std::vector<HostTensor>{std::move(out)};
}

Kernel RunSelect(const HostTensor& cond, const HostTensor& a, const HostTensor& b,
                 const TensorType& out_type) {
  if (cond.dtype() != DType::kBool) {
    return absl::InvalidArgumentError(
        absl::StrCat("Select condition must be bool, got ", DTypeName(cond.dtype())));
  }
  if (a.dtype() != b.dtype() || a.dtype() != out_type.dtype) {
    return absl::InvalidArgumentError(
        absl::StrCat("Select branches differ in dtype: ", DTypeName(a.dtype()), ", ",
                     DTypeName(b.dtype()), ", output ", DTypeName(out_type.dtype)));
  }
  HostTensor out(out_type.dtype, out_type.shape);
  BRAZE_ASSIGN_OR_RETURN(std::vector<int64_t> sc, BroadcastStrides(cond.shape(), out.shape()));
  BRAZE_ASSIGN_OR_RETURN(std::vector<int64_t> sa, BroadcastStrides(a.shape(), out.shape()));
  BRAZE_ASSIGN_OR_RETURN(std::vector<int64_t> sb, BroadcastStrides(b.shape(), out.shape()));
  BRAZE_RETURN_IF_ERROR(VisitDType(a.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const uint8_t* pc = cond.data<uint8_t>();
    const T* pa = a.data<T>();
    const T* pb = b.data<T>();
    T* o = out.data<T>();
    ForEachIndex<3>(out.shape(), {&sc, &sa, &sb},
                    [&](int64_t i, const std::array<int64_t, 3>& off) {
                      o[i] = pc[off[0]] ? pa[off[1]] : pb[off[2]];
                    });
    return absl::OkStatus();
  }));
  return std::vector<HostTensor>{std::move(out)};
}

}  // namespace reference_internal
}  // namespace braze
