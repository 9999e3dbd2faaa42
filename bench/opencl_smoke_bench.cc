// OpenCL on POCL: a smoke test of the GPU path's speed plumbing, NOT GPU speed. POCL
// runs OpenCL kernels on this machine's CPU, so these times are CPU times of
// GPU-scheduled kernels (a GPU schedule is a poor CPU schedule): they say the device
// path runs without copies per step and roughly what it costs here, nothing about a GPU.
// Every benchmark is labelled so; each checks its result against the reference kernels
// once. Skipped with the reason where CheckOpenCLAvailable fails.
#include <benchmark/benchmark.h>

#include <vector>

#include "braze/braze.h"

namespace braze {
namespace {

constexpr char kLabel[] = "POCL smoke test: CPU timing, not GPU speed";

// Runs and fetches `target` (a function of Variables, so after the warm-up run its
// inputs live on the device: one copy a run, the fetch) on `device`, fused; checks it
// once against the reference kernels.
void RunSmoke(benchmark::State& state, Graph& g, const Tensor& target, const char* device) {
  state.SetLabel(kLabel);
  if (absl::Status s = CheckOpenCLAvailable(); !s.ok()) {
    state.SkipWithError(std::string(s.message()).c_str());
    return;
  }
  SessionOptions opts;
  opts.device = device;
  opts.global_jit_level = JitLevel::kOn1;
  Session session(g, opts);
  SessionOptions ref_opts;
  ref_opts.reference_only = true;
  Session reference(g, ref_opts);
  auto got = session.Run({}, {target});
  auto want = reference.Run({}, {target});
  std::string why;
  if (!got.ok() || !want.ok() || !AllClose((*got)[0], (*want)[0], 1e-3, 1e-4, &why)) {
    state.SkipWithError(!got.ok()    ? got.status().ToString().c_str()
                        : !want.ok() ? want.status().ToString().c_str()
                                     : ("wrong result: " + why).c_str());
    return;
  }
  std::vector<HostTensor> out;
  session.ResetStats();
  for (auto _ : state) {
    absl::Status s = session.RunInto({}, {target}, &out);
    if (!s.ok()) {
      state.SkipWithError(s.ToString().c_str());
      return;
    }
  }
  const SessionStats st = session.stats();
  const double runs = std::max<int64_t>(st.runs, 1);
  state.counters["launches"] = (st.cluster_launches + st.single_op_launches) / runs;
  state.counters["copies"] = (st.host_to_device_copies + st.device_to_host_copies) / runs;
}

void BM_Chain8_opencl_smoke(benchmark::State& state) {
  Graph g;
  Tensor x = Variable(g, HostTensor::RandomUniform(DType::kF32, {1024, 1024}, 1), "x");
  Tensor y = x;
  for (int i = 0; i < 8; ++i) y = (i % 2 == 0) ? Tanh(y * 0.9 + 0.1) : Sigmoid(y) - y * 0.5;
  RunSmoke(state, g, y, "opencl");
}
BENCHMARK(BM_Chain8_opencl_smoke)->Unit(benchmark::kMillisecond)->MinTime(0.5)->UseRealTime();

void BM_Softmax_opencl_smoke(benchmark::State& state) {
  Graph g;
  Tensor x = Variable(g, HostTensor::RandomUniform(DType::kF32, {1024, 1024}, 2), "x");
  RunSmoke(state, g, Softmax(x), "opencl");
}
BENCHMARK(BM_Softmax_opencl_smoke)->Unit(benchmark::kMillisecond)->MinTime(0.5)->UseRealTime();

}  // namespace
}  // namespace braze
