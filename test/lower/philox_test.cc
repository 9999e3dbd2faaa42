// The Philox Expr builder (src/lower/philox.h) that fused kernels call, on its own:
// Random123's known answers through Halide, and PhiloxUniform / PhiloxNormal of
// (key, index, step) against the reference transforms of the host Philox, bit for bit,
// vectorized (the index convention a fused attention dropout relies on).
#include "lower/philox.h"

#include <cstdint>
#include <cstring>
#include <vector>

#include "Halide.h"
#include "braze/random.h"
#include "gtest/gtest.h"
#include "reference/kernel_util.h"

namespace braze {
namespace lower {
namespace {

Halide::Expr U32(uint32_t v) {
  return Halide::Internal::make_const(Halide::UInt(32), static_cast<uint64_t>(v));
}

TEST(RandomOpsPhilox, HalidePhiloxMatchesTheRandom123KnownAnswers) {
  struct Kat {
    PhiloxCounter counter;
    PhiloxKey key;
    PhiloxCounter expected;
  };
  const Kat kats[] = {// Random123's kat_vectors, as test/reference/random_test.cc
                      {{0, 0, 0, 0}, {0, 0}, {0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}},
                      {{0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff},
                       {0xffffffff, 0xffffffff},
                       {0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}},
                      {{0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344},
                       {0xa4093822, 0x299f31d0},
                       {0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}}};
  for (const Kat& k : kats) {
    const PhiloxWords out = Philox4x32_10(
        {U32(k.counter[0]), U32(k.counter[1]), U32(k.counter[2]), U32(k.counter[3])}, k.key);
    Halide::Func f("philox_kat");
    Halide::Var i("i");
    f(i) = Halide::select(i == 0, out[0], i == 1, out[1], i == 2, out[2], out[3]);
    Halide::Buffer<uint32_t> got = f.realize({4});
    for (int w = 0; w < 4; ++w) EXPECT_EQ(got(w), k.expected[w]) << w;
  }
}

TEST(RandomOpsPhilox, UniformAndNormalOfIndexAndStepAreTheReferences) {
  const PhiloxKey key = RandomKey(0x0123456789abcdefull, RandomOpKeyOf("attention/dropout"));
  const int n = 10007;
  for (const int32_t step : {0, 5, -1}) {
    Halide::Func u("u"), z("z");
    Halide::Var i("i");
    const Halide::Expr index = Halide::cast(Halide::UInt(32), i);
    u(i) = PhiloxUniform(key, index, step);
    z(i) = PhiloxNormal(key, index, step);
    u.vectorize(i, 8, Halide::TailStrategy::GuardWithIf);
    z.vectorize(i, 8, Halide::TailStrategy::GuardWithIf);
    Halide::Buffer<float> us = u.realize({n});
    Halide::Buffer<float> zs = z.realize({n});
    const uint64_t s = static_cast<uint64_t>(static_cast<int64_t>(step));
    for (int e = 0; e < n; ++e) {
      const PhiloxCounter bits = ::braze::Philox4x32_10(  // the host's
          PhiloxCounter{static_cast<uint32_t>(e), 0, static_cast<uint32_t>(s),
                        static_cast<uint32_t>(s >> 32)},
          key);
      const float want_u = reference_internal::PhiloxToUniformF32(bits);
      const float want_z = reference_internal::PhiloxToNormalF32(bits);
      ASSERT_EQ(std::memcmp(&us(e), &want_u, 4), 0) << "step " << step << " element " << e;
      ASSERT_EQ(std::memcmp(&zs(e), &want_z, 4), 0)
          << "step " << step << " element " << e << ": " << zs(e) << " vs " << want_z;
    }
  }
}

}  // namespace
}  // namespace lower
}  // namespace braze
