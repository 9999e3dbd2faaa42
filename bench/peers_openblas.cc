// Peers: OpenBLAS's sgemm (its own pthreads) for the matmuls, with the elementwise work
// around them in fused OpenMP passes, as a hand-written framework-free program does it.
//
//   BM_MatMulBiasRelu_openblas: cblas_sgemm, then one bias + ReLU pass.
//   BM_MlpTrainStep_openblas:   train_models.h's MLP step (784-1024-1024-10, ReLU,
//     softmax cross entropy, Adam): eight sgemms (forward, and for each layer the weight
//     gradient and, past the first, the input gradient), each followed by one fused pass
//     (peers_mlp.h, shared with the oneDNN peer of the same step).
//
// main.cc picks OpenBLAS's core (OPENBLAS_CORETYPE) and thread count; the context keys
// below record what ran.
#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <string>
#include <vector>

#include "bench_context.h"
#include "peers_common.h"
#include "peers_mlp.h"

namespace braze::bench {
namespace {

BRAZE_BENCH_CONTEXT([] {
  AddContext("openblas_config", openblas_get_config());
  AddContext("openblas_core", openblas_get_corename());
  AddContext("openblas_threads", std::to_string(openblas_get_num_threads()) +
                                     (openblas_get_parallel() == 0   ? " (sequential build)"
                                      : openblas_get_parallel() == 1 ? " (pthreads)"
                                                                     : " (OpenMP)"));
  const char* timeout = std::getenv("OPENBLAS_THREAD_TIMEOUT");
  AddContext("openblas_wait",
             timeout != nullptr
                 ? std::string("OPENBLAS_THREAD_TIMEOUT=") + timeout
                 : std::string("OpenBLAS's default: its workers spin (sched_yield) for 2^28 TSC "
                               "cycles (about 0.1 s) after a call, longer than Braze's pool"));
});

// C [m, n] = op(A) op(B), row-major; op transposes when the flag says so.
void Gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, const float* a,
          const float* b, float* c) {
  cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans,
              trans_b ? CblasTrans : CblasNoTrans, m, n, k, 1.0f, a, trans_a ? m : k, b,
              trans_b ? k : n, 0.0f, c, n);
}

// ---- MatMul + bias + ReLU ----
void BM_MatMulBiasRelu_openblas(benchmark::State& state) {
  const HostTensor a = MatMulA(), b = MatMulB(), bias = MatMulBias();
  HostTensor y(DType::kF32, {kMM, kMM});
  auto run = [&] {
    Gemm(false, false, kMM, kMM, kMM, a.data<float>(), b.data<float>(), y.data<float>());
    peers_mlp::BiasActivation(y.data<float>(), bias.data<float>(), kMM, kMM, true);
  };
  run();
  if (!CheckClose(state, y.data<float>(), MatMulBiasReluReference(), 1e-5, 1e-4)) return;
  for (auto _ : state) {
    run();
    benchmark::ClobberMemory();
  }
  SetRate(state, "GFLOP/s", 2.0 * kMM * kMM * kMM / 1e9);
}
BENCHMARK(BM_MatMulBiasRelu_openblas)->Apply([](auto* b) { PeerDefaults(b, 1.0); });

// ---- MLP train step ----
void BM_MlpTrainStep_openblas(benchmark::State& state) {
  peers_mlp::Mlp model(state.range(0), Gemm);
  peers_mlp::RunMlpStep(state, model);
}
BENCHMARK(BM_MlpTrainStep_openblas)->Apply([](auto* b) {
  PeerDefaults(b->ArgName("batch")->Arg(128), 2.0);
});

}  // namespace
}  // namespace braze::bench
