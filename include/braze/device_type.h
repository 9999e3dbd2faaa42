// The Device type: a device's kind, index and forced-compilation flag, parsed once from
// its name (braze/device.h lists the names) where it enters Braze: a DeviceScope, or
// SessionOptions::device when the session starts. Graph nodes record it (Node::device()).
#ifndef BRAZE_DEVICE_TYPE_H_
#define BRAZE_DEVICE_TYPE_H_

#include <string>

#include "absl/status/statusor.h"

namespace braze {

struct Device {
  enum class Kind { kCpu, kCuda, kOpenCL };
  Kind kind = Kind::kCpu;
  int index = 0;
  bool force_compile = false;    // a "jit:" device
  std::string ToString() const;  // canonical: "cpu", "cuda:0", "jit:cuda:1", "opencl:0"
  bool operator==(const Device& o) const {
    return kind == o.kind && index == o.index && force_compile == o.force_compile;
  }
  bool operator!=(const Device& o) const { return !(*this == o); }
};

// Parses a device string; InvalidArgument naming the string and the accepted forms. An
// index N is decimal digits only, as in TensorFlow's names ("cuda: 1", "cuda:+1" are bad).
absl::StatusOr<Device> ParseDevice(const std::string& name);

}  // namespace braze

#endif  // BRAZE_DEVICE_TYPE_H_
