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
//   BM_ConvBiasRelu_torch:      torch::conv2d with the bias, then relu_(), the input the
//                               NHWC buffer viewed as channels-last NCHW (no copy), the
//                               filter channels-last, as a user after speed writes it.
//   BM_ResNetBlock_torch:       nn::Conv2d / nn::BatchNorm2d modules in eval mode,
//                               channels-last, relu_ and add_ in place.
//   BM_ResNetBlockStep_torch:   the same modules in train mode, mse_loss, autograd,
//                               torch::optim::SGD(0.1).
//   BM_CnnStep_torch:           the Fashion-MNIST CNN as nn modules, channels-last,
//                               cross_entropy, torch::optim::Adam(1e-3).
//   BM_Dropout_torch:           torch::dropout(x, 0.1, train) (a fresh result each call:
//                               there is no out= form).
//   BM_RandomNormal_torch:      y.normal_() into a preallocated y.
//   *_torch_nchw:               the same in torch's default contiguous NCHW (the input
//                               converted once, untimed), to show which format is faster.
//   BM_Attention_torch:         causal attention as libtorch 1.13 users write it on the
//                               CPU (it has no fused CPU attention): q.matmul(k^T) *
//                               scale, masked_fill(-inf) above the diagonal, softmax,
//                               matmul with v; with backward, autograd's backward of it
//                               from dO (attention_common.h's workload).
//   BatchNorm2d runs with Braze's epsilon (1e-3) and momentum (torch's is 1 - it: 0.01
//   for the block, Keras's 0.99; 0.1 for the CNN, examples/cnn.cc's 0.9).
//
// torch's headers stay in this file (they take a minute to parse).
#include <ATen/autocast_mode.h>
#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <string>
#include <thread>

