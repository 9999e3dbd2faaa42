// The mixed-precision policy (braze/precision.h) and dynamic loss scaling
// (Optimizer::WithLossScaling): the per-op rule, training steps against f32 and against
// the reference kernels, skipped steps, growth, the log, Function and checkpoints.
#include <cmath>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "autodiff/grad_check.h"
#include "braze/checkpoint.h"
#include "braze/device.h"
#include "braze/function.h"
#include "braze/jit_scope.h"
#include "braze/logging.h"
#include "braze/ops.h"
#include "braze/optimizers.h"
#include "braze/precision.h"
#include "gtest/gtest.h"

namespace braze {
namespace {

using gradtest::ReferenceOnly;

// Odd, prime extents: batch 7, 13 inputs, 17 hidden units, 5 classes.
constexpr int64_t kBatch = 7, kIn = 13, kHidden = 17, kClasses = 5;

HostTensor Inputs(uint64_t seed) {
  return HostTensor::RandomUniform(DType::kF32, {kBatch, kIn}, seed, -1, 1);
}

HostTensor Labels(uint64_t seed) {
  HostTensor rows = HostTensor::RandomUniform(DType::kI32, {kBatch}, seed, 0, kClasses);
  HostTensor y(DType::kF32, {kBatch, kClasses});
  for (int64_t i = 0; i < kBatch; ++i) y.SetDouble(i * kClasses + rows.GetDouble(i), 1);
  return y;
}

// The variable of `g` whose name ends with `suffix` (the optimizer names them).
std::optional<Tensor> FindVariable(Graph& g, absl::string_view suffix) {
  for (int id = 0; id < g.num_nodes(); ++id) {
    const Node& n = g.node(id);
    if (n.op() == OpKind::kVariable && absl::EndsWith(n.name(), suffix)) return Tensor(&g, id);
  }
  return std::nullopt;
}

// A two-layer ReLU MLP with a softmax cross-entropy loss, built under the policy of
// `precision` (and a JitScope, so that a default session compiles it).
struct Mlp {
  Mlp(DType precision, const Optimizer& optimizer) {
    w1 = Variable(g, HostTensor::RandomNormal(DType::kF32, {kIn, kHidden}, 11, 0, 0.4), "w1");
    b1 = Variable(g, HostTensor::RandomUniform(DType::kF32, {kHidden}, 12, -0.1, 0.1), "b1");
    w2 = Variable(g, HostTensor::RandomNormal(DType::kF32, {kHidden, kClasses}, 13, 0, 0.4), "w2");
    b2 = Variable(g, HostTensor::RandomUniform(DType::kF32, {kClasses}, 14, -0.1, 0.1), "b2");
    x = Placeholder(g, DType::kF32, {-1, kIn}, "x");
    y = Placeholder(g, DType::kF32, {-1, kClasses}, "y");
    JitScope jit(g);
    PrecisionScope policy(g, precision);
    logits = Dense(Dense(x, w1, b1, Activation::kRelu), w2, b2);
    loss = Mean(SoftmaxCrossEntropyWithLogits(logits, y));
    absl::StatusOr<std::vector<Tensor>> t = Minimize(optimizer, loss, {w1, b1, w2, b2});
    EXPECT_TRUE(t.ok()) << t.status();
    if (t.ok()) train = *t;
  }
  std::vector<Tensor> vars() const { return {w1, b1, w2, b2}; }

