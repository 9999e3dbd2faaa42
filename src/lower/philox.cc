// Philox-4x32-10 and the random-number transforms as Halide IR (philox.h). Each float
// operation is its own strict_float, so no common-subexpression Let can carry part of
// one out of it (Halide gives a float op outside strict_float LLVM's fast-math flags).
#include "lower/philox.h"

#include <cstdint>

#include "ir/random_transforms.h"

namespace braze {
namespace lower {
namespace {

using Halide::Expr;
using Halide::Internal::make_const;
namespace rt = random_transforms;

constexpr uint32_t kM0 = 0xD2511F53u;  // random.cc's multipliers and key increments
constexpr uint32_t kM1 = 0xCD9E8D57u;
constexpr uint32_t kW0 = 0x9E3779B9u;
constexpr uint32_t kW1 = 0xBB67AE85u;

Expr U32(uint32_t v) { return make_const(Halide::UInt(32), static_cast<uint64_t>(v)); }
Expr U64(uint64_t v) { return make_const(Halide::UInt(64), v); }
Expr F32(const Expr& e) { return Halide::cast(Halide::Float(32), e); }
Expr F64(const Expr& e) { return Halide::cast(Halide::Float(64), e); }
Expr F64(double v) { return make_const(Halide::Float(64), v); }

// One IEEE operation each.
Expr Add(const Expr& a, const Expr& b) { return Halide::strict_float(a + b); }
Expr Sub(const Expr& a, const Expr& b) { return Halide::strict_float(a - b); }
Expr Mul(const Expr& a, const Expr& b) { return Halide::strict_float(a * b); }
Expr Div(const Expr& a, const Expr& b) { return Halide::strict_float(a / b); }

// The product of two f32 values, exact in f64, rounded to f32.
Expr ExactProductToF32(const Expr& a, const Expr& b) { return F32(Mul(F64(a), F64(b))); }
// c + v p for f32 v and p: the product exact in f64, the sum rounded to f64 then to f32.
Expr HornerStep(float c, const Expr& v, const Expr& p) {
  return F32(Add(F64(static_cast<double>(c)), Mul(F64(v), F64(p))));
}
template <int N>
Expr Horner(const float (&coeffs)[N], const Expr& v) {
  Expr p = Expr(coeffs[N - 1]);
  for (int i = N - 2; i >= 0; --i) p = HornerStep(coeffs[i], v, p);
  return p;
}

PhiloxWords Round(const PhiloxWords& c, uint32_t k0, uint32_t k1) {
  // mulhilo32: the high half by Halide's (internal, in v14) mul_shift_right (a widening multiply it keeps
  // whole to code generation: PTX mul.hi.u32, x86 vpmuludq), the low half a wrapping u32
  // multiply. Written as u64 products, the simplifier spread the casts and PTX got
  // 64-bit multiplies of masked operands.
  const Expr hi0 = Halide::Internal::mul_shift_right(c[0], U32(kM0), 32);
  const Expr lo0 = c[0] * U32(kM0);
  const Expr hi1 = Halide::Internal::mul_shift_right(c[2], U32(kM1), 32);
  const Expr lo1 = c[2] * U32(kM1);
  return {hi1 ^ c[1] ^ U32(k0), lo1, hi0 ^ c[3] ^ U32(k1), lo0};
}

// sqrt(-2 ln u1) for u1 = ((x0 >> 1) + 1) 2^-31 (the reference's Radius).
Expr Radius(const Expr& x0) {
  const Expr m = (x0 >> 1) + U32(1);
  // e = floor(log2 m) and m's top 24 bits (truncated) from the bits of m as an f64, where
  // it is exact (m <= 2^31): no count_leading_zeros, which Halide 14's OpenCL C lacks
  // (it calls an undeclared halide_count_leading_zeros), and no variable shift.
  const Expr bits = Halide::reinterpret(Halide::UInt(64), F64(m));
  const Expr e = Halide::cast(Halide::Int(32), bits >> 52) - 1023;
  const Expr mant =
      Halide::cast(Halide::UInt(32), (bits >> 29) & U64(0x7FFFFFu)) | U32(0x800000u);
  const Expr big = mant > U32(rt::kSqrt2Mant);
  const Expr f = Mul(F32(Halide::cast(Halide::Int(32), mant)),
                     Halide::select(big, Expr(0x1p-24f), Expr(0x1p-23f)));
  const Expr k = 31 - e - Halide::select(big, 1, 0);
  const Expr s = F32(Div(Sub(F64(f), F64(1.0)), Add(F64(f), F64(1.0))));
  const Expr w = ExactProductToF32(s, s);
  const Expr p = Horner(rt::kLogCoeffs, w);
  const Expr ln_f = Mul(F64(Mul(s, Expr(2.0f))), F64(p));
  const Expr kd = F64(k);
  const Expr l =
      Add(Sub(Mul(kd, F64(rt::kLn2Hi)), ln_f), Mul(kd, F64(static_cast<double>(rt::kLn2Lo))));
  return F32(Halide::strict_float(Halide::sqrt(Mul(F64(2.0), l))));
}

// cos(2 pi x1 / 2^32) from x1's top 26 bits (the reference's CosTurn).
Expr CosTurn(const Expr& x1) {
  const Expr octant = x1 >> 29;
  const Expr h0 = (x1 >> 6) & U32(0x7FFFFFu);
  const Expr h = Halide::select((octant & U32(1)) != U32(0), U32(0x7FFFFFu) - h0, h0);
  const Expr g = Mul(F32(Halide::cast(Halide::Int(32), h * U32(2) + U32(1))), Expr(0x1p-24f));
  const Expr v = ExactProductToF32(g, g);
  const Expr sin_g = ExactProductToF32(g, Horner(rt::kSinCoeffs, v));
  const Expr cos_g = Horner(rt::kCosCoeffs, v);
  const Expr use_sin = ((octant + U32(1)) & U32(2)) != U32(0);
  const Expr negative = ((octant + U32(2)) & U32(4)) != U32(0);
  const Expr bits = Halide::reinterpret(Halide::UInt(32), Halide::select(use_sin, sin_g, cos_g));
  return Halide::reinterpret(Halide::Float(32),
                             bits ^ Halide::select(negative, U32(0x80000000u), U32(0)));
}

}  // namespace

PhiloxWords Philox4x32_10(const PhiloxWords& counter, const PhiloxKey& key) {
  PhiloxWords c = counter;
  uint32_t k0 = key[0];
  uint32_t k1 = key[1];
  for (int r = 0; r < 10; ++r) {
    if (r > 0) {
      k0 += kW0;
      k1 += kW1;
    }
    c = Round(c, k0, k1);
  }
  return c;
}

PhiloxWords PhiloxBlock(const PhiloxKey& key, const Expr& index, const Expr& step) {
  const Expr s = Halide::cast(Halide::Int(32), step);
  return Philox4x32_10(
      {Halide::cast(Halide::UInt(32), index), U32(0), Halide::reinterpret(Halide::UInt(32), s),
       Halide::reinterpret(Halide::UInt(32), s >> 31)},
      key);
}

Expr PhiloxToUniformF32(const PhiloxWords& x) {
  return Mul(F32(Halide::cast(Halide::Int(32), x[0] >> 8)), Expr(0x1p-24f));
}

Expr PhiloxToUniformF64(const PhiloxWords& x) {
  const Expr bits =
      (Halide::cast(Halide::UInt(64), x[0]) << 21) | Halide::cast(Halide::UInt(64), x[1] >> 11);
  return Mul(F64(Halide::cast(Halide::Int(64), bits)), F64(0x1p-53));
}

Expr PhiloxToNormalF32(const PhiloxWords& x) {
  return ExactProductToF32(Radius(x[0]), CosTurn(x[1]));
}

Expr PhiloxUniform(const PhiloxKey& key, const Expr& index, const Expr& step) {
  return PhiloxToUniformF32(PhiloxBlock(key, index, step));
}

Expr PhiloxNormal(const PhiloxKey& key, const Expr& index, const Expr& step) {
  return PhiloxToNormalF32(PhiloxBlock(key, index, step));
}

}  // namespace lower
}  // namespace braze
