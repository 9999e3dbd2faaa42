// DeviceTensor and Braze's hooks into Halide's CUDA runtime; see device_tensor.h.
//
// Halide's JIT runtime would create a CUDA context of its own (cuCtxCreate) and report
// errors by calling abort() when no pipeline's handler is in place. Braze installs JIT
// default handlers instead: the context is the device's primary context (shared with
// the CUDA runtime API, hence cuBLAS), the stream is the legacy default stream, and
// errors are recorded per thread and returned as Status.
#include "device/device_tensor.h"

#include <dlfcn.h>

#include <cstring>
#include <mutex>

#include "absl/strings/str_cat.h"
#include "braze/device.h"
#include "braze/status.h"
#include "device/backend.h"
#include "device/device_tensor_impl.h"
#include "device/halide_util.h"

namespace braze {
namespace device {
namespace {

// The few driver entry points Braze calls itself (from the libcuda.so.1 that
// CheckCudaAvailable loaded; no CUDA header or library at build time).
using CuResult = int;
using CuContext = void*;
struct Driver {
  CuResult (*device_get)(int* device, int ordinal) = nullptr;
  CuResult (*primary_ctx_retain)(CuContext* ctx, int device) = nullptr;
  CuResult (*ctx_push)(CuContext ctx) = nullptr;
  CuResult (*ctx_pop)(CuContext* ctx) = nullptr;
  CuResult (*ctx_synchronize)() = nullptr;
};

struct CudaState {
  std::mutex mu;
  bool initialized = false;
  absl::Status status;
  int ordinal = -1;
  CuContext context = nullptr;
  Driver driver;
  const halide_device_interface_t* interface = nullptr;
};

CudaState& State() {
  static CudaState* state = new CudaState();
  return *state;
}

thread_local std::string runtime_error;

int32_t AcquireContext(Halide::JITUserContext*, void** ctx, bool create) {
  CudaState& s = State();
  *ctx = s.context;
  return s.context == nullptr ? -1 : 0;
}
int32_t ReleaseContext(Halide::JITUserContext*) { return 0; }
int32_t GetStream(Halide::JITUserContext*, void*, void** stream) {
  *stream = nullptr;  // the legacy default stream: ordered with cuBLAS and copies
  return 0;
}

}  // namespace

void RecordRuntimeError(Halide::JITUserContext*, const char* msg) {
  if (!runtime_error.empty()) runtime_error += "; ";
  runtime_error += msg;
  while (!runtime_error.empty() && runtime_error.back() == '\n') runtime_error.pop_back();
}

void InstallDefaultDeviceHandlers() {
  // Every device's handlers at once: setting the defaults replaces all of them, so a
  // backend that set only its own would undo another's (OpenCL's init dropping CUDA's
  // context handlers, say). The CUDA ones answer only CUDA calls, the OpenCL loader
  // only loads of libOpenCL.
  Halide::JITHandlers handlers;
  handlers.custom_error = RecordRuntimeError;
  UseCudaHandlers(&handlers);
  UseOpenCLHandlers(&handlers);
  Halide::Internal::JITSharedRuntime::set_default_handlers(handlers);
}

void UseCudaHandlers(Halide::JITHandlers* handlers) {
  handlers->custom_cuda_acquire_context = AcquireContext;
  handlers->custom_cuda_release_context = ReleaseContext;
  handlers->custom_cuda_get_stream = GetStream;
}

namespace {

template <typename F>
bool Resolve(void* lib, const char* name, F* fn) {
  *fn = reinterpret_cast<F>(dlsym(lib, name));
  return *fn != nullptr;
}

absl::Status Initialize(CudaState& s, int ordinal) {
  BRAZE_RETURN_IF_ERROR(CheckCudaAvailable());
  if (ordinal < 0 || ordinal >= CudaDeviceCount()) {
    return absl::InvalidArgumentError(
        absl::StrCat("no CUDA device ", ordinal, " (this machine has ", CudaDeviceCount(), ")"));
  }
  void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_GLOBAL);
  if (lib == nullptr) return absl::FailedPreconditionError("cannot load libcuda.so.1");
  Driver& d = s.driver;
  if (!Resolve(lib, "cuDeviceGet", &d.device_get) ||
      !Resolve(lib, "cuDevicePrimaryCtxRetain", &d.primary_ctx_retain) ||
      !Resolve(lib, "cuCtxPushCurrent_v2", &d.ctx_push) ||
      !Resolve(lib, "cuCtxPopCurrent_v2", &d.ctx_pop) ||
      !Resolve(lib, "cuCtxSynchronize", &d.ctx_synchronize)) {
    return absl::FailedPreconditionError("libcuda.so.1 lacks a driver entry point Braze needs");
  }
  int device = 0;
  if (CuResult rc = d.device_get(&device, ordinal); rc != 0) {
    return absl::FailedPreconditionError(absl::StrCat("cuDeviceGet(", ordinal, ") failed: ", rc));
  }
  if (CuResult rc = d.primary_ctx_retain(&s.context, device); rc != 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("cuDevicePrimaryCtxRetain(", ordinal, ") failed: ", rc));
  }
  // Defaults, for the device calls Braze makes outside pipelines; every CUDA pipeline
  // also carries the context and stream handlers itself (UseCudaHandlers).
  InstallDefaultDeviceHandlers();
  s.ordinal = ordinal;
  return CatchHalideErrors("Halide's CUDA runtime", absl::StatusCode::kInternal, [&] {
    s.interface = Halide::get_device_interface_for_device_api(Halide::DeviceAPI::CUDA,
                                                              CudaJitTarget(), "braze");
    return s.interface != nullptr
               ? absl::OkStatus()
               : absl::InternalError("no CUDA device interface in the JIT runtime");
  });
}

// Pushes the primary context for the calls made in its lifetime (cuBLAS, sync).
class ContextScope {
 public:
  explicit ContextScope(CudaState& s) : s_(s) { ok_ = s.driver.ctx_push(s.context) == 0; }
  ~ContextScope() {
    CuContext old = nullptr;
    if (ok_) s_.driver.ctx_pop(&old);
  }
  bool ok() const { return ok_; }

