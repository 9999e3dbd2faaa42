// cuBLASLt GEMMs (device/cublas_gemm.h). The argument checks run everywhere: they come
// before anything is loaded. Without a CUDA driver CublasAvailable says why and
// CublasGemm fails cleanly. With one, GEMMs of odd shapes, every transpose combination,
// batches and every epilogue are compared with a double-precision loop.
#include "device/cublas_gemm.h"

#include <dlfcn.h>

#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "braze/device.h"
#include "braze/host_tensor.h"
#include "device/device_tensor.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace braze {
namespace {

using ::testing::HasSubstr;

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
  absl::Status gemm = CublasGemm("mm", Shape3(DType::kF32, 2, 3, 4), 256, 512, 0, 768);
  EXPECT_EQ(gemm.code(), absl::StatusCode::kFailedPrecondition) << gemm;
  EXPECT_THAT(gemm.message(), HasSubstr("mm: cuBLASLt is not available"));
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

double GeluTanh(double x) {
  const double k = std::sqrt(2.0 / M_PI);
  return 0.5 * x * (1.0 + std::tanh(k * (x + 0.044715 * x * x * x)));
}

// out[p] = epilogue(op(a[p]) op(b[p]) + bias) in double, row-major, as documented.
std::vector<double> Reference(const GemmShape& s, const HostTensor& a, const HostTensor& b,
                              const HostTensor* bias) {
  std::vector<double> out(s.batch * s.m * s.n);
  for (int64_t p = 0; p < s.batch; ++p) {
    for (int64_t i = 0; i < s.m; ++i) {
      for (int64_t j = 0; j < s.n; ++j) {
        double acc = 0;
        for (int64_t l = 0; l < s.k; ++l) {
          int64_t ai = p * s.m * s.k + (s.transpose_a ? l * s.m + i : i * s.k + l);
          int64_t bi = p * s.k * s.n + (s.transpose_b ? j * s.k + l : l * s.n + j);
          acc += a.GetDouble(ai) * b.GetDouble(bi);
        }
        if (s.epilogue != GemmEpilogue::kNone) acc += bias->GetDouble(j);
        if (s.epilogue == GemmEpilogue::kBiasRelu) acc = acc > 0 ? acc : 0;
        if (s.epilogue == GemmEpilogue::kBiasGelu) acc = GeluTanh(acc);
        out[(p * s.m + i) * s.n + j] = acc;
      }
    }
  }
  return out;
}

// What the padding around every uploaded operand holds.
constexpr double kPadding = 12345.0;

// A device copy of `host` with `offset` padding elements before and after it, so that
// the address passed to cuBLAS (returned) is only as aligned as the offset makes it.
// The padding is kPadding, not HostTensor's zeros: on an H200 the output's leading
// padding read 0 where 12345 was expected because this filled only the values, so
// CheckGemm compared untouched zeros with 12345 (every output matched the reference;
// cuBLASLt had not written there).
struct OnDevice {
  std::unique_ptr<DeviceTensor> tensor;
  uint64_t address = 0;
};

OnDevice Upload(const HostTensor& host, int64_t offset) {
  OnDevice d;
  HostTensor padded =
      HostTensor::Filled(host.dtype(), Shape{host.num_elements() + 2 * offset}, kPadding);
  for (int64_t i = 0; i < host.num_elements(); ++i) padded.SetDouble(i + offset, host.GetDouble(i));
  auto t = DeviceTensor::Allocate(padded.type());
  EXPECT_TRUE(t.ok()) << t.status();
  if (!t.ok()) return d;
  d.tensor = std::move(*t);
  absl::Status copied = d.tensor->CopyFromHost(padded);
  EXPECT_TRUE(copied.ok()) << copied;
  d.address = d.tensor->device_address() + offset * SizeOf(host.dtype());
  return d;
}

// Runs `s` on random inputs from `seed` and compares with Reference. `offset` elements
// of padding misalign every operand.
void CheckGemm(const GemmShape& s, uint64_t seed, int64_t offset = 0) {
  SCOPED_TRACE(absl::StrCat(DTypeName(s.dtype), " batch ", s.batch, " m ", s.m, " n ", s.n, " k ",
                            s.k, s.transpose_a ? " a^T" : "", s.transpose_b ? " b^T" : "", " ",
                            GemmEpilogueName(s.epilogue), " seed ", seed, " offset ", offset));
  const Shape a_shape = s.transpose_a ? Shape{s.batch, s.k, s.m} : Shape{s.batch, s.m, s.k};
  const Shape b_shape = s.transpose_b ? Shape{s.batch, s.n, s.k} : Shape{s.batch, s.k, s.n};
  HostTensor a = HostTensor::RandomUniform(s.dtype, a_shape, seed);
  HostTensor b = HostTensor::RandomUniform(s.dtype, b_shape, seed + 1);
  HostTensor bias = HostTensor::RandomUniform(s.dtype, Shape{s.n}, seed + 2);
  HostTensor out_init = HostTensor::Filled(s.dtype, Shape{s.batch * s.m * s.n}, kPadding);
  OnDevice da = Upload(a, offset), db = Upload(b, offset), dbias = Upload(bias, offset);
  OnDevice dout = Upload(out_init, offset);
  if (dout.tensor == nullptr || da.tensor == nullptr || db.tensor == nullptr) return;
  const bool has_bias = s.epilogue != GemmEpilogue::kNone;
  absl::Status st =
      CublasGemm("gemm", s, da.address, db.address, has_bias ? dbias.address : 0, dout.address);
  if (has_bias && dbias.address % 16 != 0) {  // refused before cuBLASLt sees it
    EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << st;
    EXPECT_THAT(st.message(), HasSubstr("16-byte"));
    return;
  }
  ASSERT_TRUE(st.ok()) << st;
  absl::Status synced = CudaSynchronize();
  ASSERT_TRUE(synced.ok()) << synced;
  HostTensor got;
  absl::Status copied = dout.tensor->CopyToHost(&got);
  ASSERT_TRUE(copied.ok()) << copied;

  // f32 accumulates in FP32 (no TF32): 1e-4 holds for k <= 65 on inputs in [-1, 1).
  // cuBLASLt's GELU is the tanh form (as braze::Gelu), but in f32 it may evaluate tanh
  // with the hardware approximation (tanh.approx.f32, relative error ~2^-11), worth up
  // to ~2e-3 on outputs of magnitude ~8: a looser bound for that epilogue only. That
  // bound cannot tell the tanh form from the erf form (they differ by at most 4.7e-4);
  // the f64 case does, at 1e-6, which allows an f64 GELU evaluated internally in f32.
  double tol = s.dtype == DType::kF64 ? 1e-10 : 1e-4;
  if (s.epilogue == GemmEpilogue::kBiasGelu) tol = s.dtype == DType::kF64 ? 1e-6 : 5e-3;
  const std::vector<double> want = Reference(s, a, b, has_bias ? &bias : nullptr);
  int failures = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    const double v = got.GetDouble(static_cast<int64_t>(i) + offset);
    if (!(std::fabs(v - want[i]) <= tol + tol * std::fabs(want[i]))) {
      ADD_FAILURE() << "out[" << i << "] = " << v << ", want " << want[i];
      if (++failures == 5) return;
    }
  }
  // The padding around the output is untouched.
  const int64_t end = offset + static_cast<int64_t>(want.size());
  for (int64_t i = 0; i < offset; ++i) {
    EXPECT_EQ(got.GetDouble(i), kPadding) << "before out[0], at " << i - offset;
    EXPECT_EQ(got.GetDouble(end + i), kPadding)
        << "after out[" << want.size() - 1 << "], at +" << i + 1;
  }
}

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

// Operands only 4- or 8-byte aligned: the heuristic is told, and picks accordingly; a
// misaligned bias is refused with InvalidArgument (CheckGemm expects that), so the
// caller runs Halide instead.
TEST(CublasGemmGpu, MisalignedOperands) {
  absl::Status cuda = CheckCudaAvailable();
  if (!cuda.ok()) GTEST_SKIP() << cuda.message();
  PrimaryContext context;
  ASSERT_TRUE(context.ok()) << "cannot make device 0's primary context current";
  for (DType dtype : {DType::kF32, DType::kF64}) {
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
