// Private helpers shared by the reference kernels: dtype dispatch, value conversion,
// row-major index math and numpy broadcasting iteration. Not part of any public API.
#ifndef BRAZE_REFERENCE_KERNEL_UTIL_H_
#define BRAZE_REFERENCE_KERNEL_UTIL_H_

#include <array>
#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/types/span.h"
#include "braze/dtype.h"
#include "braze/graph.h"
#include "braze/host_tensor.h"

namespace braze {
namespace reference_internal {

using Kernel = absl::StatusOr<std::vector<HostTensor>>;

// ---- Dtype dispatch ----

// Calls fn(T{}) with T the C++ element type of `dtype` (bool is uint8_t) and returns its
// Status. Generic lambdas recover the type with `using T = decltype(tag);`.
template <typename Fn>
absl::Status VisitDType(DType dtype, Fn&& fn) {
  switch (dtype) {
    case DType::kF32:
      return fn(float{});
    case DType::kF64:
      return fn(double{});
    case DType::kI32:
      return fn(int32_t{});
    case DType::kBool:
      return fn(uint8_t{});
    case DType::kBF16:
    case DType::kF16:
      // RunReferenceKernel widens 16-bit floats to f32 before any typed kernel runs.
      return absl::InternalError(
          absl::StrCat(DTypeName(dtype), " reached a typed kernel without widening to f32"));
  }
  return absl::InternalError("unknown dtype");
}

// Like VisitDType but only for the arithmetic types f32, f64 and i32.
template <typename Fn>
absl::Status VisitNumeric(DType dtype, const char* what, Fn&& fn) {
  if (dtype == DType::kBool) {
    return absl::InvalidArgumentError(absl::StrCat(what, " does not support bool"));
  }
  return VisitDType(dtype, fn);
}

// Like VisitDType but only for f32 and f64 (bf16 and f16 arrive widened to f32).
template <typename Fn>
absl::Status VisitFloating(DType dtype, const char* what, Fn&& fn) {
  if (!IsFloating(dtype)) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, " needs a floating dtype, got ", DTypeName(dtype)));
  }
  return VisitDType(dtype, fn);
}

// ---- Value conversion (Cast semantics) ----

template <typename T>
constexpr bool kIsFloat = std::is_floating_point_v<T>;

// Converts a value to element type To with Cast's rules: to bool is x != 0, bool is 0/1,
// floating -> i32 truncates toward zero, saturates out of range and maps NaN to 0.
// Spelled out because a plain static_cast of an out-of-range float is undefined.
template <typename To, typename From>
To ConvertValue(From x) {
  if constexpr (std::is_same_v<To, uint8_t>) {
    return x != From(0) ? 1 : 0;
  } else if constexpr (std::is_same_v<From, uint8_t>) {
    return x != 0 ? To(1) : To(0);
  } else if constexpr (std::is_integral_v<To> && kIsFloat<From>) {
    if (std::isnan(x)) return 0;
    const double t = std::trunc(static_cast<double>(x));
    if (t <= static_cast<double>(std::numeric_limits<To>::min())) {
      return std::numeric_limits<To>::min();
    }
    if (t >= static_cast<double>(std::numeric_limits<To>::max())) {
      return std::numeric_limits<To>::max();
    }
    return static_cast<To>(t);
  } else {
    return static_cast<To>(x);
  }
}

// i32 arithmetic wraps (two's complement) like compiled code does instead of being
// undefined on overflow.
inline int32_t WrapToI32(int64_t v) {
  return static_cast<int32_t>(static_cast<uint32_t>(static_cast<uint64_t>(v)));
}

// ---- Index math ----

// Row-major strides (in elements) of `shape`; the last dim has stride 1.
std::vector<int64_t> RowMajorStrides(const Shape& shape);

// Strides for reading an input of shape `in` while walking an output of shape `out`
// under numpy broadcasting: the input is right-aligned against the output, dims it
// lacks or has as 1 (against a larger output dim) get stride 0. The result has
// out.size() entries. Fails when `in` does not broadcast to `out`.
absl::StatusOr<std::vector<int64_t>> BroadcastStrides(const Shape& in, const Shape& out);

