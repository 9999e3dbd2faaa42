// SessionStats::peak_live_bytes and step_output_bytes (runtime/live_bytes.h): the
// liveness of step outputs over the plan's order, on chains whose sizes are known.
#include <vector>

#include "braze/jit_scope.h"
#include "braze/ops.h"
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

}  // namespace
}  // namespace braze
