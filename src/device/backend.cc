// BackendFor: the one place that maps a device kind to its backend.
#include "device/backend.h"

namespace braze {
namespace device {

// Each defined in its backend's file.
const Backend& HostBackendInstance();
const Backend& CudaBackendInstance();
const Backend& OpenCLBackendInstance();

const Backend& BackendFor(Device::Kind kind) {
  switch (kind) {
    case Device::Kind::kCpu:
      return HostBackendInstance();
    case Device::Kind::kCuda:
      return CudaBackendInstance();
    case Device::Kind::kOpenCL:
      return OpenCLBackendInstance();
  }
  return HostBackendInstance();
}

}  // namespace device
}  // namespace braze
