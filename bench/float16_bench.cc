// bf16 and f16 against f32 in Braze (docs/MIXED_PRECISION.md): MatMul + bias + ReLU,
// 1024^3, the same values (MatMulA/B/Bias rounded to the 16-bit type), one fused cluster
// each. peers_onednn.cc's BM_MatMulBiasRelu_onednn_bf16 is oneDNN's bf16 matmul with the
// same post-ops called directly, in the same run. The bf16 cluster is one call of
// oneDNN's bf16 matmul with the bias and ReLU in it and the constant weights packed
// (docs/CPU_GEMM.md); f16 is the f32 call on widened copies (oneDNN 2.6 has no f16
// matmul on a CPU without AVX512-FP16).
//
//   BM_MatMulBiasRelu_dtype/0: f32; /1: bf16; /2: f16 (inputs, weights, bias and output).
//
// A 16-bit result is checked against the f32 reference at the tolerance the 16-bit
// inputs allow (each product an ulp or two of bf16 off, 1024 of them summed).
#include <benchmark/benchmark.h>

#include <vector>

#include "braze/braze.h"
#include "braze/jit_scope.h"
#include "peers_common.h"

namespace braze {
namespace {

constexpr int64_t kMM = 1024;
const DType kDTypes[] = {DType::kF32, DType::kBF16, DType::kF16};

HostTensor As(const HostTensor& t, DType dtype) {
  HostTensor out(dtype, t.shape());
  for (int64_t i = 0; i < t.num_elements(); ++i) out.SetDouble(i, t.GetDouble(i));
  return out;
}

void BM_MatMulBiasRelu_dtype(benchmark::State& state) {
  const DType dtype = kDTypes[state.range(0)];
  state.SetLabel(DTypeName(dtype));
  Graph g;
  Tensor a = Placeholder(g, dtype, {kMM, kMM}, "a");
  Tensor b = Const(g, As(bench::MatMulB(), dtype));
  Tensor bias = Const(g, As(bench::MatMulBias(), dtype));
  Tensor out;
  {
    JitScope scope(g);
    out = Relu(MatMul(a, b) + bias);
  }
  const Feeds feeds = {{a, As(bench::MatMulA(), dtype)}};
  bench::BrazeWarnings warnings;
  Session session(g, SessionOptions());
  std::vector<HostTensor> outputs;
  absl::Status s = session.RunInto(feeds, {out}, &outputs);  // compile + warm up
  if (!s.ok()) {
    state.SkipWithError(s.ToString().c_str());
    return;
  }
  if (warnings.FellBack(state)) return;
  const HostTensor got = As(outputs[0], DType::kF32);
  const bool wide = dtype == DType::kF32;
  if (!bench::CheckClose(state, got.data<float>(), bench::MatMulBiasReluReference(),
                         wide ? 1e-5 : 1e-2, wide ? 1e-4 : 2e-2)) {
    return;
  }
  for (auto _ : state) {
    s = session.RunInto(feeds, {out}, &outputs);
    if (!s.ok()) {
      state.SkipWithError(s.ToString().c_str());
      return;
    }
    benchmark::DoNotOptimize(outputs[0].raw_data());
  }
  state.counters["GFLOP/s"] = benchmark::Counter(2.0 * kMM * kMM * kMM / 1e9 * state.iterations(),
                                                 benchmark::Counter::kIsRate);
}
// CPU time is the process's (every thread: Braze's pool and oneDNN's OpenMP workers), as
// for the oneDNN bf16 peer: on a loaded machine the CPU-time ratio of the two is an
// indication where wall times are not.
BENCHMARK(BM_MatMulBiasRelu_dtype)
    ->ArgName("dtype")
    ->DenseRange(0, 2)
    ->Unit(benchmark::kMillisecond)
    ->MinTime(1.0)
    ->MeasureProcessCPUTime()
    ->UseRealTime();

}  // namespace
}  // namespace braze
