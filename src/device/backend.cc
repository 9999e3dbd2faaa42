// BackendFor: the one place that maps a device kind to its backend, and the
// Halide-free questions of device/features.h, each answered by the device's backend.
#include "device/backend.h"

#include "absl/strings/str_cat.h"
#include "braze/status.h"
#include "device/halide_util.h"

namespace braze {
namespace device {

// Each defined in its backend's file.
const Backend& HostBackendInstance();
const Backend& CudaBackendInstance();
const Backend& OpenCLBackendInstance();

const Backend& BackendFor(Device::Kind kind) {
  switch (kind) {  // no default: a new kind without a backend fails to compile
    case Device::Kind::kCpu:
      return HostBackendInstance();
    case Device::Kind::kCuda:
      return CudaBackendInstance();
    case Device::Kind::kOpenCL:
      return OpenCLBackendInstance();
  }
  return HostBackendInstance();
}

const Features& FeaturesOf(const Device& device) { return BackendFor(device).features(); }

absl::Status CheckAvailable(const Device& device) {
  return BackendFor(device).CheckAvailable(device.index);
}

absl::StatusOr<std::string> JitTargetString(const Device& device) {
  std::string result;
  BRAZE_RETURN_IF_ERROR(
      CatchHalideErrors("bad Halide target", absl::StatusCode::kInvalidArgument, [&] {
        result = BackendFor(device).JitTarget().to_string();
        return absl::OkStatus();
      }));
  return result;
}

absl::StatusOr<std::string> ScheduleTargetString(const Device& device) {
  BRAZE_ASSIGN_OR_RETURN(std::string target, JitTargetString(device));
  BRAZE_ASSIGN_OR_RETURN(const std::string arch, BackendFor(device).Architecture(device.index));
  if (!arch.empty()) absl::StrAppend(&target, " device=", arch);
  return target;
}

absl::StatusOr<Device> ResolveSessionDevice(const std::string& name) {
  if (name != "auto") return ParseDevice(name);
  // "auto"'s order of preference; the host when none is present.
  for (Device::Kind kind : {Device::Kind::kCuda, Device::Kind::kOpenCL}) {
    if (BackendFor(kind).PreferredForAuto()) return Device{kind, 0};
  }
  return Device{};
}

}  // namespace device
}  // namespace braze
