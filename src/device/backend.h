// The device interface: what compiling and launching a kernel needs from one kind of
// device. The host (host_backend.cc), CUDA (cuda_backend.cc) and OpenCL
// (opencl_backend.cc) implement it; a new device is a new file implementing it plus its
// case in BackendFor, while
// the compile driver (compile/compile.cc) and the kernel's one launch path stay as
// they are.
//
// Internal header: includes Halide.h (the device and compile layers use it).
#ifndef BRAZE_DEVICE_BACKEND_H_
#define BRAZE_DEVICE_BACKEND_H_

#include "Halide.h"
#include "absl/status/statusor.h"
#include "braze/device.h"

namespace braze {
namespace device {

class Backend {
 public:
  virtual ~Backend() = default;
  virtual Device::Kind kind() const = 0;
  // True when kernels read and write device memory (DeviceTensor); false for host
  // memory (HostTensor).
  virtual bool device_memory() const = 0;
  // The Halide JIT target of this backend's kernels. Throws Halide::Error for a bad
  // HL_JIT_TARGET.
  virtual Halide::Target JitTarget() const = 0;
  // Sets the handlers every pipeline of this backend needs on the pipeline's own
  // jit_handlers() (never Halide's process-wide defaults: see jit_memory.h): the
  // buffer cache, and for a device its context, stream and error handlers.
  virtual void InstallHandlers(Halide::JITHandlers* handlers) const = 0;
  // Halide's device interface for device `ordinal`, with the backend's handlers in
  // place (device-memory backends), to allocate buffers there. FailedPrecondition when
  // the device is unavailable.
  virtual absl::StatusOr<const halide_device_interface_t*> Interface(int ordinal) const = 0;
};

// The backend of a device kind.
const Backend& BackendFor(Device::Kind kind);

}  // namespace device
}  // namespace braze

#endif  // BRAZE_DEVICE_BACKEND_H_
