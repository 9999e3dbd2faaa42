// Issue 39: the workloads of the other issues (the ResNet basic block's train step, the
// transformer block's train step with fused attention and dropout) as whole sessions on
// a GPU device under the GPU heuristic, against the reference executor, at small odd
// shapes: the clusters a training step forms (convolutions with BN's batch statistics
// and the residual, their gradients, attention's fused ops and gradients, LayerNorm,
// GELU, the optimizers' updates) all compile for the device and agree.
//   Cuda/GpuWorkloads.*:   on cuda:0; skipped without a GPU, run by tools/gpu-check.sh
//                          (its runtime_tests filter '*Cuda*').
//   OpenCL/GpuWorkloads.*: on opencl:0 (POCL: the same GPU schedules, on the CPU). POCL
//                          compiles each of a step's dozens of kernels in seconds (about
//                          two minutes for both on 2 cores), so the default ctest run
//                          leaves them out (runtime_tests_FILTER); run them by hand:
//                          runtime_tests --gtest_filter='OpenCL/GpuWorkloads.*'.
// bench/cuda_bench.cc runs the full-size steps on CUDA (tools/gpu-check.sh).
#include <cmath>
#include <string>
#include <vector>

#include "braze/braze.h"
#include "gtest/gtest.h"

namespace braze {
namespace {

// Strict (jit_compile=true): a cluster that fails to compile is an error, not a silent
// fallback to the reference kernels.
SessionOptions OnDevice(const std::string& device) {
  SessionOptions o;
  o.device = device;
  o.strict = true;
  return o;
}

// The device a test suite runs on, or the reason to skip.
absl::Status DeviceAvailable(const std::string& device) {
  return device == "cuda:0" ? CheckCudaAvailable() : CheckOpenCLAvailable();
}

SessionOptions Reference() {
  SessionOptions o;
  o.reference_only = true;
  return o;
}

// Runs `steps` train steps (fetching the loss, running `train`) in a session on `device`
// and in a reference session of the same graph, then fetches `check` from both: the
// losses and the checked values must agree within rtol (each relative to 1 + |want|).
void ExpectStepsMatchReference(const std::string& device, Graph& g, const Feeds& feeds, Tensor loss,
                               const std::vector<Tensor>& train, const std::vector<Tensor>& check,
                               int steps, double rtol) {
  ASSERT_TRUE(g.status().ok()) << g.status();
  Session device_session(g, OnDevice(device)), ref(g, Reference());
  for (int i = 0; i < steps; ++i) {
    std::vector<HostTensor> got, want;
    const absl::Status s = device_session.RunInto(feeds, {loss}, &got, train);
    ASSERT_TRUE(s.ok()) << s;
    ASSERT_TRUE(ref.RunInto(feeds, {loss}, &want, train).ok());
    const double w = want[0].GetDouble(0);
    EXPECT_NEAR(got[0].GetDouble(0), w, rtol * (1 + std::abs(w))) << "loss of step " << i;
  }
  EXPECT_GT(device_session.stats().cluster_launches, 0);  // compiled for the device
  if (check.empty()) return;
  auto got = device_session.Run({}, check);
  auto want = ref.Run({}, check);
  ASSERT_TRUE(got.ok()) << got.status();
  ASSERT_TRUE(want.ok()) << want.status();
  for (size_t t = 0; t < check.size(); ++t) {
    for (int64_t i = 0; i < (*want)[t].num_elements(); ++i) {
      const double w = (*want)[t].GetDouble(i);
      ASSERT_NEAR((*got)[t].GetDouble(i), w, rtol * (1 + std::abs(w)))
          << check[t].node().name() << " element " << i;
    }
  }
}

// bench/train_models.h's ResNet block step at [3, 9, 11, 12] (NHWC): conv 3x3 SAME, BN
// with the batch's statistics, ReLU, conv, BN, + x, ReLU; mean square loss; SGD on the
// filters, gammas and betas, the moving statistics updated. Two steps, so the second
// runs on the first's updates.
void ResNetBlockTrainStep(const std::string& device) {
  Graph g;
  const int64_t c = 12;
  const Shape x_shape = {3, 9, 11, c};
  Tensor x = Placeholder(g, DType::kF32, x_shape, "x");
  Tensor target = Placeholder(g, DType::kF32, x_shape, "target");
  std::vector<Tensor> trained, check, bn_updates;
  Tensor y = x;
  Tensor h = x;
  {
    JitScope scope(g);
    for (int i = 0; i < 2; ++i) {
      const uint64_t s = 10 * (i + 1);
      Tensor w = Variable(
          g, HostTensor::RandomNormal(DType::kF32, {3, 3, c, c}, s, 0, std::sqrt(2.0 / (9 * c))),
          "w" + std::to_string(i));
      Tensor gamma = Variable(g, HostTensor::RandomUniform(DType::kF32, {c}, s + 1, 0.5, 1.5));
      Tensor beta = Variable(g, HostTensor::RandomUniform(DType::kF32, {c}, s + 2, -0.1, 0.1));
      Tensor mean = Variable(g, HostTensor::RandomUniform(DType::kF32, {c}, s + 3, -0.1, 0.1));
      Tensor var = Variable(g, HostTensor::RandomUniform(DType::kF32, {c}, s + 4, 0.5, 1.5));
      BatchNormOutput bn =
          BatchNorm(Conv2D(h, w, {1, 1}, Padding::kSame), gamma, beta, mean, var, true);
      bn_updates.insert(bn_updates.end(), bn.updates.begin(), bn.updates.end());
      h = i == 0 ? Relu(bn.y) : bn.y;
      trained.insert(trained.end(), {w, gamma, beta});
      check.insert(check.end(), {w, gamma, mean, var});
    }
    y = Relu(h + x);
  }
  Tensor loss = Mean(Square(y - target));
  auto train = Minimize(Optimizer::Sgd(0.5), loss, trained);
  ASSERT_TRUE(train.ok()) << train.status();
  train->insert(train->end(), bn_updates.begin(), bn_updates.end());
  const Feeds feeds = {{x, HostTensor::RandomUniform(DType::kF32, x_shape, 1, -1, 1)},
                       {target, HostTensor::RandomUniform(DType::kF32, x_shape, 2, 0, 1)}};
  ExpectStepsMatchReference(device, g, feeds, loss, *train, check, 2, 1e-4);
}

// bench/gpt_models.h's transformer block step, small: x [2 * 13, 24] (batch 2, T 13,
// width 24, 2 heads), pre-LayerNorm causal attention (the fused op, dropout 0.1 on its
// weights) and a GELU MLP of 4 x the width, residuals; mean square loss; AdamW on every
// parameter. The step counter makes a new dropout mask each step, the same on both
// sides (Philox of (seed, step), docs/RANDOM.md). Three steps' losses are compared, not
// the parameters: Adam's update of a parameter whose gradient is near 0 is +-lr whatever
// the gradient's rounding, so the parameters differ by ulps of the gradients times lr /
// eps; the later losses depend on every update.
void TransformerBlockTrainStep(const std::string& device) {
  Graph g;
  const int64_t b = 2, t = 13, d = 24, heads = 2, hd = d / heads;
  Tensor x = Placeholder(g, DType::kF32, {b * t, d}, "x");
  Tensor target = Placeholder(g, DType::kF32, {b * t, d}, "target");
  Tensor step = Variable(g, HostTensor::Scalar<int32_t>(0), "step");
  std::vector<Tensor> params;
  uint64_t seed = 100;
  auto param = [&](const Shape& s, double lo, double hi) {
    params.push_back(Variable(g, HostTensor::RandomUniform(DType::kF32, s, ++seed, lo, hi),
                              "p" + std::to_string(seed)));
    return params.back();
  };
  Tensor y;
  {
    JitScope scope(g);
    const double a = 1 / std::sqrt(static_cast<double>(d));
    Tensor h = LayerNorm(x, param({d}, 0.8, 1.2), param({d}, -0.1, 0.1));
    Tensor qkv = Dense(h, param({d, 3 * d}, -a, a), param({3 * d}, -0.1, 0.1));
    auto head_view = [&](int i) {  // [b, heads, t, hd] of q, k or v
      Tensor part = Slice(qkv, {0, i * d}, {b * t, d});
      return Transpose(Reshape(part, {b, t, heads, hd}), {0, 2, 1, 3});
    };
    AttentionOptions o;
    o.causal = true;
    o.dropout = 0.1;
    o.step = step;
    o.seed = 7;
    Tensor att = ScaledDotProductAttention(head_view(0), head_view(1), head_view(2), o);
    Tensor merged = Reshape(Transpose(att, {0, 2, 1, 3}), {b * t, d});
    Tensor r = x + Dense(merged, param({d, d}, -a, a), param({d}, -0.1, 0.1));
    Tensor m = LayerNorm(r, param({d}, 0.8, 1.2), param({d}, -0.1, 0.1));
    m = Dense(m, param({d, 4 * d}, -a, a), param({4 * d}, -0.1, 0.1), Activation::kGelu);
    y = r + Dense(m, param({4 * d, d}, -a / 2, a / 2), param({d}, -0.1, 0.1));
  }
  Tensor loss = Mean(Square(y - target));
  auto train = Minimize(Optimizer::AdamW(1e-2, 0.9, 0.99, 1e-8, 0.1), loss, params);
  ASSERT_TRUE(train.ok()) << train.status();
  train->push_back(AssignAdd(step, ScalarConst(g, 1, DType::kI32)));
  const Feeds feeds = {{x, HostTensor::RandomNormal(DType::kF32, {b * t, d}, 1, 0, 1)},
                       {target, HostTensor::RandomNormal(DType::kF32, {b * t, d}, 2, 0, 1)}};
  ExpectStepsMatchReference(device, g, feeds, loss, *train, {}, 3, 2e-4);
}

class GpuWorkloads : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    if (absl::Status st = DeviceAvailable(GetParam()); !st.ok()) GTEST_SKIP() << st.message();
  }
};

TEST_P(GpuWorkloads, ResNetBlockTrainStepMatchesReference) { ResNetBlockTrainStep(GetParam()); }
TEST_P(GpuWorkloads, TransformerBlockTrainStepMatchesReference) {
  TransformerBlockTrainStep(GetParam());
}

INSTANTIATE_TEST_SUITE_P(Cuda, GpuWorkloads, ::testing::Values("cuda:0"));
INSTANTIATE_TEST_SUITE_P(OpenCL, GpuWorkloads, ::testing::Values("opencl:0"));

}  // namespace
}  // namespace braze
