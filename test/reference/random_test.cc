// The random numbers' reference (docs/RANDOM.md): Philox-4x32-10 against the published
// known answers, the uniform and normal transforms and their statistics, and the keying
// (seed, op key, step, element index).
#include "braze/random.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <set>
#include <vector>

#include "braze/ops.h"
#include "gtest/gtest.h"
#include "reference/eval_graph.h"
#include "reference/kernel_util.h"

namespace braze {
namespace reftest {
namespace {

namespace ri = reference_internal;

// The known-answer vectors of the Random123 library (its kat_vectors file, lines
// "philox4x32 10 <counter x4> <key x2> <expected x4>"; the same in the SC 2011 paper's
// distribution): counter and key all zeros, all ones, and the digits of pi.
TEST(Philox, MatchesTheRandom123KnownAnswers) {
  struct Kat {
    PhiloxCounter counter;
    PhiloxKey key;
    PhiloxCounter expected;
  };
  const Kat kats[] = {
      {{0, 0, 0, 0}, {0, 0}, {0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}},
      {{0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff},
       {0xffffffff, 0xffffffff},
       {0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}},
      {{0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344},
       {0xa4093822, 0x299f31d0},
       {0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}},
  };
  for (const Kat& k : kats) EXPECT_EQ(Philox4x32_10(k.counter, k.key), k.expected);
}

TEST(Philox, KeysDependOnSeedAndOpKeyNonLinearly) {
  EXPECT_NE(RandomKey(1, 0), RandomKey(0, 1));
  EXPECT_NE(RandomKey(1, 2), RandomKey(2, 1));
  EXPECT_NE(RandomKey(0, 0), RandomKey(0, 1));
  EXPECT_EQ(RandomKey(7, 9), RandomKey(7, 9));
  EXPECT_EQ(RandomOpKeyOf("RandomUniform"), RandomOpKeyOf("RandomUniform"));
  EXPECT_NE(RandomOpKeyOf("RandomUniform"), RandomOpKeyOf("RandomUniform_1"));
  EXPECT_EQ(RandomOpKeyOf(""), 0xCBF29CE484222325ull);  // FNV-1a 64's offset basis
}

TEST(RandomTransforms, UniformsAreExactMultiplesInZeroOne) {
  EXPECT_EQ(ri::PhiloxToUniformF32({0, 0, 0, 0}), 0.0f);
  EXPECT_EQ(ri::PhiloxToUniformF32({0xffffffff, 0, 0, 0}), 1.0f - 0x1p-24f);
  EXPECT_EQ(ri::PhiloxToUniformF64({0xffffffff, 0xffffffff, 0, 0}), 1.0 - 0x1p-53);
  EXPECT_EQ(ri::PhiloxToUniformF64({0, 0x800, 0, 0}), 0x1p-53);
}

// Box-Muller at the ends of its range: u1 = 1 gives 0; the smallest u1 (2^-31) gives the
// largest radius, sqrt(62 ln 2) = 6.5555; the angle's octants give cos's signs.
TEST(RandomTransforms, NormalAtTheEdges) {
  EXPECT_EQ(ri::PhiloxToNormalF32({0xffffffff, 0, 0, 0}), 0.0f);
  const float r_max = ri::PhiloxToNormalF32({0, 0, 0, 0});  // angle ~0: cos ~1
  EXPECT_NEAR(r_max, std::sqrt(62 * std::log(2.0)), 1e-5);
  // Angle pi (x1 = 2^31): cos = -1.
  EXPECT_NEAR(ri::PhiloxToNormalF32({0, 0x80000000u, 0, 0}), -r_max, 1e-5);
  // Every octant against std::cos, over a sweep of angles, at a fixed radius.
  const float r = ri::PhiloxToNormalF32({0x12345678u << 1, 0, 0, 0});  // cos(tiny) = 1
  double worst = 0;
  for (uint64_t a = 0; a < (uint64_t{1} << 32); a += 0x10001) {
    const uint32_t x1 = static_cast<uint32_t>(a);
    const double theta = 2 * M_PI * ((x1 >> 6) + 0.5) / 67108864.0;
    const double expect = r * std::cos(theta);
    worst = std::max(worst, std::abs(ri::PhiloxToNormalF32({0x12345678u << 1, x1, 0, 0}) - expect));
  }
  EXPECT_LT(worst, 4e-7 * std::abs(r) + 1e-7) << "the angle's polynomials";
  // The radius against std::log over a sweep of x0.
  double worst_r = 0;
  for (uint64_t a = 0; a < (uint64_t{1} << 32); a += 0x100003) {
    const uint32_t x0 = static_cast<uint32_t>(a);
    const uint32_t m = (x0 >> 1) + 1;
    // The transform truncates m to its top 24 bits.
    int e = 31;
    while (((m >> e) & 1) == 0) --e;
    const uint32_t mt = e > 23 ? (m >> (e - 23)) << (e - 23) : m;
    const double expect = std::sqrt(-2 * std::log(mt * 0x1p-31));
    const double got = ri::PhiloxToNormalF32({x0, 0, 0, 0});  // cos(~0) = 1 within 2^-40
    worst_r = std::max(worst_r, std::abs(got - expect) / std::max(expect, 1e-3));
  }
  EXPECT_LT(worst_r, 1e-6) << "the radius' log";
}

struct Samples {
  std::vector<double> v;
};

Samples Draw(OpKind op, int64_t n, uint64_t seed, int32_t step, DType dtype = DType::kF32) {
  Graph g;
  Tensor like = Placeholder(g, DType::kF32, {n});
  Tensor s = ScalarConst(g, step, DType::kI32);
  Tensor out = op == OpKind::kRandomNormal ? RandomNormal(like, s, seed)
                                           : RandomUniform(like, s, seed, dtype);
  auto got = Evaluate(std::vector<Tensor>{out}, {{like, HostTensor(DType::kF32, {n})}});
  Samples r;
  EXPECT_TRUE(got.ok()) << got.status();
  if (!got.ok()) return r;
  for (int64_t i = 0; i < n; ++i) r.v.push_back((*got)[0].GetDouble(i));
  return r;
}

constexpr int64_t kN = 1000000;

// Mean 1/2 and variance 1/12 of U[0, 1): the standard errors of the mean and of the
// sample variance at n = 1e6 are 2.9e-4 and 7.5e-5; the bounds are 6 of them (a false
// alarm about once in 5e8 runs; the streams are fixed, so a pass is a pass for good).
TEST(RandomUniform, MomentsAndRangeOnAMillionSamples) {
  for (DType dt : {DType::kF32, DType::kF64}) {
    const Samples s = Draw(OpKind::kRandomUniform, kN, 1234, 0, dt);
    ASSERT_EQ(s.v.size(), static_cast<size_t>(kN));
    double sum = 0, sum2 = 0;
    for (double x : s.v) {
      ASSERT_GE(x, 0.0);
      ASSERT_LT(x, 1.0);
      sum += x;
    }
    const double mean = sum / kN;
    for (double x : s.v) sum2 += (x - mean) * (x - mean);
    EXPECT_NEAR(mean, 0.5, 6 * 2.9e-4) << DTypeName(dt);
    EXPECT_NEAR(sum2 / (kN - 1), 1.0 / 12, 6 * 7.5e-5) << DTypeName(dt);
    // Every tenth of [0, 1) holds 1e5 +- 6 sqrt(1e5 0.9 0.1) samples.
    std::vector<int> bins(10);
    for (double x : s.v) ++bins[static_cast<int>(x * 10)];
    for (int b : bins) EXPECT_NEAR(b, kN / 10, 6 * 300) << DTypeName(dt);
  }
}

// N(0, 1): mean (se 1e-3), variance (se sqrt(2/n) = 1.4e-3), the fourth moment (3; se
// sqrt(96/n) = 9.8e-3) and the tails P(|z| > 2) = 0.0455 (se 2.1e-4) and P(|z| > 3) =
// 0.0027 (se 5.2e-5), each within 6 standard errors; |z| stays below the largest radius.
TEST(RandomNormal, MomentsAndTailsOnAMillionSamples) {
  const Samples s = Draw(OpKind::kRandomNormal, kN, 99, 3);
  ASSERT_EQ(s.v.size(), static_cast<size_t>(kN));
  double m1 = 0, m2 = 0, m4 = 0;
  int64_t over2 = 0, over3 = 0;
  for (double z : s.v) {
    ASSERT_TRUE(std::isfinite(z));
    ASSERT_LT(std::abs(z), 6.56);
    m1 += z;
    m2 += z * z;
    m4 += z * z * z * z;
    over2 += std::abs(z) > 2;
    over3 += std::abs(z) > 3;
  }
  EXPECT_NEAR(m1 / kN, 0, 6e-3);
  EXPECT_NEAR(m2 / kN, 1, 6 * 1.4e-3);
  EXPECT_NEAR(m4 / kN, 3, 6 * 9.8e-3);
  EXPECT_NEAR(static_cast<double>(over2) / kN, 0.0455003, 6 * 2.1e-4);
  EXPECT_NEAR(static_cast<double>(over3) / kN, 0.0026998, 6 * 5.2e-5);
}

// Same key, same bits; another seed, step or op key: another stream (no two of the
// first 1000 values equal across streams: a chance of about 1000^2 / 2^24 ~ 6% for one
// pair of f32 uniform streams, so the comparison is of the whole vectors).
TEST(RandomKeys, SameKeySameBitsOtherKeysOtherStreams) {
  const int64_t n = 1000;
  const Samples a = Draw(OpKind::kRandomUniform, n, 5, 1);
  EXPECT_EQ(a.v, Draw(OpKind::kRandomUniform, n, 5, 1).v);
  EXPECT_NE(a.v, Draw(OpKind::kRandomUniform, n, 6, 1).v);
  EXPECT_NE(a.v, Draw(OpKind::kRandomUniform, n, 5, 2).v);
  EXPECT_NE(a.v, Draw(OpKind::kRandomUniform, n, 5, -1).v);
  // Two ops of one graph (default keys from their names) differ; an explicit key pins.
  Graph g;
  Tensor like = Placeholder(g, DType::kF32, {n});
  Tensor step = ScalarConst(g, 1, DType::kI32);
  Tensor u1 = RandomUniform(like, step, 5);
  Tensor u2 = RandomUniform(like, step, 5);
  Tensor u3 = RandomUniform(like, step, 5, DType::kF32, 77);
  Tensor u4 = RandomUniform(like, step, 5, DType::kF32, 77);
  EXPECT_NE(u1.node().attrs_as<RandomAttrs>().op_key, u2.node().attrs_as<RandomAttrs>().op_key);
  auto got = Evaluate({u1, u2, u3, u4}, {{like, HostTensor(DType::kF32, {n})}});
  ASSERT_TRUE(got.ok()) << got.status();
  auto bits = [&](int i) {
    const HostTensor& t = (*got)[i];
    return std::vector<char>(static_cast<const char*>(t.raw_data()),
                             static_cast<const char*>(t.raw_data()) + t.num_bytes());
  };
  EXPECT_NE(bits(0), bits(1));
  EXPECT_EQ(bits(2), bits(3));
  EXPECT_NE(bits(0), bits(2));
  // Element i of a tensor is element i of the flat stream whatever the shape.
  Graph g2;
  Tensor like2 = Placeholder(g2, DType::kF32, {10, 100});
  Tensor u5 = RandomUniform(like2, ScalarConst(g2, 1, DType::kI32), 5, DType::kF32, 77);
  auto got2 = Evaluate(std::vector<Tensor>{u5}, {{like2, HostTensor(DType::kF32, {10, 100})}});
  ASSERT_TRUE(got2.ok()) << got2.status();
  EXPECT_EQ(std::memcmp((*got2)[0].raw_data(), (*got)[2].raw_data(), (*got)[2].num_bytes()), 0);
}

// The rebuilt program (the same names) draws the same bits: no hidden state.
TEST(RandomKeys, ABuiltAgainProgramDrawsTheSameBits) {
  auto build_and_run = [] {
    Graph g;
    Tensor like = Placeholder(g, DType::kF32, {3, 7});
    Tensor step = ScalarConst(g, 11, DType::kI32);
    Tensor n1 = RandomNormal(like, step, 3);
    Tensor n2 = RandomNormal(like, step, 3);
    auto got = Evaluate(std::vector<Tensor>{n1 + n2}, {{like, HostTensor(DType::kF32, {3, 7})}});
    EXPECT_TRUE(got.ok()) << got.status();
    if (!got.ok()) return std::vector<char>();
    const char* p = static_cast<const char*>((*got)[0].raw_data());
    return std::vector<char>(p, p + (*got)[0].num_bytes());
  };
  EXPECT_EQ(build_and_run(), build_and_run());
}

TEST(RandomBadInput, StepAndDtypeAreCheckedNamingTheNode) {
  Graph g;
  Tensor like = Placeholder(g, DType::kF32, {4});
  Tensor bad_step = RandomUniform(like, ScalarConst(g, 1.0, DType::kF32), 1);
  EXPECT_NE(bad_step.node().status().message().find("step must be an i32 scalar"),
            std::string::npos)
      << bad_step.node().status();
  EXPECT_NE(bad_step.node().status().message().find("RandomUniform"), std::string::npos);
  Tensor vec_step = RandomNormal(like, Placeholder(g, DType::kI32, {2}), 1);
  EXPECT_FALSE(vec_step.node().status().ok());
  Tensor bad_dtype = RandomUniform(like, ScalarConst(g, 1, DType::kI32), 1, DType::kI32);
  EXPECT_NE(bad_dtype.node().status().message().find("does not support dtype i32"),
            std::string::npos)
      << bad_dtype.node().status();
}

}  // namespace
}  // namespace reftest
}  // namespace braze
