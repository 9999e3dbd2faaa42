#include "reference/kernel_util.h"

#include <string>

namespace braze {
namespace reference_internal {

std::vector<int64_t> RowMajorStrides(const Shape& shape) {
  std::vector<int64_t> strides(shape.size(), 1);
  for (int d = static_cast<int>(shape.size()) - 2; d >= 0; --d) {
    strides[d] = strides[d + 1] * shape[d + 1];
  }
  return strides;
}

absl::StatusOr<std::vector<int64_t>> BroadcastStrides(const Shape& in, const Shape& out) {
  if (in.size() > out.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot broadcast ", ShapeString(in), " to ", ShapeString(out)));
  }
  const std::vector<int64_t> in_strides = RowMajorStrides(in);
  const size_t lead = out.size() - in.size();
  std::vector<int64_t> strides(out.size(), 0);
  for (size_t i = 0; i < in.size(); ++i) {
    const int64_t in_dim = in[i];
    const int64_t out_dim = out[lead + i];
    if (in_dim == out_dim) {
      strides[lead + i] = in_strides[i];
    } else if (in_dim == 1) {
      strides[lead + i] = 0;
    } else {
      return absl::InvalidArgumentError(
          absl::StrCat("cannot broadcast ", ShapeString(in), " to ", ShapeString(out)));
    }
  }
  return strides;
}

absl::Status CheckCounts(absl::Span<const HostTensor> inputs,
                         absl::Span<const TensorType> output_types, int arity, int num_outputs) {
  if (arity >= 0 && static_cast<int>(inputs.size()) != arity) {
    return absl::InvalidArgumentError(
        absl::StrCat("expected ", arity, " inputs, got ", inputs.size()));
  }
  if (static_cast<int>(output_types.size()) != num_outputs) {
    return absl::InvalidArgumentError(
        absl::StrCat("expected ", num_outputs, " output types, got ", output_types.size()));
  }
  return absl::OkStatus();
}

absl::Status CheckFullyDefined(absl::Span<const TensorType> output_types) {
  for (const TensorType& type : output_types) {
    if (!IsFullyDefined(type.shape)) {
      return absl::InvalidArgumentError(
          absl::StrCat("output type ", TypeString(type), " is not fully defined"));
    }
  }
  return absl::OkStatus();
}

absl::Status CheckSameDType(absl::Span<const HostTensor> inputs, DType dtype, const char* what) {
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (inputs[i].dtype() != dtype) {
      return absl::InvalidArgumentError(absl::StrCat(what, ": input ", i, " is ",
                                                     DTypeName(inputs[i].dtype()), ", expected ",
                                                     DTypeName(dtype)));
    }
  }
  return absl::OkStatus();
}

}  // namespace reference_internal
}  // namespace braze
