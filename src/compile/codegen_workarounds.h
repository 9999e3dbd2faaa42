// Repairs to a lowered pipeline for Halide 14 code generation bugs, installed on every
// pipeline Braze compiles (Pipeline::add_custom_lowering_pass: they run at the end of
// lowering, before LLVM code generation).
//
// Strided loads at a constant address: Halide 14 turns a vector load with stride 2 to 4
// into dense loads and shuffles. When the ramp's base is a constant, its alignment is
// "exactly b" (modulus 0), and the shift of the base down to a multiple of the stride
// then computes the remainder modulo 0, which Halide defines as 0: every dense load is
// marked as aligned to the full vector. An internal buffer read at c[8 + 3i] became a
// vmovaps of element 6 and the kernel died of a general-protection fault (braze-fuzz seed
// 1103469, Mullapudi2016; reproduced standalone for strides 2, 3, 4 and 8 to 32 lanes,
// with every base whose shifted value is not a multiple of the vector).
// The repair marks such loads' alignment unknown, so the dense loads are unaligned.
//
// Strided loads below their base: for the same dense loads, when the ramp's base is
// `e + c` and c is not a multiple of the stride, Halide 14 loads from `e + c - (c mod
// stride)` and shuffles from lane (c mod stride): with e + c = 0 that is one element
// before the buffer. In a small internal buffer (a stack allocation) LLVM treats that
// load as undefined, and the whole vector came out as garbage: the first row of a Pad of
// a transposed comparison (Pad(Transpose(Cast(Equal(t, min))) + 1), a Min gradient: got
// 0, reference 1, braze-fuzz seed 1201835, the safe default; reproduced standalone with
// select(d < 2, 5, f(max(d, 2) - 2 + 3l)). An external buffer would be read before its
// first element. The repair binds such a base to a Let, so the code generator sees a
// variable and loads from the base itself.
//
// Float ramps: Halide 14's simplifier turns a vector of two scalars [a, b] into
// ramp(a, b - a, 2), exact for integers only: lane 1, a + (b - a), was NaN where a was
// NaN and b was 0 (a conv update's two lanes, braze-fuzz seed 13310072), and is rounded
// in general. The repair writes every float ramp back as a concat of its lanes (of a and
// b when the stride is b - a).
//
// The opaque zero (lower/lowering.h kOpaqueZeroBuffer): float sums and matmul operands
// add a load of a one-element buffer of 0 so that Halide 14's loop trimming, which
// reasons with strict_float stripped, cannot prove a term zero (docs/HALIDE14.md, "Loop
// trimming strips strict_float"). Custom passes run after trimming, so this one takes
// the additions out again: `x + zero` becomes x. The load had cost 25% on a step of
// small sums (an extra add, and loops LLVM no longer vectorized). A sum's update, `acc +
// (zero + term)`, becomes strict_float(acc + s) with s = term bound outside it: Halide
// gives the addition LLVM's fast-math flags, and with the no-NaNs flag LLVM folded
// `acc + (x - x)` to acc, taking a term that is 0 or NaN as 0 (Mean(Concat({v, v - v}))
// was 0 where v is NaN: braze-fuzz seed 11101870, the safe default).
//
// Skipped stages on a GPU: when a Func is only needed under a select, Halide 14 wraps its
// production in `if (condition)` on the host, and the condition may read another Func's
// buffer, which on a GPU holds its value on the device only (no copy to the host is
// made for it). The host then read garbage: the count of a Minimum gradient was never
// computed and the gradient came out 0 instead of 21 on OpenCL (braze-fuzz seed
// 1130789). The repair, for GPU targets, drops such host-side conditions: the stage is
// always computed (its values are only unused where the condition is false).
//
// f64 constants in OpenCL C: Halide 14 prints an f64 constant as `(double)
// float_from_bits(...)`, the constant rounded to f32 (x * 0.1 in f64 was off by 1.5e-9
// relative). The repair, for GPU targets, writes each f64 constant in device code as
// its 64 bits, reinterpreted (`as_double(...ul)` in OpenCL C).
//
// NVVM intrinsics on the host: CUDA lowering calls PTX's approximate exp2 and division
// by their LLVM intrinsics' names (lower_elementwise.cc), meant for kernels. Halide 14
// may compute a value on the host instead (a scalar, such as the Tanh of a constant
// read by a kernel), where the x86 back end cannot select them: "LLVM ERROR: Cannot
// select: intrinsic %llvm.nvvm.div.approx.f", every GPU schedule of the cluster failed
// (braze-fuzz seeds 6000280 and 12 more on an H100). The repair, for GPU targets, gives
// those calls outside GPU loops their host forms: exp(x ln 2) and an IEEE division.
//
// Non-finite constants: Halide gives every float instruction outside strict_float LLVM's
// no-NaNs and no-infinities flags, under which a NaN or infinite operand is poison.
// Where such a value is a constant of the pipeline (the Mean of an empty batch is a NaN
// literal, a Max's -inf, a scalar Const of inf), LLVM folded what read it: a store of it
// was deleted and a MatMul of the mean was 0, not NaN (braze-fuzz seed 62701289, every
// CPU scheduler), and once the whole pipeline, its output left 0 (seed 62600348,
// Mullapudi2016, one thread). NVPTX code carries the same flags: a kernel that
// multiplied a NaN literal and stored the product compiled to a bare `ret`. The repair,
// run last, binds each non-finite float constant, in host and device code, to a variable
// at the top of the pipeline whose value comes from an identity function LLVM cannot see
// into (kOpaqueBitsSymbol): a run-time value, as an input's NaN is. The call is host
// code; a GPU kernel that reads the variable gets it as a scalar argument (docs/
// HALIDE14.md, "Non-finite constants are poison to LLVM"; docs/CUDA.md, "Non-finite
// constants in device code").
//
// Internal header: includes Halide.h.
#ifndef BRAZE_COMPILE_CODEGEN_WORKAROUNDS_H_
#define BRAZE_COMPILE_CODEGEN_WORKAROUNDS_H_

