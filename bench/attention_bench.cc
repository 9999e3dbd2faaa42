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

// The benchmarks' graph: q, k, v and dout placeholders of AttentionShape(t) and causal
// attention of q, k, v (the fused op or the unfused composite) under one JitScope whose
// gradients compile apart.
struct AttentionGraph {
  Graph g;
  Tensor q, k, v, dout, out;
  AttentionGraph(int64_t t, bool fused) {
    const Shape s = AttentionShape(t);
    q = Placeholder(g, DType::kF32, s, "q");
    k = Placeholder(g, DType::kF32, s, "k");
    v = Placeholder(g, DType::kF32, s, "v");
    dout = Placeholder(g, DType::kF32, s, "dout");
    JitScope scope(g, JitScope::Options{true, true});
    AttentionOptions o;
    o.causal = true;
    o.fused = fused;
    out = ScaledDotProductAttention(q, k, v, o);
  }
};

// The first run, into `outputs`, which must compile every cluster without falling back.
// False after a SkipWithError (a failed run, or a fallback warning).
bool FirstRun(benchmark::State& state, Session& session, const Feeds& feeds,
              const std::vector<Tensor>& fetches, std::vector<HostTensor>* outputs) {
  BrazeWarnings warnings;
  const absl::Status st = session.RunInto(feeds, fetches, outputs);
  if (!st.ok()) {
    state.SkipWithError(st.ToString().c_str());
    return false;
  }
  return !warnings.FellBack(state);
}

// The timed runs (after a checked FirstRun).
void TimedRuns(benchmark::State& state, Session& session, const Feeds& feeds,
               const std::vector<Tensor>& fetches, std::vector<HostTensor>* outputs) {
  for (auto _ : state) {
    const absl::Status st = session.RunInto(feeds, fetches, outputs);
    if (!st.ok()) {
      state.SkipWithError(st.ToString().c_str());
      return;
    }
    benchmark::DoNotOptimize((*outputs)[0].raw_data());
  }
}

void BM_Attention(benchmark::State& state) {
  const int64_t t = state.range(0);
  const bool unfused = state.range(1) != 0;
  const bool backward = state.range(2) != 0;
  std::vector<HostTensor> values;
  for (int i = 0; i < 4; ++i) values.push_back(AttentionInput(t, i));
  AttentionReferenceSlice(t);  // before the baseline: its inputs are transient
  PeakMemory peak;
  AttentionGraph a(t, !unfused);
  std::vector<Tensor> fetches = {a.out};
  if (backward) {
    absl::StatusOr<std::vector<Tensor>> grads = Gradients({a.out}, {a.q, a.k, a.v}, {a.dout});
    if (!grads.ok()) {
      state.SkipWithError(grads.status().ToString().c_str());
      return;
    }
    fetches.insert(fetches.end(), grads->begin(), grads->end());
  }
  Feeds feeds = {{a.q, values[0]}, {a.k, values[1]}, {a.v, values[2]}};
  if (backward) feeds.emplace_back(a.dout, values[3]);
  Session session(a.g, SessionOptions());
  std::vector<HostTensor> outputs;
  if (!FirstRun(state, session, feeds, fetches, &outputs)) return;
  std::vector<const float*> got;
  for (const HostTensor& o : outputs) got.push_back(o.data<float>());
  if (!CheckAttention(state, t, got)) return;
  peak.StartTimedRuns();
  TimedRuns(state, session, feeds, fetches, &outputs);
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
  AttentionGraph a(t, /*fused=*/true);
  const Tensor inputs[] = {a.q, a.k, a.v};
  absl::StatusOr<std::vector<Tensor>> grads = Gradients({a.out}, {inputs[wrt]}, {a.dout});
  if (!grads.ok()) {
    state.SkipWithError(grads.status().ToString().c_str());
    return;
  }
  const std::vector<Tensor> fetches = {a.out, (*grads)[0]};
  const Feeds feeds = {{a.q, values[0]}, {a.k, values[1]}, {a.v, values[2]}, {a.dout, values[3]}};
  Session session(a.g, SessionOptions());
  std::vector<HostTensor> outputs;
  if (!FirstRun(state, session, feeds, fetches, &outputs)) return;
  // The reference slice holds out, dq, dk, dv.
  if (!CheckClose(state, outputs[0].data<float>(), want[0], 1e-4, 1e-3) ||
      !CheckClose(state, outputs[1].data<float>(), want[1 + wrt], 1e-4, 1e-3)) {
    return;
  }
  TimedRuns(state, session, feeds, fetches, &outputs);
}
BENCHMARK(BM_AttentionGrad)
    ->ArgNames({"T", "wrt"})
    ->ArgsProduct({{512, 2048}, {0, 1, 2}})
    ->Apply([](auto* b) { PeerDefaults(b, 0.5); });

}  // namespace
}  // namespace braze::bench
