// What the layers above src/device/ may ask of a device: the one place that answers
// "does this device ...?" so that no other layer tests Device::Kind. Each backend's
// answers come from its own file (device/backend.h: Backend::features()); this header
// is the Halide-free view of them, for passes' callers, the plan, the compile driver
// and the runtime.
//
//   device::FeaturesOf(d).device_memory    values live in DeviceTensor (a GPU's memory)
//   device::CheckAvailable(d)              the placement check of the plan's Place stage
//   device::JitTargetString(d)             the Halide JIT target its kernels compile for
//   device::ScheduleTargetString(d)        ... and the GPU's architecture: stored schedules' key
//   device::ResolveSessionDevice("auto")   SessionOptions::device, parsed once
#ifndef BRAZE_DEVICE_FEATURES_H_
#define BRAZE_DEVICE_FEATURES_H_

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "braze/device.h"

namespace braze {
namespace device {

struct Features {
  // Kernels read and write device memory (DeviceTensor), and are scheduled by the GPU
  // schedulers; false: host memory (HostTensor) and the CPU schedulers.
  bool device_memory = false;
  // MatMuls placed here may run as a library GEMM step (cuBLASLt with its epilogue,
  // passes/gemm_match.h) instead of a cluster.
  bool library_gemm = false;
  // Stored, tuned schedules (schedules/) may apply: the CPU templates' entries tuned
  // for the host target, or the GPU heuristic's tuned for the device's architecture
  // (ScheduleTargetString).
  bool stored_schedules = false;
  // The lowering uses CUDA's libdevice math (lower::LowerOptions::cuda).
  bool libdevice_math = false;
};

// The answers of `device`'s backend (the same for every index and for "jit:" devices).
const Features& FeaturesOf(const Device& device);

// OK when ops may be placed on `device` on this machine (its driver and that device
// index exist, and the backend supports the index). The error's message does not name
// the device or the node; the caller adds them.
absl::Status CheckAvailable(const Device& device);

// The Halide JIT target string of `device`'s kernels (host features, HL_JIT_TARGET);
// InvalidArgument for a bad HL_JIT_TARGET.
absl::StatusOr<std::string> JitTargetString(const Device& device);

// The target a stored schedule for `device`'s kernels is tuned for and keyed by: the
// host's JIT target; for a GPU, that target's arch-bits-os and GPU features (not the
// host's CPU features: a GPU's entry holds whatever CPU drives it) and the device's
// architecture: "x86-64-linux-cuda-cuda_capability_86 device=sm_90", OpenCL's
// "x86-64-linux-cl_doubles-opencl device=<platform>: <device name> (<type>)".
// FailedPrecondition when the GPU is unavailable; InvalidArgument for a bad HL_JIT_TARGET.
absl::StatusOr<std::string> ScheduleTargetString(const Device& device);

// SessionOptions::device, parsed once when the session starts: a device string
// (ParseDevice's forms and errors) or "auto": the first backend whose device is present
// and a GPU ("cuda:0" when CUDA is available, else "opencl:0" when OpenCL's first device
// is a GPU), else "cpu". POCL's CPU device runs kernels on the host more slowly than the
// CPU backend, so it is used only when asked for by name.
absl::StatusOr<Device> ResolveSessionDevice(const std::string& name);

}  // namespace device
}  // namespace braze

#endif  // BRAZE_DEVICE_FEATURES_H_
