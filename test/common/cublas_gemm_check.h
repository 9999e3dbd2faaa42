// A cuBLASLt GEMM run on random inputs and checked element by element against a
// double-precision loop, with docs/MIXED_PRECISION.md's bound for bf16 and f16: shared by
// the GPU tests (device/cublas_gemm_test.cc) and the stand-in library's
// (fake_cuda/cublas_gemm_fake_test.cc), which run the same checks without a GPU.
#ifndef BRAZE_TEST_COMMON_CUBLAS_GEMM_CHECK_H_
#define BRAZE_TEST_COMMON_CUBLAS_GEMM_CHECK_H_

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <vector>

#include "absl/strings/str_cat.h"
#include "braze/device.h"
#include "braze/host_tensor.h"
#include "device/cublas_gemm.h"
#include "device/device_tensor.h"

namespace braze {
namespace testing_util {

inline double GeluTanh(double x) {
  const double k = std::sqrt(2.0 / M_PI);
  return 0.5 * x * (1.0 + std::tanh(k * (x + 0.044715 * x * x * x)));
}

// out[p] = epilogue(op(a[p]) op(b[p]) + bias) in double, row-major, as documented, with
// each element's sum of the magnitudes of its terms (products and bias): the scale of
// f32's accumulation-order error.
struct Expected {
  std::vector<double> value, magnitude;
};

inline Expected Reference(const GemmShape& s, const HostTensor& a, const HostTensor& b,
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
inline double Ulp16(DType dtype, double x) {
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
inline double Bound(const GemmShape& s, double got, double want, double mag) {
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
inline constexpr double kPadding = 12288.0;

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

inline OnDevice Upload(const HostTensor& host, int64_t offset) {
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
inline void CheckGemm(const GemmShape& s, uint64_t seed, int64_t offset = 0) {
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
    EXPECT_THAT(st.message(), ::testing::HasSubstr("16-byte"));
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

}  // namespace testing_util
}  // namespace braze

#endif  // BRAZE_TEST_COMMON_CUBLAS_GEMM_CHECK_H_
