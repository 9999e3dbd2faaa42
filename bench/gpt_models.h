// The transformer training steps of gpt_bench.cc, built from examples/lib/gpt.h (the
// char_lm example's model builder) so that the benchmark times exactly the example's
// math, and so that a peer (peers_torch.cc) can check its losses against Braze's.
//
//   TransformerBlockStep: one GPT block (pre-LayerNorm attention and GELU MLP, width
//     256, 4 heads, dropout 0.1) on x [16 * 128, 256] N(0, 1) (seed 21), loss =
//     mean((block(x) - target)^2) against a target N(0, 1) (seed 22), the block's 12
//     variables trained by AdamW as the char_lm recipe (betas 0.9, 0.99, eps 1e-8, decay
//     0.1 on rank >= 2) at a constant rate 1e-3, no clipping (as its libtorch peer), its
//     weights initialized as the recipe says for a 4-layer model (seed 23).
//   CharLmStep: examples/char_lm's default train step: the 4-layer model on the
//     fortunes text's vocabulary, the first batch the example draws (16 windows of 128,
//     seed 1), mean cross entropy, the recipe's optimizer (AdamW, clipping, the warmup +
//     cosine schedule over 1000 steps). Needs the fortunes package
//     (braze::LoadFortunes); without it the step is an error naming the directory.
//
// fused: model, loss, gradients and update math under one JitScope (char_lm
// --jit=scope); unfused: no JIT, every op its own compiled kernel (--jit=off).
#ifndef BRAZE_BENCH_GPT_MODELS_H_
#define BRAZE_BENCH_GPT_MODELS_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "braze/braze.h"
#include "train_models.h"

namespace braze::bench {

constexpr int64_t kGptBatch = 16, kGptContext = 128, kGptWidth = 256, kGptHeads = 4;

HostTensor TransformerBlockInput();   // [kGptBatch * kGptContext, kGptWidth]
HostTensor TransformerBlockTarget();  // the same shape
// fused_attention: the Attention op (docs/ATTENTION.md) instead of the example's
// default composite (gpt_step_profile's --attention=fused).
absl::StatusOr<TrainStep> MakeTransformerBlockStep(bool fused, bool fused_attention = false);
absl::StatusOr<TrainStep> MakeCharLmStep(bool fused, bool fused_attention = false);

// Braze's losses of the first `steps` steps of each (each before its update), on the
// reference kernels; computed once and kept. Empty after an error (printed).
const std::vector<float>& TransformerBlockStepReferenceLosses();
const std::vector<float>& CharLmStepReferenceLosses();

}  // namespace braze::bench

#endif  // BRAZE_BENCH_GPT_MODELS_H_
