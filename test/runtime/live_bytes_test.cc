// SessionStats::peak_live_bytes and step_output_bytes (runtime/live_bytes.h): the
// liveness of step outputs over the plan's order, on chains whose sizes are known.
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "braze/jit_scope.h"
#include "braze/ops.h"
#include "braze/optimizers.h"
#include "braze/precision.h"
#include "braze/session.h"
#include "gtest/gtest.h"

namespace braze {
namespace {

SessionOptions ReferenceOnly() {
  SessionOptions o;
  o.reference_only = true;
  return o;
}

HostTensor Input() { return HostTensor::RandomUniform(DType::kF32, {7, 5}, 3, -1, 1); }

// On the reference kernels every op is a step: x -> Exp -> Neg -> Abs, each [7, 5] f32
// (140 bytes). Exp's result dies when Neg has read it, so at most two are live.
TEST(LiveBytesTest, AChainHoldsTwoValuesAtOnce) {
  Graph g;
  Tensor x = Placeholder(g, DType::kF32, {7, 5}, "x");
  Tensor c = Abs(Neg(Exp(x)));
  Session s(g, ReferenceOnly());
  ASSERT_TRUE(s.Run({{x, Input()}}, {c}).ok());
  EXPECT_EQ(s.stats().peak_live_bytes, 2 * 140);
  EXPECT_EQ(s.stats().step_output_bytes, 3 * 140);
  EXPECT_EQ(s.stats().peak_activation_bytes, 2 * 140);  // all computed from the feed
}

// Activations leave out what the variables alone give (a weight's copy) and the values
// an Assign stores.
TEST(LiveBytesTest, ActivationsLeaveOutWeightsAndUpdates) {
  Graph g;
  Tensor x = Placeholder(g, DType::kF32, {7, 5}, "x");
  Tensor w = Variable(g, Input(), "w");
  Tensor weight = Neg(w);
  Tensor a = Exp(x) + weight;
  Tensor update = Assign(w, Abs(a));
  Session s(g, ReferenceOnly());
  ASSERT_TRUE(s.Run({{x, Input()}}, {a}, {update}).ok());
  // Neg(w), Exp and Add live together; Add (fetched), Abs (the value to store) and the
  // Assign's own result (the new value, committed at the end) after.
  EXPECT_EQ(s.stats().peak_live_bytes, 3 * 140);
  EXPECT_EQ(s.stats().step_output_bytes, 5 * 140);
  EXPECT_EQ(s.stats().peak_activation_bytes, 2 * 140);  // Exp and Add
}

// A value read again at the end stays live through the chain: Exp's result meets Abs's.
TEST(LiveBytesTest, AValueReadLaterStaysLive) {
  Graph g;
  Tensor x = Placeholder(g, DType::kF32, {7, 5}, "x");
  Tensor a = Exp(x);
  Tensor d = a + Abs(Neg(a));
  Session s(g, ReferenceOnly());
  ASSERT_TRUE(s.Run({{x, Input()}}, {d}).ok());
  // After Abs: a, Neg's (last read by Abs, freed after it) and Abs's: 3 live; then Add.
  EXPECT_EQ(s.stats().peak_live_bytes, 3 * 140);
  EXPECT_EQ(s.stats().step_output_bytes, 4 * 140);
}

// The same chain in bf16 (a Cast first): half the bytes per value; and a fused cluster
// writes only what leaves it (its one output), whatever it computes inside.
TEST(LiveBytesTest, SixteenBitValuesAndClusters) {
  Graph g;
  Tensor x = Placeholder(g, DType::kF32, {7, 5}, "x");
  Tensor c;
  {
    PrecisionScope policy(g, DType::kBF16);
    c = Abs(Neg(Relu(MatMul(x, Const(g, HostTensor::RandomUniform(DType::kF32, {5, 5}, 4))))));
  }
  ASSERT_EQ(c.dtype(), DType::kBF16);
  Session reference(g, ReferenceOnly());
  ASSERT_TRUE(reference.Run({{x, Input()}}, {c}).ok());
  // Casts of x (70 bytes) and of the constant (50), MatMul, Relu, Neg, Abs (70 each).
  EXPECT_EQ(reference.stats().step_output_bytes, 70 + 50 + 4 * 70);
  Graph h;
  Tensor y = Placeholder(h, DType::kF32, {7, 5}, "y");
  Tensor out;
  {
    JitScope jit(h);
    out = Abs(Neg(Exp(y)));
  }
  Session fused(h);
  ASSERT_TRUE(fused.Run({{y, Input()}}, {out}).ok());
  EXPECT_EQ(fused.stats().cluster_launches, 1);
  EXPECT_EQ(fused.stats().step_output_bytes, 140);
  EXPECT_EQ(fused.stats().peak_live_bytes, 140);
}

// One fused Adam step of a 40-64-64-10 ReLU MLP (examples/mlp's shape, scaled down) at
// batch 24, built under `precision` (kF32: no policy): its loss and the step's
// peak_activation_bytes after two steps.
struct MlpStepMemory {
  float loss = 0;
  int64_t activation_bytes = 0;
};
MlpStepMemory MlpStep(DType precision, bool loss_scaling = false) {
  constexpr int64_t kBatch = 24, kIn = 40, kHidden = 64, kClasses = 10;
  Graph g;
  Tensor x = Placeholder(g, DType::kF32, {kBatch, kIn}, "x");
  Tensor labels = Placeholder(g, DType::kI32, {kBatch}, "labels");
  std::vector<Tensor> vars;
  const int64_t widths[] = {kIn, kHidden, kHidden, kClasses};
  for (int layer = 0; layer < 3; ++layer) {
    vars.push_back(
        Variable(g,
                 HostTensor::RandomNormal(DType::kF32, {widths[layer], widths[layer + 1]},
                                          50 + layer, 0, std::sqrt(2.0 / widths[layer])),
                 "w"));
    vars.push_back(Variable(g, HostTensor(DType::kF32, {widths[layer + 1]}), "b"));
  }
  Tensor loss;
  std::vector<Tensor> train;
  {
    JitScope jit(g);
    PrecisionScope policy(g, precision);
    Tensor h1 = Dense(x, vars[0], vars[1], Activation::kRelu);
    Tensor h2 = Dense(h1, vars[2], vars[3], Activation::kRelu);
    loss =
        Mean(SoftmaxCrossEntropyWithLogits(Dense(h2, vars[4], vars[5]), OneHot(labels, kClasses)));
    Optimizer adam = Optimizer::Adam(1e-3);
    if (loss_scaling) adam = adam.WithLossScaling({.initial_scale = 1024});
    absl::StatusOr<std::vector<Tensor>> updates = Minimize(adam, loss, vars);
    EXPECT_TRUE(updates.ok()) << updates.status();
    if (updates.ok()) train = *updates;
  }
  HostTensor label_values(DType::kI32, {kBatch});
  for (int64_t i = 0; i < kBatch; ++i) label_values.data<int32_t>()[i] = (i * 7) % kClasses;
  Session s(g);
  std::vector<HostTensor> out;
  MlpStepMemory result;
  for (int step = 0; step < 2; ++step) {
    absl::Status st =
        s.RunInto({{x, HostTensor::RandomUniform(DType::kF32, {kBatch, kIn}, 5, 0, 1)},
                   {labels, label_values}},
                  {loss}, &out, train);
    EXPECT_TRUE(st.ok()) << st;
    if (!st.ok()) return result;
    if (step == 0) result.loss = out[0].data<float>()[0];
  }
  result.activation_bytes = s.stats().peak_activation_bytes;
  return result;
}

// The bf16 policy keeps half the f32 step's activations (policy, issue 38's goal: at most
// 0.55x): the 16-bit activations and their gradients, the ReLU masks computed in the
// backward pass from the activations, the batch's 16-bit copy cast again where the
// weight gradient reads it, and each Adam update in its gradient's cluster (no
// weight-sized sqrt(v) + eps between clusters). The losses agree to bf16's precision.
TEST(LiveBytesTest, TheBf16PolicyHalvesAnMlpStepsActivations) {
  const MlpStepMemory f32 = MlpStep(DType::kF32);
  const MlpStepMemory bf16 = MlpStep(DType::kBF16);
  RecordProperty("f32_activation_bytes", std::to_string(f32.activation_bytes));
  RecordProperty("bf16_activation_bytes", std::to_string(bf16.activation_bytes));
  EXPECT_NEAR(bf16.loss, f32.loss, 3e-2 * std::abs(f32.loss));
  // f32: h1, h2 and a ReLU gradient [24, 64] live at once, 3 * 6144 bytes, and the
  // logits' gradient and the loss.
  EXPECT_GT(f32.activation_bytes, 3 * 24 * 64 * 4);
  EXPECT_LT(f32.activation_bytes, 4 * 24 * 64 * 4);
  EXPECT_LE(bf16.activation_bytes, 0.55 * f32.activation_bytes)
      << "bf16 " << bf16.activation_bytes << " bytes, f32 " << f32.activation_bytes;
}

// The f16 policy with dynamic loss scaling does too: each update is computed in its
// gradient's cluster and committed only if every gradient is finite (the gated update
// step, runtime/step_gated_update.cc), so the gradients do not wait for the check.
TEST(LiveBytesTest, TheF16PolicyWithLossScalingHalvesThemToo) {
  const MlpStepMemory f32 = MlpStep(DType::kF32);
  const MlpStepMemory f16 = MlpStep(DType::kF16, /*loss_scaling=*/true);
  RecordProperty("f16_activation_bytes", std::to_string(f16.activation_bytes));
  EXPECT_NEAR(f16.loss, f32.loss, 1e-2 * std::abs(f32.loss));
  EXPECT_LE(f16.activation_bytes, 0.55 * f32.activation_bytes)
      << "f16 " << f16.activation_bytes << " bytes, f32 " << f32.activation_bytes;
}

}  // namespace
}  // namespace braze
