// The device interface: everything Braze asks of one kind of device, answered in one
// file per backend: the host (host_backend.cc), CUDA (cuda_backend.cc) and OpenCL
// (opencl_backend.cc). A new device is a new file implementing Backend plus its case in
// BackendFor (backend.cc, a switch over Device::Kind with no default, built with
// -Werror=switch, so a new kind without a backend fails to compile), plus its kind in
// braze/device_type.h and its name in src/ir/device.cc: 4 files, which
// docs/HOW_TO_ADD_DEVICE.md lists with what catches each one forgotten. No layer above src/device/
// tests Device::Kind: they ask features(), CheckAvailable and JitTarget through device/features.h
// (no Halide there), and the compile driver (compile/scheduler_chain.cc) and the kernels' one
// launch contract (compile/launch.h) use the rest.
//
// Internal header: includes Halide.h (the device and compile layers use it).
#ifndef BRAZE_DEVICE_BACKEND_H_
#define BRAZE_DEVICE_BACKEND_H_

#include "Halide.h"
#include "absl/status/statusor.h"
#include "braze/device.h"
#include "device/device_tensor.h"
#include "device/features.h"

namespace braze {
namespace device {

class Backend {
 public:
  virtual ~Backend() = default;
  virtual Device::Kind kind() const = 0;
  // The questions other layers ask (device/features.h).
  virtual const Features& features() const = 0;
  // OK when ops may be placed on device `index` of this kind on this machine: its
  // driver loads and the device exists. The message names neither the device nor a node.
  virtual absl::Status CheckAvailable(int index) const = 0;
  // True when the session's "auto" device should pick this backend's device 0: its
  // driver is present and the device is a GPU (device/features.h, ResolveSessionDevice).
  virtual bool PreferredForAuto() const { return false; }
  // True when kernels read and write device memory (DeviceTensor); false for host
  // memory (HostTensor).
  bool device_memory() const { return features().device_memory; }
  // The Halide JIT target of this backend's kernels. Throws Halide::Error for a bad
  // HL_JIT_TARGET.
  virtual Halide::Target JitTarget() const = 0;
  // The device's architecture, which stored schedules tuned on it are keyed by besides
  // the Halide target (whose CUDA capability stops at 86, and which names no OpenCL
  // device): "sm_90" (CUDA's compute capability), the OpenCL device's platform and name.
  // Empty for the host, whose target names its CPU features. FailedPrecondition when the
  // device is unavailable.
  virtual absl::StatusOr<std::string> Architecture(int ordinal) const { return std::string(); }
  // Sets the handlers every pipeline of this backend needs on the pipeline's own
  // jit_handlers() (never Halide's process-wide defaults: see jit_memory.h): the
  // buffer cache, and for a device its context, stream and error handlers.
  virtual void InstallHandlers(Halide::JITHandlers* handlers) const = 0;
  // Halide's device interface for device `ordinal`, with the backend's handlers in
  // place (device-memory backends), to allocate buffers there. FailedPrecondition when
  // the device is unavailable.
  virtual absl::StatusOr<const halide_device_interface_t*> Interface(int ordinal) const = 0;
  // Frees the device side of `buffer` (a DeviceTensor's, device_memory() backends), never
  // aborting: a driver already shut down at process exit leaks the allocation instead.
  virtual void FreeDeviceBuffer(Halide::Runtime::Buffer<>* buffer) const { buffer->device_free(); }
  // Copies `bytes` (the whole dense tensor) from host memory `src` to the device side of
  // `tensor` (device_memory() backends), ordered after the device work queued before
  // it and before the work queued after it; `src` may be reused once it returns. The
  // default is Halide's copy through the buffer's host mirror, synchronous (CUDA:
  // pinned staging and an async copy, cuda_backend.cc).
  virtual absl::Status CopyToDevice(DeviceTensor::Impl& tensor, const void* src,
                                    size_t bytes) const;
  // Copies the device side of `tensor` (`bytes`, the whole tensor) to host memory `dst`
  // once the device work queued before it is done.
  virtual absl::Status CopyToHost(DeviceTensor::Impl& tensor, void* dst, size_t bytes) const;
  // Device time for the timeline (device/device_timeline.h): marks the start of device
  // `ordinal`'s queued work and returns the span, or nullptr when the backend cannot
  // time its device. EndDeviceSpan marks the end; the bar is written once the device
  // has run both marks (at once when `wait`: the host waits for the end mark).
  virtual void* BeginDeviceSpan(int ordinal) const { return nullptr; }
  virtual void EndDeviceSpan(void* span, std::string name, const char* category,
                             std::string args_json, bool wait) const {}
};

// The backend of a device kind: the one switch over Device::Kind that maps kinds to
// backends.
const Backend& BackendFor(Device::Kind kind);
inline const Backend& BackendFor(const Device& device) { return BackendFor(device.kind); }

}  // namespace device
}  // namespace braze

#endif  // BRAZE_DEVICE_BACKEND_H_
