// A GPT-2 style (pre-LayerNorm) character language model built from Braze ops: the
// model of examples/char_lm.cc, also built by bench/ (its training step and one
// transformer block's). docs/CHAR_LM.md states the recipe this follows:
//
//   x = wte[tokens] + wpe[0..T-1], dropout
//   per block: x += Dropout(Proj(Attention(LN1(x))));  x += Dropout(MLP(LN2(x)))
//   logits = LNf(x) W_head          (W_head [d, V], no bias, not tied to wte)
//
// Attention is one Linear(d, 3d) for q, k, v, heads [B, H, T, d / H], causal scaled
// dot-product attention (scale 1 / sqrt(d / H)) with dropout on the weights, heads
// merged and projected by Linear(d, d). The MLP is Linear(d, 4d), GELU (tanh),
// Linear(4d, d). The sequence length may be symbolic (-1): positions come from Iota,
// the causal mask from comparing two Iotas, so one compiled kernel serves every length.
//
// The residual stream is kept as [B * T, d] (MatMul is two-dimensional); only attention
// reshapes to [B, T, H, d / H], which needs at most one of B and T symbolic.
#ifndef BRAZE_EXAMPLES_LIB_GPT_H_
#define BRAZE_EXAMPLES_LIB_GPT_H_

#include <cstdint>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "braze/braze.h"

