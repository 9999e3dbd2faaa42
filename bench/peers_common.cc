#include "peers_common.h"

#include <sys/resource.h>
#include <sys/time.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "train_models.h"

namespace braze::bench {

HostTensor Chain8Input() { return HostTensor::RandomUniform(DType::kF32, {kChainN}, 1); }
HostTensor RowInput(int64_t rows) {
  return HostTensor::RandomUniform(DType::kF32, {rows, kRowCols}, 4, -4, 4);
}
HostTensor LayerNormGamma() { return HostTensor::RandomUniform(DType::kF32, {kRowCols}, 2); }
HostTensor LayerNormBeta() { return HostTensor::RandomUniform(DType::kF32, {kRowCols}, 3); }
HostTensor MatMulA() { return HostTensor::RandomUniform(DType::kF32, {kMM, kMM}, 7); }
HostTensor MatMulB() { return HostTensor::RandomUniform(DType::kF32, {kMM, kMM}, 5); }
HostTensor MatMulBias() { return HostTensor::RandomUniform(DType::kF32, {kMM}, 6); }

namespace {

// The reference results are kept for the whole run: each is checked by several peers,
// and the MatMul's takes seconds on the reference kernels.
using Cache = std::map<int64_t, HostTensor>;

HostTensor RunOnReferenceKernels(Graph& g, const Feeds& feeds, Tensor out) {
  SessionOptions options;
  options.reference_only = true;
  Session session(g, options);
  absl::StatusOr<std::vector<HostTensor>> result = session.Run(feeds, {out});
  if (!result.ok()) {
    // An empty tensor: CheckClose reports the size mismatch and this message.
    fprintf(stderr, "peers: Braze's reference run failed: %s\n",
            result.status().ToString().c_str());
    return HostTensor(DType::kF32, {0});
  }
  return std::move(result->front());
}

// The graphs of fusion_bench.cc's MakeChain8 / MakeRowOp / MakeMatMulBiasRelu.
HostTensor ComputeChain8() {
  Graph g;
  Tensor x = Placeholder(g, DType::kF32, {kChainN}, "x");
  Tensor y = x * 1.5f;
  y = y + 0.25;
  y = y * x;
  y = y - 0.125;
  y = Maximum(y, ScalarConst(g, -2.0));
  y = Minimum(y, ScalarConst(g, 2.0));
  y = y * 0.5;
  y = y + 1.0;
  return RunOnReferenceKernels(g, {{x, Chain8Input()}}, y);
}

HostTensor ComputeRowOp(int64_t rows, bool layernorm) {
  Graph g;
  Tensor x = Placeholder(g, DType::kF32, {rows, kRowCols}, "x");
  Tensor y =
      layernorm ? LayerNorm(x, Const(g, LayerNormGamma()), Const(g, LayerNormBeta())) : Softmax(x);
  return RunOnReferenceKernels(g, {{x, RowInput(rows)}}, y);
}

HostTensor ComputeMatMulBiasRelu() {
  Graph g;
  Tensor a = Placeholder(g, DType::kF32, {kMM, kMM}, "a");
  Tensor y = Relu(MatMul(a, Const(g, MatMulB())) + Const(g, MatMulBias()));
  return RunOnReferenceKernels(g, {{a, MatMulA()}}, y);
}

template <typename Compute>
const HostTensor& Cached(Cache& cache, int64_t key, Compute compute) {
  auto it = cache.find(key);
  if (it == cache.end()) it = cache.emplace(key, compute()).first;
  return it->second;
}

}  // namespace

// Runs kCheckedSteps steps of a train_models.h model on the reference kernels.
std::vector<float> ReferenceLosses(absl::StatusOr<TrainStep> step) {
  if (!step.ok()) {
    fprintf(stderr, "peers: building Braze's train step failed: %s\n",
            step.status().ToString().c_str());
    return {};
  }
  SessionOptions options;
  options.reference_only = true;
  Session session(*step->graph, options);
  std::vector<float> losses;
  std::vector<HostTensor> outputs;
  for (int i = 0; i < kCheckedSteps; ++i) {
    absl::Status s = session.RunInto(step->feeds, {step->loss}, &outputs, step->train);
    if (!s.ok()) {
      fprintf(stderr, "peers: Braze's reference train step failed: %s\n", s.ToString().c_str());
      return {};
    }
    losses.push_back(outputs[0].data<float>()[0]);
  }
  return losses;
}

const HostTensor& Chain8Reference() {
  static Cache cache;
  return Cached(cache, 0, ComputeChain8);
}
const HostTensor& SoftmaxReference(int64_t rows) {
  static Cache cache;
  return Cached(cache, rows, [&] { return ComputeRowOp(rows, false); });
}
const HostTensor& LayerNormReference(int64_t rows) {
  static Cache cache;
  return Cached(cache, rows, [&] { return ComputeRowOp(rows, true); });
}
const HostTensor& MatMulBiasReluReference() {
  static Cache cache;
  return Cached(cache, 0, ComputeMatMulBiasRelu);
}
const HostTensor& ConvBiasReluReference() {
  static Cache cache;
  return Cached(cache, 0, [] {
    Forward f = MakeConvBiasRelu(/*fused=*/false);
    return RunOnReferenceKernels(*f.graph, f.feeds, f.out);
  });
}
const HostTensor& ResNetBlockReference() {
  static Cache cache;
  return Cached(cache, 0, [] {
    Forward f = MakeResNetBlock(/*fused=*/false);
    return RunOnReferenceKernels(*f.graph, f.feeds, f.out);
  });
}

const std::vector<float>& SoftmaxTrainReferenceLosses(int64_t batch) {
  static std::map<int64_t, std::vector<float>> cache;
  auto it = cache.find(batch);
  if (it == cache.end()) {
    it = cache.emplace(batch, ReferenceLosses(MakeSoftmaxTrainStep(batch, false))).first;
  }
  return it->second;
}
const std::vector<float>& MlpTrainReferenceLosses(int64_t batch) {
  static std::map<int64_t, std::vector<float>> cache;
  auto it = cache.find(batch);
  if (it == cache.end()) {
    it = cache.emplace(batch, ReferenceLosses(MakeMlpTrainStep(batch, false))).first;
  }
  return it->second;
}

const std::vector<float>& ResNetBlockStepReferenceLosses() {
  static std::vector<float> losses = ReferenceLosses(MakeResNetBlockStep(false));
  return losses;
}
const std::vector<float>& CnnStepReferenceLosses(int64_t batch) {
  static std::map<int64_t, std::vector<float>> cache;
  auto it = cache.find(batch);
  if (it == cache.end())
    it = cache.emplace(batch, ReferenceLosses(MakeCnnStep(batch, false))).first;
  return it->second;
}

BrazeWarnings::BrazeWarnings() {
  SetLogSink([this](LogSeverity severity, int, std::string_view text) {
    if (severity != LogSeverity::kInfo && text.find("failed to compile") != text.npos) {
      warnings_.emplace_back(text);
    }
    fprintf(stderr, "braze: %s: %.*s\n", LogSeverityName(severity), int(text.size()), text.data());
  });
}
BrazeWarnings::~BrazeWarnings() { SetLogSink(nullptr); }

bool BrazeWarnings::FellBack(benchmark::State& state) const {
  if (warnings_.empty()) return false;
  state.SkipWithError(
      absl::StrCat(warnings_.size(), " Braze warning(s), the first: ", warnings_.front()).c_str());
  return true;
}

bool CheckClose(benchmark::State& state, const float* got, const HostTensor& want, double atol,
                double rtol) {
  const int64_t n = want.num_elements();
  if (n == 0) {
    state.SkipWithError("no reference result from Braze (see stderr)");
    return false;
  }
  const float* w = want.data<float>();
  double max_abs = 0;
  for (int64_t i = 0; i < n; ++i) max_abs = std::max(max_abs, double(std::fabs(w[i])));
  const double abs_part = atol * std::max(1.0, max_abs);
  int64_t worst = -1;
  double worst_excess = 0;
  for (int64_t i = 0; i < n; ++i) {
    const double err = std::fabs(double(got[i]) - double(w[i]));
    const double excess = err - (abs_part + rtol * std::fabs(w[i]));
    // !(excess <= 0) also catches a NaN.
    if (!(excess <= 0) && (worst < 0 || !(excess <= worst_excess))) {
      worst = i;
      worst_excess = excess;
    }
  }
  if (worst < 0) return true;
  state.SkipWithError(absl::StrCat("result differs from Braze's reference at element ", worst, ": ",
                                   got[worst], " vs ", w[worst])
                          .c_str());
  return false;
}

bool CheckTrainLosses(benchmark::State& state, const std::function<float()>& step,
                      const std::vector<float>& want, double rtol) {
  if (want.size() != size_t{kCheckedSteps}) {
    state.SkipWithError("no reference losses from Braze (see stderr)");
    return false;
  }
  for (int i = 0; i < kCheckedSteps; ++i) {
    const float got = step();
    if (!(std::fabs(got - want[i]) <= rtol * std::fabs(want[i]))) {
      state.SkipWithError(
          absl::StrCat("loss of step ", i, " is ", got, ", Braze's ", want[i]).c_str());
      return false;
    }
  }
  return true;
}

void SetRate(benchmark::State& state, const char* name, double per_iteration) {
  state.counters[name] =
      benchmark::Counter(per_iteration * state.iterations(), benchmark::Counter::kIsRate);
}

double ProcessCpuSeconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  auto seconds = [](const timeval& t) { return double(t.tv_sec) + double(t.tv_usec) / 1e6; };
  return seconds(u.ru_utime) + seconds(u.ru_stime);
}

void SetCpuPerStep(benchmark::State& state, double cpu_seconds_before) {
  if (state.iterations() == 0) return;
  state.counters["cpu_ms/step"] =
      (ProcessCpuSeconds() - cpu_seconds_before) * 1e3 / double(state.iterations());
}

benchmark::internal::Benchmark* PeerDefaults(benchmark::internal::Benchmark* b, double min_time) {
  return b->Unit(benchmark::kMillisecond)->MinTime(min_time)->UseRealTime();
}

benchmark::internal::Benchmark* RowSizes(benchmark::internal::Benchmark* b) {
  return b->ArgName("rows")->Arg(4096)->Arg(16384);
}

}  // namespace braze::bench
