// Reference kernels of the sequence ops: Gather, UnsortedSegmentSum and Iota.
//
// Both index ops view their tensors as [outer, n, inner] around the indexed axis (the
// ids' dims flattened into one), so one loop nest covers every axis. An out-of-range
// index reads zeros (Gather) or is dropped (UnsortedSegmentSum), exactly as the
// compiled kernels do (docs/BAD_INPUT.md: a data-dependent index has no Status in a
// compiled kernel, and the two ops stay each other's adjoint).
#include <cstdint>

#include "absl/strings/str_cat.h"
#include "braze/status.h"
#include "reference/kernel_util.h"

namespace braze {
namespace reference_internal {
namespace {

int64_t Product(const Shape& shape, size_t begin, size_t end) {
  int64_t n = 1;
  for (size_t d = begin; d < end; ++d) n *= shape[d];
  return n;
}

absl::Status CheckType(const char* what, const TensorType& expected, const TensorType& out) {
  if (expected == out) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat(what, " gives ", TypeString(expected), ", not ", TypeString(out)));
}

}  // namespace

Kernel RunGather(const GatherAttrs& attrs, const HostTensor& params, const HostTensor& indices,
                 const TensorType& out_type) {
  const Shape& ps = params.shape();
  const int rank = static_cast<int>(ps.size());
  if (attrs.axis < 0 || attrs.axis >= rank || indices.dtype() != DType::kI32) {
    return absl::InvalidArgumentError(absl::StrCat("Gather of ", TypeString(params.type()),
                                                   " along axis ", attrs.axis, " by ",
                                                   TypeString(indices.type())));
  }
  Shape expected(ps.begin(), ps.begin() + attrs.axis);
  expected.insert(expected.end(), indices.shape().begin(), indices.shape().end());
  expected.insert(expected.end(), ps.begin() + attrs.axis + 1, ps.end());
  BRAZE_RETURN_IF_ERROR(CheckType("Gather", TensorType{params.dtype(), expected}, out_type));
  const int64_t outer = Product(ps, 0, attrs.axis);
  const int64_t n = ps[attrs.axis];
  const int64_t inner = Product(ps, attrs.axis + 1, ps.size());
  const int64_t k = indices.num_elements();
  const int32_t* idx = indices.data<int32_t>();
  HostTensor out(out_type.dtype, out_type.shape);
  BRAZE_RETURN_IF_ERROR(VisitDType(params.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T* p = params.data<T>();
    T* o = out.data<T>();
    for (int64_t a = 0; a < outer; ++a) {
      for (int64_t j = 0; j < k; ++j) {
        T* row = o + (a * k + j) * inner;
        const int64_t i = idx[j];
        const bool in_range = i >= 0 && i < n;
        for (int64_t c = 0; c < inner; ++c) row[c] = in_range ? p[(a * n + i) * inner + c] : T(0);
      }
    }
    return absl::OkStatus();
  }));
  return std::vector<HostTensor>{std::move(out)};
}

Kernel RunSegmentSum(const SegmentSumAttrs& attrs, const HostTensor& data, const HostTensor& ids,
                     const TensorType& out_type) {
  const Shape& ds = data.shape();
  const int rank = static_cast<int>(ds.size());
  const int ids_rank = static_cast<int>(ids.shape().size());
  bool ok = attrs.axis >= 0 && attrs.axis + ids_rank <= rank && ids.dtype() == DType::kI32 &&
            attrs.num_segments >= 0;
  for (int d = 0; ok && d < ids_rank; ++d) ok = ids.shape()[d] == ds[attrs.axis + d];
  if (!ok) {
    return absl::InvalidArgumentError(
        absl::StrCat("UnsortedSegmentSum of ", TypeString(data.type()), " along axis ", attrs.axis,
                     " by ", TypeString(ids.type()), " into ", attrs.num_segments, " segments"));
  }
  Shape expected(ds.begin(), ds.begin() + attrs.axis);
  expected.push_back(attrs.num_segments);
  expected.insert(expected.end(), ds.begin() + attrs.axis + ids_rank, ds.end());
  BRAZE_RETURN_IF_ERROR(
      CheckType("UnsortedSegmentSum", TensorType{data.dtype(), expected}, out_type));
  const int64_t outer = Product(ds, 0, attrs.axis);
  const int64_t k = ids.num_elements();
  const int64_t inner = Product(ds, attrs.axis + ids_rank, ds.size());
  const int64_t segments = attrs.num_segments;
  const int32_t* id = ids.data<int32_t>();
  HostTensor out(out_type.dtype, out_type.shape);
  BRAZE_RETURN_IF_ERROR(VisitNumeric(data.dtype(), "UnsortedSegmentSum", [&](auto tag) {
    using T = decltype(tag);
    const T* x = data.data<T>();
    T* o = out.data<T>();
    for (int64_t e = 0; e < out.num_elements(); ++e) o[e] = T(0);
    // Each output element adds its slices in increasing j, the order the compiled
    // kernel's reduction walks the ids in: the same sums on every run.
    for (int64_t a = 0; a < outer; ++a) {
      for (int64_t j = 0; j < k; ++j) {
        const int64_t s = id[j];
        if (s < 0 || s >= segments) continue;  // dropped
        T* row = o + (a * segments + s) * inner;
        const T* src = x + (a * k + j) * inner;
        for (int64_t c = 0; c < inner; ++c) {
          if constexpr (kIsFloat<T>) {
            row[c] += src[c];
          } else {
            row[c] = WrapToI32(static_cast<int64_t>(row[c]) + src[c]);
          }
        }
      }
    }
    return absl::OkStatus();
  }));
  return std::vector<HostTensor>{std::move(out)};
}

Kernel RunIota(const IotaAttrs& attrs, const HostTensor& like, const TensorType& out_type) {
  const int rank = static_cast<int>(like.shape().size());
  if (attrs.axis < 0 || attrs.axis >= rank) {
    return absl::InvalidArgumentError(
        absl::StrCat("Iota axis ", attrs.axis, " out of range for ", TypeString(like.type())));
  }
  // A 16-bit Iota computes in f32 (RunReferenceKernel rounds the result).
  BRAZE_RETURN_IF_ERROR(CheckType(
      "Iota", TensorType{ComputeDType(attrs.dtype), Shape{like.shape()[attrs.axis]}}, out_type));
  HostTensor out(out_type.dtype, out_type.shape);
  BRAZE_RETURN_IF_ERROR(VisitNumeric(out_type.dtype, "Iota", [&](auto tag) {
    using T = decltype(tag);
    T* o = out.data<T>();
    for (int64_t i = 0; i < out.num_elements(); ++i) o[i] = static_cast<T>(i);
    return absl::OkStatus();
  }));
  return std::vector<HostTensor>{std::move(out)};
}

}  // namespace reference_internal
}  // namespace braze
