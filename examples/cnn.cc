// A small convolutional network on Fashion-MNIST (NHWC), trained with Adam.
//
//   x = Reshape(pixels, [-1, 28, 28, 1])
//   h1 = MaxPool2x2(Relu(BatchNorm(Conv2D(x, K1))))    K1: 3x3x1x32, SAME  -> [N, 14, 14, 32]
//   h2 = MaxPool2x2(Relu(BatchNorm(Conv2D(h1, K2))))   K2: 3x3x32x64, SAME -> [N, 7, 7, 64]
//   logits = Dense(Flatten(h2), W, b)                  W: 3136x10
//   loss = Mean(SoftmaxCrossEntropyWithLogits(logits, OneHot(labels)))
//   g = Gradients(loss, {K1, gamma1, beta1, K2, gamma2, beta2, W, b})
//   train = ApplyGradients(Adam(lr), g * lr_scale) and BatchNorm's moving-statistic updates
//
// lr_scale is the trainer's fed factor, 1 - step / steps. Adam divides by the gradients'
// running RMS over some 1000 steps (beta2 = 0.999), which lags the shrinking gradients,
// so its steps shrink towards 0 by the end of the run and the last iterate settles:
// 0.9065 test accuracy after 3 epochs against 0.9021 at a constant rate, whose last
// iterates move by +-0.4% from epoch to epoch (0.9117 after 5 epochs, 0.9068 after 6).
//
// BatchNorm normalizes with the batch's statistics in training and with its moving
// statistics (variables, updated in place by the train step) in evaluation, so the
// evaluation is a step of its own (Model::eval_step; --api=function builds it apart too).
// There each BatchNorm folds into its convolution's filter and bias, and the ReLU after
// it into oneDNN's call (docs/CONVOLUTIONS.md; --log_compiles says "batch norm folded").
// The convolutions carry no bias: BatchNorm's beta is one.
//
// About 50K weights and 2.9 GFLOP a step at batch 128 (forward and backward), most of it
// the second convolution and its two gradients (0.9 GFLOP each).
//
// Flags as the other examples (`--help`): --jit=off|scope|auto, --api=function,
// --device=..., --steps, --batch, --lr, --min_test_accuracy, --precision=bf16|f16 (the
// mixed-precision policy: 16-bit convolutions, BatchNorm statistics in f32;
// docs/MIXED_PRECISION.md), ...; the last two lines printed are `test_accuracy=<v>` and
// `step_ms=<v>`.
#include <cmath>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "braze/braze.h"
#include "lib/trainer.h"

