// The CUDA backend: kernels compiled for the host target plus CUDA, in device memory
// (DeviceTensor), in the device's primary context on the legacy default stream. Every
// answer Braze needs of a CUDA device comes from this file (device/backend.h); the
// driver probe is cuda_driver.cc (CheckCudaAvailable) and the library GEMM is
// cublas_gemm.cc, each its own concern.
//
// Halide's JIT runtime would create a CUDA context of its own (cuCtxCreate) and report
// errors by calling abort() when no pipeline's handler is in place. Braze installs JIT
// handlers instead: the context is the device's primary context (shared with the CUDA
// runtime API, hence cuBLAS), the stream is the legacy default stream, and errors are
// recorded per thread and returned as Status (device_tensor.cc).
#include <dlfcn.h>

#include <mutex>

#include "absl/strings/str_cat.h"
#include "braze/device.h"
#include "braze/status.h"
#include "device/backend.h"
#include "device/device_tensor.h"
#include "device/device_tensor_impl.h"
#include "device/halide_util.h"
#include "device/jit_memory.h"

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

// Braze's CUDA context (the device's primary) and stream (the legacy default) handlers:
// every CUDA pipeline's jit_handlers() get them, so no realize can see Halide's own
// context handler while Halide resets its defaults.
void UseCudaHandlers(Halide::JITHandlers* handlers) {
  handlers->custom_cuda_acquire_context = AcquireContext;
  handlers->custom_cuda_release_context = ReleaseContext;
  handlers->custom_cuda_get_stream = GetStream;
}

// The JIT target of CUDA kernels: the sanitized host target plus CUDA at capability
// 8.6, the highest Halide 14 knows (its PTX runs on sm_90).
Halide::Target CudaJitTarget() {
  return SanitizedJitTarget()
      .with_feature(Halide::Target::CUDA)
      .with_feature(Halide::Target::CUDACapability86);
}

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
  InstallDefaultDeviceHandlers(UseCudaHandlers);
  s.ordinal = ordinal;
  return CatchHalideErrors("Halide's CUDA runtime", absl::StatusCode::kInternal, [&] {
    s.interface = Halide::get_device_interface_for_device_api(Halide::DeviceAPI::CUDA,
                                                              CudaJitTarget(), "braze");
    return s.interface != nullptr
               ? absl::OkStatus()
               : absl::InternalError("no CUDA device interface in the JIT runtime");
  });
}

// Halide's CUDA device interface in the JIT runtime, with Braze's handlers installed
// (primary context, default stream, errors recorded instead of abort). Status when CUDA
// is unavailable or `ordinal` is not the device this process uses.
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

class CudaBackend : public Backend {
 public:
  Device::Kind kind() const override { return Device::Kind::kCuda; }
  const Features& features() const override {
    static const Features features = [] {
      Features f;
      f.device_memory = true;
      f.library_gemm = true;    // cuBLASLt (device/cublas_gemm.h)
      f.libdevice_math = true;  // Halide links libdevice into every PTX module
      return f;
    }();
    return features;
  }
  absl::Status CheckAvailable(int index) const override {
    BRAZE_RETURN_IF_ERROR(CheckCudaAvailable());
    if (index >= CudaDeviceCount()) {
      return absl::InvalidArgumentError(
          absl::StrCat("this machine has ", CudaDeviceCount(), " CUDA device(s)"));
    }
    return absl::OkStatus();
  }
  bool PreferredForAuto() const override { return CheckCudaAvailable().ok(); }
  Halide::Target JitTarget() const override { return CudaJitTarget(); }
  void InstallHandlers(Halide::JITHandlers* handlers) const override {
    UseJitBufferCache(handlers);  // host-side intermediates of the pipeline
    UseCudaHandlers(handlers);
  }
  absl::StatusOr<const halide_device_interface_t*> Interface(int ordinal) const override {
    return CudaInterface(ordinal);
  }
  // Halide's device_free aborts when the CUDA runtime cannot make the context current
  // (a driver shut down at exit): leak the allocation then instead.
  void FreeDeviceBuffer(Halide::Runtime::Buffer<>* buffer) const override {
    CudaState& s = State();
    if (s.driver.ctx_push == nullptr || s.driver.ctx_push(s.context) != 0) {
      halide_buffer_t* b = buffer->raw_buffer();
      b->device = 0;
      b->device_interface = nullptr;
      return;
    }
    CuContext old = nullptr;
    s.driver.ctx_pop(&old);
    buffer->device_free();
  }
};

}  // namespace

const Backend& CudaBackendInstance() {
  static const CudaBackend* backend = new CudaBackend();
  return *backend;
}

}  // namespace device

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
