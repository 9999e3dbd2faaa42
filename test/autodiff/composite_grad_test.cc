// Composites differentiate through their primitives: Softmax, LogSoftmax, cross entropy
// (stable at large logits), LayerNorm, Gelu, Dense. And graphs with unknown dims.
#include <cmath>
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
using gradtest::RunReference;

// Each row a probability distribution.
HostTensor Labels(Shape shape, uint64_t seed) {
  HostTensor t = HostTensor::RandomUniform(DType::kF64, shape, seed, 0.1, 1.0);
  const int64_t n = shape.back(), rows = t.num_elements() / n;
  for (int64_t r = 0; r < rows; ++r) {
    double sum = 0;
    for (int64_t j = 0; j < n; ++j) sum += t.GetDouble(r * n + j);
    for (int64_t j = 0; j < n; ++j) t.SetDouble(r * n + j, t.GetDouble(r * n + j) / sum);
  }
  return t;
}

TEST(CompositeGradTest, Softmax) {
  for (int axis : {-1, 0}) {
    Graph g;
    Tensor x = Placeholder(g, DType::kF64, {3, 4}, "x");
    EXPECT_TRUE(CheckGradients(Softmax(x, axis), {{x, AwayFromZero({3, 4}, 1, -3, 3)}}))
        << "axis " << axis;
  }
}

TEST(CompositeGradTest, LogSoftmax) {
  for (int axis : {-1, 0}) {
    Graph g;
    Tensor x = Placeholder(g, DType::kF64, {3, 4}, "x");
    EXPECT_TRUE(CheckGradients(LogSoftmax(x, axis), {{x, AwayFromZero({3, 4}, 2, -3, 3)}}))
        << "axis " << axis;
  }
}

TEST(CompositeGradTest, SoftmaxCrossEntropyWithLogits) {
  Graph g;
  Tensor logits = Placeholder(g, DType::kF64, {3, 5}, "logits");
  Tensor labels = Placeholder(g, DType::kF64, {3, 5}, "labels");
  EXPECT_TRUE(
      CheckGradients(SoftmaxCrossEntropyWithLogits(logits, labels),
                     {{logits, AwayFromZero({3, 5}, 3, -3, 3)}, {labels, Labels({3, 5}, 4)}}));
}

// At logits of +-80 exp overflows f32 without the max shift; the gradient must come out
// finite and equal to softmax(logits) - labels (computed here in double).
TEST(CompositeGradTest, CrossEntropyGradientIsStableAtLargeLogits) {
  const std::vector<double> logit_values = {80, -80, 0, -80, 80, 80, 80, 79, -80};
  const std::vector<double> label_values = {0, 1, 0, 0.5, 0.5, 0, 0.2, 0.3, 0.5};
  for (DType dtype : {DType::kF32, DType::kF64}) {
    Graph g;
    Tensor logits = Placeholder(g, dtype, {3, 3}, "logits");
    Tensor labels = Placeholder(g, dtype, {3, 3}, "labels");
    Tensor loss = Mean(SoftmaxCrossEntropyWithLogits(logits, labels));
    auto grads = Gradients({loss}, {logits});
    ASSERT_TRUE(grads.ok()) << grads.status();
    HostTensor lv(dtype, {3, 3}), yv(dtype, {3, 3});
    for (int i = 0; i < 9; ++i) {
      lv.SetDouble(i, logit_values[i]);
      yv.SetDouble(i, label_values[i]);
    }
    auto out = RunReference(g, {{logits, lv}, {labels, yv}}, {loss, (*grads)[0]});
    EXPECT_TRUE(std::isfinite(out[0].GetDouble(0))) << DTypeName(dtype);
    for (int r = 0; r < 3; ++r) {
      double m = -1e300, sum = 0;
      for (int j = 0; j < 3; ++j) m = std::max(m, logit_values[r * 3 + j]);
      for (int j = 0; j < 3; ++j) sum += std::exp(logit_values[r * 3 + j] - m);
      for (int j = 0; j < 3; ++j) {
        const int i = r * 3 + j;
        const double want = (std::exp(logit_values[i] - m) / sum - label_values[i]) / 3;
        const double got = out[1].GetDouble(i);
        ASSERT_TRUE(std::isfinite(got)) << DTypeName(dtype) << " element " << i;
        EXPECT_NEAR(got, want, dtype == DType::kF32 ? 1e-6 : 1e-14)
            << DTypeName(dtype) << " element " << i;
      }
    }
  }
}

TEST(CompositeGradTest, LayerNorm) {
  Graph g;
  Tensor x = Placeholder(g, DType::kF64, {3, 4}, "x");
  Tensor gamma = Placeholder(g, DType::kF64, {4}, "gamma");
  Tensor beta = Placeholder(g, DType::kF64, {4}, "beta");
  EXPECT_TRUE(CheckGradients(
      LayerNorm(x, gamma, beta),
      {{x, AwayFromZero({3, 4}, 5)}, {gamma, AwayFromZero({4}, 6)}, {beta, AwayFromZero({4}, 7)}}));
}

TEST(CompositeGradTest, Gelu) {
  Graph g;
  Tensor x = Placeholder(g, DType::kF64, {2, 5}, "x");
  EXPECT_TRUE(CheckGradients(Gelu(x), {{x, AwayFromZero({2, 5}, 8, -3, 3)}}));
}

