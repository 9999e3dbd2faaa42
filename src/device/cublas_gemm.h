// GEMMs on CUDA through cuBLASLt, loaded at run time (dlopen of libcublasLt.so.13, then
// libcublasLt.so): Braze links no CUDA library, so binaries run on machines without one
// and the GPU image brings its own. Row-major tensors as Braze stores them; an epilogue
// (bias over the last dim, then optionally ReLU or GELU) is folded into the GEMM where
// the graph has one, as XLA does with cuBLASLt.
//
// Device pointers are CUdeviceptr values from DeviceTensor::device_address(), valid in
// the device's primary context, the one cuBLAS uses (see device_tensor.h). Work goes to
// the legacy default stream, after the Halide kernels before it.
#ifndef BRAZE_DEVICE_CUBLAS_GEMM_H_
#define BRAZE_DEVICE_CUBLAS_GEMM_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "braze/dtype.h"

namespace braze {

// kBiasGelu is cuBLASLt's GELU, the tanh form 0.5x(1 + tanh(sqrt(2/pi)(x + 0.044715x^3))),
// the same formula as braze::Gelu (src/frontend/ops.cc), not the erf form.
// kBiasRelu is cuBLASLt's RELU_BIAS (RELU with a 16-bit bias in C, below), whose NaN
// handling cuBLASLt does not document: on an H200 (cuBLASLt 13) a NaN pre-activation of
// RELU_BIAS stayed NaN, but callers must not rely on either NaN or 0
// (SessionOptions::cuda_relu_epilogue is opt-in for that reason).
enum class GemmEpilogue { kNone, kBias, kBiasRelu, kBiasGelu };
const char* GemmEpilogueName(GemmEpilogue e);

// The dtypes CublasGemm takes: f32, f64, bf16 (CUDA_R_16BF) and f16 (CUDA_R_16F).
bool IsCublasGemmDType(DType dtype);

// out[b] = epilogue(op(a[b]) x op(b[b]) + bias), all row-major and dense:
//   a: [batch.., m, k] (or [.., k, m] when transpose_a), b: [.., k, n] (or [.., n, k]),
//   bias: [n], out: [batch.., m, n]. batch = 1 for MatMul. f32, f64, bf16 and f16
//   (IsCublasGemmDType): a, b, bias and out all of `dtype`. bf16 and f16 accumulate in
//   f32, add the bias (through C: CublasGemmBiasInC) and apply the activation in f32,
//   and round once to `dtype`.
struct GemmShape {
  DType dtype = DType::kF32;
  int64_t batch = 1;
  int64_t m = 0, n = 0, k = 0;
  bool transpose_a = false;
  bool transpose_b = false;
  GemmEpilogue epilogue = GemmEpilogue::kNone;
};

// OK when cuBLASLt loads and a handle can be created on the current CUDA device.
// FailedPrecondition with the reason otherwise (no library, no driver, no device, or a
// build without the CUDA toolkit headers). Loaded once per process; the result is kept.
// Call it, like CublasGemm, with the device's primary context current.
absl::Status CublasAvailable();

// Runs one GEMM; `name` (the node or cluster) prefixes every error. InvalidArgument for
// shapes or dtypes it does not take (the caller then uses a Halide kernel): not a float
// dtype IsCublasGemmDType admits,
// k == 0, a dimension over 2^31-1, null pointers, a bias not 16-byte aligned, or no
// cuBLASLt algorithm for the configuration. OK without any work when batch, m or n is 0. Internal
// with cuBLAS' status name for a failing call. Asynchronous on the default stream. The caller must
// have the device's primary context current (it pushes it, as device_tensor.cc does).
// f32, bf16 and f16 accumulate in FP32 (CUBLAS_COMPUTE_32F, never TF32; for 16 bits only
// algorithms whose split-K partial sums stay f32), f64 in FP64.
absl::Status CublasGemm(const std::string& name, const GemmShape& shape, uint64_t a, uint64_t b,
                        uint64_t bias, uint64_t out);

// Whether CublasGemm adds `s`'s bias through cuBLASLt's C matrix (beta 1, C the bias
// broadcast by leading dimension 0, the activation alone as the epilogue) rather than
// the BIAS epilogue: bf16 and f16 with a bias. Their BIAS epilogue rounded the f32 sum
// to 16 bits before adding the bias on an H200; C joins the sum in f32 (cublas_gemm.cc).
bool CublasGemmBiasInC(const GemmShape& s);

}  // namespace braze

#endif  // BRAZE_DEVICE_CUBLAS_GEMM_H_
