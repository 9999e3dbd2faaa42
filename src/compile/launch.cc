// The launch contract shared by every compiled kernel (see launch.h).
#include "compile/launch.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "braze/status.h"
#include "device/device_tensor_impl.h"
#include "device/halide_util.h"
#include "device/thread_pool.h"

namespace braze {
namespace compile {

namespace {

TensorType TypeOf(const KernelArg& a) {
  return a.host != nullptr ? a.host->type() : a.device->type();
}

// The argument wrapped: a host tensor's memory, or a device tensor's buffer.
KernelBuffer BufferOf(const KernelArg& a) {
  return a.device != nullptr ? KernelBuffer(*a.device) : KernelBuffer(*a.host);
}

}  // namespace

KernelBuffer::KernelBuffer(HostTensor& t) {
  std::vector<int> sizes;
  for (int d = t.rank() - 1; d >= 0; --d) sizes.push_back(static_cast<int>(t.dim(d)));
  if (sizes.empty()) sizes.push_back(1);
  host_ = Halide::Runtime::Buffer<>(device::HalideType(t.dtype()), t.raw_data(), sizes);
}

KernelBuffer::KernelBuffer(DeviceTensor& t) : device_(t.impl().buffer) {}

void RuntimeThreadCount::Use(int n, absl::FunctionRef<SetNumThreads()> find) {
  if (current_.load(std::memory_order_relaxed) == n) return;
  std::lock_guard<std::mutex> lock(mu_);
  if (set_ == nullptr) {
    set_ = find();
    if (set_ == nullptr) return;  // no runtime yet: nothing runs on it
  }
  set_(n);
  current_.store(n, std::memory_order_relaxed);
}

PipelineKernel::PipelineKernel(std::string name, KernelLayout layout, bool on_device,
                               int num_threads)
    : name_(std::move(name)),
      layout_(std::move(layout)),
      on_device_(on_device),
      num_threads_(num_threads) {
  for (size_t j = 0; j < layout_.pipeline_output.size(); ++j) {
    if (layout_.pipeline_output[j] >= 0) pipeline_outputs_.push_back(j);
  }
  std::sort(pipeline_outputs_.begin(), pipeline_outputs_.end(), [&](size_t a, size_t b) {
    return layout_.pipeline_output[a] < layout_.pipeline_output[b];
  });
}

absl::Status PipelineKernel::Launch(absl::Span<const KernelArg> inputs,
                                    absl::Span<const KernelArg> outputs) {
  BRAZE_RETURN_IF_ERROR(CheckArgs(inputs, outputs));
  if (pipeline_outputs_.empty()) return absl::OkStatus();  // every output is empty
  std::vector<KernelBuffer> args;
  args.reserve(inputs.size() + pipeline_outputs_.size());
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (!layout_.input_elided[i]) args.push_back(BufferOf(inputs[i]));
  }
  const size_t num_inputs = args.size();
  for (size_t j : pipeline_outputs_) args.push_back(BufferOf(outputs[j]));
  if (!on_device_) UseRuntimeThreads(num_threads_);
  device::ScopedKernelThreads threads(num_threads_);
  return Call(args, num_inputs);
}

// Halide checks the dtype and exact shape of every buffer it is given (bounds and
// strides are set at compile time); what it never sees is checked here: counts, nulls,
// the memory space, elided inputs, outputs that are not pipeline outputs. Every output
// is checked, so that a wrong one is named the same way whoever compiled the kernel.
absl::Status PipelineKernel::CheckArgs(absl::Span<const KernelArg> inputs,
                                       absl::Span<const KernelArg> outputs) const {
  if (inputs.size() != layout_.input_elided.size() ||
      outputs.size() != layout_.output_types.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat(name_, ": launched with ", inputs.size(), " inputs and ", outputs.size(),
                     " outputs; the kernel takes ", layout_.input_elided.size(), " and ",
                     layout_.output_types.size()));
  }
  const char* want = on_device_ ? "a device tensor" : "a host tensor";
  auto check = [&](const KernelArg& a, const char* what, size_t i) -> absl::Status {
    const bool ok = on_device_ ? (a.device != nullptr && a.host == nullptr)
                               : (a.host != nullptr && a.device == nullptr);
    if (!ok) {
      return absl::InvalidArgumentError(absl::StrCat(name_, ": ", what, " ", i, " must be ", want));
    }
    return absl::OkStatus();
  };
  for (size_t i = 0; i < inputs.size(); ++i) {
    BRAZE_RETURN_IF_ERROR(check(inputs[i], "input", i));
    if (!layout_.input_elided[i]) continue;
    const TensorType type = TypeOf(inputs[i]);
    if (NumElements(type.shape) != 0) {
      return absl::InvalidArgumentError(
          absl::StrCat(name_, ": input ", i, " is ", TypeString(type),
                       " but the kernel was compiled for an empty tensor"));
    }
  }
  for (size_t j = 0; j < outputs.size(); ++j) {
    BRAZE_RETURN_IF_ERROR(check(outputs[j], "output", j));
    const TensorType& expected = layout_.output_types[j];  // -1 dims: symbolic
    const TensorType got = TypeOf(outputs[j]);
    if (got.dtype != expected.dtype || !ShapeMatches(expected.shape, got.shape)) {
      return absl::InvalidArgumentError(absl::StrCat(name_, ": output ", j, " is ", TypeString(got),
                                                     ", expected ", TypeString(expected)));
    }
  }
  return absl::OkStatus();
}

}  // namespace compile
}  // namespace braze
