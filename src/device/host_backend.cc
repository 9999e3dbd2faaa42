// The host backend: kernels on the CPU, reading and writing host memory.
#include <atomic>

#include "absl/status/status.h"
#include "device/backend.h"
#include "device/halide_util.h"
#include "device/jit_memory.h"
#include "device/thread_pool.h"

namespace braze {
namespace device {
namespace {

std::atomic<ParallelForFunction> jit_halide_pool{nullptr};

// Halide's parallel loops on Braze's thread pool (thread_pool.h); while another thread's
// loop holds it, on the JIT runtime's own pool. The JIT passes its JITUserContext where
// the task signature has void*: the same pointer.
int JitParallelFor(Halide::JITUserContext* user_context,
                   int (*f)(Halide::JITUserContext*, int, uint8_t*), int min, int extent,
                   uint8_t* closure) {
  return ParallelFor(user_context, reinterpret_cast<ParallelTask>(f), min, extent, closure,
                     jit_halide_pool.load(std::memory_order_acquire));
}

class HostBackend : public Backend {
 public:
  Device::Kind kind() const override { return Device::Kind::kCpu; }
  const Features& features() const override {
    static const Features features = [] {
      Features f;
      f.stored_schedules = true;  // schedules/ are tuned for the host target
      return f;
    }();
    return features;
  }
  absl::Status CheckAvailable(int) const override { return absl::OkStatus(); }
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

void SetJitHalidePool(ParallelForFunction halide_default_do_par_for) {
  jit_halide_pool.store(halide_default_do_par_for, std::memory_order_release);
}

const Backend& HostBackendInstance() {
  static const HostBackend* backend = new HostBackend();
  return *backend;
}

}  // namespace device
}  // namespace braze
