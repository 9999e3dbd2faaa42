// The CUDA backend: kernels compiled for the host target plus CUDA, in device memory
// (DeviceTensor), in the device's primary context on the legacy default stream
// (device_tensor.cc holds the driver state and Halide's runtime hooks).
#include "device/backend.h"
#include "device/device_tensor_impl.h"
#include "device/jit_memory.h"

namespace braze {
namespace device {
namespace {

class CudaBackend : public Backend {
 public:
  Device::Kind kind() const override { return Device::Kind::kCuda; }
  bool device_memory() const override { return true; }
  Halide::Target JitTarget() const override { return CudaJitTarget(); }
  void InstallHandlers(Halide::JITHandlers* handlers) const override {
    UseJitBufferCache(handlers);  // host-side intermediates of the pipeline
    UseCudaHandlers(handlers);
  }
  absl::StatusOr<const halide_device_interface_t*> Interface(int ordinal) const override {
    return CudaInterface(ordinal);
  }
};

}  // namespace

const Backend& CudaBackendInstance() {
  static const CudaBackend* backend = new CudaBackend();
  return *backend;
}

}  // namespace device
}  // namespace braze
