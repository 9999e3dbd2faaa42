// Peer: the GRU training step of gru_models.h in libtorch, beside Braze's BM_GruStep
// (Scan) and BM_GruUnrolledStep (gru_bench.cc):
//
//   BM_GruStep_torch: torch::nn::GRU (input 28, hidden 128, batch_first) over the
//     images' 28 rows, a torch::nn::Linear head on the last state, cross_entropy,
//     autograd, torch::optim::Adam(kGruLr). Its weights are Braze's initial values
//     (GruInitialValues: weight_ih = w_i^T, weight_hh = w_h^T, the biases as they are;
//     the head's weight transposed, its bias zero), so its first losses must equal
//     Braze's reference losses (relative tolerance 1e-3) before it is timed.
// Threads: torch::set_num_threads(the machine's cores), as peers_torch.cc.
#include <torch/torch.h>

#include <algorithm>
#include <thread>
#include <vector>

#include "benchmark/benchmark.h"
#include "gru_models.h"
#include "peers_common.h"

namespace braze::bench {
namespace {

// A copy of an f32 HostTensor (torch owns it; HostTensors are not kept alive here).
torch::Tensor ToTorch(const HostTensor& t) {
  std::vector<int64_t> shape(t.shape().begin(), t.shape().end());
  return torch::from_blob(const_cast<float*>(t.data<float>()), shape, torch::kFloat32).clone();
}

struct GruModelImpl : torch::nn::Module {
  torch::nn::GRU gru{nullptr};
  torch::nn::Linear head{nullptr};
  GruModelImpl() {
    gru = register_module(
        "gru", torch::nn::GRU(torch::nn::GRUOptions(kGruRow, kGruHidden).batch_first(true)));
    head = register_module("head", torch::nn::Linear(kGruHidden, kClasses));
    torch::NoGradGuard no_grad;
    const braze_examples::GruInit init = GruInitialValues();
    gru->named_parameters()["weight_ih_l0"].copy_(ToTorch(init.w_i).t());
    gru->named_parameters()["weight_hh_l0"].copy_(ToTorch(init.w_h).t());
    gru->named_parameters()["bias_ih_l0"].copy_(ToTorch(init.b_i));
    gru->named_parameters()["bias_hh_l0"].copy_(ToTorch(init.b_h));
    head->weight.copy_(ToTorch(GruHeadInitialWeight()).t());
    head->bias.zero_();
  }
  // x [B, 784]: 28 rows of 28 pixels.
  torch::Tensor forward(const torch::Tensor& x) {
    auto [out, h_n] = gru->forward(x.view({x.size(0), kGruSteps, kGruRow}));
    return head(h_n[0]);
  }
};
TORCH_MODULE(GruModel);

void BM_GruStep_torch(benchmark::State& state) {
  const int threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  if (torch::get_num_threads() != threads) torch::set_num_threads(threads);
  const torch::Tensor x = ToTorch(TrainImages(kGruBatch));
  const torch::Tensor labels = torch::tensor(TrainLabels(kGruBatch).ToVector<int>(), torch::kInt64);
  GruModel model;
  // torch's Adam puts epsilon after the bias correction of sqrt(v), Braze's (TF's)
  // before: the same step up to epsilon's scale, far below the losses' tolerance.
  torch::optim::Adam optimizer(model->parameters(), torch::optim::AdamOptions(kGruLr));
  auto step = [&] {
    optimizer.zero_grad();
    torch::Tensor loss = torch::nn::functional::cross_entropy(model->forward(x), labels);
    loss.backward();
    optimizer.step();
    return loss.item<float>();
  };
  try {
    if (!CheckTrainLosses(state, step, GruStepReferenceLosses(), 1e-3)) return;
    for (auto _ : state) benchmark::DoNotOptimize(step());
  } catch (const c10::Error& e) {
    state.SkipWithError(e.what_without_backtrace());
    return;
  }
  SetRate(state, "GFLOP/s", GruStepGflop());
}
BENCHMARK(BM_GruStep_torch)->Apply([](auto* b) { PeerDefaults(b, 2.0); });

}  // namespace
}  // namespace braze::bench
