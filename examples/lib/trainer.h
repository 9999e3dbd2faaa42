// The training loop shared by the examples: flags, shuffled mini-batches of
// Fashion-MNIST, the timed loop, evaluation, the timeline and the final report.
//
// An example only builds its model (see mnist_softmax.cc and mlp.cc):
//
//   absl::StatusOr<TrainGraph> BuildSoftmax(braze::Graph& g, const TrainFlags& flags);
//   int main(int argc, char** argv) {
//     return TrainMain(argc, argv, {"mnist_softmax", "...", defaults}, BuildSoftmax);
//   }
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

namespace braze_examples {

// How the example asks Braze to compile, mirroring the seeds' three ways to run
// mnist_softmax: no XLA, jit_scope around the model, session-level auto-clustering.
enum class JitMode {
  kOff,    // default session: every op runs as its own compiled single-op kernel
  kScope,  // the model, loss, gradients and updates are built under JitScope(g)
  kAuto,   // SessionOptions::global_jit_level = JitLevel::kOn1
};

struct TrainFlags {
  JitMode jit = JitMode::kScope;
  int64_t steps = 3000;     // total train steps
  int64_t batch = 100;      // examples per step
  double lr = 0.5;          // (initial) learning rate
  uint64_t seed = 1;        // shuffling and weight-initialization seed
  int64_t log_every = 600;  // steps between progress lines (600 = an epoch at 100)
  std::string data_dir = braze::kFashionMnistDir;
  std::string device = "auto";   // SessionOptions::device
  std::string timeline;          // Chrome trace file; empty: none
  int64_t timeline_steps = 10;   // train steps traced; 0: the whole run
  bool reference = false;        // run every op on the reference kernels
  double min_test_accuracy = 0;  // exit status 1 below this (for ctest)
};

// What an example's model builder hands back: the feeds, the fetches of a train step
// and its Run targets.
struct TrainGraph {
  braze::Tensor x;                       // f32 [-1, 784] placeholder: pixels / 255
  braze::Tensor labels;                  // i32 [-1] placeholder: 0..9
  braze::Tensor loss;                    // f32 scalar: mean cross entropy of the batch
  braze::Tensor num_correct;             // f32 scalar: how many argmax(logits) == labels
  std::vector<braze::Tensor> train_ops;  // running all of them is one optimizer step
  // Optional f32 scalar placeholder, fed 1 - step / steps each step (a linear decay to
  // zero); invalid when the example has no schedule.
  braze::Tensor lr_scale;
};

using ModelBuilder = std::function<absl::StatusOr<TrainGraph>(braze::Graph&, const TrainFlags&)>;

struct ExampleInfo {
  const char* program;      // "mnist_softmax"
  const char* description;  // one line for --help
  TrainFlags defaults;      // per-example defaults (steps, lr, ...)
};

// Parses flags over info.defaults (`--name=value` or `--name value`; --help prints the
// usage and exits), builds the model with `build`, trains and reports. Returns the
// process exit status: 0, 1 on an error or an accuracy below --min_test_accuracy, 2 on a
// bad flag.
int TrainMain(int argc, char** argv, const ExampleInfo& info, const ModelBuilder& build);

}  // namespace braze_examples

#endif  // BRAZE_EXAMPLES_LIB_TRAINER_H_