  Graph g;
  Tensor w1, b1, w2, b2, x, y, logits, loss;
  std::vector<Tensor> train;
};

// Runs `steps` training steps on batches of seeds 100, 101, ...; returns each loss.
std::vector<double> Train(Mlp& m, Session& s, int steps) {
  std::vector<double> losses;
  for (int i = 0; i < steps; ++i) {
    auto out = s.Run({{m.x, Inputs(100 + i)}, {m.y, Labels(200 + i)}}, {m.loss}, m.train);
    EXPECT_TRUE(out.ok()) << out.status();
    if (!out.ok()) return losses;
    losses.push_back((*out)[0].GetDouble(0));
  }
  return losses;
}

// max |a - b| / (1 + max |b|) over the variables' values in two sessions.
double Distance(const std::vector<Tensor>& va, Session& a, const std::vector<Tensor>& vb,
                Session& b) {
  double worst = 0;
  for (size_t i = 0; i < va.size(); ++i) {
    HostTensor x = *a.VariableValue(va[i]), y = *b.VariableValue(vb[i]);
    double scale = 0, diff = 0;
    for (int64_t j = 0; j < y.num_elements(); ++j) {
      scale = std::max(scale, std::abs(y.GetDouble(j)));
      diff = std::max(diff, std::abs(x.GetDouble(j) - y.GetDouble(j)));
    }
    worst = std::max(worst, diff / (1 + scale));
  }
  return worst;
}

TEST(PrecisionPolicyTest, RuleTable) {
  Graph g;
  Tensor w = Variable(g, HostTensor::RandomNormal(DType::kF32, {3, 5}, 1), "w");
  Tensor x = Placeholder(g, DType::kF32, {2, 3}, "x");
  Tensor b = Placeholder(g, DType::kF32, {5}, "b");
  Tensor f = Variable(g, HostTensor::RandomNormal(DType::kF32, {3, 3, 2, 4}, 2), "filter");
  Tensor img = Placeholder(g, DType::kF32, {1, 5, 5, 2}, "img");
  {
    PrecisionScope policy(g, DType::kBF16);
    Tensor mm = MatMul(x, w);  // lower: both operands cast down
    EXPECT_EQ(mm.dtype(), DType::kBF16);
    EXPECT_EQ(mm.node().input(0).node().op(), OpKind::kCast);
    EXPECT_EQ(mm.node().input(1).node().op(), OpKind::kCast);
    EXPECT_EQ(mm.node().input(1).node().input(0), w);  // the f32 master
    Tensor h = Relu(mm + b);                           // follow: the f32 bias is cast down
    EXPECT_EQ(h.dtype(), DType::kBF16);
    EXPECT_EQ(Sum(h).dtype(), DType::kF32);  // widen
    EXPECT_EQ(Mean(h, {1}).dtype(), DType::kF32);
    EXPECT_EQ(Exp(h).dtype(), DType::kF32);
    EXPECT_EQ(Max(h, {1}).dtype(), DType::kBF16);  // keep: a selection is exact
    EXPECT_EQ(Softmax(h).dtype(), DType::kF32);    // softmax statistics and result f32
    EXPECT_EQ(LogSoftmax(h).dtype(), DType::kF32);
    EXPECT_EQ(Conv2D(img, f).dtype(), DType::kBF16);
    EXPECT_EQ(Cast(h, DType::kF32).dtype(), DType::kF32);          // the program's own casts stand
    Tensor v = Variable(g, HostTensor(DType::kF32, {2, 5}), "v");  // masters stay f32
    EXPECT_EQ(v.dtype(), DType::kF32);
    Tensor a = Assign(v, h);  // the update is the master's dtype
    EXPECT_TRUE(a.node().status().ok()) << a.node().status();
    EXPECT_EQ(a.node().input(1).dtype(), DType::kF32);
    {
      PrecisionScope off(g, DType::kF32);
      EXPECT_EQ(MatMul(x, w).dtype(), DType::kF32);
    }
    EXPECT_EQ(MatMul(x, w).dtype(), DType::kBF16);  // the outer scope again
  }
  EXPECT_EQ(MatMul(x, w).dtype(), DType::kF32);
  {
    PrecisionScope policy(g, DType::kF16);
    EXPECT_EQ(Relu(MatMul(x, w) + b).dtype(), DType::kF16);
  }
  EXPECT_TRUE(g.status().ok()) << g.status();
  {
    PrecisionScope bad(g, DType::kI32);
    EXPECT_EQ(MatMul(x, w).dtype(), DType::kF32);
  }
  EXPECT_EQ(g.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(g.status().message(), "PrecisionScope")) << g.status();
}

// A step under each policy against the f32 step, compiled and on the reference kernels.
TEST(PrecisionPolicyTest, TrainingMatchesF32AndReference) {
  Mlp f32(DType::kF32, Optimizer::Sgd(0.2));
  Session s32(f32.g);
  const std::vector<double> want = Train(f32, s32, 3);
  ASSERT_EQ(want.size(), 3u);
  // Tolerances: a 16-bit op is within one ulp of its type per op (2^-8 bf16, 2^-11 f16);
  // the step chains about ten of them.
  for (auto [dtype, tol] : {std::pair{DType::kBF16, 3e-2}, std::pair{DType::kF16, 5e-3}}) {
    SCOPED_TRACE(DTypeName(dtype));
    Mlp m(dtype, Optimizer::Sgd(0.2));
    EXPECT_EQ(m.logits.dtype(), dtype);
    EXPECT_EQ(m.loss.dtype(), DType::kF32);
    Session compiled(m.g);
    Session reference(m.g, ReferenceOnly());
    const std::vector<double> got = Train(m, compiled, 3);
    const std::vector<double> ref = Train(m, reference, 3);
    ASSERT_EQ(got.size(), 3u);
    ASSERT_EQ(ref.size(), 3u);
    EXPECT_GT(compiled.stats().cluster_launches, 0);
    for (int i = 0; i < 3; ++i) {
      EXPECT_NEAR(got[i], want[i], tol * (1 + std::abs(want[i]))) << "step " << i;
      EXPECT_NEAR(got[i], ref[i], tol * (1 + std::abs(ref[i]))) << "step " << i;
    }
    EXPECT_LT(Distance(m.vars(), compiled, f32.vars(), s32), tol);
    EXPECT_LT(Distance(m.vars(), compiled, m.vars(), reference), tol);
    for (const Tensor& v : m.vars()) EXPECT_EQ(compiled.VariableValue(v)->dtype(), DType::kF32);
  }
}

// The policy's training step on OpenCL (POCL here: bf16 and f16 stored as their bits in
// the kernels, compile/float16_bits.h), forward, gradients and updates, strict (a
// cluster that fails to compile is an error, not a fallback), against the reference.
TEST(PrecisionPolicyTest, TrainingOnOpenCLMatchesReference) {
  if (absl::Status s = CheckOpenCLAvailable(); !s.ok()) GTEST_SKIP() << s.message();
  SessionOptions on_device;
  on_device.device = "opencl:0";
  on_device.strict = true;
  for (auto [dtype, tol] : {std::pair{DType::kBF16, 3e-2}, std::pair{DType::kF16, 5e-3}}) {
    SCOPED_TRACE(DTypeName(dtype));
    Mlp m(dtype, Optimizer::Sgd(0.2));
    Session compiled(m.g, on_device);
    Session reference(m.g, ReferenceOnly());
    const std::vector<double> got = Train(m, compiled, 2);
    const std::vector<double> ref = Train(m, reference, 2);
    ASSERT_EQ(got.size(), 2u);
    ASSERT_EQ(ref.size(), 2u);
    EXPECT_GT(compiled.stats().cluster_launches, 0);
    EXPECT_GT(compiled.stats().host_to_device_copies, 0);  // it ran on the device
    for (int i = 0; i < 2; ++i) {
      EXPECT_NEAR(got[i], ref[i], tol * (1 + std::abs(ref[i]))) << "step " << i;
    }
    EXPECT_LT(Distance(m.vars(), compiled, m.vars(), reference), tol);
  }
}

// The fused attention op under the policy: 16-bit q, k, v, its gradient ops built from
// what the rule gives them, the gradients of the f32 inputs f32, and the loss and the
// gradients near f32's (reference kernels; bf16's tolerance).
TEST(PrecisionPolicyTest, AttentionAndItsGradients) {
  auto build = [](Graph& g, DType precision, std::vector<Tensor>* out) {
    std::vector<Tensor> qkv;
    for (int i = 0; i < 3; ++i) {
      qkv.push_back(Variable(g, HostTensor::RandomNormal(DType::kF32, {2, 7, 8}, 40 + i), "qkv"));
    }
    PrecisionScope policy(g, precision);
    AttentionAttrs attrs;
    attrs.causal = true;
    attrs.scale = 1 / std::sqrt(8.0);
    Tensor o = Attention(qkv[0], qkv[1], qkv[2], attrs);
    EXPECT_EQ(o.dtype(), precision);
    Tensor loss = Mean(Square(o));
    auto grads = Gradients({loss}, qkv);
    ASSERT_TRUE(grads.ok()) << grads.status();
    *out = {loss};
    for (const Tensor& t : *grads) {
      EXPECT_EQ(t.dtype(), DType::kF32);
      out->push_back(t);
    }
  };
  Graph g32, g16;
  std::vector<Tensor> want, got;
  build(g32, DType::kF32, &want);
  build(g16, DType::kBF16, &got);
  ASSERT_EQ(got.size(), 4u);
  ASSERT_TRUE(g16.status().ok()) << g16.status();
  Session a(g32, ReferenceOnly()), b(g16, ReferenceOnly());
  auto x = a.Run({}, want);
  auto y = b.Run({}, got);
  ASSERT_TRUE(x.ok()) << x.status();
  ASSERT_TRUE(y.ok()) << y.status();
  for (size_t i = 0; i < want.size(); ++i) {
    std::string why;
    EXPECT_TRUE(AllClose((*y)[i], (*x)[i], 3e-2, 3e-2 * 0.1, &why)) << i << ": " << why;
  }
}

HostTensor WithInf(HostTensor x, double bad) {
  x.SetDouble(kIn + 3, bad);
  return x;
}

// An inf or NaN input makes the gradients non-finite: the step changes no variable (nor
// Adam's slots and step) and halves the scale; the next finite step goes on.
TEST(LossScaleTest, NonFiniteGradientSkipsTheStepAndBacksOff) {
  for (bool reference : {false, true}) {
    for (double bad : {std::numeric_limits<double>::infinity(), std::nan("")}) {
      SCOPED_TRACE(absl::StrCat(reference ? "reference " : "compiled ", bad));
      Mlp m(DType::kF16, Optimizer::Adam(1e-2).WithLossScaling({.initial_scale = 1024}));
      std::optional<Tensor> scale = FindVariable(m.g, "loss_scale/scale");
      std::optional<Tensor> good = FindVariable(m.g, "loss_scale/good_steps");
      ASSERT_TRUE(scale && good);
      Session s(m.g, reference ? ReferenceOnly() : SessionOptions{});
      std::vector<Tensor> state;  // every variable but the scale and count
      for (int id = 0; id < m.g.num_nodes(); ++id) {
        if (m.g.node(id).op() == OpKind::kVariable && id != scale->node_id() &&
            id != good->node_id()) {
          state.push_back(Tensor(&m.g, id));
        }
      }
      ASSERT_EQ(state.size(), 4u + 8u + 1u);  // weights, Adam's m and v, Adam's step
      std::vector<HostTensor> before;
      for (const Tensor& v : state) before.push_back(*s.VariableValue(v));
      ASSERT_TRUE(s.Run({{m.x, WithInf(Inputs(1), bad)}, {m.y, Labels(2)}}, {}, m.train).ok());
      for (size_t i = 0; i < state.size(); ++i) {
        std::string why;
        EXPECT_TRUE(AllClose(*s.VariableValue(state[i]), before[i], 0, 0, &why))
            << state[i].name() << ": " << why;
      }
      EXPECT_EQ(s.VariableValue(*scale)->GetDouble(0), 512);
      EXPECT_EQ(s.VariableValue(*good)->GetDouble(0), 0);
      ASSERT_TRUE(s.Run({{m.x, Inputs(1)}, {m.y, Labels(2)}}, {}, m.train).ok());
      EXPECT_EQ(s.VariableValue(*scale)->GetDouble(0), 512);
      EXPECT_EQ(s.VariableValue(*good)->GetDouble(0), 1);
      EXPECT_FALSE(AllClose(*s.VariableValue(m.w1), before[0], 0, 1e-6));
    }
  }
}

TEST(LossScaleTest, GrowsAfterGrowthIntervalFiniteSteps) {
  Mlp m(DType::kF16,
        Optimizer::Sgd(0.1).WithLossScaling({.initial_scale = 256, .growth_interval = 3}));
  Tensor scale = *FindVariable(m.g, "loss_scale/scale");
  Tensor good = *FindVariable(m.g, "loss_scale/good_steps");
  Session s(m.g);
  const std::vector<std::pair<double, double>> want = {{256, 1}, {256, 2}, {512, 0}, {512, 1}};
  for (size_t i = 0; i < want.size(); ++i) {
    ASSERT_EQ(Train(m, s, 1).size(), 1u);
    EXPECT_EQ(s.VariableValue(scale)->GetDouble(0), want[i].first) << "step " << i;
    EXPECT_EQ(s.VariableValue(good)->GetDouble(0), want[i].second) << "step " << i;
  }
  // A skipped step restarts the count.
  ASSERT_TRUE(s.Run({{m.x, WithInf(Inputs(1), INFINITY)}, {m.y, Labels(2)}}, {}, m.train).ok());
  EXPECT_EQ(s.VariableValue(scale)->GetDouble(0), 256);
  EXPECT_EQ(s.VariableValue(good)->GetDouble(0), 0);
}

// A growth past f32's range is not taken: the scale went 1.5e38, 3e38, inf, and from
// then every step's gradients were inf and every step was skipped.
TEST(LossScaleTest, TheScaleNeverGrowsToInfinity) {
  Graph g;
  Tensor w = Variable(g, HostTensor::From<float>({1, 2}, {2}), "w");
  Tensor loss = Sum(w) * 1e-30;  // scaled, 3e8 a gradient: finite
  auto train = Minimize(Optimizer::Sgd(1e30).WithLossScaling(
                            {.initial_scale = 1.5e38, .growth_interval = 1, .always = true}),
                        loss, {w});
  ASSERT_TRUE(train.ok()) << train.status();
  Tensor scale = *FindVariable(g, "loss_scale/scale");
  Session s(g);
  for (int step = 0; step < 3; ++step) ASSERT_TRUE(s.Run({}, {}, *train).ok());
  EXPECT_EQ(s.VariableValue(scale)->GetDouble(0), static_cast<double>(3e38f));
  EXPECT_NEAR(s.VariableValue(w)->GetDouble(0), -2, 1e-5);  // each step: w -= 1e30 * 1e-30
}

// A 16-bit gradient is unscaled in f32: 1 / 2^26 cast to f16 is 0, which zeroed the
// gradient of an f16 variable (the step "finite", nothing learned).
TEST(LossScaleTest, AnF16GradientIsUnscaledInF32) {
  for (bool reference : {false, true}) {
    SCOPED_TRACE(reference);
    Graph g;
    Tensor w64 = Variable(g, HostTensor::From<double>({1}, {1}), "w64");
    Tensor w16 = Variable(g, HostTensor::Filled(DType::kF16, {1}, 1.0), "w16");
    // d loss / d w16 = 1e-6: 67 once scaled by 2^26, finite in f16. An f64 gradient
    // keeps its f64 digits (1 + 1e-12, which f32 rounds to 1).
    Tensor loss =
        Sum(Cast(w16, DType::kF32)) * 1e-6 + Cast(Sum(w64) * (1e-3 * (1 + 1e-12)), DType::kF32);
    auto train = Minimize(Optimizer::Sgd(1000).WithLossScaling(
                              {.initial_scale = 67108864, .growth_interval = 100, .always = true}),
                          loss, {w64, w16});
    ASSERT_TRUE(train.ok()) << train.status();
    Session s(g, reference ? ReferenceOnly() : SessionOptions{});
    ASSERT_TRUE(s.Run({}, {}, *train).ok());
    // 1 - 1000 * 1e-6 = 0.999, the f16 nearest (an ulp is 2^-11 below 1).
    EXPECT_NEAR(s.VariableValue(w16)->GetDouble(0), 0.999, 0x1p-11);
    EXPECT_NEAR(s.VariableValue(w64)->GetDouble(0), -1e-12, 1e-14);  // 1 - 1000 * 1e-3 (1 + 1e-12)
  }
}

// Adam and AdamW on f16 variables with the default epsilon (1e-8, 0 in f16): an element
// whose gradient was 0 keeps its value (it was 0 / 0 = NaN); the others move by about lr.
TEST(PrecisionPolicyTest, AdamOnF16VariablesKeepsItsEpsilon) {
  for (bool adamw : {false, true}) {
    for (bool reference : {false, true}) {
      SCOPED_TRACE(absl::StrCat(adamw ? "AdamW " : "Adam ", reference ? "reference" : "compiled"));
      Graph g;
      Tensor w = Variable(g, HostTensor::Filled(DType::kF16, {3}, 1.0), "w");
      Tensor mask = Const(g, HostTensor::From<float>({1, -1, 0}, {3}));
      Tensor loss = Sum(Cast(w, DType::kF32) * mask);
      Optimizer o = adamw ? Optimizer::AdamW(0.01, 0.9, 0.999, 1e-8, 0) : Optimizer::Adam(0.01);
      auto train = Minimize(o, loss, {w});
      ASSERT_TRUE(train.ok()) << train.status();
      Session s(g, reference ? ReferenceOnly() : SessionOptions{});
      ASSERT_TRUE(s.Run({}, {}, *train).ok());
      const HostTensor got = *s.VariableValue(w);
      EXPECT_NEAR(got.GetDouble(0), 0.99, 0x1p-10);
      EXPECT_NEAR(got.GetDouble(1), 1.01, 0x1p-10);
      EXPECT_EQ(got.GetDouble(2), 1.0);
    }
  }
}

TEST(LossScaleTest, TheLogSaysWhenItBacksOffAndGrows) {
  std::vector<std::string> lines;
  SetLogSink([&lines](LogSeverity, int, std::string_view text) {
    if (std::string(text).find("loss scale") != std::string::npos) lines.emplace_back(text);
  });
  Mlp m(DType::kF16,
        Optimizer::Sgd(0.1).WithLossScaling({.initial_scale = 64, .growth_interval = 2}));
  Session s(m.g);
  ASSERT_TRUE(s.Run({{m.x, WithInf(Inputs(1), INFINITY)}, {m.y, Labels(2)}}, {}, m.train).ok());
  Train(m, s, 2);
  SetLogSink(nullptr);
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_TRUE(absl::StrContains(lines[0], "step skipped; scale 64 -> 32")) << lines[0];
  EXPECT_TRUE(absl::StrContains(lines[1], "2 finite steps in a row; scale 32 -> 64")) << lines[1];
}

// bf16 has f32's exponent range: no scaling is built, the step is plain bf16's.
TEST(LossScaleTest, Bf16AndF32PoliciesDoNotScale) {
  for (DType dtype : {DType::kBF16, DType::kF32}) {
    Mlp scaled(dtype, Optimizer::Adam(1e-2).WithLossScaling());
    Mlp plain(dtype, Optimizer::Adam(1e-2));
    EXPECT_FALSE(FindVariable(scaled.g, "loss_scale/scale").has_value());
    EXPECT_EQ(scaled.g.num_nodes(), plain.g.num_nodes());
    Session a(scaled.g, ReferenceOnly()), b(plain.g, ReferenceOnly());
    EXPECT_EQ(Train(scaled, a, 2), Train(plain, b, 2));
    EXPECT_EQ(Distance(scaled.vars(), a, plain.vars(), b), 0);
  }
  // always: scales under any policy (here f32, where the scale is a power of two and
  // the step is the unscaled one up to rounding).
  Mlp always(DType::kF32, Optimizer::Sgd(0.2).WithLossScaling({.always = true}));
  EXPECT_TRUE(FindVariable(always.g, "loss_scale/scale").has_value());
}

// f16 with loss scaling trains as f32 does, within f16's tolerance.
TEST(LossScaleTest, F16WithScalingMatchesF32) {
  Mlp f32(DType::kF32, Optimizer::Adam(1e-2));
  Mlp f16(DType::kF16, Optimizer::Adam(1e-2).WithLossScaling({.initial_scale = 4096}));
  Session a(f32.g), b(f16.g);
  const std::vector<double> want = Train(f32, a, 5), got = Train(f16, b, 5);
  ASSERT_EQ(got.size(), 5u);
  for (int i = 0; i < 5; ++i) EXPECT_NEAR(got[i], want[i], 1e-2 * (1 + want[i])) << i;
  EXPECT_LT(Distance(f16.vars(), b, f32.vars(), a), 1e-2);
  EXPECT_EQ(b.VariableValue(*FindVariable(f16.g, "loss_scale/scale"))->GetDouble(0), 4096);
}

TEST(LossScaleTest, CheckpointsKeepTheScale) {
  Mlp m(DType::kF16, Optimizer::Sgd(0.1).WithLossScaling());
  Session s(m.g, ReferenceOnly());
  VariableSet vars = SessionVariables(s);
  int found = 0;
  for (const Tensor& v : vars.variables) {
    found += absl::EndsWith(v.name(), "loss_scale/scale") ||
             absl::EndsWith(v.name(), "loss_scale/good_steps");
  }
  EXPECT_EQ(found, 2);
}

// An f16 step of SGD with loss scaling as a Function on `options` (graph and precision
// set here): a step with an inf input is skipped and halves the scale, two finite ones
// train and grow it back. Returns the Function's stats.
SessionStats ExpectLossScalingUnderAFunction(FunctionOptions options) {
  Graph g;
  Tensor w = Variable(g, HostTensor::RandomNormal(DType::kF32, {kIn, kClasses}, 3, 0, 0.4), "w");
  options.graph = &g;
  options.precision = DType::kF16;
  Function step(
      [&](Graph&, const std::vector<Tensor>& args) -> std::vector<Tensor> {
        Tensor logits = MatMul(args[0], w);
        EXPECT_EQ(logits.dtype(), DType::kF16);
        Tensor loss = Mean(SoftmaxCrossEntropyWithLogits(logits, args[1]));
        auto train =
            Minimize(Optimizer::Sgd(0.5).WithLossScaling({.growth_interval = 2}), loss, {w});
        EXPECT_TRUE(train.ok()) << train.status();
        return {loss};
      },
      options);
  const HostTensor w0 = *ReadVariable(w);
  auto out = step({WithInf(Inputs(1), INFINITY), Labels(2)});
  EXPECT_TRUE(out.ok()) << out.status();
  std::string why;
  EXPECT_TRUE(AllClose(*ReadVariable(w), w0, 0, 0, &why)) << why;  // skipped
  std::optional<Tensor> scale = FindVariable(g, "loss_scale/scale");
  if (!scale.has_value()) {
    ADD_FAILURE() << "no loss_scale/scale variable";
    return step.stats();
  }
  EXPECT_EQ(ReadVariable(*scale)->GetDouble(0), 32768);
  EXPECT_TRUE(step({Inputs(1), Labels(2)}).ok());
  EXPECT_FALSE(AllClose(*ReadVariable(w), w0, 0, 1e-6));
  EXPECT_TRUE(step({Inputs(3), Labels(4)}).ok());
  EXPECT_EQ(ReadVariable(*scale)->GetDouble(0), 65536);
  return step.stats();
}

TEST(LossScaleTest, UnderAFunction) {
  FunctionOptions options;
  options.jit_compile = true;
  options.input_signature = {{DType::kF32, {-1, kIn}}, {DType::kF32, {-1, kClasses}}};
  EXPECT_GT(ExpectLossScalingUnderAFunction(options).reference_launches, 0);  // the log
}

// Under RunFunctionsEagerly(true) too: the JitScope loss scaling opens around its log's
// HostCall is Braze's, not the body's, so it fails no eager call (it failed every one:
// "JitScope jit_scope_0 was opened while functions run eagerly"), and the eager steps
// skip, unscale and grow as the traced ones do.
TEST(LossScaleTest, UnderAFunctionRunEagerly) {
  RunFunctionsEagerly(true);
  struct Restore {
    ~Restore() { RunFunctionsEagerly(false); }
  } restore;
  ExpectLossScalingUnderAFunction(FunctionOptions{});
  // A JitScope the body itself opens still fails an eager call.
  Function scoped([&](Graph& fg, const std::vector<Tensor>& args) -> std::vector<Tensor> {
    JitScope scope(fg);
    return {args[0] * 2.0};
  });
  auto refused = scoped({Inputs(1)});
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kFailedPrecondition) << refused.status();
}

TEST(LossScaleTest, BadSettingsAndApplyGradients) {
  Graph g;
  Tensor w = Variable(g, HostTensor::RandomNormal(DType::kF32, {3}, 1), "w");
  PrecisionScope policy(g, DType::kF16);
  Tensor loss = Sum(Square(w));
  for (LossScaling bad : {LossScaling{.initial_scale = 0}, LossScaling{.growth_factor = 0.5},
                          LossScaling{.backoff_factor = 0}, LossScaling{.growth_interval = 0}}) {
    auto t = Minimize(Optimizer::Sgd(0.1).WithLossScaling(bad), loss, {w});
    EXPECT_EQ(t.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_TRUE(absl::StrContains(t.status().message(), "loss scaling")) << t.status();
  }
  auto grads = Gradients({loss}, {w});
  ASSERT_TRUE(grads.ok());
  auto apply = ApplyGradients(Optimizer::Sgd(0.1).WithLossScaling(), {{(*grads)[0], w}});
  EXPECT_EQ(apply.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(apply.status().message(), "Minimize")) << apply.status();
}

}  // namespace
}  // namespace braze
