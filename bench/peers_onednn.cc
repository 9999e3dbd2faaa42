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
//   BM_MatMulBiasRelu_onednn_bf16: the same matmul with bf16 src, weights, bias and dst.
//   BM_MatMulBiasRelu_onednn_f16: the same in f16 (skipped where oneDNN has none).
//   BM_MlpTrainStep_onednn: peers_mlp.h's MLP step with its eight GEMMs as oneDNN
//     matmuls (row-major, transposes as strides; one primitive per GEMM, created at the
//     first step) and the same fused OpenMP passes as the OpenBLAS peer.
//   BM_ConvBiasRelu_onednn: convolution_forward (forward_inference, direct) with the bias
//     and an eltwise_relu post-op; source and destination NHWC (the benchmark's buffers),
//     weights of format `any`, reordered once from HWIO into the layout the primitive
//     picks, before the timing (constant inference weights, as a user does).
//   BM_ConvBiasRelu_onednn_winograd: the same with oneDNN's Winograd algorithm (blocked
//     activations: x reordered in and y out in every run, timed).
//   BM_ResNetBlock_onednn: the block as a oneDNN user writes it for inference: each BN
//     folded into its convolution's weights and bias once, untimed (scale = gamma /
//     sqrt(variance + epsilon)); conv1 with a ReLU post-op into an NHWC buffer, conv2 with
//     a binary_add post-op (the residual x) and a ReLU post-op. Two primitives per run.
//   BM_ResNetBlock_onednn_sum: the same with the residual as a sum post-op (x copied into
//     conv2's destination by a reorder first, timed).
//   The primitives' implementations (oneDNN's impl_info_str) are the benchmarks' labels.
#include <cmath>
#include <map>
#include <oneapi/dnnl/dnnl.hpp>
#include <string>
#include <tuple>
#include <unordered_map>
#include <vector>

#include "bench_context.h"
#include "peers_common.h"
#include "peers_mlp.h"
#include "train_models.h"

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

// The same matmul in a 16-bit type `dtype` (bf16 or f16: src, weights, bias and dst;
// f32 accumulation inside oneDNN), the inputs rounded as float16_bench.cc's
// BM_MatMulBiasRelu_dtype rounds them: the peer of Braze's 16-bit cluster. Skipped with
// oneDNN's error where it has no such matmul (f16 without AVX512-FP16).
void MatMulBiasRelu16(benchmark::State& state, DType dtype, memory::data_type type) {
  auto as_16 = [dtype](const HostTensor& t) {
    HostTensor out(dtype, t.shape());
    for (int64_t i = 0; i < t.num_elements(); ++i) out.SetDouble(i, t.GetDouble(i));
    return out;
  };
  const HostTensor a = as_16(MatMulA()), b = as_16(MatMulB()), bias = as_16(MatMulBias());
  HostTensor y(dtype, {kMM, kMM});
  Primitive p;
  try {
    auto wrap = [&](const memory::dims& dims, const HostTensor& t) {
      return memory({dims, type, memory::format_tag::ab}, p.engine(),
                    const_cast<void*>(t.raw_data()));
    };
    memory src = wrap({kMM, kMM}, a), weights = wrap({kMM, kMM}, b);
    memory mbias = wrap({1, kMM}, bias), dst = wrap({kMM, kMM}, y);
    dnnl::post_ops relu;
    relu.append_eltwise(1.0f, dnnl::algorithm::eltwise_relu, 0.0f, 0.0f);
    dnnl::primitive_attr attr;
    attr.set_post_ops(relu);
    dnnl::matmul::desc desc(src.get_desc(), weights.get_desc(), mbias.get_desc(), dst.get_desc());
    dnnl::matmul::primitive_desc pd(desc, attr, p.engine());
    state.SetLabel(pd.impl_info_str());
    p.Set(dnnl::matmul(pd), {{DNNL_ARG_SRC, src},
                             {DNNL_ARG_WEIGHTS, weights},
                             {DNNL_ARG_BIAS, mbias},
                             {DNNL_ARG_DST, dst}});
    p.Run();
  } catch (const dnnl::error& e) {
    state.SkipWithError(e.what());
    return;
  }
  HostTensor y32(DType::kF32, y.shape());
  for (int64_t i = 0; i < y.num_elements(); ++i) y32.SetDouble(i, y.GetDouble(i));
  if (!CheckClose(state, y32.data<float>(), MatMulBiasReluReference(), 1e-2, 2e-2)) return;
  for (auto _ : state) {
    p.Run();
    benchmark::ClobberMemory();
  }
  SetRate(state, "GFLOP/s", 2.0 * kMM * kMM * kMM / 1e9);
}

