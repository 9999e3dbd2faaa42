// Random numbers (docs/RANDOM.md), fused vs unfused, beside libtorch's (peers_torch.cc:
// BM_Dropout_torch, BM_RandomNormal_torch), over 16M f32:
//
//   BM_Dropout/unfused:{0,1}: Dropout(x, 0.1, step, seed): a RandomUniform, a Less, a
//     Mul and a Select: one fused kernel, or four single-op kernels.
//   BM_RandomNormal/unfused:{0,1}: RandomNormal(x, step, seed) (one op either way).
//
// The step is a placeholder fed each run (a new step needs no new kernel). The first
// run's output is checked against Braze's reference kernels bit for bit (zero
// tolerance): a mismatch is a SkipWithError, never a number.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <vector>

#include "braze/braze.h"
#include "braze/jit_scope.h"
#include "peers_common.h"

namespace braze {
namespace {

constexpr int64_t kRandomN = 16 << 20;

struct RandomWorkload {
  Graph graph;
  Tensor x, step, out;
};

void Build(RandomWorkload& w, bool normal, bool fused) {
  w.x = Placeholder(w.graph, DType::kF32, {kRandomN}, "x");
  w.step = Placeholder(w.graph, DType::kI32, {}, "step");
  auto body = [&] { w.out = normal ? RandomNormal(w.x, w.step, 7) : Dropout(w.x, 0.1, w.step, 7); };
  if (fused) {
    JitScope scope(w.graph);
    body();
  } else {
    body();
  }
}

void RunRandom(benchmark::State& state, bool normal) {
  const bool fused = state.range(0) == 0;
  RandomWorkload w;
  Build(w, normal, fused);
  const HostTensor xs = HostTensor::RandomUniform(DType::kF32, {kRandomN}, 1);
  Feeds feeds = {{w.x, xs}, {w.step, HostTensor::Scalar<int32_t>(3)}};
  Session session(w.graph, SessionOptions());
  std::vector<HostTensor> outputs;
  absl::Status s = session.RunInto(feeds, {w.out}, &outputs);
  if (!s.ok()) {
    state.SkipWithError(s.ToString().c_str());
    return;
  }
  SessionOptions reference_only;
  reference_only.reference_only = true;
  Session reference(w.graph, reference_only);
  auto want = reference.Run(feeds, {w.out});
  if (!want.ok()) {
    state.SkipWithError(want.status().ToString().c_str());
    return;
  }
  if (!bench::CheckClose(state, outputs[0].data<float>(), (*want)[0], 0, 0)) return;
  session.ResetStats();
  int32_t step = 4;
  for (auto _ : state) {
    feeds[1].second = HostTensor::Scalar<int32_t>(step++);
    s = session.RunInto(feeds, {w.out}, &outputs);
    if (!s.ok()) {
      state.SkipWithError(s.ToString().c_str());
      return;
    }
    benchmark::DoNotOptimize(outputs[0].raw_data());
  }
  const SessionStats st = session.stats();
  state.counters["launches/run"] =
      double(st.cluster_launches + st.single_op_launches + st.reference_launches) /
      std::max<int64_t>(1, st.runs);
  state.counters["Gelem/s"] =
      benchmark::Counter(1e-9 * kRandomN * state.iterations(), benchmark::Counter::kIsRate);
}

void BM_Dropout(benchmark::State& state) { RunRandom(state, false); }
void BM_RandomNormal(benchmark::State& state) { RunRandom(state, true); }
BENCHMARK(BM_Dropout)
    ->ArgName("unfused")
    ->Arg(0)
    ->Arg(1)
    ->Unit(benchmark::kMillisecond)
    ->MinTime(0.5)
    ->UseRealTime();
BENCHMARK(BM_RandomNormal)
    ->ArgName("unfused")
    ->Arg(0)
    ->Arg(1)
    ->Unit(benchmark::kMillisecond)
    ->MinTime(0.5)
    ->UseRealTime();

}  // namespace
}  // namespace braze
