// BackendFor: the one place that maps a device kind to its backend, and the
// Halide-free questions of device/features.h, each answered by the device's backend.
#include "device/backend.h"

#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
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
  BRAZE_ASSIGN_OR_RETURN(const std::string jit, JitTargetString(device));
  BRAZE_ASSIGN_OR_RETURN(const std::string arch, BackendFor(device).Architecture(device.index));
  if (arch.empty()) return jit;  // the host: its CPU features are what the entry is for
  // A GPU's entry holds for the GPU, whatever the host's CPU features: the target's
  // arch-bits-os and its GPU features ("x86-64-linux-cuda-cuda_capability_86"), then the
  // device's architecture.
  std::vector<std::string> kept;
  for (absl::string_view token : absl::StrSplit(jit, '-')) {
    if (kept.size() < 3 || absl::StartsWith(token, "cuda") || absl::StartsWith(token, "opencl") ||
        absl::StartsWith(token, "cl_")) {
      kept.emplace_back(token);
    }
  }
  return absl::StrCat(absl::StrJoin(kept, "-"), " device=", arch);
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
