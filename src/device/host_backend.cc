// The host backend: kernels on the CPU, reading and writing host memory.
#include "absl/status/status.h"
#include "device/backend.h"
#include "device/halide_util.h"
#include "device/jit_memory.h"

namespace braze {
namespace device {
namespace {

class HostBackend : public Backend {
 public:
  Device::Kind kind() const override { return Device::Kind::kCpu; }
  bool device_memory() const override { return false; }
  Halide::Target JitTarget() const override { return SanitizedJitTarget(); }
  void InstallHandlers(Halide::JITHandlers* handlers) const override {
    UseJitBufferCache(handlers);
  }
  absl::StatusOr<const halide_device_interface_t*> Interface(int) const override {
    return absl::FailedPreconditionError("the host has no device memory");
  }
};

}  // namespace

const Backend& HostBackendInstance() {
  static const HostBackend* backend = new HostBackend();
  return *backend;
}

}  // namespace device
}  // namespace braze
