// Devices and placement, as tf.device: ops record the device they were built under.
//
//   "cpu"               the host (Halide host target, all cores)
//   "cuda", "cuda:N"    NVIDIA GPU N (Halide CUDA target)
//   "opencl", "opencl:N" OpenCL device N (Halide OpenCL target): any OpenCL GPU, or
//                       POCL's device on the CPU (how the GPU path runs on machines
//                       without a GPU)
//   "jit:cpu", "jit:cuda[:N]", "jit:opencl[:N]"
//                       forced-compilation devices, the seeds' XLA_CPU / XLA_GPU: every
//                       op placed there is compiled (as under JitScope), whatever the
//                       scopes and the session's jit level say. Mainly for testing.
//   (none)              no placement (Node::device() empty): the session's default
//                       device.
//
// Clustering never merges ops of different devices.
#ifndef BRAZE_DEVICE_H_
#define BRAZE_DEVICE_H_

#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "braze/device_type.h"
#include "braze/graph.h"

namespace braze {

// RAII placement scope: ops built inside record `device` (Node::device()). Nested
// scopes override and restore. The string form parses the name here, once (ParseDevice):
// a bad device string is recorded on the graph (Graph::status()), so the next
// Session::Run reports it; the ops then keep the enclosing placement.
class DeviceScope {
 public:
  DeviceScope(Graph& graph, const std::string& device);
  DeviceScope(Graph& graph, const Device& device);
  ~DeviceScope();
  DeviceScope(const DeviceScope&) = delete;
  DeviceScope& operator=(const DeviceScope&) = delete;

 private:
  Graph& graph_;
  std::optional<Device> previous_;
};

// OK when a CUDA driver with at least one device is present. Loads libcuda.so.1 with
// RTLD_GLOBAL first (Halide's runtime looks for libcuda.so, which driver-only machines
// lack), so a later Halide CUDA kernel finds the driver. Never aborts: no driver, no
// device or a failing cuInit is FailedPrecondition with the reason.
absl::Status CheckCudaAvailable();
// Number of CUDA devices, 0 when CheckCudaAvailable fails.
int CudaDeviceCount();

// OK when an OpenCL ICD loader (libOpenCL.so.1) with at least one device is present.
// The drivers are loaded with deep binding first (src/device/opencl_driver.h), so one
// built on another LLVM than Halide's (POCL) cannot bind to Halide's LLVM symbols.
// Never aborts: FailedPrecondition with the reason.
absl::Status CheckOpenCLAvailable();
// The OpenCL devices of every platform, in order ("opencl:N" is the Nth), each as
// "<platform>: <device name> (<type>)"; empty when CheckOpenCLAvailable fails.
std::vector<std::string> OpenCLDevices();

}  // namespace braze

#endif  // BRAZE_DEVICE_H_
