// The MLP train step of train_models.h (784-1024-1024-10, ReLU, softmax cross entropy,
// Adam) written by hand around a library's GEMM, for the peers that bring only a GEMM
// (peers_openblas.cc: OpenBLAS's sgemm; peers_onednn.cc: oneDNN's matmul): eight GEMMs
// (forward, and for each layer the weight gradient and, past the first, the input
// gradient), each followed by one fused OpenMP pass, the same passes for every GEMM, so
// two such peers differ only in their GEMM.
//
// Included only by peer files (compiled with OpenMP, -O3 -march=native).
#ifndef BRAZE_BENCH_PEERS_MLP_H_
#define BRAZE_BENCH_PEERS_MLP_H_

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <utility>
#include <vector>

#include "peers_common.h"
#include "train_models.h"

namespace braze::bench::peers_mlp {

// y [rows, cols] = max(y + bias, 0), or y + bias without relu.
inline void BiasActivation(float* y, const float* bias, int64_t rows, int64_t cols, bool relu) {
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < rows; ++r) {
    float* row = y + r * cols;
#pragma omp simd
    for (int64_t c = 0; c < cols; ++c) {
      const float v = row[c] + bias[c];
      row[c] = relu ? std::max(v, 0.0f) : v;
    }
  }
}

// A dense layer's parameters with Adam's slots; w is [in, out] as in Dense.
struct Layer {
  int64_t in, out;
  std::vector<float> w, b, gw, gb, mw, vw, mb, vb;
  Layer(HostTensor initial, int64_t in_, int64_t out_)
      : in(in_),
        out(out_),
        w(initial.data<float>(), initial.data<float>() + in * out),
        b(out, 0.0f),
        gw(in * out),
        gb(out),
        mw(in * out, 0.0f),
        vw(in * out, 0.0f),
        mb(out, 0.0f),
        vb(out, 0.0f) {}
};

// Adam as optimizers.h (TensorFlow's): m = b1 m + (1 - b1) g; v = b2 v + (1 - b2) g^2;
// w -= lr_t m / (sqrt(v) + eps), with lr_t = lr sqrt(1 - b2^t) / (1 - b1^t) in f64.
struct Adam {
  static constexpr double kBeta1 = 0.9, kBeta2 = 0.999;
  static constexpr float kEpsilon = 1e-8f;
  int64_t t = 0;

  void Update(std::vector<Layer>& layers) {
    ++t;
    const float lr = float(kMlpLr * std::sqrt(1 - std::pow(kBeta2, t)) / (1 - std::pow(kBeta1, t)));
    for (Layer& l : layers) {
      Apply(lr, l.gw, l.mw, l.vw, l.w);
      Apply(lr, l.gb, l.mb, l.vb, l.b);
    }
  }
  static void Apply(float lr, const std::vector<float>& g, std::vector<float>& m,
                    std::vector<float>& v, std::vector<float>& w) {
    const int64_t n = w.size();
    const float b1 = kBeta1, b2 = kBeta2;
#pragma omp parallel for simd schedule(static) if (n > 4096)
    for (int64_t i = 0; i < n; ++i) {
      m[i] = b1 * m[i] + (1 - b1) * g[i];
      v[i] = b2 * v[i] + (1 - b2) * g[i] * g[i];
      w[i] -= lr * m[i] / (std::sqrt(v[i]) + kEpsilon);
    }
  }
};

// gemm(trans_a, trans_b, m, n, k, a, b, c): C [m, n] = op(A) op(B), all row-major, op
// transposing when its flag says so; called with the same pointers at every step.
template <typename Gemm>
class Mlp {
 public:
  Mlp(int64_t batch, Gemm gemm)
      : gemm_(std::move(gemm)),
        batch_(batch),
        x_(TrainImages(batch)),
        labels_(TrainLabels(batch).ToVector<int>()),
        h1_(batch * kHidden),
        h2_(batch * kHidden),
        logits_(batch * kClasses),
        dh_(batch * kHidden),
        dh1_(batch * kHidden) {
    const int64_t sizes[] = {kPixels, kHidden, kHidden, kClasses};
    for (int i = 0; i < 3; ++i) layers_.emplace_back(MlpInitialWeight(i), sizes[i], sizes[i + 1]);
  }

