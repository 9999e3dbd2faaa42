// Halide's CPU autoschedulers (Adams2019, Mullapudi2016, Li2018), loaded as plugins.
//
// Each plugin registers its autoscheduler by name from a static initializer, and Halide
// throws if a name is registered twice, so a plugin is loaded at most once per process
// (the first path that loads wins). The path is $BRAZE_HALIDE_PLUGIN_DIR/
// libautoschedule_<name>.so when that variable is set, else the path CMake compiled in.
//
// Internal header: includes Halide.h.
#ifndef BRAZE_SCHEDULE_AUTOSCHEDULE_H_
#define BRAZE_SCHEDULE_AUTOSCHEDULE_H_

#include <functional>
#include <string>

#include "Halide.h"
#include "schedule/scheduler.h"

namespace braze {
namespace schedule {

// A fresh, unscheduled copy of the pipeline being scheduled (the cluster lowered again).
using FreshPipeline = std::function<Halide::Pipeline()>;

// Halide 14's Adams2019 search has no time limit, and its time grows with the stages,
// their dims and extents (braze-fuzz seed 13600022: a cluster of pools and convolutions
// searched past 10 minutes with Halide's default beam of 32 over five passes; greedily,
// the whole program compiles in 30 s). Braze bounds it: given `fresh`, a greedy search
// (beam 1, one pass) of a fresh copy is timed first, and the full search runs only when
// kAdams2019FullSearchFactor times that fits kAdams2019SearchBudgetSeconds; else the
// greedy search schedules the pipeline, logged and noted at the top of the schedule
// text (dumps, --log_compiles). The full search took 100 to 670 times the greedy one on
// that program's clusters (docs/HALIDE14.md), so an Adams2019 schedule takes at most
// about twice the budget, or twice the greedy search. BRAZE_ADAMS2019_SEARCH_S sets the
// budget in seconds (0: always greedy). A user's HL_BEAM_SIZE, set before the process
// starts, is left alone and decides instead.
constexpr int kAdams2019FullBeam = 32;
constexpr double kAdams2019FullSearchFactor = 300;
constexpr double kAdams2019SearchBudgetSeconds = 10;

// Loads the plugin if needed and runs the autoscheduler on `pipeline`, whose outputs
// must carry estimates and whose inputs must carry bounds. The schedule is applied to
// the pipeline's Funcs. Returns the schedule as C++ source text. Throws Halide::Error
// when the plugin cannot be loaded or the autoscheduler fails. `fresh`: for Adams2019's
// bound (above); without it, Adams2019 searches unbounded.
std::string ApplyAutoscheduler(Scheduler kind, Halide::Pipeline& pipeline,
                               const Halide::Target& target, int parallelism,
                               const FreshPipeline& fresh = FreshPipeline());

}  // namespace schedule
}  // namespace braze

#endif  // BRAZE_SCHEDULE_AUTOSCHEDULE_H_
