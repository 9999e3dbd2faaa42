// Peers: the workloads as oneDNN primitives (Debian's libdnnl, OpenMP threading). Each
// primitive is created once, outside the timing loop, on memory objects wrapping the
// benchmark's own buffers (plain row-major layouts, as a framework hands them over), so
// only its execution is timed.
//
//   BM_Softmax_onednn:        softmax_forward along the rows.
//   BM_LayerNorm_onednn:      layer_normalization_forward with scale (gamma) and shift (beta).
//   BM_MatMulBiasRelu_onednn: matmul with a bias and an eltwise_relu post-op.
#include <oneapi/dnnl/dnnl.hpp>
#include <unordered_map>

#include "peers_common.h"

namespace braze::bench {
namespace {

using dnnl::memory;
using Args = std::unordered_map<int, memory>;

// A oneDNN primitive with its arguments, run on one CPU engine and stream.
class Primitive {
 public:
  Primitive() : engine_(dnnl::engine::kind::cpu, 0), stream_(engine_) {}
  const dnnl::engine& engine() const { return engine_; }

  // A memory object over `data` (not copied: it must outlive this Primitive).
  memory Wrap(const memory::dims& dims, const float* data) const {
    const memory::format_tag tag =
        dims.size() == 1 ? memory::format_tag::a : memory::format_tag::ab;
    return memory({dims, memory::data_type::f32, tag}, engine_, const_cast<float*>(data));
  }
  void Set(dnnl::primitive primitive, Args args) {
    primitive_ = std::move(primitive);
    args_ = std::move(args);
  }
  void Run() {
    primitive_.execute(stream_, args_);
    stream_.wait();
  }

 private:
  dnnl::engine engine_;
  dnnl::stream stream_;
  dnnl::primitive primitive_;
  Args args_;
};

// Runs p once, checks its output against want, then times it.
void CheckAndTime(benchmark::State& state, Primitive& p, const HostTensor& y,
                  const HostTensor& want, double atol, double rtol) {
  try {
    p.Run();
  } catch (const dnnl::error& e) {
    state.SkipWithError(e.what());
    return;
  }
  if (!CheckClose(state, y.data<float>(), want, atol, rtol)) return;
  for (auto _ : state) {
    p.Run();
    benchmark::ClobberMemory();
  }
}

// ---- Softmax and LayerNorm ----
void BM_Softmax_onednn(benchmark::State& state) {
  const int64_t rows = state.range(0);
  const HostTensor x = RowInput(rows);
  HostTensor y(DType::kF32, {rows, kRowCols});
  Primitive p;
  try {
    memory src = p.Wrap({rows, kRowCols}, x.data<float>());
    memory dst = p.Wrap({rows, kRowCols}, y.data<float>());
    dnnl::softmax_forward::desc desc(dnnl::prop_kind::forward_inference, src.get_desc(),
                                     /*softmax_axis=*/1);
    p.Set(dnnl::softmax_forward({desc, p.engine()}), {{DNNL_ARG_SRC, src}, {DNNL_ARG_DST, dst}});
  } catch (const dnnl::error& e) {
    state.SkipWithError(e.what());
    return;
  }
  CheckAndTime(state, p, y, SoftmaxReference(rows), 1e-5, 1e-4);
  SetRate(state, "GB/s", ReadWriteGB(rows * kRowCols));
}
BENCHMARK(BM_Softmax_onednn)->Apply([](auto* b) { PeerDefaults(RowSizes(b), 0.5); });

void BM_LayerNorm_onednn(benchmark::State& state) {
  const int64_t rows = state.range(0);
  const HostTensor x = RowInput(rows), gamma = LayerNormGamma(), beta = LayerNormBeta();
  HostTensor y(DType::kF32, {rows, kRowCols});
  Primitive p;
  try {
    memory src = p.Wrap({rows, kRowCols}, x.data<float>());
    memory dst = p.Wrap({rows, kRowCols}, y.data<float>());
    dnnl::layer_normalization_forward::desc desc(
        dnnl::prop_kind::forward_inference, src.get_desc(), kLayerNormEpsilon,
        dnnl::normalization_flags::use_scale | dnnl::normalization_flags::use_shift);
    p.Set(dnnl::layer_normalization_forward({desc, p.engine()}),
          {{DNNL_ARG_SRC, src},
           {DNNL_ARG_DST, dst},
           {DNNL_ARG_SCALE, p.Wrap({kRowCols}, gamma.data<float>())},
           {DNNL_ARG_SHIFT, p.Wrap({kRowCols}, beta.data<float>())}});
  } catch (const dnnl::error& e) {
    state.SkipWithError(e.what());
    return;
  }
  CheckAndTime(state, p, y, LayerNormReference(rows), 1e-5, 1e-4);
  SetRate(state, "GB/s", ReadWriteGB(rows * kRowCols));
}
BENCHMARK(BM_LayerNorm_onednn)->Apply([](auto* b) { PeerDefaults(RowSizes(b), 0.5); });

// ---- MatMul + bias + ReLU ----
void BM_MatMulBiasRelu_onednn(benchmark::State& state) {
  const HostTensor a = MatMulA(), b = MatMulB(), bias = MatMulBias();
  HostTensor y(DType::kF32, {kMM, kMM});
  Primitive p;
  try {
    memory src = p.Wrap({kMM, kMM}, a.data<float>());
    memory weights = p.Wrap({kMM, kMM}, b.data<float>());
    memory mbias = p.Wrap({1, kMM}, bias.data<float>());
    memory dst = p.Wrap({kMM, kMM}, y.data<float>());
    dnnl::post_ops relu;
    relu.append_eltwise(1.0f, dnnl::algorithm::eltwise_relu, 0.0f, 0.0f);
    dnnl::primitive_attr attr;
    attr.set_post_ops(relu);
    dnnl::matmul::desc desc(src.get_desc(), weights.get_desc(), mbias.get_desc(), dst.get_desc());
    p.Set(dnnl::matmul({desc, attr, p.engine()}), {{DNNL_ARG_SRC, src},
                                                   {DNNL_ARG_WEIGHTS, weights},
                                                   {DNNL_ARG_BIAS, mbias},
                                                   {DNNL_ARG_DST, dst}});
  } catch (const dnnl::error& e) {
    state.SkipWithError(e.what());
    return;
  }
  CheckAndTime(state, p, y, MatMulBiasReluReference(), 1e-5, 1e-4);
  SetRate(state, "GFLOP/s", 2.0 * kMM * kMM * kMM / 1e9);
}
BENCHMARK(BM_MatMulBiasRelu_onednn)->Apply([](auto* b) { PeerDefaults(b, 1.0); });

}  // namespace
}  // namespace braze::bench
