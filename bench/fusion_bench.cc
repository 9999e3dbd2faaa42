// Fused vs unfused vs a hand-written fused loop, in one binary so they are compared in
// one run on one machine (together with BM_Copy, the memory roof).
//
//   fused:    the workload under one JitScope: one Halide pipeline per cluster.
//   unfused:  no JIT: every op is its own compiled Halide kernel (cached, buffers reused
//             across runs) — TF's op-by-op executor, a fair baseline, not a slow loop.
//   handloop: the fused computation written by hand in C++ (threads over rows/chunks).
//   symbolic: fused, with the leading dim of the input a -1 placeholder dim: one kernel
//             compiled for every size (docs/SYMBOLIC_SHAPES.md), run at the same size.
//
// Fetches go through Session::RunInto with a reused output, so no run copies its result.
//
// Every variant's output (and every hand loop's) is checked against Braze's reference
// kernels (peers_common.h, the same inputs) after its untimed first run, with the
// tolerances the peers are held to: a mismatch is a SkipWithError, never a number.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <memory>
#include <thread>
#include <vector>

#include "braze/braze.h"
#include "braze/jit_scope.h"
#include "peers_common.h"

namespace braze {
namespace {

enum Variant { kFused = 0, kUnfused = 1, kSymbolic = 2 };

// The placeholder's shape: its leading dim -1 for kSymbolic.
Shape Declared(Shape shape, Variant v) {
  if (v == kSymbolic) shape[0] = -1;
  return shape;
}

// Splits [0, n) over the machine's cores, as the Halide kernels do.
void ParallelFor(int64_t n, const std::function<void(int64_t, int64_t)>& body) {
  const int64_t threads = std::max(1u, std::thread::hardware_concurrency());
  std::vector<std::thread> pool;
  const int64_t chunk = (n + threads - 1) / threads;
  for (int64_t t = 0; t < threads; ++t) {
    const int64_t lo = t * chunk, hi = std::min(n, lo + chunk);
    if (lo < hi) pool.emplace_back(body, lo, hi);
  }
  for (auto& th : pool) th.join();
}

struct Workload {
  Graph graph;
  Feeds feeds;
  Tensor out;
  // The reference result the first run must match (bench::CheckClose's rule).
  const HostTensor* want = nullptr;
  double atol = 1e-5, rtol = 1e-4;
};

// Runs a workload through a session in the given variant, reporting failures as skips.
void RunSession(benchmark::State& state, Workload& w, Variant variant) {
  SessionOptions opts;
  Session session(w.graph, opts);
  std::vector<HostTensor> outputs;
  absl::Status s = session.RunInto(w.feeds, {w.out}, &outputs);  // compile + warm up
  if (!s.ok()) {
    state.SkipWithError(s.ToString().c_str());
    return;
  }
  if (w.want == nullptr) {
    state.SkipWithError("no reference result to check Braze's output against");
    return;
  }
  if (!bench::CheckClose(state, outputs[0].data<float>(), *w.want, w.atol, w.rtol)) return;
  session.ResetStats();
  for (auto _ : state) {
    s = session.RunInto(w.feeds, {w.out}, &outputs);
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
}

void SetRate(benchmark::State& state, const char* name, double per_iteration) {
  state.counters[name] =
      benchmark::Counter(per_iteration * state.iterations(), benchmark::Counter::kIsRate);
}

// ---- Chain8: eight elementwise ops over 16M f32 ----
constexpr int64_t kChainN = 16 << 20;

Tensor Chain8(Tensor x) {
  Tensor y = x * 1.5f;
  y = y + 0.25;
  y = y * x;
  y = y - 0.125;
  y = Maximum(y, ScalarConst(*x.graph(), -2.0));
  y = Minimum(y, ScalarConst(*x.graph(), 2.0));
  y = y * 0.5;
  y = y + 1.0;
  return y;
}

std::unique_ptr<Workload> MakeChain8(Variant v) {
  auto w = std::make_unique<Workload>();
  Tensor x = Placeholder(w->graph, DType::kF32, Declared({kChainN}, v), "x");
  if (v != kUnfused) {
    JitScope scope(w->graph);
    w->out = Chain8(x);
  } else {
    w->out = Chain8(x);
  }
  w->feeds = {{x, HostTensor::RandomUniform(DType::kF32, {kChainN}, 1)}};
  w->want = &bench::Chain8Reference();
  w->atol = 1e-6;
  w->rtol = 1e-5;
  return w;
}

void BM_Chain8(benchmark::State& state) {
  auto w = MakeChain8(Variant(state.range(0)));
  RunSession(state, *w, Variant(state.range(0)));
  SetRate(state, "GB/s", 2.0 * kChainN * sizeof(float) / 1e9);
}
BENCHMARK(BM_Chain8)
    ->ArgName("unfused")
    ->Arg(kFused)
    ->Arg(kUnfused)
    ->Unit(benchmark::kMillisecond)
    ->MinTime(0.5)
    ->UseRealTime();

void BM_Chain8_handloop(benchmark::State& state) {
  HostTensor x = HostTensor::RandomUniform(DType::kF32, {kChainN}, 1);
  HostTensor y(DType::kF32, {kChainN});
  const float* in = x.data<float>();
  float* out = y.data<float>();
  auto run = [&] {
    ParallelFor(kChainN, [&](int64_t lo, int64_t hi) {
      for (int64_t i = lo; i < hi; ++i) {
        float v = ((in[i] * 1.5f + 0.25f) * in[i]) - 0.125f;
        v = std::min(std::max(v, -2.0f), 2.0f);
        out[i] = v * 0.5f + 1.0f;
      }
    });
  };
  run();
  if (!bench::CheckClose(state, out, bench::Chain8Reference(), 1e-6, 1e-5)) return;
  for (auto _ : state) {
    run();
    benchmark::DoNotOptimize(out);
  }
  SetRate(state, "GB/s", 2.0 * kChainN * sizeof(float) / 1e9);
}
void BM_Chain8_symbolic(benchmark::State& state) {
  auto w = MakeChain8(kSymbolic);
  RunSession(state, *w, kSymbolic);
  SetRate(state, "GB/s", 2.0 * kChainN * sizeof(float) / 1e9);
}
BENCHMARK(BM_Chain8_symbolic)->Unit(benchmark::kMillisecond)->MinTime(0.5)->UseRealTime();

BENCHMARK(BM_Chain8_handloop)->Unit(benchmark::kMillisecond)->MinTime(0.5)->UseRealTime();

// ---- Softmax and LayerNorm over rows of 1024 ----
std::unique_ptr<Workload> MakeRowOp(Variant v, int64_t rows, bool layernorm) {
  auto w = std::make_unique<Workload>();
  Tensor x = Placeholder(w->graph, DType::kF32, Declared({rows, 1024}, v), "x");
  auto build = [&] {
    if (!layernorm) return Softmax(x);
    Tensor gamma = Const(w->graph, HostTensor::RandomUniform(DType::kF32, {1024}, 2));
    Tensor beta = Const(w->graph, HostTensor::RandomUniform(DType::kF32, {1024}, 3));
    return LayerNorm(x, gamma, beta);
  };
  if (v != kUnfused) {
    JitScope scope(w->graph);
    w->out = build();
  } else {
    w->out = build();
  }
  w->feeds = {{x, HostTensor::RandomUniform(DType::kF32, {rows, 1024}, 4, -4, 4)}};
  w->want = layernorm ? &bench::LayerNormReference(rows) : &bench::SoftmaxReference(rows);
  return w;
}

void BM_Softmax(benchmark::State& state) {
  const int64_t rows = state.range(1);
  auto w = MakeRowOp(Variant(state.range(0)), rows, false);
  RunSession(state, *w, Variant(state.range(0)));
  SetRate(state, "GB/s", 2.0 * rows * 1024 * sizeof(float) / 1e9);
}
void BM_LayerNorm(benchmark::State& state) {
  const int64_t rows = state.range(1);
  auto w = MakeRowOp(Variant(state.range(0)), rows, true);
  RunSession(state, *w, Variant(state.range(0)));
  SetRate(state, "GB/s", 2.0 * rows * 1024 * sizeof(float) / 1e9);
}
BENCHMARK(BM_Softmax)
    ->ArgNames({"unfused", "rows"})
    ->ArgsProduct({{kFused, kUnfused}, {4096, 16384}})
    ->Unit(benchmark::kMillisecond)
    ->MinTime(0.5)
    ->UseRealTime();
BENCHMARK(BM_LayerNorm)
    ->ArgNames({"unfused", "rows"})
    ->ArgsProduct({{kFused, kUnfused}, {4096, 16384}})
    ->Unit(benchmark::kMillisecond)
    ->MinTime(0.5)
    ->UseRealTime();

void BM_Softmax_symbolic(benchmark::State& state) {
  const int64_t rows = state.range(0);
  auto w = MakeRowOp(kSymbolic, rows, false);
  RunSession(state, *w, kSymbolic);
  SetRate(state, "GB/s", 2.0 * rows * 1024 * sizeof(float) / 1e9);
}
void BM_LayerNorm_symbolic(benchmark::State& state) {
  const int64_t rows = state.range(0);
  auto w = MakeRowOp(kSymbolic, rows, true);
  RunSession(state, *w, kSymbolic);
  SetRate(state, "GB/s", 2.0 * rows * 1024 * sizeof(float) / 1e9);
}
BENCHMARK(BM_Softmax_symbolic)
    ->ArgName("rows")
    ->Arg(4096)
    ->Arg(16384)
    ->Unit(benchmark::kMillisecond)
    ->MinTime(0.5)
    ->UseRealTime();
BENCHMARK(BM_LayerNorm_symbolic)
    ->ArgName("rows")
    ->Arg(4096)
    ->Arg(16384)
    ->Unit(benchmark::kMillisecond)
    ->MinTime(0.5)
    ->UseRealTime();

void RowHandloop(benchmark::State& state, bool layernorm) {
  const int64_t rows = state.range(0), cols = 1024;
  HostTensor x = HostTensor::RandomUniform(DType::kF32, {rows, cols}, 4, -4, 4);
  HostTensor gamma = HostTensor::RandomUniform(DType::kF32, {cols}, 2);
  HostTensor beta = HostTensor::RandomUniform(DType::kF32, {cols}, 3);
  HostTensor y(DType::kF32, {rows, cols});
  const float* in = x.data<float>();
  const float* g = gamma.data<float>();
  const float* b = beta.data<float>();
  float* out = y.data<float>();
  auto run = [&] {
    ParallelFor(rows, [&](int64_t lo, int64_t hi) {
      for (int64_t r = lo; r < hi; ++r) {
        const float* row = in + r * cols;
        float* o = out + r * cols;
        if (layernorm) {
          float mean = 0, var = 0;
          for (int64_t c = 0; c < cols; ++c) mean += row[c];
          mean /= cols;
          for (int64_t c = 0; c < cols; ++c) var += (row[c] - mean) * (row[c] - mean);
          const float inv = 1.0f / std::sqrt(var / cols + 1e-5f);
          for (int64_t c = 0; c < cols; ++c) o[c] = (row[c] - mean) * inv * g[c] + b[c];
        } else {
          float m = row[0];
          for (int64_t c = 1; c < cols; ++c) m = std::max(m, row[c]);
          float sum = 0;
          for (int64_t c = 0; c < cols; ++c) sum += (o[c] = std::exp(row[c] - m));
          const float inv = 1.0f / sum;
          for (int64_t c = 0; c < cols; ++c) o[c] *= inv;
        }
      }
    });
  };
  run();
  const HostTensor& want =
      layernorm ? bench::LayerNormReference(rows) : bench::SoftmaxReference(rows);
  if (!bench::CheckClose(state, out, want, 1e-5, 1e-4)) return;
  for (auto _ : state) {
    run();
    benchmark::DoNotOptimize(out);
  }
  SetRate(state, "GB/s", 2.0 * rows * cols * sizeof(float) / 1e9);
}
void BM_Softmax_handloop(benchmark::State& state) { RowHandloop(state, false); }
void BM_LayerNorm_handloop(benchmark::State& state) { RowHandloop(state, true); }
BENCHMARK(BM_Softmax_handloop)
    ->ArgName("rows")
    ->Arg(4096)
    ->Arg(16384)
    ->Unit(benchmark::kMillisecond)
    ->MinTime(0.5)
    ->UseRealTime();
BENCHMARK(BM_LayerNorm_handloop)
    ->ArgName("rows")
    ->Arg(4096)
    ->Arg(16384)
    ->Unit(benchmark::kMillisecond)
    ->MinTime(0.5)
    ->UseRealTime();

// ---- MatMul + bias + ReLU, 1024^3 ----
constexpr int64_t kMM = 1024;

std::unique_ptr<Workload> MakeMatMulBiasRelu(Variant v) {
  auto w = std::make_unique<Workload>();
  Tensor a = Placeholder(w->graph, DType::kF32, Declared({kMM, kMM}, v), "a");
  Tensor b = Const(w->graph, HostTensor::RandomUniform(DType::kF32, {kMM, kMM}, 5));
  Tensor bias = Const(w->graph, HostTensor::RandomUniform(DType::kF32, {kMM}, 6));
  if (v != kUnfused) {
    JitScope scope(w->graph);
    w->out = Relu(MatMul(a, b) + bias);
  } else {
    w->out = Relu(MatMul(a, b) + bias);
  }
  w->feeds = {{a, HostTensor::RandomUniform(DType::kF32, {kMM, kMM}, 7)}};
  w->want = &bench::MatMulBiasReluReference();
  return w;
}

void BM_MatMulBiasRelu(benchmark::State& state) {
  auto w = MakeMatMulBiasRelu(Variant(state.range(0)));
  RunSession(state, *w, Variant(state.range(0)));
  SetRate(state, "GFLOP/s", 2.0 * kMM * kMM * kMM / 1e9);
}
BENCHMARK(BM_MatMulBiasRelu)
    ->ArgName("unfused")
    ->Arg(kFused)
    ->Arg(kUnfused)
    ->Unit(benchmark::kMillisecond)
    ->MinTime(1.0)
    ->UseRealTime();

void BM_MatMulBiasRelu_symbolic(benchmark::State& state) {
  auto w = MakeMatMulBiasRelu(kSymbolic);
  RunSession(state, *w, kSymbolic);
  SetRate(state, "GFLOP/s", 2.0 * kMM * kMM * kMM / 1e9);
}
BENCHMARK(BM_MatMulBiasRelu_symbolic)->Unit(benchmark::kMillisecond)->MinTime(1.0)->UseRealTime();

void BM_MatMulBiasRelu_handloop(benchmark::State& state) {
  HostTensor a = HostTensor::RandomUniform(DType::kF32, {kMM, kMM}, 7);
  HostTensor b = HostTensor::RandomUniform(DType::kF32, {kMM, kMM}, 5);
  HostTensor bias = HostTensor::RandomUniform(DType::kF32, {kMM}, 6);
  HostTensor y(DType::kF32, {kMM, kMM});
  const float* pa = a.data<float>();
  const float* pb = b.data<float>();
  const float* pbias = bias.data<float>();
  float* out = y.data<float>();
  auto run = [&] {
    // i-k-j order with a 64-row block of B kept hot: the compiler vectorizes the j loop.
    ParallelFor(kMM, [&](int64_t lo, int64_t hi) {
      for (int64_t i = lo; i < hi; ++i) {
        float* o = out + i * kMM;
        for (int64_t j = 0; j < kMM; ++j) o[j] = pbias[j];
        for (int64_t k = 0; k < kMM; ++k) {
          const float av = pa[i * kMM + k];
          const float* brow = pb + k * kMM;
          for (int64_t j = 0; j < kMM; ++j) o[j] += av * brow[j];
        }
        for (int64_t j = 0; j < kMM; ++j) o[j] = std::max(o[j], 0.0f);
      }
    });
  };
  run();
  if (!bench::CheckClose(state, out, bench::MatMulBiasReluReference(), 1e-5, 1e-4)) return;
  for (auto _ : state) {
    run();
    benchmark::DoNotOptimize(out);
  }
  SetRate(state, "GFLOP/s", 2.0 * kMM * kMM * kMM / 1e9);
}
BENCHMARK(BM_MatMulBiasRelu_handloop)->Unit(benchmark::kMillisecond)->MinTime(1.0)->UseRealTime();

}  // namespace
}  // namespace braze
