// The f32 <-> bf16 / f16 conversions of braze/dtype.h (Eigen's) against second
// implementations: Halide's bfloat16_t / float16_t and, for f16, the F16C instructions.
// Exhaustive over the 65536 16-bit patterns: each widened, and each pattern's f32 value,
// the midpoints to its neighbours (the ties) and the f32 values one ulp either side of
// them narrowed.
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "Halide.h"
#include "braze/dtype.h"
#include "braze/host_tensor.h"
#include "gtest/gtest.h"

namespace braze {
namespace {

uint32_t Bits(float f) {
  uint32_t b;
  std::memcpy(&b, &f, 4);
  return b;
}

float FromBits(uint32_t b) {
  float f;
  std::memcpy(&f, &b, 4);
  return f;
}

bool IsNan16(uint16_t b, bool bf16) {
  return bf16 ? (b & 0x7f80) == 0x7f80 && (b & 0x7f) != 0
              : (b & 0x7c00) == 0x7c00 && (b & 0x3ff) != 0;
}

// Every f32 a narrowing must get right near 16-bit pattern b: its value, the midpoints
// to the next pattern up (a tie) and one f32 ulp either side of it.
std::vector<float> ProbesNear(float v, float next) {
  std::vector<float> out = {v};
  if (!std::isfinite(v) || !std::isfinite(next)) return out;
  const float mid = static_cast<float>((static_cast<double>(v) + next) / 2);
  out.push_back(mid);
  out.push_back(std::nextafter(mid, -INFINITY));
  out.push_back(std::nextafter(mid, INFINITY));
  return out;
}

__attribute__((target("f16c"))) uint16_t F16cNarrow(float v) {
  return _cvtss_sh(v, _MM_FROUND_TO_NEAREST_INT);
}
__attribute__((target("f16c"))) float F16cWiden(uint16_t b) { return _cvtsh_ss(b); }

bool HasF16c() { return __builtin_cpu_supports("f16c"); }

TEST(Float16ConversionTest, BF16WidensLikeHalideForAllPatterns) {
  for (uint32_t b = 0; b < 65536; ++b) {
    const float ours = BF16BitsToFloat(static_cast<uint16_t>(b));
    const float halide = static_cast<float>(Halide::bfloat16_t::make_from_bits(b));
    if (IsNan16(b, true)) {
      EXPECT_TRUE(std::isnan(ours)) << b;
      EXPECT_TRUE(std::isnan(halide)) << b;
      continue;
    }
    ASSERT_EQ(Bits(ours), Bits(halide)) << "pattern " << b;
    ASSERT_EQ(Bits(ours), b << 16) << "pattern " << b;  // widening is a shift
  }
}

TEST(Float16ConversionTest, BF16NarrowsLikeHalideNearAllPatterns) {
  int64_t checked = 0;
  for (uint32_t b = 0; b < 65536; ++b) {
    if (IsNan16(b, true)) continue;
    const float v = BF16BitsToFloat(b);
    const float next = BF16BitsToFloat(static_cast<uint16_t>(b + 1));
    for (float p : ProbesNear(v, next)) {
      const uint16_t ours = FloatToBF16Bits(p);
      const uint16_t halide = Halide::bfloat16_t(p).to_bits();
      ASSERT_EQ(ours, halide) << "f32 " << p << " (bits " << Bits(p) << ")";
      ++checked;
    }
    ASSERT_EQ(FloatToBF16Bits(v), b) << "round trip of pattern " << b;
  }
  EXPECT_GT(checked, 200000);
}

TEST(Float16ConversionTest, F16WidensLikeF16cAndHalideForAllPatterns) {
  for (uint32_t b = 0; b < 65536; ++b) {
    const float ours = F16BitsToFloat(static_cast<uint16_t>(b));
    const float halide = static_cast<float>(Halide::float16_t::make_from_bits(b));
    if (IsNan16(b, false)) {
      EXPECT_TRUE(std::isnan(ours)) << b;
      continue;
    }
    ASSERT_EQ(Bits(ours), Bits(halide)) << "pattern " << b;
    if (HasF16c()) ASSERT_EQ(Bits(ours), Bits(F16cWiden(b))) << "pattern " << b;
  }
}

TEST(Float16ConversionTest, F16NarrowsLikeF16cAndHalideNearAllPatterns) {
  int64_t checked = 0;
  for (uint32_t b = 0; b < 65536; ++b) {
    if (IsNan16(b, false)) continue;
    const float v = F16BitsToFloat(b);
    const float next = F16BitsToFloat(static_cast<uint16_t>(b + 1));
    for (float p : ProbesNear(v, next)) {
      const uint16_t ours = FloatToF16Bits(p);
      ASSERT_EQ(ours, Halide::float16_t(p).to_bits()) << "f32 " << p << " (bits " << Bits(p) << ")";
      if (HasF16c()) ASSERT_EQ(ours, F16cNarrow(p)) << "f32 " << p;
      ++checked;
    }
    ASSERT_EQ(FloatToF16Bits(v), b) << "round trip of pattern " << b;
  }
  EXPECT_GT(checked, 200000);
}

// Values no 16-bit pattern sits near: overflow to infinity, underflow through the
// subnormals to signed zero, NaN stays NaN, and a sweep of f32 exponents.
TEST(Float16ConversionTest, NarrowsExtremesLikeTheSecondImplementations) {
  std::vector<float> v = {0.0f,      -0.0f,    INFINITY, -INFINITY, 65504.0f, 65520.0f,
                          65519.99f, 1e-8f,    -1e-8f,   3e38f,     -3e38f,   1e-45f,
                          5.96e-8f,  2.98e-8f, 2.99e-8f, 1e-40f,    -1e-40f};
  for (uint32_t bits = 0; bits < 0xff800000u; bits += 0x00012345u) v.push_back(FromBits(bits));
  for (float p : v) {
    if (std::isnan(p)) {
      // Halide's bfloat16_t truncates a NaN's payload: 0x7f800001 became infinity.
      EXPECT_TRUE(IsNan16(FloatToBF16Bits(p), true)) << Bits(p);
      EXPECT_TRUE(IsNan16(FloatToF16Bits(p), false)) << Bits(p);
      continue;
    }
    ASSERT_EQ(FloatToBF16Bits(p), Halide::bfloat16_t(p).to_bits()) << p;
    ASSERT_EQ(FloatToF16Bits(p), Halide::float16_t(p).to_bits()) << p;
    if (HasF16c()) ASSERT_EQ(FloatToF16Bits(p), F16cNarrow(p)) << p;
  }
  EXPECT_EQ(FloatToF16Bits(1e6f), 0x7c00);  // overflow: +inf
  EXPECT_EQ(FloatToBF16Bits(std::numeric_limits<float>::max()), 0x7f80);
  EXPECT_EQ(FloatToF16Bits(-1e-9f), 0x8000);  // underflow keeps the sign
  EXPECT_TRUE(std::isnan(BF16BitsToFloat(FloatToBF16Bits(NAN))));
  EXPECT_TRUE(std::isnan(F16BitsToFloat(FloatToF16Bits(-NAN))));
  EXPECT_TRUE(IsNan16(FloatToBF16Bits(FromBits(0x7f800001u)), true));  // a NaN whose top bits are 0
}

TEST(Float16ConversionTest, HostTensorStoresTheRoundedBits) {
  HostTensor t = HostTensor::From<double>({1.0, 1.00390625, 1.01171875, -0.0, 1e10}, {5});
  HostTensor b(DType::kBF16, {5});
  HostTensor h(DType::kF16, {5});
  for (int i = 0; i < 5; ++i) {
    b.SetDouble(i, t.GetDouble(i));
    h.SetDouble(i, t.GetDouble(i));
  }
  EXPECT_EQ(SizeOf(DType::kBF16), 2u);
  EXPECT_EQ(b.num_bytes(), 10u);
  EXPECT_EQ(b.data<BFloat16>()[1].bits, 0x3f80);  // 1 + 2^-8: a tie, to even (1)
  EXPECT_EQ(b.data<BFloat16>()[2].bits, 0x3f82);  // 1 + 3 * 2^-8: a tie, to even (1 + 2^-6)
  EXPECT_EQ(b.data<BFloat16>()[3].bits, 0x8000);
  EXPECT_EQ(h.GetDouble(1), 1.00390625);  // exact in f16
  EXPECT_TRUE(std::isinf(h.GetDouble(4)));
  EXPECT_EQ(b.GetDouble(4), 9999220736.0);  // 1e10 to the nearest bf16
  EXPECT_EQ(b.DebugString(2), "bf16[5] {1, 1, ...}");
  EXPECT_EQ(HostTensor::From<BFloat16>({BFloat16(2.5)}, {1}).GetDouble(0), 2.5);
}

// RandomUniform's draws are in [lo, hi) after rounding to the dtype: rounded to bf16,
// about one in 500 draws of [0, 1) was 1 itself, and a bound between two bf16 values let
// draws below lo through.
TEST(Float16ConversionTest, RandomUniformStaysInsideItsRangeInEveryFloatDType) {
  for (DType d : {DType::kBF16, DType::kF16, DType::kF32, DType::kF64}) {
    for (const auto& [lo, hi] :
         {std::pair<double, double>{0, 1}, {-1, 1}, {0.1, 0.2}, {-3, -2.9}}) {
      SCOPED_TRACE(std::string(DTypeName(d)) + " [" + std::to_string(lo) + ", " +
                   std::to_string(hi) + ")");
      const HostTensor t = HostTensor::RandomUniform(d, {100003}, 5, lo, hi);
      double smallest = hi, largest = lo;
      for (int64_t i = 0; i < t.num_elements(); ++i) {
        smallest = std::min(smallest, t.GetDouble(i));
        largest = std::max(largest, t.GetDouble(i));
      }
      EXPECT_GE(smallest, lo);
      EXPECT_LT(largest, hi);
      EXPECT_GT(largest, lo + (hi - lo) * 0.9);  // still spread over the range
    }
  }
}

}  // namespace
}  // namespace braze
