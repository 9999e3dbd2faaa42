// Whole training steps on the CPU, fused vs unfused, in one run, on the models of
// train_models.h (the examples' models), trained on one fixed batch fed from the host
// each step, the loss fetched:
//
//   BM_SoftmaxTrainStep/batch:{128,1024}: the softmax regression of the tutorial.
//   BM_MlpTrainStep/batch:128: examples/mlp's 784-1024-1024-10 MLP with Adam.
//   BM_ResNetBlockStep: a ResNet basic block at batch 32, 56x56x64, BN training, MSE
//     loss, SGD (train_models.h).
//   BM_CnnStep/batch:128: the convolutional example's Fashion-MNIST CNN with Adam.
//
//   fused:   model, loss, gradients and update math under one JitScope, as
//            `mlp --jit=scope` (clusters of at most one matmul each).
//   unfused: no JIT: every op its own compiled Halide kernel, cached, buffers reused.
//
// The first steps' losses (each variant's first four: the initial weights, then three
// updates) are checked against Braze's reference kernels (peers_common.h) before the
// timing, relative tolerance 1e-3 as for the peers; a mismatch is a SkipWithError.
//
// The peers of the same steps, at the same batches, are in peers_omp.cc (hand-fused
// softmax regression), peers_openblas.cc and peers_onednn.cc (the MLP around a library's
// GEMM) and peers_torch.cc (every step in libtorch).
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "braze/braze.h"
#include "peers_common.h"
#include "train_models.h"

namespace braze::bench {

// Runs the step in a session: kCheckedSteps untimed steps (compile, settle the buffers,
// and check their losses against `want`), then the timed ones.
void RunTrainStep(benchmark::State& state, absl::StatusOr<TrainStep> step,
                  const std::vector<float>& want, const SessionOptions& options, double rtol) {
  if (!step.ok()) {
    state.SkipWithError(step.status().ToString().c_str());
    return;
  }
  Session session(*step->graph, options);
  std::vector<HostTensor> outputs;
  auto run = [&] { return session.RunInto(step->feeds, {step->loss}, &outputs, step->train); };
  auto checked_step = [&]() -> float {
    if (absl::Status s = run(); !s.ok()) {
      state.SkipWithError(s.ToString().c_str());  // the first error is the one reported
      return std::nanf("");
    }
    return outputs[0].data<float>()[0];
  };
  {
    BrazeWarnings warnings;
    if (!CheckTrainLosses(state, checked_step, want, rtol) || warnings.FellBack(state)) return;
  }
  session.ResetStats();
  const double cpu_before = ProcessCpuSeconds();
  for (auto _ : state) {
    if (absl::Status s = run(); !s.ok()) {
      state.SkipWithError(s.ToString().c_str());
      return;
    }
    benchmark::DoNotOptimize(outputs[0].raw_data());
  }
  SetCpuPerStep(state, cpu_before);
  const SessionStats st = session.stats();
  state.counters["launches/step"] =
      double(st.cluster_launches + st.single_op_launches + st.reference_launches) /
      std::max<int64_t>(1, st.runs);
  state.counters["live_MB"] = double(st.peak_live_bytes) / 1e6;
  state.counters["outputs_MB"] = double(st.step_output_bytes) / 1e6;
  state.counters["activation_MB"] = double(st.peak_activation_bytes) / 1e6;
}

namespace {

void BM_SoftmaxTrainStep(benchmark::State& state) {
  const int64_t batch = state.range(0);
  const bool fused = state.range(1) == 0;
  RunTrainStep(state, MakeSoftmaxTrainStep(batch, fused), SoftmaxTrainReferenceLosses(batch));
}
BENCHMARK(BM_SoftmaxTrainStep)
    ->ArgNames({"batch", "unfused"})
    ->ArgsProduct({{128, 1024}, {0, 1}})
    ->Unit(benchmark::kMillisecond)
    ->MinTime(1.0)
    ->UseRealTime();

void BM_MlpTrainStep(benchmark::State& state) {
  const int64_t batch = state.range(0);
  const bool fused = state.range(1) == 0;
  RunTrainStep(state, MakeMlpTrainStep(batch, fused), MlpTrainReferenceLosses(batch));
  // The matmuls: x w, x^T dy and, except in the first layer (x is a feed), dy w^T.
  const double flops =
      2.0 * batch * (2 * kPixels * kHidden + 3 * kHidden * kHidden + 3 * kHidden * kClasses);
  state.counters["GFLOP/s"] =
      benchmark::Counter(flops / 1e9 * state.iterations(), benchmark::Counter::kIsRate);
}
BENCHMARK(BM_MlpTrainStep)
    ->ArgNames({"batch", "unfused"})
    ->ArgsProduct({{128}, {0, 1}})
    ->Unit(benchmark::kMillisecond)
    ->MinTime(2.0)
    ->UseRealTime();

// The convolutional steps: the forward and backward convolutions' arithmetic (the
// first convolution's input is a feed: no input gradient).
void BM_ResNetBlockStep(benchmark::State& state) {
  RunTrainStep(state, MakeResNetBlockStep(state.range(0) == 0), ResNetBlockStepReferenceLosses());
  SetRate(state, "GFLOP/s",
          5 * Conv3x3Gflop(kBlockBatch, kBlockSide, kBlockChannels, kBlockChannels));
}
BENCHMARK(BM_ResNetBlockStep)
    ->ArgName("unfused")
    ->Arg(0)
    ->Arg(1)
    ->Unit(benchmark::kMillisecond)
    ->MinTime(0.5)
    ->UseRealTime();

void BM_CnnStep(benchmark::State& state) {
  const int64_t batch = state.range(0);
  RunTrainStep(state, MakeCnnStep(batch, state.range(1) == 0), CnnStepReferenceLosses(batch));
  SetRate(state, "GFLOP/s",
          3 * Conv3x3Gflop(batch, 14, 32, 64) + 2 * Conv3x3Gflop(batch, 28, 1, 32) +
              3 * 2.0 * batch * 7 * 7 * 64 * kClasses / 1e9);
}
BENCHMARK(BM_CnnStep)
    ->ArgNames({"batch", "unfused"})
    ->ArgsProduct({{128}, {0, 1}})
    ->Unit(benchmark::kMillisecond)
    ->MinTime(0.5)
    ->UseRealTime();

}  // namespace
}  // namespace braze::bench
