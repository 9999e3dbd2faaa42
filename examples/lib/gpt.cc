#include "lib/gpt.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace braze_examples {
namespace {

using braze::DType;
using braze::HostTensor;
using braze::Tensor;

constexpr double kInitStd = 0.02;
constexpr double kLayerNormEpsilon = 1e-5;

Tensor NormalVariable(braze::Graph& g, braze::Shape shape, double stddev, uint64_t seed,
                      const std::string& name) {
  return braze::Variable(
      g, HostTensor::RandomNormal(DType::kF32, std::move(shape), seed, 0, stddev), name);
}

Tensor FilledVariable(braze::Graph& g, int64_t n, double value, const std::string& name) {
  return braze::Variable(g, HostTensor::Filled(DType::kF32, {n}, value), name);
}

Linear MakeLinear(braze::Graph& g, int64_t in, int64_t out, double stddev, bool bias, uint64_t seed,
                  const std::string& name) {
  Linear l;
  l.w = NormalVariable(g, {in, out}, stddev, seed, absl::StrCat(name, "/w"));
  if (bias) l.b = FilledVariable(g, out, 0.0, absl::StrCat(name, "/b"));
  return l;
}

LayerNormParams MakeLayerNorm(braze::Graph& g, int64_t d, const std::string& name) {
  return {FilledVariable(g, d, 1.0, absl::StrCat(name, "/gamma")),
          FilledVariable(g, d, 0.0, absl::StrCat(name, "/beta"))};
}

Tensor Apply(const Linear& l, Tensor x) {
  return l.b.valid() ? braze::Dense(x, l.w, l.b) : braze::MatMul(x, l.w);
}

Tensor Norm(const LayerNormParams& p, Tensor x) {
  return braze::LayerNorm(x, p.gamma, p.beta, kLayerNormEpsilon);
}

// The one place dropout is built. Training graphs pass a rate > 0 and the step counter;
// evaluation and generation graphs a rate of 0, which builds nothing. braze::Dropout's
// masks are keyed by (seed, step) and the op's name; each site also gets its own seed,
// so no two sites share a mask whatever their names.
Tensor Dropout(Tensor x, const DropoutSpec& spec, int64_t* site) {
  ++*site;
  if (spec.rate <= 0) return x;
  return braze::Dropout(x, spec.rate, spec.step, spec.seed * 1000 + static_cast<uint64_t>(*site));
}

// Causal scaled dot-product attention of q, k, v [B, H, T, hd] with dropout on the
// weights, as braze::ScaledDotProductAttention builds it: fused, one Attention op (and
// its gradient ops) whose kernels never hold the [T, T] scores; unfused, the composite
// written out (BatchMatMul q k^T, scale, a causal Iota/Less/Select mask, Softmax,
// dropout, BatchMatMul with v), which materializes them.
Tensor Attention(Tensor q, Tensor k, Tensor v, double scale, const GptForward& forward,
                 int64_t* site) {
  ++*site;
  braze::AttentionOptions options;
  options.causal = true;
  options.scale = scale;
  options.fused = forward.attention == AttentionImpl::kFused;
  if (forward.dropout.rate > 0) {
    options.dropout = forward.dropout.rate;
    options.step = forward.dropout.step;
    options.seed = forward.dropout.seed * 1000 + static_cast<uint64_t>(*site);
  }
  return braze::ScaledDotProductAttention(q, k, v, options);
}

}  // namespace

GptBlock MakeGptBlock(braze::Graph& g, const GptConfig& c, uint64_t seed, const std::string& name) {
  const int64_t d = c.d_model;
  // GPT-2's scaled init of the two projections that add into the residual stream, so
  // that its variance does not grow with depth.
  const double residual_std = kInitStd / std::sqrt(2.0 * static_cast<double>(c.n_layer));
  GptBlock b;
  b.ln1 = MakeLayerNorm(g, d, absl::StrCat(name, "/ln1"));
  b.qkv = MakeLinear(g, d, 3 * d, kInitStd, true, seed + 1, absl::StrCat(name, "/qkv"));
  b.proj = MakeLinear(g, d, d, residual_std, true, seed + 2, absl::StrCat(name, "/proj"));
  b.ln2 = MakeLayerNorm(g, d, absl::StrCat(name, "/ln2"));
  b.fc = MakeLinear(g, d, 4 * d, kInitStd, true, seed + 3, absl::StrCat(name, "/fc"));
  b.fc2 = MakeLinear(g, 4 * d, d, residual_std, true, seed + 4, absl::StrCat(name, "/fc2"));
  return b;
}

