// Braze's cuBLASLt GEMMs (device/cublas_gemm.cc) against a stand-in library
// (fake_libcublaslt.cc, found first through LD_LIBRARY_PATH, beside the stand-in
// libcuda): the descriptors, layouts, scalars and pointers Braze passes, checked against
// cuBLASLt's documented rules, and the GEMMs computed on the host and compared with the
// reference under the GPU tests' bound (common/cublas_gemm_check.h). The stand-in's BIAS
// epilogue rounds a 16-bit sum before adding the bias, as cuBLASLt 13 did on an H200, so
// these fail if a bf16 or f16 bias goes through that epilogue again. What runs on a GPU:
// device_tests' CublasGemmGpu.* (tools/gpu-check.sh).
#include <cublasLt.h>
#include <dlfcn.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "braze/device.h"
#include "braze/host_tensor.h"
#include "common/cublas_gemm_check.h"
#include "device/cublas_gemm.h"
#include "fake_cuda/fake_cublaslt.h"

namespace braze {
namespace {

using ::testing::HasSubstr;
using testing_util::CheckGemm;
using testing_util::OnDevice;
using testing_util::Upload;

// The stand-in's record function, from the libcublasLt.so.13 CublasAvailable loaded
// (RTLD_LOCAL, so not through RTLD_DEFAULT); null when that library is not the stand-in.
using LastFn = int (*)(FakeLtCalls*);
LastFn RecordFunction() {
  void* lib = dlopen("libcublasLt.so.13", RTLD_NOW | RTLD_NOLOAD);
  return lib == nullptr ? nullptr : reinterpret_cast<LastFn>(dlsym(lib, "fake_cublaslt_last"));
}

FakeLtCalls LastCalls() {
  static LastFn fn = RecordFunction();
  FakeLtCalls calls;
  if (fn != nullptr) fn(&calls);
  return calls;
}

class FakeCublasLt : public ::testing::Test {
 protected:
  void SetUp() override {
    if (std::getenv("FAKE_CUDA_LACKING") != nullptr) {
      GTEST_SKIP() << "the complete driver's case (the stand-in cuBLASLt is beside it)";
    }
    ASSERT_TRUE(CheckCudaAvailable().ok()) << CheckCudaAvailable();
    absl::Status available = CublasAvailable();
    ASSERT_TRUE(available.ok()) << available;
    // The stand-in, not NVIDIA's library (which would need a real driver).
    ASSERT_NE(RecordFunction(), nullptr)
        << "libcublasLt.so.13 is not the stand-in: LD_LIBRARY_PATH";
  }
};

GemmShape Gemm(DType dtype, int64_t batch, int64_t m, int64_t n, int64_t k, GemmEpilogue e) {
  GemmShape s;
  s.dtype = dtype;
  s.batch = batch;
  s.m = m;
  s.n = n;
  s.k = k;
  s.epilogue = e;
  return s;
}

// The GPU test's cases (SixteenBitMatchesReference), f32's bias epilogue beside them: one
// rounding, within one 16-bit ulp plus f32's accumulation-order error.
TEST_F(FakeCublasLt, EveryDTypeTransposeAndEpilogueMatchesTheReference) {
  struct Dims {
    int64_t batch, m, n, k;
  };
  const Dims dims[] = {{1, 1, 1, 1}, {3, 7, 5, 3}, {1, 33, 17, 65}, {2, 19, 23, 37}};
  uint64_t seed = 900000;
  for (DType dtype : {DType::kBF16, DType::kF16, DType::kF32}) {
    for (const Dims& d : dims) {
      for (int t = 0; t < 4; ++t) {
        for (GemmEpilogue e : {GemmEpilogue::kNone, GemmEpilogue::kBias, GemmEpilogue::kBiasRelu,
                               GemmEpilogue::kBiasGelu}) {
          GemmShape s = Gemm(dtype, d.batch, d.m, d.n, d.k, e);
          s.transpose_a = (t & 1) != 0;
          s.transpose_b = (t & 2) != 0;
          CheckGemm(s, seed);
          seed += 3;
        }
      }
    }
  }
}

// bf16 and f16 with a bias: C is the bias, [n, m] with leading dimension 0 and batch
// stride 0, beta 1, the activation alone as the epilogue and no bias pointer; the
// heuristic is asked with that C and the bias' alignment. f32 keeps RELU_BIAS, C = D.
TEST_F(FakeCublasLt, SixteenBitBiasIsABroadcastCOfLeadingDimensionZero) {
  struct Case {
    DType dtype;
    GemmEpilogue epilogue;
    uint32_t lt_epilogue;
    int lt_type;
  };
  const Case cases[] = {
      {DType::kBF16, GemmEpilogue::kBiasRelu, CUBLASLT_EPILOGUE_RELU, CUDA_R_16BF},
      {DType::kBF16, GemmEpilogue::kBias, CUBLASLT_EPILOGUE_DEFAULT, CUDA_R_16BF},
      {DType::kF16, GemmEpilogue::kBiasGelu, CUBLASLT_EPILOGUE_GELU, CUDA_R_16F},
      {DType::kF32, GemmEpilogue::kBiasRelu, CUBLASLT_EPILOGUE_RELU_BIAS, CUDA_R_32F},
  };
  uint64_t seed = 910000;
  for (const Case& c : cases) {
    SCOPED_TRACE(DTypeName(c.dtype));
    const GemmShape s = Gemm(c.dtype, 3, 10, 6, 4, c.epilogue);  // a plan of its own
    HostTensor a = HostTensor::RandomUniform(c.dtype, Shape{3, 10, 4}, seed++);
    HostTensor b = HostTensor::RandomUniform(c.dtype, Shape{3, 4, 6}, seed++);
    HostTensor bias = HostTensor::RandomUniform(c.dtype, Shape{6}, seed++);
    HostTensor out = HostTensor::Filled(c.dtype, Shape{3 * 10 * 6}, 0.0);
    OnDevice da = Upload(a, 0), db = Upload(b, 0), dbias = Upload(bias, 0), dout = Upload(out, 0);
    ASSERT_NE(dout.tensor, nullptr);
    const long heuristics = LastCalls().heuristics;
    absl::Status st = CublasGemm("fc1", s, da.address, db.address, dbias.address, dout.address);
    ASSERT_TRUE(st.ok()) << st;
    const FakeLtCalls calls = LastCalls();
    EXPECT_EQ(calls.heuristics, heuristics + 1);
    EXPECT_EQ(calls.epilogue, c.lt_epilogue);
    EXPECT_EQ(calls.heuristic_epilogue, c.lt_epilogue);
    EXPECT_EQ(calls.alpha, 1.0);
    const void* bias_ptr = reinterpret_cast<const void*>(dbias.address);
    const void* out_ptr = reinterpret_cast<const void*>(dout.address);
    EXPECT_EQ(calls.d, out_ptr);
    // D: cuBLAS' [n, m] column-major, ld n, a batch of 3 at m n apart.
    EXPECT_EQ(calls.d_layout.type, c.lt_type);
    EXPECT_EQ(calls.d_layout.rows, 6u);
    EXPECT_EQ(calls.d_layout.cols, 10u);
    EXPECT_EQ(calls.d_layout.ld, 6);
    EXPECT_EQ(calls.d_layout.batch, 3);
    EXPECT_EQ(calls.d_layout.stride, 60);
    if (c.dtype == DType::kF32) {
      EXPECT_EQ(calls.bias, bias_ptr);
      EXPECT_EQ(calls.beta, 0.0);
      EXPECT_EQ(calls.c, out_ptr);
      EXPECT_EQ(calls.c_layout.ld, 6);
      continue;
    }
    EXPECT_EQ(calls.bias, nullptr);
    EXPECT_EQ(calls.beta, 1.0);
    EXPECT_EQ(calls.c, bias_ptr);
    for (const FakeLtLayout& l : {calls.c_layout, calls.heuristic_c}) {
      EXPECT_EQ(l.type, c.lt_type);
      EXPECT_EQ(l.rows, 6u);
      EXPECT_EQ(l.cols, 10u);
      EXPECT_EQ(l.ld, 0);
      EXPECT_EQ(l.batch, 3);
      EXPECT_EQ(l.stride, 0);
    }
    EXPECT_GE(calls.heuristic_align_c, 16u);
    EXPECT_EQ(dbias.address % calls.heuristic_align_c, 0u);
  }
}

// A library offering no algorithm for the broadcast C: InvalidArgument naming the node
// (the GEMM step then runs Halide kernels, with a warning), never the bias epilogue
// that rounds twice, and nothing enqueued.
TEST_F(FakeCublasLt, NoAlgorithmForTheBroadcastCIsAStatusNotTheBiasEpilogue) {
  setenv("FAKE_CUBLASLT_NO_BROADCAST_C", "1", 1);
  const GemmShape s = Gemm(DType::kBF16, 1, 5, 9, 11, GemmEpilogue::kBiasRelu);
  HostTensor a = HostTensor::RandomUniform(DType::kBF16, Shape{5, 11}, 920000);
  HostTensor b = HostTensor::RandomUniform(DType::kBF16, Shape{11, 9}, 920001);
  HostTensor bias = HostTensor::RandomUniform(DType::kBF16, Shape{9}, 920002);
  HostTensor out = HostTensor::Filled(DType::kBF16, Shape{45}, 0.0);
  OnDevice da = Upload(a, 0), db = Upload(b, 0), dbias = Upload(bias, 0), dout = Upload(out, 0);
  const FakeLtCalls before = LastCalls();
  absl::Status st = CublasGemm("dense_3", s, da.address, db.address, dbias.address, dout.address);
  unsetenv("FAKE_CUBLASLT_NO_BROADCAST_C");
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << st;
  EXPECT_THAT(st.message(), HasSubstr("dense_3: cuBLASLt has no algorithm"));
  const FakeLtCalls after = LastCalls();
  EXPECT_EQ(after.heuristics, before.heuristics + 1);
  EXPECT_EQ(after.heuristic_c.ld, 0);
  EXPECT_EQ(after.matmuls, before.matmuls);
  // Offered again, the same GEMM builds its plan and runs.
  absl::Status again =
      CublasGemm("dense_3", s, da.address, db.address, dbias.address, dout.address);
  EXPECT_TRUE(again.ok()) << again;
  EXPECT_EQ(LastCalls().matmuls, before.matmuls + 1);
}

}  // namespace
}  // namespace braze
