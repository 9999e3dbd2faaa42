// The char_lm model and training recipe in libtorch (Debian's libtorch 1.13): the peer of
// examples/char_lm (issue 36), shared by bench/char_lm_torch.cc (the whole training run)
// and bench/peers_gpt.cc (BM_TransformerBlockStep_torch, BM_CharLmStep_torch). It follows
// the contract the Braze example states:
//   GPT-2 / nanoGPT pre-LayerNorm: x = wte[tokens] + wpe[0..T-1], Dropout; per block
//   x += Dropout(Proj(Attention(LN1(x)))), x += Dropout(MLP(LN2(x))); attention: one
//   Linear(d, 3d) for q, k, v, heads [B, H, T, d / H], causal softmax(q k^T / sqrt(d / H))
//   with dropout on the weights, heads merged, Proj = Linear(d, d); MLP Linear(d, 4d),
//   GELU (tanh approximation), Linear(4d, d); final LayerNorm (eps 1e-5); lm head
//   Linear(d, V) without bias, not tied.
//   Init: Linear weights and embeddings N(0, 0.02); the residual projections (Proj and
//   the MLP's second Linear) N(0, 0.02 / sqrt(2 n_layer)); biases 0; LayerNorm 1, 0.
//   AdamW (torch.optim.AdamW): betas (0.9, 0.99), eps 1e-8, weight decay 0.1 on the
//   parameters of rank >= 2, 0 on the others; clip_grad_norm_(1.0) over all
//   parameters; the learning rate of step s (from 1): peak s / W for s <= W, cosine
//   from peak to min_lr until N, min_lr after (braze/optimizers.h WarmupCosineSchedule).
// Written as a C++ user of PyTorch would: torch::nn modules, eager ATen ops, autograd.
// torch 1.13 has no scaled_dot_product_attention: the attention is the matmul, mask,
// softmax, dropout, matmul nanoGPT's slow path runs.
#ifndef BRAZE_BENCH_PEERS_TORCH_GPT_H_
#define BRAZE_BENCH_PEERS_TORCH_GPT_H_

#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <vector>

namespace braze::bench::gpt {

struct Config {
  int64_t vocab = 0;
  int64_t n_layer = 4;
  int64_t n_head = 4;
  int64_t d_model = 256;
  int64_t context = 128;
  double dropout = 0.1;
  double init_std = 0.02;
};

struct Recipe {
  double peak_lr = 1e-3;
  double min_lr = 1e-4;  // peak / 10
  int64_t warmup_steps = 100;
  int64_t total_steps = 1000;
  double beta1 = 0.9, beta2 = 0.99, eps = 1e-8, weight_decay = 0.1;
  double clip_norm = 1.0;
};

// The learning rate of step s (counting from 1), as WarmupCosineSchedule computes it.
inline double LearningRate(const Recipe& r, int64_t s) {
  const double w = static_cast<double>(r.warmup_steps), n = static_cast<double>(r.total_steps);
  if (s <= r.warmup_steps) return r.peak_lr * static_cast<double>(s) / w;
  if (s > r.total_steps) return r.min_lr;
  const double pi = std::acos(-1.0);
  const double coeff = 0.5 * (1.0 + std::cos((static_cast<double>(s) - w) * (pi / (n - w))));
  return r.min_lr + coeff * (r.peak_lr - r.min_lr);
}

class CausalSelfAttentionImpl : public torch::nn::Module {
 public:
  explicit CausalSelfAttentionImpl(const Config& c)
      : n_head_(c.n_head),
        dropout_(c.dropout),
        qkv_(register_module("qkv", torch::nn::Linear(c.d_model, 3 * c.d_model))),
        proj_(register_module("proj", torch::nn::Linear(c.d_model, c.d_model))),
        mask_(register_buffer("mask", torch::ones({c.context, c.context}, torch::kBool).tril())) {}

  torch::Tensor forward(const torch::Tensor& x) {
    const int64_t b = x.size(0), t = x.size(1), d = x.size(2), hd = d / n_head_;
    std::vector<torch::Tensor> qkv = qkv_->forward(x).split(d, /*dim=*/2);
    auto heads = [&](const torch::Tensor& y) {
      return y.view({b, t, n_head_, hd}).transpose(1, 2);
    };
    torch::Tensor q = heads(qkv[0]), k = heads(qkv[1]), v = heads(qkv[2]);
    torch::Tensor att = torch::matmul(q, k.transpose(-2, -1)) * (1.0 / std::sqrt(double(hd)));
    att = att.masked_fill(mask_.slice(0, 0, t).slice(1, 0, t).logical_not(),
                          -std::numeric_limits<float>::infinity());
    att = torch::softmax(att, -1);
    att = torch::dropout(att, dropout_, is_training());
    torch::Tensor y = torch::matmul(att, v).transpose(1, 2).contiguous().view({b, t, d});
    return proj_->forward(y);
  }
  torch::nn::Linear& proj() { return proj_; }

