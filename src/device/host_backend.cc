// The host backend: kernels on the CPU, reading and writing host memory.
#include "absl/status/status.h"
#include "device/backend.h"
#include "device/halide_util.h"
#include "device/jit_memory.h"
#include "device/thread_pool.h"

namespace braze {
namespace device {
namespace {

// Halide's parallel loops on Braze's thread pool (thread_pool.h). The JIT passes its
// JITUserContext where the task signature has void*: the same pointer.
int JitParallelFor(Halide::JITUserContext* user_context,
                   int (*f)(Halide::JITUserContext*, int, uint8_t*), int min, int extent,
                   uint8_t* closure) {
  return ParallelFor(user_context, reinterpret_cast<ParallelTask>(f), min, extent, closure);
}

class HostBackend : public Backend {
 public:
  Device::Kind kind() const override { return Device::Kind::kCpu; }
  bool device_memory() const override { return false; }
  Halide::Target JitTarget() const override { return SanitizedJitTarget(); }
  void InstallHandlers(Halide::JITHandlers* handlers) const override {
    UseJitBufferCache(handlers);
    handlers->custom_do_par_for = JitParallelFor;
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
