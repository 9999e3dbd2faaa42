// cuBLASLt GEMMs (device/cublas_gemm.h). The argument checks run everywhere: they come
// before anything is loaded. Without a CUDA driver CublasAvailable says why and
// CublasGemm fails cleanly. With one, GEMMs of odd shapes, every transpose combination,
// batches and every epilogue are compared with a double-precision loop, in f32 and f64
// and in bf16 and f16 (f32 accumulation, one rounding: docs/MIXED_PRECISION.md's bound).
#include "device/cublas_gemm.h"

#include <dlfcn.h>

#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "braze/device.h"
#include "braze/host_tensor.h"
#include "common/cublas_gemm_check.h"
#include "device/device_tensor.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace braze {
namespace {

using ::testing::HasSubstr;
using testing_util::CheckGemm;

GemmShape Shape3(DType dtype, int64_t m, int64_t n, int64_t k) {
  GemmShape s;
  s.dtype = dtype;
  s.m = m;
  s.n = n;
  s.k = k;
  return s;
}

TEST(CublasGemm, EpilogueNames) {
  EXPECT_STREQ(GemmEpilogueName(GemmEpilogue::kNone), "none");
  EXPECT_STREQ(GemmEpilogueName(GemmEpilogue::kBias), "bias");
  EXPECT_STREQ(GemmEpilogueName(GemmEpilogue::kBiasRelu), "bias+relu");
  EXPECT_STREQ(GemmEpilogueName(GemmEpilogue::kBiasGelu), "bias+gelu");
}

TEST(CublasGemm, UnavailableWithoutDriver) {
  if (CheckCudaAvailable().ok()) GTEST_SKIP() << "a CUDA driver and device are present";
  absl::Status available = CublasAvailable();
  EXPECT_EQ(available.code(), absl::StatusCode::kFailedPrecondition) << available;
  EXPECT_THAT(available.message(), HasSubstr("cuBLASLt is not available: "));
  EXPECT_EQ(CublasAvailable(), available);  // kept, not retried
  // A valid GEMM; the (fake) pointers are never touched.
  for (DType dtype : {DType::kF32, DType::kBF16, DType::kF16}) {
    absl::Status gemm = CublasGemm("mm", Shape3(dtype, 2, 3, 4), 256, 512, 0, 768);
    EXPECT_EQ(gemm.code(), absl::StatusCode::kFailedPrecondition) << gemm;
    EXPECT_THAT(gemm.message(), HasSubstr("mm: cuBLASLt is not available"));
  }
}

TEST(CublasGemm, TakesTheFloatDTypes) {
  for (DType dtype : {DType::kF32, DType::kF64, DType::kBF16, DType::kF16}) {
    EXPECT_TRUE(IsCublasGemmDType(dtype)) << DTypeName(dtype);
  }
  EXPECT_FALSE(IsCublasGemmDType(DType::kI32));
  EXPECT_FALSE(IsCublasGemmDType(DType::kBool));
}

// These come before loading anything, so they hold with or without a GPU.
TEST(CublasGemm, RejectsWhatItDoesNotTake) {
  auto expect_invalid = [](const GemmShape& s, uint64_t bias, const std::string& what) {
    absl::Status st = CublasGemm("node7", s, 256, 512, bias, 768);
    EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << st;
    EXPECT_THAT(st.message(), HasSubstr("node7: "));
    EXPECT_THAT(st.message(), HasSubstr(what));
  };
  expect_invalid(Shape3(DType::kI32, 2, 3, 4), 0, "not i32");
  expect_invalid(Shape3(DType::kBool, 2, 3, 4), 0, "not bool");
  expect_invalid(Shape3(DType::kF32, 2, 3, 0), 0, "k == 0 is not taken by cuBLAS");
  GemmShape bias_k0 = Shape3(DType::kF64, 2, 3, 0);
  bias_k0.epilogue = GemmEpilogue::kBiasRelu;
  expect_invalid(bias_k0, 1024, "k == 0");
  expect_invalid(Shape3(DType::kF32, -1, 3, 4), 0, "negative");
  GemmShape negative_batch = Shape3(DType::kF32, 2, 3, 4);
  negative_batch.batch = -2;
  expect_invalid(negative_batch, 0, "negative");
  expect_invalid(Shape3(DType::kF32, int64_t{1} << 31, 3, 4), 0, "32-bit");
  GemmShape no_bias = Shape3(DType::kF32, 2, 3, 4);
  no_bias.epilogue = GemmEpilogue::kBias;
  expect_invalid(no_bias, 0, "null bias");
  expect_invalid(no_bias, 1028, "the bias is not 16-byte aligned");
  GemmShape bf16_bias = Shape3(DType::kBF16, 2, 3, 4);
  bf16_bias.epilogue = GemmEpilogue::kBiasRelu;
  expect_invalid(bf16_bias, 1026, "the bias is not 16-byte aligned");
  expect_invalid(Shape3(DType::kF16, 2, 3, 0), 0, "k == 0");
  absl::Status null_a = CublasGemm("node7", Shape3(DType::kF32, 2, 3, 4), 0, 512, 0, 768);
  EXPECT_EQ(null_a.code(), absl::StatusCode::kInvalidArgument) << null_a;
}

TEST(CublasGemm, EmptyOutputIsNoWork) {
  // Nothing is loaded or dereferenced: OK everywhere, null pointers included.
  EXPECT_TRUE(CublasGemm("e", Shape3(DType::kF32, 0, 3, 4), 0, 0, 0, 0).ok());
  EXPECT_TRUE(CublasGemm("e", Shape3(DType::kF64, 2, 0, 4), 0, 0, 0, 0).ok());
  EXPECT_TRUE(CublasGemm("e", Shape3(DType::kF32, 0, 3, 0), 0, 0, 0, 0).ok());
  GemmShape batch0 = Shape3(DType::kF32, 2, 3, 4);
  batch0.batch = 0;
  batch0.epilogue = GemmEpilogue::kBiasGelu;
  EXPECT_TRUE(CublasGemm("e", batch0, 0, 0, 0, 0).ok());
}

// ---------------------------------------------------------------------------------------
// On a GPU.

// Device 0's primary context, current on this thread while it lives: CublasGemm's
// contract, which Braze's runtime meets the same way (cuCtxPushCurrent of the primary).
class PrimaryContext {
 public:
  PrimaryContext() {
    void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_GLOBAL);
    if (lib == nullptr) return;
    auto device_get = reinterpret_cast<int (*)(int*, int)>(dlsym(lib, "cuDeviceGet"));
    auto retain = reinterpret_cast<int (*)(void**, int)>(dlsym(lib, "cuDevicePrimaryCtxRetain"));
    auto push = reinterpret_cast<int (*)(void*)>(dlsym(lib, "cuCtxPushCurrent_v2"));
    pop_ = reinterpret_cast<int (*)(void**)>(dlsym(lib, "cuCtxPopCurrent_v2"));
    release_ = reinterpret_cast<int (*)(int)>(dlsym(lib, "cuDevicePrimaryCtxRelease_v2"));
    if (device_get == nullptr || retain == nullptr || push == nullptr || pop_ == nullptr ||
        release_ == nullptr || device_get(&device_, 0) != 0 || retain(&context_, device_) != 0) {
      return;
    }
    retained_ = true;
    pushed_ = push(context_) == 0;
  }
  ~PrimaryContext() {
    void* old = nullptr;
    if (pushed_) pop_(&old);
    if (retained_) release_(device_);
  }
  bool ok() const { return pushed_; }

