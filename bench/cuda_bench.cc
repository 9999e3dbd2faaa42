// The CUDA variants (skipped with the reason where CheckCudaAvailable fails). Inputs are
// Variables, so after the warm-up run they live on the device, and the result is a Run
// target, not a fetch: a timed iteration is the step's kernels only, with no copies
// (stats checked), followed by a device synchronize.
//
//   cuda_fused:    global auto-clustering: one Halide CUDA kernel per cluster.
//   cuda_unfused:  no JIT: every op its own compiled CUDA kernel, buffers reused.
//   baselines:     a device-to-device copy of the same bytes (Chain8's roof) and a plain
//                  cuBLASLt GEMM (MatMulBiasRelu's).
//   bf16:          MatMulBiasRelu in bf16 on cuBLASLt (MatMulBiasReluBf16), its first run
//                  checked against the exact product.
//
// The workloads of the other issues (issue 39's goals; bench/peers_cuda.py has PyTorch's
// side): the ResNet basic block (conv_bench.cc's, its input a Variable), causal attention
// at T = 2048 (attention_bench.cc's shape; forward, and forward with the gradients of q,
// k and v) and the transformer block's train step (gpt_bench.cc's). Their first run is
// checked against the reference kernels (peers_common.h, attention_common.h,
// gpt_models.h): a mismatch is a SkipWithError, never a number.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "attention_common.h"
#include "braze/braze.h"
#include "device/cublas_gemm.h"
#include "device/device_tensor.h"
#include "gpt_models.h"
#include "peers_common.h"
#include "train_models.h"

namespace braze {
namespace {

// kCudaPageable: fused, with host<->device copies through Halide's pageable path instead
// of pinned staging (SetCudaPinnedCopies; docs/CUDA.md, "Copies"): the A/B of the copies.
enum CudaVariant { kCudaFused = 0, kCudaUnfused = 1, kCudaHalideMatMul = 2, kCudaPageable = 3 };

// Pinned copies off for its lifetime in the pageable variant.
class PageableCopies {
 public:
  explicit PageableCopies(CudaVariant v) : on_(v == kCudaPageable) {
    if (on_) SetCudaPinnedCopies(false);
  }
  ~PageableCopies() {
    if (on_) SetCudaPinnedCopies(true);
  }

