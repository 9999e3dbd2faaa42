// DeviceTensor (see device_tensor.h) and what every device backend shares: the
// per-thread record of Halide runtime errors and Halide's JIT default handlers. Each
// backend's own driver state and hooks live in its file (cuda_backend.cc,
// opencl_backend.cc).
#include "device/device_tensor.h"

#include <cstring>
#include <mutex>

#include "absl/strings/str_cat.h"
#include "braze/device.h"
#include "braze/status.h"
#include "device/backend.h"
#include "device/device_tensor_impl.h"
#include "device/device_timeline.h"
#include "device/halide_util.h"
#include "ir/timeline.h"

namespace braze {
namespace device {
namespace {

thread_local std::string runtime_error;

// A copy's timeline args (its size), formatted only while a timeline is active.
std::string BytesArg(size_t bytes) {
  return Timeline::active() ? absl::StrCat("\"bytes\":", bytes) : std::string();
}

absl::Status RuntimeStatus(const std::string& what, int rc) {
  if (rc == 0) return absl::OkStatus();
  std::string msg = TakeRuntimeError();
  return absl::InternalError(NoteLostCudaContext(
      absl::StrCat(what, " failed (Halide error ", rc, ")", msg.empty() ? "" : ": ", msg)));
}

}  // namespace

void RecordRuntimeError(Halide::JITUserContext*, const char* msg) {
  if (!runtime_error.empty()) runtime_error += "; ";
  runtime_error += msg;
  while (!runtime_error.empty() && runtime_error.back() == '\n') runtime_error.pop_back();
}

void InstallDefaultDeviceHandlers(void (*use)(Halide::JITHandlers* handlers)) {
  // Every device backend's handlers at once: setting the defaults replaces all of them,
  // so a backend that set only its own would undo another's (OpenCL's init dropping
  // CUDA's context handlers, say). Each backend's handlers answer only its own calls.
  static std::mutex mu;
  static Halide::JITHandlers* handlers = [] {
    auto* h = new Halide::JITHandlers();
    h->custom_error = RecordRuntimeError;
    return h;
  }();
  std::lock_guard<std::mutex> lock(mu);
  use(handlers);
  Halide::Internal::JITSharedRuntime::set_default_handlers(*handlers);
}

std::string TakeRuntimeError() {
  std::string msg;
  msg.swap(runtime_error);
  return msg;
}

// The default copies (Backend's, here beside the runtime errors they report): Halide's
// buffer copies through the host mirror.
absl::Status Backend::CopyToDevice(DeviceTensor::Impl& tensor, const void* src,
                                   size_t bytes) const {
  Halide::Runtime::Buffer<>* raw = tensor.buffer.get();
  std::memcpy(raw->data(), src, bytes);
  raw->set_device_dirty(false);  // first: Halide asserts a buffer is never both dirty
  raw->set_host_dirty(true);
  TakeRuntimeError();
  return RuntimeStatus("copy to the device",
                       raw->copy_to_device(raw->raw_buffer()->device_interface));
}

absl::Status Backend::CopyToHost(DeviceTensor::Impl& tensor, void* dst, size_t bytes) const {
  Halide::Runtime::Buffer<>* raw = tensor.buffer.get();
  // The device copy is the authority: whatever the flags say, copy it back.
  raw->set_host_dirty(false);
  raw->set_device_dirty(true);
  TakeRuntimeError();
  BRAZE_RETURN_IF_ERROR(RuntimeStatus("copy to the host", raw->copy_to_host()));
  std::memcpy(dst, raw->data(), bytes);
  return absl::OkStatus();
}

}  // namespace device

DeviceTensor::DeviceTensor(TensorType type, Device device, std::unique_ptr<Impl> impl)
    : type_(std::move(type)), device_(device), impl_(std::move(impl)) {}

DeviceTensor::~DeviceTensor() {
  if (impl_ == nullptr) return;
  if (!impl_->buffer.defined()) return;
  // The data is device-side by design; drop it without the dirty-free assertion.
  Halide::Runtime::Buffer<>* raw = impl_->buffer.get();
  raw->set_device_dirty(false);
  halide_buffer_t* b = raw->raw_buffer();
  if (b->device == 0) return;
  device::BackendFor(device_).FreeDeviceBuffer(raw);
}

int64_t DeviceTensor::num_elements() const { return NumElements(type_.shape); }
size_t DeviceTensor::num_bytes() const { return num_elements() * SizeOf(type_.dtype); }

absl::StatusOr<std::unique_ptr<DeviceTensor>> DeviceTensor::Allocate(const TensorType& type,
                                                                     const Device& device) {
  if (!IsFullyDefined(type.shape)) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot allocate a device tensor of partial type ", TypeString(type)));
  }
  const device::Backend& backend = device::BackendFor(device);
  if (!backend.device_memory()) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot allocate a device tensor on ", device.ToString()));
  }
  BRAZE_ASSIGN_OR_RETURN(const halide_device_interface_t* interface,
                         backend.Interface(device.index));
  auto impl = std::make_unique<Impl>();
  std::vector<int> sizes;
  for (int d = static_cast<int>(type.shape.size()) - 1; d >= 0; --d) {
    sizes.push_back(static_cast<int>(type.shape[d]));
  }
  if (sizes.empty()) sizes.push_back(1);
  BRAZE_RETURN_IF_ERROR(device::CatchHalideErrors(
      "allocating a device tensor", absl::StatusCode::kResourceExhausted, [&] {
        impl->buffer = Halide::Buffer<>(device::HalideType(type.dtype), sizes);
        return absl::OkStatus();
      }));
  if (NumElements(type.shape) > 0) {
    device::TakeRuntimeError();  // only this call's messages go into its Status
    const int rc = impl->buffer.get()->device_malloc(interface);
    if (rc != 0) {
      absl::Status s = device::RuntimeStatus(
          absl::StrCat("device_malloc of ", TypeString(type), " on ", device.ToString()), rc);
      return absl::ResourceExhaustedError(s.message());
    }
  }
  return std::unique_ptr<DeviceTensor>(new DeviceTensor(type, device, std::move(impl)));
}

