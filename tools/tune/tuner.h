// The schedule search behind braze-tune (docs/SCHEDULES.md): for one cluster a dump
// wrote (lower/cluster_text.h), compile candidate schedules (the default, the CPU
// autoschedulers, and Braze's template with its factors varied one at a time from the
// best found so far; on a GPU device, the GPU heuristic's plans and sizes), time each
// on random inputs, check each against the reference kernels, and keep the fastest
// correct one.
#ifndef BRAZE_TOOLS_TUNE_TUNER_H_
#define BRAZE_TOOLS_TUNE_TUNER_H_

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "compile/compile.h"
#include "lower/cluster_text.h"
#include "schedule/stored_schedule.h"

namespace braze {
namespace tune {

struct TuneOptions {
  int threads = 0;  // Halide worker threads while timing; 0: all cores
  int runs = 7;     // timed samples per candidate; the median counts
  // A sample repeats the kernel until this much time passed. At 2 ms a 3 ms kernel was
  // one run per sample, each waking the thread pool: Chain8 timed 3.0-3.9 ms here against
  // braze_bench's 2.8 (and a fewer-tasks schedule won by that wake-up); at 20 ms, 2.6-2.9.
  double min_sample_ms = 20;
  double rtol = 2e-3, atol = 2e-4;  // as verify mode: atol * max(1, max|ref|) + rtol * |ref|
  // Where the kernels run: the host (the CPU templates), or a GPU (cuda, opencl: the GPU
  // heuristic's parameters, inputs and outputs in device memory, each sample ended by
  // waiting for the device).
  Device device;
};

// One candidate, measured.
struct Measured {
  std::string label;    // "default (Adams2019)", "SafeDefault tasks_per_thread=8"
  bool stored = false;  // false: the default schedule (no stored entry)
  ScheduleParams params;
  double median_ms = 0;
  std::string error;                       // non-empty: compile failed, result wrong, or refused
  std::shared_ptr<CompiledKernel> kernel;  // kept for the final head-to-head
};

struct ClusterResult {
  std::string key_hash, name, ops, inputs;
  Measured baseline;      // the schedule the runtime picks without a stored entry
  Measured best;          // the fastest correct candidate (maybe the baseline)
  Measured best_stored;   // the fastest correct stored candidate (not the baseline)
  int candidates = 0;     // how many were measured
  bool complete = false;  // the search tried every candidate (no deadline cut it)
  // The inputs the candidates were checked on: "signed" (uniform in [-2, 2]), or
  // "positive" (in [0.5, 1.5]) when the default schedule itself disagreed with the
  // reference kernels on signed ones (an ill-conditioned cluster: a comparison with a
  // value near 0, a division by a difference near 0).
  std::string inputs_used;
  std::string signed_mismatch;     // the default's disagreement on signed inputs, if any
  std::vector<Measured> rejected;  // wrong results or compile failures
  // Every one of the winner's alternated re-timings was faster than every one of the
  // default's: the gain is more than the machine's run-to-run noise.
  bool separated = false;
};

// Whether braze-tune stores `r`'s fastest stored candidate: it beats the default by
// `min_speedup` in the medians and each of its alternated re-timings beats each of the
// default's (r.separated); min_speedup 0 stores it always. `*speedup`: default/tuned,
// 0 when either has no time.
bool ShouldStoreWinner(const ClusterResult& r, double min_speedup, double* speedup);

// Called after each candidate: (candidates measured so far in this cluster).
using Progress = std::function<void(int measured, const Measured& last)>;

// A dumped cluster ready to tune: the rebuilt graph, its inputs, reference outputs.
class ClusterTuner {
 public:
  // InvalidArgument when the cluster does not rebuild or the reference run fails.
  static absl::StatusOr<std::unique_ptr<ClusterTuner>> Create(RebuiltCluster cluster,
                                                              const TuneOptions& options);
  const std::string& key_hash() const { return result_.key_hash; }
  const ClusterResult& result() const { return result_; }
  // The number of candidates Tune would measure with no deadline.
  int PlannedCandidates() const;
  // Measures the baseline, then candidates until `deadline` (the baseline always).
  ClusterResult Tune(std::chrono::steady_clock::time_point deadline, const Progress& progress);
  // The entry to store for the result's best stored candidate.
  StoredSchedule Entry(const std::string& measured_note) const;

 private:
  ClusterTuner(RebuiltCluster cluster, const TuneOptions& options);
  // The search proper: baseline, then candidates until `deadline`.
  void Search(std::chrono::steady_clock::time_point deadline, const Progress& progress);
  Measured Measure(const std::string& label, const ScheduleParams* params);
  // Times a compiled kernel: the median of options_.runs samples; < 0 on a failed run.
  double Time(CompiledKernel& kernel);
  // Runs `kernel` once on the inputs into `outputs` (host tensors, copied to and from
  // the device for a device kernel).
  absl::Status RunOnce(CompiledKernel& kernel, std::vector<HostTensor>& outputs);
  // One launch on the device tensors below, not waited for.
  absl::Status Launch(CompiledKernel& kernel);
  // Waits until the device finished what was launched (nothing to wait for on the host).
  absl::Status WaitForDevice();
  bool gpu() const;
  absl::Status Check(const std::vector<HostTensor>& got) const;
  // Random inputs in [lo, hi] and the reference kernels' outputs for them.
  absl::Status MakeInputs(double lo, double hi);

  RebuiltCluster cluster_;
  TuneOptions options_;
  std::vector<HostTensor> inputs_, reference_;
  // A device kernel's inputs (uploaded once) and outputs, in the device's memory.
  std::vector<std::unique_ptr<DeviceTensor>> device_inputs_, device_outputs_;
  bool has_matmul_ = false, has_reduction_ = false, symbolic_ = false;
  std::string schedule_target_;  // what the entry is tuned for (StoredScheduleKeyFor)
  ClusterResult result_;
};

}  // namespace tune
}  // namespace braze

#endif  // BRAZE_TOOLS_TUNE_TUNER_H_
