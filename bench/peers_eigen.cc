// Peers: the workloads written with Eigen, as an Eigen user writes them.
//
// Eigen's array expressions run on one thread (only its matrix products use OpenMP), so
// the elementwise and row workloads split their data into per-thread chunks with
// `omp parallel for` and run one Eigen expression per chunk or row: a user wanting both
// cores does that too.
//
//   BM_Chain8_eigen: one array expression per chunk (fused by Eigen's expression templates).
//   BM_Softmax_eigen, BM_LayerNorm_eigen: rowwise expressions, rows over the threads.
//   BM_MatMulBiasRelu_eigen: Eigen's threaded product, then (C + bias).max(0) per chunk.
//   BM_ConvBiasRelu_eigen: TensorFlow's SpatialConvolution formulation (its
//     eigen_spatial_convolutions.h: extract_image_patches, reshape, contract with the
//     reshaped filter), + bias, max 0, one Tensor expression on an Eigen::ThreadPoolDevice
//     of the machine's cores. Eigen 3.4 does not ship SpatialConvolution itself (it is in
//     TensorFlow's tree, with TensorFlow's own packing of the patches for the contraction);
//     this is the formulation on Eigen's generic contraction, as an Eigen user gets it.
//     Eigen's pool is its own (not OpenMP): it spins, then sleeps, by its own rules.
#define EIGEN_USE_THREADS
#include <omp.h>

#include <Eigen/Core>
#include <algorithm>
#include <string>
#include <thread>
#include <unsupported/Eigen/CXX11/Tensor>

#include "bench_context.h"
#include "peers_common.h"
#include "train_models.h"

