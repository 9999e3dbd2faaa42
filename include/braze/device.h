// Devices and placement, as tf.device: ops record the device they were built under.
//
//   "cpu"               the host (Halide host target, all cores)
//   "cuda", "cuda:N"    NVIDIA GPU N (Halide CUDA target)
//   "jit:cpu", "jit:cuda[:N]"
//                       forced-compilation devices, the seeds' XLA_CPU / XLA_GPU: every
//                       op placed there is compiled (as under JitScope), whatever the
//                       scopes and the session's jit level say. Mainly for testing.
//   ""                  no placement: the session's default device.
//
// Clustering never merges ops of different devices.
#ifndef BRAZE_DEVICE_H_
#define BRAZE_DEVICE_H_

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "braze/graph.h"

namespace braze {

struct Device {
  enum class Kind { kCpu, kCuda };
  Kind kind = Kind::kCpu;
  int index = 0;
  bool force_compile = false;    // a "jit:" device
  std::string ToString() const;  // canonical: "cpu", "cuda:0", "jit:cuda:1"
  bool operator==(const Device& o) const {
    return kind == o.kind && index == o.index && force_compile == o.force_compile;
  }
};

// Parses a device string; InvalidArgument naming the string and the accepted forms.
absl::StatusOr<Device> ParseDevice(const std::string& name);

// True when `device` (a node's device string) is a forced-compilation "jit:" device.
bool IsJitDevice(const std::string& device);

// RAII placement scope: ops built inside record `device` (canonicalized). Nested scopes
// override and restore. A bad device string is recorded on the graph (Graph::status()),
// so the next Session::Run reports it; the ops then keep the enclosing placement.
class DeviceScope {
 public:
  DeviceScope(Graph& graph, const std::string& device);
  ~DeviceScope();
  DeviceScope(const DeviceScope&) = delete;
  DeviceScope& operator=(const DeviceScope&) = delete;

 private:
  Graph& graph_;
  std::string previous_;
};

// OK when a CUDA driver with at least one device is present. Loads libcuda.so.1 with
// RTLD_GLOBAL first (Halide's runtime looks for libcuda.so, which driver-only machines
// lack), so a later Halide CUDA kernel finds the driver. Never aborts: no driver, no
// device or a failing cuInit is FailedPrecondition with the reason.
absl::Status CheckCudaAvailable();
// Number of CUDA devices, 0 when CheckCudaAvailable fails.
int CudaDeviceCount();

}  // namespace braze

#endif  // BRAZE_DEVICE_H_
