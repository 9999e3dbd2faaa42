// Device names: parsed once, where a device enters Braze (braze/device_type.h).
#include <algorithm>
#include <iterator>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "braze/device_type.h"

namespace braze {

namespace {

// Every kind, in the order the parse error lists them. A new kind goes here and in
// KindName (which the build checks).
constexpr Device::Kind kKinds[] = {Device::Kind::kCpu, Device::Kind::kCuda, Device::Kind::kOpenCL};

// A kind's name in device strings. No default: a new kind without a name fails to
// compile (-Werror=switch).
const char* KindName(Device::Kind kind) {
  switch (kind) {
    case Device::Kind::kCpu:
      return "cpu";
    case Device::Kind::kCuda:
      return "cuda";
    case Device::Kind::kOpenCL:
      return "opencl";
  }
  return "?";
}

// An index as TensorFlow's device names write it: decimal digits only. SimpleAtoi alone
// also took " 1", "+1" and "1 " (it skips whitespace and reads a sign).
bool AllDigits(absl::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

}  // namespace

std::string Device::ToString() const {
  // The host has one device, "cpu" (never "cpu:0").
  std::string base = kind == Kind::kCpu ? KindName(kind) : absl::StrCat(KindName(kind), ":", index);
  return force_compile ? absl::StrCat("jit:", base) : base;
}

absl::StatusOr<Device> ParseDevice(const std::string& name) {
  auto bad = [&]() {
    std::string forms = KindName(Device::Kind::kCpu);
    for (Device::Kind kind : kKinds) {
      if (kind == Device::Kind::kCpu) continue;  // the host has one device: no ":N"
      absl::StrAppend(&forms, ", ", KindName(kind), ", ", KindName(kind), ":N");
    }
    return absl::InvalidArgumentError(
        absl::StrCat("bad device \"", name, "\": expected ", forms, ", or one of them after jit:"));
  };
  Device d;
  std::string rest = name;
  if (rest.rfind("jit:", 0) == 0) {
    d.force_compile = true;
    rest = rest.substr(4);
  }
  std::vector<std::string> parts = absl::StrSplit(rest, ':');
  if (parts.empty() || parts.size() > 2) return bad();
  const Device::Kind* kind = std::find_if(std::begin(kKinds), std::end(kKinds),
                                          [&](Device::Kind k) { return parts[0] == KindName(k); });
  if (kind == std::end(kKinds)) return bad();
  d.kind = *kind;
  if (d.kind == Device::Kind::kCpu) {
    if (parts.size() == 2 && parts[1] != "0") return bad();
  } else if (parts.size() == 2 && (!AllDigits(parts[1]) || !absl::SimpleAtoi(parts[1], &d.index))) {
    return bad();
  }
  return d;
}

}  // namespace braze