 private:
  const bool on_;
};

bool SkipWithoutCuda(benchmark::State& state) {
  absl::Status s = CheckCudaAvailable();
  if (!s.ok()) state.SkipWithError(std::string(s.message()).c_str());
  return !s.ok();
}

void Fail(benchmark::State& state, const absl::Status& s) {
  state.SkipWithError(s.ToString().c_str());
}

// Checks the fetched values of a run's targets (false after a SkipWithError).
using OutputCheck = std::function<bool(const std::vector<HostTensor>&)>;

// Runs `targets` on cuda:0 in the variant; `bytes`/`flops` per iteration set counters.
// With `check`, a first run fetches the targets and must pass it (and compile without a
// fallback) before the timed runs; with `gemms` >= 0 too, that run must have made that
// many cuBLASLt calls (a GEMM cuBLASLt refuses runs as Halide kernels with a warning
// that is not a compile failure).
void RunOnCuda(benchmark::State& state, Graph& g, const Feeds& feeds,
               const std::vector<Tensor>& targets, CudaVariant v, double bytes, double flops,
               const OutputCheck& check = nullptr, int64_t gemms = -1) {
  PageableCopies copies(v);
  SessionOptions opts;
  opts.device = "cuda:0";
  if (v != kCudaUnfused) opts.global_jit_level = JitLevel::kOn1;
  if (v == kCudaHalideMatMul) opts.cuda_matmul = SessionOptions::CudaMatMul::kHalide;
  // Fused GEMMs take the ReLU into cuBLASLt's epilogue too (its NaN handling is not
  // documented: SessionOptions::cuda_relu_epilogue).
  opts.cuda_relu_epilogue = v == kCudaFused;
  Session session(g, opts);
  std::vector<HostTensor> none;
  if (check) {
    bench::BrazeWarnings warnings;
    std::vector<HostTensor> got;
    absl::Status s = session.RunInto(feeds, targets, &got);
    if (!s.ok()) return Fail(state, s);
    if (warnings.FellBack(state) || !check(got)) return;
    if (gemms >= 0 && session.stats().gemm_launches != gemms) {
      return Fail(state, absl::InternalError(absl::StrCat(session.stats().gemm_launches,
                                                          " cuBLASLt GEMMs in the first run, want ",
                                                          gemms)));
    }
  }
  absl::Status s = session.RunInto(feeds, {}, &none, targets);  // compile, upload variables
  if (s.ok()) s = CudaSynchronize();
  if (!s.ok()) return Fail(state, s);
  session.ResetStats();
  for (auto _ : state) {
    s = session.RunInto(feeds, {}, &none, targets);
    if (s.ok()) s = CudaSynchronize();
    if (!s.ok()) return Fail(state, s);
  }
  const SessionStats st = session.stats();
  const double runs = std::max<int64_t>(st.runs, 1);
  state.counters["launches"] =
      (st.cluster_launches + st.single_op_launches + st.gemm_launches) / runs;
  state.counters["copies"] = (st.host_to_device_copies + st.device_to_host_copies) / runs;
  if (bytes > 0) {
    state.counters["GB/s"] =
        benchmark::Counter(bytes / 1e9, benchmark::Counter::kIsIterationInvariantRate);
  }
  if (flops > 0) {
    state.counters["GFLOP/s"] =
        benchmark::Counter(flops / 1e9, benchmark::Counter::kIsIterationInvariantRate);
  }
}

constexpr int64_t kChainRows = 8192, kChainCols = 8192;  // 256 MiB of f32

void BM_Chain8_cuda(benchmark::State& state) {
  if (SkipWithoutCuda(state)) return;
  Graph g;
  Tensor x = Variable(g, HostTensor::RandomUniform(DType::kF32, {kChainRows, kChainCols}, 1), "x");
  Tensor y = x;
  for (int i = 0; i < 8; ++i) y = (i % 2 == 0) ? Tanh(y * 0.9 + 0.1) : Sigmoid(y) - y * 0.5;
  const double bytes = 2.0 * kChainRows * kChainCols * 4;  // read x, write y
  RunOnCuda(state, g, {}, {y}, static_cast<CudaVariant>(state.range(0)), bytes, 0);
}
BENCHMARK(BM_Chain8_cuda)
    ->ArgName("variant")  // 0 fused, 1 unfused
    ->Arg(kCudaFused)
    ->Arg(kCudaUnfused)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

// Chain8's roof: a device-to-device copy of the same 256 MiB (read + write).
void BM_Copy_cuda(benchmark::State& state) {
  if (SkipWithoutCuda(state)) return;
  const TensorType t{DType::kF32, {kChainRows, kChainCols}};
  auto a = DeviceTensor::Allocate(t);
  auto b = DeviceTensor::Allocate(t);
  if (!a.ok() || !b.ok()) return Fail(state, a.ok() ? b.status() : a.status());
  absl::Status s = (*a)->CopyFromHost(HostTensor::RandomUniform(DType::kF32, t.shape, 2));
  for (auto _ : state) {
    if (s.ok()) s = (*b)->CopyFrom(**a);
    if (s.ok()) s = CudaSynchronize();
    if (!s.ok()) return Fail(state, s);
  }
  state.counters["GB/s"] = benchmark::Counter(2.0 * (*a)->num_bytes() / 1e9,
                                              benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_Copy_cuda)->Unit(benchmark::kMillisecond)->UseRealTime();

void RowOp(benchmark::State& state, bool layernorm) {
  if (SkipWithoutCuda(state)) return;
  const int64_t rows = 16384, cols = 1024;
  Graph g;
  Tensor x = Variable(g, HostTensor::RandomUniform(DType::kF32, {rows, cols}, 3), "x");
  Tensor y;
  if (layernorm) {
    Tensor gamma = Variable(g, HostTensor::RandomUniform(DType::kF32, {cols}, 4), "gamma");
    Tensor beta = Variable(g, HostTensor::RandomUniform(DType::kF32, {cols}, 5), "beta");
    y = LayerNorm(x, gamma, beta);
  } else {
    y = Softmax(x);
  }
  RunOnCuda(state, g, {}, {y}, static_cast<CudaVariant>(state.range(0)), 2.0 * rows * cols * 4, 0);
}
void BM_Softmax_cuda(benchmark::State& state) { RowOp(state, false); }
void BM_LayerNorm_cuda(benchmark::State& state) { RowOp(state, true); }
BENCHMARK(BM_Softmax_cuda)
    ->ArgName("variant")
    ->Arg(0)
    ->Arg(1)
    ->Unit(benchmark::kMicrosecond)
    ->UseRealTime();
BENCHMARK(BM_LayerNorm_cuda)
    ->ArgName("variant")
    ->Arg(0)
    ->Arg(1)
    ->Unit(benchmark::kMicrosecond)
    ->UseRealTime();

constexpr int64_t kM = 4096, kK = 4096, kN = 4096;

// Dense + ReLU: cuBLASLt with the bias+ReLU epilogue (fused, default), op by op
// (unfused: GEMM, then Add and Relu kernels), or Braze's tiled Halide matmul (2).
void BM_MatMulBiasRelu_cuda(benchmark::State& state) {
  if (SkipWithoutCuda(state)) return;
  Graph g;
  Tensor x = Variable(g, HostTensor::RandomUniform(DType::kF32, {kM, kK}, 6), "x");
  Tensor w = Variable(g, HostTensor::RandomUniform(DType::kF32, {kK, kN}, 7), "w");
  Tensor b = Variable(g, HostTensor::RandomUniform(DType::kF32, {kN}, 8), "b");
  Tensor y = Relu(MatMul(x, w) + b);
  RunOnCuda(state, g, {}, {y}, static_cast<CudaVariant>(state.range(0)), 0, 2.0 * kM * kN * kK);
}
BENCHMARK(BM_MatMulBiasRelu_cuda)
    ->ArgName("variant")  // 0 fused (cuBLASLt epilogue), 1 unfused, 2 Halide matmul
    ->Arg(0)
    ->Arg(1)
    ->Arg(2)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

// MatMulBiasRelu in bf16 (x, w and the bias bf16 Variables): cuBLASLt's bf16 GEMM with
// FP32 accumulation, the bias (through C) and ReLU (its epilogue) in the call and one
// rounding (fused, 0), or the GEMM with its bias, then a ReLU kernel (unfused, 1). The
// first run's rows kCheckedRows (all 4096 columns) are checked against the exact product
// within the bf16 rule of docs/MIXED_PRECISION.md: one bf16 ulp plus the f32
// accumulation-order error.
constexpr int64_t kCheckedRows[] = {0, 1, 2, 1237, 2053, 3001, 4094, 4095};

bool CheckBf16DenseRelu(benchmark::State& state, const HostTensor& got, const HostTensor& x,
                        const HostTensor& w, const HostTensor& b) {
  std::vector<float> wf(kK * kN);  // widened once: the check reads every column
  for (int64_t i = 0; i < kK * kN; ++i) wf[i] = static_cast<float>(w.GetDouble(i));
  std::vector<double> sum(kN), mag(kN);
  for (int64_t row : kCheckedRows) {
    for (int64_t j = 0; j < kN; ++j) {
      sum[j] = b.GetDouble(j);
      mag[j] = std::fabs(sum[j]);
    }
    for (int64_t l = 0; l < kK; ++l) {
      const double xv = x.GetDouble(row * kK + l);
      const float* wrow = &wf[l * kN];
      for (int64_t j = 0; j < kN; ++j) {
        sum[j] += xv * wrow[j];
        mag[j] += std::fabs(xv * wrow[j]);
      }
    }
    for (int64_t j = 0; j < kN; ++j) {
      const double want = std::max(sum[j], 0.0), g = got.GetDouble(row * kN + j);
      const double larger = std::max(std::fabs(g), want);
      const double ulp =
          std::ldexp(1.0, std::max(larger == 0 ? -126 : std::ilogb(larger), -126) - 7);
      const double bound = ulp + kK * std::ldexp(mag[j], -23);
      if (!(std::fabs(g - want) <= bound)) {
        state.SkipWithError(absl::StrCat("bf16 MatMulBiasRelu out[", row, ", ", j, "] = ", g,
                                         ", want ", want, " (bound ", bound, ")")
                                .c_str());
        return false;
      }
    }
  }
  return true;
}

void BM_MatMulBiasReluBf16_cuda(benchmark::State& state) {
  if (SkipWithoutCuda(state)) return;
  const HostTensor xv = HostTensor::RandomUniform(DType::kBF16, {kM, kK}, 6);
  const HostTensor wv = HostTensor::RandomUniform(DType::kBF16, {kK, kN}, 7);
  const HostTensor bv = HostTensor::RandomUniform(DType::kBF16, {kN}, 8);
  Graph g;
  Tensor x = Variable(g, xv, "x");
  Tensor w = Variable(g, wv, "w");
  Tensor b = Variable(g, bv, "b");
  Tensor y = Relu(MatMul(x, w) + b);
  RunOnCuda(
      state, g, {}, {y}, static_cast<CudaVariant>(state.range(0)), 0, 2.0 * kM * kN * kK,
      [&](const std::vector<HostTensor>& got) {
        return CheckBf16DenseRelu(state, got[0], xv, wv, bv);
      },
      /*gemms=*/1);
}
BENCHMARK(BM_MatMulBiasReluBf16_cuda)
    ->ArgName("variant")  // 0 fused (bias in C, ReLU epilogue), 1 GEMM+bias, ReLU kernel
    ->Arg(kCudaFused)
    ->Arg(kCudaUnfused)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

// The roof for MatMulBiasRelu: a plain cuBLASLt GEMM of the same size, no epilogue.
void BM_PlainCublasGemm_cuda(benchmark::State& state) {
  if (SkipWithoutCuda(state)) return;
  auto a = DeviceTensor::Allocate({DType::kF32, {kM, kK}});
  auto b = DeviceTensor::Allocate({DType::kF32, {kK, kN}});
  auto c = DeviceTensor::Allocate({DType::kF32, {kM, kN}});
  if (!a.ok() || !b.ok() || !c.ok()) return Fail(state, absl::InternalError("allocation failed"));
  absl::Status s = (*a)->CopyFromHost(HostTensor::RandomUniform(DType::kF32, {kM, kK}, 6));
  if (s.ok()) s = (*b)->CopyFromHost(HostTensor::RandomUniform(DType::kF32, {kK, kN}, 7));
  GemmShape shape;
  shape.m = kM;
  shape.n = kN;
  shape.k = kK;
  for (auto _ : state) {
    if (s.ok()) {
      s = RunInCudaContext(0, [&] {
        return CublasGemm("plain", shape, (*a)->device_address(), (*b)->device_address(), 0,
                          (*c)->device_address());
      });
    }
    if (s.ok()) s = CudaSynchronize();
    if (!s.ok()) return Fail(state, s);
  }
  state.counters["GFLOP/s"] =
      benchmark::Counter(2.0 * kM * kN * kK / 1e9, benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_PlainCublasGemm_cuda)->Unit(benchmark::kMillisecond)->UseRealTime();

// One Fashion-MNIST-sized softmax regression train step (batch 128, SGD), fed from the
// host each step as the demo does: two feeds on, the loss off. Variant 0 fused, 1 op by
// op, 3 as 0 with pageable copies.
void BM_TrainStep_cuda(benchmark::State& state) {
  if (SkipWithoutCuda(state)) return;
  Graph g;
  Tensor x = Placeholder(g, DType::kF32, {128, 784}, "x");
  Tensor labels = Placeholder(g, DType::kF32, {128, 10}, "labels");
  Tensor w = Variable(g, HostTensor::RandomNormal(DType::kF32, {784, 10}, 9, 0, 0.01), "w");
  Tensor b = Variable(g, HostTensor::Filled(DType::kF32, {10}, 0), "b");
  Tensor loss = Mean(SoftmaxCrossEntropyWithLogits(MatMul(x, w) + b, labels));
  auto train = Minimize(Optimizer::Sgd(0.1), loss, {w, b});
  if (!train.ok()) return Fail(state, train.status());
  HostTensor ys(DType::kF32, {128, 10});
  for (int i = 0; i < 128; ++i) ys.SetDouble(i * 10 + i % 10, 1.0);
  Feeds feeds = {{x, HostTensor::RandomUniform(DType::kF32, {128, 784}, 10, 0, 1)}, {labels, ys}};
  std::vector<Tensor> targets = *train;
  targets.push_back(loss);
  RunOnCuda(state, g, feeds, targets, static_cast<CudaVariant>(state.range(0)), 0, 0);
}
BENCHMARK(BM_TrainStep_cuda)
    ->ArgName("variant")
    ->Arg(0)
    ->Arg(1)
    ->Arg(kCudaPageable)
    ->Unit(benchmark::kMicrosecond)
    ->UseRealTime();

// examples/mlp's train step (bench/train_models.h: 784-1024-1024-10, ReLU, softmax cross
// entropy, Adam), batch 128, fed from the host each step: variant 0 the model, loss,
// gradients and Adam's updates under one JitScope; 1 op by op; 3 as 0 with pageable copies.
void BM_MlpStep_cuda(benchmark::State& state) {
  if (SkipWithoutCuda(state)) return;
  const auto v = static_cast<CudaVariant>(state.range(0));
  auto step = bench::MakeMlpTrainStep(128, /*fused=*/v != kCudaUnfused);
  if (!step.ok()) return Fail(state, step.status());
  std::vector<Tensor> targets = step->train;
  targets.push_back(step->loss);
  const double flops = 3 * 2.0 * 128 * (784 * 1024 + 1024 * 1024 + 1024 * 10);  // fwd + bwd
  RunOnCuda(state, *step->graph, step->feeds, targets, v, 0, flops);
}
BENCHMARK(BM_MlpStep_cuda)
    ->ArgName("variant")
    ->Arg(0)
    ->Arg(1)
    ->Arg(kCudaPageable)
    ->Unit(benchmark::kMicrosecond)
    ->UseRealTime();

// The ResNet basic block forward (train_models.h: 32x56x56x64 NHWC, two 3x3 convolutions,
// BN in inference mode, the residual ReLU), its input a Variable on the device. Variant 0:
// one JitScope (the convolutions are the GPU heuristic's shared-memory tiles,
// docs/CONVOLUTIONS.md); 1: every op its own kernel. No cuDNN: Braze calls none.
void BM_ResNetBlock_cuda(benchmark::State& state) {
  if (SkipWithoutCuda(state)) return;
  const auto v = static_cast<CudaVariant>(state.range(0));
  bench::Forward f = bench::MakeResNetBlock(v != kCudaUnfused, /*variable_input=*/true);
  const double flops = 2e9 * bench::Conv3x3Gflop(bench::kBlockBatch, bench::kBlockSide,
                                                 bench::kBlockChannels, bench::kBlockChannels);
  RunOnCuda(state, *f.graph, f.feeds, {f.out}, v, 0, flops,
            [&](const std::vector<HostTensor>& got) {
              // 576-term sums, two of them, against the reference's doubles (conv_bench.cc's).
              return bench::CheckClose(state, got[0].data<float>(), bench::ResNetBlockReference(),
                                       1e-4, 1e-3);
            });
}
BENCHMARK(BM_ResNetBlock_cuda)
    ->ArgName("variant")  // 0 fused, 1 unfused
    ->Arg(kCudaFused)
    ->Arg(kCudaUnfused)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

// Causal self-attention at attention_bench.cc's shape, T = 2048 (B 8, H 8, D 64), q, k, v
// and dO Variables on the device. Variant 0: ScaledDotProductAttention's fused op (and its
// gradient ops); 1: the composite (BatchMatMul, mask, Softmax, BatchMatMul) op by op.
// `backward`: also dq, dk and dv (BM_AttentionFwdBwd_cuda).
constexpr int64_t kAttT = 2048;

void AttentionOnCuda(benchmark::State& state, bool backward) {
  if (SkipWithoutCuda(state)) return;
  const auto v = static_cast<CudaVariant>(state.range(0));
  Graph g;
  Tensor in[4];
  for (int i = 0; i < 4; ++i)
    in[i] = Variable(g, bench::AttentionInput(kAttT, i), "qkvd" + std::to_string(i));
  std::vector<Tensor> targets;
  {
    std::optional<JitScope> scope;
    if (v != kCudaUnfused) scope.emplace(g, JitScope::Options{true, true});
    AttentionOptions o;
    o.causal = true;
    o.fused = v != kCudaUnfused;
    targets.push_back(ScaledDotProductAttention(in[0], in[1], in[2], o));
  }
  if (backward) {
    absl::StatusOr<std::vector<Tensor>> grads =
        Gradients({targets[0]}, {in[0], in[1], in[2]}, {in[3]});
    if (!grads.ok()) return Fail(state, grads.status());
    targets.insert(targets.end(), grads->begin(), grads->end());
  }
  bench::AttentionReferenceSlice(kAttT);  // computed before the timed runs
  const double flops = 1e9 * bench::AttentionForwardGflop(kAttT) * (backward ? 3.5 : 1.0);
  RunOnCuda(state, g, {}, targets, v, 0, flops, [&](const std::vector<HostTensor>& got) {
    std::vector<const float*> ptrs;
    for (const HostTensor& t : got) ptrs.push_back(t.data<float>());
    return bench::CheckAttention(state, kAttT, ptrs);
  });
}
void BM_Attention_cuda(benchmark::State& state) { AttentionOnCuda(state, false); }
void BM_AttentionFwdBwd_cuda(benchmark::State& state) { AttentionOnCuda(state, true); }
BENCHMARK(BM_Attention_cuda)
    ->ArgName("variant")  // 0 the fused op, 1 the composite op by op
    ->Arg(kCudaFused)
    ->Arg(kCudaUnfused)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
BENCHMARK(BM_AttentionFwdBwd_cuda)
    ->ArgName("variant")
    ->Arg(kCudaFused)
    ->Arg(kCudaUnfused)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

// gpt_bench.cc's transformer block train step (gpt_models.h: width 256, 4 heads, T 128,
// batch 16, dropout 0.1, AdamW), x and target fed from the host each step as there.
// Variant 0: the model, loss, gradients and updates under one JitScope; 1: op by op. The
// first kCheckedSteps losses (fetched) must match the reference kernels' before the timed
// steps, which run the updates and the loss as targets.
void BM_TransformerBlockStep_cuda(benchmark::State& state) {
  if (SkipWithoutCuda(state)) return;
  const auto v = static_cast<CudaVariant>(state.range(0));
  absl::StatusOr<bench::TrainStep> step = bench::MakeTransformerBlockStep(v != kCudaUnfused);
  if (!step.ok()) return Fail(state, step.status());
  const std::vector<float>& want = bench::TransformerBlockStepReferenceLosses();
  SessionOptions opts;
  opts.device = "cuda:0";
  Session session(*step->graph, opts);
  std::vector<HostTensor> loss;
  absl::Status s;
  auto checked_step = [&]() -> float {
    if (s.ok()) s = session.RunInto(step->feeds, {step->loss}, &loss, step->train);
    return s.ok() ? loss[0].data<float>()[0] : std::nanf("");
  };
  {
    bench::BrazeWarnings warnings;
    const bool same = bench::CheckTrainLosses(state, checked_step, want, 1e-3);
    if (!s.ok()) return Fail(state, s);
    if (!same || warnings.FellBack(state)) return;
  }
  std::vector<Tensor> targets = step->train;
  targets.push_back(step->loss);
  std::vector<HostTensor> none;
  session.ResetStats();
  for (auto _ : state) {
    s = session.RunInto(step->feeds, {}, &none, targets);
    if (s.ok()) s = CudaSynchronize();
    if (!s.ok()) return Fail(state, s);
  }
  const SessionStats st = session.stats();
  state.counters["launches"] =
      double(st.cluster_launches + st.single_op_launches + st.gemm_launches) /
      std::max<int64_t>(st.runs, 1);
}
BENCHMARK(BM_TransformerBlockStep_cuda)
    ->ArgName("variant")
    ->Arg(kCudaFused)
    ->Arg(kCudaUnfused)
    ->Unit(benchmark::kMicrosecond)
    ->UseRealTime();

}  // namespace
}  // namespace braze
