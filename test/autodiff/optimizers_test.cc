// Optimizers: hand-computed first steps (and slot values), convergence on a least-squares
// problem, and argument errors.
#include "braze/optimizers.h"

#include <cmath>
#include <ostream>
#include <string>
#include <vector>

#include "autodiff/grad_check.h"
#include "braze/ops.h"
#include "gtest/gtest.h"

namespace braze {
namespace {

using gradtest::ReferenceOnly;

std::vector<double> D(const HostTensor& t) { return t.ToVector<double>(); }

// loss = sum((w - c)^2), so g = 2 (w - c): every step is computable by hand.
struct Quadratic {
  Quadratic() {
    w = Variable(g, HostTensor::From<double>({1, -2, 0.5}, {3}), "w");
    c = Const(g, HostTensor::From<double>({0, 1, 2}, {3}));
    loss = Sum(Square(w - c));
  }
  std::vector<double> Grad(const std::vector<double>& wv) const {
    const std::vector<double> cv = {0, 1, 2};
    std::vector<double> out;
    for (int i = 0; i < 3; ++i) out.push_back(2 * (wv[i] - cv[i]));
    return out;
  }
  Graph g;
  Tensor w, c, loss;
};

void ExpectNear(const std::vector<double>& got, const std::vector<double>& want, double tol,
                const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_NEAR(got[i], want[i], tol) << what << "[" << i << "]";
  }
}

TEST(OptimizerTest, SgdFirstStep) {
  Quadratic q;
  auto train = Minimize(Optimizer::Sgd(0.1), q.loss, {q.w});
  ASSERT_TRUE(train.ok()) << train.status();
  Session s(q.g, ReferenceOnly());
  ASSERT_TRUE(s.Run({}, {}, *train).ok());
  const std::vector<double> w0 = {1, -2, 0.5}, g0 = q.Grad(w0);
  std::vector<double> w1;
  for (int i = 0; i < 3; ++i) w1.push_back(w0[i] - 0.1 * g0[i]);
  ExpectNear(D(*s.VariableValue(q.w)), w1, 1e-15, "w1");
}

TEST(OptimizerTest, MomentumTwoStepsAndNesterov) {
  for (bool nesterov : {false, true}) {
    Quadratic q;
    const double lr = 0.1, mu = 0.9;
    auto train = Minimize(Optimizer::Momentum(lr, mu, nesterov), q.loss, {q.w});
    ASSERT_TRUE(train.ok()) << train.status();
    std::optional<Tensor> accum = q.g.FindTensor("Momentum/w/momentum");
    ASSERT_TRUE(accum.has_value());
    Session s(q.g, ReferenceOnly());
    std::vector<double> w = {1, -2, 0.5}, a = {0, 0, 0};
    for (int step = 0; step < 2; ++step) {
      ASSERT_TRUE(s.Run({}, {}, *train).ok());
      const std::vector<double> grad = q.Grad(w);
      for (int i = 0; i < 3; ++i) {
        a[i] = mu * a[i] + grad[i];
        w[i] -= lr * (nesterov ? grad[i] + mu * a[i] : a[i]);
      }
      const std::string what = (nesterov ? "nesterov step " : "step ") + std::to_string(step);
      ExpectNear(D(*s.VariableValue(q.w)), w, 1e-14, what + " w");
      ExpectNear(D(*s.VariableValue(*accum)), a, 1e-14, what + " accumulator");
    }
  }
}

TEST(OptimizerTest, AdamFirstTwoStepsWithBiasCorrection) {
  Quadratic q;
  const double lr = 0.01, b1 = 0.8, b2 = 0.95, eps = 1e-3;
  auto train = Minimize(Optimizer::Adam(lr, b1, b2, eps), q.loss, {q.w});
  ASSERT_TRUE(train.ok()) << train.status();
  std::optional<Tensor> m = q.g.FindTensor("Adam/w/m"), v = q.g.FindTensor("Adam/w/v"),
                        step = q.g.FindTensor("Adam/step");
  ASSERT_TRUE(m && v && step);
  Session s(q.g, ReferenceOnly());
  std::vector<double> w = {1, -2, 0.5}, mv(3, 0), vv(3, 0);
  for (int t = 1; t <= 2; ++t) {
    ASSERT_TRUE(s.Run({}, {}, *train).ok());
    const std::vector<double> grad = q.Grad(w);
    const double lr_t = lr * std::sqrt(1 - std::pow(b2, t)) / (1 - std::pow(b1, t));
    for (int i = 0; i < 3; ++i) {
      mv[i] = b1 * mv[i] + (1 - b1) * grad[i];
      vv[i] = b2 * vv[i] + (1 - b2) * grad[i] * grad[i];
      w[i] -= lr_t * mv[i] / (std::sqrt(vv[i]) + eps);
    }
    const std::string what = "step " + std::to_string(t);
    ExpectNear(D(*s.VariableValue(q.w)), w, 1e-14, what + " w");
    ExpectNear(D(*s.VariableValue(*m)), mv, 1e-14, what + " m");
    ExpectNear(D(*s.VariableValue(*v)), vv, 1e-14, what + " v");
    EXPECT_EQ(s.VariableValue(*step)->GetDouble(0), t);
  }
}

// min ||W x - y||^2 over W (f32, as a training loop would use), from W = 0; the data
// comes from a known W*, so the loss can reach ~0.
struct OptimizerCase {
  std::string name;
  Optimizer optimizer;
};
void PrintTo(const OptimizerCase& c, std::ostream* os) { *os << c.name; }

class ConvergenceTest : public ::testing::TestWithParam<OptimizerCase> {};

TEST_P(ConvergenceTest, ReducesALeastSquaresLoss) {
  const Optimizer& opt = GetParam().optimizer;
  Graph g;
  HostTensor w_true = HostTensor::RandomUniform(DType::kF32, {2, 3}, 1, -1, 1);
  HostTensor xv = HostTensor::RandomUniform(DType::kF32, {3, 8}, 2, -1, 1);
  Tensor x = Const(g, xv);
  Tensor y = MatMul(Const(g, w_true), x);
  Tensor w = Variable(g, HostTensor(DType::kF32, {2, 3}), "W");
  Tensor loss = Mean(Square(MatMul(w, x) - y));
  auto train = Minimize(opt, loss, {w});
  ASSERT_TRUE(train.ok()) << train.status();
  Session s(g, ReferenceOnly());
  const double initial = s.Run({}, {loss})->at(0).GetDouble(0);
  double last = initial;
  for (int step = 0; step < 300; ++step) {
    auto out = s.Run({}, {loss}, *train);
    ASSERT_TRUE(out.ok()) << out.status();
    last = (*out)[0].GetDouble(0);
  }
  last = s.Run({}, {loss})->at(0).GetDouble(0);
  EXPECT_LT(last, 1e-3 * initial) << GetParam().name << ": " << initial << " -> " << last;
  std::string why;
  EXPECT_TRUE(AllClose(*s.VariableValue(w), w_true, 0, 0.05, &why)) << GetParam().name << why;
}

INSTANTIATE_TEST_SUITE_P(
    AllOptimizers, ConvergenceTest,
    ::testing::Values(OptimizerCase{"Sgd", Optimizer::Sgd(0.5)},
                      OptimizerCase{"Momentum", Optimizer::Momentum(0.1, 0.9)},
                      OptimizerCase{"Nesterov", Optimizer::Momentum(0.1, 0.9, /*nesterov=*/true)},
                      OptimizerCase{"Adam", Optimizer::Adam(0.05)}),
    [](const ::testing::TestParamInfo<OptimizerCase>& info) { return info.param.name; });

TEST(OptimizerTest, SeveralVariablesAndAnUnusedOne) {
  Graph g;
  Tensor w = Variable(g, HostTensor::From<double>({1, 2}, {2}), "w");
  Tensor b = Variable(g, HostTensor::Scalar(3.0), "b");
  Tensor unused = Variable(g, HostTensor::From<double>({7}, {1}), "unused");
  Tensor loss = Sum(Square(w + b));
  auto train = Minimize(Optimizer::Sgd(0.1), loss, {w, b, unused});
  ASSERT_TRUE(train.ok()) << train.status();
  Session s(g, ReferenceOnly());
  ASSERT_TRUE(s.Run({}, {}, *train).ok());
  // g_w = 2 (w + b) = [8, 10]; g_b = sum = 18; unused: zero gradient, unchanged.
  ExpectNear(D(*s.VariableValue(w)), {0.2, 1.0}, 1e-15, "w");
  ExpectNear(D(*s.VariableValue(b)), {1.2}, 1e-15, "b");
  ExpectNear(D(*s.VariableValue(unused)), {7}, 0, "unused");
}

TEST(OptimizerTest, BadArgumentsAreInvalidArgument) {
  Graph g, other;
  Tensor w = Variable(g, HostTensor::From<double>({1}, {1}), "w");
  Tensor iv = Variable(g, HostTensor::From<int32_t>({1}, {1}), "iv");
  Tensor foreign = Variable(other, HostTensor::From<double>({1}, {1}), "foreign");
  Tensor loss = Sum(Square(w));
  struct Case {
    std::string what;
    absl::StatusOr<std::vector<Tensor>> result;
    std::string message;
  };
  std::vector<Case> cases;
  cases.push_back({"no vars", Minimize(Optimizer::Sgd(0.1), loss, {}), "no variables"});
  cases.push_back(
      {"not a variable", Minimize(Optimizer::Sgd(0.1), loss, {loss}), "not a Variable"});
  cases.push_back({"int variable", Minimize(Optimizer::Sgd(0.1), loss, {iv}), "not floating"});
  cases.push_back({"twice", Minimize(Optimizer::Sgd(0.1), loss, {w, w}), "listed twice"});
  cases.push_back({"foreign", Minimize(Optimizer::Sgd(0.1), loss, {foreign}), "another graph"});
  cases.push_back({"lr", Minimize(Optimizer::Sgd(-1), loss, {w}), "learning_rate"});
  cases.push_back({"beta1", Minimize(Optimizer::Adam(0.1, 1.0), loss, {w}), "beta1"});
  cases.push_back({"momentum", Minimize(Optimizer::Momentum(0.1, -0.5), loss, {w}), "momentum"});
  cases.push_back({"gradient shape",
                   ApplyGradients(Optimizer::Sgd(0.1), {{ScalarConst(g, 1, DType::kF64), w}}),
                   "gradient for 'w'"});
  for (const Case& c : cases) {
    ASSERT_FALSE(c.result.ok()) << c.what;
    EXPECT_EQ(c.result.status().code(), absl::StatusCode::kInvalidArgument) << c.what;
    EXPECT_NE(c.result.status().message().find(c.message), std::string::npos)
        << c.what << ": " << c.result.status();
  }
  EXPECT_TRUE(g.status().ok()) << g.status();
}

}  // namespace
}  // namespace braze