absl::StatusOr<GptParams> MakeGptParams(braze::Graph& g, const GptConfig& c) {
  if (c.vocab < 1 || c.n_layer < 1 || c.n_head < 1 || c.d_model < 1 || c.context < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("GptConfig: vocab ", c.vocab, ", n_layer ", c.n_layer, ", n_head ", c.n_head,
                     ", d_model ", c.d_model, " and context ", c.context, " must all be >= 1"));
  }
  if (c.d_model % c.n_head != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("GptConfig: d_model ", c.d_model, " is not a multiple of n_head ", c.n_head));
  }
  if (!(c.dropout >= 0 && c.dropout < 1)) {
    return absl::InvalidArgumentError(
        absl::StrCat("GptConfig: dropout ", c.dropout, " is outside [0, 1)"));
  }
  // Each variable its own seed (seed * 1000 + k), so no two start as copies.
  const uint64_t base = c.seed * 1000;
  GptParams p;
  p.wte = NormalVariable(g, {c.vocab, c.d_model}, kInitStd, base + 1, "gpt/wte");
  p.wpe = NormalVariable(g, {c.context, c.d_model}, kInitStd, base + 2, "gpt/wpe");
  for (int64_t i = 0; i < c.n_layer; ++i) {
    p.blocks.push_back(MakeGptBlock(g, c, base + 10 * (i + 1), absl::StrCat("gpt/h", i)));
  }
  p.ln_f = MakeLayerNorm(g, c.d_model, "gpt/ln_f");
  p.head = MakeLinear(g, c.d_model, c.vocab, kInitStd, false, base + 3, "gpt/head");
  return p;
}

std::vector<Tensor> BlockVariables(const GptBlock& b) {
  return {b.ln1.gamma, b.ln1.beta, b.qkv.w, b.qkv.b, b.proj.w, b.proj.b,
          b.ln2.gamma, b.ln2.beta, b.fc.w,  b.fc.b,  b.fc2.w,  b.fc2.b};
}

std::vector<Tensor> AllVariables(const GptParams& p) {
  std::vector<Tensor> vars = {p.wte, p.wpe};
  for (const GptBlock& b : p.blocks) {
    for (const Tensor& t : BlockVariables(b)) vars.push_back(t);
  }
  vars.push_back(p.ln_f.gamma);
  vars.push_back(p.ln_f.beta);
  vars.push_back(p.head.w);
  return vars;
}

Tensor GptBlockForward(const GptBlock& b, const GptConfig& c, Tensor x, int64_t batch, int64_t seq,
                       const GptForward& forward, int64_t* site) {
  const int64_t d = c.d_model, h = c.n_head, hd = c.d_model / c.n_head;
  braze::Graph& g = *x.graph();
  Tensor qkv = Apply(b.qkv, Norm(b.ln1, x));  // [B * T, 3d]
  // [B * T, 3d] -> [B, T, 3, H, hd] -> [3, B, H, T, hd]: q, k and v as slices.
  Tensor heads = braze::Transpose(braze::Reshape(qkv, {batch, seq, 3, h, hd}), {2, 0, 3, 1, 4});
  auto part = [&](int64_t i) {
    Tensor s = braze::Slice(heads, {i, 0, 0, 0, 0}, {1, -1, -1, -1, -1});
    return braze::Reshape(s, {batch, h, seq, hd});
  };
  Tensor att;
  {
    braze::NameScope name_scope(g, "attn");
    att = Attention(part(0), part(1), part(2), 1.0 / std::sqrt(static_cast<double>(hd)), forward,
                    site);
  }
  // [B, H, T, hd] -> [B, T, H, hd] -> [B * T, d].
  att = braze::Reshape(braze::Transpose(att, {0, 2, 1, 3}), {-1, d});
  x = x + Dropout(Apply(b.proj, att), forward.dropout, site);
  Tensor m = Apply(b.fc2, braze::Gelu(Apply(b.fc, Norm(b.ln2, x))));
  return x + Dropout(m, forward.dropout, site);
}

