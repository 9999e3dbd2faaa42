// Convolutions, fused vs unfused, in one run with their peers (issue "Convolutional
// networks", item 6). The inference workloads here; the train steps (BM_ResNetBlockStep,
// BM_CnnStep) are in train_bench.cc. The graphs are train_models.h's.
//
//   BM_ConvBiasRelu/unfused:{0,1}: relu(conv3x3 SAME(x, w) + bias), NHWC, batch 32,
//     56x56, 64 -> 64 channels, filter and bias constants.
//   BM_ResNetBlock/unfused:{0,1}: the ResNet basic block at the same shape, BN in
//     inference mode (its moving statistics), every parameter a constant.
//
//   fused:   the graph under one JitScope.
//   unfused: no JIT: every op its own compiled kernel (cached, buffers reused; a large f32
//            convolution is a call of oneDNN's, docs/CONVOLUTIONS.md, fused or not).
//
// The first run's output is checked against Braze's reference kernels (peers_common.h;
// the reference convolutions are double loops, computed once and kept) with the
// tolerances the peers are held to; a mismatch is a SkipWithError, never a number.
// Peers: peers_onednn.cc (convolution primitives with post-ops), peers_eigen.cc
// (ConvBiasRelu as TensorFlow's SpatialConvolution formulation) and peers_torch.cc.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <vector>

#include "braze/braze.h"
#include "peers_common.h"
#include "train_models.h"

namespace braze::bench {
namespace {

// The f32 tolerances of the convolution workloads: 576-term sums (and two of them in
// the block), compared with the reference's double accumulation.
constexpr double kConvAtol = 1e-4, kConvRtol = 1e-3;

// Runs a forward graph in a session: the first run (compile, warm up) checked against
// want, then the timed runs.
void RunForward(benchmark::State& state, Forward f, const HostTensor& (*want)()) {
  Session session(*f.graph, SessionOptions());
  std::vector<HostTensor> outputs;
  absl::Status s;
  {
    BrazeWarnings warnings;
    s = session.RunInto(f.feeds, {f.out}, &outputs);
    if (!s.ok()) {
      state.SkipWithError(s.ToString().c_str());
      return;
    }
    if (warnings.FellBack(state)) return;
  }
  if (!CheckClose(state, outputs[0].data<float>(), want(), kConvAtol, kConvRtol)) return;
  session.ResetStats();
  for (auto _ : state) {
    s = session.RunInto(f.feeds, {f.out}, &outputs);
    if (!s.ok()) {
      state.SkipWithError(s.ToString().c_str());
      return;
    }
    benchmark::DoNotOptimize(outputs[0].raw_data());
  }
  const SessionStats st = session.stats();
  state.counters["launches/run"] =
      double(st.cluster_launches + st.single_op_launches + st.reference_launches) /
      std::max<int64_t>(1, st.runs);
}

void BM_ConvBiasRelu(benchmark::State& state) {
  RunForward(state, MakeConvBiasRelu(state.range(0) == 0), ConvBiasReluReference);
  SetRate(state, "GFLOP/s", Conv3x3Gflop(kBlockBatch, kBlockSide, kBlockChannels, kBlockChannels));
}
BENCHMARK(BM_ConvBiasRelu)->ArgName("unfused")->Arg(0)->Arg(1)->Apply([](auto* b) {
  PeerDefaults(b, 0.3);
});

void BM_ResNetBlock(benchmark::State& state) {
  const bool fused = state.range(0) == 0;
  RunForward(state, MakeResNetBlock(fused), ResNetBlockReference);
  SetRate(state, "GFLOP/s",
          2 * Conv3x3Gflop(kBlockBatch, kBlockSide, kBlockChannels, kBlockChannels));
}
BENCHMARK(BM_ResNetBlock)->ArgName("unfused")->Arg(0)->Arg(1)->Apply([](auto* b) {
  PeerDefaults(b, 0.3);
});

}  // namespace
}  // namespace braze::bench
