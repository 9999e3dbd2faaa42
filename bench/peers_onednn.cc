// Peers: the workloads as oneDNN primitives (Debian's libdnnl, OpenMP threading). Each
// primitive is created once, outside the timing loop, on memory objects wrapping the
// benchmark's own buffers (plain row-major layouts, as a framework hands them over), so
// only its execution is timed.
//
//   BM_Softmax_onednn:        softmax_forward along the rows.
//   BM_LayerNorm_onednn:      layer_normalization_forward with scale (gamma) and shift (beta).
//   BM_MatMulBiasRelu_onednn: matmul with a bias and an eltwise_relu post-op, b passed
//     row-major (oneDNN copies it into its blocked layout inside every call).
//   BM_MatMulBiasRelu_onednn_packed: the same matmul created with weights of format `any`;
//     b is reordered into the layout the primitive asks for once, before the timing, as
//     an inference user with constant weights does (and as Braze packs a Const b once).
//   BM_MlpTrainStep_onednn: peers_mlp.h's MLP step with its eight GEMMs as oneDNN
//     matmuls (row-major, transposes as strides; one primitive per GEMM, created at the
//     first step) and the same fused OpenMP passes as the OpenBLAS peer.
#include <map>
#include <oneapi/dnnl/dnnl.hpp>
#include <string>
#include <tuple>
#include <unordered_map>

#include "bench_context.h"
#include "peers_common.h"
#include "peers_mlp.h"

namespace braze::bench {
namespace {

using dnnl::memory;
using Args = std::unordered_map<int, memory>;

const char* IsaName(dnnl_cpu_isa_t isa) {
  switch (isa) {
    case dnnl_cpu_isa_all:
      return "all";
    case dnnl_cpu_isa_sse41:
      return "sse41";
    case dnnl_cpu_isa_avx:
      return "avx";
    case dnnl_cpu_isa_avx2:
      return "avx2";
    case dnnl_cpu_isa_avx512_mic:
      return "avx512_mic";
    case dnnl_cpu_isa_avx512_mic_4ops:
      return "avx512_mic_4ops";
    case dnnl_cpu_isa_avx512_core:
      return "avx512_core";
    case dnnl_cpu_isa_avx512_core_vnni:
      return "avx512_core_vnni";
    case dnnl_cpu_isa_avx512_core_bf16:
      return "avx512_core_bf16";
    case dnnl_cpu_isa_avx512_core_amx:
      return "avx512_core_amx";
    case dnnl_cpu_isa_avx2_vnni:
      return "avx2_vnni";
  }
  return "unknown";
}

BRAZE_BENCH_CONTEXT([] {
  const dnnl_version_t* v = dnnl_version();
  std::string runtime = v->cpu_runtime == DNNL_RUNTIME_OMP   ? "OpenMP"
                        : v->cpu_runtime == DNNL_RUNTIME_TBB ? "TBB"
                        : v->cpu_runtime == DNNL_RUNTIME_SEQ ? "sequential"
                                                             : std::to_string(v->cpu_runtime);
  AddContext("onednn_version", std::to_string(v->major) + "." + std::to_string(v->minor) + "." +
                                   std::to_string(v->patch) + " (" + (v->hash ? v->hash : "") +
                                   "), CPU runtime " + runtime);
  AddContext("onednn_isa", IsaName(dnnl_get_effective_cpu_isa()));
});

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

void BM_MatMulBiasRelu_onednn_packed(benchmark::State& state) {
  const HostTensor a = MatMulA(), b = MatMulB(), bias = MatMulBias();
  HostTensor y(DType::kF32, {kMM, kMM});
  Primitive p;
  memory packed;  // b in the primitive's own layout; outlives p's arguments
  try {
    memory src = p.Wrap({kMM, kMM}, a.data<float>());
    memory weights = p.Wrap({kMM, kMM}, b.data<float>());
    memory mbias = p.Wrap({1, kMM}, bias.data<float>());
    memory dst = p.Wrap({kMM, kMM}, y.data<float>());
    dnnl::post_ops relu;
    relu.append_eltwise(1.0f, dnnl::algorithm::eltwise_relu, 0.0f, 0.0f);
    dnnl::primitive_attr attr;
    attr.set_post_ops(relu);
    const memory::desc any({kMM, kMM}, memory::data_type::f32, memory::format_tag::any);
    dnnl::matmul::primitive_desc pd(
        dnnl::matmul::desc(src.get_desc(), any, mbias.get_desc(), dst.get_desc()), attr,
        p.engine());
    // The one reorder, untimed.
    packed = memory(pd.weights_desc(), p.engine());
    dnnl::stream stream(p.engine());
    dnnl::reorder(weights, packed).execute(stream, weights, packed);
    stream.wait();
    p.Set(dnnl::matmul(pd), {{DNNL_ARG_SRC, src},
                             {DNNL_ARG_WEIGHTS, packed},
                             {DNNL_ARG_BIAS, mbias},
                             {DNNL_ARG_DST, dst}});
  } catch (const dnnl::error& e) {
    state.SkipWithError(e.what());
    return;
  }
  CheckAndTime(state, p, y, MatMulBiasReluReference(), 1e-5, 1e-4);
  SetRate(state, "GFLOP/s", 2.0 * kMM * kMM * kMM / 1e9);
}
BENCHMARK(BM_MatMulBiasRelu_onednn_packed)->Apply([](auto* b) { PeerDefaults(b, 1.0); });

// ---- MLP train step ----
// peers_mlp.h's GEMM as oneDNN matmuls: one primitive per distinct call (shape,
// transposes and buffers: the step makes the same eight calls every time), created at
// its first call and kept, with its memory objects.
class OnednnGemm {
 public:
  OnednnGemm() : engine_(dnnl::engine::kind::cpu, 0), stream_(engine_) {}

