// The train-step models of train_bench.cc, built in one place so the peers
// (peers_*.cc, via peers_common.cc) check their losses against exactly the model, start
// and batch that Braze's own variants train.
//
//   softmax regression: examples/mnist_softmax.cc's model (logits = x W + b, W and b
//     zero, softmax cross entropy, SGD at its default rate 0.5; no decaying lr scale).
//   MLP: examples/mlp's (784-1024-1024-10, ReLU, He-normal weights, zero biases, softmax
//     cross entropy, Adam(1e-3)).
// Both train on one fixed batch: x uniform in [0, 1) (seed 4), labels (i * 7) % 10.
#ifndef BRAZE_BENCH_TRAIN_MODELS_H_
#define BRAZE_BENCH_TRAIN_MODELS_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "braze/braze.h"

namespace braze::bench {

constexpr int64_t kPixels = 784, kHidden = 1024, kClasses = 10;
constexpr double kSoftmaxLr = 0.5;
constexpr double kMlpLr = 1e-3;

struct TrainStep {
  std::unique_ptr<Graph> graph;  // on the heap: Tensors point at it
  Tensor loss;                   // the batch's loss before this step's update
  std::vector<Tensor> train;     // the update ops (Session::RunInto targets)
  Feeds feeds;
};

HostTensor TrainImages(int64_t batch);  // [batch, 784] f32
HostTensor TrainLabels(int64_t batch);  // [batch] i32
// The MLP's initial weight of layer 0, 1 or 2 ([784,1024], [1024,1024], [1024,10]).
HostTensor MlpInitialWeight(int layer);

// fused: the model, loss, gradients and update math under one JitScope.
absl::StatusOr<TrainStep> MakeSoftmaxTrainStep(int64_t batch, bool fused);
absl::StatusOr<TrainStep> MakeMlpTrainStep(int64_t batch, bool fused);

}  // namespace braze::bench

#endif  // BRAZE_BENCH_TRAIN_MODELS_H_
