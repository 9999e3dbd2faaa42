// Device names: parsed once, when an op is placed (braze/device.h).
#include "braze/device.h"

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace braze {

std::string Device::ToString() const {
  std::string base = kind == Kind::kCpu    ? "cpu"
                     : kind == Kind::kCuda ? absl::StrCat("cuda:", index)
                                           : absl::StrCat("opencl:", index);
  return force_compile ? absl::StrCat("jit:", base) : base;
}

absl::StatusOr<Device> ParseDevice(const std::string& name) {
  auto bad = [&]() {
    return absl::InvalidArgumentError(absl::StrCat(
        "bad device \"", name,
        "\": expected cpu, cuda, cuda:N, opencl, opencl:N, or one of them after jit:"));
  };
  Device d;
  std::string rest = name;
  if (rest.rfind("jit:", 0) == 0) {
    d.force_compile = true;
    rest = rest.substr(4);
  }
  std::vector<std::string> parts = absl::StrSplit(rest, ':');
  if (parts.empty() || parts.size() > 2) return bad();
  if (parts[0] == "cpu") {
    if (parts.size() == 2 && parts[1] != "0") return bad();
    d.kind = Device::Kind::kCpu;
  } else if (parts[0] == "cuda" || parts[0] == "opencl") {
    d.kind = parts[0] == "cuda" ? Device::Kind::kCuda : Device::Kind::kOpenCL;
    if (parts.size() == 2 && (!absl::SimpleAtoi(parts[1], &d.index) || d.index < 0)) {
      return bad();
    }
  } else {
    return bad();
  }
  return d;
}

bool IsJitDevice(const std::string& device) { return device.rfind("jit:", 0) == 0; }

}  // namespace braze
