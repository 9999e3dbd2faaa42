// Braze's own f32 math on the CPU, held to libm and IEEE: the exp polynomial
// (lower_elementwise.cc ExpF32) within 2 ulp of std::exp over its whole range, subnormal
// results included, and f32 division equal to IEEE's quotient bit for bit for every
// class of operand, by a constant too (which Halide would turn into a multiplication by
// the reciprocal), ties between subnormals included.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <random>
#include <vector>

#include "braze/ops.h"
#include "gtest/gtest.h"
#include "lower/lower_test_util.h"
#include "lower/lowering.h"

namespace braze {
namespace lowertest {
namespace {

uint32_t Bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

float FromBits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// Distance in representable f32 values between two finite floats of one sign.
int64_t UlpDistance(float a, float b) {
  auto ordered = [](float f) {
    const int64_t u = Bits(f) & 0x7fffffff;
    return std::signbit(f) ? -u : u;
  };
  return std::llabs(ordered(a) - ordered(b));
}

// Runs `c` (one f32 output) under `scheduler` and returns the output.
std::vector<float> Compiled(const Case& c, Scheduler scheduler) {
  CompileOptions options;
  options.scheduler = scheduler;
  auto kernel = CompileCluster(SpecOf(c), options);
  EXPECT_TRUE(kernel.ok()) << kernel.status();
  if (!kernel.ok()) return {};
  auto got = RunKernel(**kernel, c.values);
  EXPECT_TRUE(got.ok()) << got.status();
  if (!got.ok()) return {};
  const HostTensor& out = (*got)[0];
  return std::vector<float>(out.data<float>(), out.data<float>() + out.num_elements());
}

// Every 4096th f32 from -104 to 89 (both signs of the exponent field, every binade),
// the ends of the range and values whose exp is subnormal.
HostTensor ExpArguments() {
  std::vector<float> v = {-103.97f, -103.28f, -100.0f, -95.5f, -87.34f, -87.33f,
                          88.72f,   88.7228f, 0.0f,    -0.0f,  1e-30f,  -1e-30f};
  for (uint32_t u = 0; u < 0x7f800000; u += 4096) {
    for (float f : {FromBits(u), -FromBits(u)}) {
      if (f >= -104.0f && f <= 89.0f) v.push_back(f);
    }
  }
  HostTensor t(DType::kF32, {static_cast<int64_t>(v.size())});
  std::memcpy(t.data<float>(), v.data(), v.size() * sizeof(float));
  return t;
}

TEST(FloatMathTest, ExpIsWithinOneUlpOfLibmIncludingSubnormalResults) {
  for (Scheduler s : {Scheduler::kSafeDefault, Scheduler::kAdams2019}) {
    Case c;
    Tensor x = c.Input(ExpArguments());
    c.outputs = {Exp(x)};
    const std::vector<float> got = Compiled(c, s);
    ASSERT_EQ(got.size(), static_cast<size_t>(c.values[0].num_elements()));
    int64_t worst = 0;
    float worst_at = 0;
    for (size_t i = 0; i < got.size(); ++i) {
      const float v = c.values[0].data<float>()[i];
      const float want = std::exp(v);
      ASSERT_TRUE(std::isfinite(got[i]) || std::isinf(want)) << "exp(" << v << ") = " << got[i];
      const int64_t d =
          std::isinf(want) ? (std::isinf(got[i]) ? 0 : 99) : UlpDistance(got[i], want);
      if (d > worst) worst = d, worst_at = v;
    }
    EXPECT_LE(worst, 1) << SchedulerName(s) << ": exp(" << worst_at << ") off by " << worst
                        << " ulp";
  }
}

// Operands of every class: random bit patterns (every exponent), zeros, subnormals,
// infinities and NaN, in rows of a prime length.
HostTensor AllClasses(Shape shape, uint64_t seed) {
  HostTensor t(DType::kF32, shape);
  std::mt19937 rng(static_cast<uint32_t>(seed));
  const float specials[] = {0.0f,
                            -0.0f,
                            1.0f,
                            3.0f,
                            std::numeric_limits<float>::denorm_min(),
                            -1e-40f,
                            std::numeric_limits<float>::min(),
                            std::numeric_limits<float>::max(),
                            -std::numeric_limits<float>::infinity(),
                            std::numeric_limits<float>::infinity(),
                            std::numeric_limits<float>::quiet_NaN()};
  float* p = t.data<float>();
  for (int64_t i = 0; i < t.num_elements(); ++i) {
    const uint32_t r = rng();
    p[i] = (r % 8 == 0) ? specials[(r >> 8) % 11] : FromBits(rng());
  }
  return t;
}

bool SameFloat(float a, float b) { return (std::isnan(a) && std::isnan(b)) || Bits(a) == Bits(b); }

TEST(FloatMathTest, DivisionIsIeeeDivisionForEveryClassOfOperand) {
  const int64_t rows = 37, cols = 131;
  for (Scheduler s : {Scheduler::kSafeDefault, Scheduler::kAdams2019}) {
    Case c;
    Tensor x = c.Input(AllClasses({rows, cols}, 1));
    Tensor per_row = c.Input(AllClasses({rows, 1}, 2));
    Tensor tiny = c.Input(HostTensor::Filled(DType::kF32, {}, 1e-40));
    // Each part is one comparison below: divisors per row, a constant (which Halide
    // would turn into a multiplication by 1/3), a subnormal scalar (whose f32 reciprocal
    // would overflow).
    c.outputs = {Concat({x / per_row, x / 3.0, x / tiny}, 0)};
    const std::vector<float> got = Compiled(c, s);
    ASSERT_EQ(got.size(), static_cast<size_t>(3 * rows * cols));
    const float* xv = c.values[0].data<float>();
    const float* dv = c.values[1].data<float>();
    for (int64_t i = 0; i < rows * cols; ++i) {
      const float by_row = xv[i] / dv[i / cols];
      const float by_three = xv[i] / 3.0f;
      const float by_tiny = xv[i] / 1e-40f;
      ASSERT_TRUE(SameFloat(got[i], by_row)) << xv[i] << " / " << dv[i / cols];
      ASSERT_TRUE(SameFloat(got[rows * cols + i], by_three)) << xv[i] << " / 3";
      ASSERT_TRUE(SameFloat(got[2 * rows * cols + i], by_tiny)) << xv[i] << " / 1e-40";
    }
  }
}

// A column (innermost extent 1) and a scalar divided by a constant: the quotient too.
TEST(FloatMathTest, DivisionOfAColumnOrAScalarByAConstantIsIeeeDivision) {
  Case c;
  Tensor col = c.Input(AllClasses({53, 1}, 3));
  // 0.3f / 3 is an ulp off as 0.3f * RN(1/3).
  Tensor scalar = c.Input(HostTensor::Filled(DType::kF32, {}, 0.3));
  c.outputs = {Concat({col / 3.0, Reshape(scalar / 3.0, {1, 1})}, 0)};
  const std::vector<float> got = Compiled(c, Scheduler::kSafeDefault);
  ASSERT_EQ(got.size(), 54u);
  for (int64_t i = 0; i < 53; ++i) {
    const float v = c.values[0].data<float>()[i];
    ASSERT_TRUE(SameFloat(got[i], v / 3.0f)) << v << " / 3";
  }
  ASSERT_NE(0.3f / 3.0f, 0.3f * (1.0f / 3.0f));  // the case is one that can fail
  EXPECT_EQ(got[53], 0.3f / 3.0f);
}

// Quotients exactly halfway between two subnormals round to even: 147 * 2^-149 / 98 is
// 1.5 * 2^-149 (IEEE: 2 * 2^-149). A product with an f64 reciprocal rounded it down.
TEST(FloatMathTest, SubnormalTiesRoundToEven) {
  const uint32_t xs[] = {0x00000093, 0x11130000, 0x00000093};
  const uint32_t ys[] = {0x42c40000 /* 98 */, 0x5b440000, 0x42c40000};
  Case c;
  HostTensor x(DType::kF32, {3, 1}), y(DType::kF32, {3, 1});
  for (int i = 0; i < 3; ++i) {
    x.data<float>()[i] = FromBits(xs[i]);
    y.data<float>()[i] = FromBits(ys[i]);
  }
  Tensor tx = c.Input(x);
  Tensor ty = c.Input(y);
  c.outputs = {Concat({tx / ty, tx / 98.0}, 0)};
  for (Scheduler s : {Scheduler::kSafeDefault, Scheduler::kAdams2019}) {
    const std::vector<float> got = Compiled(c, s);
    ASSERT_EQ(got.size(), 6u);
    for (int i = 0; i < 3; ++i) {
      const float want = FromBits(xs[i]) / FromBits(ys[i]);
      EXPECT_EQ(Bits(got[i]), Bits(want)) << SchedulerName(s) << " row " << i;
      EXPECT_EQ(Bits(got[3 + i]), Bits(FromBits(xs[i]) / 98.0f))
          << SchedulerName(s) << " row " << i;
    }
  }
}

// Exp of the special values and the ends of its range, as libm gives them.
TEST(FloatMathTest, ExpOfSpecialsAndRangeEnds) {
  const float inf = std::numeric_limits<float>::infinity();
  const std::vector<float> v = {
      inf, -inf, std::numeric_limits<float>::quiet_NaN(), 88.7f, 88.72283f, 88.7229f,
      // The last f32 with a finite exp, and the first whose is inf.
      88.72283172607422f, 88.72283935546875f, 89.0f, 1e30f, -103.9f, -104.0f, -1e30f, 0.0f, -0.0f};
  Case c;
  HostTensor t(DType::kF32, {static_cast<int64_t>(v.size())});
  std::memcpy(t.data<float>(), v.data(), v.size() * sizeof(float));
  c.outputs = {Exp(c.Input(t))};
  const std::vector<float> got = Compiled(c, Scheduler::kSafeDefault);
  ASSERT_EQ(got.size(), v.size());
  for (size_t i = 0; i < v.size(); ++i) {
    const float want = std::exp(v[i]);
    if (std::isnan(want)) {
      EXPECT_TRUE(std::isnan(got[i])) << "exp(" << v[i] << ") = " << got[i];
    } else if (std::isinf(want) || want == 0) {
      EXPECT_EQ(got[i], want) << "exp(" << v[i] << ")";
    } else {
      EXPECT_LE(UlpDistance(got[i], want), 1) << "exp(" << v[i] << ") = " << got[i];
    }
  }
}

// Sums of non-negative f32 terms add groups of 4 terms in f32 before the f64 accumulator
// (lower_reduce.cc GroupsTerms). With no cancellation that stays within a few ulp of the
// reference's f64 sum: rows that group (1024, 1000, 260) and rows that do not (252, 18,
// 9), terms spread over many binades, on every scheduler.
TEST(FloatMathTest, SumsOfNonNegativeTermsStayWithinThreeUlpOfTheF64Sum) {
  for (Scheduler s : {Scheduler::kSafeDefault, Scheduler::kAdams2019}) {
    for (int64_t n : {1024, 1000, 260, 252, 18, 9}) {
      Case c;
      // exp(x) for x in [-20, 20] spans 17 decimal orders; squares and |x| 2 to 4.
      Tensor x = c.Input(DType::kF32, {37, n}, 11 + n, -20, 20);
      c.outputs = {Sum(Square(x), {1}), Mean(Abs(x), {1}), Sum(Exp(x), {1}),
                   Sum(Square(x), {0, 1})};
      auto want = ReferenceOutputs(SpecOf(c), c.values);
      ASSERT_TRUE(want.ok()) << want.status();
      CompileOptions options;
      options.scheduler = s;
      auto kernel = CompileCluster(SpecOf(c), options);
      ASSERT_TRUE(kernel.ok()) << kernel.status();
      auto got = RunKernel(**kernel, c.values);
      ASSERT_TRUE(got.ok()) << got.status();
      for (size_t o = 0; o < c.outputs.size(); ++o) {
        // Exp's terms are themselves within 1 ulp of std::exp's: 2 ulp more for the sum.
        const int64_t bound = o == 2 ? 5 : 3;
        for (int64_t i = 0; i < (*got)[o].num_elements(); ++i) {
          const float g = (*got)[o].data<float>()[i], w = (*want)[o].data<float>()[i];
          ASSERT_LE(UlpDistance(g, w), bound) << SchedulerName(s) << " n=" << n << " output " << o
                                              << " row " << i << ": " << g << " vs " << w;
        }
      }
    }
  }
}

// The same sums at the edges: a row whose group sums overflow f32 only because the
// whole row does (inf, as the f64 sum rounds to), one that ends just below FLT_MAX
// (finite: the 3 terms share a group), infinities and NaN (kept), and zeros of both
// signs (+0, as the f64 sum of +0 and -0s).
TEST(FloatMathTest, SumsOfNonNegativeTermsOverflowAndKeepSpecialsAsTheReference) {
  const float big = 0.3f * std::numeric_limits<float>::max();
  const float inf = std::numeric_limits<float>::infinity();
  const int64_t n = 256;  // groups of 4: terms 0, 64, 128 and 192 share one
  HostTensor t(DType::kF32, {5, n});
  float* p = t.data<float>();
  for (int64_t i = 0; i < t.num_elements(); ++i) p[i] = -0.0f;
  p[0 * n + 0] = p[0 * n + 64] = p[0 * n + 128] = p[0 * n + 192] = big;  // 1.2 FLT_MAX: inf
  p[1 * n + 0] = p[1 * n + 64] = p[1 * n + 128] = big;                   // 0.9 FLT_MAX
  p[2 * n + 3] = inf;
  p[3 * n + 5] = std::numeric_limits<float>::quiet_NaN();
  Case c;
  c.outputs = {Sum(Abs(c.Input(t)), {1})};
  const std::vector<float> got = Compiled(c, Scheduler::kSafeDefault);
  ASSERT_EQ(got.size(), 5u);
  EXPECT_EQ(got[0], inf);
  EXPECT_LE(UlpDistance(got[1], static_cast<float>(3.0 * big)), 1) << got[1];
  EXPECT_EQ(got[2], inf);
  EXPECT_TRUE(std::isnan(got[3])) << got[3];
  EXPECT_EQ(Bits(got[4]), 0u) << got[4];
}

// A Mean's groups must not overflow where the mean is finite: rows of 256 squares of
// +-1.5e19 (2.25e38 each; 4 of them overflow f32), of 2.89e38 and 0 alternating; and
// subnormal terms (a Mean scales them by 1/4 in its groups) stay within 2 ulp.
TEST(FloatMathTest, GroupedMeansOfHugeAndSubnormalTermsAreTheReferences) {
  const int n = 256;
  HostTensor t(DType::kF32, {3, n});
  float* p = t.data<float>();
  for (int i = 0; i < n; ++i) {
    p[i] = i % 2 == 0 ? 1.5e19f : -1.5e19f;
    p[n + i] = i % 2 == 0 ? 1.7e19f : 0.0f;
    p[2 * n + i] = FromBits(1 + 37 * i);  // subnormals of many sizes
  }
  Case c;
  Tensor x = c.Input(t);
  c.outputs = {Mean(Square(x), {1}), Mean(Abs(x), {1})};
  auto want = ReferenceOutputs(SpecOf(c), c.values);
  ASSERT_TRUE(want.ok()) << want.status();
  auto kernel = CompileCluster(SpecOf(c), CompileOptions());
  ASSERT_TRUE(kernel.ok()) << kernel.status();
  auto got = RunKernel(**kernel, c.values);
  ASSERT_TRUE(got.ok()) << got.status();
  for (size_t o = 0; o < 2; ++o) {
    for (int64_t r = 0; r < 3; ++r) {
      const float g = (*got)[o].data<float>()[r], w = (*want)[o].data<float>()[r];
      ASSERT_TRUE(std::isfinite(w)) << o << " " << r;
      EXPECT_LE(UlpDistance(g, w), 2) << "output " << o << " row " << r << ": " << g << " vs " << w;
    }
  }
}

// Which sums group their terms: f32 sums of terms known to be non-negative, on the CPU.
// The grouped reduction's loop is a quarter of the row (rows of 256 and more).
TEST(FloatMathTest, OnlyNonNegativeF32SumsOnTheCpuGroupTheirTerms) {
  struct Want {
    std::function<Tensor(Tensor)> f;
    DType dtype;
    int64_t n;
    bool gpu;
    int64_t rdom;
  };
  const std::vector<Want> wants = {
      {[](Tensor x) { return Sum(Square(x), {1}); }, DType::kF32, 1024, false, 256},
      {[](Tensor x) { return Sum(Mul(x, x), {1}); }, DType::kF32, 1024, false, 256},
      // Reduced over a dim that is not the last (strided), and keeping it.
      {[](Tensor x) {
         return Mean(Exp(Transpose(x, {1, 0})), {0});
       },
       DType::kF32, 256, false, 64},
      {[](Tensor x) { return Sum(Relu(x), {1}, true); }, DType::kF32, 512, false, 128},
      {[](Tensor x) { return Sum(Relu(x), {1}, true); }, DType::kF32, 252, false, 252},
      // x / -0 is -inf, and a Max over nothing -inf: neither is non-negative.
      {[](Tensor x) { return Sum(Div(Exp(x), Relu(x)), {1}); }, DType::kF32, 1024, false, 1024},
      {[](Tensor x) { return Sum(Abs(x), {1}); }, DType::kF32, 9, false, 9},
      {[](Tensor x) { return Sum(x, {1}); }, DType::kF32, 1024, false, 1024},
      {[](Tensor x) { return Sum(Sub(Square(x), x), {1}); }, DType::kF32, 1024, false, 1024},
      {[](Tensor x) { return Sum(Mul(x, Exp(x)), {1}); }, DType::kF32, 1024, false, 1024},
      {[](Tensor x) { return Sum(Square(x), {1}); }, DType::kF64, 1024, false, 1024},
      {[](Tensor x) { return Sum(Square(x), {1}); }, DType::kF32, 1024, true, 1024},
  };
  for (size_t i = 0; i < wants.size(); ++i) {
    const Want& w = wants[i];
    Case c;
    c.outputs = {w.f(c.Input(w.dtype, {3, w.n}, 5))};
    lower::LowerOptions options;
    options.gpu = w.gpu;
    auto lowered = lower::LowerCluster(SpecOf(c), options);
    ASSERT_TRUE(lowered.ok()) << lowered.status();
    ASSERT_EQ(lowered->info.stages.size(), 1u) << "case " << i;
    const int64_t* extent =
        Halide::Internal::as_const_int(lowered->info.stages[0].rdom[0].extent());
    ASSERT_NE(extent, nullptr) << "case " << i;
    EXPECT_EQ(*extent, w.rdom) << "case " << i;
  }
}

}  // namespace
}  // namespace lowertest
}  // namespace braze
