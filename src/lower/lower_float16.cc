// bf16 and f16 in the lowering (docs/MIXED_PRECISION.md): an op that reads or writes a
// 16-bit float is lowered as its f32 version over exactly widened inputs, and its result
// is rounded once to the 16-bit type where it is read. So compiled code rounds exactly
// where the reference kernels do, sums and matmuls accumulate in f32 (or wider), and
// every op lowering keeps speaking f32 and f64 only.
//
// Halide 14 on x86 has no bf16 arithmetic (and f16 only with AVX512-FP16): it emulates
// 16-bit math by widening each op to f32 anyway (its EmulateFloat16Math pass), so the
// widening here costs nothing Halide would not have spent, and it makes the rounding
// points ours rather than Halide's. What stays 16-bit is what moves through memory:
// cluster inputs and outputs, Consts, and any stage a schedule stores.
#include "lower/lower_float16.h"

#include <cstdint>

namespace braze {
namespace lower {

using Halide::Expr;

namespace {

// bf16 -> f32 is the 16 bits shifted up; f16 -> f32 Halide's cast. On the bits: LLVM 14's
// NVPTX backend cannot select bf16 conversions.
Expr ToF32(const Expr& x) {
  if (!x.type().is_bfloat()) return Halide::cast(Halide::Float(32), x);
  const Expr bits = Halide::cast(Halide::UInt(32), Halide::reinterpret(Halide::UInt(16), x));
  return Halide::reinterpret(Halide::Float(32), bits << 16);
}

// A finite or infinite f32 rounded to bf16, to nearest even, on the bits: add half an ulp
// of the result less one, plus the kept part's lowest bit (ties go to even), and keep the
// top 16 bits; a carry into the exponent gives the next binade or infinity, as it must.
// NaN is the caller's (its payload could carry into the sign). The same integer
// formula as Halide's own CPU emulation, here so that every target gets it.
Expr RoundBitsToBF16(const Expr& bits) {
  const Expr odd = (bits >> 16) & Halide::Internal::make_const(bits.type(), 1);
  return (bits + Halide::Internal::make_const(bits.type(), 0x7fff) + odd) >> 16;
}

// `f` rounded to bf16, as its UInt(16) bits.
Expr RoundToBF16Bits(const Expr& f) {
  return Halide::cast(Halide::UInt(16), RoundBitsToBF16(Halide::reinterpret(Halide::UInt(32), f)));
}

// A u32 constant with `like`'s lanes.
Expr U32(const Expr& like, uint32_t v) {
  return Halide::Internal::make_const(Halide::UInt(32, like.type().lanes()), v);
}

}  // namespace

bool Computes16BitFloats(OpKind op, const std::vector<Value>& in, const TensorType& out) {
  // A Const is stored as it is given; the other ops that never compute (Placeholder and
  // the rest of the kNotCompiled ops) never reach the lowering.
  if (op == OpKind::kConst) return false;
  if (Is16BitFloat(out.dtype)) return true;
  for (const Value& v : in) {
    if (Is16BitFloat(v.dtype)) return true;
  }
  return false;
}

Value Widen(const Value& v) {
  if (!Is16BitFloat(v.dtype)) return v;
  Value w;
  w.dtype = DType::kF32;
  w.shape = v.shape;
  w.sym = v.sym;
  w.nonnegative = v.nonnegative;
  if (v.constant.defined()) {
    w.constant = ToF32(v.constant);
  } else {
    w.inline_body = [src = v](const std::vector<Expr>& index) { return ToF32(At(src, index)); };
  }
  return w;
}

Value Narrow(const Value& v, DType to) {
  if (v.dtype == to || !Is16BitFloat(to)) return v;
  Value n;
  n.dtype = to;
  n.shape = v.shape;
  n.sym = v.sym;
  n.nonnegative = v.nonnegative;
  const Halide::Type type = HalideType(to);
  // Through f32 (an f64 or i32 result rounds to f32 first), as the reference does.
  // Halide 14's narrowing drops a NaN's payload bits below the 16-bit mantissa (and its
  // bf16 rounding carries into the exponent and sign): an f32 NaN came out infinity or
  // -0. So a NaN is tested on its bits and made the 16-bit quiet NaN of its sign (the
  // reference's, as Eigen's conversions: the sign was dropped, -NaN came out +NaN).
  const Expr quiet_nan_bits =
      Halide::Internal::make_const(Halide::UInt(16), to == DType::kBF16 ? 0x7fc0 : 0x7e00);
  // bf16 selects on the bits: Halide 14's bf16 is an LLVM i16 either way, and a u16 NaN
  // is no float constant for the non-finite constants' repair to make a kernel argument
  // (compile/codegen_workarounds.h; docs/CUDA.md, "Non-finite constants in device code").
  auto narrow = [type, quiet_nan_bits](const Expr& x) {
    const Expr f = ToF32(x);
    const Expr sign =
        Halide::cast(Halide::UInt(16), (Halide::reinterpret(Halide::UInt(32), f) >> 16) & 0x8000);
    const Expr nan_bits = quiet_nan_bits | sign;
    if (type.is_bfloat()) {
      return Halide::reinterpret(type, Halide::select(IsNanBits(f), nan_bits, RoundToBF16Bits(f)));
    }
    return Halide::select(IsNanBits(f), Halide::reinterpret(type, nan_bits), Halide::cast(type, f));
  };
  if (v.constant.defined()) {
    n.constant = narrow(v.constant);
  } else {
    n.inline_body = [src = v, narrow](const std::vector<Expr>& index) {
      return narrow(At(src, index));
    };
  }
  return n;
}

Expr BF16BitsToF32(const Expr& bits) {
  const int lanes = bits.type().lanes();
  const Expr w = Halide::cast(Halide::UInt(32, lanes), bits);
  return Halide::reinterpret(Halide::Float(32, lanes), w << U32(w, 16));
}

// Normal f16 values move their exponent (bias 15 to 127: + 112) and mantissa into
// place; infinities and NaN (exponent 31) keep their mantissa (a NaN stays a NaN);
// zeros and subnormals are m * 2^-24, exact in f32.
Expr F16BitsToF32(const Expr& bits) {
  const int lanes = bits.type().lanes();
  const Expr w = Halide::cast(Halide::UInt(32, lanes), bits);
  const Expr sign = (w & U32(w, 0x8000)) << U32(w, 16);
  const Expr e = (w >> U32(w, 10)) & U32(w, 0x1f);
  const Expr m = w & U32(w, 0x3ff);
  const Expr normal = ((e + U32(w, 112)) << U32(w, 23)) | (m << U32(w, 13));
  const Expr special = U32(w, 0x7f800000) | (m << U32(w, 13));
  const Expr sub = Halide::reinterpret(
      Halide::UInt(32, lanes), Halide::cast(Halide::Float(32, lanes), m) *
                                   Halide::Internal::make_const(Halide::Float(32, lanes), 0x1p-24));
  return Halide::reinterpret(
      Halide::Float(32, lanes),
      Halide::select(e == U32(w, 0), sub, e == U32(w, 31), special, normal) | sign);
}

Expr F32ToBF16Bits(const Expr& f) {
  const int lanes = f.type().lanes();
  const Expr u = Halide::reinterpret(Halide::UInt(32, lanes), f);
  const Expr nan = ((u >> U32(u, 16)) & U32(u, 0x8000)) | U32(u, 0x7fc0);
  return Halide::cast(
      Halide::UInt(16, lanes),
      Halide::select((u & U32(u, 0x7fffffff)) > U32(u, 0x7f800000), nan, RoundBitsToBF16(u)));
}

// |f| from 2^-14 (f16's smallest normal) up: the exponent rebased (127 to 15) and the
// mantissa rounded as bf16's is; from 65520 (halfway past the largest finite f16, a tie
// that rounds to even) up: infinity. Below 2^-14 the f16 subnormal is |f| / 2^-24
// rounded to an integer: the f32 significand (implicit bit included) shifted right by
// 126 - exponent (at most 31: an f32 that small rounds to 0), to nearest, ties to even.
Expr F32ToF16Bits(const Expr& f) {
  const int lanes = f.type().lanes();
  const Expr u = Halide::reinterpret(Halide::UInt(32, lanes), f);
  const Expr sign = (u >> U32(u, 16)) & U32(u, 0x8000);
  const Expr a = u & U32(u, 0x7fffffff);
  const Expr rebased = a - U32(u, 0x38000000);
  const Expr normal =
      (rebased + U32(u, 0xfff) + ((rebased >> U32(u, 13)) & U32(u, 1))) >> U32(u, 13);
  const Expr shift = Halide::min(U32(u, 126) - (a >> U32(u, 23)), U32(u, 31));
  const Expr m = (a & U32(u, 0x7fffff)) | U32(u, 0x800000);
  const Expr q = m >> shift;
  const Expr rem = m & ((U32(u, 1) << shift) - U32(u, 1));
  const Expr half = U32(u, 1) << (shift - U32(u, 1));
  const Expr up = rem > half || (rem == half && (q & U32(u, 1)) == U32(u, 1));
  const Expr sub = q + Halide::select(up, U32(u, 1), U32(u, 0));
  const Expr magnitude =
      Halide::select(a > U32(u, 0x7f800000), U32(u, 0x7e00), a >= U32(u, 0x477ff000),
                     U32(u, 0x7c00), a < U32(u, 0x38800000), sub, normal);
  return Halide::cast(Halide::UInt(16, lanes), magnitude | sign);
}

}  // namespace lower
}  // namespace braze
