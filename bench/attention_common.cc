#include "attention_common.h"

#include <cstdio>
#include <fstream>
#include <map>
#include <sstream>
#include <string>

#include "peers_common.h"

namespace braze::bench {
namespace {

// A "Key:   123 kB" line of /proc/self/status, in KiB (0 when absent).
int64_t StatusKiB(const std::string& key) {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind(key + ":", 0) != 0) continue;
    std::istringstream rest(line.substr(key.size() + 1));
    int64_t kib = 0;
    rest >> kib;
    return kib;
  }
  return 0;
}

std::vector<HostTensor> ComputeSlice(int64_t t) {
  Graph g;
  const Shape s = {1, 1, t, kAttWidth};
  Tensor q = Placeholder(g, DType::kF32, s, "q"), k = Placeholder(g, DType::kF32, s, "k"),
         v = Placeholder(g, DType::kF32, s, "v"), dout = Placeholder(g, DType::kF32, s, "dout");
  AttentionOptions o;
  o.causal = true;
  Tensor out = ScaledDotProductAttention(q, k, v, o);
  absl::StatusOr<std::vector<Tensor>> grads = Gradients({out}, {q, k, v}, {dout});
  Feeds feeds;
  const Tensor ins[] = {q, k, v, dout};
  for (int i = 0; i < 4; ++i) {
    HostTensor full = AttentionInput(t, i);
    HostTensor slice(DType::kF32, s);
    std::copy(full.data<float>(), full.data<float>() + t * kAttWidth, slice.data<float>());
    feeds.emplace_back(ins[i], std::move(slice));
  }
  SessionOptions options;
  options.reference_only = true;
  Session session(g, options);
  absl::StatusOr<std::vector<HostTensor>> r =
      grads.ok() ? session.Run(feeds, {out, (*grads)[0], (*grads)[1], (*grads)[2]})
                 : absl::StatusOr<std::vector<HostTensor>>(grads.status());
  if (!r.ok()) {
    fprintf(stderr, "attention: Braze's reference run failed: %s\n", r.status().ToString().c_str());
    return std::vector<HostTensor>(4, HostTensor(DType::kF32, {0}));
  }
  return *std::move(r);
}

}  // namespace

HostTensor AttentionInput(int64_t t, int which) {
  return HostTensor::RandomUniform(DType::kF32, AttentionShape(t), 21 + which);
}

const std::vector<HostTensor>& AttentionReferenceSlice(int64_t t) {
  static std::map<int64_t, std::vector<HostTensor>> cache;
  auto it = cache.find(t);
  if (it == cache.end()) it = cache.emplace(t, ComputeSlice(t)).first;
  return it->second;
}

bool CheckAttention(benchmark::State& state, int64_t t, const std::vector<const float*>& got) {
  const std::vector<HostTensor>& want = AttentionReferenceSlice(t);
  for (size_t i = 0; i < got.size() && i < want.size(); ++i) {
    // Sums of T terms in f32 against the reference's doubles.
    if (!CheckClose(state, got[i], want[i], 1e-4, 1e-3)) return false;
  }
  return true;
}

PeakMemory::PeakMemory() { base_kib_ = StatusKiB("VmRSS"); }

void PeakMemory::StartTimedRuns() const {
  std::ofstream("/proc/self/clear_refs") << "5";  // VmHWM := VmRSS
}

void PeakMemory::Report(benchmark::State& state, int64_t t) const {
  state.counters["peak_MiB"] = static_cast<double>(StatusKiB("VmHWM") - base_kib_) / 1024.0;
  state.counters["scores_MiB"] =
      static_cast<double>(kAttBatch * kAttHeads * t * t * 4) / (1024.0 * 1024.0);
}

}  // namespace braze::bench