 private:
  int (*pop_)(void**) = nullptr;
  int (*release_)(int) = nullptr;
  int device_ = 0;
  void* context_ = nullptr;
  bool retained_ = false;
  bool pushed_ = false;
};

TEST(CublasGemmGpu, MatchesReference) {
  absl::Status cuda = CheckCudaAvailable();
  if (!cuda.ok()) GTEST_SKIP() << cuda.message();
  PrimaryContext context;
  ASSERT_TRUE(context.ok()) << "cannot make device 0's primary context current";
  absl::Status available = CublasAvailable();
  ASSERT_TRUE(available.ok()) << available;

  struct Dims {
    int64_t batch, m, n, k;
  };
  const Dims dims[] = {{1, 1, 1, 1}, {1, 7, 5, 3}, {1, 33, 17, 65}, {3, 7, 5, 3}, {3, 33, 17, 65}};
  const GemmEpilogue epilogues[] = {GemmEpilogue::kNone, GemmEpilogue::kBias,
                                    GemmEpilogue::kBiasRelu, GemmEpilogue::kBiasGelu};
  uint64_t seed = 1;
  for (DType dtype : {DType::kF32, DType::kF64}) {
    for (const Dims& d : dims) {
      for (bool ta : {false, true}) {
        for (bool tb : {false, true}) {
          for (GemmEpilogue e : epilogues) {
            GemmShape s = Shape3(dtype, d.m, d.n, d.k);
            s.batch = d.batch;
            s.transpose_a = ta;
            s.transpose_b = tb;
            s.epilogue = e;
            CheckGemm(s, seed);
            // Again with new buffers and values: the cached plan, a new bias pointer.
            CheckGemm(s, seed + 100000);
            seed += 3;
          }
        }
      }
    }
  }
}

