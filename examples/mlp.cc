// A 784-1024-1024-10 multilayer perceptron (ReLU) on Fashion-MNIST, trained with Adam.
//
//   h1 = Relu(x W1 + b1);  h2 = Relu(h1 W2 + b2);  logits = h2 W3 + b3
//   loss = Mean(SoftmaxCrossEntropyWithLogits(logits, OneHot(labels)))
//   train = Minimize(Adam(lr), loss, {W1, b1, W2, b2, W3, b3})
//
// About 1.9M weights and 1.9 GFLOP a step at batch 200, so unlike mnist_softmax the
// step is dominated by three matmuls and their gradients, and the fusion that matters
// is of the bias, ReLU, softmax and Adam update math around them.
//
// Flags as mnist_softmax (`--help`): --jit=off|scope|auto, --steps, --batch, --lr,
// --timeline=FILE, --min_test_accuracy, ...; the last two lines printed are
// `test_accuracy=<v>` and `step_ms=<v>`. --dropout=RATE applies inverted dropout to
// h1 and h2 in training (not in evaluation), its masks keyed by a step variable that
// each train step increments: a new mask every step, the same masks run after run
// (docs/RANDOM.md). --precision=bf16 (or f16) builds the step under the mixed-precision
// policy (braze/precision.h): the three matmuls, their bias and ReLU in 16 bits from f32
// master weights (cast down each step; their gradients cast back up), the softmax and
// loss in f32, f16 with dynamic loss scaling (docs/MIXED_PRECISION.md).
// --data_parallel under `mpirun -np N` trains as one process at the
// same global --batch (docs/DISTRIBUTED.md):
//   mpirun -np 2 build/examples/mlp --data_parallel
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

constexpr int64_t kPixels = 784;
constexpr int64_t kHidden = 1024;
constexpr int64_t kClasses = 10;

struct Layer {
  Tensor w, b;
};

// A dense layer's variables. Weights are normal with stddev sqrt(gain / fan_in): gain 2
// (He) keeps the activations' scale through a ReLU layer, gain 1 suits the linear
// logits layer. Biases start at zero. Each layer gets its own seed so that the layers
// are not copies of one another.
Layer MakeLayer(braze::Graph& g, int64_t fan_in, int64_t fan_out, double gain, uint64_t seed,
                const std::string& name) {
  Layer layer;
  layer.w = braze::Variable(
      g,
      HostTensor::RandomNormal(DType::kF32, {fan_in, fan_out}, seed, 0, std::sqrt(gain / fan_in)),
      absl::StrCat(name, "/w"));
  layer.b = braze::Variable(g, HostTensor(DType::kF32, {fan_out}), absl::StrCat(name, "/b"));
  return layer;
}

absl::StatusOr<Model> BuildMlp(braze::Graph& g, const TrainFlags& flags) {
  const uint64_t seed = flags.seed * 1000;
  const Layer l1 = MakeLayer(g, kPixels, kHidden, 2.0, seed + 1, "layer1");
  const Layer l2 = MakeLayer(g, kHidden, kHidden, 2.0, seed + 2, "layer2");
  const Layer l3 = MakeLayer(g, kHidden, kClasses, 1.0, seed + 3, "logits");
  Model model;
  const double rate = flags.dropout;
  // The dropout masks' step: a variable each train step increments.
  const Tensor step =
      rate > 0 ? braze::Variable(g, HostTensor::Scalar<int32_t>(0), "dropout_step") : Tensor();
  // Evaluation without dropout: a step of its own (the train step's accuracy has it).
  model.eval_step = rate > 0;
  model.step = [l1, l2, l3, lr = flags.lr, rate, step, seed, flags](
                   const StepInputs& in, bool train) -> absl::StatusOr<TrainGraph> {
    TrainGraph m;
    Tensor h1 = braze::Dense(in.x, l1.w, l1.b, braze::Activation::kRelu);
    if (train && rate > 0) h1 = braze::Dropout(h1, rate, step, seed);
    Tensor h2 = braze::Dense(h1, l2.w, l2.b, braze::Activation::kRelu);
    if (train && rate > 0) h2 = braze::Dropout(h2, rate, step, seed);
    Tensor logits = braze::Dense(h2, l3.w, l3.b);
    m.loss = braze::Mean(
        braze::SoftmaxCrossEntropyWithLogits(logits, braze::OneHot(in.labels, kClasses)));
    if (train) {
      // Adam's slot variables are made here: under --api=function they belong to the
      // train step's one trace.
      // --data_parallel averages the gradients over the ranks (lib/trainer.h).
      BRAZE_ASSIGN_OR_RETURN(
          m.train_ops, braze::Minimize(braze_examples::ForFlags(flags, braze::Optimizer::Adam(lr)),
                                       m.loss, {l1.w, l1.b, l2.w, l2.b, l3.w, l3.b}));
      if (rate > 0)
        m.train_ops.push_back(
            braze::AssignAdd(step, braze::ScalarConst(*step.graph(), 1, DType::kI32)));
    }
    m.num_correct = braze_examples::NumCorrect(logits, in.labels);
    return m;
  };
  return model;
}

}  // namespace

int main(int argc, char** argv) {
  braze_examples::ExampleInfo info;
  info.program = "mlp";
  info.description = "784-1024-1024-10 ReLU MLP on Fashion-MNIST, trained with Adam";
  // Batches of 200: the last iterate of constant-rate Adam is noisy, and at 100 it still
  // dips below 0.87 test accuracy after three epochs; at 200 it settles at 0.87-0.88 from
  // the second epoch on, for the same work per epoch (and fewer, larger kernels).
  info.defaults.batch = 200;
  info.defaults.steps = 900;  // 3 epochs of 300 batches
  info.defaults.log_every = 150;
  info.defaults.lr = 1e-3;
  info.takes_dropout = true;
  return braze_examples::TrainMain(argc, argv, info, BuildMlp);
}
