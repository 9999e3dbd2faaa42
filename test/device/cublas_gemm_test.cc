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

double GeluTanh(double x) {
  const double k = std::sqrt(2.0 / M_PI);
  return 0.5 * x * (1.0 + std::tanh(k * (x + 0.044715 * x * x * x)));
}

// out[p] = epilogue(op(a[p]) op(b[p]) + bias) in double, row-major, as documented, with
// each element's sum of the magnitudes of its terms (products and bias): the scale of
// f32's accumulation-order error.
struct Expected {
  std::vector<double> value, magnitude;
};

Expected Reference(const GemmShape& s, const HostTensor& a, const HostTensor& b,
                   const HostTensor* bias) {
  Expected out;
  out.value.resize(s.batch * s.m * s.n);
  out.magnitude.resize(out.value.size());
  for (int64_t p = 0; p < s.batch; ++p) {
    for (int64_t i = 0; i < s.m; ++i) {
      for (int64_t j = 0; j < s.n; ++j) {
        double acc = 0, mag = 0;
        for (int64_t l = 0; l < s.k; ++l) {
          int64_t ai = p * s.m * s.k + (s.transpose_a ? l * s.m + i : i * s.k + l);
          int64_t bi = p * s.k * s.n + (s.transpose_b ? j * s.k + l : l * s.n + j);
          acc += a.GetDouble(ai) * b.GetDouble(bi);
          mag += std::fabs(a.GetDouble(ai) * b.GetDouble(bi));
        }
        if (s.epilogue != GemmEpilogue::kNone) {
          acc += bias->GetDouble(j);
          mag += std::fabs(bias->GetDouble(j));
        }
        if (s.epilogue == GemmEpilogue::kBiasRelu) acc = acc > 0 ? acc : 0;
        if (s.epilogue == GemmEpilogue::kBiasGelu) acc = GeluTanh(acc);
        out.value[(p * s.m + i) * s.n + j] = acc;
        out.magnitude[(p * s.m + i) * s.n + j] = mag;
      }
    }
  }
  return out;
}

// One ulp of a 16-bit float at |x| (the subnormals' step at and below the normals').
double Ulp16(DType dtype, double x) {
  const bool bf16 = dtype == DType::kBF16;
  const int min_exp = bf16 ? -126 : -14, mantissa = bf16 ? 7 : 10;
  x = std::fabs(x);
  const int e = x == 0 || !std::isfinite(x) ? min_exp : std::max(std::ilogb(x), min_exp);
  return std::ldexp(1.0, e - mantissa);
}

// How far a GEMM's element `got` may be from the exact `want` (sum of term magnitudes
// `mag`, k terms). f32: 1e-4 holds for k <= 65 on inputs in [-1, 1); f64: 1e-10.
// bf16 and f16 accumulate in f32 and round once (docs/MIXED_PRECISION.md): one ulp of the
// type at the larger of the two (the rounding, with room for an f32 value on the other
// side of a boundary) plus the f32 accumulation-order error, k * 2^-23 * mag (each
// product of two 16-bit values is exact in f32).
// cuBLASLt's GELU is the tanh form (as braze::Gelu), but in f32 it may evaluate tanh
// with the hardware approximation (tanh.approx.f32, relative error ~2^-11), worth up
// to ~2e-3 on outputs of magnitude ~8: a looser bound for that epilogue only. That
// bound cannot tell the tanh form from the erf form (they differ by at most 4.7e-4);
// the f64 case does, at 1e-6, which allows an f64 GELU evaluated internally in f32.
double Bound(const GemmShape& s, double got, double want, double mag) {
  const bool gelu = s.epilogue == GemmEpilogue::kBiasGelu;
  if (s.dtype == DType::kF64) {
    const double tol = gelu ? 1e-6 : 1e-10;
    return tol + tol * std::fabs(want);
  }
  const double gelu_tol = gelu ? 5e-3 + 5e-3 * std::fabs(want) : 0;
  if (s.dtype == DType::kF32) return gelu ? gelu_tol : 1e-4 + 1e-4 * std::fabs(want);
  return Ulp16(s.dtype, std::max(std::fabs(got), std::fabs(want))) + s.k * std::ldexp(mag, -23) +
         gelu_tol;
}

// What the padding around every uploaded operand holds: exact in every float dtype
// (12345, the value before bf16 and f16, rounds to 12352 and 12344 in them).
constexpr double kPadding = 12288.0;

// A device copy of `host` with `offset` padding elements before and after it, so that
// the address passed to cuBLAS (returned) is only as aligned as the offset makes it.
// The padding is kPadding, not HostTensor's zeros: on an H200 the output's leading
// padding read 0 where 12345 (kPadding then) was expected because this filled only the values, so
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

  const Expected expected = Reference(s, a, b, has_bias ? &bias : nullptr);
  const std::vector<double>& want = expected.value;
  int failures = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    const double v = got.GetDouble(static_cast<int64_t>(i) + offset);
    const double bound = Bound(s, v, want[i], expected.magnitude[i]);
    if (!(std::fabs(v - want[i]) <= bound)) {
      ADD_FAILURE() << "out[" << i << "] = " << v << ", want " << want[i] << " (bound " << bound
                    << ")";
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
