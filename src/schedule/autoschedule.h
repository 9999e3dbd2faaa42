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
// their dims and extents: braze-fuzz seed 13600022's search of one cluster of pools and
// convolutions ran past 10 minutes with Halide's default beam of 32 over five passes,
// and 13600007's past 200 s where its greedy search took under 0.04 s (the full search
// took 100 to over 5,000 times the greedy one: no estimate bounds it). So Braze runs the
// greedy search (beam 1, one pass) by default, noted at the top of the schedule text
// (dumps, --log_compiles; logged at --v=1): the seeds pass in 6 s and 33 s. Opt-in:
// BRAZE_ADAMS2019_SEARCH_S=<seconds> > 0 times a greedy search of `fresh` (a copy) first
// and runs the full search when kAdams2019FullSearchFactor times that fits the seconds
// (an estimate, not a bound). A user's HL_BEAM_SIZE, set before the process starts, is
// left alone and decides instead. docs/HALIDE14.md.
constexpr int kAdams2019FullBeam = 32;
constexpr double kAdams2019FullSearchFactor = 300;
constexpr double kAdams2019SearchBudgetSeconds = 0;  // greedy unless asked

// Loads the plugin if needed and runs the autoscheduler on `pipeline`, whose outputs
// must carry estimates and whose inputs must carry bounds. The schedule is applied to
// the pipeline's Funcs. Returns the schedule as C++ source text. Throws Halide::Error
// when the plugin cannot be loaded or the autoscheduler fails. `fresh`: for Adams2019's
// opt-in estimate (above); without it, an opted-in Adams2019 runs the full search.
std::string ApplyAutoscheduler(Scheduler kind, Halide::Pipeline& pipeline,
                               const Halide::Target& target, int parallelism,
                               const FreshPipeline& fresh = FreshPipeline());

}  // namespace schedule
}  // namespace braze

#endif  // BRAZE_SCHEDULE_AUTOSCHEDULE_H_
