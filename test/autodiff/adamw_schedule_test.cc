// AdamW, clipping by global norm and the warmup + cosine schedule: each rule against a
// hand computation over a few steps (f32 and f64, reference kernels and compiled under a
// JitScope), the schedule's values at its landmarks, clipping above and below the
// threshold, the whole step compiled into one kernel with no fallback, and bad arguments.
#include <cmath>
#include <functional>
#include <stdexcept>
#include <string>
#include <vector>

#include "autodiff/grad_check.h"
#include "braze/function.h"
#include "braze/jit_scope.h"
#include "braze/ops.h"
#include "braze/optimizers.h"
#include "braze/session.h"
#include "gtest/gtest.h"

namespace braze {
namespace {

using gradtest::ReferenceOnly;

std::vector<double> D(const HostTensor& t) { return t.ToVector<double>(); }

SessionOptions Compiled() {
  SessionOptions o;
  o.strict = true;  // a kernel that fails to compile is an error, not a fallback
  return o;
}

// Tolerance for values of `dtype` of magnitude about 1.
double Tol(DType dtype) { return dtype == DType::kF32 ? 2e-5 : 1e-12; }

void ExpectNear(const std::vector<double>& got, const std::vector<double>& want, double tol,
                const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_NEAR(got[i], want[i], tol * (1 + std::abs(want[i]))) << what << "[" << i << "]";
  }
}

// The literal one-step case that tells the orders apart: w = 1, c = 0 (g = 2), lr 0.1,
// wd 0.5, betas 0.9 / 0.99, eps 0. t = 1: m = 0.2, v = 0.04, m_hat = 2, v_hat = 4.
// torch's order: w (1 - lr wd) = 0.95, minus lr m_hat / sqrt(v_hat) = 0.1: 0.85.
// (Decaying after the Adam step gives 0.855; L2 added to g, as Adam+L2 does, gives 0.9.)
TEST(AdamWTest, OneStepByHandDecaysTheOldValueThenSubtractsTheAdamStep) {
  Graph g;
  Tensor w = Variable(g, HostTensor::From<double>({1.0}, {1, 1}), "w");
  auto train = Minimize(Optimizer::AdamW(0.1, 0.9, 0.99, 0.0, 0.5), Sum(Square(w)), {w});
  ASSERT_TRUE(train.ok()) << train.status();
  Session s(g, ReferenceOnly());
  ASSERT_TRUE(s.Run({}, {}, *train).ok());
  EXPECT_NEAR(s.VariableValue(w)->GetDouble(0), 0.85, 1e-15);
}

// loss = sum((w - c)^2) + sum((b - d)^2): g = 2 (w - c), 2 (b - d), each step
// computable by hand. W is a matrix (decayed under RankAtLeast2), b a vector (not).
struct TwoVariables {
  // jit: everything built while the object lives is in one JitScope.
  TwoVariables(DType dtype, bool jit) {
    if (jit) scope.emplace(g);
    w0 = HostTensor::RandomUniform(dtype, {3, 5}, 11, -2, 2);
    b0 = HostTensor::RandomUniform(dtype, {7}, 12, -2, 2);
    cv = HostTensor::RandomUniform(dtype, {3, 5}, 13, -1, 1);
    dv = HostTensor::RandomUniform(dtype, {7}, 14, -1, 1);
    w = Variable(g, w0, "W");
    b = Variable(g, b0, "b");
    loss = Sum(Square(w - Const(g, cv))) + Sum(Square(b - Const(g, dv)));
  }
  Graph g;
  std::optional<JitScope> scope;
  HostTensor w0, b0, cv, dv;
  Tensor w, b, loss;
};

// The hand rule of braze/optimizers.h, in double, for one variable.
struct HandAdamW {
  std::vector<double> w, c, m, v;
  double b1, b2, eps, wd;
  void Step(int t, double lr, double grad_scale = 1) {
    for (size_t i = 0; i < w.size(); ++i) {
      const double grad = 2 * (w[i] - c[i]) * grad_scale;
      m[i] = b1 * m[i] + (1 - b1) * grad;
      v[i] = b2 * v[i] + (1 - b2) * grad * grad;
      const double m_hat = m[i] / (1 - std::pow(b1, t));
      const double v_hat = v[i] / (1 - std::pow(b2, t));
      w[i] = w[i] * (1 - lr * wd) - lr * m_hat / (std::sqrt(v_hat) + eps);
    }
  }
  double SumSquaredGrads() const {
    double s = 0;
    for (size_t i = 0; i < w.size(); ++i) s += 4 * (w[i] - c[i]) * (w[i] - c[i]);
    return s;
  }
};

struct RuleCase {
  DType dtype;
  bool jit;
};
std::string Name(const ::testing::TestParamInfo<RuleCase>& info) {
  return std::string(DTypeName(info.param.dtype)) + (info.param.jit ? "_jit" : "_reference");
}
class AdamWRuleTest : public ::testing::TestWithParam<RuleCase> {};

// Three steps of AdamW with a decay filter, a learning rate from the schedule (warmup
// 2, so the steps see rates lr/2, lr, then the cosine) and clipping at a norm the first
// steps exceed: every piece of the recipe against the hand rule.
TEST_P(AdamWRuleTest, ThreeStepsMatchTheHandRule) {
  const RuleCase& rc = GetParam();
  TwoVariables model(rc.dtype, rc.jit);
  const double peak = 0.05, floor_lr = 0.005, b1 = 0.8, b2 = 0.95, eps = 1e-3, wd = 0.3;
  const double max_norm = 3.0;
  const int warmup = 2, total = 4;
  Graph& g = model.g;
  Tensor counter = Variable(g, HostTensor::Scalar(0.0), "counter");
  Tensor s_now = counter + 1.0;  // this step's number, counting from 1
  auto lr = WarmupCosineSchedule(s_now, peak, warmup, total, floor_lr);
  ASSERT_TRUE(lr.ok()) << lr.status();
  Optimizer opt = Optimizer::AdamW(peak, b1, b2, eps, wd)
                      .WithLearningRate(*lr)
                      .WithGlobalClipNorm(max_norm)
                      .WithDecayFilter(RankAtLeast2);
  auto train = Minimize(opt, model.loss, {model.w, model.b});
  ASSERT_TRUE(train.ok()) << train.status();
  train->push_back(Assign(counter, s_now));
  Session s(g, rc.jit ? Compiled() : ReferenceOnly());

  HandAdamW hw{D(model.w0), D(model.cv), std::vector<double>(15), std::vector<double>(15), b1, b2,
               eps,         wd};
  HandAdamW hb{
      D(model.b0), D(model.dv), std::vector<double>(7), std::vector<double>(7), b1, b2, eps, 0};
  const double pi = std::acos(-1.0);
  bool clipped_once = false;
  for (int t = 1; t <= 3; ++t) {
    ASSERT_TRUE(s.Run({}, {}, *train).ok());
    const double rate =
        t <= warmup ? peak * t / warmup
                    : floor_lr + 0.5 * (1 + std::cos(pi * (t - warmup) / (total - warmup))) *
                                     (peak - floor_lr);
    const double norm = std::sqrt(hw.SumSquaredGrads() + hb.SumSquaredGrads());
    const double scale = std::min(1.0, max_norm / (norm + 1e-6));
    clipped_once |= scale < 1;
    hw.Step(t, rate, scale);
    hb.Step(t, rate, scale);
    const std::string what = "step " + std::to_string(t);
    ExpectNear(D(*s.VariableValue(model.w)), hw.w, Tol(rc.dtype), what + " W");
    ExpectNear(D(*s.VariableValue(model.b)), hb.w, Tol(rc.dtype), what + " b");
    ExpectNear(D(*s.VariableValue(*g.FindTensor("AdamW/W/m"))), hw.m, Tol(rc.dtype), what + " m");
    ExpectNear(D(*s.VariableValue(*g.FindTensor("AdamW/b/v"))), hb.v, Tol(rc.dtype), what + " v");
  }
  EXPECT_TRUE(clipped_once) << "the case should exercise clipping";
  if (rc.jit) {
    EXPECT_EQ(s.stats().reference_launches, 0);
    EXPECT_GT(s.stats().cluster_launches, 0);
  }
}

INSTANTIATE_TEST_SUITE_P(Rules, AdamWRuleTest,
                         ::testing::Values(RuleCase{DType::kF32, false},
                                           RuleCase{DType::kF64, false},
                                           RuleCase{DType::kF32, true},
                                           RuleCase{DType::kF64, true}),
                         Name);

// The whole training step (loss, gradients, clipping, schedule, AdamW, the step
// counters) is one compiled kernel: nothing runs op by op or on a reference kernel, and
// a new learning rate each step compiles nothing new.
TEST(AdamWTest, TheWholeStepIsOneKernelAndTheScheduleDoesNotRecompile) {
  TwoVariables model(DType::kF32, /*jit=*/true);
  Graph& g = model.g;
  Tensor counter = Variable(g, HostTensor::Scalar(0.0), "counter");
  Tensor s_now = counter + 1.0;
  auto lr = WarmupCosineSchedule(s_now, 0.01, 2, 5, 0.001);
  ASSERT_TRUE(lr.ok()) << lr.status();
  Optimizer opt = Optimizer::AdamW(0.01, 0.9, 0.99, 1e-8, 0.1)
                      .WithLearningRate(*lr)
                      .WithGlobalClipNorm(1.0)
                      .WithDecayFilter(RankAtLeast2);
  auto train = Minimize(opt, model.loss, {model.w, model.b});
  ASSERT_TRUE(train.ok()) << train.status();
  train->push_back(Assign(counter, s_now));
  // The step is 132 ops (41 of them constants), over the default max_cluster_size (128,
  // which bounds Halide's lowering time): raised, so that it stays one cluster.
  SessionOptions options = Compiled();
  options.max_cluster_size = 256;
  Session s(g, options);
  Session reference(g, ReferenceOnly());
  int64_t kernels_after_first_step = -1;
  for (int step = 0; step < 4; ++step) {
    auto got = s.Run({}, {model.loss, *lr}, *train);
    // Kernels compiled or loaded (none when an earlier test or run left it cached).
    const int64_t kernels = s.stats().compiles + s.stats().disk_cache_hits;
    if (step == 0) kernels_after_first_step = kernels;
    EXPECT_EQ(kernels, kernels_after_first_step) << "step " << step << " compiled again";
    auto want = reference.Run({}, {model.loss, *lr}, *train);
    ASSERT_TRUE(got.ok()) << got.status();
    ASSERT_TRUE(want.ok()) << want.status();
    EXPECT_NEAR((*got)[0].GetDouble(0), (*want)[0].GetDouble(0),
                1e-5 * std::abs((*want)[0].GetDouble(0)));
    EXPECT_NEAR((*got)[1].GetDouble(0), (*want)[1].GetDouble(0), 1e-15);
  }
  const SessionStats stats = s.stats();
  EXPECT_LE(kernels_after_first_step, 1);
  EXPECT_EQ(stats.cluster_launches, 4) << s.ClusteringDebugString();  // one per step
  EXPECT_EQ(stats.single_op_launches, 0) << s.ClusteringDebugString();
  EXPECT_EQ(stats.reference_launches, 0) << s.ClusteringDebugString();
  std::string why;
  EXPECT_TRUE(
      AllClose(*s.VariableValue(model.w), *reference.VariableValue(model.w), 1e-5, 1e-6, &why))
      << why;
}

// A learning rate fed through a placeholder, for every optimizer kind: a step fed 0.125
// equals the step of the same optimizer built with the double 0.125, and a step fed 0
// leaves the variable where it was (AdamW's decay is lr * wd, so 0 too).
TEST(AdamWTest, AFedLearningRateTensorDrivesEveryKind) {
  for (const Optimizer& base : {Optimizer::Sgd(0), Optimizer::Momentum(0, 0.9), Optimizer::Adam(0),
                                Optimizer::AdamW(0, 0.9, 0.999, 1e-8, 0.2)}) {
    Graph g_tensor, g_double;
    const HostTensor w0 = HostTensor::RandomUniform(DType::kF64, {5}, 3);
    Tensor w1 = Variable(g_tensor, w0, "w");
    Tensor w2 = Variable(g_double, w0, "w");
    Tensor lr = Placeholder(g_tensor, DType::kF32, {}, "lr");
    auto train1 = Minimize(base.WithLearningRate(lr), Sum(Square(w1)), {w1});
    Optimizer fixed = base;
    fixed.learning_rate = 0.125;
    auto train2 = Minimize(fixed, Sum(Square(w2)), {w2});
    ASSERT_TRUE(train1.ok() && train2.ok()) << train1.status() << train2.status();
    Session s1(g_tensor, ReferenceOnly()), s2(g_double, ReferenceOnly());
    ASSERT_TRUE(s1.Run({{lr, HostTensor::Scalar(0.125f)}}, {}, *train1).ok());
    ASSERT_TRUE(s2.Run({}, {}, *train2).ok());
    const std::vector<double> after_one = D(*s1.VariableValue(w1));
    ExpectNear(after_one, D(*s2.VariableValue(w2)), 1e-15, base.DefaultName());
    EXPECT_NE(after_one, D(w0)) << base.DefaultName();
    ASSERT_TRUE(s1.Run({{lr, HostTensor::Scalar(0.0f)}}, {}, *train1).ok());
    EXPECT_EQ(D(*s1.VariableValue(w1)), after_one) << base.DefaultName();
  }
}

// In a Function's body, a learning rate kept in a program Variable is captured as the
// trained variables are: the host sets it between calls and each call uses its value.
TEST(AdamWTest, AFunctionBodyCapturesAProgramLearningRateVariable) {
  Graph program;
  Tensor w = Variable(program, HostTensor::From<double>({3, -4}, {2}), "w");
  Tensor lr = Variable(program, HostTensor::Scalar(0.25), "lr");
  Function step([&](Graph&, const std::vector<Tensor>& a) -> std::vector<Tensor> {
    Tensor loss = Sum(Square(w - a[0]));
    auto updates = Minimize(Optimizer::Sgd(0).WithLearningRate(lr), loss, {w});
    if (!updates.ok()) throw std::runtime_error(std::string(updates.status().message()));
    return {loss};
  });
  const HostTensor target = HostTensor::From<double>({1, 2}, {2});
  ASSERT_TRUE(step({target}).ok());
  // g = 2 (w - target) = (4, -12): w = (3, -4) - 0.25 g = (2, -1).
  ExpectNear(D(*ReadVariable(w)), {2, -1}, 1e-15, "after lr 0.25");
  ASSERT_TRUE(AssignVariable(lr, HostTensor::Scalar(0.5)).ok());
  ASSERT_TRUE(step({target}).ok());
  // g = (2, -6): w = (2, -1) - 0.5 g = (1, 2).
  ExpectNear(D(*ReadVariable(w)), {1, 2}, 1e-15, "after lr 0.5");
  EXPECT_EQ(step.tracing_count(), 1);
}

struct ScheduleCase {
  DType step_dtype;
  bool jit;
};
class ScheduleTest : public ::testing::TestWithParam<ScheduleCase> {};

// peak 1e-3, warmup 100, total 1000, min 1e-4 (the char_lm recipe's shape).
TEST_P(ScheduleTest, ValuesAtStepOneWarmupMiddleTotalAndBeyond) {
  Graph g;
  std::optional<JitScope> scope;
  if (GetParam().jit) scope.emplace(g);
  Tensor step = Placeholder(g, GetParam().step_dtype, {}, "s");
  auto lr = WarmupCosineSchedule(step, 1e-3, 100, 1000, 1e-4);
  ASSERT_TRUE(lr.ok()) << lr.status();
  EXPECT_EQ(lr->dtype(), DType::kF64);
  Session s(g, GetParam().jit ? Compiled() : ReferenceOnly());
  auto at = [&](int s_value) {
    HostTensor fed(GetParam().step_dtype, {});
    fed.SetDouble(0, s_value);
    auto out = s.Run({{step, fed}}, {*lr});
    EXPECT_TRUE(out.ok()) << out.status();
    return out.ok() ? (*out)[0].GetDouble(0) : NAN;
  };
  const double pi = std::acos(-1.0);
  EXPECT_NEAR(at(1), 1e-5, 1e-18);     // peak * 1 / 100
  EXPECT_NEAR(at(37), 3.7e-4, 1e-18);  // peak * 37 / 100
  EXPECT_NEAR(at(100), 1e-3, 1e-18);   // the end of the warmup: peak
  EXPECT_NEAR(at(101), 1e-4 + 0.5 * (1 + std::cos(pi / 900)) * 9e-4, 1e-18);
  EXPECT_NEAR(at(550), 5.5e-4, 1e-17);  // half way: (peak + min) / 2
  EXPECT_NEAR(at(775), 1e-4 + 0.5 * (1 + std::cos(pi * 0.75)) * 9e-4, 1e-17);
  EXPECT_NEAR(at(1000), 1e-4, 1e-18);  // total: min_lr
  EXPECT_NEAR(at(1001), 1e-4, 1e-18);  // beyond: min_lr
  EXPECT_NEAR(at(5000), 1e-4, 1e-18);
}

INSTANTIATE_TEST_SUITE_P(Schedule, ScheduleTest,
                         ::testing::Values(ScheduleCase{DType::kF64, false},
                                           ScheduleCase{DType::kI32, false},
                                           ScheduleCase{DType::kF32, true},
                                           ScheduleCase{DType::kI32, true}),
                         [](const ::testing::TestParamInfo<ScheduleCase>& info) {
                           return std::string(DTypeName(info.param.step_dtype)) +
                                  (info.param.jit ? "_jit" : "_reference");
                         });

TEST(ScheduleShapesTest, NoWarmupAndNoCosinePhase) {
  Graph g;
  Tensor step = Placeholder(g, DType::kF64, {}, "s");
  auto cosine_only = WarmupCosineSchedule(step, 2.0, 0, 10, 0.0);
  auto warmup_only = WarmupCosineSchedule(step, 2.0, 4, 4, 0.5);
  ASSERT_TRUE(cosine_only.ok() && warmup_only.ok());
  Session s(g, ReferenceOnly());
  auto at = [&](Tensor lr, double s_value) {
    return s.Run({{step, HostTensor::Scalar(s_value)}}, {lr})->at(0).GetDouble(0);
  };
  EXPECT_NEAR(at(*cosine_only, 0), 2.0, 1e-15);
  EXPECT_NEAR(at(*cosine_only, 5), 1.0, 1e-15);
  EXPECT_NEAR(at(*cosine_only, 10), 0.0, 1e-15);
  EXPECT_NEAR(at(*cosine_only, 11), 0.0, 1e-15);
  EXPECT_NEAR(at(*warmup_only, 1), 0.5, 1e-15);
  EXPECT_NEAR(at(*warmup_only, 4), 2.0, 1e-15);
  EXPECT_NEAR(at(*warmup_only, 5), 0.5, 1e-15);
}

class ClipTest : public ::testing::TestWithParam<bool> {};

// Mixed f32 / f64 grads of odd, prime and tiny extents; max_norm above and below their
// global norm (random values, so the norm is computed, not chosen).
TEST_P(ClipTest, AboveAndBelowTheThreshold) {
  const bool jit = GetParam();
  Graph g;
  std::optional<JitScope> scope;
  if (jit) scope.emplace(g);
  const std::vector<HostTensor> values = {HostTensor::RandomUniform(DType::kF32, {7, 3}, 21, -2, 2),
                                          HostTensor::RandomUniform(DType::kF64, {13}, 22, -2, 2),
                                          HostTensor::RandomUniform(DType::kF32, {1}, 23, -2, 2)};
  std::vector<Tensor> grads;
  double sum_sq = 0;
  for (size_t i = 0; i < values.size(); ++i) {
    grads.push_back(Placeholder(g, values[i].dtype(), values[i].shape(), "g" + std::to_string(i)));
    for (double x : D(values[i])) sum_sq += x * x;
  }
  const double norm = std::sqrt(sum_sq);
  auto low = ClipByGlobalNorm(grads, 0.5 * norm, "low");
  auto high = ClipByGlobalNorm(grads, 2 * norm, "high");
  ASSERT_TRUE(low.ok() && high.ok()) << low.status() << high.status();
  Feeds feeds;
  for (size_t i = 0; i < values.size(); ++i) feeds.push_back({grads[i], values[i]});
  std::vector<Tensor> fetches = {low->global_norm, high->global_norm};
  for (const Tensor& t : low->grads) fetches.push_back(t);
  for (const Tensor& t : high->grads) fetches.push_back(t);
  Session s(g, jit ? Compiled() : ReferenceOnly());
  auto out = s.Run(feeds, fetches);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_NEAR((*out)[0].GetDouble(0), norm, 1e-6 * norm);
  EXPECT_NEAR((*out)[1].GetDouble(0), norm, 1e-6 * norm);
  const double scale = 0.5 * norm / (norm + 1e-6);
  for (size_t i = 0; i < values.size(); ++i) {
    const double tol = Tol(DType::kF32);  // the norm has f32 parts
    std::vector<double> want;
    for (double x : D(values[i])) want.push_back(x * scale);
    EXPECT_EQ((*out)[2 + i].dtype(), values[i].dtype());
    ExpectNear(D((*out)[2 + i]), want, tol, "clipped " + std::to_string(i));
    // Below the threshold: multiplied by exactly 1.
    EXPECT_EQ(D((*out)[2 + values.size() + i]), D(values[i])) << "unclipped " << i;
  }
}

INSTANTIATE_TEST_SUITE_P(Clip, ClipTest, ::testing::Values(false, true),
                         [](const ::testing::TestParamInfo<bool>& info) {
                           return std::string(info.param ? "jit" : "reference");
                         });

// Minimize's optional clip: SGD with global_clip_norm moves w by lr * clipped g.
TEST(MinimizeClipTest, MinimizeClipsBeforeTheUpdate) {
  Graph g;
  Tensor w = Variable(g, HostTensor::From<double>({3, -4}, {2}), "w");
  auto train = Minimize(Optimizer::Sgd(0.1).WithGlobalClipNorm(1.0), Sum(Square(w)), {w});
  ASSERT_TRUE(train.ok()) << train.status();
  Session s(g, ReferenceOnly());
  ASSERT_TRUE(s.Run({}, {}, *train).ok());
  // g = (6, -8), norm 10: clipped g = g / (10 + 1e-6).
  const double k = 1 / (10 + 1e-6);
  ExpectNear(D(*s.VariableValue(w)), {3 - 0.1 * 6 * k, -4 + 0.1 * 8 * k}, 1e-15, "w");
}

TEST(OptimizerExtrasTest, BadArgumentsAreInvalidArgument) {
  Graph g, other;
  Tensor w = Variable(g, HostTensor::From<double>({1, 2}, {2}), "w");
  Tensor loss = Sum(Square(w));
  Tensor vector_lr = Const(g, HostTensor::From<double>({1, 2}, {2}), "vector_lr");
  Tensor int_lr = ScalarConst(g, 1, DType::kI32, "int_lr");
  Tensor foreign_lr = ScalarConst(other, 0.1, DType::kF64);
  Tensor int_grad = Const(g, HostTensor::From<int32_t>({1}, {1}));
  Tensor step = ScalarConst(g, 1, DType::kF64);
  Tensor bool_step = Greater(step, step);
  struct Case {
    std::string what;
    absl::Status status;
    std::string message;
  };
  auto min = [&](const Optimizer& o) { return Minimize(o, loss, {w}).status(); };
  auto sched = [&](Tensor s, double peak, int64_t warm, int64_t total, double floor) {
    return WarmupCosineSchedule(s, peak, warm, total, floor).status();
  };
  std::vector<Case> cases = {
      {"weight_decay", min(Optimizer::AdamW(0.1, 0.9, 0.99, 1e-8, -1)), "weight_decay"},
      {"weight_decay nan", min(Optimizer::AdamW(0.1, 0.9, 0.99, 1e-8, NAN)), "weight_decay"},
      {"adamw beta2", min(Optimizer::AdamW(0.1, 0.9, 1.5)), "beta2"},
      {"adamw eps", min(Optimizer::AdamW(0.1, 0.9, 0.99, -1)), "epsilon"},
      {"clip norm", min(Optimizer::Sgd(0.1).WithGlobalClipNorm(-1)), "global_clip_norm"},
      {"clip inf", min(Optimizer::Sgd(0.1).WithGlobalClipNorm(INFINITY)), "global_clip_norm"},
      {"vector lr", min(Optimizer::Sgd(0).WithLearningRate(vector_lr)), "'vector_lr'"},
      {"int lr", min(Optimizer::AdamW().WithLearningRate(int_lr)), "not a floating scalar"},
      {"foreign lr", min(Optimizer::Adam().WithLearningRate(foreign_lr)), "another graph"},
      {"apply foreign lr",
       ApplyGradients(Optimizer::Sgd(0).WithLearningRate(foreign_lr), {{w * 2.0, w}}).status(),
       "another graph"},
      {"clip empty", ClipByGlobalNorm({}, 1).status(), "no gradients"},
      {"clip zero", ClipByGlobalNorm({w}, 0).status(), "max_norm"},
      {"clip nan", ClipByGlobalNorm({w}, NAN).status(), "max_norm"},
      {"clip int", ClipByGlobalNorm({w, int_grad}, 1).status(), "gradient 1"},
      {"clip invalid", ClipByGlobalNorm({w, Tensor()}, 1).status(), "gradient 1"},
      {"clip foreign", ClipByGlobalNorm({w, foreign_lr}, 1).status(), "gradient 1"},
      {"sched invalid", sched(Tensor(), 1, 1, 2, 0), "step is not a tensor"},
      {"sched vector", sched(w, 1, 1, 2, 0), "not a numeric scalar"},
      {"sched bool", sched(bool_step, 1, 1, 2, 0), "not a numeric scalar"},
      {"sched peak", sched(step, -1, 1, 2, 0), "peak"},
      {"sched peak inf", sched(step, INFINITY, 1, 2, 0), "peak"},
      {"sched min above peak", sched(step, 1, 1, 2, 2), "min_lr"},
      {"sched min negative", sched(step, 1, 1, 2, -0.1), "min_lr"},
      {"sched warmup", sched(step, 1, -1, 2, 0), "warmup_steps"},
      {"sched total", sched(step, 1, 5, 4, 0), "total_steps"},
      {"sched total zero", sched(step, 1, 0, 0, 0), "total_steps"},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(c.status.code(), absl::StatusCode::kInvalidArgument) << c.what << ": " << c.status;
    EXPECT_NE(c.status.message().find(c.message), std::string::npos) << c.what << ": " << c.status;
  }
  EXPECT_TRUE(g.status().ok()) << g.status();
}

}  // namespace
}  // namespace braze
