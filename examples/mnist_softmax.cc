// Softmax regression on Fashion-MNIST: the tutorial workload (the seeds' mnist_softmax
// with XLA, in Braze).
//
//   logits = x W + b
//   loss   = Mean(SoftmaxCrossEntropyWithLogits(logits, OneHot(labels)))
//   dW, db = Gradients(loss, {W, b})              (autodiff emits ordinary graph ops)
//   train  = ApplyGradients(SGD(lr), {dW * s, W}, {db * s, b})
//
// where s is a fed scalar that decays linearly from 1 to 0 over the run: the last
// iterate of constant-rate SGD on Fashion-MNIST swings by a few points of test accuracy
// from step to step, the decayed one settles (at about 0.84).
//
//   mnist_softmax --jit=off     every op its own compiled kernel: many launches a step
//   mnist_softmax --jit=scope   the model, loss, gradients and updates built under
//                               JitScope(g): they fuse into a few clusters
//   mnist_softmax --jit=auto    no scope; the session auto-clusters (global_jit_level)
//   mnist_softmax --api=function  the train step as a braze::Function (tf.function) with
//                               jit_compile=true, capturing W and b; every epoch's
//                               partial last batch is trained too, by the same trace
//
// `--help` lists the other flags (--steps, --batch, --lr, --timeline=FILE, ...). The
// training loop, evaluation and report are shared with the other examples
// (lib/trainer.cc); the last two lines printed are `test_accuracy=<v>` and `step_ms=<v>`.
#include <vector>

#include "absl/status/statusor.h"
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

constexpr int64_t kPixels = 784;
constexpr int64_t kClasses = 10;

absl::StatusOr<Model> BuildSoftmaxRegression(braze::Graph& g, const TrainFlags& flags) {
  // Zero init is fine for softmax regression: the loss is convex and the gradient
  // already differs per class, so there is no symmetry to break.
  Tensor W = braze::Variable(g, HostTensor(DType::kF32, {kPixels, kClasses}), "W");
  Tensor b = braze::Variable(g, HostTensor(DType::kF32, {kClasses}), "b");
  Model model;
  model.uses_lr_scale = true;
  model.step = [W, b, lr = flags.lr](const StepInputs& in,
                                     bool train) -> absl::StatusOr<TrainGraph> {
    TrainGraph m;
    Tensor logits = braze::MatMul(in.x, W) + b;
    m.loss = braze::Mean(
        braze::SoftmaxCrossEntropyWithLogits(logits, braze::OneHot(in.labels, kClasses)));
    if (train) {
      BRAZE_ASSIGN_OR_RETURN(std::vector<Tensor> grads, braze::Gradients({m.loss}, {W, b}));
      BRAZE_ASSIGN_OR_RETURN(m.train_ops, braze::ApplyGradients(braze::Optimizer::Sgd(lr),
                                                                {{grads[0] * in.lr_scale, W},
                                                                 {grads[1] * in.lr_scale, b}}));
    }
    m.num_correct = braze_examples::NumCorrect(logits, in.labels);
    return m;
  };
  return model;
}

}  // namespace

int main(int argc, char** argv) {
  braze_examples::ExampleInfo info;
  info.program = "mnist_softmax";
  info.description = "softmax regression on Fashion-MNIST, SGD with a linearly decaying rate";
  info.defaults.steps = 3000;  // 5 epochs of 600 batches of 100
  info.defaults.lr = 0.5;
  return braze_examples::TrainMain(argc, argv, info, BuildSoftmaxRegression);
}
