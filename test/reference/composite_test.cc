// The composites of braze/ops.h (Softmax, LogSoftmax, SoftmaxCrossEntropyWithLogits,
// Dense, LayerNorm, Gelu) evaluated node by node through the reference kernels.
// Expected values were computed independently in double precision.
#include <cmath>
#include <cstdint>
#include <limits>

#include "braze/ops.h"
#include "gtest/gtest.h"
#include "reference/eval_graph.h"

namespace braze {
namespace {

using reftest::EvalNear;

HostTensor F32(std::initializer_list<float> v, Shape s) { return HostTensor::From<float>(v, s); }
HostTensor F64(std::initializer_list<double> v, Shape s) { return HostTensor::From<double>(v, s); }

constexpr double kTol = 1e-6;

class SoftmaxTest : public ::testing::Test {
 protected:
  Graph g;
  // Row 1 is large enough that a naive exp would overflow to inf.
  Tensor logits = Const(g, F32({1, 2, 3, 1000, 1000, 1000}, {2, 3}));
};

TEST_F(SoftmaxTest, LastAxisIsStable) {
  const float third = 1.f / 3.f;
  EXPECT_TRUE(EvalNear(
      Softmax(logits),
      F32({0.09003057317038046f, 0.24472847105479764f, 0.6652409557748218f, third, third, third},
          {2, 3}),
      kTol));
}

TEST_F(SoftmaxTest, FirstAxis) {
  Tensor x = Const(g, F32({0, 1, 2, 5}, {2, 2}));
  // Columns [0,2] and [1,5].
  EXPECT_TRUE(EvalNear(
      Softmax(x, 0),
      F32({0.11920292202211755f, 0.017986209962091555f, 0.8807970779778823f, 0.9820137900379085f},
          {2, 2}),
      kTol));
}

TEST_F(SoftmaxTest, LogSoftmax) {
  const float ln3 = 1.0986122886681098f;
  EXPECT_TRUE(EvalNear(
      LogSoftmax(logits),
      F32({-2.4076059644443806f, -1.4076059644443806f, -0.4076059644443806f, -ln3, -ln3, -ln3},
          {2, 3}),
      kTol));
}

TEST_F(SoftmaxTest, CrossEntropyWithLogits) {
  Tensor labels = Const(g, F32({0, 0, 1, 0.5f, 0.5f, 0}, {2, 3}));
  EXPECT_TRUE(EvalNear(SoftmaxCrossEntropyWithLogits(logits, labels),
                       F32({0.4076059644443806f, 1.0986122886681098f}, {2}), kTol));
}

TEST_F(SoftmaxTest, ZeroRows) {
  Tensor empty = Const(g, HostTensor(DType::kF32, {0, 3}));
  EXPECT_TRUE(EvalNear(Softmax(empty), HostTensor(DType::kF32, {0, 3})));
  EXPECT_TRUE(EvalNear(SoftmaxCrossEntropyWithLogits(empty, empty), HostTensor(DType::kF32, {0})));
}

class DenseTest : public ::testing::Test {
 protected:
  Graph g;
  // x @ w + b = [[7.5, -7.5], [1.5, -8.5]].
  Tensor x = Const(g, F32({1, 2, 3, -1, 0, 1}, {2, 3}));
  Tensor w = Const(g, F32({1, -1, 0, 1, 2, 0.5f}, {3, 2}));
  Tensor b = Const(g, F32({0.5f, -10}, {2}));
};

TEST_F(DenseTest, Activations) {
  EXPECT_TRUE(EvalNear(Dense(x, w, b), F32({7.5f, -7.5f, 1.5f, -8.5f}, {2, 2}), kTol));
  EXPECT_TRUE(EvalNear(Dense(x, w, b, Activation::kRelu), F32({7.5f, 0, 1.5f, 0}, {2, 2}), kTol));
  EXPECT_TRUE(EvalNear(Dense(x, w, b, Activation::kSigmoid),
                       F32({0.9994472213630764f, 0.0005527786369235996f, 0.8175744761936437f,
                            0.00020342697805520653f},
                           {2, 2}),
                       kTol));
  EXPECT_TRUE(EvalNear(
      Dense(x, w, b, Activation::kTanh),
      F32({0.9999993881955461f, -0.9999993881955461f, 0.9051482536448664f, -0.999999917201249f},
          {2, 2}),
      kTol));
  EXPECT_TRUE(EvalNear(Dense(x, w, b, Activation::kGelu),
                       F32({7.5f, 0, 1.3995715769802328f, 0}, {2, 2}), 1e-5));
}

TEST(LayerNormTest, NormalizesLastAxis) {
  Graph g;
  Tensor x = Const(g, F32({1, 2, 3, 4, -1, -1, 1, 1}, {2, 4}));
  Tensor gamma = Const(g, F32({1, 1, 2, 2}, {4}));
  Tensor beta = Const(g, F32({0, 0, 0, 1}, {4}));
  EXPECT_TRUE(EvalNear(
      LayerNorm(x, gamma, beta),
      F32({-1.3416354199689269f, -0.447211806656309f, 0.894423613312618f, 3.6832708399378538f,
           -0.9999950000374997f, -0.9999950000374997f, 1.9999900000749995f, 2.9999900000749995f},
          {2, 4}),
      1e-5));
}

TEST(LayerNormTest, DoublePrecision) {
  Graph g;
  Tensor x = Const(g, F64({1, 2, 3, 4}, {1, 4}));
  Tensor gamma = Const(g, F64({1, 1, 2, 2}, {4}));
  Tensor beta = Const(g, F64({0, 0, 0, 1}, {4}));
  EXPECT_TRUE(EvalNear(
      LayerNorm(x, gamma, beta),
      F64({-1.3416354199689269, -0.447211806656309, 0.894423613312618, 3.6832708399378538}, {1, 4}),
      1e-12));
}

TEST(GeluTest, TanhApproximation) {
  Graph g;
  Tensor x = Const(g, F32({-1, 0, 1, 2, -3}, {5}));
  EXPECT_TRUE(EvalNear(Gelu(x),
                       F32({-0.15880800939172324f, 0, 0.8411919906082768f, 1.954597694087775f,
                            -0.0036373920817729943f},
                           {5}),
                       kTol));
}

// Gelu(x) = 0.5 x (1 + tanh(u)) = x sigmoid(2u): through 1 + tanh(u) it lost its digits
// for x < 0 (Gelu(-5) was 30% off, Gelu(-9) -0 for -1.3e-28).
TEST(CompositeTest, GeluKeepsItsValuesForNegativeInputs) {
  for (DType dt : {DType::kF32, DType::kF64}) {
    const std::vector<double> xs = {-3, -5, -6, -9, -20, 2, 0.5};
    Graph g;
    HostTensor t(dt, {static_cast<int64_t>(xs.size())});
    for (size_t i = 0; i < xs.size(); ++i) t.SetDouble(static_cast<int64_t>(i), xs[i]);
    absl::StatusOr<HostTensor> got = reftest::Evaluate(Gelu(Const(g, t)));
    ASSERT_TRUE(got.ok()) << got.status();
    for (size_t i = 0; i < xs.size(); ++i) {
      const long double x = xs[i];
      const long double u = (x + 0.044715L * x * x * x) * std::sqrt(2.0L / 3.14159265358979323846L);
      const long double truth = x / (1.0L + std::exp(-2.0L * u));
      const double want = dt == DType::kF64 ? static_cast<double>(truth)
                                            : static_cast<double>(static_cast<float>(truth));
      if (dt == DType::kF32 && std::fabs(want) < 1e-38) continue;  // below f32's normals
      EXPECT_NEAR(got->GetDouble(static_cast<int64_t>(i)), want,
                  (dt == DType::kF64 ? 1e-12 : 1e-5) * std::fabs(want))
          << DTypeName(dt) << " Gelu(" << xs[i] << ")";
    }
  }
}

}  // namespace
}  // namespace braze