// Calls fn(out_index, offsets) for every element of `out` in row-major order, where
// offsets[k] is the flat index into input k whose strides (aligned to out's rank, as
// from BroadcastStrides or any other per-output-dim stride list) are strides[k].
// Walks the last dim in an inner loop so the common cases stay cheap.
template <size_t N, typename Fn>
void ForEachIndex(const Shape& out, const std::array<const std::vector<int64_t>*, N>& strides,
                  Fn&& fn) {
  const int64_t total = NumElements(out);
  if (total <= 0) return;
  const int rank = static_cast<int>(out.size());
  std::array<int64_t, N> offsets{};
  if (rank == 0) {
    fn(int64_t{0}, offsets);
    return;
  }
  const int64_t inner = out[rank - 1];
  std::array<int64_t, N> inner_stride{};
  for (size_t k = 0; k < N; ++k) inner_stride[k] = (*strides[k])[rank - 1];
  // `index` is an odometer over the outer dims (all but the last).
  std::vector<int64_t> index(rank, 0);
  std::array<int64_t, N> base{};
  for (int64_t out_index = 0; out_index < total;) {
    for (int64_t i = 0; i < inner; ++i) {
      for (size_t k = 0; k < N; ++k) offsets[k] = base[k] + i * inner_stride[k];
      fn(out_index++, offsets);
    }
    for (int d = rank - 2; d >= 0; --d) {
      ++index[d];
      for (size_t k = 0; k < N; ++k) base[k] += (*strides[k])[d];
      if (index[d] < out[d]) break;
      for (size_t k = 0; k < N; ++k) base[k] -= index[d] * (*strides[k])[d];
      index[d] = 0;
    }
  }
}

// ---- Argument checks (kernels must not crash on inconsistent calls) ----

// Checks the input count (arity >= 0) and that exactly `num_outputs` output types
// were given.
absl::Status CheckCounts(absl::Span<const HostTensor> inputs,
                         absl::Span<const TensorType> output_types, int arity, int num_outputs);

// Checks that no output type has an unknown (-1) dim.
absl::Status CheckFullyDefined(absl::Span<const TensorType> output_types);

// Checks that every input has `dtype`.
absl::Status CheckSameDType(absl::Span<const HostTensor> inputs, DType dtype, const char* what);

// ---- Kernel families (one source file each) ----

// elementwise.cc
Kernel RunUnary(OpKind op, const HostTensor& x, const TensorType& out);
Kernel RunCast(const HostTensor& x, const TensorType& out);
Kernel RunBinary(OpKind op, const HostTensor& a, const HostTensor& b, const TensorType& out);
Kernel RunSelect(const HostTensor& cond, const HostTensor& a, const HostTensor& b,
                 const TensorType& out);
// reduce.cc
Kernel RunReduce(OpKind op, const ReduceAttrs& attrs, const HostTensor& x, const TensorType& out);
Kernel RunArgMax(const ArgMaxAttrs& attrs, const HostTensor& x, const TensorType& out);
Kernel RunSumToShapeOf(const HostTensor& x, const HostTensor& like, const TensorType& out);
// matmul.cc
Kernel RunMatMul(const MatMulAttrs& attrs, const HostTensor& a, const HostTensor& b,
                 const TensorType& out, bool batched);
// layout.cc
Kernel RunReshape(const HostTensor& x, const TensorType& out);
Kernel RunTranspose(const TransposeAttrs& attrs, const HostTensor& x, const TensorType& out);
Kernel RunBroadcastTo(const HostTensor& x, const TensorType& out);
Kernel RunConcat(const ConcatAttrs& attrs, absl::Span<const HostTensor> xs, const TensorType& out);
Kernel RunSlice(const SliceAttrs& attrs, const HostTensor& x, const TensorType& out);
Kernel RunPad(const PadAttrs& attrs, const HostTensor& x, const TensorType& out);
Kernel RunOneHot(const OneHotAttrs& attrs, const HostTensor& indices, const TensorType& out);

// sequence.cc: Gather, UnsortedSegmentSum (graph.h says what an out-of-range index does)
// and Iota.
Kernel RunGather(const GatherAttrs& attrs, const HostTensor& params, const HostTensor& indices,
                 const TensorType& out);
Kernel RunSegmentSum(const SegmentSumAttrs& attrs, const HostTensor& data, const HostTensor& ids,
                     const TensorType& out);
Kernel RunIota(const IotaAttrs& attrs, const HostTensor& like, const TensorType& out);

// random.cc: RandomUniform and RandomNormal (docs/RANDOM.md), and the transforms from
// one Philox block to a number (exposed for tests).
Kernel RunRandom(const Node& node, const RandomAttrs& attrs, const HostTensor& step,
                 const TensorType& out);
float PhiloxToUniformF32(const std::array<uint32_t, 4>& bits);
double PhiloxToUniformF64(const std::array<uint32_t, 4>& bits);
float PhiloxToNormalF32(const std::array<uint32_t, 4>& bits);

// window.cc: Conv2D, Conv2DBackpropInput, Conv2DBackpropFilter; the pools and their
// gradient ops.
Kernel RunConv(OpKind op, const Conv2DAttrs& attrs, absl::Span<const HostTensor> inputs,
               const TensorType& out);
Kernel RunPool(OpKind op, const Pool2DAttrs& attrs, absl::Span<const HostTensor> inputs,
               const TensorType& out);

// attention.cc: Attention, AttentionLogSumExp and the three gradient ops (`op`).
Kernel RunAttention(OpKind op, const AttentionAttrs& attrs, absl::Span<const HostTensor> inputs,
                    const TensorType& out);

}  // namespace reference_internal
}  // namespace braze

#endif  // BRAZE_REFERENCE_KERNEL_UTIL_H_
