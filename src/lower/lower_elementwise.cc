// Lowering of elementwise ops: unary math, Cast, broadcasting binary ops and Select.
//
// Semantics follow the reference kernels (src/reference/elementwise.cc): Maximum,
// Minimum, Relu and Sign propagate NaN; i32 Add, Sub, Mul, Neg and Square wrap (two's
// complement); i32 Div is floor division with x / 0 = 0; Cast
// from floating to i32 truncates, saturates and maps NaN to 0. Halide compiles with
// LLVM fast-math flags (no-NaNs among them), so NaN checks test bits (IsNanBits) or are
// strict.
#include <cmath>
#include <cstdint>
#include <limits>

#include "lower/lower_ops.h"
#include "lower/lowering.h"

namespace braze {
namespace lower {
namespace {

using Halide::Expr;

Expr Const(DType dtype, double v) { return TypedConst(dtype, v); }

// f(v) where `value` is f's formula for finite v, and NaN and +-inf take their IEEE
// results (NaN propagates). Halide's exp, log and erf and Braze's clamped tanh and
// sigmoid are polynomials that LLVM's fast-math (no NaNs, no infinities) compiles
// without regard for those inputs: Exp(inf) came out 0, Log(NaN) 89.1, Tanh(NaN) 1.
// The tests read the bits with integer ops, which no fast-math flag can fold away.
Expr WithSpecials(const Expr& v, const Expr& value, double at_inf, double at_neg_inf) {
  const bool f64 = v.type().bits() == 64;
  const Halide::Type bits_type = f64 ? Halide::UInt(64) : Halide::UInt(32);
  const Expr bits = Halide::reinterpret(bits_type, v);
  const Expr inf_bits =
      Halide::Internal::make_const(bits_type, f64 ? uint64_t{0x7ff0000000000000} : 0x7f800000);
  const Expr sign_bit =
      Halide::Internal::make_const(bits_type, f64 ? uint64_t{0x8000000000000000} : 0x80000000);
  const Halide::Type t = v.type();
  return Halide::select(IsNanBits(v), v, bits == inf_bits, Halide::Internal::make_const(t, at_inf),
                        bits == (inf_bits | sign_bit), Halide::Internal::make_const(t, at_neg_inf),
                        value);
}

// `cmp`, a comparison of `operand`'s type, under strict_float when that is floating.
Expr Strict(const Expr& cmp, const Expr& operand) {
  return operand.type().is_float() ? Halide::strict_float(cmp) : cmp;
}

// tanh(x) = 1 - 2 / (exp(2x) + 1): Halide 14's tanh is ~17x slower (docs/HALIDE14.md rule 6).
// Near 0 that form cancels (relative error ~eps/|x|: 34 ulp at 0.044 with a cutoff at
// 0.04, found by a black-box test), so |x| < 0.625 uses Cephes' tanh there: a degree-4
// polynomial in x^2 for f32, a rational P(x^2)/Q(x^2) for f64, each within 1 ulp of
// tanhl over [0, 0.625] (checked on a geometric sweep); above 0.625 the form is within
// 1 ulp too.
//
// The exp argument is clamped to |x| <= 20, where tanh is +-1 to within both types'
// precision: an exp that overflows to inf inside LLVM's fast-math (which assumes no
// infinities) turned Gelu(1e5) into 0 instead of 1e5 (braze-fuzz seed 2147).
//
// The form is evaluated at |x| and the sign put back: for x < 0, 1 - 2 / (e + 1) is a
// difference of two numbers near 1 and 2, and came out exactly -1 wherever tanh(x)
// rounds to -0.99999994 (x in -9 .. -8.3 in f32); then Gelu's 1 + tanh(...) was 0, not
// 6e-8, and the gradient of Sqrt(Abs(Gelu(x))) NaN, not finite (braze-fuzz seed 901243).
Expr TanhViaExp(const Expr& x, DType dtype) {
  auto c = [&](double v) { return Const(dtype, v); };
  const Expr ax = Halide::abs(x);
  const Expr e = Halide::exp(Halide::min(ax, c(20)) * c(2));
  const Expr big = c(1) - c(2) / (e + c(1));
  const Expr z = x * x;
  Expr small;  // x + x * z * R(z)
  if (dtype == DType::kF64) {
    const Expr p = (c(-9.64399179425052238628e-1) * z + c(-9.92877231001918586564e1)) * z +
                   c(-1.61468768441708447952e3);
    const Expr q = ((z + c(1.12811678491632931402e2)) * z + c(2.23548839060100448583e3)) * z +
                   c(4.84406305325125486048e3);
    small = x + x * (z * p / q);
  } else {
    Expr p = c(-5.70498872745e-3);
    for (double k : {2.06390887954e-2, -5.37397155531e-2, 1.33314422036e-1, -3.33332819422e-1}) {
      p = p * z + c(k);
    }
    small = x + x * (z * p);
  }
  // Zeros are returned as they are: fast math's no-signed-zeros flag may make -0 + -0 +0.
  const Halide::Type bits = Halide::UInt(dtype == DType::kF64 ? 64 : 32);
  const Expr zero = (Halide::reinterpret(bits, x) << 1) == Halide::Internal::make_zero(bits);
  return Halide::select(zero, x, ax < c(0.625), small, Halide::select(x < c(0), -big, big));
}

// PTX's approximate 2^x and division, as the NVVM intrinsics of those names: Halide 14
// declares a PureExtern call by its name, and LLVM treats a function named llvm.* as
// the intrinsic. ex2.approx.f32 is within 2^-22.5 relative (1.4 to 2.8 ulp on
// [0.7, 1.42]); div.approx.f32 (a times the approximate reciprocal of b) within 2 ulp
// for |b| in [2^-126, 2^126]. Without `ftz`, subnormal operands and results are kept,
// which costs ptxas a range fix-up around each MUFU operation; with it, they are
// flushed to 0: only for callers whose operands and results cannot be subnormal where
// it matters (TanhCudaF32). CUDA targets only: no other backend knows them (calls
// Halide computes on the host get host forms: codegen_workarounds.h). IEEE's
// div.rn.f32, what a plain f32 division becomes there, is a subroutine of about ten
// instructions with a slow-path branch.
Expr CudaEx2(const Expr& x, bool ftz = false) {
  return Halide::Internal::Call::make(Halide::Float(32), ftz ? kNvvmEx2Ftz : kNvvmEx2, {x},
                                      Halide::Internal::Call::PureExtern);
}
Expr CudaDiv(const Expr& a, const Expr& b, bool ftz = false) {
  return Halide::Internal::Call::make(Halide::Float(32), ftz ? kNvvmDivFtz : kNvvmDiv, {a, b},
                                      Halide::Internal::Call::PureExtern);
}

// fma(a, b, c) rounded once: LLVM's intrinsic, called by name like the NVVM ones (PTX
// fma.rn.f32; on the host, the FMA instruction or libm's fmaf). Exact products' errors
// need it: Halide 14 has no fma of its own.
Expr FmaF32(const Expr& a, const Expr& b, const Expr& c) {
  return Halide::Internal::Call::make(Halide::Float(32), kLlvmFmaF32, {a, b, c},
                                      Halide::Internal::Call::PureExtern);
}

// x's bits with the sign bit cleared, as an f32: |x| in one integer op. Halide's f32 abs
// on PTX is a compare and a select, which makes -0 of -0.
Expr AbsF32(const Expr& bits) { return Halide::reinterpret(Halide::Float(32), AbsBits(bits)); }

// The CUDA forms of f32 Tanh and Sigmoid below are IEEE arithmetic under strict_float,
// so NaN and the infinities flow through the formulas to their right results, the way
// Triton's code gets them: LLVM sees no fast-math flag on these operations and cannot
// assume them away. They were bit tests and integer clamps before (a select per special
// value); the bit tests were what made Chain8 compute-bound on the integer pipe.
//
// What remains is harmless here: Halide's PTX target keeps AllowFPOpFusion=Fast
// (products and sums still become fma.rn.f32, more accurate); its NoNaNs/NoInfs options
// never reach instruction selection (docs/CUDA.md); and Halide's own != is the ordered
// compare, so the forms compare only where NaN takes the branch that propagates it
// (a < b is false for NaN).

// exp(x) for f32 on CUDA: PTX's ex2.approx of p = x log2(e) rounded, corrected by the
// product's exact error t (two fmas: x log2(e) - p, plus x times the f32 log2(e)'s own
// error): 2^(p + t) = 2^p (1 + t ln 2) to 2^-40, since |t| < 2^-16. Without t the error
// would grow with |x| (58 ulp at x = -80: CUDA's __expf); with it, it is ex2.approx's
// own, about 2 ulp over the whole range. ex2.approx without .ftz keeps subnormal
// results. Where p is infinite (x infinite, or |x| > 2.3e38) t is NaN: min(t, 1), which
// returns 1 for NaN on every back end (PTX's min.f32, or a compare and select), keeps
// it out of 2^p's 0 or inf. NaN x gives NaN from ex2 itself.
Expr ExpCudaF32(const Expr& x) {
  const float log2e = 1.44269504088896341f;
  const float log2e_lo = 1.925963033e-8f;  // log2(e) - log2e, to f32 precision
  const Expr p = x * log2e;
  const Expr t = FmaF32(x, log2e_lo, FmaF32(x, log2e, -p));
  const Expr y = CudaEx2(p);
  return FmaF32(y, Halide::min(t, 1.0f) * 0.693147180559945309f, y);
}

// f32 tanh on CUDA, as the CPU's form computes it (TanhViaExp) on |x|, with the sign
// put back last: a degree-4 polynomial in x^2 below 0.625, else 1 - 2 / (exp(2|x|) + 1)
// with PTX's approximate exp2 and division. The exp's relative error d moves the result
// by at most 2d / e, and d grows only linearly in |x| while 1 / e falls exponentially:
// about 3 ulp at 0.625, the worst point. Special values need no test: +-inf give
// e = inf and 1 - 2/inf = 1; NaN fails |x| < 0.625 and propagates through the exp; zeros
// and subnormals go through the polynomial (|x| + |x| * x^2 P(x^2) is |x| there), and the
// sign is or'ed in from x's bits, so -0 stays -0.
Expr TanhCudaF32(const Expr& x) {
  const Expr bits = Halide::reinterpret(Halide::UInt(32), x);
  const Expr ax = AbsF32(bits);
  const Expr z = ax * ax;
  Expr p = -5.70498872745e-3f;
  for (float k : {2.06390887954e-2f, -5.37397155531e-2f, 1.33314422036e-1f, -3.33332819422e-1f}) {
    p = p * z + k;
  }
  const Expr small = ax + ax * (z * p);
  // Flushing subnormals changes nothing here: e >= 1 (a subnormal |x| would give 1
  // either way, and takes the polynomial), and 2 / (e + 1) is subnormal only for
  // |x| > 30, where 1 - it rounds to 1 either way.
  const Expr e = CudaEx2(ax * 2.88539008177792681f, /*ftz=*/true);  // 2 log2(e)
  const Expr big = 1.0f - CudaDiv(2.0f, e + 1.0f, /*ftz=*/true);
  const Expr magnitude = Halide::select(ax < 0.625f, small, big);  // >= 0, or NaN
  const Expr sign = bits & Halide::Expr(0x80000000u);
  return Halide::strict_float(Halide::reinterpret(
      Halide::Float(32), Halide::reinterpret(Halide::UInt(32), magnitude) | sign));
}

// f32 sigmoid on CUDA: e = exp(-|v|), then e / (1 + e) below 0 and 1 / (1 + e) above,
// with PTX's approximate division (1 + e is in [1, 2]). The infinities give e = 0 and
// then 0 and 1 from the formula itself; NaN propagates (v < 0 is false, 1 + e is NaN).
Expr SigmoidCudaF32(const Expr& v) {
  const Expr e = ExpCudaF32(-AbsF32(Halide::reinterpret(Halide::UInt(32), v)));
  const Expr num = Halide::select(v < 0.0f, e, 1.0f);
  return Halide::strict_float(CudaDiv(num, 1.0f + e));
}

Expr Erf(const Expr& x, DType dtype, bool cuda) {
  // Halide's erf is f32-only ("accurate up to the last three bits"); f64 calls libm's
  // erf, which the JIT resolves from the process, OpenCL C's builtin erf, or on CUDA
  // libdevice's __nv_erf (a call to "erf" left PTX with an unresolved extern, which the
  // driver refused: CUDA_ERROR_INVALID_PTX on an H200). Halide's came out NaN for |x| from
  // about 1.4e11 (its polynomial overflows); erf(+-6) is +-1 in f32, so the argument is
  // clamped there.
  // Halide's f32 erf is +0 at -0: zeros are returned as they are (erf(-0) = -0).
  if (dtype == DType::kF32) {
    const Expr zero = (Halide::reinterpret(Halide::UInt(32), x) << 1) == Halide::Expr(0u);
    return Halide::select(zero, x, Halide::erf(Halide::clamp(x, -6.0f, 6.0f)));
  }
  return Halide::Internal::Call::make(Halide::Float(64), cuda ? "__nv_erf" : "erf", {x},
                                      Halide::Internal::Call::PureExtern);
}

// exp for f32 on the CPU: Cody-Waite reduction to |r| <= ln2 / 2 around the nearest
// k = round(x / ln 2), Cephes' degree-5 minimax polynomial there (within 1 ulp of
// std::exp over the range: FloatMathTest), times 2^k applied in two steps so that
// results below FLT_MIN come out subnormal and rounded once, as libm's do (Halide's exp
// flushes them to 0: Log(Exp(-100)) was -inf, not -100). x is clamped to [-104,
// 88.7228317], where exp is 0 (below denorm_min / 2) and FLT_MAX; above it is inf (one
// integer compare); NaN is the caller's (one bit test).
//
// As fast as Halide's exp in a softmax (timed side by side): k is rounded by adding
// 1.5 * 2^23, whose low bits then hold k, with no floor and no float-to-int conversion,
// and the polynomial is two degrees shorter. The reduction is strict: Halide's
// simplifier treats floats as reals and would fold the two parts of ln 2 into one. The
// polynomial is left to fast math, so LLVM fuses it into FMAs.
Expr ExpF32(const Expr& x_in) {
  const Halide::Type u32 = Halide::UInt(32);
  auto u = [&](uint32_t v) { return Halide::Internal::make_const(u32, v); };
  const Expr x = Halide::clamp(x_in, -104.0f, 88.72283172607422f);
  // Fused or not, the sum rounds to an integer in the low bits (ulp 1 in [2^23, 2^24)).
  const Expr shifted = x * 1.44269504088896341f + 12582912.0f;
  // kb = k + 512 in [362, 640], unsigned: Halide refuses to fold signed arithmetic it
  // cannot bound, and the shifts below are logical. The bias shifted into the exponent
  // field is 512 << 23 = 2^32, nothing mod 2^32 (with 256, 2^31, one more operation took
  // it out again).
  const Expr kb = Halide::reinterpret(u32, shifted) - u(0x4B400000 - 512);
  const Expr kf = Halide::cast(Halide::Float(32), Halide::cast(Halide::Int(32), kb)) - 512.0f;
  const Expr r = Halide::strict_float((x - kf * 0.693359375f) - kf * -2.12194440e-4f);
  Expr p = 1.9875691500e-4f;  // Horner, highest degree first
  for (float c :
       {1.3981999507e-3f, 8.3334519073e-3f, 4.1665795894e-2f, 1.6666665459e-1f, 5.0000001201e-1f}) {
    p = p * r + c;
  }
  const Expr y = p * (r * r) + r + 1.0f;  // in [0.7, 1.42]
  // 2^k = 2^k1 * 2^k2 with k1 = max(k, -125) and k2 = k - k1 in [-25, 0]. x is clamped
  // below ln(FLT_MAX), so y * 2^k1 is a normal f32 (at k = 128, y < 1): an add to y's
  // exponent field (no float operation for fast math to reorder). The product with 2^k2,
  // 1 unless the result is below FLT_MIN, is the one rounding (subnormal results rounded
  // once), and never overflows: Halide's float ops carry LLVM's no-infinities flag, under
  // which an infinite operand or result is poison. exp is inf from 88.72283935546875
  // (bits 0x42b17218; the float below it has a finite exp): one integer compare of the
  // argument's bits, positive floats ordering as integers, answered with a constant.
  // (An earlier form built 2^k as two halves, whose exponent add could overflow, and
  // caught that with two compares of its own: all of them on AVX-512's one compare port;
  // this form ran Softmax 4096x1024 3-4% faster.) Biased: kb = k + 512,
  // k1 + 512 = max(kb, 387), and 512 << 23 is 0 (mod 2^32).
  const Expr k1b = Halide::max(kb, u(387));
  const Expr y_k1 =
      Halide::reinterpret(Halide::Float(32), Halide::reinterpret(u32, y) + (k1b << 23));
  const Expr two_k2 = Halide::reinterpret(Halide::Float(32), (kb + u(127) - k1b) << 23);
  const Expr overflow = Halide::reinterpret(Halide::Int(32), x_in) >= 0x42b17218;
  return Halide::select(overflow, Halide::Internal::make_const(Halide::Float(32), INFINITY),
                        y_k1 * two_k2);
}

// Halide's f32 exp builds 2^k from the integer k = x / ln 2 and came out 0, not inf, for
// x from about 1.6e9 (k overflowed). Past +-200, exp is inf or 0 in f32 and Halide's
// gives those: the argument is clamped there. Its f64 exp is right over the whole range.
// (The CPU's f32 exp is ExpF32.)
Expr ExpOf(const Expr& x, DType dtype) {
  if (dtype == DType::kF32) return Halide::exp(Halide::clamp(x, -200.0f, 200.0f));
  return Halide::exp(x);
}

// Halide's f32 log reads a subnormal's exponent field as if it were normal (log(1.4e-45)
// came out -88.03, not -103.28). A subnormal is scaled into the normal range by 2^24
// (exact) and 24 ln 2 taken off again.
Expr LogOf(const Expr& x, DType dtype) {
  if (dtype != DType::kF32) return Halide::log(x);
  const Expr bits = Halide::reinterpret(Halide::UInt(32), x) & Halide::Expr(0x7fffffffu);
  const Expr subnormal =
      bits < Halide::Expr(0x00800000u);  // |x| below FLT_MIN (zero too: log is -inf)
  const Expr scaled = Halide::select(subnormal, x * 16777216.0f, x);
  return Halide::log(scaled) - Halide::select(subnormal, 16.635532333438686f, 0.0f);
}

// pow as libm computes it (powf / pow, which the JIT resolves from the process), like
// the reference's std::pow. Halide's pow is exp(y log x) with sign fix-ups, and missed
// IEEE pow's special cases: pow(NaN, 2) came out inf, pow(inf, 0.5) 1.8e19, pow(x, x) 0
// where it overflows, and subnormal bases were wrong. The call is scalar per lane, and
// strict: with fast-math flags LLVM rewrites pow(x, 0.5) as sqrt(x), which is NaN, not
// inf, at -inf. On CUDA it is libdevice's __nv_pow, for f32 too, on the operands widened
// (exact) and rounded back once: Halide links libdevice for flush-to-zero, so
// __nv_powf reads a subnormal base as 0 (pow(2^-149, 0.5) would be 2^-63.5, not
// 2^-74.5); __nv_pow has no such branch.
Expr PowOf(const Expr& x, const Expr& y, bool cuda) {
  const bool f64 = x.type().bits() == 64;
  auto call = [](const char* name, const Expr& a, const Expr& b) {
    return Halide::Internal::Call::make(a.type(), name, {a, b}, Halide::Internal::Call::PureExtern);
  };
  if (cuda && !f64) {
    const Halide::Type d = Halide::Float(64);
    return Halide::strict_float(
        Halide::cast(x.type(), call("__nv_pow", Halide::cast(d, x), Halide::cast(d, y))));
  }
  return Halide::strict_float(call(cuda ? "__nv_pow" : (f64 ? "pow" : "powf"), x, y));
}

// Floor division with x / 0 = 0. Halide's integer division is Euclidean (the remainder
// is never negative), which differs from floor division when the divisor is negative
// and the remainder non-zero: floor = euclid - 1 there.
Expr FloorDivI32(const Expr& a, const Expr& b) {
  const Expr q = a / b;
  const Expr r = WrapSub(a, WrapMul(q, b));
  return Halide::select(b == 0, 0, b < 0 && r != 0, q - 1, q);
}

// x / c for f32 where c is one value (a scalar, a constant): IEEE's quotient, a vdivps.
// Halide's simplifier turns a division by a constant into a multiplication by its f32
// reciprocal, which is not the quotient (x / 3 was an ulp off the reference's for a
// third of x); inside strict_float it leaves the division alone. (A product with an f64
// reciprocal, tried first, is not the quotient either where that is exactly halfway
// between two subnormals: 147 * 2^-149 / 98 rounded down, not to even.)
Expr DivByOneValue(const Expr& x, const Expr& y) { return Halide::strict_float(x / y); }

// True when b is one value (rank 0, or every extent 1).
bool IsOneValue(const Shape& b) {
  int64_t n = 1;
  for (int64_t d : b) n *= d;
  return n == 1;
}

// Float -> i32 with Cast's rules: truncate toward zero, saturate, NaN -> 0. NaN is tested
// on its bits and the range with strict compares: with is_nan, Li2018's schedule of
// Cast(-Max(x) * 3) gave INT_MIN (x86's conversion of NaN) for a row with a NaN
// (braze-fuzz --specials seed 1503039).
Expr FloatToI32(const Expr& v) {
  const Halide::Type ft = v.type();
  const Expr hi = Halide::Internal::make_const(ft, 2147483648.0);
  const Expr lo = Halide::Internal::make_const(ft, -2147483648.0);
  return Halide::select(IsNanBits(v), 0, Strict(v >= hi, v), std::numeric_limits<int32_t>::max(),
                        Strict(v < lo, v), std::numeric_limits<int32_t>::min(),
                        Halide::cast(Halide::Int(32), v));
}

}  // namespace

Expr GpuExpF32(const Expr& x, bool cuda) { return cuda ? ExpCudaF32(x) : ExpOf(x, DType::kF32); }

Value LowerUnary(LoweringContext& ctx, const std::string& name, OpKind op, const Value& x) {
  const DType dt = x.dtype;
  const Halide::Type t = HalideType(dt);
  auto c = [&](double v) { return Const(dt, v); };
  std::function<Expr(Expr)> fn;
  switch (op) {
    case OpKind::kNeg:
      // A float's negation is a product with -1, strict: Halide's -v is 0 - v, +0 at v = +0
      // (1 / Neg(0) came out inf, not -inf) wherever LLVM did not make it an fneg.
      fn = [c](Expr v) {
        return v.type().is_int() ? WrapSub(c(0), v) : Halide::strict_float(v * c(-1));
      };
      break;
    case OpKind::kAbs:
      // Halide's abs of an int returns the unsigned type; casting back wraps
      // abs(INT32_MIN) to INT32_MIN like the reference.
      // A float's |x| clears its sign bit: Halide's f64 abs gave -0 at -0 on the CPU.
      fn = [t](Expr v) {
        if (!t.is_float()) return Halide::cast(t, Halide::abs(v));
        const Halide::Type bits = Halide::UInt(t.bits());
        return Halide::reinterpret(t, AbsBits(Halide::reinterpret(bits, v)));
      };
      break;
    case OpKind::kExp:
      fn = [dt, gpu = ctx.gpu](Expr v) {
        // Braze's f32 exp maps -inf to 0 through its clamp and +inf to inf through its
        // overflow test; NaN needs the test here.
        if (dt == DType::kF32 && !gpu) return Halide::select(IsNanBits(v), v, ExpF32(v));
        return WithSpecials(v, ExpOf(v, dt), INFINITY, 0);
      };
      break;
    case OpKind::kLog:
      fn = [dt](Expr v) { return WithSpecials(v, LogOf(v, dt), INFINITY, NAN); };
      break;
    case OpKind::kSqrt:
      fn = [](Expr v) { return Halide::sqrt(v); };
      break;
    case OpKind::kRsqrt:
      fn = [c](Expr v) { return Halide::strict_float(c(1) / Halide::sqrt(v)); };
      break;
    case OpKind::kTanh:
      fn = [dt, cuda = ctx.cuda](Expr v) {
        if (cuda && dt == DType::kF32) return TanhCudaF32(v);
        return WithSpecials(v, TanhViaExp(v, dt), 1, -1);
      };
      break;
    case OpKind::kSigmoid:
      // The reference's form (reference/elementwise.cc): e = exp(-|v|) in (0, 1], never
      // overflowing, and e / (1 + e) below 0, so sigmoid(-88) is its subnormal and
      // sigmoid(-90) is 8e-40, not 0 or a clamp's 1.6e-38 (on the CPU: GPUs' exp may
      // flush subnormal results to 0). Finite operands only (the specials are selected
      // around it), so fast math cannot change it.
      // On CUDA (f32): SigmoidCudaF32.
      fn = [c, dt, gpu = ctx.gpu, cuda = ctx.cuda](Expr v) {
        if (cuda && dt == DType::kF32) return SigmoidCudaF32(v);
        const Expr minus_abs = -Halide::abs(v);
        const Expr e = dt == DType::kF32 && !gpu ? ExpF32(minus_abs) : ExpOf(minus_abs, dt);
        return WithSpecials(v, Halide::select(v < c(0), e, c(1)) / (c(1) + e), 1, 0);
      };
      break;
    case OpKind::kRelu:
      // Keeps NaN; strict so LLVM's no-NaNs flag cannot fold that away (see NanMax).
      fn = [c, dt](Expr v) {
        Expr relu = Halide::select(v < c(0), c(0), v);
        return IsFloating(dt) ? Halide::strict_float(relu) : relu;
      };
      break;
    case OpKind::kSquare:
      fn = [](Expr v) { return Strict(WrapMul(v, v), v); };
      break;
    case OpKind::kReciprocal:
      fn = [c](Expr v) { return Halide::strict_float(c(1) / v); };
      break;
    case OpKind::kSign:
      // Zero and NaN map to themselves.
      fn = [c, dt](Expr v) {
        Expr sign = Halide::select(v > c(0), c(1), v < c(0), c(-1), v);
        return IsFloating(dt) ? Halide::strict_float(sign) : sign;
      };
      break;
    case OpKind::kFloor:
      // On CUDA Halide's f32 floor is libdevice's, linked for flush-to-zero: it compiles
      // to cvt.rmi.ftz.f32, so Floor(-1e-40) would be -0, not -1. The f64 floor of the
      // widened value is exact and has no such mode.
      fn = [cuda = ctx.cuda, dt](Expr v) {
        if (cuda && dt == DType::kF32) {
          return Halide::cast(v.type(), Halide::floor(Halide::cast(Halide::Float(64), v)));
        }
        return Halide::floor(v);
      };
      break;
    case OpKind::kErf:
      fn = [dt, cuda = ctx.cuda](Expr v) { return WithSpecials(v, Erf(v, dt, cuda), 1, -1); };
      break;
    case OpKind::kSin:
    case OpKind::kCos:
      // Halide 14's sin and cos are the math library's (libm on the CPU, libdevice on
      // CUDA, OpenCL's built-ins), with their full range reduction: accurate for the
      // large arguments of positional encodings (test/lower/sequence_test.cc measures
      // it against std::sin). Infinities give NaN by the test here, which LLVM's
      // no-infinities flag cannot fold; NaN propagates; sin keeps -0 (libm's).
      // On CUDA an f32 argument is computed in f64: Halide links libdevice's f32
      // functions in flush-to-zero mode (test/compile/gpu_ptx_test.cc found .ftz
      // arithmetic in __nv_sinf's PTX), which reads a subnormal argument as 0, where
      // Sin keeps it; __nv_sin has no such mode, and its result rounded to f32 is within
      // the tolerance of the reference's sinf.
      fn = [op, f32_on_cuda = ctx.cuda && dt == DType::kF32](Expr v) {
        const Expr a = f32_on_cuda ? Halide::cast(Halide::Float(64), v) : v;
        Expr r = op == OpKind::kSin ? Halide::sin(a) : Halide::cos(a);
        if (f32_on_cuda) r = Halide::cast(v.type(), r);
        return WithSpecials(v, r, NAN, NAN);
      };
      break;
    default:
      throw Halide::InternalError(std::string("LowerUnary: not a unary op: ") + OpName(op));
  }
  return Define(ctx, name, dt, x.shape,
                [&](const std::vector<Expr>& index) { return fn(At(x, index)); });
}

Value LowerCast(LoweringContext& ctx, const std::string& name, const Value& x, DType to) {
  return Define(ctx, name, to, x.shape, [&](const std::vector<Expr>& index) -> Expr {
    const Expr v = At(x, index);
    // A float is true unless it is +-0, read from its bits (sign shifted out): a float
    // compare came out false for NaN != 0 under LLVM's no-NaNs flag (Mullapudi2016 on the
    // CPU; on CUDA even strict, where Halide 14's PTX backend sets that flag for the whole
    // module: an H200). An integer test no float flag can fold (LLVM 14 does not turn it
    // back into a float compare).
    if (to == DType::kBool && IsFloating(x.dtype)) {
      const Halide::Type bits = Halide::UInt(v.type().bits());
      return Halide::select(
          (Halide::reinterpret(bits, v) << 1) != Halide::Internal::make_zero(bits), 1, 0);
    }
    if (to == DType::kBool) return Halide::select(v != 0, 1, 0);
    if (x.dtype == DType::kBool) return Halide::select(v != 0, Const(to, 1), Const(to, 0));
    if (to == DType::kI32 && IsFloating(x.dtype)) return FloatToI32(v);
    return Halide::cast(HalideType(to), v);
  });
}

Value LowerBinary(LoweringContext& ctx, const std::string& name, OpKind op, const Value& a,
                  const Value& b, const TensorType& out) {
  const bool is_int = a.dtype == DType::kI32;
  const bool one_value_divisor = op == OpKind::kDiv && IsFloating(a.dtype) && IsOneValue(b.shape);
  return Define(ctx, name, out.dtype, out.shape, [&](const std::vector<Expr>& index) -> Expr {
    const Expr x = At(a, BroadcastIndex(a.shape, out.shape, index));
    const Expr y = At(b, BroadcastIndex(b.shape, out.shape, index));
    switch (op) {
      // Float arithmetic is strict: Halide 14's simplifier treats floats as reals and
      // LLVM's fast-math flags assume no NaN or infinity, so across ops x - x became 0,
      // x * 0 0, x / x 1 and (a - c) + c a where the reference has NaN (c infinite),
      // and (a + b) - b a where it has 0 (b = 3e38). Inside strict_float neither rewrites.
      case OpKind::kAdd:
        return Strict(WrapAdd(x, y), x);
      case OpKind::kSub:
        return Strict(WrapSub(x, y), x);
      case OpKind::kMul:
        return Strict(WrapMul(x, y), x);
      case OpKind::kDiv:
        if (is_int) return FloorDivI32(x, y);
        if (one_value_divisor) return DivByOneValue(x, y);
        return Halide::strict_float(x / y);
      case OpKind::kMaximum:
        return NanMax(x, y);
      case OpKind::kMinimum:
        return NanMin(x, y);
      case OpKind::kPow:
        // libm's pow on the CPU, libdevice's on CUDA (linked into every PTX module) and
        // OpenCL C's builtin (Halide's pow on OpenCL): each has IEEE's special cases.
        // Halide's own f32 pow, exp(log|x| * y) with selects, does not: on an H200 it gave
        // Pow(NaN, 2) = inf and Pow(inf, 0.5) = 1.8e19, as it once did on the CPU.
        return ctx.gpu && !ctx.cuda ? Halide::pow(x, y) : PowOf(x, y, ctx.cuda);
      // Float comparisons are strict: Halide 14's simplifier treats float arithmetic as
      // real numbers and moves a constant across a comparison ((a + c == b) becomes
      // (a == b - c)), which is not exact in floats: Equal(x, Relu(x)) came out false
      // for positive x (braze-fuzz seed 2869). Inside strict_float it rewrites nothing.
      case OpKind::kGreater:
        return Strict(x > y, x);
      case OpKind::kLess:
        return Strict(x < y, x);
      case OpKind::kEqual:
        // x == x is true for every x LLVM takes as never NaN, which it does for any
        // result of float arithmetic carrying its no-NaNs flag: Equal(s, s) of a NaN
        // Sum came out true. A NaN x is tested on its bits (a NaN y alone compares
        // unequal in the instruction itself).
        if (!x.type().is_float()) return x == y;
        return Strict(x == y, x) && !IsNanBits(x);
      default:
        throw Halide::InternalError(std::string("LowerBinary: not a binary op: ") + OpName(op));
    }
  });
}

Value LowerSelect(LoweringContext& ctx, const std::string& name, const Value& cond, const Value& a,
                  const Value& b, const TensorType& out) {
  return Define(ctx, name, out.dtype, out.shape, [&](const std::vector<Expr>& index) {
    const Expr c = At(cond, BroadcastIndex(cond.shape, out.shape, index));
    return Halide::select(c != 0, At(a, BroadcastIndex(a.shape, out.shape, index)),
                          At(b, BroadcastIndex(b.shape, out.shape, index)));
  });
}

}  // namespace lower
}  // namespace braze