 private:
  int64_t n_head_;
  double dropout_;
  torch::nn::Linear qkv_, proj_;
  torch::Tensor mask_;
};
TORCH_MODULE(CausalSelfAttention);

class BlockImpl : public torch::nn::Module {
 public:
  explicit BlockImpl(const Config& c)
      : dropout_(c.dropout),
        ln1_(register_module("ln1", torch::nn::LayerNorm(LnOptions(c)))),
        attn_(register_module("attn", CausalSelfAttention(c))),
        ln2_(register_module("ln2", torch::nn::LayerNorm(LnOptions(c)))),
        fc_(register_module("fc", torch::nn::Linear(c.d_model, 4 * c.d_model))),
        fc_proj_(register_module("fc_proj", torch::nn::Linear(4 * c.d_model, c.d_model))) {}

  torch::Tensor forward(torch::Tensor x) {
    x = x + torch::dropout(attn_->forward(ln1_->forward(x)), dropout_, is_training());
    torch::Tensor h =
        torch::nn::functional::gelu(fc_->forward(ln2_->forward(x)),
                                    torch::nn::functional::GELUFuncOptions().approximate("tanh"));
    return x + torch::dropout(fc_proj_->forward(h), dropout_, is_training());
  }
  // The two residual projections (the scaled init).
  std::vector<torch::Tensor> ResidualWeights() { return {attn_->proj()->weight, fc_proj_->weight}; }

 private:
  static torch::nn::LayerNormOptions LnOptions(const Config& c) {
    return torch::nn::LayerNormOptions({c.d_model}).eps(1e-5);
  }
  double dropout_;
  torch::nn::LayerNorm ln1_;
  CausalSelfAttention attn_;
  torch::nn::LayerNorm ln2_;
  torch::nn::Linear fc_, fc_proj_;
};
TORCH_MODULE(Block);

class GptImpl : public torch::nn::Module {
 public:
  explicit GptImpl(const Config& c)
      : config_(c),
        wte_(register_module("wte", torch::nn::Embedding(c.vocab, c.d_model))),
        wpe_(register_module("wpe", torch::nn::Embedding(c.context, c.d_model))),
        ln_f_(register_module(
            "ln_f", torch::nn::LayerNorm(torch::nn::LayerNormOptions({c.d_model}).eps(1e-5)))),
        head_(register_module(
            "head", torch::nn::Linear(torch::nn::LinearOptions(c.d_model, c.vocab).bias(false)))) {
    for (int64_t i = 0; i < c.n_layer; ++i) {
      blocks_.push_back(register_module("block" + std::to_string(i), Block(c)));
    }
  }

  // tokens: [B, T] int64 -> logits [B, T, V].
  torch::Tensor forward(const torch::Tensor& tokens) {
    const int64_t t = tokens.size(1);
    torch::Tensor x = wte_->forward(tokens) + wpe_->forward(torch::arange(t, torch::kInt64));
    x = torch::dropout(x, config_.dropout, is_training());
    for (Block& block : blocks_) x = block->forward(x);
    return head_->forward(ln_f_->forward(x));
  }

  // The contract's init (normal_ draws from torch's default generator: torch::manual_seed).
  void Initialize() {
    torch::NoGradGuard no_grad;
    for (auto& m : modules(/*include_self=*/false)) {
      if (auto* linear = m->as<torch::nn::Linear>()) {
        linear->weight.normal_(0, config_.init_std);
        if (linear->bias.defined()) linear->bias.zero_();
      } else if (auto* emb = m->as<torch::nn::Embedding>()) {
        emb->weight.normal_(0, config_.init_std);
      } else if (auto* ln = m->as<torch::nn::LayerNorm>()) {
        ln->weight.fill_(1);
        ln->bias.zero_();
      }
    }
    const double residual_std = config_.init_std / std::sqrt(2.0 * config_.n_layer);
    for (Block& block : blocks_) {
      for (torch::Tensor& w : block->ResidualWeights()) w.normal_(0, residual_std);
    }
  }

  const Config& config() const { return config_; }