void BM_MatMulBiasRelu_onednn_bf16(benchmark::State& state) {
  MatMulBiasRelu16(state, DType::kBF16, memory::data_type::bf16);
}

// oneDNN 2.6.3 refuses every f16 matmul on a CPU without AVX512-FP16 (this VM's Zen 5):
// the f16 cluster then stays Braze's f32 call on widened copies (docs/CPU_GEMM.md).
void BM_MatMulBiasRelu_onednn_f16(benchmark::State& state) {
  MatMulBiasRelu16(state, DType::kF16, memory::data_type::f16);
}

// Process CPU time, as BM_MatMulBiasRelu_dtype's (float16_bench.cc).
BENCHMARK(BM_MatMulBiasRelu_onednn_bf16)->Apply([](auto* b) {
  PeerDefaults(b, 1.0);
  b->MeasureProcessCPUTime();
});
BENCHMARK(BM_MatMulBiasRelu_onednn_f16)->Apply([](auto* b) {
  PeerDefaults(b, 1.0);
  b->MeasureProcessCPUTime();
});

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

// ---- Convolutions ----
// A 3x3 SAME convolution of NHWC [kBlockBatch, kBlockSide, kBlockSide, kBlockChannels]
// with a bias and the given post-ops, its weights reordered once (untimed) from an HWIO
// buffer into the layout the primitive picks.
class Conv3x3 {
 public:
  Conv3x3(const dnnl::engine& engine, const float* hwio, const float* bias,
          const dnnl::post_ops& post_ops)
      : engine_(engine) {
    const memory::dims act = {kBlockBatch, kBlockChannels, kBlockSide, kBlockSide};
    const memory::dims w = {kBlockChannels, kBlockChannels, 3, 3};
    act_ = memory::desc(act, memory::data_type::f32, memory::format_tag::nhwc);
    const memory::desc any(w, memory::data_type::f32, memory::format_tag::any);
    const memory::desc bias_md({kBlockChannels}, memory::data_type::f32, memory::format_tag::a);
    dnnl::primitive_attr attr;
    attr.set_post_ops(post_ops);
    dnnl::convolution_forward::desc desc(dnnl::prop_kind::forward_inference,
                                         dnnl::algorithm::convolution_direct, act_, any, bias_md,
                                         act_, {1, 1}, {1, 1}, {1, 1});
    pd_ = dnnl::convolution_forward::primitive_desc(desc, attr, engine_);
    memory user({w, memory::data_type::f32, memory::format_tag::hwio}, engine_,
                const_cast<float*>(hwio));
    weights_ = memory(pd_.weights_desc(), engine_);
    dnnl::stream stream(engine_);
    dnnl::reorder(user, weights_).execute(stream, user, weights_);
    stream.wait();
    bias_ = memory(bias_md, engine_, const_cast<float*>(bias));
  }
  // The arguments of a run from src into dst (plus the post-ops' own).
  Args Arguments(const float* src, float* dst) const {
    return {{DNNL_ARG_SRC, memory(act_, engine_, const_cast<float*>(src))},
            {DNNL_ARG_WEIGHTS, weights_},
            {DNNL_ARG_BIAS, bias_},
            {DNNL_ARG_DST, memory(act_, engine_, dst)}};
  }
  memory Activation(const float* data) const {
    return memory(act_, engine_, const_cast<float*>(data));
  }
  dnnl::convolution_forward Primitive() const { return dnnl::convolution_forward(pd_); }
  std::string Impl() const { return pd_.impl_info_str(); }

 private:
  dnnl::engine engine_;
  memory::desc act_;
  dnnl::convolution_forward::primitive_desc pd_;
  memory weights_, bias_;
};

dnnl::post_ops Relu() {
  dnnl::post_ops ops;
  ops.append_eltwise(1.0f, dnnl::algorithm::eltwise_relu, 0.0f, 0.0f);
  return ops;
}

void BM_ConvBiasRelu_onednn(benchmark::State& state) {
  const HostTensor x = BlockInput(), w = BlockFilter(0), bias = ConvBias();
  HostTensor y(DType::kF32, x.shape());
  Primitive p;
  try {
    Conv3x3 conv(p.engine(), w.data<float>(), bias.data<float>(), Relu());
    p.Set(conv.Primitive(), conv.Arguments(x.data<float>(), y.data<float>()));
    state.SetLabel(conv.Impl());
  } catch (const dnnl::error& e) {
    state.SkipWithError(e.what());
    return;
  }
  CheckAndTime(state, p, y, ConvBiasReluReference(), 1e-4, 1e-3);
  SetRate(state, "GFLOP/s", Conv3x3Gflop(kBlockBatch, kBlockSide, kBlockChannels, kBlockChannels));
}
BENCHMARK(BM_ConvBiasRelu_onednn)->Apply([](auto* b) { PeerDefaults(b, 0.3); });