namespace braze_examples {

// The largest cluster the GPT's sessions form (SessionOptions::max_cluster_size). The
// clipped AdamW update of every variable depends on the global norm of all gradients,
// so without a cap every update (53 variables, about a thousand elementwise ops) joins
// one cluster: one Halide pipeline of ~100 outputs that took 12 minutes to compile on
// the 2-core machine, against 20 s for the whole step's other kernels. Capped, the
// updates split into pipelines of this many ops; the model's own clusters (at most one
// matmul each) are smaller than this anyway. (The session's default bound, 128 since
// 2026-11-30, would split them too, in larger pipelines.)
inline constexpr int kGptMaxClusterSize = 64;

struct GptConfig {
  int64_t vocab = 0;  // V: distinct symbols
  int64_t n_layer = 4;
  int64_t n_head = 4;
  int64_t d_model = 256;
  int64_t context = 128;  // T: the longest sequence (the learned positions)
  double dropout = 0.1;
  uint64_t seed = 1;  // weight initialization
};

// How attention is built (braze::ScaledDotProductAttention's `fused`): one Attention op
// whose forward and backward kernels never hold the [T, T] scores, or the composite
// written out (BatchMatMul, causal mask, Softmax, dropout, BatchMatMul).
enum class AttentionImpl { kFused, kUnfused };

struct Linear {
  braze::Tensor w;  // [in, out]
  braze::Tensor b;  // [out]; invalid when the layer has no bias
};

struct LayerNormParams {
  braze::Tensor gamma, beta;  // [d]
};

struct GptBlock {
  LayerNormParams ln1, ln2;
  Linear qkv;   // d -> 3d
  Linear proj;  // d -> d (a residual projection)
  Linear fc;    // d -> 4d
  Linear fc2;   // 4d -> d (a residual projection)
};

struct GptParams {
  braze::Tensor wte;  // [V, d]
  braze::Tensor wpe;  // [T, d]
  std::vector<GptBlock> blocks;
  LayerNormParams ln_f;
  Linear head;  // d -> V, no bias
};

// Creates the variables on `g` (names "gpt/..."), initialized as the recipe says: every
// Linear weight and both embeddings N(0, 0.02), the residual projections N(0, 0.02 /
// sqrt(2 n_layer)), biases 0, LayerNorm gamma 1 and beta 0; seeds from config.seed.
// InvalidArgument on a config that cannot build (d_model not a multiple of n_head,
// non-positive sizes, dropout outside [0, 1)).
absl::StatusOr<GptParams> MakeGptParams(braze::Graph& g, const GptConfig& config);

// One block's variables, named "<name>/...": what bench/ trains on its own.
GptBlock MakeGptBlock(braze::Graph& g, const GptConfig& config, uint64_t seed,
                      const std::string& name);

// Every variable, in a fixed order (embeddings, blocks, final LayerNorm, head).
std::vector<braze::Tensor> AllVariables(const GptParams& params);
std::vector<braze::Tensor> BlockVariables(const GptBlock& block);

// Dropout as the model applies it: off in evaluation graphs. `step` is the training
// step counter (a scalar Variable incremented each step) that keys the random masks,
// so that every step draws new ones; `seed` and a per-site index keep sites apart.
struct DropoutSpec {
  double rate = 0;     // 0: no dropout (evaluation, generation)
  braze::Tensor step;  // scalar step counter; needed when rate > 0
  uint64_t seed = 1;
};

// The options of the forward pass.
struct GptForward {
  DropoutSpec dropout;
  AttentionImpl attention = AttentionImpl::kUnfused;
};

// One block applied to x [B * T, d] whose sequences are [batch, seq] (each known, or
// -1 for at most one of them). `site` numbers its dropout sites (advanced by the call).
braze::Tensor GptBlockForward(const GptBlock& block, const GptConfig& config, braze::Tensor x,
                              int64_t batch, int64_t seq, const GptForward& forward, int64_t* site);

// Logits [B * T, V] of tokens [B, T] (i32 ids; T <= context, or -1 with B known).
braze::Tensor GptLogits(const GptParams& params, const GptConfig& config, braze::Tensor tokens,
                        const GptForward& forward);

// Mean softmax cross entropy of logits [N, V] against ids targets (any shape of N ids).
braze::Tensor GptLoss(braze::Tensor logits, braze::Tensor targets, int64_t vocab);

// The training recipe's optimizer settings (docs/CHAR_LM.md): AdamW with weight decay
// on the variables of rank >= 2, gradients clipped by their global norm, and the
// learning rate of step s (from 1) warmed up linearly over warmup_steps, then decayed
// by a cosine to peak_lr / 10 at total_steps.
struct GptTrainConfig {
  double peak_lr = 1e-3;
  double beta1 = 0.9, beta2 = 0.99, epsilon = 1e-8;
  double weight_decay = 0.1;  // on variables of rank >= 2 only
  double clip_norm = 1.0;     // 0: no clipping
  int64_t warmup_steps = 100;
  int64_t total_steps = 1000;  // 0: a constant rate of peak_lr (no schedule)
};

// One optimizer step of `loss` over `vars`: the update ops to run with the step, the
// step counter's increment among them. `step` counts the steps done (MakeStepCounter);
// the step being taken is step + 1.
absl::StatusOr<std::vector<braze::Tensor>> GptTrainOps(const GptTrainConfig& train,
                                                       braze::Tensor loss,
                                                       const std::vector<braze::Tensor>& vars,
                                                       braze::Tensor step);

// The step counter: a scalar i32 Variable named `name`, starting at 0 (steps done). It
// keys the dropout masks (braze::Dropout's step) and feeds the learning-rate schedule.
braze::Tensor MakeStepCounter(braze::Graph& g, const std::string& name);

// The recipe's batches (docs/CHAR_LM.md): fills inputs and targets ([batch, T] i32)
// with windows of T + 1 ids of `ids` at starts drawn uniformly from [0, size - T - 1]
// by `rng` (std::uniform_int_distribution<int64_t>, one draw per window, in order):
// inputs ids [s, s + T), targets [s + 1, s + T].
void SampleBatch(const std::vector<int32_t>& ids, int64_t context, std::mt19937_64& rng,
                 braze::HostTensor* inputs, braze::HostTensor* targets);

// The validation windows: window w holds ids [w T, w T + T] (inputs the first T, targets
// the last T), as many whole ones as fit, at most `max_windows`.
std::pair<braze::HostTensor, braze::HostTensor> ValidationWindows(const std::vector<int32_t>& ids,
                                                                  int64_t context,
                                                                  int64_t max_windows);

}  // namespace braze_examples

#endif  // BRAZE_EXAMPLES_LIB_GPT_H_
