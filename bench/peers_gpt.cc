// Peers: issue 36's transformer training steps in libtorch (the model of
// peers_torch_gpt.h, the char_lm contract), beside Braze's BM_TransformerBlockStep and
// BM_CharLmStep (bench/peer_labels.py pairs BM_<Workload>_torch with BM_<Workload>).
//
//   BM_TransformerBlockStep_torch: one pre-LayerNorm block (width 256, 4 heads, T 128,
//     batch 16, MLP 1024, GELU tanh, dropout 0.1 on: train mode) on a fixed N(0, 1)
//     input; loss = mean square of the block's output against a fixed N(0, 1) target
//     (no lm head); autograd; AdamW (lr 1e-3 fixed, betas 0.9 / 0.99, eps 1e-8, weight
//     decay 0.1 on the rank >= 2 parameters, 0 on biases and LayerNorm); no clipping.
//   BM_CharLmStep_torch: the whole char_lm step at the defaults (4 layers, batch 16, the
//     fortunes vocabulary): forward, cross entropy, backward, clip_grad_norm_(1.0), the
//     warmup + cosine learning rate of the step (over 1000 steps), AdamW. One fixed batch
//     (sampled by std::mt19937_64(1) from the train ids), so the time is the step's alone.
// Threads: torch::set_num_threads(the machine's cores), as peers_torch.cc. A step's
// first loss is checked (finite; char_lm's near ln V at the init) before timing.
#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <thread>

#include "benchmark/benchmark.h"
#include "braze/data.h"
#include "peers_common.h"
#include "peers_torch_gpt.h"

namespace braze::bench {
namespace {

void SetUpTorchThreads() {
  const int threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  if (torch::get_num_threads() != threads) torch::set_num_threads(threads);
}

// Runs `step` once (checked by `first_ok`), then times it. Returns false if skipped.
template <typename Step, typename Check>
void CheckAndTimeSteps(benchmark::State& state, Step step, Check first_ok, int64_t tokens) {
  try {
    const float first = step();
    std::string why;
    if (!first_ok(first, &why)) {
      state.SkipWithError(why.c_str());
      return;
    }
    for (auto _ : state) {
      benchmark::DoNotOptimize(step());
    }
  } catch (const c10::Error& e) {
    state.SkipWithError(e.what_without_backtrace());
    return;
  }
  state.counters["tokens/s"] = benchmark::Counter(static_cast<double>(tokens),
                                                  benchmark::Counter::kIsIterationInvariantRate);
}

void BM_TransformerBlockStep_torch(benchmark::State& state) {
  SetUpTorchThreads();
  gpt::Config config;  // width 256, 4 heads, T 128, dropout 0.1
  const int64_t batch = 16, t = config.context, d = config.d_model;
  torch::manual_seed(1);
  gpt::Block block(config);
  // The contract's init for one block (Linear weights N(0, 0.02), residual projections
  // scaled as in a 4-layer model, biases 0, LayerNorm 1 and 0).
  {
    torch::NoGradGuard no_grad;
    for (auto& m : block->modules(/*include_self=*/false)) {
      if (auto* linear = m->as<torch::nn::Linear>()) {
        linear->weight.normal_(0, config.init_std);
        linear->bias.zero_();
      }
    }
    for (torch::Tensor& w : block->ResidualWeights()) {
      w.normal_(0, config.init_std / std::sqrt(2.0 * config.n_layer));
    }
  }
  block->train();
  const torch::Tensor x = torch::randn({batch, t, d});
  const torch::Tensor target = torch::randn({batch, t, d});
  gpt::Recipe recipe;
  std::unique_ptr<torch::optim::AdamW> opt = gpt::MakeAdamW(block->parameters(), recipe);
  auto step = [&] {
    opt->zero_grad();
    torch::Tensor loss = torch::mse_loss(block->forward(x), target);
    loss.backward();
    opt->step();
    return loss.item<float>();
  };
  // The block adds ~N(0, 1)-sized updates to x: the loss starts near mean((x - y)^2) = 2.
  auto first_ok = [](float loss, std::string* why) {
    if (std::isfinite(loss) && loss > 1 && loss < 4) return true;
    *why = "first loss " + std::to_string(loss) + " is not near 2";
    return false;
  };
  CheckAndTimeSteps(state, step, first_ok, batch * t);
}
BENCHMARK(BM_TransformerBlockStep_torch)->Apply([](auto* b) { PeerDefaults(b, 2.0); });

void BM_CharLmStep_torch(benchmark::State& state) {
  SetUpTorchThreads();
  absl::StatusOr<TextCorpus> corpus = LoadFortunes();
  if (!corpus.ok()) {
    state.SkipWithError(std::string(corpus.status().message()).c_str());
    return;
  }
  gpt::Config config;
  config.vocab = static_cast<int64_t>(corpus->vocab.size());
  const int64_t batch = 16, t = config.context;
  torch::manual_seed(1);
  gpt::Gpt model(config);
  model->Initialize();
  model->train();
  gpt::Recipe recipe;
  std::unique_ptr<torch::optim::AdamW> opt = gpt::MakeAdamW(model->parameters(), recipe);
  std::mt19937_64 rng(1);
  torch::Tensor inputs = torch::empty({batch, t}, torch::kInt64);
  torch::Tensor targets = torch::empty({batch, t}, torch::kInt64);
  gpt::SampleBatch(corpus->train, t, rng, &inputs, &targets);
  int64_t s = 0;
  auto step = [&] { return gpt::TrainStep(model, *opt, recipe, ++s, inputs, targets); };
  // At the init the logits are ~0: the loss is near ln V.
  const double ln_v = std::log(static_cast<double>(config.vocab));
  auto first_ok = [ln_v](float loss, std::string* why) {
    if (std::abs(loss - ln_v) < 0.1) return true;
    *why = "first loss " + std::to_string(loss) + " is not near ln V = " + std::to_string(ln_v);
    return false;
  };
  CheckAndTimeSteps(state, step, first_ok, batch * t);
}
BENCHMARK(BM_CharLmStep_torch)->Apply([](auto* b) { PeerDefaults(b, 2.0); });

}  // namespace
}  // namespace braze::bench
