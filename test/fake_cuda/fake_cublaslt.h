// What the stand-in cuBLASLt (fake_libcublaslt.cc) records of the calls made to it, for
// cublas_gemm_fake_test.cc to check; read through fake_cublaslt_last (dlsym), since the
// library is loaded by dlopen like NVIDIA's.
#ifndef BRAZE_TEST_FAKE_CUDA_FAKE_CUBLASLT_H_
#define BRAZE_TEST_FAKE_CUDA_FAKE_CUBLASLT_H_

#include <cstdint>

// A matrix layout as created and set: cudaDataType, rows, columns, leading dimension,
// batch count and batch stride (elements).
struct FakeLtLayout {
  int type = -1;
  uint64_t rows = 0, cols = 0;
  int64_t ld = -1;
  int32_t batch = 1;
  int64_t stride = 0;
};

// The last cublasLtMatmulAlgoGetHeuristic and cublasLtMatmul calls.
struct FakeLtCalls {
  long heuristics = 0, matmuls = 0;
  // The heuristic's arguments: the epilogue set on the descriptor, C's layout and the
  // C alignment it was promised (CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES).
  uint32_t heuristic_epilogue = 0;
  FakeLtLayout heuristic_c;
  uint32_t heuristic_align_c = 0;
  // The matmul's: epilogue, bias pointer (null when unset), alpha and beta (read as the
  // scale type), the C and D pointers and layouts.
  uint32_t epilogue = 0;
  const void* bias = nullptr;
  double alpha = 0, beta = 0;
  const void* c = nullptr;
  const void* d = nullptr;
  FakeLtLayout c_layout, d_layout;
};

// fake_cublaslt_last(&calls) copies the record; returns 0.
extern "C" int fake_cublaslt_last(FakeLtCalls* out);

#endif  // BRAZE_TEST_FAKE_CUDA_FAKE_CUBLASLT_H_