  // One Adam step; returns the batch's mean loss before the update.
  float Step() {
    Layer &l1 = layers_[0], &l2 = layers_[1], &l3 = layers_[2];
    const float* x = x_.data<float>();
    // Forward.
    gemm_(false, false, batch_, kHidden, kPixels, x, l1.w.data(), h1_.data());
    BiasActivation(h1_.data(), l1.b.data(), batch_, kHidden, true);
    gemm_(false, false, batch_, kHidden, kHidden, h1_.data(), l2.w.data(), h2_.data());
    BiasActivation(h2_.data(), l2.b.data(), batch_, kHidden, true);
    gemm_(false, false, batch_, kClasses, kHidden, h2_.data(), l3.w.data(), logits_.data());
    // Loss, and logits_ becomes its gradient.
    const float loss = SoftmaxCrossEntropy(l3.b.data());
    // Backward: per layer, dW = input^T dY, db = column sums of dY, and the gradient of
    // the layer's input, masked by the ReLU that produced it.
    gemm_(true, false, kHidden, kClasses, batch_, h2_.data(), logits_.data(), l3.gw.data());
    ColumnSums(logits_.data(), kClasses, l3.gb.data());
    gemm_(false, true, batch_, kHidden, kClasses, logits_.data(), l3.w.data(), dh_.data());
    ReluGradAndColumnSums(dh_.data(), h2_.data(), l2.gb.data());
    gemm_(true, false, kHidden, kHidden, batch_, h1_.data(), dh_.data(), l2.gw.data());
    gemm_(false, true, batch_, kHidden, kHidden, dh_.data(), l2.w.data(), dh1_.data());
    ReluGradAndColumnSums(dh1_.data(), h1_.data(), l1.gb.data());
    gemm_(true, false, kPixels, kHidden, batch_, x, dh1_.data(), l1.gw.data());
    adam_.Update(layers_);
    return loss;
  }

 private:
  // Softmax cross entropy of logits_ + bias against labels_, mean over the batch;
  // replaces logits_ by d(mean loss)/d logits = (softmax - onehot) / batch.
  float SoftmaxCrossEntropy(const float* bias) {
    float loss = 0;
#pragma omp parallel for schedule(static) reduction(+ : loss)
    for (int64_t i = 0; i < batch_; ++i) {
      float* z = logits_.data() + i * kClasses;
      for (int j = 0; j < kClasses; ++j) z[j] += bias[j];
      const float m = *std::max_element(z, z + kClasses);
      float sum = 0;
      for (int j = 0; j < kClasses; ++j) sum += (z[j] = std::exp(z[j] - m));
      loss += -std::log(z[labels_[i]] / sum);
      for (int j = 0; j < kClasses; ++j) z[j] = (z[j] / sum - (j == labels_[i])) / batch_;
    }
    return loss / batch_;
  }

  void ColumnSums(const float* dy, int64_t cols, float* out) const {
    for (int64_t c = 0; c < cols; ++c) out[c] = 0;
    for (int64_t i = 0; i < batch_; ++i) {
      for (int64_t c = 0; c < cols; ++c) out[c] += dy[i * cols + c];
    }
  }

  // dh [batch, kHidden] *= (h > 0), and db = its column sums, in one pass over column
  // blocks (each thread owns its columns of db).
  void ReluGradAndColumnSums(float* dh, const float* h, float* db) const {
    constexpr int64_t kBlock = 64;
#pragma omp parallel for schedule(static)
    for (int64_t c0 = 0; c0 < kHidden; c0 += kBlock) {
      float sums[kBlock] = {};
      for (int64_t i = 0; i < batch_; ++i) {
#pragma omp simd
        for (int64_t c = 0; c < kBlock; ++c) {
          const int64_t e = i * kHidden + c0 + c;
          dh[e] = h[e] > 0 ? dh[e] : 0.0f;
          sums[c] += dh[e];
        }
      }
      std::copy(sums, sums + kBlock, db + c0);
    }
  }

  Gemm gemm_;
  const int64_t batch_;
  const HostTensor x_;
  const std::vector<int> labels_;
  std::vector<Layer> layers_;
  Adam adam_;
  std::vector<float> h1_, h2_, logits_, dh_, dh1_;
};

// train_bench.cc's count: the matmuls x w, x^T dy and, past the first layer, dy w^T.
inline double MlpStepGflop(int64_t batch) {
  return 2.0 * batch * (2 * kPixels * kHidden + 3 * kHidden * kHidden + 3 * kHidden * kClasses) /
         1e9;
}

// Checks the model's losses against Braze's reference, then times its steps.
template <typename Model>
void RunMlpStep(benchmark::State& state, Model& model) {
  const int64_t batch = state.range(0);
  if (!CheckTrainLosses(
          state, [&] { return model.Step(); }, MlpTrainReferenceLosses(batch), 1e-3)) {
    return;
  }
  for (auto _ : state) benchmark::DoNotOptimize(model.Step());
  SetRate(state, "GFLOP/s", MlpStepGflop(batch));
}

}  // namespace braze::bench::peers_mlp

#endif  // BRAZE_BENCH_PEERS_MLP_H_