// The same convolution as oneDNN's Winograd (convolution_winograd, F(4x4, 3x3)), the
// algorithm Braze's oneDNN calls pick for a 3x3 unit-stride convolution of >= 64
// channels: it reads and writes blocked activations (format `any`), so the NHWC x is
// reordered in and the result out to the NHWC y in every run (timed: the user's tensors
// are NHWC, as Braze's are); weights reordered once, untimed. Skipped, saying why, where
// oneDNN has no Winograd implementation for the shape and post-ops.
void BM_ConvBiasRelu_onednn_winograd(benchmark::State& state) {
  const HostTensor x = BlockInput(), w = BlockFilter(0), bias = ConvBias();
  HostTensor y(DType::kF32, x.shape());
  dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  dnnl::stream stream(engine);
  const auto f32 = memory::data_type::f32;
  try {
    const memory::dims act = {kBlockBatch, kBlockChannels, kBlockSide, kBlockSide};
    const memory::dims wd = {kBlockChannels, kBlockChannels, 3, 3};
    const memory::desc nhwc(act, f32, memory::format_tag::nhwc);
    const memory::desc act_any(act, f32, memory::format_tag::any);
    const memory::desc bias_md({kBlockChannels}, f32, memory::format_tag::a);
    dnnl::primitive_attr attr;
    attr.set_post_ops(Relu());
    dnnl::convolution_forward::desc desc(
        dnnl::prop_kind::forward_inference, dnnl::algorithm::convolution_winograd, act_any,
        memory::desc(wd, f32, memory::format_tag::any), bias_md, act_any, {1, 1}, {1, 1}, {1, 1});
    const dnnl::convolution_forward::primitive_desc pd(desc, attr, engine);
    memory user_w({wd, f32, memory::format_tag::hwio}, engine, const_cast<float*>(w.data<float>()));
    memory weights(pd.weights_desc(), engine);
    dnnl::reorder(user_w, weights).execute(stream, user_w, weights);
    memory user_x(nhwc, engine, const_cast<float*>(x.data<float>()));
    memory user_y(nhwc, engine, y.data<float>());
    memory src(pd.src_desc(), engine), dst(pd.dst_desc(), engine);
    memory bias_m(bias_md, engine, const_cast<float*>(bias.data<float>()));
    const dnnl::reorder in(user_x, src), out(dst, user_y);
    const dnnl::convolution_forward conv(pd);
    const Args conv_args = {{DNNL_ARG_SRC, src},
                            {DNNL_ARG_WEIGHTS, weights},
                            {DNNL_ARG_BIAS, bias_m},
                            {DNNL_ARG_DST, dst}};
    auto run = [&] {
      in.execute(stream, user_x, src);
      conv.execute(stream, conv_args);
      out.execute(stream, dst, user_y);
      stream.wait();
    };
    run();
    if (!CheckClose(state, y.data<float>(), ConvBiasReluReference(), 1e-4, 1e-3)) return;
    state.SetLabel(std::string(pd.impl_info_str()) + " + 2 reorders");
    for (auto _ : state) {
      run();
      benchmark::ClobberMemory();
    }
  } catch (const dnnl::error& e) {
    state.SkipWithError(e.what());
    return;
  }
  SetRate(state, "GFLOP/s", Conv3x3Gflop(kBlockBatch, kBlockSide, kBlockChannels, kBlockChannels));
}
BENCHMARK(BM_ConvBiasRelu_onednn_winograd)->Apply([](auto* b) { PeerDefaults(b, 0.3); });

// An HWIO filter and a BN folded into a convolution's weights and bias:
// w * scale[o], beta - mean * scale[o], scale = gamma / sqrt(variance + epsilon).
struct Folded {
  std::vector<float> w, bias;
  Folded(const HostTensor& hwio, const BnParams& bn)
      : w(hwio.num_elements()), bias(kBlockChannels) {
    std::vector<float> scale(kBlockChannels);
    for (int64_t o = 0; o < kBlockChannels; ++o) {
      scale[o] =
          bn.gamma.data<float>()[o] / std::sqrt(bn.variance.data<float>()[o] + float(kBnEpsilon));
      bias[o] = bn.beta.data<float>()[o] - bn.mean.data<float>()[o] * scale[o];
    }
    for (size_t i = 0; i < w.size(); ++i) w[i] = hwio.data<float>()[i] * scale[i % kBlockChannels];
  }
};

