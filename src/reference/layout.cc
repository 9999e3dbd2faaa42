// Layout reference kernels: Reshape, Transpose, BroadcastTo, Concat, Slice, Pad, OneHot.
// Most are gathers: walk the output in row-major order and read the input through a
// per-output-dim stride list.
#include <cstdint>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "braze/status.h"
#include "reference/kernel_util.h"

namespace braze {
namespace reference_internal {
namespace {

// out[i] = x[base + sum_d index_d * strides[d]] for every output index.
absl::Status Gather(const HostTensor& x, int64_t base, const std::vector<int64_t>& strides,
                    HostTensor& out) {
  return VisitDType(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T* px = x.data<T>() + base;
    T* o = out.data<T>();
    ForEachIndex<1>(out.shape(), {&strides},
                    [&](int64_t i, const std::array<int64_t, 1>& off) { o[i] = px[off[0]]; });
    return absl::OkStatus();
  });
}

absl::Status CheckOutput(const char* what, const HostTensor& x, const TensorType& expected,
                         const TensorType& out_type) {
  if (out_type == expected) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(what, " of ", TypeString(x.type()), " gives ",
                                                 TypeString(expected), ", not ",
                                                 TypeString(out_type)));
}

}  // namespace

Kernel RunReshape(const HostTensor& x, const TensorType& out_type) {
  if (out_type.dtype != x.dtype() || NumElements(out_type.shape) != x.num_elements()) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot reshape ", TypeString(x.type()), " to ", TypeString(out_type)));
  }
  return std::vector<HostTensor>{x.Reshaped(out_type.shape)};
}

Kernel RunTranspose(const TransposeAttrs& attrs, const HostTensor& x, const TensorType& out_type) {
  const int rank = x.rank();
  bool valid = static_cast<int>(attrs.perm.size()) == rank;
  std::vector<bool> seen(rank, false);
  for (size_t i = 0; valid && i < attrs.perm.size(); ++i) {
    const int p = attrs.perm[i];
    valid = p >= 0 && p < rank && !seen[p];
    if (valid) seen[p] = true;
  }
  if (!valid) {
    return absl::InvalidArgumentError(absl::StrCat("Transpose perm [",
                                                   absl::StrJoin(attrs.perm, ","),
                                                   "] is not a permutation of ", rank, " dims"));
  }
  const std::vector<int64_t> in_strides = RowMajorStrides(x.shape());
  Shape expected_shape(rank);
  std::vector<int64_t> strides(rank);
  for (int i = 0; i < rank; ++i) {
    expected_shape[i] = x.dim(attrs.perm[i]);  // output dim i is input dim perm[i]
    strides[i] = in_strides[attrs.perm[i]];
  }
  BRAZE_RETURN_IF_ERROR(
      CheckOutput("Transpose", x, TensorType{x.dtype(), expected_shape}, out_type));
  HostTensor out(out_type.dtype, out_type.shape);
  BRAZE_RETURN_IF_ERROR(Gather(x, 0, strides, out));
  return std::vector<HostTensor>{std::move(out)};
}

Kernel RunBroadcastTo(const HostTensor& x, const TensorType& out_type) {
  if (out_type.dtype != x.dtype()) {
    return absl::InvalidArgumentError(absl::StrCat("BroadcastTo of ", TypeString(x.type()),
                                                   " cannot produce ", TypeString(out_type)));
  }
  BRAZE_ASSIGN_OR_RETURN(std::vector<int64_t> strides, BroadcastStrides(x.shape(), out_type.shape));
  HostTensor out(out_type.dtype, out_type.shape);
  BRAZE_RETURN_IF_ERROR(Gather(x, 0, strides, out));
  return std::vector<HostTensor>{std::move(out)};
}

Kernel RunConcat(const ConcatAttrs& attrs, absl::Span<const HostTensor> xs,
                 const TensorType& out_type) {
  const HostTensor& first = xs[0];
  const int rank = first.rank();
  const int axis = attrs.axis < 0 ? attrs.axis + rank : attrs.axis;
  if (axis < 0 || axis >= rank) {
    return absl::InvalidArgumentError(
        absl::StrCat("Concat axis ", attrs.axis, " is out of range for rank ", rank));
  }
  BRAZE_RETURN_IF_ERROR(CheckSameDType(xs, first.dtype(), "Concat"));
  Shape expected_shape = first.shape();
  expected_shape[axis] = 0;
  for (const HostTensor& x : xs) {
    bool ok = x.rank() == rank;
    for (int d = 0; ok && d < rank; ++d) ok = d == axis || x.dim(d) == first.dim(d);
    if (!ok) {
      return absl::InvalidArgumentError(
          absl::StrCat("Concat along axis ", axis, " of mismatched shapes ",
                       ShapeString(first.shape()), " and ", ShapeString(x.shape())));
    }
    expected_shape[axis] += x.dim(axis);
  }
  BRAZE_RETURN_IF_ERROR(
      CheckOutput("Concat", first, TensorType{first.dtype(), expected_shape}, out_type));

  // Row-major: for each index over the dims before `axis`, every input contributes one
  // contiguous block of dim(axis) * inner elements, in input order.
  int64_t outer = 1;
  for (int d = 0; d < axis; ++d) outer *= first.dim(d);
  int64_t inner = 1;
  for (int d = axis + 1; d < rank; ++d) inner *= first.dim(d);
  const size_t elem = SizeOf(first.dtype());
  HostTensor out(out_type.dtype, out_type.shape);
  auto* dst = static_cast<uint8_t*>(out.raw_data());
  for (int64_t o = 0; o < outer; ++o) {
    for (const HostTensor& x : xs) {
      const size_t block = static_cast<size_t>(x.dim(axis) * inner) * elem;
      if (block == 0) continue;
      std::memcpy(dst, static_cast<const uint8_t*>(x.raw_data()) + o * block, block);
      dst += block;
    }
  }
  return std::vector<HostTensor>{std::move(out)};
}

