// Peers: the workloads as a performance-minded C++ programmer writes them by hand, with
// OpenMP over the cores and loops the compiler vectorizes (-O3 -march=native
// -fno-trapping-math, set for this file in CMakeLists.txt).
//
//   BM_Chain8_omp, BM_Softmax_omp, BM_LayerNorm_omp: each element / row read from memory
//     once (a row's later passes hit the cache).
//   BM_SoftmaxTrainStep_handfused: the softmax regression step of train_models.h in one
//     parallel region: logits, softmax cross entropy, gradient and SGD update.
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <type_traits>
#include <vector>

#include "bench_context.h"
#include "peers_common.h"
#include "train_models.h"

// glibc declares its vectorized expf (libmvec) only under -ffast-math, which would also
// reorder the sums; declared here, the loops below call it 16 lanes at a time.
#pragma omp declare simd notinbranch
extern "C" float expf(float);

namespace braze::bench {
namespace {

// main.cc sets (and records) the wait policy; this is the team every OpenMP peer gets.
BRAZE_BENCH_CONTEXT([] {
  AddContext("omp_threads", std::to_string(omp_get_max_threads()) + " (libgomp, OpenMP " +
                                std::to_string(_OPENMP) + ")");
});

// ---- Chain8 ----
void Chain8(const float* in, float* out, int64_t n) {
#pragma omp parallel for simd schedule(static)
  for (int64_t i = 0; i < n; ++i) {
    float v = (in[i] * 1.5f + 0.25f) * in[i] - 0.125f;
    v = std::min(std::max(v, -2.0f), 2.0f);
    out[i] = v * 0.5f + 1.0f;
  }
}

void BM_Chain8_omp(benchmark::State& state) {
  const HostTensor x = Chain8Input();
  HostTensor y(DType::kF32, {kChainN});
  Chain8(x.data<float>(), y.data<float>(), kChainN);
  if (!CheckClose(state, y.data<float>(), Chain8Reference(), 1e-6, 1e-5)) return;
  for (auto _ : state) {
    Chain8(x.data<float>(), y.data<float>(), kChainN);
    benchmark::ClobberMemory();
  }
  SetRate(state, "GB/s", ReadWriteGB(kChainN));
}
BENCHMARK(BM_Chain8_omp)->Apply([](auto* b) { PeerDefaults(b, 0.5); });

// ---- Softmax and LayerNorm, one row at a time ----
// Acc = float: the peers of issue 14's goals, sums in f32 and softmax multiplying by the
// reciprocal of its sum. Acc = double: the same rows with Braze's numerics, which are the
// reference kernels': sums in f64 (exact for a row of f32 values of one sign and similar
// size) and softmax's division a division; they show what those numerics cost a loop.
template <typename Acc>
void SoftmaxRow(const float* x, float* o, int64_t cols) {
  float m = x[0];
#pragma omp simd reduction(max : m)
  for (int64_t c = 0; c < cols; ++c) m = x[c] > m ? x[c] : m;
  Acc sum = 0;
#pragma omp simd reduction(+ : sum)
  for (int64_t c = 0; c < cols; ++c) sum += (o[c] = expf(x[c] - m));
  const float s = static_cast<float>(sum);
  if constexpr (std::is_same_v<Acc, double>) {
#pragma omp simd
    for (int64_t c = 0; c < cols; ++c) o[c] /= s;
  } else {
    const float inv = 1.0f / s;
#pragma omp simd
    for (int64_t c = 0; c < cols; ++c) o[c] *= inv;
  }
}

template <typename Acc>
void LayerNormRow(const float* x, const float* gamma, const float* beta, float* o, int64_t cols) {
  Acc sum = 0;
#pragma omp simd reduction(+ : sum)
  for (int64_t c = 0; c < cols; ++c) sum += x[c];
  const float mean = static_cast<float>(sum / cols);
  Acc sq = 0;
#pragma omp simd reduction(+ : sq)
  for (int64_t c = 0; c < cols; ++c) {
    const float d = x[c] - mean;
    sq += d * d;
  }
  const float inv = 1.0f / std::sqrt(static_cast<float>(sq / cols) + kLayerNormEpsilon);
#pragma omp simd
  for (int64_t c = 0; c < cols; ++c) o[c] = (x[c] - mean) * inv * gamma[c] + beta[c];
}

struct RowOp {
  HostTensor x, gamma, beta, y;
  explicit RowOp(int64_t rows)
      : x(RowInput(rows)),
        gamma(LayerNormGamma()),
        beta(LayerNormBeta()),
        y(DType::kF32, {rows, kRowCols}) {}
  int64_t rows() const { return x.dim(0); }

