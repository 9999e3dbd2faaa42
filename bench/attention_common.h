// What the attention benchmarks (attention_bench.cc: Braze fused and unfused;
// peers_torch.cc: libtorch) share: the workload's inputs, the reference results of its
// first (batch, head) slice to check every variant against, and the peak-memory counter.
//
// Workload: causal self-attention, B = 8, H = 8, D = 64, T = 512 or 2048, f32; q, k, v
// and dO uniform in [-1, 1) from seeds 21 to 24. Attention is independent per (batch,
// head), so the reference kernels check the first slice only (seconds at T = 2048,
// where all 64 slices would take minutes).
//
// Peak memory: the process's peak resident set during the timed runs (VmHWM, reset
// through /proc/self/clear_refs after the first, compiling run) minus its resident set
// before the variant built anything (the inputs and the reference slice already made),
// in MiB: the variant's buffers, its outputs and what its compile left resident. It is
// only meaningful with one benchmark per process (--benchmark_filter): Braze's JIT
// buffer cache keeps freed blocks (up to 1 GiB) for the next benchmark to reuse.
#ifndef BRAZE_BENCH_ATTENTION_COMMON_H_
#define BRAZE_BENCH_ATTENTION_COMMON_H_

#include <benchmark/benchmark.h>

#include <cstdint>
#include <vector>

#include "braze/braze.h"

namespace braze::bench {

constexpr int64_t kAttBatch = 8, kAttHeads = 8, kAttWidth = 64;

inline Shape AttentionShape(int64_t t) { return {kAttBatch, kAttHeads, t, kAttWidth}; }
// Input `which` (0 q, 1 k, 2 v, 3 dO) at sequence length t.
HostTensor AttentionInput(int64_t t, int which);
// The reference kernels' out, dq, dk, dv of slice (0, 0): [T, D] each, kept per t.
const std::vector<HostTensor>& AttentionReferenceSlice(int64_t t);
// The flops of the causal forward as usually counted (q k^T and p v over the visible
// half): 2 * B * H * T^2 * D, in 1e9; the backward is 2.5 times that.
inline double AttentionForwardGflop(int64_t t) {
  return 2.0 * kAttBatch * kAttHeads * t * t * kAttWidth / 1e9;
}
// Checks slice (0, 0) of each of `got` (contiguous [B, H, T, D] f32) against the
// reference; SkipWithError and false on a mismatch.
bool CheckAttention(benchmark::State& state, int64_t t, const std::vector<const float*>& got);

// The peak-memory counter (see above): construct before building anything, call
// StartTimedRuns after the first run.
class PeakMemory {
 public:
  PeakMemory();
  void StartTimedRuns() const;
  // Sets "peak_MiB" (and "scores_MiB": one [B, H, T, T] f32 tensor, for scale).
  void Report(benchmark::State& state, int64_t t) const;

 private:
  int64_t base_kib_ = 0;
};

}  // namespace braze::bench

#endif  // BRAZE_BENCH_ATTENTION_COMMON_H_
