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
Expr RoundToBF16(const Expr& f) {
  const Expr bits = Halide::reinterpret(Halide::UInt(32), f);
  const Expr odd = (bits >> 16) & Halide::Internal::make_const(Halide::UInt(32), 1);
  const Expr rounded = (bits + Halide::Internal::make_const(Halide::UInt(32), 0x7fff) + odd) >> 16;
  return Halide::reinterpret(Halide::BFloat(16), Halide::cast(Halide::UInt(16), rounded));
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
  // -0. So a NaN is tested on its bits and made the 16-bit quiet NaN.
  const Expr quiet_nan = Halide::reinterpret(
      type, Halide::Internal::make_const(Halide::UInt(16), to == DType::kBF16 ? 0x7fc0 : 0x7e00));
  auto narrow = [type, quiet_nan](const Expr& x) {
    const Expr f = ToF32(x);
    return Halide::select(IsNanBits(f), quiet_nan,
                          type.is_bfloat() ? RoundToBF16(f) : Halide::cast(type, f));
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

}  // namespace lower
}  // namespace braze
