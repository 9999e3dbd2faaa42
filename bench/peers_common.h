// What the peer benchmarks (peers_*.cc) share: the workloads' inputs, made with exactly
// the shapes and seeds of Braze's own variants (fusion_bench.cc, train_models.h), Braze's
// results on its reference kernels (SessionOptions::reference_only) to check a peer
// against, and the timing helpers. Braze's own benchmarks (fusion_bench.cc,
// train_bench.cc, braze_bench.cc) check their outputs and losses with the same
// references and rules, so this file is built with or without the peers.
//
// A peer benchmark is named BM_<Workload>_<peer> with the arg names of Braze's variant
// (BM_Softmax_onednn/rows:4096), so tools/braze-plot draws it beside Braze's bars. It runs
// once untimed, checks that result, and times only when it matches: a wrong peer is a
// SkipWithError, never a number.
#ifndef BRAZE_BENCH_PEERS_COMMON_H_
#define BRAZE_BENCH_PEERS_COMMON_H_

#include <benchmark/benchmark.h>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "braze/braze.h"
#include "train_models.h"

namespace braze::bench {

// ---- The workloads of fusion_bench.cc ----
// Chain8: y = min(max((x * 1.5 + 0.25) * x - 0.125, -2), 2) * 0.5 + 1 over 16M f32.
constexpr int64_t kChainN = 16 << 20;
// Softmax and LayerNorm (epsilon 1e-5) over rows of 1024.
constexpr int64_t kRowCols = 1024;
constexpr float kLayerNormEpsilon = 1e-5f;
// MatMul + bias + ReLU: relu(a b + bias), all 1024 square.
constexpr int64_t kMM = 1024;

HostTensor Chain8Input();           // [kChainN], seed 1
HostTensor RowInput(int64_t rows);  // [rows, 1024] in [-4, 4), seed 4
HostTensor LayerNormGamma();        // [1024], seed 2
HostTensor LayerNormBeta();         // [1024], seed 3
HostTensor MatMulA();               // [1024, 1024], seed 7
HostTensor MatMulB();               // [1024, 1024], seed 5
HostTensor MatMulBias();            // [1024], seed 6

// Braze's reference results for those inputs, computed on first use and kept.
const HostTensor& Chain8Reference();
const HostTensor& SoftmaxReference(int64_t rows);
const HostTensor& LayerNormReference(int64_t rows);
const HostTensor& MatMulBiasReluReference();

// ---- The train steps of train_models.h ----
// The steps whose losses a peer must reproduce: the first (the initial weights) and
// the ones after it (the gradients and the update).
constexpr int kCheckedSteps = 4;
// Braze's losses of the first kCheckedSteps steps (each before its update), on the
// reference kernels.
// Runs kCheckedSteps steps of a train step on the reference kernels: the losses before
// each update (empty, with a message on stderr, when building or running fails).
std::vector<float> ReferenceLosses(absl::StatusOr<TrainStep> step);
const std::vector<float>& SoftmaxTrainReferenceLosses(int64_t batch);
const std::vector<float>& MlpTrainReferenceLosses(int64_t batch);

// ---- The convolution workloads (conv_bench.cc, train_models.h) ----
// The forward results of MakeConvBiasRelu and MakeResNetBlock on the reference kernels,
// and the losses of MakeResNetBlockStep and MakeCnnStep: computed on first use and kept
// (the reference convolutions are plain double loops: seconds each at 32x56x56x64).
const HostTensor& ConvBiasReluReference();
const HostTensor& ResNetBlockReference();
const std::vector<float>& ResNetBlockStepReferenceLosses();
const std::vector<float>& CnnStepReferenceLosses(int64_t batch);
// The convolutions' arithmetic: 2 * N * OH * OW * KH * KW * C_in * C_out, in 1e9.
inline double Conv3x3Gflop(int64_t n, int64_t side, int64_t c_in, int64_t c_out) {
  return 2.0 * n * side * side * 9 * c_in * c_out / 1e9;
}

// ---- Checks ----
// True when every element of got is within atol * max(1, max |want|) + rtol * |want| of
// want (the rule of SessionOptions' verify mode); otherwise SkipWithError naming the
// worst element, and false.
bool CheckClose(benchmark::State& state, const float* got, const HostTensor& want, double atol,
                double rtol);
// Runs `step` (one train step, returning the loss before its update) kCheckedSteps
// times and compares the losses with want, relative tolerance rtol; SkipWithError and
// false on a mismatch.
bool CheckTrainLosses(benchmark::State& state, const std::function<float()>& step,
                      const std::vector<float>& want, double rtol);

// Braze's "failed to compile" warnings while it lives: a log sink that keeps them and
// writes every message to stderr as the default sink does. A cluster or op that fails to
// compile runs op by op or on its reference kernel, with a warning naming it and why;
// Braze's own benchmarks fail on one (FellBack) rather than time the fallback. Other
// warnings (a disk cache turned off, say) change no kernel. One at a time (the sink is
// process-wide).
class BrazeWarnings {
 public:
  BrazeWarnings();
  ~BrazeWarnings();
  BrazeWarnings(const BrazeWarnings&) = delete;
  BrazeWarnings& operator=(const BrazeWarnings&) = delete;
  // SkipWithError with the first warning and true when there was one.
  bool FellBack(benchmark::State& state) const;

 private:
  std::vector<std::string> warnings_;  // the "failed to compile" ones
};

// ---- Timing ----
// A rate counter ("GB/s", "GFLOP/s") of per_iteration units per iteration, in 1e9/s.
void SetRate(benchmark::State& state, const char* name, double per_iteration);
// The process's CPU time (every thread, user and system), in seconds. A train step's
// "cpu_ms/step" counter is its difference over the timed loop per iteration: on a machine
// loaded by other jobs the wall time says more of the load than of the step, while CPU
// time counts what the step itself ran (spin-waits of idle pool threads included).
double ProcessCpuSeconds();
// Sets "cpu_ms/step" from ProcessCpuSeconds() before the timed loop.
void SetCpuPerStep(benchmark::State& state, double cpu_seconds_before);
// Fusion_bench's GB/s: the bytes a fused kernel must move (read the input, write the
// output) for n floats, in units of 1e9.
inline double ReadWriteGB(int64_t n) { return 2.0 * n * sizeof(float) / 1e9; }

// The settings every peer benchmark of one workload shares with Braze's variant of it.
benchmark::internal::Benchmark* PeerDefaults(benchmark::internal::Benchmark* b, double min_time);
// Softmax and LayerNorm's sizes: ArgName("rows"), 4096 and 16384.
benchmark::internal::Benchmark* RowSizes(benchmark::internal::Benchmark* b);

}  // namespace braze::bench

#endif  // BRAZE_BENCH_PEERS_COMMON_H_
