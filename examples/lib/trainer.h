// The training loop shared by the examples: flags, shuffled mini-batches of
// Fashion-MNIST, the timed loop, evaluation, the timeline and the final report.
//
// An example only builds its model (see mnist_softmax.cc and mlp.cc):
//
//   absl::StatusOr<Model> BuildSoftmax(braze::Graph& g, const TrainFlags& flags);
//   int main(int argc, char** argv) {
//     return TrainMain(argc, argv, {"mnist_softmax", "...", defaults}, BuildSoftmax);
//   }
//
// Under --api=function the train step and the evaluation are braze::Functions with
// input_signature batch -1 (one trace each), capturing the model's variables, and every
// epoch ends with its partial last batch, trained as well.
//
// Output: a line per `--log_every` steps (running train loss and batch accuracy, test
// accuracy), a line stating what one train step launched (from Session::stats()), and
// as the last two lines, machine-readable, `test_accuracy=<v>` and `step_ms=<v>`.
#ifndef BRAZE_EXAMPLES_LIB_TRAINER_H_
#define BRAZE_EXAMPLES_LIB_TRAINER_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "braze/braze.h"
#include "lib/common_flags.h"

namespace braze_examples {

// The common flags (lib/common_flags.h: --jit, --api, --device, --steps, --batch,
// --seed, checkpoints) and the trainer's own.
struct TrainFlags : CommonFlags {
  TrainFlags() {
    steps = 3000;
    batch = 100;
  }
  double lr = 0.5;          // (initial) learning rate
  int64_t log_every = 600;  // steps between progress lines (600 = an epoch at 100)
  std::string data_dir = braze::kFashionMnistDir;
  std::string timeline;          // Chrome trace file; empty: none
  int64_t timeline_steps = 10;   // train steps traced; 0: the whole run
  bool reference = false;        // run every op on the reference kernels
  double min_test_accuracy = 0;  // exit status 1 below this (for ctest)
  int64_t eval_rows = 0;         // test images evaluated: the first N; 0: all
  int64_t eval_batch = 10000;    // test images per evaluation run (10000: one run)
  double dropout = 0;            // dropout rate of the models that have it (mlp); 0: none
  // --data_parallel (docs/DISTRIBUTED.md): under `mpirun -np N`, every rank trains on its
  // batch / N rows of each global batch of --batch; the gradients are averaged
  // (Optimizer::WithDataParallel) and rank 0's initial weights broadcast, so N ranks
  // train as one process at the same global batch. Only rank 0 prints.
  bool data_parallel = false;
  int rank = 0;   // set by TrainMain: this process's rank
  int world = 1;  // and the number of ranks
  // Recurrent models (gru): build the recurrence hand-unrolled, one copy of the cell per
  // step, instead of as a loop op.
  bool unroll = false;
};

// `optimizer`, data parallel under --data_parallel and with dynamic loss scaling under
// --precision=f16: what a model's Minimize should use.
braze::Optimizer ForFlags(const TrainFlags& flags, braze::Optimizer optimizer);

// The inputs of a step: placeholders under --api=session, a Function's arguments under
// --api=function.
struct StepInputs {
  braze::Tensor x;       // f32 [batch, 784]: pixels / 255
  braze::Tensor labels;  // i32 [batch]: 0..9
  // f32 scalar, fed 1 - step / steps each train step (a linear decay to zero); valid
  // only when the model asked for it (Model::uses_lr_scale) and only in train steps.
  braze::Tensor lr_scale;
};

// What one step of a model computes.
struct TrainGraph {
  braze::Tensor loss;                    // f32 scalar: mean cross entropy of the batch
  braze::Tensor num_correct;             // f32 scalar: how many argmax(logits) == labels
  std::vector<braze::Tensor> train_ops;  // running all of them is one optimizer step
};

// An example's model: its variables, created once on the graph by the ModelBuilder, and
// `step`, which builds the step's ops from its inputs (with the optimizer's update when
// `train`). Under --api=function, step runs inside Function bodies that capture the
// variables: the train step once per trace, the evaluation once per trace.
struct Model {
  bool uses_lr_scale = false;
  // Under --api=session, evaluation runs a step of its own, built with train = false (a
  // model whose layers differ in training, BatchNorm's batch statistics, say); false:
  // it fetches the train step's num_correct (without its train_ops). --api=function
  // always builds the evaluation with train = false.
  bool eval_step = false;
  std::function<absl::StatusOr<TrainGraph>(const StepInputs& in, bool train)> step;
};

using ModelBuilder = std::function<absl::StatusOr<Model>(braze::Graph&, const TrainFlags&)>;

struct ExampleInfo {
  const char* program;      // "mnist_softmax"
  const char* description;  // one line for --help
  TrainFlags defaults;      // per-example defaults (steps, lr, ...)
  // The model options the example's builder reads; the others are refused naming the
  // flag (FlagMatch::kUnused), never accepted and ignored.
  bool takes_dropout = false;  // --dropout (mlp)
  bool takes_unroll = false;   // --unroll (gru)
};

// The number of rows whose largest logit is at their label, as an f32 scalar, built in
// the name scope "accuracy" (each example's ModelOutputs::num_correct).
braze::Tensor NumCorrect(const braze::Tensor& logits, const braze::Tensor& labels);

// Parses flags over info.defaults (`--name=value` or `--name value`; --help prints the
// usage and exits), builds the model with `build`, trains and reports. Returns the
// process exit status: 0, 1 on an error or an accuracy below --min_test_accuracy, 2 on a
// bad flag.
int TrainMain(int argc, char** argv, const ExampleInfo& info, const ModelBuilder& build);

}  // namespace braze_examples

#endif  // BRAZE_EXAMPLES_LIB_TRAINER_H_
