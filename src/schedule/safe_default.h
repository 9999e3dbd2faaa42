// The safe default schedule: Braze's own, and the end of every fall-through chain, so
// it must work for every shape the lowering produces (1x1, 7x3, 17x33x65, ...).
//
// - Output Funcs: vectorize dim 0 and parallelize the fused outer dims, both with
//   GuardWithIf so extents smaller than a split factor are fine (docs/HALIDE14.md rule 3).
// - Every Func with an update definition is compute_root (rule 2: an unscheduled
//   reduction is recomputed per use and took 106 s for a softmax); its pure and update
//   stages are parallel over the outermost pure dim when there is enough work.
// - MatMul: the register-tiled schedule of docs/HALIDE14.md (§2f): tile 3 vectors x 32 rows,
//   accumulator computed per 4-row strip, with a GuardWithIf variant for small shapes.
// - Everything else (elementwise and layout Funcs) is inlined, except, outside row
//   pipelines, an expensive value (a sigmoid, a tanh, an exp) that inlining would
//   evaluate at two or more places per element: stored once at root, bound to its
//   extents (shared_values.h; a GRU cell's gradient computed its gates 12 times).
// - Symbolic dims (pipeline_info.h) hold for every run-time extent >= kMinSymbolicExtent:
//   they are split only by at most that with ShiftInwards and never bound(). An update
//   is never split over one (it runs serially there, or one task per element), nor is
//   a symbolic RVar (a symbolic row's reductions stay scalar loops), and a symbolic
//   dim 0 is never cut into parallel chunks (its rows, if any, go parallel instead).
//
// Internal header: includes Halide.h (via pipeline_info.h).
#ifndef BRAZE_SCHEDULE_SAFE_DEFAULT_H_
#define BRAZE_SCHEDULE_SAFE_DEFAULT_H_

#include <string>
#include <vector>

#include "schedule/pipeline_info.h"
#include "schedule/stored_schedule.h"

namespace braze {
namespace schedule {

// Applies the safe default schedule to the Funcs in `info` for `target`, using up to
// `parallelism` threads, with the template factors of `params` (a stored, tuned
// schedule's; the defaults are the safe default's own). Returns the schedule as text
// (one line per Func). Throws Halide::Error if Halide rejects a directive (a bug, or an
// invalid stored schedule: the caller turns it into a Status).
// `streamed`, when given, receives the outputs the schedule writes with streaming stores
// (stream_stores.h): the caller installs the pass that rewrites their tiles.
std::string ApplySafeDefault(const PipelineInfo& info, const Halide::Target& target,
                             int parallelism, const ScheduleParams& params = {},
                             std::vector<std::string>* streamed = nullptr);

// After another scheduler (an autoscheduler) has scheduled `info`: stores the values
// that bound inlining (inline_budget.h) among the Funcs it left inlined, each at root,
// bound to its extents, vectorized and parallel as the safe default's values. Returns
// the schedule lines added ("" when none).
std::string StoreInlineBreaks(const PipelineInfo& info, const Halide::Target& target,
                              int parallelism);

// Whether the safe default would write some output of `info` with streaming stores, as
// a pointwise output (what kAuto asks before it picks an autoscheduler, which cannot).
bool StreamsAnOutput(const PipelineInfo& info, const Halide::Target& target, int parallelism,
                     const ScheduleParams& params);

}  // namespace schedule
}  // namespace braze

#endif  // BRAZE_SCHEDULE_SAFE_DEFAULT_H_