namespace braze::bench {
namespace {

using RowMatrix = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using ConstMatrixMap = Eigen::Map<const RowMatrix>;
using MatrixMap = Eigen::Map<RowMatrix>;
using ConstArrayMap = Eigen::Map<const Eigen::ArrayXf>;
using ArrayMap = Eigen::Map<Eigen::ArrayXf>;
using ConstRowVector = Eigen::Map<const Eigen::RowVectorXf>;

BRAZE_BENCH_CONTEXT([] {
  AddContext("eigen_version", std::to_string(EIGEN_WORLD_VERSION) + "." +
                                  std::to_string(EIGEN_MAJOR_VERSION) + "." +
                                  std::to_string(EIGEN_MINOR_VERSION) +
                                  " (SIMD: " + Eigen::SimdInstructionSetsInUse() + ")");
});

// Calls body(lo, hi) for one contiguous chunk of [0, n) per OpenMP thread.
template <typename Body>
void ForEachChunk(int64_t n, Body body) {
#pragma omp parallel
  {
    const int64_t threads = omp_get_num_threads(), t = omp_get_thread_num();
    const int64_t chunk = (n + threads - 1) / threads;
    const int64_t lo = std::min(n, t * chunk), hi = std::min(n, lo + chunk);
    if (lo < hi) body(lo, hi);
  }
}

// ---- Chain8 ----
void Chain8(const float* in, float* out, int64_t n) {
  ForEachChunk(n, [&](int64_t lo, int64_t hi) {
    ConstArrayMap x(in + lo, hi - lo);
    ArrayMap y(out + lo, hi - lo);
    y = (((x * 1.5f + 0.25f) * x - 0.125f).max(-2.0f).min(2.0f)) * 0.5f + 1.0f;
  });
}

void BM_Chain8_eigen(benchmark::State& state) {
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
BENCHMARK(BM_Chain8_eigen)->Apply([](auto* b) { PeerDefaults(b, 0.5); });

// ---- Softmax and LayerNorm ----
void Softmax(const HostTensor& x, HostTensor& y) {
  ConstMatrixMap in(x.data<float>(), x.dim(0), kRowCols);
  MatrixMap out(y.data<float>(), x.dim(0), kRowCols);
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < x.dim(0); ++r) {
    const auto row = in.row(r).array();
    auto o = out.row(r).array();
    o = (row - row.maxCoeff()).exp();
    o *= 1.0f / o.sum();
  }
}

void LayerNorm(const HostTensor& x, const HostTensor& gamma, const HostTensor& beta,
               HostTensor& y) {
  ConstMatrixMap in(x.data<float>(), x.dim(0), kRowCols);
  MatrixMap out(y.data<float>(), x.dim(0), kRowCols);
  const auto g = ConstRowVector(gamma.data<float>(), kRowCols).array();
  const auto b = ConstRowVector(beta.data<float>(), kRowCols).array();
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < x.dim(0); ++r) {
    const auto row = in.row(r).array();
    const float mean = row.mean();
    const float var = (row - mean).square().mean();
    out.row(r).array() = (row - mean) * (1.0f / std::sqrt(var + kLayerNormEpsilon)) * g + b;
  }
}

void RunRowOp(benchmark::State& state, bool layernorm) {
  const int64_t rows = state.range(0);
  const HostTensor x = RowInput(rows), gamma = LayerNormGamma(), beta = LayerNormBeta();
  HostTensor y(DType::kF32, {rows, kRowCols});
  auto run = [&] { layernorm ? LayerNorm(x, gamma, beta, y) : Softmax(x, y); };
  run();
  const HostTensor& want = layernorm ? LayerNormReference(rows) : SoftmaxReference(rows);
  if (!CheckClose(state, y.data<float>(), want, 1e-5, 1e-4)) return;
  for (auto _ : state) {
    run();
    benchmark::ClobberMemory();
  }
  SetRate(state, "GB/s", ReadWriteGB(rows * kRowCols));
}
void BM_Softmax_eigen(benchmark::State& state) { RunRowOp(state, false); }
void BM_LayerNorm_eigen(benchmark::State& state) { RunRowOp(state, true); }
BENCHMARK(BM_Softmax_eigen)->Apply([](auto* b) { PeerDefaults(RowSizes(b), 0.5); });
BENCHMARK(BM_LayerNorm_eigen)->Apply([](auto* b) { PeerDefaults(RowSizes(b), 0.5); });

// ---- MatMul + bias + ReLU ----
void MatMulBiasRelu(const HostTensor& a, const HostTensor& b, const HostTensor& bias,
                    HostTensor& y) {
  ConstMatrixMap ma(a.data<float>(), kMM, kMM), mb(b.data<float>(), kMM, kMM);
  MatrixMap out(y.data<float>(), kMM, kMM);
  out.noalias() = ma * mb;  // threaded by Eigen (OpenMP, Eigen::setNbThreads)
  const ConstRowVector vbias(bias.data<float>(), kMM);
  ForEachChunk(kMM, [&](int64_t lo, int64_t hi) {
    auto rows = out.middleRows(lo, hi - lo);
    rows = (rows.rowwise() + vbias).cwiseMax(0.0f);
  });
}

void BM_MatMulBiasRelu_eigen(benchmark::State& state) {
  Eigen::setNbThreads(omp_get_max_threads());
  const HostTensor a = MatMulA(), b = MatMulB(), bias = MatMulBias();
  HostTensor y(DType::kF32, {kMM, kMM});
  MatMulBiasRelu(a, b, bias, y);
  if (!CheckClose(state, y.data<float>(), MatMulBiasReluReference(), 1e-5, 1e-4)) return;
  for (auto _ : state) {
    MatMulBiasRelu(a, b, bias, y);
    benchmark::ClobberMemory();
  }
  SetRate(state, "GFLOP/s", 2.0 * kMM * kMM * kMM / 1e9);
}
BENCHMARK(BM_MatMulBiasRelu_eigen)->Apply([](auto* b) { PeerDefaults(b, 1.0); });

// ---- Conv + bias + ReLU ----
// relu(SpatialConvolution(x, w) + bias), x NHWC, w HWIO, y NHWC, 3x3 SAME, stride 1.
// Column-major Eigen tensors over the row-major buffers, so every dim list is reversed:
// x is [C, W, H, N], w [O, C, KW, KH], y [O, W, H, N].
void ConvBiasRelu(const Eigen::ThreadPoolDevice& device, const float* x, const float* w,
                  const float* bias, float* y) {
  constexpr int64_t n = kBlockBatch, side = kBlockSide, c = kBlockChannels, k = 9 * c;
  constexpr int64_t pixels = n * side * side;
  Eigen::TensorMap<Eigen::Tensor<const float, 4>> input(x, c, side, side, n);
  Eigen::TensorMap<Eigen::Tensor<const float, 2>> kernel(w, c, k);
  Eigen::TensorMap<Eigen::Tensor<const float, 2>> b(bias, c, 1);
  Eigen::TensorMap<Eigen::Tensor<float, 2>> out(y, c, pixels);
  // Patches [C, KW, KH, OW * OH, N] as [9 C, pixels]; the filter [O, 9 C].
  const Eigen::array<Eigen::IndexPair<int64_t>, 1> contract = {Eigen::IndexPair<int64_t>(1, 0)};
  const auto patches = input.extract_image_patches(3, 3, 1, 1, 1, 1, Eigen::PADDING_SAME)
                           .reshape(Eigen::array<int64_t, 2>{k, pixels});
  out.device(device) =
      (kernel.contract(patches, contract) + b.broadcast(Eigen::array<int64_t, 2>{1, pixels}))
          .cwiseMax(0.0f);
}

void BM_ConvBiasRelu_eigen(benchmark::State& state) {
  const int threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  Eigen::ThreadPool pool(threads);
  Eigen::ThreadPoolDevice device(&pool, threads);
  const HostTensor x = BlockInput(), w = BlockFilter(0), bias = ConvBias();
  HostTensor y(DType::kF32, x.shape());
  auto run = [&] {
    ConvBiasRelu(device, x.data<float>(), w.data<float>(), bias.data<float>(), y.data<float>());
  };
  run();
  if (!CheckClose(state, y.data<float>(), ConvBiasReluReference(), 1e-4, 1e-3)) return;
  for (auto _ : state) {
    run();
    benchmark::ClobberMemory();
  }
  SetRate(state, "GFLOP/s", Conv3x3Gflop(kBlockBatch, kBlockSide, kBlockChannels, kBlockChannels));
}
BENCHMARK(BM_ConvBiasRelu_eigen)->Apply([](auto* b) { PeerDefaults(b, 0.3); });

}  // namespace
}  // namespace braze::bench
