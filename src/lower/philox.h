// Philox-4x32-10 and Braze's random-number transforms as Halide expressions: the
// compiled side of docs/RANDOM.md. What a kernel computes here is, bit for bit, what the
// reference kernels (src/reference/random.cc) compute on the host, on every CPU
// schedule, on OpenCL and on CUDA, vectorized or not.
//
// The convention every random op follows, and that a fused kernel (attention's dropout
// on its weights) follows to reproduce an unfused Dropout bit for bit:
//   key     = RandomKey(seed, op_key)                       (braze/random.h, on the host)
//   counter = {index lo, index hi, step lo, step hi}
//   index   = the element's row-major flat index in the tensor the op produces
//   step    = the op's `step` input, sign-extended to 64 bits
// The *Bits builders take the index as a UInt(32) Expr (Halide 14 buffers hold fewer
// than 2^31 elements, so the high word is 0) and the step as an Int(32) Expr.
//
// Every float operation is IEEE's correctly rounded one under strict_float, and every
// product is of two f32 values taken in f64, where it is exact: PTX and OpenCL C fuse
// multiplies into adds whatever strict_float says (docs/RANDOM.md), and a fused
// multiply-add of an exact product is the unfused sum.
//
// Internal header: includes Halide.h.
#ifndef BRAZE_LOWER_PHILOX_H_
#define BRAZE_LOWER_PHILOX_H_

#include <array>

#include "Halide.h"
#include "braze/random.h"

namespace braze {
namespace lower {

// Four UInt(32) words.
using PhiloxWords = std::array<Halide::Expr, 4>;

// Philox4x32_10(counter, key) (braze/random.h): the 32x32 -> 64-bit products are u64
// multiplies of zero-extended words (vpmuludq on x86, mul.wide.u32 on PTX).
PhiloxWords Philox4x32_10(const PhiloxWords& counter, const PhiloxKey& key);

// The block of the element at `index` (UInt(32)) for `step` (Int(32)) under `key`.
PhiloxWords PhiloxBlock(const PhiloxKey& key, const Halide::Expr& index, const Halide::Expr& step);

// The numbers of a block (the reference's PhiloxToUniformF32, ...):
// Float(32) in [0, 1): (x0 >> 8) 2^-24, exact.
Halide::Expr PhiloxToUniformF32(const PhiloxWords& x);
// Float(64) in [0, 1): the 53 bits x0 . x1[31:11] times 2^-53, exact.
Halide::Expr PhiloxToUniformF64(const PhiloxWords& x);
// Float(32) standard normal: Box-Muller's r cos(theta) from x0 (the radius) and x1 (the
// angle), with Braze's own log and sin/cos polynomials (docs/RANDOM.md).
Halide::Expr PhiloxToNormalF32(const PhiloxWords& x);

// The common uses in one call: a uniform f32 in [0, 1) and a standard normal f32 for
// the element at `index` (UInt(32)) and `step` (Int(32)) of the op keyed by `key`.
Halide::Expr PhiloxUniform(const PhiloxKey& key, const Halide::Expr& index,
                           const Halide::Expr& step);
Halide::Expr PhiloxNormal(const PhiloxKey& key, const Halide::Expr& index,
                          const Halide::Expr& step);

}  // namespace lower
}  // namespace braze

#endif  // BRAZE_LOWER_PHILOX_H_
