// Shared lowering helpers; see lower_util.h.
#include "lower/lower_util.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdint>
#include <limits>

#include "lower/lowering.h"

namespace braze {
namespace lower {

using Halide::Expr;

Expr TypedConst(DType dtype, double v) {
  switch (dtype) {
    case DType::kF32:
      return Halide::Internal::make_const(Halide::Float(32), v);
    case DType::kF64:
      return Halide::Internal::make_const(Halide::Float(64), v);
    case DType::kI32: {
      int32_t i = 0;
      if (!std::isnan(v)) {
        const double t = std::trunc(v);
        if (t <= std::numeric_limits<int32_t>::min()) {
          i = std::numeric_limits<int32_t>::min();
        } else if (t >= std::numeric_limits<int32_t>::max()) {
          i = std::numeric_limits<int32_t>::max();
        } else {
          i = static_cast<int32_t>(t);
        }
      }
      return Halide::Internal::make_const(Halide::Int(32), i);
    }
    case DType::kBool:
      return Halide::Internal::make_const(Halide::UInt(8), v != 0 ? 1 : 0);
    case DType::kBF16:
    case DType::kF16: {
      // The bits HostTensor stores (through f32), not Halide's own double rounding.
      const uint16_t bits = dtype == DType::kBF16 ? FloatToBF16Bits(static_cast<float>(v))
                                                  : FloatToF16Bits(static_cast<float>(v));
      return Halide::reinterpret(HalideType(dtype),
                                 Halide::Internal::make_const(Halide::UInt(16), bits));
    }
  }
  return Expr();
}

Expr AbsBits(const Expr& bits) {
  if (bits.type().bits() == 64) {
    // Shifts, not a mask: Halide 14's OpenCL C printed the mask 0x7fffffffffffffff as
    // 2147483647ul, which cleared the exponent too (Tanh(NaN) in f64 came out 1 there).
    return (bits << 1) >> 1;
  }
  return bits & Halide::Internal::make_const(bits.type(), uint64_t{0x7fffffff});
}

Expr IsNanBits(const Expr& x) {
  if (x.type().bits() == 64) {
    return AbsBits(Halide::reinterpret(Halide::UInt(64), x)) >
           Halide::Internal::make_const(Halide::UInt(64), uint64_t{0x7ff0000000000000});
  }
  const Expr bits = Halide::reinterpret(Halide::UInt(32), Halide::cast(Halide::Float(32), x));
  return (bits & Halide::Internal::make_const(Halide::UInt(32), uint64_t{0x7fffffff})) >
         Halide::Internal::make_const(Halide::UInt(32), uint64_t{0x7f800000});
}

// strict_float: Halide compiles with LLVM's no-NaNs flag, under which LLVM may fold
// select(is_nan(a), a, x) to x (selecting a NaN would be "impossible").
namespace {

bool SignedInt32(const Expr& e) { return e.type().is_int() && e.type().bits() == 32; }

Expr AsUnsigned(const Expr& e) {
  return Halide::reinterpret(e.type().with_code(Halide::Type::UInt), e);
}

}  // namespace

Expr WrapAdd(const Expr& a, const Expr& b) {
  if (!SignedInt32(a)) return a + b;
  return Halide::reinterpret(a.type(), AsUnsigned(a) + AsUnsigned(b));
}

Expr WrapSub(const Expr& a, const Expr& b) {
  if (!SignedInt32(a)) return a - b;
  return Halide::reinterpret(a.type(), AsUnsigned(a) - AsUnsigned(b));
}

Expr WrapMul(const Expr& a, const Expr& b) {
  if (!SignedInt32(a)) return a * b;
  return Halide::reinterpret(a.type(), AsUnsigned(a) * AsUnsigned(b));
}

// As the reference: a NaN operand, else of two equal values a (Maximum(-0, +0) is -0;
// Halide's max gave +0). `a < b ? b : a` is x86's maxps(b, a) exactly, a NaN a included
// (the comparison is false), so only a NaN b needs a test, and none when b is a
// constant: one vmaxps for a Maximum with a constant. Written with < only: Halide
// rewrites a >= b as !(a < b), which is true, not false, when b is NaN. The test reads
// b's bits: a strict is_nan(b) was folded to false where b came from float arithmetic
// carrying LLVM's no-NaNs flag (a Sum's f64 adds), which LLVM takes as proof that b is
// never NaN; Maximum(x, Sum(y)) was x where the sum was NaN (braze-fuzz seed 10800706).
Expr NanMax(const Expr& a, const Expr& b) {
  if (!a.type().is_float()) return Halide::max(a, b);
  return Halide::strict_float(Halide::select(IsNanBits(b), b, a < b, b, a));
}

Expr NanMin(const Expr& a, const Expr& b) {
  if (!a.type().is_float()) return Halide::min(a, b);
  return Halide::strict_float(Halide::select(IsNanBits(b), b, b < a, b, a));
}

schedule::Extents HalideExtents(const Shape& shape) {
  if (shape.empty()) return {1};
  return schedule::Extents(shape.rbegin(), shape.rend());
}

std::vector<Halide::Var> HalideVars(int rank) {
  std::vector<Halide::Var> vars;
  // Not "v<N>": Halide names anonymous Vars v0, v1, ... (e.g. the inner var that
  // vectorize() creates), and a clash silently corrupts the schedule.
  for (int i = 0; i < std::max(rank, 1); ++i) vars.emplace_back("dim" + std::to_string(i));
  return vars;
}

Expr At(const Value& v, const std::vector<Expr>& index) {
  if (v.constant.defined()) return v.constant;
  if (v.inline_body) return v.inline_body(index);
  std::vector<Expr> args(index.rbegin(), index.rend());
  if (args.empty()) args.push_back(0);
  if (v.param.defined()) return v.param(args);
  return v.func(args);
}

std::vector<Expr> BroadcastIndex(const Shape& in, const Shape& out,
                                 const std::vector<Expr>& index) {
  const size_t offset = out.size() - in.size();
  std::vector<Expr> result;
  for (size_t i = 0; i < in.size(); ++i) {
    result.push_back(in[i] == 1 ? Expr(0) : index[offset + i]);
  }
  return result;
}

schedule::Symbolic HalideSymbolic(const std::vector<int>& sym, size_t rank) {
  schedule::Symbolic result(std::max<size_t>(rank, 1), false);
  for (size_t d = 0; d < rank && d < sym.size(); ++d) result[rank - 1 - d] = sym[d] >= 0;
  return result;
}

Expr LoweringContext::Extent(const Value& v, size_t d) const {
  const int k = SymbolOf(v, d);
  if (k >= 0) return symbols_.at(k);
  return Expr(static_cast<int>(v.shape[d]));
}

Expr LoweringContext::OpaqueZero(const Halide::Type& type) {
  if (!zero_.defined()) {
    zero_ = Halide::Buffer<double>(std::vector<int>{1}, kOpaqueZeroBuffer);
    zero_(0) = 0.0;
    // As a Const's buffer: Halide injects the host-to-device copy before the custom
    // pass removes the loads, so a GPU pipeline still uploads its 8 bytes once.
    zero_.set_host_dirty(true);
  }
  return Halide::cast(type, zero_(Expr(0)));
}

std::string LoweringContext::UniqueName(const std::string& base) {
  std::string clean;
  for (char c : base) clean += std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
  const int n = counts_[clean]++;
  return n == 0 ? clean : clean + "_" + std::to_string(n);
}

Value Define(LoweringContext& ctx, const std::string& name, DType dtype, const Shape& shape,
             const Body& body) {
  Halide::Func f(ctx.UniqueName(name));
  const int rank = static_cast<int>(shape.size());
  std::vector<Halide::Var> vars = HalideVars(rank);
  std::vector<Expr> index;
  for (int d = 0; d < rank; ++d) index.push_back(vars[rank - 1 - d]);
  f(vars) = Halide::cast(HalideType(dtype), body(index));
  Value value;
  value.func = f;
  value.dtype = dtype;
  value.shape = shape;
  return value;
}

Value Inline(DType dtype, const Shape& shape, Body body) {
  Value value;
  const Halide::Type type = HalideType(dtype);
  value.inline_body = [type, body = std::move(body)](const std::vector<Expr>& index) {
    return Halide::cast(type, body(index));
  };
  value.dtype = dtype;
  value.shape = shape;
  return value;
}

Value Materialize(LoweringContext& ctx, const std::string& name, const Value& v) {
  if (!v.constant.defined()) return v;
  return Define(ctx, name, v.dtype, v.shape,
                [&](const std::vector<Expr>& index) { return At(v, index); });
}

Value Fill(DType dtype, const Shape& shape, double v) {
  Value value;
  value.constant = TypedConst(dtype, v);
  value.dtype = dtype;
  value.shape = shape;
  return value;
}

}  // namespace lower
}  // namespace braze
