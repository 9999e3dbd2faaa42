// The Halide boundary; see halide_util.h.
#include "device/halide_util.h"

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

#include <cstdlib>

namespace braze {
namespace device {

// The JIT target: HL_JIT_TARGET or the host, minus features this CPU lacks. Halide 14
// reports AVX512_SapphireRapids for any CPU with AVX512-VNNI and AVX512-BF16 and then
// compiles for LLVM's "sapphirerapids" CPU, which includes AVX512-FP16; AMD Zen 4 has
// the former but not FP16, and the kernels die of SIGILL there. Dropping the feature
// leaves Cannonlake-level AVX-512, which Zen 4 has.
Halide::Target SanitizedJitTarget() {
  Halide::Target target = Halide::get_jit_target_from_environment();
#if defined(__x86_64__) || defined(__i386__)
  if (target.has_feature(Halide::Target::AVX512_SapphireRapids)) {
    unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
    const bool fp16 = __get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx) && (edx & (1u << 23));
    if (!fp16) target = target.without_feature(Halide::Target::AVX512_SapphireRapids);
  }
#endif
  return target;
}

Halide::Type HalideType(DType dtype) {
  switch (dtype) {
    case DType::kF32:
      return Halide::Float(32);
    case DType::kF64:
      return Halide::Float(64);
    case DType::kI32:
      return Halide::Int(32);
    case DType::kBool:
      return Halide::UInt(8);
  }
  return Halide::Float(32);
}

}  // namespace device
}  // namespace braze