// bf16 and f16 (CUDA_R_16BF, CUDA_R_16F; FP32 accumulation, one rounding) in the same
// shapes, odd, prime and tiny, every transpose and epilogue, plus one whose k (257) spans
// several of a tensor-core kernel's k-tiles.
TEST(CublasGemmGpu, SixteenBitMatchesReference) {
  absl::Status cuda = CheckCudaAvailable();
  if (!cuda.ok()) GTEST_SKIP() << cuda.message();
  PrimaryContext context;
  ASSERT_TRUE(context.ok()) << "cannot make device 0's primary context current";
  absl::Status available = CublasAvailable();
  ASSERT_TRUE(available.ok()) << available;
  struct Dims {
    int64_t batch, m, n, k;
  };
  const Dims dims[] = {{1, 1, 1, 1}, {1, 7, 5, 3},    {1, 33, 17, 65},
                       {3, 7, 5, 3}, {3, 33, 17, 65}, {1, 67, 131, 257}};
  const GemmEpilogue epilogues[] = {GemmEpilogue::kNone, GemmEpilogue::kBias,
                                    GemmEpilogue::kBiasRelu, GemmEpilogue::kBiasGelu};
  uint64_t seed = 500000;
  for (DType dtype : {DType::kBF16, DType::kF16}) {
    for (const Dims& d : dims) {
      for (bool ta : {false, true}) {
        for (bool tb : {false, true}) {
          for (GemmEpilogue e : epilogues) {
            GemmShape s = Shape3(dtype, d.m, d.n, d.k);
            s.batch = d.batch;
            s.transpose_a = ta;
            s.transpose_b = tb;
            s.epilogue = e;
            CheckGemm(s, seed);
            CheckGemm(s, seed + 100000);  // the cached plan, a new bias pointer
            seed += 3;
          }
        }
      }
    }
  }
}

// Operands only 4- or 8-byte aligned (2- or 6-byte in 16 bits): the heuristic is told,
// and picks accordingly; a
// misaligned bias is refused with InvalidArgument (CheckGemm expects that), so the
// caller runs Halide instead.
TEST(CublasGemmGpu, MisalignedOperands) {
  absl::Status cuda = CheckCudaAvailable();
  if (!cuda.ok()) GTEST_SKIP() << cuda.message();
  PrimaryContext context;
  ASSERT_TRUE(context.ok()) << "cannot make device 0's primary context current";
  for (DType dtype : {DType::kF32, DType::kF64, DType::kBF16, DType::kF16}) {
    GemmShape s = Shape3(dtype, 33, 17, 65);
    s.batch = 3;
    s.transpose_b = true;
    s.epilogue = GemmEpilogue::kBiasRelu;
    CheckGemm(s, 7, /*offset=*/1);
    s.batch = 1;
    s.epilogue = GemmEpilogue::kNone;
    CheckGemm(s, 9, /*offset=*/3);
  }
}

}  // namespace
}  // namespace braze
