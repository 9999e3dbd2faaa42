// Peers: the workloads and train steps in libtorch (Debian's libtorch 1.13), as a C++
// user who picks PyTorch's C++ API instead of Braze writes them: eager ATen ops, into
// preallocated outputs where the API has an out= form, inference work under
// c10::InferenceMode, the train steps with autograd and torch::optim. Intra-op threads:
// torch::set_num_threads(the machine's cores), the count Braze's pool and the other
// peers use. libtorch's intra-op pool is OpenMP (libgomp), so main.cc's wait policy is
// its too, and its BLAS is the system's (OpenBLAS, on the core main.cc picks).
//
//   BM_Chain8_torch:            mul_out into y, then six in-place ops on y (a user who
//                               avoids temporaries; each op still a pass over memory).
//   BM_Softmax_torch:           torch::softmax_out along the rows.
//   BM_LayerNorm_torch:         torch::layer_norm with weight and bias.
//   BM_MatMulBiasRelu_torch:    torch::addmm_out(y, bias, a, b), then y.relu_().
//   BM_SoftmaxTrainStep_torch:  W, b (zeros) with autograd, addmm, cross_entropy,
//                               torch::optim::SGD(0.5), as train_models.h.
//   BM_MlpTrainStep_torch:      an nn::Module of three nn::Linear (weights set to
//                               train_models.h's, transposed to Linear's [out, in]),
//                               ReLU, cross_entropy, torch::optim::Adam(1e-3).
//
// torch's headers stay in this file (they take a minute to parse).
#include <torch/torch.h>

#include <algorithm>
#include <cstdlib>
#include <string>
#include <thread>

#include "bench_context.h"
#include "peers_common.h"
#include "train_models.h"