 private:
  Config config_;
  torch::nn::Embedding wte_, wpe_;
  std::vector<Block> blocks_;
  torch::nn::LayerNorm ln_f_;
  torch::nn::Linear head_;
};
TORCH_MODULE(Gpt);

// AdamW with two groups: weight decay on the parameters of rank >= 2, none on the rest.
inline std::unique_ptr<torch::optim::AdamW> MakeAdamW(const std::vector<torch::Tensor>& params,
                                                      const Recipe& r) {
  std::vector<torch::Tensor> decay, no_decay;
  for (const torch::Tensor& p : params) (p.dim() >= 2 ? decay : no_decay).push_back(p);
  auto options = [&](double wd) {
    return std::make_unique<torch::optim::AdamWOptions>(torch::optim::AdamWOptions(r.peak_lr)
                                                            .betas({r.beta1, r.beta2})
                                                            .eps(r.eps)
                                                            .weight_decay(wd));
  };
  std::vector<torch::optim::OptimizerParamGroup> groups;
  groups.emplace_back(decay, options(r.weight_decay));
  groups.emplace_back(no_decay, options(0.0));
  return std::make_unique<torch::optim::AdamW>(std::move(groups),
                                               torch::optim::AdamWOptions(r.peak_lr));
}

inline void SetLearningRate(torch::optim::Optimizer& opt, double lr) {
  for (auto& group : opt.param_groups()) {
    static_cast<torch::optim::AdamWOptions&>(group.options()).lr(lr);
  }
}

// One training step s (from 1) on a [B, T + 1] window batch: returns the loss.
inline float TrainStep(Gpt& model, torch::optim::AdamW& opt, const Recipe& r, int64_t s,
                       const torch::Tensor& inputs, const torch::Tensor& targets) {
  opt.zero_grad();
  torch::Tensor logits = model->forward(inputs);
  torch::Tensor loss = torch::nn::functional::cross_entropy(logits.view({-1, logits.size(-1)}),
                                                            targets.reshape({-1}));
  loss.backward();
  torch::nn::utils::clip_grad_norm_(model->parameters(), r.clip_norm);
  SetLearningRate(opt, LearningRate(r, s));
  opt.step();
  return loss.item<float>();
}

// A batch of `batch` windows of T + 1 ids at uniform starts in [0, size - T - 1] (the
// example's SampleBatch: one draw per row, in order): inputs ids [0, T), targets [1, T].
inline void SampleBatch(const std::vector<int32_t>& ids, int64_t context, std::mt19937_64& rng,
                        torch::Tensor* inputs, torch::Tensor* targets) {
  const int64_t batch = inputs->size(0);
  std::uniform_int_distribution<int64_t> start(0, static_cast<int64_t>(ids.size()) - context - 1);
  int64_t* in = inputs->data_ptr<int64_t>();
  int64_t* out = targets->data_ptr<int64_t>();
  for (int64_t b = 0; b < batch; ++b) {
    const int64_t s = start(rng);
    for (int64_t t = 0; t < context; ++t) {
      in[b * context + t] = ids[s + t];
      out[b * context + t] = ids[s + t + 1];
    }
  }
}

// Mean cross entropy (nats) over the validation windows: window w holds ids [w T, w T + T],
// as many whole ones as fit, at most `max_windows`; dropout off; `chunk` windows per
// forward pass.
inline double Evaluate(Gpt& model, const std::vector<int32_t>& ids, int64_t max_windows,
                       int64_t chunk = 16) {
  const int64_t t = model->config().context;
  const int64_t n = std::min<int64_t>(max_windows, (static_cast<int64_t>(ids.size()) - 1) / t);
  torch::NoGradGuard no_grad;
  model->eval();
  double total = 0;
  for (int64_t w0 = 0; w0 < n; w0 += chunk) {
    const int64_t rows = std::min(chunk, n - w0);
    torch::Tensor in = torch::empty({rows, t}, torch::kInt64);
    torch::Tensor out = torch::empty({rows, t}, torch::kInt64);
    int64_t* pin = in.data_ptr<int64_t>();
    int64_t* pout = out.data_ptr<int64_t>();
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t j = 0; j < t; ++j) {
        pin[r * t + j] = ids[(w0 + r) * t + j];
        pout[r * t + j] = ids[(w0 + r) * t + j + 1];
      }
    }
    torch::Tensor logits = model->forward(in);
    total += torch::nn::functional::cross_entropy(
                 logits.view({-1, logits.size(-1)}), out.view({-1}),
                 torch::nn::functional::CrossEntropyFuncOptions().reduction(torch::kSum))
                 .item<double>();
  }
  model->train();
  return n > 0 ? total / static_cast<double>(n * t) : NAN;
}

}  // namespace braze::bench::gpt

#endif  // BRAZE_BENCH_PEERS_TORCH_GPT_H_