Kernel RunSlice(const SliceAttrs& attrs, const HostTensor& x, const TensorType& out_type) {
  const int rank = x.rank();
  if (static_cast<int>(attrs.begin.size()) != rank || static_cast<int>(attrs.size.size()) != rank) {
    return absl::InvalidArgumentError(absl::StrCat("Slice of ", TypeString(x.type()), " needs ",
                                                   rank, " begin and size entries, got ",
                                                   attrs.begin.size(), " and ", attrs.size.size()));
  }
  const std::vector<int64_t> in_strides = RowMajorStrides(x.shape());
  Shape expected_shape(rank);
  int64_t base = 0;
  for (int d = 0; d < rank; ++d) {
    const int64_t begin = attrs.begin[d];
    const int64_t size = attrs.size[d] == -1 ? x.dim(d) - begin : attrs.size[d];
    if (begin < 0 || size < 0 || begin + size > x.dim(d)) {
      return absl::InvalidArgumentError(absl::StrCat("Slice begin ", begin, " size ", attrs.size[d],
                                                     " is out of bounds for dim ", d, " of ",
                                                     TypeString(x.type())));
    }
    expected_shape[d] = size;
    base += begin * in_strides[d];
  }
  BRAZE_RETURN_IF_ERROR(CheckOutput("Slice", x, TensorType{x.dtype(), expected_shape}, out_type));
  HostTensor out(out_type.dtype, out_type.shape);
  if (out.num_elements() == 0) return std::vector<HostTensor>{std::move(out)};
  BRAZE_RETURN_IF_ERROR(Gather(x, base, in_strides, out));
  return std::vector<HostTensor>{std::move(out)};
}

Kernel RunPad(const PadAttrs& attrs, const HostTensor& x, const TensorType& out_type) {
  const int rank = x.rank();
  if (static_cast<int>(attrs.paddings.size()) != rank) {
    return absl::InvalidArgumentError(absl::StrCat("Pad of ", TypeString(x.type()), " needs ", rank,
                                                   " paddings, got ", attrs.paddings.size()));
  }
  Shape expected_shape(rank);
  for (int d = 0; d < rank; ++d) {
    const auto [before, after] = attrs.paddings[d];
    if (before < 0 || after < 0) {
      return absl::InvalidArgumentError(absl::StrCat("Pad paddings must be non-negative, got (",
                                                     before, ", ", after, ") for dim ", d));
    }
    expected_shape[d] = before + x.dim(d) + after;
  }
  BRAZE_RETURN_IF_ERROR(CheckOutput("Pad", x, TensorType{x.dtype(), expected_shape}, out_type));
  // Fill with the pad value, then scatter the input into the interior: walking the input
  // in row-major order with the output's strides from the interior's corner.
  const std::vector<int64_t> out_strides = RowMajorStrides(out_type.shape);
  int64_t base = 0;
  for (int d = 0; d < rank; ++d) base += attrs.paddings[d].first * out_strides[d];
  HostTensor out(out_type.dtype, out_type.shape);
  BRAZE_RETURN_IF_ERROR(VisitDType(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    T* o = out.data<T>();
    const T fill = ConvertValue<T>(attrs.value);
    for (int64_t i = 0; i < out.num_elements(); ++i) o[i] = fill;
    const T* px = x.data<T>();
    ForEachIndex<1>(x.shape(), {&out_strides}, [&](int64_t i, const std::array<int64_t, 1>& off) {
      o[base + off[0]] = px[i];
    });
    return absl::OkStatus();
  }));
  return std::vector<HostTensor>{std::move(out)};
}

Kernel RunOneHot(const OneHotAttrs& attrs, const HostTensor& indices, const TensorType& out_type) {
  if (indices.dtype() != DType::kI32) {
    return absl::InvalidArgumentError(
        absl::StrCat("OneHot indices must be i32, got ", DTypeName(indices.dtype())));
  }
  if (attrs.depth < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("OneHot depth must be non-negative, got ", attrs.depth));
  }
  Shape expected_shape = indices.shape();
  expected_shape.push_back(attrs.depth);
  // A 16-bit OneHot is computed in f32 and rounded once (RunReferenceKernel), as Iota.
  BRAZE_RETURN_IF_ERROR(CheckOutput(
      "OneHot", indices, TensorType{ComputeDType(attrs.dtype), expected_shape}, out_type));
  HostTensor out(out_type.dtype, out_type.shape);
  const int32_t* idx = indices.data<int32_t>();
  const int64_t depth = attrs.depth;
  BRAZE_RETURN_IF_ERROR(VisitDType(out_type.dtype, [&](auto tag) {
    using T = decltype(tag);
    const T on = ConvertValue<T>(attrs.on_value);
    const T off = ConvertValue<T>(attrs.off_value);
    T* o = out.data<T>();
    for (int64_t i = 0; i < indices.num_elements(); ++i) {
      T* row = o + i * depth;
      for (int64_t j = 0; j < depth; ++j) row[j] = off;
      if (idx[i] >= 0 && idx[i] < depth) row[idx[i]] = on;  // out of range: all off
    }
    return absl::OkStatus();
  }));
  return std::vector<HostTensor>{std::move(out)};
}

}  // namespace reference_internal
}  // namespace braze