absl::Status DeviceTensor::CopyFromHost(const HostTensor& src) {
  if (src.type() != type_) {
    return absl::InvalidArgumentError(absl::StrCat(
        "copy to the device: got ", TypeString(src.type()), ", the tensor is ", TypeString(type_)));
  }
  if (num_elements() == 0) return absl::OkStatus();
  device::DeviceSpan span(device_, "copy host -> device", "copy", device::BytesArg(num_bytes()));
  return device::BackendFor(device_).CopyToDevice(*impl_, src.raw_data(), num_bytes());
}

absl::Status DeviceTensor::CopyToHost(HostTensor* dst) const {
  if (dst->type() != type_) *dst = HostTensor(type_.dtype, type_.shape);
  if (num_elements() == 0) return absl::OkStatus();
  device::DeviceSpan span(device_, "copy device -> host", "copy", device::BytesArg(num_bytes()));
  span.WaitAtEnd();  // the copy makes the host wait anyway
  return device::BackendFor(device_).CopyToHost(*impl_, dst->raw_data(), num_bytes());
}

absl::Status DeviceTensor::CopyFrom(const DeviceTensor& src) {
  if (src.type() != type_ || !(src.device_ == device_)) {
    return absl::InvalidArgumentError(
        absl::StrCat("device copy: got ", TypeString(src.type()), " on ", src.device_.ToString(),
                     ", the tensor is ", TypeString(type_), " on ", device_.ToString()));
  }
  if (num_elements() == 0) return absl::OkStatus();
  halide_buffer_t* from = src.impl_->buffer.raw_buffer();
  halide_buffer_t* to = impl_->buffer.raw_buffer();
  const halide_device_interface_t* interface = to->device_interface;
  device::TakeRuntimeError();
  // Device to device: buffer_copy reads the source's device side when it is not host
  // dirty, and leaves the destination device dirty. A host-dirty source (only after a
  // failed CopyFromHost) holds its newest data on the host: upload that first.
  if ((from->flags & halide_buffer_flag_host_dirty) != 0) {
    BRAZE_RETURN_IF_ERROR(
        device::RuntimeStatus("device-to-device copy (uploading the source)",
                              src.impl_->buffer.get()->copy_to_device(from->device_interface)));
  }
  to->flags &= ~static_cast<uint64_t>(halide_buffer_flag_host_dirty);
  return device::RuntimeStatus("device-to-device copy",
                               interface->buffer_copy(nullptr, from, interface, to));
}

uint64_t DeviceTensor::device_address() const {
  return num_elements() == 0 ? 0 : impl_->buffer.raw_buffer()->device;
}

}  // namespace braze
