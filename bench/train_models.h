// The train-step models of train_bench.cc, built in one place so the peers
// (peers_*.cc, via peers_common.cc) check their losses against exactly the model, start
// and batch that Braze's own variants train.
//
//   softmax regression: examples/mnist_softmax.cc's model (logits = x W + b, W and b
//     zero, softmax cross entropy, SGD at its default rate 0.5; no decaying lr scale).
//   MLP: examples/mlp's (784-1024-1024-10, ReLU, He-normal weights, zero biases, softmax
//     cross entropy, Adam(1e-3)).
//   CNN: examples/cnn.cc's Fashion-MNIST model (the pixels reshaped to 28x28x1: conv3x3
//     32 SAME - BN - ReLU - maxpool 2 - conv3x3 64 SAME - BN - ReLU - maxpool 2 - flatten -
//     dense 10, softmax cross entropy, Adam(1e-3)); the convolutions without bias (BN's
//     beta is theirs), He-normal filters, the dense weight normal with std sqrt(1 / 3136),
//     BatchNorm training (momentum 0.9 as the example, epsilon 1e-3), its moving
//     statistics updated with the step.
// All three train on one fixed batch: x uniform in [0, 1) (seed 4), labels (i * 7) % 10.
//
//   ResNet basic block, at batch 32, 56x56x64 NHWC (conv_bench.cc's workloads):
//     y = relu(bn2(conv2(relu(bn1(conv1(x))))) + x), 3x3 SAME convolutions without bias.
//     Inference (BM_ResNetBlock): BN with its moving statistics, all parameters constants
//     (a frozen graph). Training step (BM_ResNetBlockStep): BN training, loss
//     mean((y - target)^2) against a fixed target, SGD(kResNetLr) on the filters, gammas
//     and betas, the moving statistics updated with the step. The rate is 1 so that the
//     checked losses move 2% a step (0.550, 0.538, 0.527, 0.516), 20x their tolerance.
#ifndef BRAZE_BENCH_TRAIN_MODELS_H_
#define BRAZE_BENCH_TRAIN_MODELS_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "benchmark/benchmark.h"
#include "braze/braze.h"

namespace braze::bench {

constexpr int64_t kPixels = 784, kHidden = 1024, kClasses = 10;
constexpr double kSoftmaxLr = 0.5;
constexpr double kMlpLr = 1e-3;
// The convolutional models.
constexpr int64_t kCnnSide = 28;  // Fashion-MNIST's 28x28x1
constexpr double kCnnLr = 1e-3;
constexpr double kCnnBnMomentum = 0.9;  // examples/cnn.cc's
constexpr int64_t kBlockBatch = 32, kBlockSide = 56, kBlockChannels = 64;
constexpr double kResNetLr = 1.0;
constexpr double kBnEpsilon = 1e-3, kBnMomentum = 0.99;  // Keras's BatchNormalization

struct TrainStep {
  std::unique_ptr<Graph> graph;  // on the heap: Tensors point at it
  Tensor loss;                   // the batch's loss before this step's update
  std::vector<Tensor> train;     // the update ops (Session::RunInto targets)
  Feeds feeds;
};

// Runs `step` in a session with `options`: kCheckedSteps untimed steps (compile, settle
// the buffers, check their losses against `want`), then the timed ones, counting
// launches/step (train_bench.cc).
// The losses are checked to relative `rtol` (a mixed-precision step's are 16-bit's).
// Counters: launches/step, and the Run's intermediates in MB (SessionStats'
// peak_live_bytes as live_MB, step_output_bytes as outputs_MB, peak_activation_bytes as
// activation_MB: exact, not timings).
void RunTrainStep(benchmark::State& state, absl::StatusOr<TrainStep> step,
                  const std::vector<float>& want, const SessionOptions& options = {},
                  double rtol = 1e-3);

HostTensor TrainImages(int64_t batch);  // [batch, 784] f32
HostTensor TrainLabels(int64_t batch);  // [batch] i32
// The MLP's initial weight of layer 0, 1 or 2 ([784,1024], [1024,1024], [1024,10]).
HostTensor MlpInitialWeight(int layer);

// fused: the model, loss, gradients and update math under one JitScope.
absl::StatusOr<TrainStep> MakeSoftmaxTrainStep(int64_t batch, bool fused);
// precision: the mixed-precision policy the loss and updates are built under
// (braze/precision.h; kF32: none), f16 with dynamic loss scaling from 2^10.
absl::StatusOr<TrainStep> MakeMlpTrainStep(int64_t batch, bool fused,
                                           DType precision = DType::kF32);
absl::StatusOr<TrainStep> MakeCnnStep(int64_t batch, bool fused);
absl::StatusOr<TrainStep> MakeResNetBlockStep(bool fused);

// The CNN's images as NHWC [batch, 28, 28, 1] (TrainImages' values; the step itself is
// fed TrainImages and reshapes, as the example) and its initial weights: the filters
// [3, 3, 1, 32] and [3, 3, 32, 64] (HWIO, He normal) and the dense layer's [3136, 10]
// (normal, std sqrt(1 / 3136); its rows in NHWC flatten order, h, w, c).
HostTensor CnnImages(int64_t batch);
HostTensor CnnInitialFilter(int layer);  // 0, 1
HostTensor CnnInitialDense();

// The ResNet block's input [32, 56, 56, 64] (uniform in [-1, 1), seed 11), the step's
// target (uniform in [0, 1), seed 12), its filters [3, 3, 64, 64] (HWIO, He normal, seeds
// 13, 14) and each BN's gamma (uniform in [0.5, 1.5)), beta (in [-0.1, 0.1)), moving mean
// (in [-0.1, 0.1)) and moving variance (in [0.5, 1.5)), [64] each; the same values for
// the inference graph and the training step's start.
HostTensor BlockInput();
HostTensor BlockTarget();
HostTensor BlockFilter(int conv);  // 0, 1
struct BnParams {
  HostTensor gamma, beta, mean, variance;
};
BnParams BlockBn(int bn);  // 0, 1

// A forward graph: Braze's inference workloads (conv_bench.cc).
struct Forward {
  std::unique_ptr<Graph> graph;
  Tensor out;
  Feeds feeds;
};
// Conv2D 3x3 SAME of BlockInput() with BlockFilter(0), + ConvBias(), ReLU; the filter
// and bias constants.
HostTensor ConvBias();  // [64], uniform in [-0.1, 0.1), seed 15
Forward MakeConvBiasRelu(bool fused);
// The ResNet block, BN in inference mode, parameters constants. variable_input: x is a
// Variable holding BlockInput(), no feed (a device run's input then stays on the device,
// cuda_bench.cc), instead of a fed Placeholder.
Forward MakeResNetBlock(bool fused, bool variable_input = false);

}  // namespace braze::bench

#endif  // BRAZE_BENCH_TRAIN_MODELS_H_
