// bf16 and f16 in the lowering: ops compute in f32 and round once (lower_float16.cc).
//
// Internal header: includes Halide.h.
#ifndef BRAZE_LOWER_LOWER_FLOAT16_H_
#define BRAZE_LOWER_LOWER_FLOAT16_H_

#include <vector>

#include "braze/graph.h"
#include "lower/lower_util.h"

namespace braze {
namespace lower {

// Whether `op`, reading `in` and giving `out`, computes on a 16-bit float (and so is
// lowered through Widen and Narrow).
bool Computes16BitFloats(OpKind op, const std::vector<Value>& in, const TensorType& out);

// An f32 view of a bf16 or f16 value (exact); any other value as it is.
Value Widen(const Value& v);

// `v` rounded (to nearest even, through f32) to the 16-bit float `to` where it is read;
// `v` itself when `to` is not a 16-bit float or is v's dtype already.
Value Narrow(const Value& v, DType to);

// The conversions on the bits, with integer operations only (any lanes): for targets
// that have no 16-bit float type (OpenCL without cl_khr_fp16, and bf16 on every GPU
// target). `bits` is UInt(16), `f` Float(32). Widening is exact; narrowing rounds to
// nearest, ties to even, keeps infinities and signed zeros, gives f16 subnormals and
// overflows to infinity, and makes a NaN the quiet NaN of its sign (0x7fc0 / 0x7e00),
// as Braze's HostTensor conversions do.
Halide::Expr BF16BitsToF32(const Halide::Expr& bits);
Halide::Expr F16BitsToF32(const Halide::Expr& bits);
Halide::Expr F32ToBF16Bits(const Halide::Expr& f);
Halide::Expr F32ToF16Bits(const Halide::Expr& f);

}  // namespace lower
}  // namespace braze

#endif  // BRAZE_LOWER_LOWER_FLOAT16_H_
