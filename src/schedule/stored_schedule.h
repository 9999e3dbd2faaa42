// Stored, tuned schedules (the schedules/ directory, docs/SCHEDULES.md).
//
// Halide 14 cannot load a serialized schedule, so a stored schedule is the parameters
// of Braze's own CPU schedule templates (safe_default.h) or the name of the
// autoscheduler that won, or, for a GPU cluster, the plan and parameters of Braze's GPU
// heuristic (gpu_schedule.h): what braze-tune searched over, in a text file a person can
// review. One file per tuned cluster signature, named by a hash of the cluster's key
// (structure, input types or symbolic dims, target: compile/cluster_key.h):
//
//   schedules/<16 hex digits>.schedule
//
// The runtime looks each cluster up before its own heuristics (CPU: scheduler kAuto
// only; GPU: the default plan, kGpuFused, only: an explicitly chosen scheduler is
// respected). A GPU entry's target names the device's architecture too (CUDA: sm_90;
// OpenCL: the device's name), device::ScheduleTargetString. An entry that does not parse,
// whose key or target does not match its file, or that was tuned for another version of
// the templates (stale) is one warning naming the file, and the default schedule.
//
// No Halide include: the runtime and braze-tune use it.
#ifndef BRAZE_SCHEDULE_STORED_SCHEDULE_H_
#define BRAZE_SCHEDULE_STORED_SCHEDULE_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "schedule/scheduler.h"

namespace braze {

// The version of the templates' parameters below. An entry tuned for another version is
// stale: bump this whenever a parameter's meaning or a template's shape changes.
constexpr int kScheduleTemplatesVersion = 2;  // 2: row_materialize

// The knobs of the GPU heuristic (schedule/gpu_schedule.h, gpu_tiles.h), which it
// hard-coded before; the defaults are those choices, so a default GpuScheduleParams
// schedules exactly as the heuristic always has.
struct GpuScheduleParams {
  // Most threads per block of a pointwise tile, a cooperative row (a block per row)
  // and a two-stage reduction's partials: 32..1024, a power of two.
  int block_threads = 256;
  // Threads along dim 0 of a pointwise tile over several dims (the rest along dim 1..):
  // 1..1024, a power of two.
  int tile_x = 32;
  // Elements each thread of a cooperative row reads: a row of len gets
  // len / row_elements threads (at least a warp, at most block_threads). 1..256, pow2.
  int row_elements = 16;
  // CUDA: kernels whose rows are all at most this long take one warp per row (warp
  // shuffles); 0: never. 0..65536.
  int warp_row = 2048;
  // CUDA: adjacent elements per thread of a plain pointwise output (vectorized loads
  // and stores): 1, 2 or 4.
  int vector = 4;
  // The matmul (and untiled convolution) result tile: tile x tile threads, each one
  // output accumulated in registers. 1..32, a power of two.
  int matmul_tile = 16;

  bool operator==(const GpuScheduleParams& o) const;
  bool operator!=(const GpuScheduleParams& o) const { return !(*this == o); }
};

// The knobs of the CPU templates; the defaults are the safe default's own choices, so
// a default ScheduleParams schedules exactly as the safe default always has.
struct ScheduleParams {
  // kSafeDefault (with the knobs below), kAdams2019 or kMullapudi2016 (knobs unused).
  Scheduler scheduler = Scheduler::kSafeDefault;
  int tasks_per_thread = 4;             // parallel tasks per worker thread: 1..64
  int64_t min_parallel_work = 1 << 15;  // elements below which a loop stays serial
  int vector_factor = 1;                // pointwise vectors: natural width x 1, 2 or 4
  int matmul_vectors = 3;               // matmul register tile: vectors across, 1..4
  int matmul_rows = 32;                 // matmul tile rows, 1..256
  int matmul_strip = 4;                 // rows per accumulator strip, 1..8
  int row_lanes = 2;                    // row reductions: rfactor lanes = width x 1, 2, 4
  int stream_min_mib = 32;              // outputs of at least this many MiB stream; 0: none
  // Row pipelines prefetch each input's next row while a row's math runs: 0 never (the
  // default: prefetchnta cost more than it saved on the CI's Xeon VM,
  // safe_default_rows.cc), 1 where the output stays in the caches (not streamed), 2 always.
  int row_prefetch = 0;
  bool row_pipeline = true;     // reductions computed per output row
  bool row_materialize = true;  // a row's shared math values computed once per row
  bool matmul_library = true;   // a big f32 matmul calls the CPU GEMM library
  // A GPU cluster's entry: `scheduler` is a plan of the GPU heuristic (kGpuFused or
  // kGpuSeparate) and these its knobs; the CPU knobs above are then unused.
  GpuScheduleParams gpu;

  bool operator==(const ScheduleParams& o) const;
  bool operator!=(const ScheduleParams& o) const { return !(*this == o); }
};

// "SafeDefault tasks_per_thread=8 matmul=3x32/4 ..." (only what differs from the
// default, for logs and keys), "Adams2019", or "heuristic (fused) gpu_block_threads=128".
std::string ParamsSummary(const ScheduleParams& params);

struct StoredSchedule {
  std::string key_hash;  // ScheduleKeyHash of the cluster key: the file's name
  // The target it was tuned for (also in the key): the Halide target, and for a GPU
  // the device's architecture (device::ScheduleTargetString).
  std::string target;
  int templates_version = kScheduleTemplatesVersion;
  ScheduleParams params;
  // For the reader: the cluster's name and ops, its input types, what tuning measured.
  std::string cluster, ops, inputs, measured;
  std::string path;  // where it was read from (set by the reader)
};

// The stable 64-bit FNV-1a hash of a cluster key, as 16 lower-case hex digits.
std::string ScheduleKeyHash(absl::string_view cluster_key);

// The file's text; ParseStoredSchedule reads it back. Errors name `path` and the line.
std::string FormatStoredSchedule(const StoredSchedule& entry);
absl::StatusOr<StoredSchedule> ParseStoredSchedule(absl::string_view text, absl::string_view path);

// "<dir>/<key_hash>.schedule".
std::string StoredSchedulePath(const std::string& dir, const std::string& key_hash);

// The entry for `key_hash` in the first of `dirs` that has one, checked against
// `target`; nullopt when none has one, or when the first one found is invalid or stale:
// then one warning per file and process says why and that the default is used.
std::optional<StoredSchedule> FindStoredSchedule(const std::vector<std::string>& dirs,
                                                 const std::string& key_hash,
                                                 const std::string& target);

// Says (one warning per file and process) that the stored schedule at `path` was
// refused (`why`) and the default schedule used instead.
void WarnStoredScheduleRefused(const std::string& path, const std::string& why);

// OK when `dir` is a directory; else InvalidArgument saying what it is (the errno's
// text: "No such file or directory"). SessionOptions::schedule_dirs are checked, once,
// when the session starts: FindStoredSchedule skips a directory it cannot read, so a
// misspelt name meant its tuned schedules were never used, without a word.
absl::Status CheckScheduleDirectory(const std::string& dir);

// The schedules/ directories searched when a session names none: the source tree's
// (a build run from its tree) and the installed one (<prefix>/share/braze/schedules).
std::vector<std::string> DefaultScheduleDirs();

}  // namespace braze

#endif  // BRAZE_SCHEDULE_STORED_SCHEDULE_H_
