// The GRU training step of the recurrent benchmarks (issue 40): examples/gru's model at
// batch 128 on one fixed batch (train_models.h's TrainImages and TrainLabels): 28 steps
// of 28 pixels, hidden 128, the cell of examples/lib/gru.h (torch::nn::GRU's equations
// and gate layout), a dense head on the last state, softmax cross entropy, Adam(kGruLr).
// Braze's forms (gru_bench.cc) and libtorch's nn::GRU (peers_gru.cc) start from the same
// weights and must reproduce Braze's reference losses of the first steps.
#ifndef BRAZE_BENCH_GRU_MODELS_H_
#define BRAZE_BENCH_GRU_MODELS_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "braze/braze.h"
#include "lib/gru.h"
#include "train_models.h"

namespace braze::bench {

constexpr int64_t kGruBatch = 128, kGruSteps = 28, kGruRow = 28, kGruHidden = 128;
constexpr double kGruLr = 2e-3;  // examples/gru's default

braze_examples::GruInit GruInitialValues();  // seeds 1..4
HostTensor GruHeadInitialWeight();           // [128, 10], normal, std sqrt(1 / 128), seed 10

// The step with the recurrence as one Scan over the 28 rows (scan), or hand-unrolled (28
// copies of the cell); fused: under one JitScope (the Scan's body, its gradient's body
// and the ops around them each fused apart).
absl::StatusOr<TrainStep> MakeGruStep(bool scan, bool fused);
// Braze's losses of the first kCheckedSteps steps on the reference kernels (the
// unrolled form's; the Scan form must reproduce them too).
const std::vector<float>& GruStepReferenceLosses();

// The step's matmul arithmetic in 1e9 FLOP: per time step the gates' two GEMMs of width
// 3H, forward and (with both operands' gradients) backward; the head's, likewise.
inline double GruStepGflop() {
  const double forward_per_step =
      2.0 * kGruBatch * (kGruRow * 3 * kGruHidden + kGruHidden * 3 * kGruHidden);
  return 3 * (kGruSteps * forward_per_step + 2.0 * kGruBatch * kGruHidden * kClasses) / 1e9;
}

}  // namespace braze::bench

#endif  // BRAZE_BENCH_GRU_MODELS_H_
