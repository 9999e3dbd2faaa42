// A whole training step on the CPU, fused vs unfused, in one run: the examples/mlp
// model (784-1024-1024-10, ReLU, softmax cross entropy, Adam) at batch 200, on random
// inputs fed from the host each step, the loss fetched.
//
//   fused:   model, loss, gradients and Adam's update math under one JitScope, as
//            `mlp --jit=scope` (clusters of at most one matmul each).
//   unfused: no JIT: every op its own compiled Halide kernel, cached, buffers reused.
#include <benchmark/benchmark.h>

#include <cmath>
#include <optional>
#include <vector>

#include "braze/braze.h"
#include "braze/jit_scope.h"

namespace braze {
namespace {

constexpr int64_t kBatch = 200, kPixels = 784, kHidden = 1024, kClasses = 10;

void BM_MlpTrainStep(benchmark::State& state) {
  const bool unfused = state.range(0) != 0;
  Graph g;
  Tensor x = Placeholder(g, DType::kF32, {kBatch, kPixels}, "x");
  Tensor labels = Placeholder(g, DType::kI32, {kBatch}, "labels");
  auto layer = [&](int64_t in, int64_t out, uint64_t seed) {
    return std::make_pair(
        Variable(g, HostTensor::RandomNormal(DType::kF32, {in, out}, seed, 0, std::sqrt(2.0 / in))),
        Variable(g, HostTensor(DType::kF32, {out})));
  };
  const auto [w1, b1] = layer(kPixels, kHidden, 1);
  const auto [w2, b2] = layer(kHidden, kHidden, 2);
  const auto [w3, b3] = layer(kHidden, kClasses, 3);
  std::optional<JitScope> scope;
  if (!unfused) scope.emplace(g);
  Tensor h1 = Dense(x, w1, b1, Activation::kRelu);
  Tensor h2 = Dense(h1, w2, b2, Activation::kRelu);
  Tensor loss = Mean(SoftmaxCrossEntropyWithLogits(Dense(h2, w3, b3), OneHot(labels, kClasses)));
  auto train = Minimize(Optimizer::Adam(1e-3), loss, {w1, b1, w2, b2, w3, b3});
  scope.reset();
  if (!train.ok()) {
    state.SkipWithError(train.status().ToString().c_str());
    return;
  }
  HostTensor ys(DType::kI32, {kBatch});
  for (int64_t i = 0; i < kBatch; ++i) ys.SetDouble(i, static_cast<double>((i * 7) % kClasses));
  const Feeds feeds = {{x, HostTensor::RandomUniform(DType::kF32, {kBatch, kPixels}, 4, 0, 1)},
                       {labels, ys}};

  Session session(g, SessionOptions());
  std::vector<HostTensor> outputs;
  for (int warm = 0; warm < 3; ++warm) {  // compiles, then settles the buffers
    absl::Status s = session.RunInto(feeds, {loss}, &outputs, *train);
    if (!s.ok()) {
      state.SkipWithError(s.ToString().c_str());
      return;
    }
  }
  session.ResetStats();
  for (auto _ : state) {
    absl::Status s = session.RunInto(feeds, {loss}, &outputs, *train);
    if (!s.ok()) {
      state.SkipWithError(s.ToString().c_str());
      return;
    }
    benchmark::DoNotOptimize(outputs[0].raw_data());
  }
  const SessionStats st = session.stats();
  state.counters["launches/step"] =
      double(st.cluster_launches + st.single_op_launches + st.reference_launches) /
      std::max<int64_t>(1, st.runs);
  // The matmuls: x w, x^T dy and, except in the first layer (x is a feed), dy w^T.
  const double flops =
      2.0 * kBatch * (2 * kPixels * kHidden + 3 * kHidden * kHidden + 3 * kHidden * kClasses);
  state.counters["GFLOP/s"] =
      benchmark::Counter(flops / 1e9 * state.iterations(), benchmark::Counter::kIsRate);
}
BENCHMARK(BM_MlpTrainStep)
    ->ArgName("unfused")
    ->Arg(0)
    ->Arg(1)
    ->Unit(benchmark::kMillisecond)
    ->MinTime(2.0)
    ->UseRealTime();

}  // namespace
}  // namespace braze
