// bf16 and f16 in compiled code (docs/MIXED_PRECISION.md): the conversions Halide emits
// are bit-exact with the reference's over every 16-bit pattern; sums, means and matmuls
// accumulate in f32 (4096 ones sum to 4096, not 256); the composites compute their
// statistics in f32; a MatMul+bias+ReLU in bf16 stays within a bf16 ulp.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "braze/ops.h"
#include "gtest/gtest.h"
#include "lower/lower_test_util.h"

namespace braze {
namespace lowertest {
namespace {

// Every 16-bit pattern of `dtype`.
HostTensor AllPatterns(DType dtype) {
  HostTensor t(dtype, {65536});
  auto* bits = static_cast<uint16_t*>(t.raw_data());
  for (uint32_t b = 0; b < 65536; ++b) bits[b] = static_cast<uint16_t>(b);
  return t;
}

// The f32 values a narrowing must round right: each pattern's value, and the midpoint to
// the next pattern (a tie) with its two f32 neighbours.
HostTensor NarrowingProbes(DType dtype) {
  const HostTensor all = AllPatterns(dtype);
  std::vector<float> v;
  for (int64_t i = 0; i + 1 < all.num_elements(); ++i) {
    const double a = all.GetDouble(i), b = all.GetDouble(i + 1);
    v.push_back(static_cast<float>(a));
    if (!std::isfinite(a) || !std::isfinite(b)) continue;
    const float mid = static_cast<float>((a + b) / 2);
    v.insert(v.end(), {mid, std::nextafter(mid, -INFINITY), std::nextafter(mid, INFINITY)});
  }
  return HostTensor::From(v, {static_cast<int64_t>(v.size())});
}

// Bit-for-bit equality, a NaN equal to every NaN of its sign (the sign is kept: compiled
// narrowing made every NaN positive, the reference keeps its sign, as Eigen does).
void ExpectSameBits(const HostTensor& got, const HostTensor& want) {
  ASSERT_EQ(got.type(), want.type());
  const size_t width = SizeOf(got.dtype());
  const auto* g = static_cast<const uint8_t*>(got.raw_data());
  const auto* w = static_cast<const uint8_t*>(want.raw_data());
  int bad = 0;
  for (int64_t i = 0; i < got.num_elements() && bad < 5; ++i) {
    if (std::isnan(got.GetDouble(i)) && std::isnan(want.GetDouble(i)) &&
        std::signbit(got.GetDouble(i)) == std::signbit(want.GetDouble(i))) {
      continue;
    }
    if (std::memcmp(g + i * width, w + i * width, width) != 0) {
      ADD_FAILURE() << "element " << i << ": " << got.GetDouble(i) << " vs " << want.GetDouble(i);
      ++bad;
    }
  }
}

// Softmax, LogSoftmax, LayerNorm, BatchNorm and Gelu of `x` ([9, 37]) as `c`'s outputs.
void BuildComposites(Case& c, const HostTensor& x) {
  const DType t = x.dtype();
  Tensor in = c.Input(x);
  Tensor gamma = Const(*c.graph, HostTensor::Filled(t, {37}, 1.5));
  Tensor beta = Const(*c.graph, HostTensor::Filled(t, {37}, 0.25));
  // f32 moving statistics (the masters) for a 16-bit x: BatchNorm widens them too.
  Tensor mm = Const(*c.graph, HostTensor::RandomUniform(DType::kF32, {37}, 8, -0.5, 0.5));
  Tensor mv = Const(*c.graph, HostTensor::RandomUniform(DType::kF32, {37}, 9, 0.5, 2));
  c.outputs = {Softmax(in), LogSoftmax(in), LayerNorm(in, gamma, beta),
               BatchNorm(in, gamma, beta, mm, mv, /*training=*/false).y, Gelu(in)};
}

// Window, sequence, attention and layout ops and a Const, in `d`, as `c`'s outputs.
void BuildOtherFamilies(Case& c, DType d) {
  Tensor x = c.Input(d, {2, 7, 5, 3}, 1);
  Tensor f = c.Input(d, {3, 2, 3, 4}, 2);
  Tensor table = c.Input(d, {11, 6}, 3);
  Tensor ids = c.Input(HostTensor::From<int32_t>({3, 0, 10, 3, 7}, {5}));
  Tensor q = c.Input(d, {2, 5, 8}, 4);
  Tensor k = c.Input(d, {2, 7, 8}, 5);
  Tensor v = c.Input(d, {2, 7, 4}, 6);
  Tensor w = Const(*c.graph, HostTensor::RandomUniform(d, {6, 3}, 7));
  Tensor rows = Gather(table, ids);
  c.outputs = {Conv2D(x, f, {1, 1}, Padding::kSame),
               AvgPool(x, {3, 2}, {2, 1}, Padding::kSame),
               MaxPool(x, {2, 2}, {1, 1}),
               MatMul(rows, w),
               UnsortedSegmentSum(rows, ids, 11),
               Iota(table, 1, d) + table,
               Transpose(Concat({table, table}, 1), {1, 0}),
               ScaledDotProductAttention(q, k, v)};
}

// `x` cast to `to` compiled under SafeDefault and by the reference.
void CheckCast(const HostTensor& x, DType to) {
  Case c;
  c.outputs = {Cast(c.Input(x), to)};
  const ClusterSpec spec = SpecOf(c);
  auto want = ReferenceOutputs(spec, c.values);
  ASSERT_TRUE(want.ok()) << want.status();
  auto kernel = CompileCluster(spec, {Scheduler::kSafeDefault, 0});
  ASSERT_TRUE(kernel.ok()) << kernel.status();
  auto got = RunKernel(**kernel, c.values);
  ASSERT_TRUE(got.ok()) << got.status();
  ExpectSameBits((*got)[0], (*want)[0]);
}

TEST(Float16LowerTest, WideningIsExactForEveryPattern) {
  for (DType d : {DType::kBF16, DType::kF16}) {
    SCOPED_TRACE(DTypeName(d));
    CheckCast(AllPatterns(d), DType::kF32);
    CheckCast(AllPatterns(d), DType::kF64);
  }
}

TEST(Float16LowerTest, NarrowingRoundsAsTheReferenceNearEveryPattern) {
  for (DType d : {DType::kBF16, DType::kF16}) {
    SCOPED_TRACE(DTypeName(d));
    CheckCast(NarrowingProbes(d), d);
  }
  CheckCast(AllPatterns(DType::kBF16), DType::kF16);
  CheckCast(AllPatterns(DType::kF16), DType::kBF16);
}

// The rule docs/MIXED_PRECISION.md states: a 16-bit sum accumulates in f32. In bf16
// arithmetic 256 + 1 rounds back to 256, so a bf16 accumulator stops there.
TEST(Float16LowerTest, SumsMeansAndMatMulsAccumulateInF32) {
  for (DType d : {DType::kBF16, DType::kF16}) {
    SCOPED_TRACE(DTypeName(d));
    for (Scheduler s : AllSchedulers()) {
      SCOPED_TRACE(SchedulerName(s));
      Case c;
      Tensor ones = c.Input(HostTensor::Filled(d, {4096}, 1.0));
      Tensor row = c.Input(HostTensor::Filled(d, {1, 4096}, 1.0));
      Tensor col = c.Input(HostTensor::Filled(d, {4096, 1}, 1.0));
      Tensor small = c.Input(HostTensor::Filled(d, {64, 4096}, 1.0 / 1024));
      c.outputs = {Sum(ones, {0}), MatMul(row, col), Mean(small, {1}), Sum(small, {1})};
      const ClusterSpec spec = SpecOf(c);
      auto want = ReferenceOutputs(spec, c.values);
      ASSERT_TRUE(want.ok()) << want.status();
      EXPECT_EQ((*want)[0].GetDouble(0), 4096);
      EXPECT_EQ((*want)[1].GetDouble(0), 4096);
      EXPECT_EQ((*want)[2].GetDouble(5), 1.0 / 1024);
      EXPECT_EQ((*want)[3].GetDouble(63), 4);
      EXPECT_TRUE(CompileRunCompare(c, s, {0, 0}));
    }
  }
}

// Softmax, LogSoftmax, LayerNorm, BatchNorm and Gelu (its chain of 16-bit ops was 1% off
// at x = -2.6 in bf16, before 2026-12-02) of 16-bit inputs compute in f32: the
// result is the f32 composite's, rounded once (to within an ulp of the rounding), and
// compiled, each matches the reference within an ulp.
TEST(Float16LowerTest, CompositesComputeTheirStatisticsInF32) {
  for (DType d : {DType::kBF16, DType::kF16}) {
    SCOPED_TRACE(DTypeName(d));
    const double ulp = d == DType::kBF16 ? 0x1p-7 : 0x1p-10;
    const HostTensor x16 = HostTensor::RandomUniform(d, {9, 37}, 7, -3, 3);
    HostTensor x32(DType::kF32, x16.shape());
    for (int64_t i = 0; i < x16.num_elements(); ++i) x32.SetDouble(i, x16.GetDouble(i));
    Case c16, c32;
    BuildComposites(c16, x16);
    BuildComposites(c32, x32);
    ASSERT_TRUE(c16.graph->status().ok()) << c16.graph->status();
    for (const Tensor& t : c16.outputs) EXPECT_EQ(t.dtype(), d);
    auto r16 = ReferenceOutputs(SpecOf(c16), c16.values);
    auto r32 = ReferenceOutputs(SpecOf(c32), c32.values);
    ASSERT_TRUE(r16.ok()) << r16.status();
    ASSERT_TRUE(r32.ok()) << r32.status();
    for (size_t i = 0; i < r16->size(); ++i) {
      std::string why;
      HostTensor rounded(d, (*r32)[i].shape());
      for (int64_t k = 0; k < rounded.num_elements(); ++k) {
        rounded.SetDouble(k, (*r32)[i].GetDouble(k));
      }
      EXPECT_TRUE(AllClose((*r16)[i], rounded, ulp, 1e-6, &why)) << "output " << i << ": " << why;
    }
    EXPECT_TRUE(CompileRunCompare(c16, Scheduler::kAdams2019, {ulp, 1e-6}));
    EXPECT_TRUE(CompileRunCompare(c16, Scheduler::kSafeDefault, {ulp, 1e-6}));
  }
}

// The op families beyond elementwise and reductions in 16 bits (window, sequence,
// attention, layout, a bf16 Const): each computes in f32 and rounds once, compiled
// within an ulp of the reference under Adams2019 and the safe default.
TEST(Float16LowerTest, OtherOpFamiliesMatchTheReference) {
  for (DType d : {DType::kBF16, DType::kF16}) {
    SCOPED_TRACE(DTypeName(d));
    const double ulp = d == DType::kBF16 ? 0x1p-7 : 0x1p-10;
    Case c;
    BuildOtherFamilies(c, d);
    ASSERT_TRUE(c.graph->status().ok()) << c.graph->status();
    for (const Tensor& t : c.outputs) EXPECT_EQ(t.dtype(), d) << t.name();
    EXPECT_TRUE(CompileRunCompare(c, Scheduler::kAdams2019, {ulp, 1e-5}));
    EXPECT_TRUE(CompileRunCompare(c, Scheduler::kSafeDefault, {ulp, 1e-5}));
  }
}

// ---- OpenCL (POCL here): bf16, and f16 without cl_khr_fp16, stored as their bits ----

const Device kOpenCL{Device::Kind::kOpenCL, 0};

// `x` cast to `to` on opencl:0, bit for bit with the reference (every NaN equal).
void CheckCastOnOpenCL(const HostTensor& x, DType to) {
  Case c;
  c.outputs = {Cast(c.Input(x), to)};
  const ClusterSpec spec = SpecOf(c);
  auto want = ReferenceOutputs(spec, c.values);
  ASSERT_TRUE(want.ok()) << want.status();
  CompileOptions options;
  options.device = kOpenCL;
  auto kernel = CompileCluster(spec, options);
  ASSERT_TRUE(kernel.ok()) << kernel.status();
  auto in = DeviceTensor::Allocate(x.type(), kOpenCL);
  auto out = DeviceTensor::Allocate((*kernel)->output_types()[0], kOpenCL);
  ASSERT_TRUE(in.ok() && out.ok());
  ASSERT_TRUE((*in)->CopyFromHost(x).ok());
  ASSERT_TRUE((*kernel)->RunOnDevice({in->get()}, {out->get()}).ok());
  HostTensor got;
  ASSERT_TRUE((*out)->CopyToHost(&got).ok());
  ExpectSameBits(got, (*want)[0]);
}

// The integer conversions of compile/float16_bits.h over every pattern widened and every
// narrowing probe (ties and their neighbours, subnormals, overflow, NaN), and between
// the two 16-bit types.
TEST(Float16OpenCLTest, ConversionsAreBitExactOverEveryPattern) {
  if (absl::Status s = CheckOpenCLAvailable(); !s.ok()) GTEST_SKIP() << s.message();
  for (DType d : {DType::kBF16, DType::kF16}) {
    SCOPED_TRACE(DTypeName(d));
    const DType other = d == DType::kBF16 ? DType::kF16 : DType::kBF16;
    CheckCastOnOpenCL(AllPatterns(d), DType::kF32);
    CheckCastOnOpenCL(AllPatterns(d), other);
    CheckCastOnOpenCL(NarrowingProbes(d), d);
  }
}

// 4096 ones sum to 4096 on the device too, and the composites and the other op
// families match the reference within an ulp of their type.
TEST(Float16OpenCLTest, AccumulationCompositesAndOtherFamilies) {
  if (absl::Status s = CheckOpenCLAvailable(); !s.ok()) GTEST_SKIP() << s.message();
  for (DType d : {DType::kBF16, DType::kF16}) {
    SCOPED_TRACE(DTypeName(d));
    const double ulp = d == DType::kBF16 ? 0x1p-7 : 0x1p-10;
    Case ones;
    Tensor row = ones.Input(HostTensor::Filled(d, {1, 4096}, 1));
    ones.outputs = {Sum(row, {1}), MatMul(row, Transpose(row, {1, 0}))};
    EXPECT_TRUE(CompileRunCompareOnDevice(ones, {0, 0}, kOpenCL, true));
    Case composites;
    BuildComposites(composites, HostTensor::RandomUniform(d, {9, 37}, 7, -3, 3));
    EXPECT_TRUE(CompileRunCompareOnDevice(composites, {ulp, 1e-6}, kOpenCL, true));
    Case families;
    BuildOtherFamilies(families, d);
    EXPECT_TRUE(CompileRunCompareOnDevice(families, {ulp, 1e-5}, kOpenCL, true));
  }
}

}  // namespace
}  // namespace lowertest
}  // namespace braze
