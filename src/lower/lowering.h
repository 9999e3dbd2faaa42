// The lowering pass: a ClusterSpec becomes Halide Funcs, one per node (reductions: an
// accumulator Func whose finishing cast is inlined into readers), with the cluster
// inputs read straight from ImageParams and scalar constants as literals.
//
// The pipeline's outputs are exactly spec.outputs. A computed value that nothing else
// in the cluster reads is its own output Func; other outputs (values also read inside
// the cluster, inputs, constants, repeats) get a pure copy Func, because a schedule may
// compute a consumed Func over more than the output buffer holds.
//
// The pipeline is specialized to the exact input types: every ImageParam and output
// buffer carries exact bounds and dense strides (so Halide folds the shapes and checks
// the buffers it is given), and the outputs carry exact estimates for the
// autoschedulers. Output types are re-inferred node by node from the concrete inputs.
//
// Tensors with no elements are never handed to Halide: such inputs (and node results)
// become constants that nothing reads, and such outputs are left out of the pipeline
// (the caller has allocated them; there is nothing to compute).
//
// Internal header: includes Halide.h.
#ifndef BRAZE_LOWER_LOWERING_H_
#define BRAZE_LOWER_LOWERING_H_

#include <string>
#include <vector>

#include "Halide.h"
#include "absl/status/statusor.h"
#include "lower/cluster_spec.h"
#include "schedule/pipeline_info.h"

namespace braze {
namespace lower {

struct LoweredCluster {
  // One per spec input; an element-less input has no ImageParam (input_elided).
  std::vector<Halide::ImageParam> params;
  std::vector<bool> input_elided;
  // One per spec output: its type, and its index in info.outputs (-1: no elements).
  std::vector<TensorType> output_types;
  std::vector<int> pipeline_output;
  schedule::PipelineInfo info;
  // A multi-element Const is a Halide buffer embedded in the pipeline (scalars are
  // literals): such a pipeline is JIT-compiled only (compile/scheduler_chain.cc says why).
  bool embeds_constants = false;
  // Some MatMul is an extern stage calling the CPU GEMM library (device/cpu_gemm.h):
  // the pipeline needs that symbol (Pipeline::set_jit_externs), and its object code
  // finds it in the disk cache's runtime (compile/aot_kernel.cc).
  bool calls_library = false;
  // Some f32 sum is long enough that LowerOptions::block_long_sums changes its Funcs.
  bool long_sums = false;
  // Batch norms folded into convolutions (lower/conv_bn_fold.h), one line each:
  // ConvBnFold::Describe's text (logs and dumps).
  std::vector<std::string> folds;
};

// The one-element f64 buffer of 0 whose loads make Halide 14's loop trimming unable to
// prove a reduction's term zero (LoweringContext::OpaqueZero; docs/HALIDE14.md,
// "Loop trimming strips strict_float"). compile/codegen_workarounds.cc removes its loads
// after trimming has run, so the kernels never load it.
inline constexpr char kOpaqueZeroBuffer[] = "braze_opaque_zero";

// PTX's approximate exp2 and division, which CUDA lowering calls by their NVVM
// intrinsics' names (lower_elementwise.cc) for kernels; compile/codegen_workarounds.cc
// gives the calls Halide places on the host their host forms.
inline constexpr char kNvvmEx2[] = "llvm.nvvm.ex2.approx.f";
inline constexpr char kNvvmDiv[] = "llvm.nvvm.div.approx.f";
// Their flush-to-zero forms (ex2.approx.ftz.f32, div.approx.ftz.f32).
inline constexpr char kNvvmEx2Ftz[] = "llvm.nvvm.ex2.approx.ftz.f";
inline constexpr char kNvvmDivFtz[] = "llvm.nvvm.div.approx.ftz.f";
// LLVM's f32 fma, for exact products' errors (Halide 14 has no fma); every back end
// selects it, so it needs no host form.
inline constexpr char kLlvmFmaF32[] = "llvm.fma.f32";

struct LowerOptions {
  // An f32 MatMul/BatchMatMul doing at least this many multiply-adds (batch * m * n * k,
  // at the estimate for symbolic dims) becomes an extern stage calling the CPU GEMM
  // library instead of Braze's Halide loops; < 0: none does (GPU targets, the
  // autoschedulers, no library, SessionOptions::cpu_matmul = kHalide).
  int64_t library_gemm_min_work = -1;
  // A convolution's multiply-adds must reach this too (lower_conv_library.cc): its call
  // still starts libgomp's team. < 0: the matmuls' threshold alone.
  int64_t library_conv_min_work = -1;
  int library_gemm_threads = 0;  // the library's thread count; 0: its default
  // bf16 products of bf16 operands are library calls too (device CpuGemmTakesBF16);
  // otherwise such a matmul is an f32 one of widened operands.
  bool library_gemm_bf16 = false;
  // A GPU target: math that calls the host's libm on the CPU uses the GPU's own.
  bool gpu = false;
  // Long f32 sums (a MatMul's k, a convolution's window, a segment sum's ids over more
  // than kLongSum terms) as partial sums over blocks, then their sum (long_sums.h): the
  // lowering for Adams2019 and Mullapudi2016, which keep one serial accumulator over
  // every term otherwise.
  bool block_long_sums = false;
  // That GPU is CUDA: the GPU's own math is libdevice's (__nv_erf, ...), which Halide
  // links into every PTX module; OpenCL C has the libm names as builtins.
  bool cuda = false;
};

// Lowers `spec`. Fresh Funcs every call: a schedule that failed may have left
// directives on the previous ones. Never throws; Halide errors become a Status.
absl::StatusOr<LoweredCluster> LowerCluster(const ClusterSpec& spec,
                                            const LowerOptions& options = {});

}  // namespace lower
}  // namespace braze

#endif  // BRAZE_LOWER_LOWERING_H_
