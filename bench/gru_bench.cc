// The GRU training step (issue 40, gru_models.h): examples/gru's model at batch 128, 28
// steps, hidden 128, Adam, on one fixed batch fed from the host each step:
//
//   BM_GruStep/unfused:{0,1}: the recurrence as one Scan over the rows (`gru`), its
//     gradient the reverse Scan of braze/control_flow.h.
//   BM_GruUnrolledStep/unfused:{0,1}: the recurrence hand-unrolled (28 copies of the
//     cell in the graph, `gru --unroll`).
//   fused (0): under one JitScope, as `--jit=scope`; unfused (1): every op its own
//   compiled kernel, as `--jit=off`.
//
// Issue 40's goals: BM_GruStep at least 0.95x as fast as BM_GruUnrolledStep, and 1.2x
// BM_GruStep_torch.
// The first four losses are checked against Braze's reference kernels (relative
// tolerance 1e-3) before the timing; libtorch's torch::nn::GRU of the same step, from
// the same weights, is BM_GruStep_torch (peers_gru.cc).
#include <benchmark/benchmark.h>

#include "gru_models.h"
#include "peers_common.h"

namespace braze::bench {
namespace {

void BM_GruStep(benchmark::State& state) {
  RunTrainStep(state, MakeGruStep(/*scan=*/true, state.range(0) == 0), GruStepReferenceLosses());
  SetRate(state, "GFLOP/s", GruStepGflop());
}
BENCHMARK(BM_GruStep)
    ->ArgName("unfused")
    ->Arg(0)
    ->Arg(1)
    ->Unit(benchmark::kMillisecond)
    ->MinTime(2.0)
    ->UseRealTime();

void BM_GruUnrolledStep(benchmark::State& state) {
  RunTrainStep(state, MakeGruStep(/*scan=*/false, state.range(0) == 0), GruStepReferenceLosses());
  SetRate(state, "GFLOP/s", GruStepGflop());
}
BENCHMARK(BM_GruUnrolledStep)
    ->ArgName("unfused")
    ->Arg(0)
    ->Arg(1)
    ->Unit(benchmark::kMillisecond)
    ->MinTime(2.0)
    ->UseRealTime();

}  // namespace
}  // namespace braze::bench