Tensor GptLogits(const GptParams& p, const GptConfig& c, Tensor tokens, const GptForward& forward) {
  braze::Graph& g = *tokens.graph();
  braze::NameScope name_scope(g, "gpt");
  const int64_t batch = tokens.rank() == 2 ? tokens.shape()[0] : -1;
  const int64_t seq = tokens.rank() == 2 ? tokens.shape()[1] : -1;
  int64_t site = 0;
  // Positions 0..T-1 from the tokens' own (possibly symbolic) length.
  Tensor pos = braze::Gather(p.wpe, braze::Iota(tokens, 1));  // [T, d]
  Tensor x = braze::Gather(p.wte, tokens) + pos;              // [B, T, d]
  x = Dropout(braze::Reshape(x, {-1, c.d_model}), forward.dropout, &site);
  for (size_t i = 0; i < p.blocks.size(); ++i) {
    braze::NameScope block_scope(g, absl::StrCat("h", i));
    x = GptBlockForward(p.blocks[i], c, x, batch, seq, forward, &site);
  }
  return Apply(p.head, Norm(p.ln_f, x));
}

Tensor GptLoss(Tensor logits, Tensor targets, int64_t vocab) {
  braze::NameScope name_scope(*logits.graph(), "loss");
  Tensor labels = braze::OneHot(braze::Reshape(targets, {-1}), vocab);
  return braze::Mean(braze::SoftmaxCrossEntropyWithLogits(logits, labels));
}

Tensor MakeStepCounter(braze::Graph& g, const std::string& name) {
  return braze::Variable(g, HostTensor::Scalar<int32_t>(0), name);
}

absl::StatusOr<std::vector<Tensor>> GptTrainOps(const GptTrainConfig& train, Tensor loss,
                                                const std::vector<Tensor>& vars, Tensor step) {
  braze::NameScope name_scope(*loss.graph(), "train");
  // The step being taken, s = done + 1: its value feeds the schedule, and the Assign
  // below stores it, computed in the step's own kernel.
  Tensor s = step + 1;
  braze::Optimizer opt = braze::Optimizer::AdamW(train.peak_lr, train.beta1, train.beta2,
                                                 train.epsilon, train.weight_decay)
                             .WithDecayFilter(braze::RankAtLeast2);
  if (train.clip_norm > 0) opt = opt.WithGlobalClipNorm(train.clip_norm);
  // Dynamic loss scaling: builds something only under an f16 policy (braze/precision.h).
  opt = opt.WithLossScaling();
  if (train.total_steps > 0) {
    // A run shorter than the warmup stays in it (nanoGPT's get_lr tests the warmup
    // first): a cosine that would end before the warmup does is never reached.
    const int64_t total = std::max(train.total_steps, train.warmup_steps);
    BRAZE_ASSIGN_OR_RETURN(Tensor lr,
                           braze::WarmupCosineSchedule(s, train.peak_lr, train.warmup_steps, total,
                                                       train.peak_lr / 10));
    opt = opt.WithLearningRate(lr);
  }
  BRAZE_ASSIGN_OR_RETURN(std::vector<Tensor> ops, braze::Minimize(opt, loss, vars));
  ops.push_back(braze::Assign(step, s));
  return ops;
}

void SampleBatch(const std::vector<int32_t>& ids, int64_t context, std::mt19937_64& rng,
                 HostTensor* inputs, HostTensor* targets) {
  const int64_t batch = inputs->dim(0);
  std::uniform_int_distribution<int64_t> start(0, static_cast<int64_t>(ids.size()) - context - 1);
  int32_t* in = inputs->data<int32_t>();
  int32_t* out = targets->data<int32_t>();
  for (int64_t b = 0; b < batch; ++b) {
    const int64_t s = start(rng);
    std::copy_n(ids.begin() + s, context, in + b * context);
    std::copy_n(ids.begin() + s + 1, context, out + b * context);
  }
}

std::pair<HostTensor, HostTensor> ValidationWindows(const std::vector<int32_t>& ids,
                                                    int64_t context, int64_t max_windows) {
  const int64_t n =
      std::min<int64_t>(max_windows, (static_cast<int64_t>(ids.size()) - 1) / context);
  HostTensor inputs(DType::kI32, {n, context}), targets(DType::kI32, {n, context});
  for (int64_t w = 0; w < n; ++w) {
    std::copy_n(ids.begin() + w * context, context, inputs.data<int32_t>() + w * context);
    std::copy_n(ids.begin() + w * context + 1, context, targets.data<int32_t>() + w * context);
  }
  return {std::move(inputs), std::move(targets)};
}

}  // namespace braze_examples
