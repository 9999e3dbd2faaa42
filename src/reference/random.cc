// Reference kernels of RandomUniform and RandomNormal (docs/RANDOM.md).
//
// The transforms from Philox words to numbers are written so that every compiled kernel
// (src/lower/philox.cc builds the same operations as Halide IR) gives these bits on every
// device: integer operations, and float operations each of which is IEEE's correctly
// rounded one in any evaluation. Every float value that is multiplied is an f32, and its
// products are taken in f64, where they are exact: a back end that fuses a multiply into
// the add after it (PTX and OpenCL C do, whatever strict_float says) computes the same
// sum. This file is compiled with -ffp-contract=off all the same (CMakeLists.txt).
#include "braze/random.h"

#include <cmath>
#include <cstdint>
#include <cstring>

#include "ir/random_transforms.h"
#include "reference/kernel_util.h"

namespace braze {
namespace reference_internal {
namespace {

using namespace random_transforms;  // NOLINT: the shared constants

// One Horner step: c + v * p, the product exact in f64, the sum rounded to f64 and then
// to f32 (as the compiled kernels do, fused or not).
float HornerStep(float c, float v, float p) {
  return static_cast<float>(static_cast<double>(c) + static_cast<double>(v) * p);
}
float ExactProductToF32(float a, float b) {
  return static_cast<float>(static_cast<double>(a) * static_cast<double>(b));
}

int CountLeadingZeros(uint32_t x) {
  int n = 0;
  for (uint32_t bit = 0x80000000u; bit != 0 && (x & bit) == 0; bit >>= 1) ++n;
  return n;
}

float FlipSign(float x, bool flip) {
  uint32_t bits;
  std::memcpy(&bits, &x, sizeof(bits));
  bits ^= flip ? 0x80000000u : 0u;
  std::memcpy(&x, &bits, sizeof(bits));
  return x;
}

// sqrt(-2 ln u1) for u1 = ((x0 >> 1) + 1) / 2^31, in (0, 1].
float Radius(uint32_t x0) {
  const uint32_t m = (x0 >> 1) + 1;  // [1, 2^31]
  const int e = 31 - CountLeadingZeros(m);
  // The top 24 bits of m (truncated), so u1 = f 2^(e - 31) with f = mant 2^-23 in [1, 2);
  // f in [sqrt(2), 2) is halved so that ln f is small and L below keeps its precision.
  const uint32_t mant = e >= 23 ? m >> (e - 23) : m << (23 - e);
  const bool big = mant > kSqrt2Mant;
  const float f = static_cast<float>(static_cast<int32_t>(mant)) * (big ? 0x1p-24f : 0x1p-23f);
  const int k = 31 - e - (big ? 1 : 0);  // -ln u1 = k ln 2 - ln f, 0 <= k <= 31
  // ln f = 2 atanh(s), s = (f - 1) / (f + 1), |s| <= 0.1716: both sums exact in f64.
  const float s =
      static_cast<float>((static_cast<double>(f) - 1.0) / (static_cast<double>(f) + 1.0));
  const float w = ExactProductToF32(s, s);
  float p = kLogCoeffs[kLogTerms - 1];
  for (int i = kLogTerms - 2; i >= 0; --i) p = HornerStep(kLogCoeffs[i], w, p);
  const double ln_f = static_cast<double>(2.0f * s) * static_cast<double>(p);
  const double kd = static_cast<double>(k);
  const double l = (kd * kLn2Hi - ln_f) + kd * static_cast<double>(kLn2Lo);
  return static_cast<float>(std::sqrt(2.0 * l));
}

// cos(2 pi t) for the turn t = x1 / 2^32, from its top 26 bits: the octant (3 bits) and
// the position in it (23 bits), reflected in odd octants; g in (0, 1) exactly.
float CosTurn(uint32_t x1) {
  const uint32_t octant = x1 >> 29;
  uint32_t h = (x1 >> 6) & 0x7FFFFFu;
  if ((octant & 1) != 0) h = 0x7FFFFFu - h;
  const float g = static_cast<float>(static_cast<int32_t>(2 * h + 1)) * 0x1p-24f;
  const float v = ExactProductToF32(g, g);
  float sp = kSinCoeffs[kSinTerms - 1];
  for (int i = kSinTerms - 2; i >= 0; --i) sp = HornerStep(kSinCoeffs[i], v, sp);
  const float sin_g = ExactProductToF32(g, sp);
  float cp = kCosCoeffs[kCosTerms - 1];
  for (int i = kCosTerms - 2; i >= 0; --i) cp = HornerStep(kCosCoeffs[i], v, cp);
  const bool use_sin = ((octant + 1) & 2) != 0;
  const bool negative = ((octant + 2) & 4) != 0;
  return FlipSign(use_sin ? sin_g : cp, negative);
}

}  // namespace

float PhiloxToUniformF32(const PhiloxCounter& x) {
  return static_cast<float>(static_cast<int32_t>(x[0] >> 8)) * 0x1p-24f;
}
double PhiloxToUniformF64(const PhiloxCounter& x) {
  const int64_t bits = static_cast<int64_t>((static_cast<uint64_t>(x[0]) << 21) | (x[1] >> 11));
  return static_cast<double>(bits) * 0x1p-53;
}
float PhiloxToNormalF32(const PhiloxCounter& x) {
  return ExactProductToF32(Radius(x[0]), CosTurn(x[1]));
}

Kernel RunRandom(const Node& node, const RandomAttrs& attrs, const HostTensor& step,
                 const TensorType& out_type) {
  const OpKind op = node.op();
  if (step.dtype() != DType::kI32 || step.num_elements() != 1) {
    return absl::InvalidArgumentError(absl::StrCat(node.op_name(), " '", node.name(),
                                                   "': step must be an i32 scalar, got ",
                                                   TypeString(step.type())));
  }
  const bool f64 = out_type.dtype == DType::kF64;
  if (!(out_type.dtype == DType::kF32 || (f64 && op == OpKind::kRandomUniform))) {
    return absl::InvalidArgumentError(absl::StrCat(
        node.op_name(), " '", node.name(), "' does not support dtype ", DTypeName(out_type.dtype)));
  }
  const uint64_t step64 = static_cast<uint64_t>(static_cast<int64_t>(step.data<int32_t>()[0]));
  const PhiloxKey key = RandomKey(attrs.seed, attrs.op_key.value_or(RandomOpKeyOf(node.name())));
  HostTensor out(out_type.dtype, out_type.shape);
  const int64_t n = out.num_elements();
  for (int64_t i = 0; i < n; ++i) {
    const uint64_t index = static_cast<uint64_t>(i);
    const PhiloxCounter bits =
        Philox4x32_10({static_cast<uint32_t>(index), static_cast<uint32_t>(index >> 32),
                       static_cast<uint32_t>(step64), static_cast<uint32_t>(step64 >> 32)},
                      key);
    if (op == OpKind::kRandomNormal) {
      out.data<float>()[i] = PhiloxToNormalF32(bits);
    } else if (f64) {
      out.data<double>()[i] = PhiloxToUniformF64(bits);
    } else {
      out.data<float>()[i] = PhiloxToUniformF32(bits);
    }
  }
  return std::vector<HostTensor>{std::move(out)};
}

}  // namespace reference_internal
}  // namespace braze
