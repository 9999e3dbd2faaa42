// The mixed-precision policy (braze/precision.h; policy, issue 38) on examples/mlp's
// training step (train_models.h: 784-1024-1024-10, ReLU, softmax cross entropy, Adam),
// fused as `mlp --jit=scope`, at batch 128:
//
//   BM_MlpTrainStepPrecision/batch:128/precision:0  f32 (the same step as
//                                                   BM_MlpTrainStep/batch:128/unfused:0)
//   .../precision:1                                 the bf16 policy: 16-bit matmuls, bias
//                                                   and ReLU, f32 masters, softmax, loss
//   .../precision:2                                 the f16 policy, with dynamic loss
//                                                   scaling
// The peer is BM_MlpTrainStep_torch_bf16autocast (peers_torch.cc): libtorch's CPU
// autocast to bf16 around the forward pass and the loss, as torch.autocast("cpu").
//
// The first losses are checked against the f32 reference losses (peers_common.h) to
// relative 3e-2 (bf16: 8 significant bits; f16: 1e-2). Besides the time, each reports
// the Run's intermediates (SessionStats::peak_live_bytes and step_output_bytes,
// runtime/live_bytes.h) as live_MB and outputs_MB: exact byte counts of the tensors the
// step's kernels write to memory, the activations the backward pass reads among them,
// which do not depend on the machine's load.
#include <benchmark/benchmark.h>

#include "braze/braze.h"
#include "peers_common.h"
#include "train_models.h"

namespace braze::bench {
namespace {

void BM_MlpTrainStepPrecision(benchmark::State& state) {
  const int64_t batch = state.range(0);
  const DType precision = state.range(1) == 0   ? DType::kF32
                          : state.range(1) == 1 ? DType::kBF16
                                                : DType::kF16;
  const double rtol = precision == DType::kF32 ? 1e-3 : precision == DType::kBF16 ? 3e-2 : 1e-2;
  RunTrainStep(state, MakeMlpTrainStep(batch, /*fused=*/true, precision),
               MlpTrainReferenceLosses(batch), {}, rtol);
  const double flops =
      2.0 * batch * (2 * kPixels * kHidden + 3 * kHidden * kHidden + 3 * kHidden * kClasses);
  state.counters["GFLOP/s"] =
      benchmark::Counter(flops / 1e9 * state.iterations(), benchmark::Counter::kIsRate);
}
BENCHMARK(BM_MlpTrainStepPrecision)
    ->ArgNames({"batch", "precision"})
    ->ArgsProduct({{128}, {0, 1, 2}})
    ->Unit(benchmark::kMillisecond)
    ->MinTime(2.0)
    ->UseRealTime();

}  // namespace
}  // namespace braze::bench