#include "Halide.h"

namespace braze {

// The identity function on 64 bits that non-finite constants pass through (the JIT's
// extern and the stored runtime's, compile/aot_kernel.cc), and its address.
inline constexpr char kOpaqueBitsSymbol[] = "braze_opaque_bits";
void* OpaqueBitsAddress();

// Adds the repairs above to `pipeline` (once per pipeline); `gpu`: a GPU target.
void InstallCodegenWorkarounds(Halide::Pipeline& pipeline, bool gpu);

// The repair itself, for tests: `s` with every vector load whose index is a ramp with a
// constant base and a stride other than 1 given unknown alignment.
Halide::Internal::Stmt UnalignConstantStridedLoads(const Halide::Internal::Stmt& s);

// The repair of strided loads below their base, for tests: `s` with every vector load
// of stride 2 to 4 whose base is `e + c` (c not a multiple of the stride) reading its
// base through a Let.
Halide::Internal::Stmt LoadStridedVectorsFromTheirBase(const Halide::Internal::Stmt& s);

// The host forms of the NVVM intrinsics, for tests: `s` with every call of them outside
// a GPU loop replaced.
Halide::Internal::Stmt HostFormsOfDeviceMath(const Halide::Internal::Stmt& s);

// The opaque zero's removal, for tests.
Halide::Internal::Stmt DropOpaqueZeroLoads(const Halide::Internal::Stmt& s);

// The non-finite constants' rewrite, for tests: `s` with every NaN or infinite float
// constant (inside GPU loops too) bound to kOpaqueBitsSymbol's result at the top of `s`.
Halide::Internal::Stmt NonFiniteConstantsAsOpaque(const Halide::Internal::Stmt& s);

// The GPU repair, for tests: `s` with every host-side `if` (no else, outside any GPU
// loop) whose condition reads a buffer replaced by its body.
Halide::Internal::Stmt ComputeSkippableGpuStages(const Halide::Internal::Stmt& s);

}  // namespace braze

#endif  // BRAZE_COMPILE_CODEGEN_WORKAROUNDS_H_
