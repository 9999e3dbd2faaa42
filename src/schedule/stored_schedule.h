// Stored, tuned schedules (the schedules/ directory, docs/SCHEDULES.md).
//
// Halide 14 cannot load a serialized schedule, so a stored schedule is the parameters
// of Braze's own CPU schedule templates (safe_default.h) or the name of the
// autoscheduler that won: what braze-tune searched over, in a text file a person can
// review. One file per tuned cluster signature, named by a hash of the cluster's key
// (structure, input types or symbolic dims, target: compile/cluster_key.h):
//
//   schedules/<16 hex digits>.schedule
//
// The runtime looks each CPU cluster up before its own heuristics (scheduler kAuto
// only: an explicitly chosen scheduler is respected). An entry that does not parse,
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
  // Row pipelines prefetch each input's next row while a row's math runs: 0 never, 1
  // where the output stays in the caches (not streamed), 2 always.
  int row_prefetch = 1;
  bool row_pipeline = true;     // reductions computed per output row
  bool row_materialize = true;  // a row's shared math values computed once per row
  bool matmul_library = true;   // a big f32 matmul calls the CPU GEMM library

  bool operator==(const ScheduleParams& o) const;
  bool operator!=(const ScheduleParams& o) const { return !(*this == o); }
};

// "SafeDefault tasks_per_thread=8 matmul=3x32/4 ..." (only what differs from the
// default, for logs and keys), or "Adams2019".
std::string ParamsSummary(const ScheduleParams& params);

struct StoredSchedule {
  std::string key_hash;  // ScheduleKeyHash of the cluster key: the file's name
  std::string target;    // the Halide target it was tuned for (also in the key)
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

// The schedules/ directories searched when a session names none: the source tree's
// (a build run from its tree) and the installed one (<prefix>/share/braze/schedules).
std::vector<std::string> DefaultScheduleDirs();

}  // namespace braze

#endif  // BRAZE_SCHEDULE_STORED_SCHEDULE_H_
