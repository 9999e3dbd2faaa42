// 16-bit floats as their bits in an OpenCL pipeline (docs/OPENCL.md, "bf16 and f16").
//
// Halide 14's OpenCL C code generator prints every 16-bit float type as `half`, bf16
// included (Type::is_float() is true for bfloat), and refuses `half` without the CLHalf
// target feature, which a device may set only when it has cl_khr_fp16 (POCL 3.1 on this
// machine has not). Even with it, a bf16 buffer declared `half` would be converted as an
// IEEE half wherever Halide casts it. So, as a custom lowering pass (it runs after
// Halide's own lowering and before the GPU loops are split off as OpenCL kernels), every
// value of a 16-bit float type that is not to stay one becomes its bits, UInt(16): loads,
// stores, allocations, lets, selects and shuffles change type only; a conversion to or
// from f32 becomes the integer formulas of lower/lower_float16.h (round to nearest even,
// the same bits as the reference kernels); an arithmetic op or comparison on 16-bit
// values computes in f32 and rounds once. The kernels' buffer arguments are then
// `ushort*`, and the device sees no 16-bit float type at all.
//
// Which types: bf16 on every OpenCL target; f16 too unless the target has CLHalf (the
// device's cl_khr_fp16: opencl_backend.cc), where f16 stays `half` and converts with
// the device's own instructions. CUDA keeps its types (PTX has f16; bf16 is converted on
// its bits by the lowering already). A 16-bit value the pass cannot convert (a call of
// an unknown function on one) is a Halide::CompileError naming the call, which the
// compile driver turns into the cluster's Status.
//
// Internal header: includes Halide.h.
#ifndef BRAZE_COMPILE_FLOAT16_BITS_H_
#define BRAZE_COMPILE_FLOAT16_BITS_H_

#include "Halide.h"

namespace braze {

// True when pipelines for `target` get the pass (an OpenCL target).
bool StoresFloat16AsBits(const Halide::Target& target);

// `s` with every bf16 value (and f16 value, with `f16_too`) as its UInt(16) bits.
// Throws Halide::CompileError for a value it cannot convert.
Halide::Internal::Stmt Float16AsBits(const Halide::Internal::Stmt& s, bool f16_too);

// Adds the pass to `pipeline` when StoresFloat16AsBits(target); f16 is converted too
// when the target lacks CLHalf. Install it after every other custom pass.
void InstallFloat16AsBits(Halide::Pipeline& pipeline, const Halide::Target& target);

}  // namespace braze

#endif  // BRAZE_COMPILE_FLOAT16_BITS_H_