namespace braze::bench {
namespace {

// The intra-op threads: the machine's cores (idempotent; every benchmark calls it).
void SetUpTorch() {
  const int threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  if (torch::get_num_threads() != threads) torch::set_num_threads(threads);
}

// One line of `text`: newlines become " | ", runs of spaces one space.
std::string OneLine(const std::string& text) {
  std::string out;
  for (char c : text) {
    if (c == '\n') {
      while (!out.empty() && out.back() == ' ') out.pop_back();
      if (!out.empty()) out += " | ";
    } else if (!(c == ' ' && (out.empty() || out.back() == ' '))) {
      out += c;
    }
  }
  while (out.size() >= 3 && out.compare(out.size() - 3, 3, " | ") == 0) out.resize(out.size() - 3);
  return out;
}

BRAZE_BENCH_CONTEXT([] {
  SetUpTorch();
  AddContext("torch_version", TORCH_VERSION);
  AddContext("torch_threads", std::to_string(torch::get_num_threads()) + " intra-op (" +
                                  (at::hasOpenMP() ? "OpenMP" : "native pool") + ")");
  AddContext("torch_parallel_info", OneLine(at::get_parallel_info()));
  // ATen's vectorized kernels: AVX2 unless ATEN_CPU_CAPABILITY=avx512 (opt-in since 1.13).
  const std::string config = at::show_config();
  const std::string marker = "CPU capability usage: ";
  const size_t at_marker = config.find(marker);
  const char* env = std::getenv("ATEN_CPU_CAPABILITY");
  AddContext("torch_cpu_capability",
             (at_marker == std::string::npos
                  ? std::string("?")
                  : config.substr(at_marker + marker.size(),
                                  config.find('\n', at_marker) - at_marker - marker.size())) +
                 " (ATEN_CPU_CAPABILITY=" + (env ? env : "unset") + ")");
  AddContext("torch_config", OneLine(at::show_config()));
});

// A tensor over a HostTensor's f32 data (not copied: the HostTensor must outlive it).
torch::Tensor View(const HostTensor& t) {
  std::vector<int64_t> dims(t.shape().begin(), t.shape().end());
  return torch::from_blob(const_cast<float*>(t.data<float>()), dims, torch::kFloat32);
}

// Runs `run` once, checks y against want, then times `run`.
template <typename Run>
void CheckAndTime(benchmark::State& state, Run run, const torch::Tensor& y, const HostTensor& want,
                  double atol, double rtol) {
  try {
    run();
  } catch (const c10::Error& e) {
    state.SkipWithError(e.what_without_backtrace());
    return;
  }
  if (!CheckClose(state, y.data_ptr<float>(), want, atol, rtol)) return;
  for (auto _ : state) {
    run();
    benchmark::ClobberMemory();
  }
}

// ---- Chain8 ----
void BM_Chain8_torch(benchmark::State& state) {
  SetUpTorch();
  c10::InferenceMode guard;
  const HostTensor xs = Chain8Input();
  const torch::Tensor x = View(xs);
  torch::Tensor y = torch::empty({kChainN}, torch::kFloat32);
  auto run = [&] {
    torch::mul_out(y, x, 1.5);
    y.add_(0.25).mul_(x).sub_(0.125).clamp_(-2.0, 2.0).mul_(0.5).add_(1.0);
  };
  CheckAndTime(state, run, y, Chain8Reference(), 1e-6, 1e-5);
  SetRate(state, "GB/s", ReadWriteGB(kChainN));
}
BENCHMARK(BM_Chain8_torch)->Apply([](auto* b) { PeerDefaults(b, 0.5); });

// ---- Softmax and LayerNorm ----
void BM_Softmax_torch(benchmark::State& state) {
  SetUpTorch();
  c10::InferenceMode guard;
  const int64_t rows = state.range(0);
  const HostTensor xs = RowInput(rows);
  const torch::Tensor x = View(xs);
  torch::Tensor y = torch::empty({rows, kRowCols}, torch::kFloat32);
  CheckAndTime(
      state, [&] { torch::softmax_out(y, x, 1); }, y, SoftmaxReference(rows), 1e-5, 1e-4);
  SetRate(state, "GB/s", ReadWriteGB(rows * kRowCols));
}
BENCHMARK(BM_Softmax_torch)->Apply([](auto* b) { PeerDefaults(RowSizes(b), 0.5); });

void BM_LayerNorm_torch(benchmark::State& state) {
  SetUpTorch();
  c10::InferenceMode guard;
  const int64_t rows = state.range(0);
  const HostTensor xs = RowInput(rows), gs = LayerNormGamma(), bs = LayerNormBeta();
  const torch::Tensor x = View(xs), gamma = View(gs), beta = View(bs);
  // layer_norm has no out= form: its result is a fresh tensor each call (as for its users).
  torch::Tensor y;
  auto run = [&] { y = torch::layer_norm(x, {kRowCols}, gamma, beta, kLayerNormEpsilon); };
  try {
    run();
  } catch (const c10::Error& e) {
    state.SkipWithError(e.what_without_backtrace());
    return;
  }
  if (!CheckClose(state, y.data_ptr<float>(), LayerNormReference(rows), 1e-5, 1e-4)) return;
  for (auto _ : state) {
    run();
    benchmark::DoNotOptimize(y.data_ptr<float>());
  }
  SetRate(state, "GB/s", ReadWriteGB(rows * kRowCols));
}
BENCHMARK(BM_LayerNorm_torch)->Apply([](auto* b) { PeerDefaults(RowSizes(b), 0.5); });

// ---- MatMul + bias + ReLU ----
void BM_MatMulBiasRelu_torch(benchmark::State& state) {
  SetUpTorch();
  c10::InferenceMode guard;
  const HostTensor as = MatMulA(), bs = MatMulB(), biases = MatMulBias();
  const torch::Tensor a = View(as), b = View(bs), bias = View(biases);
  torch::Tensor y = torch::empty({kMM, kMM}, torch::kFloat32);
  CheckAndTime(
      state, [&] { torch::addmm_out(y, bias, a, b).relu_(); }, y, MatMulBiasReluReference(), 1e-5,
      1e-4);
  SetRate(state, "GFLOP/s", 2.0 * kMM * kMM * kMM / 1e9);
}
BENCHMARK(BM_MatMulBiasRelu_torch)->Apply([](auto* b) { PeerDefaults(b, 1.0); });

// ---- Train steps ----
// The batch: images and int64 labels (cross_entropy's class indices).
struct Batch {
  HostTensor images;
  torch::Tensor x, labels;
  explicit Batch(int64_t batch) : images(TrainImages(batch)) {
    x = View(images);
    labels = torch::tensor(TrainLabels(batch).ToVector<int>(), torch::kInt64);
  }
};

// Checks a step's losses against Braze's reference, then times it.
template <typename Step>
void RunTrainStep(benchmark::State& state, Step step, const std::vector<float>& want) {
  try {
    if (!CheckTrainLosses(state, step, want, 1e-3)) return;
    for (auto _ : state) benchmark::DoNotOptimize(step());
  } catch (const c10::Error& e) {
    state.SkipWithError(e.what_without_backtrace());
  }
}

void BM_SoftmaxTrainStep_torch(benchmark::State& state) {
  SetUpTorch();
  const int64_t batch = state.range(0);
  Batch data(batch);
  torch::Tensor w = torch::zeros({kPixels, kClasses}, torch::requires_grad());
  torch::Tensor b = torch::zeros({kClasses}, torch::requires_grad());
  torch::optim::SGD optimizer({w, b}, torch::optim::SGDOptions(kSoftmaxLr));
  auto step = [&] {
    optimizer.zero_grad();
    torch::Tensor loss =
        torch::nn::functional::cross_entropy(torch::addmm(b, data.x, w), data.labels);
    loss.backward();
    optimizer.step();
    return loss.item<float>();
  };
  RunTrainStep(state, step, SoftmaxTrainReferenceLosses(batch));
}
BENCHMARK(BM_SoftmaxTrainStep_torch)->Apply([](auto* b) {
  PeerDefaults(b->ArgName("batch")->Arg(128)->Arg(1024), 1.0);
});

struct MlpImpl : torch::nn::Module {
  torch::nn::Linear fc1{nullptr}, fc2{nullptr}, fc3{nullptr};
  MlpImpl() {
    fc1 = register_module("fc1", torch::nn::Linear(kPixels, kHidden));
    fc2 = register_module("fc2", torch::nn::Linear(kHidden, kHidden));
    fc3 = register_module("fc3", torch::nn::Linear(kHidden, kClasses));
    torch::NoGradGuard no_grad;
    torch::nn::Linear layers[] = {fc1, fc2, fc3};
    for (int i = 0; i < 3; ++i) {
      const HostTensor w = MlpInitialWeight(i);  // [in, out]
      layers[i]->weight.copy_(View(w).t());
      layers[i]->bias.zero_();
    }
  }
  torch::Tensor forward(const torch::Tensor& x) {
    return fc3(torch::relu(fc2(torch::relu(fc1(x)))));
  }
};
TORCH_MODULE(Mlp);

void BM_MlpTrainStep_torch(benchmark::State& state) {
  SetUpTorch();
  const int64_t batch = state.range(0);
  Batch data(batch);
  Mlp model;
  // torch's Adam puts epsilon after the bias correction of sqrt(v), Braze's (TF's)
  // before: the same step up to epsilon's scale (1e-8), far below the losses' tolerance.
  torch::optim::Adam optimizer(model->parameters(), torch::optim::AdamOptions(kMlpLr));
  auto step = [&] {
    optimizer.zero_grad();
    torch::Tensor loss = torch::nn::functional::cross_entropy(model->forward(data.x), data.labels);
    loss.backward();
    optimizer.step();
    return loss.item<float>();
  };
  RunTrainStep(state, step, MlpTrainReferenceLosses(batch));
  const double flops =
      2.0 * batch * (2 * kPixels * kHidden + 3 * kHidden * kHidden + 3 * kHidden * kClasses);
  SetRate(state, "GFLOP/s", flops / 1e9);
}
BENCHMARK(BM_MlpTrainStep_torch)->Apply([](auto* b) {
  PeerDefaults(b->ArgName("batch")->Arg(128), 2.0);
});

}  // namespace
}  // namespace braze::bench