  void operator()(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, const float* a,
                  const float* b, float* c) {
    const Key key{trans_a, trans_b, m, n, k, a, b, c};
    auto it = calls_.find(key);
    if (it == calls_.end()) it = calls_.emplace(key, Create(key)).first;
    it->second.primitive.execute(stream_, it->second.args);
    stream_.wait();
  }

 private:
  using Key = std::tuple<bool, bool, int64_t, int64_t, int64_t, const float*, const float*, float*>;
  struct Call {
    dnnl::primitive primitive;
    Args args;
  };

  // A [rows, cols] matrix stored row-major, or its transpose ([cols, rows] stored).
  memory Matrix(int64_t rows, int64_t cols, bool transposed, const float* data) const {
    const memory::dims strides = transposed ? memory::dims{1, rows} : memory::dims{cols, 1};
    return memory({{rows, cols}, memory::data_type::f32, strides}, engine_,
                  const_cast<float*>(data));
  }

  Call Create(const Key& key) const {
    const auto [trans_a, trans_b, m, n, k, a, b, c] = key;
    memory src = Matrix(m, k, trans_a, a), weights = Matrix(k, n, trans_b, b);
    memory dst = Matrix(m, n, false, c);
    dnnl::matmul::desc desc(src.get_desc(), weights.get_desc(), dst.get_desc());
    return {dnnl::matmul({desc, engine_}),
            {{DNNL_ARG_SRC, src}, {DNNL_ARG_WEIGHTS, weights}, {DNNL_ARG_DST, dst}}};
  }

  dnnl::engine engine_;
  dnnl::stream stream_;
  std::map<Key, Call> calls_;
};

void BM_MlpTrainStep_onednn(benchmark::State& state) {
  try {
    peers_mlp::Mlp model(state.range(0), OnednnGemm());
    peers_mlp::RunMlpStep(state, model);
  } catch (const dnnl::error& e) {
    state.SkipWithError(e.what());
  }
}
BENCHMARK(BM_MlpTrainStep_onednn)->Apply([](auto* b) {
  PeerDefaults(b->ArgName("batch")->Arg(128), 2.0);
});

}  // namespace
}  // namespace braze::bench
