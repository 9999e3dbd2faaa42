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

}  // namespace
}  // namespace braze