  void Run(bool layernorm, bool f64) {
    const float* in = x.data<float>();
    float* out = y.data<float>();
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < rows(); ++r) {
      const float* xr = in + r * kRowCols;
      float* yr = out + r * kRowCols;
      if (layernorm) {
        (f64 ? LayerNormRow<double> : LayerNormRow<float>)(xr, gamma.data<float>(),
                                                           beta.data<float>(), yr, kRowCols);
      } else {
        (f64 ? SoftmaxRow<double> : SoftmaxRow<float>)(xr, yr, kRowCols);
      }
    }
  }
};

void RunRowOp(benchmark::State& state, bool layernorm, bool f64 = false) {
  RowOp op(state.range(0));
  op.Run(layernorm, f64);
  const HostTensor& want = layernorm ? LayerNormReference(op.rows()) : SoftmaxReference(op.rows());
  if (!CheckClose(state, op.y.data<float>(), want, 1e-5, 1e-4)) return;
  for (auto _ : state) {
    op.Run(layernorm, f64);
    benchmark::ClobberMemory();
  }
  SetRate(state, "GB/s", ReadWriteGB(op.rows() * kRowCols));
}
void BM_Softmax_omp(benchmark::State& state) { RunRowOp(state, false); }
void BM_LayerNorm_omp(benchmark::State& state) { RunRowOp(state, true); }
BENCHMARK(BM_Softmax_omp)->Apply([](auto* b) { PeerDefaults(RowSizes(b), 0.5); });
BENCHMARK(BM_LayerNorm_omp)->Apply([](auto* b) { PeerDefaults(RowSizes(b), 0.5); });
void BM_Softmax_omp_f64sums(benchmark::State& state) { RunRowOp(state, false, true); }
void BM_LayerNorm_omp_f64sums(benchmark::State& state) { RunRowOp(state, true, true); }
BENCHMARK(BM_Softmax_omp_f64sums)->Apply([](auto* b) { PeerDefaults(RowSizes(b), 0.5); });
BENCHMARK(BM_LayerNorm_omp_f64sums)->Apply([](auto* b) { PeerDefaults(RowSizes(b), 0.5); });

// ---- Softmax regression train step, hand-fused ----
// W [784, 10] is kept with its rows padded to 16 lanes (zeros that stay zero: their
// gradient is zero), so a row of logits or of the gradient is one 16-wide vector op per
// pixel; b follows W in the same array, so the gradient and the update are one loop.
// Each thread accumulates the gradient of its rows privately; after a barrier the
// threads sum the partial gradients and apply SGD, each to its share of the parameters.
class SoftmaxRegression {
 public:
  explicit SoftmaxRegression(int64_t batch)
      : batch_(batch),
        x_(TrainImages(batch)),
        labels_(TrainLabels(batch).ToVector<int>()),
        params_(kParams, 0.0f),
        partial_(omp_get_max_threads() * kParams),
        loss_(omp_get_max_threads()) {}

  // One SGD step; returns the batch's mean loss before the update.
  float Step() {
#pragma omp parallel
    {
      const int t = omp_get_thread_num(), threads = omp_get_num_threads();
      float* grad = partial_.data() + t * kParams;
      std::fill(grad, grad + kParams, 0.0f);
      const int64_t chunk = (batch_ + threads - 1) / threads;
      const int64_t end = std::min(batch_, (t + 1) * chunk);
      float loss = 0;  // a local sum: loss_'s slots share a cache line
      for (int64_t i = t * chunk; i < end; ++i) loss += AccumulateRow(i, grad);
      loss_[t] = loss;
#pragma omp barrier
#pragma omp for simd schedule(static)
      for (int64_t e = 0; e < kParams; ++e) {
        float g = 0;
        for (int u = 0; u < threads; ++u) g += partial_[u * kParams + e];
        params_[e] -= float(kSoftmaxLr) * g;
      }
    }
    float loss = 0;
    for (float l : loss_) loss += l;
    return loss / batch_;
  }

 private:
  static constexpr int kLanes = 16;  // kClasses padded
  static constexpr int64_t kBias = kPixels * kLanes, kParams = kBias + kLanes;

  // Row i's logits, loss and gradient (added to grad); returns the row's loss.
  float AccumulateRow(int64_t i, float* grad) const {
    const float* x = x_.data<float>() + i * kPixels;
    const float* w = params_.data();
    // Four partial sums over the pixels: one would wait out the FMA latency at each.
    static_assert(kPixels % 4 == 0);
    float acc[4][kLanes] = {};
    for (int64_t k = 0; k < kPixels; k += 4) {
      for (int u = 0; u < 4; ++u) {
#pragma omp simd
        for (int j = 0; j < kLanes; ++j) acc[u][j] += x[k + u] * w[(k + u) * kLanes + j];
      }
    }
    float logits[kLanes];
    for (int j = 0; j < kLanes; ++j) {
      logits[j] = w[kBias + j] + ((acc[0][j] + acc[1][j]) + (acc[2][j] + acc[3][j]));
    }
    float m = logits[0];
    for (int j = 1; j < kClasses; ++j) m = std::max(m, logits[j]);
    float p[kClasses], sum = 0;
    for (int j = 0; j < kClasses; ++j) sum += (p[j] = std::exp(logits[j] - m));
    // d(mean loss)/d logits = (softmax - onehot) / batch; zero in the padding.
    float d[kLanes] = {};
    for (int j = 0; j < kClasses; ++j) d[j] = (p[j] / sum - (j == labels_[i])) / batch_;
    for (int64_t k = 0; k < kPixels; ++k) {
#pragma omp simd
      for (int j = 0; j < kLanes; ++j) grad[k * kLanes + j] += x[k] * d[j];
    }
    for (int j = 0; j < kLanes; ++j) grad[kBias + j] += d[j];
    return std::log(sum) + m - logits[labels_[i]];
  }

  const int64_t batch_;
  const HostTensor x_;
  const std::vector<int> labels_;
  std::vector<float> params_;
  std::vector<float> partial_;  // [threads][kParams]
  std::vector<float> loss_;     // per thread
};

void BM_SoftmaxTrainStep_handfused(benchmark::State& state) {
  const int64_t batch = state.range(0);
  SoftmaxRegression model(batch);
  if (!CheckTrainLosses(
          state, [&] { return model.Step(); }, SoftmaxTrainReferenceLosses(batch), 1e-3)) {
    return;
  }
  for (auto _ : state) benchmark::DoNotOptimize(model.Step());
}
BENCHMARK(BM_SoftmaxTrainStep_handfused)->Apply([](auto* b) {
  PeerDefaults(b->ArgName("batch")->Arg(128)->Arg(1024), 1.0);
});

}  // namespace
}  // namespace braze::bench
