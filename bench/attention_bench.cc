// Attention, fused vs unfused, in one run with libtorch (issue 36; docs/ATTENTION.md):
// causal self-attention at B = 8, H = 8, D = 64, T = 512 and 2048 (attention_common.h).
//
//   BM_Attention/T/unfused:0/backward:{0,1}: ScaledDotProductAttention's fused op, and
//     with backward its gradients (the logsumexp, delta and the three gradient ops).
//   BM_Attention/T/unfused:1/backward:{0,1}: the unfused composite (BatchMatMul, an
//     Iota mask, Softmax, BatchMatMul) and its gradients, as Braze clusters them.
//   BM_AttentionGrad/T/wrt:{0,1,2}: the fused forward and one gradient (dq, dk or dv:
//     the logsumexp, delta and that one gradient op), to time the backward per op.
//   BM_Attention_torch (peers_torch.cc): matmul, masked_fill, softmax, matmul and
//     autograd; libtorch 1.13 has no fused attention on the CPU.
//
// Each graph is under one JitScope whose gradients compile apart (separate_compiled_
// gradients). The first run is checked against the reference kernels on slice (0, 0);
// a mismatch is a SkipWithError, never a number. Counters: GFLOP/s (the forward's
// 2 B H T^2 D, times 3.5 with the backward), peak_MiB (attention_common.h: run one
// benchmark per process for a meaningful value) and scores_MiB, one [B, H, T, T] f32.
#include <benchmark/benchmark.h>

#include <vector>

#include "attention_common.h"
#include "braze/braze.h"
#include "peers_common.h"

namespace braze::bench {
namespace {

void BM_Attention(benchmark::State& state) {
  const int64_t t = state.range(0);
  const bool unfused = state.range(1) != 0;
  const bool backward = state.range(2) != 0;
  std::vector<HostTensor> values;
  for (int i = 0; i < 4; ++i) values.push_back(AttentionInput(t, i));
  AttentionReferenceSlice(t);  // before the baseline: its inputs are transient
  PeakMemory peak;
  Graph g;
  const Shape s = AttentionShape(t);
  Tensor q = Placeholder(g, DType::kF32, s, "q"), k = Placeholder(g, DType::kF32, s, "k"),
         v = Placeholder(g, DType::kF32, s, "v"), dout = Placeholder(g, DType::kF32, s, "dout");
  Tensor out;
  {
    JitScope scope(g, JitScope::Options{true, true});
    AttentionOptions o;
    o.causal = true;
    o.fused = !unfused;
    out = ScaledDotProductAttention(q, k, v, o);
  }
  std::vector<Tensor> fetches = {out};
  if (backward) {
    absl::StatusOr<std::vector<Tensor>> grads = Gradients({out}, {q, k, v}, {dout});
    if (!grads.ok()) {
      state.SkipWithError(grads.status().ToString().c_str());
      return;
    }
    fetches.insert(fetches.end(), grads->begin(), grads->end());
  }
  Feeds feeds = {{q, values[0]}, {k, values[1]}, {v, values[2]}};
  if (backward) feeds.emplace_back(dout, values[3]);
  Session session(g, SessionOptions());
  std::vector<HostTensor> outputs;
  {
    BrazeWarnings warnings;
    absl::Status st = session.RunInto(feeds, fetches, &outputs);
    if (!st.ok()) {
      state.SkipWithError(st.ToString().c_str());
      return;
    }
    if (warnings.FellBack(state)) return;
  }
  std::vector<const float*> got;
  for (const HostTensor& o : outputs) got.push_back(o.data<float>());
  if (!CheckAttention(state, t, got)) return;
  peak.StartTimedRuns();
  for (auto _ : state) {
    absl::Status st = session.RunInto(feeds, fetches, &outputs);
    if (!st.ok()) {
      state.SkipWithError(st.ToString().c_str());
      return;
    }
    benchmark::DoNotOptimize(outputs[0].raw_data());
  }
  peak.Report(state, t);
  state.counters["kernels"] =
      static_cast<double>(session.stats().cluster_launches + session.stats().single_op_launches) /
      static_cast<double>(state.iterations() + 1);
  SetRate(state, "GFLOP/s", AttentionForwardGflop(t) * (backward ? 3.5 : 1.0));
}
BENCHMARK(BM_Attention)
    ->ArgNames({"T", "unfused", "backward"})
    ->ArgsProduct({{512, 2048}, {0, 1}, {0, 1}})
    ->Apply([](auto* b) { PeerDefaults(b, 0.5); });

// The fused forward and the gradient with respect to q, k or v alone.
void BM_AttentionGrad(benchmark::State& state) {
  const int64_t t = state.range(0);
  const int wrt = static_cast<int>(state.range(1));
  std::vector<HostTensor> values;
  for (int i = 0; i < 4; ++i) values.push_back(AttentionInput(t, i));
  const std::vector<HostTensor>& want = AttentionReferenceSlice(t);
  Graph g;
  const Shape s = AttentionShape(t);
  Tensor q = Placeholder(g, DType::kF32, s, "q"), k = Placeholder(g, DType::kF32, s, "k"),
         v = Placeholder(g, DType::kF32, s, "v"), dout = Placeholder(g, DType::kF32, s, "dout");
  Tensor out;
  {
    JitScope scope(g, JitScope::Options{true, true});
    AttentionOptions o;
    o.causal = true;
    out = ScaledDotProductAttention(q, k, v, o);
  }
  const Tensor inputs[] = {q, k, v};
  absl::StatusOr<std::vector<Tensor>> grads = Gradients({out}, {inputs[wrt]}, {dout});
  if (!grads.ok()) {
    state.SkipWithError(grads.status().ToString().c_str());
    return;
  }
  const std::vector<Tensor> fetches = {out, (*grads)[0]};
  const Feeds feeds = {{q, values[0]}, {k, values[1]}, {v, values[2]}, {dout, values[3]}};
  Session session(g, SessionOptions());
  std::vector<HostTensor> outputs;
  {
    BrazeWarnings warnings;
    absl::Status st = session.RunInto(feeds, fetches, &outputs);
    if (!st.ok()) {
      state.SkipWithError(st.ToString().c_str());
      return;
    }
    if (warnings.FellBack(state)) return;
  }
  // The reference slice holds out, dq, dk, dv.
  if (!CheckClose(state, outputs[0].data<float>(), want[0], 1e-4, 1e-3) ||
      !CheckClose(state, outputs[1].data<float>(), want[1 + wrt], 1e-4, 1e-3)) {
    return;
  }
  for (auto _ : state) {
    absl::Status st = session.RunInto(feeds, fetches, &outputs);
    if (!st.ok()) {
      state.SkipWithError(st.ToString().c_str());
      return;
    }
    benchmark::DoNotOptimize(outputs[0].raw_data());
  }
}
BENCHMARK(BM_AttentionGrad)
    ->ArgNames({"T", "wrt"})
    ->ArgsProduct({{512, 2048}, {0, 1, 2}})
    ->Apply([](auto* b) { PeerDefaults(b, 0.5); });

}  // namespace
}  // namespace braze::bench
