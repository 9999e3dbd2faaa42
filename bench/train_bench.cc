// Whole training steps on the CPU, fused vs unfused, in one run, on the models of
// train_models.h (the examples' models), trained on one fixed batch fed from the host
// each step, the loss fetched:
//
//   BM_SoftmaxTrainStep/batch:{128,1024}: the softmax regression of the tutorial.
//   BM_MlpTrainStep/batch:128: examples/mlp's 784-1024-1024-10 MLP with Adam.
//
//   fused:   model, loss, gradients and update math under one JitScope, as
//            `mlp --jit=scope` (clusters of at most one matmul each).
//   unfused: no JIT: every op its own compiled Halide kernel, cached, buffers reused.
//
// The peers of the same steps, at the same batches, are in peers_omp.cc (hand-fused
// softmax regression) and peers_openblas.cc (the MLP on OpenBLAS).
#include <benchmark/benchmark.h>

#include <algorithm>
#include <vector>

#include "braze/braze.h"
#include "train_models.h"

namespace braze::bench {
namespace {

// Runs the step in a session: three untimed steps (compile, then settle the buffers),
// then the timed ones.
void RunTrainStep(benchmark::State& state, absl::StatusOr<TrainStep> step) {
  if (!step.ok()) {
    state.SkipWithError(step.status().ToString().c_str());
    return;
  }
  Session session(*step->graph, SessionOptions());
  std::vector<HostTensor> outputs;
  auto run = [&] { return session.RunInto(step->feeds, {step->loss}, &outputs, step->train); };
  for (int warm = 0; warm < 3; ++warm) {
    if (absl::Status s = run(); !s.ok()) {
      state.SkipWithError(s.ToString().c_str());
      return;
    }
  }
  session.ResetStats();
  for (auto _ : state) {
    if (absl::Status s = run(); !s.ok()) {
      state.SkipWithError(s.ToString().c_str());
      return;
    }
    benchmark::DoNotOptimize(outputs[0].raw_data());
  }
  const SessionStats st = session.stats();
  state.counters["launches/step"] =
      double(st.cluster_launches + st.single_op_launches + st.reference_launches) /
      std::max<int64_t>(1, st.runs);
}

void BM_SoftmaxTrainStep(benchmark::State& state) {
  const int64_t batch = state.range(0);
  const bool fused = state.range(1) == 0;
  RunTrainStep(state, MakeSoftmaxTrainStep(batch, fused));
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
  RunTrainStep(state, MakeMlpTrainStep(batch, fused));
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

}  // namespace
}  // namespace braze::bench
