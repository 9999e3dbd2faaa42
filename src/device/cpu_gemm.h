// GEMMs on the CPU through oneDNN's matmul primitive, called from inside a cluster's Halide
// pipeline as an extern stage, as XLA's CPU backend calls Eigen or MKL for a dot: the
// elementwise ops and reductions around the matmul stay fused in the same kernel (the
// lowering, src/lower/lower_reduce.cc, decides which MatMuls become such a stage).
//
// oneDNN is loaded at run time (dlopen of libdnnl.so.2, then libdnnl.so), as cuBLASLt is
// on CUDA: Braze links no BLAS, binaries run on machines without one, and a matmul then
// compiles as Braze's own tiled Halide loops. Measured on the 2-core AVX-512 VM at
// 1024^3 (docs/CPU_GEMM.md): oneDNN's matmul 198 GFLOP/s, its dnnl_sgemm 188, OpenBLAS
// 163, Braze's Halide matmul about 170; at the MLP's 128 x 1024 x 784, 197 vs 144
// (OpenBLAS). A primitive is made per GEMM configuration at its first call and kept.
//
// oneDNN threads with OpenMP (libgomp). A call on one matrix large enough is cut into
// one part per thread of the kernel, each a oneDNN call on one OpenMP thread, run as a
// loop of Braze's pool (docs/CPU_GEMM.md, "One pool"); any other call sets the calling
// thread's OpenMP thread count to the kernel's (SessionOptions::num_threads, else every
// core). libgomp's
// threads would spin about 3 ms after each call, starving Halide's own workers on a
// machine with few cores: Braze sets OMP_WAIT_POLICY=passive before main unless the user
// chose (openmp_wait.h; docs/CPU_GEMM.md).
#ifndef BRAZE_DEVICE_CPU_GEMM_H_
#define BRAZE_DEVICE_CPU_GEMM_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"

