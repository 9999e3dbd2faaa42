// Gradients of elementwise ops against finite differences: unary math, Cast, binary ops
// with broadcasting, tie rules of Maximum/Minimum, Pow's guarded log, Select.
#include <cmath>
#include <functional>
#include <ostream>
#include <string>
#include <vector>

#include "autodiff/grad_check.h"
#include "braze/gradients.h"
#include "braze/ops.h"
#include "gtest/gtest.h"

namespace braze {
namespace {

using gradtest::AwayFromZero;
using gradtest::CheckGradients;
using gradtest::GradCheckOptions;
using gradtest::Grid;
using gradtest::RunReference;

struct UnaryCase {
  std::string name;
  std::function<Tensor(Tensor)> fn;
  double lo, hi;  // input range
};
void PrintTo(const UnaryCase& c, std::ostream* os) { *os << c.name; }

class UnaryGradTest : public ::testing::TestWithParam<UnaryCase> {};

TEST_P(UnaryGradTest, MatchesFiniteDifferences) {
  const UnaryCase& c = GetParam();
  Graph g;
  Tensor x = Placeholder(g, DType::kF64, {3, 4}, "x");
  Tensor y = c.fn(x);
  EXPECT_TRUE(CheckGradients(y, {{x, AwayFromZero({3, 4}, 11, c.lo, c.hi)}}));
}

INSTANTIATE_TEST_SUITE_P(
    AllUnary, UnaryGradTest,
    ::testing::Values(
        UnaryCase{"Neg", [](Tensor x) { return Neg(x); }, -2, 2},
        UnaryCase{"Abs", [](Tensor x) { return Abs(x); }, -2, 2},
        UnaryCase{"Exp", [](Tensor x) { return Exp(x); }, -2, 2},
        UnaryCase{"Log", [](Tensor x) { return Log(x); }, 0.3, 3},
        UnaryCase{"Sqrt", [](Tensor x) { return Sqrt(x); }, 0.3, 3},
        UnaryCase{"Rsqrt", [](Tensor x) { return Rsqrt(x); }, 0.3, 3},
        UnaryCase{"Tanh", [](Tensor x) { return Tanh(x); }, -2, 2},
        UnaryCase{"Sigmoid", [](Tensor x) { return Sigmoid(x); }, -3, 3},
        UnaryCase{"Relu", [](Tensor x) { return Relu(x); }, -2, 2},
        UnaryCase{"Square", [](Tensor x) { return Square(x); }, -2, 2},
        UnaryCase{"Reciprocal", [](Tensor x) { return Reciprocal(x); }, 0.3, 3},
        UnaryCase{"NegativeReciprocal", [](Tensor x) { return Reciprocal(x); }, -3, -0.3},
        UnaryCase{"Erf", [](Tensor x) { return Erf(x); }, -2, 2},
        // Zero almost everywhere; inputs stay off the jumps at 0 / integers.
        UnaryCase{"Sign", [](Tensor x) { return Sign(x) * x; }, -2, 2},
        UnaryCase{"Floor", [](Tensor x) { return Floor(x * 3.0) * x; }, 0.2, 0.8},
        UnaryCase{"Chain", [](Tensor x) { return Sqrt(Exp(Tanh(x)) * Sigmoid(x)); }, -2, 2}),
    [](const ::testing::TestParamInfo<UnaryCase>& info) { return info.param.name; });

TEST(CastGradTest, FloatToFloatCastsTheGradientBack) {
  Graph g;
  Tensor x = Placeholder(g, DType::kF64, {2, 3}, "x");
  Tensor y = Cast(Square(Cast(x, DType::kF32)), DType::kF64);
  auto grads = Gradients({y}, {x});
  ASSERT_TRUE(grads.ok()) << grads.status();
  EXPECT_EQ((*grads)[0].dtype(), DType::kF64);
  // f32 in the middle: a coarse step and tolerance.
  GradCheckOptions opt;
  opt.step = 1e-2;
  opt.tolerance = 1e-4;
  EXPECT_TRUE(CheckGradients(y, {{x, AwayFromZero({2, 3}, 3)}}, opt));
}

TEST(CastGradTest, IntegerCastsCarryNoGradient) {
  Graph g;
  Tensor x = Placeholder(g, DType::kF64, {4}, "x");
  // Only the direct term carries a gradient; the round trip through i32 is a step
  // function and gives none.
  Tensor y = Cast(Cast(x * 3.0, DType::kI32), DType::kF64) + x;
  auto grads = Gradients({y}, {x});
  ASSERT_TRUE(grads.ok()) << grads.status();
  HostTensor value = HostTensor::From<double>({0.1, 1.2, -2.6, 3.3}, {4});
  HostTensor dx = RunReference(g, {{x, value}}, *grads)[0];
  EXPECT_EQ(dx.ToVector<double>(), (std::vector<double>{1, 1, 1, 1}));
}

struct BinaryCase {
  std::string name;
  std::function<Tensor(Tensor, Tensor)> fn;
  Shape a_shape, b_shape;
};
void PrintTo(const BinaryCase& c, std::ostream* os) { *os << c.name; }

class BinaryGradTest : public ::testing::TestWithParam<BinaryCase> {};

TEST_P(BinaryGradTest, MatchesFiniteDifferences) {
  const BinaryCase& c = GetParam();
  Graph g;
  Tensor a = Placeholder(g, DType::kF64, c.a_shape, "a");
  Tensor b = Placeholder(g, DType::kF64, c.b_shape, "b");
  Tensor y = c.fn(a, b);
  // Grid offsets 0.1 and 0.35: a and b never tie and b is never 0 (Div).
  HostTensor av = Grid(c.a_shape, 1, 0.1), bv = Grid(c.b_shape, 2, 0.35);
  if (c.name.rfind("Pow", 0) == 0) {
    av = HostTensor::RandomUniform(DType::kF64, c.a_shape, 1, 0.5, 2.0);
    bv = HostTensor::RandomUniform(DType::kF64, c.b_shape, 2, -2.0, 2.0);
  }
  EXPECT_TRUE(CheckGradients(y, {{a, av}, {b, bv}}));
}

std::vector<BinaryCase> BinaryCases() {
  const std::vector<std::pair<std::string, std::function<Tensor(Tensor, Tensor)>>> ops = {
      {"Add", [](Tensor a, Tensor b) { return Add(a, b); }},
      {"Sub", [](Tensor a, Tensor b) { return Sub(a, b); }},
      {"Mul", [](Tensor a, Tensor b) { return Mul(a, b); }},
      {"Div", [](Tensor a, Tensor b) { return Div(a, b); }},
      {"Maximum", [](Tensor a, Tensor b) { return Maximum(a, b); }},
      {"Minimum", [](Tensor a, Tensor b) { return Minimum(a, b); }},
      {"Pow", [](Tensor a, Tensor b) { return Pow(a, b); }},
  };
  // Same shape, trailing-dim broadcast, both sides broadcasting, rank extension with a
  // kept 1, and a scalar operand on either side.
  const std::vector<std::pair<std::string, std::pair<Shape, Shape>>> shapes = {
      {"Same", {{2, 3}, {2, 3}}},     {"Row", {{2, 3}, {3}}},    {"Outer", {{2, 1}, {1, 3}}},
      {"Rank3", {{4, 2, 3}, {2, 1}}}, {"ScalarB", {{2, 3}, {}}}, {"ScalarA", {{}, {3, 2}}},
  };
  std::vector<BinaryCase> cases;
  for (const auto& [op_name, fn] : ops) {
    for (const auto& [shape_name, s] : shapes) {
      cases.push_back({op_name + shape_name, fn, s.first, s.second});
    }
  }
  return cases;
}

INSTANTIATE_TEST_SUITE_P(AllBinary, BinaryGradTest, ::testing::ValuesIn(BinaryCases()),
                         [](const ::testing::TestParamInfo<BinaryCase>& info) {
                           return info.param.name;
                         });

TEST(BinaryGradTest, SameTensorOnBothSides) {
  Graph g;
  Tensor x = Placeholder(g, DType::kF64, {5}, "x");
  EXPECT_TRUE(CheckGradients(x * x + x / (x * x + 1.0), {{x, AwayFromZero({5}, 4)}}));
}

// Ties send the whole gradient to the first operand, as TF (a >= b for Maximum,
// a <= b for Minimum).
TEST(BinaryGradTest, MaximumAndMinimumTiesGoToTheFirstOperand) {
  for (bool is_max : {true, false}) {
    Graph g;
    Tensor a = Placeholder(g, DType::kF64, {5}, "a");
    Tensor b = Placeholder(g, DType::kF64, {5}, "b");
    Tensor y = is_max ? Maximum(a, b) : Minimum(a, b);
    auto grads = Gradients({y}, {a, b});
    ASSERT_TRUE(grads.ok()) << grads.status();
    // The last two pairs hold a NaN: a >= b is false there, so `b` gets the gradient
    // (a strict "b wins" test had given both to `a`).
    const double nan = std::nan("");
    auto out = RunReference(g,
                            {{a, HostTensor::From<double>({1, 2, 3, 1, nan}, {5})},
                             {b, HostTensor::From<double>({1, 0, 5, nan, 1}, {5})}},
                            *grads);
    const std::vector<double> da =
        is_max ? std::vector<double>{1, 1, 0, 0, 0} : std::vector<double>{1, 0, 1, 0, 0};
    const std::vector<double> db =
        is_max ? std::vector<double>{0, 0, 1, 1, 1} : std::vector<double>{0, 1, 0, 1, 1};
    EXPECT_EQ(out[0].ToVector<double>(), da) << (is_max ? "Maximum" : "Minimum");
    EXPECT_EQ(out[1].ToVector<double>(), db) << (is_max ? "Maximum" : "Minimum");
  }
}

// d/db a^b = a^b log a is taken as 0 where a <= 0, never NaN (TF's guard).
TEST(PowGradTest, ExponentGradientIsZeroWhereBaseIsNotPositive) {
  Graph g;
  Tensor a = Placeholder(g, DType::kF64, {3}, "a");
  Tensor b = Placeholder(g, DType::kF64, {3}, "b");
  auto grads = Gradients({Pow(a, b)}, {a, b});
  ASSERT_TRUE(grads.ok()) << grads.status();
  auto out = RunReference(g,
                          {{a, HostTensor::From<double>({0, -1.5, 2}, {3})},
                           {b, HostTensor::From<double>({2, 2, 2}, {3})}},
                          *grads);
  EXPECT_EQ(out[0].ToVector<double>(), (std::vector<double>{0, -3, 4}));
  const std::vector<double> db = out[1].ToVector<double>();
  EXPECT_EQ(db[0], 0);
  EXPECT_EQ(db[1], 0);
  EXPECT_NEAR(db[2], 4 * std::log(2.0), 1e-12);
  // At a = 0 with b < 0, a^b is inf: the gradient was inf * 0 = NaN.
  auto at_zero = RunReference(g,
                              {{a, HostTensor::From<double>({0, 0, -0.0}, {3})},
                               {b, HostTensor::From<double>({-1, -2.5, -1}, {3})}},
                              *grads);
  EXPECT_EQ(at_zero[1].ToVector<double>(), (std::vector<double>{0, 0, 0}));
}

// sigmoid'(x) = sigmoid(x) sigmoid(-x): y (1 - y) was 0 once y rounded to 1.
TEST(SigmoidGradTest, KeepsItsValueInThePositiveTail) {
  for (DType dt : {DType::kF32, DType::kF64}) {
    Graph g;
    Tensor x = Placeholder(g, dt, {4}, "x");
    auto grads = Gradients({Sigmoid(x)}, {x});
    ASSERT_TRUE(grads.ok()) << grads.status();
    HostTensor v(dt, {4});
    const std::vector<double> xs = {20, 40, -40, 0};
    for (int i = 0; i < 4; ++i) v.SetDouble(i, xs[i]);
    for (bool compiled : {false, true}) {
      SessionOptions o;
      o.reference_only = !compiled;
      auto out = Session(g, o).Run({{x, v}}, *grads);
      ASSERT_TRUE(out.ok()) << out.status();
      for (int i = 0; i < 4; ++i) {
        const double want =
            std::exp(-std::fabs(xs[i])) / std::pow(1 + std::exp(-std::fabs(xs[i])), 2);
        EXPECT_NEAR((*out)[0].GetDouble(i), want, 1e-5 * want)
            << DTypeName(dt) << " x = " << xs[i] << (compiled ? " compiled" : " reference");
      }
    }
  }
}

TEST(SelectGradTest, BranchesGetTheGradientWhereSelectedConditionGetsNone) {
  Graph g;
  Tensor c = Placeholder(g, DType::kF64, {2, 3}, "c");
  Tensor a = Placeholder(g, DType::kF64, {2, 3}, "a");
  Tensor b = Placeholder(g, DType::kF64, {3}, "b");  // broadcast branch
  Tensor y = Select(Greater(c, ScalarConst(g, 0, DType::kF64)), a * a, b * 3.0);
  GradCheckOptions opt;
  opt.extra_feeds = {{c, HostTensor::From<double>({1, -1, 1, -1, -1, 1}, {2, 3})}};
  EXPECT_TRUE(CheckGradients(y, {{a, AwayFromZero({2, 3}, 5)}, {b, AwayFromZero({3}, 6)}}, opt));
  // The condition's input is reached only through Greater: zeros by the unconnected rule.
  auto grads = Gradients({y}, {c});
  ASSERT_TRUE(grads.ok()) << grads.status();
  EXPECT_EQ((*grads)[0].shape(), (Shape{2, 3}));
  HostTensor dc = RunReference(g, {}, *grads)[0];
  EXPECT_EQ(dc.ToVector<double>(), std::vector<double>(6, 0));
}

}  // namespace
}  // namespace braze