#include "attention_common.h"
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
void RunTrainStep(benchmark::State& state, Step step, const std::vector<float>& want,
                  double rtol = 1e-3) {
  try {
    if (!CheckTrainLosses(state, step, want, rtol)) return;
    const double cpu_before = ProcessCpuSeconds();
    for (auto _ : state) benchmark::DoNotOptimize(step());
    SetCpuPerStep(state, cpu_before);
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

// The same step under libtorch's CPU autocast to bf16 (policy, issue 38; Braze's is
// BM_MlpTrainStepPrecision in precision_bench.cc): what torch.autocast("cpu",
// dtype=torch.bfloat16) does around the forward pass and the loss, written with
// libtorch 1.13's C++ calls (ATen/autocast_mode.h); the backward pass and the f32 Adam
// update outside it. The losses to bf16's tolerance, as Braze's bf16 step.
void BM_MlpTrainStep_torch_bf16autocast(benchmark::State& state) {
  SetUpTorch();
  const int64_t batch = state.range(0);
  Batch data(batch);
  Mlp model;
  torch::optim::Adam optimizer(model->parameters(), torch::optim::AdamOptions(kMlpLr));
  auto step = [&] {
    optimizer.zero_grad();
    at::autocast::set_cpu_enabled(true);
    at::autocast::set_autocast_cpu_dtype(at::kBFloat16);
    at::autocast::increment_nesting();
    torch::Tensor loss = torch::nn::functional::cross_entropy(model->forward(data.x), data.labels);
    if (at::autocast::decrement_nesting() == 0) at::autocast::clear_cache();
    at::autocast::set_cpu_enabled(false);
    loss.backward();
    optimizer.step();
    return loss.item<float>();
  };
  RunTrainStep(state, step, MlpTrainReferenceLosses(batch), 3e-2);
  const double flops =
      2.0 * batch * (2 * kPixels * kHidden + 3 * kHidden * kHidden + 3 * kHidden * kClasses);
  SetRate(state, "GFLOP/s", flops / 1e9);
}
BENCHMARK(BM_MlpTrainStep_torch_bf16autocast)->Apply([](auto* b) {
  PeerDefaults(b->ArgName("batch")->Arg(128), 2.0);
});

// ---- Convolutions ----
// An NHWC HostTensor as torch's NCHW: channels-last strides over the same data (no
// copy), or a contiguous NCHW copy.
torch::Tensor FromNhwc(const HostTensor& t, bool channels_last) {
  torch::Tensor v = View(t).permute({0, 3, 1, 2});
  return channels_last ? v : v.contiguous();
}
torch::MemoryFormat Format(bool channels_last) {
  return channels_last ? torch::MemoryFormat::ChannelsLast : torch::MemoryFormat::Contiguous;
}
// An HWIO filter as torch's [O, I, KH, KW].
torch::Tensor FromHwio(const HostTensor& w, bool channels_last) {
  return View(w).permute({3, 2, 0, 1}).contiguous(Format(channels_last));
}
// y (NCHW, either memory format) as an NHWC copy, to compare with Braze's.
torch::Tensor ToNhwc(const torch::Tensor& y) { return y.permute({0, 2, 3, 1}).contiguous(); }

template <typename Run>
void CheckForwardAndTime(benchmark::State& state, Run run, torch::Tensor& y,
                         const HostTensor& want) {
  try {
    run();
    const torch::Tensor nhwc = ToNhwc(y);
    if (!CheckClose(state, nhwc.data_ptr<float>(), want, 1e-4, 1e-3)) return;
    for (auto _ : state) {
      run();
      benchmark::DoNotOptimize(y.data_ptr<float>());
    }
  } catch (const c10::Error& e) {
    state.SkipWithError(e.what_without_backtrace());
  }
}

void ConvBiasRelu(benchmark::State& state, bool channels_last) {
  SetUpTorch();
  c10::InferenceMode guard;
  const HostTensor xs = BlockInput(), ws = BlockFilter(0), bs = ConvBias();
  const torch::Tensor x = FromNhwc(xs, channels_last), w = FromHwio(ws, channels_last);
  const torch::Tensor b = View(bs);
  torch::Tensor y;
  auto run = [&] { y = torch::conv2d(x, w, b, /*stride=*/1, /*padding=*/1).relu_(); };
  CheckForwardAndTime(state, run, y, ConvBiasReluReference());
  SetRate(state, "GFLOP/s", Conv3x3Gflop(kBlockBatch, kBlockSide, kBlockChannels, kBlockChannels));
}
void BM_ConvBiasRelu_torch(benchmark::State& state) { ConvBiasRelu(state, true); }
void BM_ConvBiasRelu_torch_nchw(benchmark::State& state) { ConvBiasRelu(state, false); }
BENCHMARK(BM_ConvBiasRelu_torch)->Apply([](auto* b) { PeerDefaults(b, 0.3); });
BENCHMARK(BM_ConvBiasRelu_torch_nchw)->Apply([](auto* b) { PeerDefaults(b, 0.3); });

// nn::BatchNorm2d with a BnParams' values, Braze's epsilon and the given momentum.
torch::nn::BatchNorm2d MakeBn(int64_t channels, const BnParams* p, double momentum = kBnMomentum) {
  torch::nn::BatchNorm2d bn(
      torch::nn::BatchNorm2dOptions(channels).eps(kBnEpsilon).momentum(1 - momentum));
  if (p != nullptr) {
    torch::NoGradGuard no_grad;
    bn->weight.copy_(View(p->gamma));
    bn->bias.copy_(View(p->beta));
    bn->running_mean.copy_(View(p->mean));
    bn->running_var.copy_(View(p->variance));
  }
  return bn;
}

// A 3x3 SAME convolution without bias, its weight set from an HWIO filter.
torch::nn::Conv2d MakeConv(const HostTensor& hwio, bool channels_last) {
  torch::nn::Conv2d conv(
      torch::nn::Conv2dOptions(hwio.dim(2), hwio.dim(3), 3).padding(1).bias(false));
  torch::NoGradGuard no_grad;
  conv->weight.set_data(FromHwio(hwio, channels_last).clone());
  return conv;
}

struct BlockImpl : torch::nn::Module {
  torch::nn::Conv2d conv1{nullptr}, conv2{nullptr};
  torch::nn::BatchNorm2d bn1{nullptr}, bn2{nullptr};
  explicit BlockImpl(bool channels_last) {
    const BnParams p1 = BlockBn(0), p2 = BlockBn(1);
    conv1 = register_module("conv1", MakeConv(BlockFilter(0), channels_last));
    bn1 = register_module("bn1", MakeBn(kBlockChannels, &p1));
    conv2 = register_module("conv2", MakeConv(BlockFilter(1), channels_last));
    bn2 = register_module("bn2", MakeBn(kBlockChannels, &p2));
  }
  torch::Tensor forward(const torch::Tensor& x) {
    torch::Tensor h = bn1(conv1(x)).relu_();
    return bn2(conv2(h)).add_(x).relu_();
  }
};
TORCH_MODULE(Block);

void ResNetBlock(benchmark::State& state, bool channels_last) {
  SetUpTorch();
  c10::InferenceMode guard;
  const HostTensor xs = BlockInput();
  const torch::Tensor x = FromNhwc(xs, channels_last);
  Block block(channels_last);
  block->eval();
  torch::Tensor y;
  auto run = [&] { y = block->forward(x); };
  CheckForwardAndTime(state, run, y, ResNetBlockReference());
  SetRate(state, "GFLOP/s",
          2 * Conv3x3Gflop(kBlockBatch, kBlockSide, kBlockChannels, kBlockChannels));
}
void BM_ResNetBlock_torch(benchmark::State& state) { ResNetBlock(state, true); }
void BM_ResNetBlock_torch_nchw(benchmark::State& state) { ResNetBlock(state, false); }
BENCHMARK(BM_ResNetBlock_torch)->Apply([](auto* b) { PeerDefaults(b, 0.3); });
BENCHMARK(BM_ResNetBlock_torch_nchw)->Apply([](auto* b) { PeerDefaults(b, 0.3); });

void ResNetBlockStep(benchmark::State& state, bool channels_last) {
  SetUpTorch();
  const HostTensor xs = BlockInput(), ts = BlockTarget();
  const torch::Tensor x = FromNhwc(xs, channels_last), target = FromNhwc(ts, channels_last);
  Block block(channels_last);
  block->train();
  // The filters, gammas and betas (the moving statistics are buffers, not parameters).
  torch::optim::SGD optimizer(block->parameters(), torch::optim::SGDOptions(kResNetLr));
  auto step = [&] {
    optimizer.zero_grad();
    torch::Tensor loss = torch::mse_loss(block->forward(x), target);
    loss.backward();
    optimizer.step();
    return loss.item<float>();
  };
  RunTrainStep(state, step, ResNetBlockStepReferenceLosses());
  SetRate(state, "GFLOP/s",
          5 * Conv3x3Gflop(kBlockBatch, kBlockSide, kBlockChannels, kBlockChannels));
}
void BM_ResNetBlockStep_torch(benchmark::State& state) { ResNetBlockStep(state, true); }
void BM_ResNetBlockStep_torch_nchw(benchmark::State& state) { ResNetBlockStep(state, false); }
BENCHMARK(BM_ResNetBlockStep_torch)->Apply([](auto* b) { PeerDefaults(b, 0.5); });
BENCHMARK(BM_ResNetBlockStep_torch_nchw)->Apply([](auto* b) { PeerDefaults(b, 0.5); });

struct CnnImpl : torch::nn::Module {
  bool channels_last;
  torch::nn::Conv2d conv1{nullptr}, conv2{nullptr};
  torch::nn::BatchNorm2d bn1{nullptr}, bn2{nullptr};
  torch::nn::Linear fc{nullptr};
  explicit CnnImpl(bool channels_last_) : channels_last(channels_last_) {
    conv1 = register_module("conv1", MakeConv(CnnInitialFilter(0), channels_last));
    bn1 = register_module("bn1", MakeBn(32, nullptr, kCnnBnMomentum));
    conv2 = register_module("conv2", MakeConv(CnnInitialFilter(1), channels_last));
    bn2 = register_module("bn2", MakeBn(64, nullptr, kCnnBnMomentum));
    fc = register_module("fc", torch::nn::Linear(7 * 7 * 64, kClasses));
    torch::NoGradGuard no_grad;
    // Braze's dense weight [3136, 10] has its rows in NHWC flatten order (h, w, c):
    // channels-last flattens the permuted NHWC view in that order (no copy); NCHW
    // flattens (c, h, w), so its rows are reordered once here.
    const HostTensor wd = CnnInitialDense();
    torch::Tensor w = View(wd);
    if (!channels_last)
      w = w.reshape({7, 7, 64, kClasses}).permute({2, 0, 1, 3}).reshape({-1, kClasses});
    fc->weight.copy_(w.t());
    fc->bias.zero_();
  }
  torch::Tensor forward(const torch::Tensor& x) {
    torch::Tensor h = torch::max_pool2d(torch::relu(bn1(conv1(x))), 2);
    h = torch::max_pool2d(torch::relu(bn2(conv2(h))), 2);
    h = channels_last ? h.permute({0, 2, 3, 1}).flatten(1) : h.flatten(1);
    return fc(h);
  }
};
TORCH_MODULE(Cnn);

void CnnStep(benchmark::State& state, bool channels_last) {
  SetUpTorch();
  const int64_t batch = state.range(0);
  const HostTensor images = CnnImages(batch);
  const torch::Tensor x = FromNhwc(images, channels_last);
  const torch::Tensor labels = torch::tensor(TrainLabels(batch).ToVector<int>(), torch::kInt64);
  Cnn model(channels_last);
  model->train();
  torch::optim::Adam optimizer(model->parameters(), torch::optim::AdamOptions(kCnnLr));
  auto step = [&] {
    optimizer.zero_grad();
    torch::Tensor loss = torch::nn::functional::cross_entropy(model->forward(x), labels);
    loss.backward();
    optimizer.step();
    return loss.item<float>();
  };
  RunTrainStep(state, step, CnnStepReferenceLosses(batch));
  SetRate(state, "GFLOP/s",
          3 * Conv3x3Gflop(batch, 14, 32, 64) + 2 * Conv3x3Gflop(batch, 28, 1, 32) +
              3 * 2.0 * batch * 7 * 7 * 64 * kClasses / 1e9);
}
void BM_CnnStep_torch(benchmark::State& state) { CnnStep(state, true); }
void BM_CnnStep_torch_nchw(benchmark::State& state) { CnnStep(state, false); }
BENCHMARK(BM_CnnStep_torch)->Apply([](auto* b) {
  PeerDefaults(b->ArgName("batch")->Arg(128), 0.5);
});
BENCHMARK(BM_CnnStep_torch_nchw)->Apply([](auto* b) {
  PeerDefaults(b->ArgName("batch")->Arg(128), 0.5);
});

// ---- Attention ----
void BM_Attention_torch(benchmark::State& state) {
  SetUpTorch();
  const int64_t t = state.range(0);
  const bool backward = state.range(1) != 0;
  std::vector<HostTensor> values;
  for (int i = 0; i < 4; ++i) values.push_back(AttentionInput(t, i));
  AttentionReferenceSlice(t);  // before the baseline: its inputs are transient
  PeakMemory peak;
  const torch::Tensor mask = torch::ones({t, t}, torch::kBool).triu(1);
  const double scale = 1.0 / std::sqrt(static_cast<double>(kAttWidth));
  torch::Tensor q = View(values[0]), k = View(values[1]), v = View(values[2]);
  const torch::Tensor dout = View(values[3]);
  if (backward) {
    q = q.clone().requires_grad_(true);
    k = k.clone().requires_grad_(true);
    v = v.clone().requires_grad_(true);
  }
  torch::Tensor out;
  auto run = [&] {
    if (backward) {
      for (torch::Tensor* x : {&q, &k, &v}) x->mutable_grad() = torch::Tensor();
      out = torch::matmul(
          torch::softmax(
              (torch::matmul(q, k.transpose(-2, -1)) * scale).masked_fill(mask, -INFINITY), -1),
          v);
      out.backward(dout);
    } else {
      c10::InferenceMode guard;
      out = torch::matmul(
          torch::softmax(
              (torch::matmul(q, k.transpose(-2, -1)) * scale).masked_fill(mask, -INFINITY), -1),
          v);
    }
  };
  try {
    run();
  } catch (const c10::Error& e) {
    state.SkipWithError(e.what_without_backtrace());
    return;
  }
  std::vector<const float*> got = {out.data_ptr<float>()};
  if (backward) {
    for (torch::Tensor* x : {&q, &k, &v}) got.push_back(x->grad().data_ptr<float>());
  }
  if (!CheckAttention(state, t, got)) return;
  peak.StartTimedRuns();
  for (auto _ : state) {
    run();
    benchmark::ClobberMemory();
  }
  peak.Report(state, t);
  SetRate(state, "GFLOP/s", AttentionForwardGflop(t) * (backward ? 3.5 : 1.0));
}
BENCHMARK(BM_Attention_torch)
    ->ArgNames({"T", "backward"})
    ->ArgsProduct({{512, 2048}, {0, 1}})
    ->Apply([](auto* b) { PeerDefaults(b, 0.5); });

// ---- Random numbers (random_bench.cc's BM_Dropout and BM_RandomNormal) ----
// torch's dropout (training mode) and normal_ over 16M f32, from torch's CPU generator:
// another stream than Braze's, so the check is statistical: the dropped fraction within
// 6 standard errors of the rate and every kept value x / (1 - rate); the normals' mean
// and variance within 6 standard errors of 0 and 1. torch::dropout allocates its result
// each call (there is no out= form); normal_ fills a preallocated tensor.
constexpr int64_t kRandomN = 16 << 20;

void BM_Dropout_torch(benchmark::State& state) {
  SetUpTorch();
  c10::InferenceMode guard;
  const HostTensor xs = HostTensor::RandomUniform(DType::kF32, {kRandomN}, 1);
  const torch::Tensor x = View(xs);
  const double rate = 0.1;
  torch::Tensor y = torch::dropout(x, rate, true);
  const float* got = y.data_ptr<float>();
  const float scale = static_cast<float>(1.0 / (1.0 - rate));
  int64_t dropped = 0;
  for (int64_t i = 0; i < kRandomN; ++i) {
    if (got[i] == 0) {
      ++dropped;
    } else if (std::abs(got[i] - xs.data<float>()[i] * scale) > 1e-6f * std::abs(got[i])) {
      state.SkipWithError("torch's dropout kept a value not scaled by 1 / (1 - rate)");
      return;
    }
  }
  if (std::abs(double(dropped) / kRandomN - rate) > 6 * std::sqrt(rate * (1 - rate) / kRandomN)) {
    state.SkipWithError("torch's dropout dropped the wrong fraction");
    return;
  }
  for (auto _ : state) {
    y = torch::dropout(x, rate, true);
    benchmark::DoNotOptimize(y.data_ptr<float>());
  }
  state.counters["Gelem/s"] =
      benchmark::Counter(1e-9 * kRandomN * state.iterations(), benchmark::Counter::kIsRate);
}
BENCHMARK(BM_Dropout_torch)->Apply([](auto* b) { PeerDefaults(b, 0.5); });

void BM_RandomNormal_torch(benchmark::State& state) {
  SetUpTorch();
  c10::InferenceMode guard;
  torch::Tensor y = torch::empty({kRandomN}, torch::kFloat32);
  y.normal_();
  const double mean = y.mean().item<double>(), var = y.var().item<double>();
  if (std::abs(mean) > 6 / std::sqrt(double(kRandomN)) ||
      std::abs(var - 1) > 6 * std::sqrt(2.0 / kRandomN)) {
    state.SkipWithError("torch's normal_ is not N(0, 1)");
    return;
  }
  for (auto _ : state) {
    y.normal_();
    benchmark::DoNotOptimize(y.data_ptr<float>());
  }
  state.counters["Gelem/s"] =
      benchmark::Counter(1e-9 * kRandomN * state.iterations(), benchmark::Counter::kIsRate);
}
BENCHMARK(BM_RandomNormal_torch)->Apply([](auto* b) { PeerDefaults(b, 0.5); });

}  // namespace
}  // namespace braze::bench
