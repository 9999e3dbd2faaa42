// The Halide boundary shared by every layer that touches Halide: the JIT target of the
// host, Braze dtypes as Halide types, and the one place Halide's exceptions stop.
//
// Internal header: includes Halide.h.
#ifndef BRAZE_DEVICE_HALIDE_UTIL_H_
#define BRAZE_DEVICE_HALIDE_UTIL_H_

#include <string>

#include "Halide.h"
#include "absl/status/status.h"
#include "braze/dtype.h"

namespace braze {
namespace device {

// The JIT target of CPU kernels: HL_JIT_TARGET or the host, minus CPU features the host
// lacks (see halide_util.cc). Throws Halide::Error for a bad HL_JIT_TARGET.
Halide::Target SanitizedJitTarget();

// f32 -> Float(32), f64 -> Float(64), i32 -> Int(32), bool -> UInt(8) holding 0/1 (the
// HostTensor layout).
Halide::Type HalideType(DType dtype);

// Runs fn() (returning absl::Status) and turns a Halide error (or any other exception)
// thrown inside it into a Status of `code` whose message starts with `context`. This
// is the one boundary where Halide's exceptions stop.
template <typename Fn>
absl::Status CatchHalideErrors(const std::string& context, absl::StatusCode code, Fn&& fn) {
  auto message = [&](const char* what) {
    std::string m = context + ": " + what;
    while (!m.empty() && (m.back() == '\n' || m.back() == ' ')) m.pop_back();
    return m;
  };
  try {
    return fn();
  } catch (const Halide::Error& e) {
    return absl::Status(code, message(e.what()));
  } catch (const std::exception& e) {
    return absl::Status(code, message(e.what()));
  }
}

}  // namespace device
}  // namespace braze

#endif  // BRAZE_DEVICE_HALIDE_UTIL_H_
