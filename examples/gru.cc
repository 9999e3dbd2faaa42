// A GRU over the rows of Fashion-MNIST images: 28 steps reading 28 pixels each, a dense
// layer on the last state, trained with Adam (examples/lib/gru.h has the cell).
//
//   h_0 = 0;  h_t = GruCell(x[:, 28 t : 28 t + 28], h_{t-1});  logits = h_28 W + b
//   loss = Mean(SoftmaxCrossEntropyWithLogits(logits, OneHot(labels)))
//
// By default the recurrence is one Scan (braze/control_flow.h) whose body is the cell,
// traced once and run for each of the 28 rows; --unroll builds it with a C++ loop
// instead: 28 copies of the cell in the graph (the hand-unrolled baseline of the
// recurrent benchmarks). Both use the same cell function and start from the same
// weights. Flags as the other examples (`--help`): --jit=off|scope|auto,
// --api=session|function, --device=..., --steps, ...
#include "lib/gru.h"

#include <cmath>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "braze/braze.h"
#include "lib/trainer.h"

namespace {

using braze::DType;
using braze::HostTensor;
using braze::Tensor;
using braze_examples::GruWeights;
using braze_examples::Model;
using braze_examples::StepInputs;
using braze_examples::TrainFlags;
using braze_examples::TrainGraph;

constexpr int64_t kSteps = 28;  // image rows
constexpr int64_t kRow = 28;    // pixels per row
constexpr int64_t kHidden = 128;
constexpr int64_t kClasses = 10;

absl::StatusOr<Model> BuildGru(braze::Graph& g, const TrainFlags& flags) {
  const uint64_t seed = flags.seed * 1000;
  const GruWeights gru =
      braze_examples::MakeGru(g, braze_examples::GruInitialValues(kRow, kHidden, seed), "gru");
  const Tensor w_out =
      braze::Variable(g,
                      HostTensor::RandomNormal(DType::kF32, {kHidden, kClasses}, seed + 10, 0,
                                               std::sqrt(1.0 / kHidden)),
                      "logits/w");
  const Tensor b_out = braze::Variable(g, HostTensor(DType::kF32, {kClasses}), "logits/b");
  Model model;
  model.step = [gru, w_out, b_out, flags](const StepInputs& in,
                                          bool train) -> absl::StatusOr<TrainGraph> {
    TrainGraph m;
    const Tensor last = flags.unroll ? braze_examples::GruUnrolled(gru, in.x, kSteps)
                                     : braze_examples::GruScan(gru, in.x, kSteps);
    const Tensor logits = braze::Dense(last, w_out, b_out);
    m.loss = braze::Mean(
        braze::SoftmaxCrossEntropyWithLogits(logits, braze::OneHot(in.labels, kClasses)));
    if (train) {
      std::vector<Tensor> variables = gru.variables();
      variables.push_back(w_out);
      variables.push_back(b_out);
      // Adam's slots are made here: under --api=function, by the train step's one trace.
      BRAZE_ASSIGN_OR_RETURN(
          m.train_ops,
          braze::Minimize(braze_examples::ForFlags(flags, braze::Optimizer::Adam(flags.lr)), m.loss,
                          variables));
    }
    m.num_correct = braze_examples::NumCorrect(logits, in.labels);
    return m;
  };
  return model;
}

}  // namespace

int main(int argc, char** argv) {
  braze_examples::ExampleInfo info;
  info.program = "gru";
  info.description = "GRU (hidden 128) over the 28 rows of Fashion-MNIST images, trained with Adam";
  info.defaults.batch = 128;
  info.defaults.steps = 938;  // 2 epochs of 469 batches
  info.defaults.log_every = 469;
  info.defaults.lr = 2e-3;
  info.takes_unroll = true;
  return braze_examples::TrainMain(argc, argv, info, BuildGru);
}