 private:
  CudaState& s_;
  bool ok_ = false;
};

absl::Status RuntimeStatus(const std::string& what, int rc) {
  if (rc == 0) return absl::OkStatus();
  std::string msg = TakeRuntimeError();
  return absl::InternalError(
      absl::StrCat(what, " failed (Halide error ", rc, ")", msg.empty() ? "" : ": ", msg));
}

}  // namespace

Halide::Target CudaJitTarget() {
  return SanitizedJitTarget()
      .with_feature(Halide::Target::CUDA)
      .with_feature(Halide::Target::CUDACapability86);
}

absl::StatusOr<const halide_device_interface_t*> CudaInterface(int ordinal) {
  CudaState& s = State();
  std::lock_guard<std::mutex> lock(s.mu);
  if (!s.initialized) {
    s.initialized = true;
    s.status = Initialize(s, ordinal);
  }
  BRAZE_RETURN_IF_ERROR(s.status);
  if (ordinal != s.ordinal) {
    // Halide's runtime has one context per process; Braze gives it one device.
    return absl::UnimplementedError(absl::StrCat("this process uses CUDA device ", s.ordinal,
                                                 "; one CUDA device per process is supported, "
                                                 "cuda:",
                                                 ordinal, " is not available"));
  }
  return s.interface;
}

std::string TakeRuntimeError() {
  std::string msg;
  msg.swap(runtime_error);
  return msg;
}

}  // namespace device

DeviceTensor::DeviceTensor(TensorType type, Device device, std::unique_ptr<Impl> impl)
    : type_(std::move(type)), device_(device), impl_(std::move(impl)) {}

DeviceTensor::~DeviceTensor() {
  if (impl_ == nullptr || !impl_->buffer.defined()) return;
  // The data is device-side by design; drop it without the dirty-free assertion.
  Halide::Runtime::Buffer<>* raw = impl_->buffer.get();
  raw->set_device_dirty(false);
  halide_buffer_t* b = raw->raw_buffer();
  if (b->device == 0) return;
  if (device_.kind != Device::Kind::kCuda) {
    raw->device_free();
    return;
  }
  // Halide's device_free aborts when the CUDA runtime cannot make the context current
  // (a driver shut down at exit): leak the allocation then instead.
  device::CudaState& s = device::State();
  if (s.driver.ctx_push == nullptr || s.driver.ctx_push(s.context) != 0) {
    b->device = 0;
    b->device_interface = nullptr;
    return;
  }
  device::CuContext old = nullptr;
  s.driver.ctx_pop(&old);
  raw->device_free();
}

int64_t DeviceTensor::num_elements() const { return NumElements(type_.shape); }
size_t DeviceTensor::num_bytes() const { return num_elements() * SizeOf(type_.dtype); }

absl::StatusOr<std::unique_ptr<DeviceTensor>> DeviceTensor::Allocate(const TensorType& type,
                                                                     const Device& device) {
  if (!IsFullyDefined(type.shape)) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot allocate a device tensor of partial type ", TypeString(type)));
  }
  const device::Backend& backend = device::BackendFor(device.kind);
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
  Halide::Runtime::Buffer<>* raw = impl_->buffer.get();
  std::memcpy(raw->data(), src.raw_data(), src.num_bytes());
  raw->set_device_dirty(false);  // first: Halide asserts a buffer is never both dirty
  raw->set_host_dirty(true);
  device::TakeRuntimeError();
  return device::RuntimeStatus("copy to the device",
                               raw->copy_to_device(raw->raw_buffer()->device_interface));
}

absl::Status DeviceTensor::CopyToHost(HostTensor* dst) const {
  if (dst->type() != type_) *dst = HostTensor(type_.dtype, type_.shape);
  if (num_elements() == 0) return absl::OkStatus();
  Halide::Runtime::Buffer<>* raw = impl_->buffer.get();
  // The device copy is the authority: whatever the flags say, copy it back.
  raw->set_host_dirty(false);
  raw->set_device_dirty(true);
  device::TakeRuntimeError();
  BRAZE_RETURN_IF_ERROR(device::RuntimeStatus("copy to the host", raw->copy_to_host()));
  std::memcpy(dst->raw_data(), raw->data(), num_bytes());
  return absl::OkStatus();
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

absl::Status CudaSynchronize() {
  device::CudaState& s = device::State();
  {
    std::lock_guard<std::mutex> lock(s.mu);
    if (!s.initialized || !s.status.ok()) return absl::OkStatus();
  }
  device::ContextScope scope(s);
  if (!scope.ok()) return absl::InternalError("cannot make the CUDA context current");
  if (int rc = s.driver.ctx_synchronize(); rc != 0) {
    return absl::InternalError(absl::StrCat("cuCtxSynchronize failed: CUDA error ", rc));
  }
  return absl::OkStatus();
}

absl::Status RunInCudaContext(int ordinal, const std::function<absl::Status()>& fn) {
  BRAZE_RETURN_IF_ERROR(device::CudaInterface(ordinal).status());
  device::ContextScope scope(device::State());
  if (!scope.ok()) return absl::InternalError("cannot make the CUDA context current");
  return fn();
}

}  // namespace braze
