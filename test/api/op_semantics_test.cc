// Op semantics on valid input, as a user of numpy, JAX or TensorFlow expects them (the
// semantics audit, 2026-12-01): each case runs op by op on the reference kernels, op by
// op compiled, and fused under a JitScope (strict, so nothing falls back), because a rule
// the reference and the lowering share is one the fuzzer, which compares the two, never
// sees. Each test failed before the fix it names.
#include <cmath>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "braze/braze.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace braze {
namespace {

using ::testing::HasSubstr;

enum class Mode { kReference, kCompiled, kFused };
constexpr Mode kModes[] = {Mode::kReference, Mode::kCompiled, Mode::kFused};

const char* ModeName(Mode m) {
  switch (m) {
    case Mode::kReference:
      return "reference";
    case Mode::kCompiled:
      return "compiled op by op";
    case Mode::kFused:
      return "fused";
  }
  return "?";
}

// What a case builds: its feeds and the tensors it fetches.
struct Program {
  Feeds feeds;
  std::vector<Tensor> fetches;
};

// Builds the program (under a JitScope for kFused) and runs it in `mode`.
absl::StatusOr<std::vector<HostTensor>> RunIn(Mode mode,
                                              const std::function<Program(Graph&)>& build) {
  Graph g;
  Program p;
  if (mode == Mode::kFused) {
    JitScope scope(g);
    p = build(g);
  } else {
    p = build(g);
  }
  if (!g.status().ok()) return g.status();
  SessionOptions o;
  o.device = "cpu";
  o.reference_only = mode == Mode::kReference;
  o.strict = mode != Mode::kReference;
  return Session(g, o).Run(p.feeds, p.fetches);
}

// Gradients(ys, xs)[0], or an invalid Tensor (which Run rejects) when it fails.
Tensor GradientOf(const Tensor& y, const Tensor& x) {
  auto g = Gradients({y}, {x});
  EXPECT_TRUE(g.ok()) << g.status();
  return g.ok() ? (*g)[0] : Tensor();
}

// d/dx x^y is y x^(y-1), and 0 where y == 0: x^0 is 1 for every x. The product alone
// is 0 * inf = NaN at x = 0 (and NaN at x = NaN), where JAX and torch give 0; the
// other points keep their values (0^0.5's is inf, as JAX's and TF's).
TEST(OpSemantics, PowGradientForTheBaseIsZeroWhereTheExponentIsZero) {
  for (DType dt : {DType::kF32, DType::kF64}) {
    for (Mode mode : kModes) {
      auto out = RunIn(mode, [dt](Graph& g) {
        HostTensor xv(dt, {5}), yv(dt, {5});
        const double xs[] = {0, std::nan(""), -2, 0, 3};
        const double ys[] = {0, 0, 0, 0.5, 2};
        for (int i = 0; i < 5; ++i) {
          xv.SetDouble(i, xs[i]);
          yv.SetDouble(i, ys[i]);
        }
        Tensor x = Placeholder(g, dt, {5}, "x");
        Tensor y = Placeholder(g, dt, {5}, "y");
        // A scalar exponent broadcast against x, too.
        Tensor zero = ScalarConst(g, 0, dt);
        return Program{{{x, xv}, {y, yv}},
                       {GradientOf(Sum(Pow(x, y)), x), GradientOf(Sum(Pow(x, zero)), x)}};
      });
      ASSERT_TRUE(out.ok()) << ModeName(mode) << ": " << out.status();
      const std::vector<double> dx = {(*out)[0].GetDouble(0), (*out)[0].GetDouble(1),
                                      (*out)[0].GetDouble(2), (*out)[0].GetDouble(3),
                                      (*out)[0].GetDouble(4)};
      EXPECT_EQ(dx[0], 0) << ModeName(mode) << " " << DTypeName(dt);
      EXPECT_EQ(dx[1], 0) << ModeName(mode) << " " << DTypeName(dt);
      EXPECT_EQ(dx[2], 0) << ModeName(mode) << " " << DTypeName(dt);
      EXPECT_EQ(dx[3], INFINITY) << ModeName(mode) << " " << DTypeName(dt);
      EXPECT_EQ(dx[4], 6) << ModeName(mode) << " " << DTypeName(dt);
      for (int i = 0; i < 5; ++i) {
        EXPECT_EQ((*out)[1].GetDouble(i), 0) << ModeName(mode) << " " << DTypeName(dt) << " " << i;
      }
    }
  }
}

// An operator's scalar is a constant of the tensor's dtype; for an i32 tensor a fraction
// truncated toward zero: x * 0.5 was x * 0 and 7.9 / x was 7 / x, silently, where
// numpy and JAX give floats and TensorFlow refuses the conversion. It is an error naming
// the tensor; whole numbers keep working, and floating tensors take any scalar.
TEST(OpSemantics, AFractionWithAnI32TensorIsAnErrorNotATruncation) {
  struct Bad {
    std::function<Tensor(Tensor)> apply;
    std::string what;
  };
  const std::vector<Bad> bad = {
      {[](Tensor x) { return x * 0.5; }, "'counts' * 0.5: 0.5 is not an i32"},
      {[](Tensor x) { return x + 0.25; }, "'counts' + 0.25: 0.25 is not an i32"},
      {[](Tensor x) { return x - 1.5; }, "'counts' - 1.5: 1.5 is not an i32"},
      {[](Tensor x) { return x / 2.5; }, "'counts' / 2.5: 2.5 is not an i32"},
      {[](Tensor x) { return 7.9 / x; }, "7.9 / 'counts': 7.9 is not an i32"},
      {[](Tensor x) { return -0.5 * x; }, "-0.5 * 'counts': -0.5 is not an i32"},
  };
  for (const Bad& b : bad) {
    Graph g;
    Tensor x = Placeholder(g, DType::kI32, {3}, "counts");
    Tensor y = b.apply(x);
    EXPECT_FALSE(y.valid()) << b.what;
    EXPECT_EQ(g.status().code(), absl::StatusCode::kInvalidArgument) << b.what;
    EXPECT_THAT(std::string(g.status().message()), HasSubstr(b.what));
    EXPECT_THAT(std::string(g.status().message()), HasSubstr("Cast it to a floating dtype"));
  }
  for (Mode mode : kModes) {
    auto out = RunIn(mode, [](Graph& g) {
      Tensor i = Placeholder(g, DType::kI32, {3}, "i");
      Tensor f = Placeholder(g, DType::kF32, {3}, "f");
      return Program{{{i, HostTensor::From<int32_t>({3, -3, 7}, {3})},
                      {f, HostTensor::From<float>({3, -3, 7}, {3})}},
                     {i * 2.0, 1.0 - i, i / 2.0, f * 0.5, 7.5 / f}};
    });
    ASSERT_TRUE(out.ok()) << ModeName(mode) << ": " << out.status();
    EXPECT_EQ((*out)[0].ToVector<int32_t>(), (std::vector<int32_t>{6, -6, 14})) << ModeName(mode);
    EXPECT_EQ((*out)[1].ToVector<int32_t>(), (std::vector<int32_t>{-2, 4, -6})) << ModeName(mode);
    EXPECT_EQ((*out)[2].ToVector<int32_t>(), (std::vector<int32_t>{1, -2, 3})) << ModeName(mode);
    EXPECT_EQ((*out)[3].ToVector<float>(), (std::vector<float>{1.5f, -1.5f, 3.5f}))
        << ModeName(mode);
    EXPECT_EQ((*out)[4].ToVector<float>(), (std::vector<float>{2.5f, -2.5f, 7.5f / 7}))
        << ModeName(mode);
  }
}

}  // namespace
}  // namespace braze