void BM_ResNetBlock_onednn(benchmark::State& state) {
  const HostTensor x = BlockInput();
  HostTensor h(DType::kF32, x.shape()), y(DType::kF32, x.shape());
  const Folded f1(BlockFilter(0), BlockBn(0)), f2(BlockFilter(1), BlockBn(1));
  Primitive p1, p2;
  try {
    Conv3x3 conv1(p1.engine(), f1.w.data(), f1.bias.data(), Relu());
    dnnl::post_ops add_relu;
    add_relu.append_binary(dnnl::algorithm::binary_add,
                           conv1.Activation(x.data<float>()).get_desc());
    add_relu.append_eltwise(1.0f, dnnl::algorithm::eltwise_relu, 0.0f, 0.0f);
    Conv3x3 conv2(p2.engine(), f2.w.data(), f2.bias.data(), add_relu);
    p1.Set(conv1.Primitive(), conv1.Arguments(x.data<float>(), h.data<float>()));
    Args args2 = conv2.Arguments(h.data<float>(), y.data<float>());
    args2[DNNL_ARG_ATTR_MULTIPLE_POST_OP(0) | DNNL_ARG_SRC_1] = conv2.Activation(x.data<float>());
    p2.Set(conv2.Primitive(), std::move(args2));
    state.SetLabel(conv1.Impl() + " + " + conv2.Impl());
  } catch (const dnnl::error& e) {
    state.SkipWithError(e.what());
    return;
  }
  auto run = [&] {
    p1.Run();
    p2.Run();
  };
  try {
    run();
  } catch (const dnnl::error& e) {
    state.SkipWithError(e.what());
    return;
  }
  if (!CheckClose(state, y.data<float>(), ResNetBlockReference(), 1e-4, 1e-3)) return;
  for (auto _ : state) {
    run();
    benchmark::ClobberMemory();
  }
  SetRate(state, "GFLOP/s",
          2 * Conv3x3Gflop(kBlockBatch, kBlockSide, kBlockChannels, kBlockChannels));
}
BENCHMARK(BM_ResNetBlock_onednn)->Apply([](auto* b) { PeerDefaults(b, 0.3); });

// The same block with the residual as oneDNN's sum post-op (its documented form of a
// residual connection): conv2 accumulates into a destination that holds x, copied there
// by a reorder before conv2 in every run (timed: the block must not overwrite its input).
void BM_ResNetBlock_onednn_sum(benchmark::State& state) {
  const HostTensor x = BlockInput();
  HostTensor h(DType::kF32, x.shape()), y(DType::kF32, x.shape());
  const Folded f1(BlockFilter(0), BlockBn(0)), f2(BlockFilter(1), BlockBn(1));
  Primitive p1, copy, p2;
  try {
    Conv3x3 conv1(p1.engine(), f1.w.data(), f1.bias.data(), Relu());
    dnnl::post_ops sum_relu;
    sum_relu.append_sum(1.0f);
    sum_relu.append_eltwise(1.0f, dnnl::algorithm::eltwise_relu, 0.0f, 0.0f);
    Conv3x3 conv2(p2.engine(), f2.w.data(), f2.bias.data(), sum_relu);
    p1.Set(conv1.Primitive(), conv1.Arguments(x.data<float>(), h.data<float>()));
    // On the copy's own engine (a primitive runs on a stream of its engine).
    const memory::desc act = conv1.Activation(x.data<float>()).get_desc();
    memory from(act, copy.engine(), const_cast<float*>(x.data<float>()));
    memory to(act, copy.engine(), y.data<float>());
    copy.Set(dnnl::reorder(from, to), {{DNNL_ARG_FROM, from}, {DNNL_ARG_TO, to}});
    p2.Set(conv2.Primitive(), conv2.Arguments(h.data<float>(), y.data<float>()));
    state.SetLabel(conv1.Impl() + " + " + conv2.Impl());
  } catch (const dnnl::error& e) {
    state.SkipWithError(e.what());
    return;
  }
  auto run = [&] {
    p1.Run();
    copy.Run();
    p2.Run();
  };
  try {
    run();
  } catch (const dnnl::error& e) {
    state.SkipWithError(e.what());
    return;
  }
  if (!CheckClose(state, y.data<float>(), ResNetBlockReference(), 1e-4, 1e-3)) return;
  for (auto _ : state) {
    run();
    benchmark::ClobberMemory();
  }
  SetRate(state, "GFLOP/s",
          2 * Conv3x3Gflop(kBlockBatch, kBlockSide, kBlockChannels, kBlockChannels));
}
BENCHMARK(BM_ResNetBlock_onednn_sum)->Apply([](auto* b) { PeerDefaults(b, 0.3); });

}  // namespace
}  // namespace braze::bench