namespace braze {

// The extern stage's C symbol. f32 accumulation always (oneDNN has no double GEMM); the
// element types are the buffers' own (halide_buffer_t::type): f32 operands and product,
// or bf16 operands (oneDNN's bf16 matmul, AVX512_BF16 dot products accumulating in f32)
// with an f32 or a bf16 product (the f32 result rounded once, to nearest even, by
// oneDNN). The name is the one kernels already in disk caches call. Its signature:
//   int braze_cpu_gemm_f32(halide_buffer_t* a, halide_buffer_t* b, int32_t transpose_a,
//                          int32_t transpose_b, int32_t k, int32_t threads,
//                          uint64_t b_const, halide_buffer_t* out)
// Buffers in Halide's dim order: out [n, m, batch...], a [k, m, batch...] ([m, k, ...]
// when transpose_a), b [n, k, batch...] ([k, n, ...] when transpose_b); each with a unit
// stride in dim 0. Bounds queries answer the whole k range and out's m, n and batch
// ranges. `b_const`: 0, or a name for b's contents when b is a constant compiled into
// the kernel (a hash of its bytes, the same in every process): a b of one matrix is then
// packed once into oneDNN's preferred layout and the packed copy reused by every call
// with the same name and configuration, as inference engines pack constant weights.
// Returns 0, or a negative code Halide reports as the stage's error:
// -1 oneDNN not loadable, -2 a buffer that does not hold the region read, or whose dim 0
// is not dense (or over 8 batch dims), or element types other than those above,
// -3 oneDNN refused the configuration or failed.
inline constexpr char kCpuGemmF32Symbol[] = "braze_cpu_gemm_f32";

// The same with a bias epilogue, and a ReLU after it when `relu` is nonzero:
//   int braze_cpu_gemm_bias_f32(halide_buffer_t* a, halide_buffer_t* b,
//                               halide_buffer_t* bias, int32_t transpose_a,
//                               int32_t transpose_b, int32_t k, int32_t relu,
//                               int32_t threads, uint64_t b_const, halide_buffer_t* out)
// out = relu(a b + bias), bias [n] broadcast over rows (and batch), dense, of out's
// element type. The bias is added by oneDNN's matmul (its bias argument: one f32 add
// after the f32 product, as the f32 Add it replaces; a bf16 product is rounded once,
// after the bias and ReLU, where the graph's ops would round the product and the sum
// each: docs/MIXED_PRECISION.md), the ReLU by post-ops that keep NaN as braze::Relu does, checked
// once per process against the same primitive without them (onednn_relu_check.cc);
// where that check does not cover oneDNN's implementation, the call applies the ReLU
// itself.
// Bounds queries also answer the bias's columns; codes as above.
inline constexpr char kCpuGemmBiasF32Symbol[] = "braze_cpu_gemm_bias_f32";

// OK when oneDNN loads and has dnnl_sgemm; FailedPrecondition naming what is missing
// otherwise. Loaded once per process; the result is kept. Thread-safe.
absl::Status CpuGemmAvailable();

// Whether oneDNN runs bf16 matmuls on this CPU with a kernel of its own (AVX512 and up;
// AVX512_BF16's dot products where the CPU has them), not its reference loops: false
// where it refuses them (AVX2 CPUs: every bf16 call failed, code -3) or does not load.
// Where false, a bf16 matmul computes on widened f32 operands, as an f16 one does.
// Probed once per process; thread-safe.
bool CpuGemmTakesBF16();

// Tests: false makes CpuGemmTakesBF16 answer false from now on (the AVX2 path), true
// (the default) restores the probe's answer.
void AllowCpuGemmBF16ForTesting(bool allowed);

// The library and version that runs CPU GEMMs ("oneDNN 2.6.3"), or "" when none loads.
std::string CpuGemmLibrary();

// Tests: false makes configurations prepared from now on apply the ReLU in the call's
// own loop (the path taken where the check above fails), true (the default) restores
// the post-ops.
void AllowCpuGemmReluPostOpsForTesting(bool allowed);

// How many constant b operands have been packed in this process (tests).
int64_t CpuGemmWeightPacks();

// How many calls ran their batch of matrices as one batched oneDNN primitive (a batch
// whose dims collapse into one stride) rather than a GEMM per matrix (tests).
int64_t CpuGemmBatchedCalls();

// How many calls were cut into parts run on Braze's thread pool, one OpenMP thread each
// (docs/CPU_GEMM.md, "One pool"), rather than one oneDNN call on the kernel's threads (tests).
int64_t CpuGemmSplitCalls();
// How many calls chosen for the cut ran uncut instead: the pool was running another
// thread's loop, or oneDNN refused a part's configuration (tests).
int64_t CpuGemmNotCutCalls();

// Tests only: the cache of packed constant weights (docs/CPU_GEMM.md, "Constant weights,
// packed once"). Nothing in Braze calls these; the defaults are the runtime's behaviour.
struct CpuGemmPackedCacheStats {
  int64_t packs = 0;            // constants packed in this process (CpuGemmWeightPacks)
  int64_t evictions = 0;        // packed copies evicted to stay within the budget
  int64_t row_major_reads = 0;  // calls that read a constant row-major because it was
                                // already packed the most times a constant may be
  int64_t copies = 0;           // packed copies held now
  int64_t bytes = 0;            // and their bytes
};
CpuGemmPackedCacheStats CpuGemmPackedCacheStatsForTesting();
// The most times one constant (one key) is packed before it is read row-major (4).
int CpuGemmMaxPacksForTesting();
// Sets the cache's budget in bytes (default 1 GiB; 0 restores it), evicting down to it
// now. A copy above half the budget is never packed.
void SetCpuGemmPackedBudgetForTesting(int64_t bytes);
// Empties the cache and forgets how often each constant was packed (counters stay).
void ResetCpuGemmPackedCacheForTesting();

// braze_cpu_gemm_f32's address, for a JIT pipeline's externs (Pipeline::set_jit_externs):
// Braze's static libraries do not export it to Halide's JIT linker by name.
void* CpuGemmF32Address();
void* CpuGemmBiasF32Address();  // braze_cpu_gemm_bias_f32's

}  // namespace braze

#endif  // BRAZE_DEVICE_CPU_GEMM_H_
