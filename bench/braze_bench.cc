// Braze benchmarks (Google Benchmark; main is main.cc).
//
// BM_Copy measures the machine's memory roof (memcpy, read + write bytes), the number
// every elementwise result is judged against. BM_ReferenceChain8 runs an 8-op elementwise
// chain on the reference kernels: the plain-loop baseline. fusion_bench.cc (same binary)
// runs such chains compiled op by op and fused.
//
// BM_ReferenceChain8's output is checked against the same chain computed in a plain
// loop here (peers_common.h's CheckClose) before the timing.
//
// "GB/s" counters are rates of 1e9 bytes. For the chain they count the bytes a fused
// kernel must move (read x, write y), so every way of running it compares directly.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "braze/braze.h"
#include "peers_common.h"

namespace braze {
namespace {

void SetGbPerSecond(benchmark::State& state, double bytes_per_iteration) {
  const double bytes = bytes_per_iteration * static_cast<double>(state.iterations());
  state.SetBytesProcessed(static_cast<int64_t>(bytes));
  state.counters["GB/s"] = benchmark::Counter(bytes / 1e9, benchmark::Counter::kIsRate);
}

void BM_Copy(benchmark::State& state) {
  const size_t bytes = static_cast<size_t>(state.range(0));
  std::vector<uint8_t> src(bytes, 1), dst(bytes, 0);  // filled: no first-touch faults
  for (auto _ : state) {
    std::memcpy(dst.data(), src.data(), bytes);
    benchmark::DoNotOptimize(dst.data());
    benchmark::ClobberMemory();
  }
  SetGbPerSecond(state, 2.0 * bytes);  // read + write
}
BENCHMARK(BM_Copy)->Arg(64 << 20)->Unit(benchmark::kMillisecond)->MinTime(0.2)->UseRealTime();

// An 8-op elementwise chain on 1M floats, every op on the reference kernels: the
// plain-loop baseline under fusion_bench.cc's unfused (compiled op by op) and fused runs.
void BM_ReferenceChain8(benchmark::State& state) {
  const int64_t n = state.range(0);
  Graph g;
  Tensor x = Placeholder(g, DType::kF32, {n}, "x");
  // Eight elementwise ops (the scalars are Const nodes, not ops), values kept finite.
  Tensor y = x * 1.5;  // Mul
  y = y + 0.25;        // Add
  y = Abs(y);          // Abs
  y = Sqrt(y);         // Sqrt
  y = Neg(y);          // Neg
  y = Exp(y);          // Exp
  y = Square(y);       // Square
  y = y - 0.5;         // Sub
  if (!g.status().ok()) {
    state.SkipWithError(g.status().ToString().c_str());
    return;
  }
  SessionOptions options;
  options.reference_only = true;
  Session session(g, options);
  const HostTensor input = HostTensor::RandomUniform(DType::kF32, {n}, /*seed=*/7);
  const Feeds feeds = {{x, input}};
  // One untimed run: planning and first-touch page faults stay out of the timing.
  absl::StatusOr<std::vector<HostTensor>> warm = session.Run(feeds, {y});
  if (!warm.ok()) {
    state.SkipWithError(warm.status().ToString().c_str());
    return;
  }
  HostTensor want(DType::kF32, {n});
  for (int64_t i = 0; i < n; ++i) {
    const float v = std::exp(-std::sqrt(std::fabs(input.data<float>()[i] * 1.5f + 0.25f)));
    want.data<float>()[i] = v * v - 0.5f;
  }
  if (!bench::CheckClose(state, warm->front().data<float>(), want, 1e-5, 1e-4)) return;
  session.ResetStats();
  for (auto _ : state) {
    absl::StatusOr<std::vector<HostTensor>> out = session.Run(feeds, {y});
    if (!out.ok()) {
      state.SkipWithError(out.status().ToString().c_str());
      return;
    }
    benchmark::DoNotOptimize(out->front().raw_data());
  }
  SetGbPerSecond(state, 2.0 * n * sizeof(float));
  // Kernels per Run, a check that the chain really ran op by op: 8.
  const SessionStats stats = session.stats();
  state.counters["kernels"] = static_cast<double>(stats.reference_launches) /
                              static_cast<double>(std::max<int64_t>(stats.runs, 1));
}
BENCHMARK(BM_ReferenceChain8)
    ->Arg(1 << 20)
    ->Unit(benchmark::kMillisecond)
    ->MinTime(0.5)
    ->UseRealTime();

}  // namespace
}  // namespace braze