TEST(CompositeGradTest, DenseWithEveryActivation) {
  for (Activation act : {Activation::kNone, Activation::kRelu, Activation::kGelu,
                         Activation::kSigmoid, Activation::kTanh}) {
    Graph g;
    Tensor x = Placeholder(g, DType::kF64, {3, 4}, "x");
    Tensor w = Placeholder(g, DType::kF64, {4, 2}, "w");
    Tensor b = Placeholder(g, DType::kF64, {2}, "b");
    // Relu's kink: keep pre-activations away from 0 by a large bias.
    HostTensor bv =
        act == Activation::kRelu ? HostTensor::From<double>({5, -5}, {2}) : AwayFromZero({2}, 9);
    EXPECT_TRUE(CheckGradients(Dense(x, w, b, act), {{x, AwayFromZero({3, 4}, 10, -0.5, 0.5, 0.05)},
                                                     {w, AwayFromZero({4, 2}, 11, -0.5, 0.5, 0.05)},
                                                     {b, bv}}))
        << "activation " << static_cast<int>(act);
  }
}

// A small MLP with a loss: many contributions per tensor, every op kind in one graph.
TEST(CompositeGradTest, TwoLayerNetworkLoss) {
  Graph g;
  Tensor x = Placeholder(g, DType::kF64, {4, 3}, "x");
  Tensor w1 = Placeholder(g, DType::kF64, {3, 5}, "w1");
  Tensor w2 = Placeholder(g, DType::kF64, {5, 2}, "w2");
  Tensor labels = Placeholder(g, DType::kF64, {4, 2}, "labels");
  Tensor h = Tanh(MatMul(x, w1));
  Tensor loss = Mean(SoftmaxCrossEntropyWithLogits(MatMul(h, w2), labels)) +
                0.01 * (Sum(Square(w1)) + Sum(Square(w2)));
  GradCheckOptions opt;
  opt.extra_feeds = {{labels, Labels({4, 2}, 1)}, {x, AwayFromZero({4, 3}, 2)}};
  EXPECT_TRUE(
      CheckGradients(loss, {{w1, AwayFromZero({3, 5}, 3)}, {w2, AwayFromZero({5, 2}, 4)}}, opt));
}

// ---- Unknown dims: the same graph checked at two batch sizes. ----

TEST(UnknownDimsGradTest, BatchDimThroughReductionsBroadcastAndCrossEntropy) {
  Graph g;
  Tensor x = Placeholder(g, DType::kF64, {-1, 4}, "x");
  Tensor b = Placeholder(g, DType::kF64, {4}, "b");
  Tensor labels = Placeholder(g, DType::kF64, {-1, 4}, "labels");
  Tensor z = x * b + b;
  // Mean over the unknown batch needs a runtime count; Max/Softmax reinsert the
  // reduced dim next to an unknown one.
  Tensor y = Mean(z, {0}) * Max(z, {0}) + Mean(SoftmaxCrossEntropyWithLogits(z, labels)) + Mean(z);
  for (int64_t batch : {3, 5}) {
    GradCheckOptions opt;
    opt.extra_feeds = {{labels, Labels({batch, 4}, 2)}};
    EXPECT_TRUE(CheckGradients(y,
                               {{x, gradtest::Distinct({batch, 4}, 3)},
                                {b, HostTensor::From<double>({0.5, 1.5, 1.25, 0.75}, {4})}},
                               opt))
        << "batch " << batch;
  }
}

TEST(UnknownDimsGradTest, SeveralUnknownDims) {
  Graph g;
  Tensor x = Placeholder(g, DType::kF64, {-1, -1, 3}, "x");
  // Reducing the known last axis next to two unknown ones can not go through a Reshape
  // with a single -1; Mean over the unknown ones needs a runtime count. (Every operand
  // that broadcasts has a static 1 there, see the rule in gradients.h.)
  Tensor y =
      Square(Sum(x, {2})) * Max(x, {-1}) * Mean(Max(x, {-1}, true), {0, 1}) + Sum(Mean(x, {0, 1}));
  GradCheckOptions opt;
  EXPECT_TRUE(CheckGradients(y, {{x, gradtest::Distinct({2, 3, 3}, 4)}}, opt));
  EXPECT_TRUE(CheckGradients(y, {{x, gradtest::Distinct({4, 1, 3}, 5)}}, opt));
}

TEST(UnknownDimsGradTest, LayoutOpsWithABatchDim) {
  Graph g;
  Tensor x = Placeholder(g, DType::kF64, {-1, 2, 3}, "x");
  Tensor flat = Reshape(x, {-1, 6});
  Tensor y =
      Concat({Slice(flat, {0, 1}, {-1, 2}), Transpose(Pad(flat, {{0, 0}, {1, 0}}), {0, 1})}, 1);
  Tensor z = Square(y) * Sum(Square(Concat({x, x}, 2)));
  EXPECT_TRUE(CheckGradients(z, {{x, AwayFromZero({2, 2, 3}, 6)}}));
}

TEST(UnknownDimsGradTest, UnsupportedCasesAreUnimplementedAndBuildNothing) {
  Graph g;
  Tensor x = Placeholder(g, DType::kF64, {-1, -1}, "x");
  struct Case {
    std::string what;
    Tensor y;
  };
  const std::vector<Case> cases = {
      {"Reshape", Sum(Reshape(x, {-1}))},
      {"Concat", Sum(Concat({x, x}, 1))},
      {"Slice", Sum(Slice(x, {0, 0}, {1, 1}))},
      {"Pad", Sum(Pad(x, {{0, 1}, {0, 0}}))},
  };
  for (const Case& c : cases) {
    const int before = g.num_nodes();
    auto grads = Gradients({c.y}, {x});
    ASSERT_FALSE(grads.ok()) << c.what;
    EXPECT_EQ(grads.status().code(), absl::StatusCode::kUnimplemented) << grads.status();
    EXPECT_NE(grads.status().message().find(c.what), std::string::npos) << grads.status();
    EXPECT_EQ(g.num_nodes(), before) << c.what;
  }
  EXPECT_TRUE(g.status().ok()) << g.status();
}

}  // namespace
}  // namespace braze