namespace {

using braze::DType;
using braze::HostTensor;
using braze::Tensor;
using braze_examples::Model;
using braze_examples::StepInputs;
using braze_examples::TrainFlags;
using braze_examples::TrainGraph;

constexpr int64_t kSide = 28;
constexpr int64_t kClasses = 10;
// BatchNorm's moving statistics follow the batches' with momentum 0.9 (PyTorch's
// default): Keras's 0.99 needs some 500 steps to forget their initial 0 and 1, longer
// than the short ctest runs train.
constexpr double kMomentum = 0.9;

// A 3x3 SAME convolution without bias, then BatchNorm over its channels: the variables.
struct ConvBn {
  Tensor filter, gamma, beta, moving_mean, moving_variance;
};

ConvBn MakeConvBn(braze::Graph& g, int64_t c_in, int64_t c_out, uint64_t seed,
                  const std::string& name) {
  const int64_t fan_in = 3 * 3 * c_in;
  ConvBn l;
  // He initialization: the ReLU after BatchNorm halves the variance.
  l.filter = braze::Variable(
      g,
      HostTensor::RandomNormal(DType::kF32, {3, 3, c_in, c_out}, seed, 0, std::sqrt(2.0 / fan_in)),
      absl::StrCat(name, "/filter"));
  l.gamma =
      braze::Variable(g, HostTensor::Filled(DType::kF32, {c_out}, 1), absl::StrCat(name, "/gamma"));
  l.beta = braze::Variable(g, HostTensor(DType::kF32, {c_out}), absl::StrCat(name, "/beta"));
  l.moving_mean =
      braze::Variable(g, HostTensor(DType::kF32, {c_out}), absl::StrCat(name, "/moving_mean"));
  l.moving_variance = braze::Variable(g, HostTensor::Filled(DType::kF32, {c_out}, 1),
                                      absl::StrCat(name, "/moving_variance"));
  return l;
}

// Conv -> BatchNorm -> ReLU -> 2x2 max pooling; BatchNorm's updates join `updates` in
// training.
Tensor Block(Tensor x, const ConvBn& l, bool train, std::vector<Tensor>* updates) {
  Tensor y = braze::Conv2D(x, l.filter, {1, 1}, braze::Padding::kSame);
  braze::BatchNormOutput bn =
      braze::BatchNorm(y, l.gamma, l.beta, l.moving_mean, l.moving_variance, train, kMomentum);
  updates->insert(updates->end(), bn.updates.begin(), bn.updates.end());
  return braze::MaxPool(braze::Relu(bn.y), {2, 2}, {2, 2});
}

absl::StatusOr<Model> BuildCnn(braze::Graph& g, const TrainFlags& flags) {
  const uint64_t seed = flags.seed * 1000;
  const ConvBn l1 = MakeConvBn(g, 1, 32, seed + 1, "conv1");
  const ConvBn l2 = MakeConvBn(g, 32, 64, seed + 2, "conv2");
  const int64_t flat = (kSide / 4) * (kSide / 4) * 64;
  const Tensor w = braze::Variable(
      g,
      HostTensor::RandomNormal(DType::kF32, {flat, kClasses}, seed + 3, 0, std::sqrt(1.0 / flat)),
      "logits/w");
  const Tensor b = braze::Variable(g, HostTensor(DType::kF32, {kClasses}), "logits/b");
  Model model;
  model.eval_step = true;
  model.uses_lr_scale = true;
  model.step = [l1, l2, w, b, lr = flags.lr, flags](const StepInputs& in,
                                                    bool train) -> absl::StatusOr<TrainGraph> {
    TrainGraph m;
    std::vector<Tensor> updates;
    Tensor x = braze::Reshape(in.x, {-1, kSide, kSide, 1});
    Tensor h = Block(x, l1, train, &updates);
    h = Block(h, l2, train, &updates);
    Tensor logits = braze::Dense(braze::Flatten(h), w, b);
    m.loss = braze::Mean(
        braze::SoftmaxCrossEntropyWithLogits(logits, braze::OneHot(in.labels, kClasses)));
    if (train) {
      // Adam's slot variables are made here: under --api=function they belong to the
      // train step's one trace. The gradients are scaled by lr_scale (above).
      const std::vector<Tensor> vars = {l1.filter, l1.gamma, l1.beta, l2.filter,
                                        l2.gamma,  l2.beta,  w,       b};
      if (flags.precision == DType::kF32) {
        BRAZE_ASSIGN_OR_RETURN(std::vector<Tensor> grads, braze::Gradients({m.loss}, vars));
        std::vector<std::pair<Tensor, Tensor>> pairs;
        for (size_t i = 0; i < vars.size(); ++i) pairs.push_back({grads[i] * in.lr_scale, vars[i]});
        BRAZE_ASSIGN_OR_RETURN(m.train_ops,
                               braze::ApplyGradients(braze::Optimizer::Adam(lr), pairs));
      } else {
        // --precision=bf16|f16: Minimize, which f16's loss scaling needs (ForFlags), of
        // the loss times lr_scale, whose gradients are the ones above times lr_scale.
        BRAZE_ASSIGN_OR_RETURN(m.train_ops, braze::Minimize(braze_examples::ForFlags(
                                                                flags, braze::Optimizer::Adam(lr)),
                                                            m.loss * in.lr_scale, vars));
      }
      m.train_ops.insert(m.train_ops.end(), updates.begin(), updates.end());
    }
    m.num_correct = braze_examples::NumCorrect(logits, in.labels);
    return m;
  };
  return model;
}

}  // namespace

int main(int argc, char** argv) {
  braze_examples::ExampleInfo info;
  info.program = "cnn";
  info.description = "conv-BN-ReLU-pool x2 + dense CNN on Fashion-MNIST (NHWC), trained with Adam";
  info.defaults.batch = 128;
  info.defaults.steps = 2340;  // 5 epochs of 468 batches
  info.defaults.log_every = 468;
  info.defaults.lr = 1e-3;
  // 10000 test images at once would be 1 GB per conv1 activation: chunks of 1000.
  info.defaults.eval_batch = 1000;
  return braze_examples::TrainMain(argc, argv, info, BuildCnn);
}
