// The GRU training step (issue 40, gru_models.h): examples/gru's model at batch 128, 28
// steps, hidden 128, Adam, on one fixed batch fed from the host each step:
//
//   BM_GruUnrolledStep/unfused:{0,1}: the recurrence hand-unrolled (28 copies of the
//     cell in the graph, `gru --unroll`); fused (0): under one JitScope, as
//     `--jit=scope`; unfused (1): every op its own compiled kernel, as `--jit=off`.
//
// The first four losses are checked against Braze's reference kernels (relative
// tolerance 1e-3) before the timing; libtorch's torch::nn::GRU of the same step, from
// the same weights, is BM_GruStep_torch (peers_gru.cc).
#include <benchmark/benchmark.h>

#include "gru_models.h"
#include "peers_common.h"

namespace braze::bench {
namespace {

void BM_GruUnrolledStep(benchmark::State& state) {
  RunTrainStep(state, MakeGruUnrolledStep(state.range(0) == 0), GruStepReferenceLosses());
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
