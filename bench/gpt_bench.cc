// Transformer training steps on the CPU, fused vs unfused, in one run (gpt_models.h):
//
//   BM_TransformerBlockStep/unfused:{0,1}: one GPT block's training step (width 256,
//     4 heads, T = 128, batch 16), dropout 0.1, the char_lm recipe's optimizer.
//   BM_CharLmStep/unfused:{0,1}: examples/char_lm's default training step.
//
//   fused (unfused:0): everything under one JitScope, as `char_lm --jit=scope`.
//   unfused (unfused:1): no JIT, every op its own compiled kernel (`--jit=off`).
//
// The first kCheckedSteps losses are checked against Braze's reference kernels before
// the timing (relative tolerance 1e-3); the libtorch peers of the same steps are
// BM_TransformerBlockStep_torch and BM_CharLmStep_torch (peers_torch.cc).
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "braze/braze.h"
#include "gpt_models.h"
#include "lib/gpt.h"
#include "peers_common.h"

namespace braze::bench {
namespace {

// Multiply-adds of a block's matmuls per token, forward: qkv 3 d^2, proj d^2, MLP 8 d^2,
// and attention's two [T, T] products (causal, but computed in full): 2 T d.
// The example's sessions cap clusters (gpt.h: the clipped updates would otherwise make
// one pipeline that compiles for minutes).
SessionOptions GptSessionOptions() {
  SessionOptions options;
  options.max_cluster_size = braze_examples::kGptMaxClusterSize;
  return options;
}

double BlockGflopPerStep(int64_t tokens, int64_t d, int64_t t) {
  const double forward = 2.0 * tokens * (12.0 * d * d + 2.0 * t * d);
  return 3 * forward / 1e9;  // forward, and the backward's two products per matmul
}

void BM_TransformerBlockStep(benchmark::State& state) {
  RunTrainStep(state, MakeTransformerBlockStep(state.range(0) == 0),
               TransformerBlockStepReferenceLosses(), GptSessionOptions());
  SetRate(state, "GFLOP/s", BlockGflopPerStep(kGptBatch * kGptContext, kGptWidth, kGptContext));
}
BENCHMARK(BM_TransformerBlockStep)
    ->ArgName("unfused")
    ->Arg(0)
    ->Arg(1)
    ->Unit(benchmark::kMillisecond)
    ->MinTime(1.0)
    ->UseRealTime();

void BM_CharLmStep(benchmark::State& state) {
  RunTrainStep(state, MakeCharLmStep(state.range(0) == 0), CharLmStepReferenceLosses(),
               GptSessionOptions());
  const int64_t tokens = kGptBatch * kGptContext;
  SetRate(state, "GFLOP/s", 4 * BlockGflopPerStep(tokens, kGptWidth, kGptContext));
}
BENCHMARK(BM_CharLmStep)
    ->ArgName("unfused")
    ->Arg(0)
    ->Arg(1)
    ->Unit(benchmark::kMillisecond)
    ->MinTime(2.0)
    ->UseRealTime();

}  // namespace
}  // namespace braze::bench
