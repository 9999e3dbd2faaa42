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

#include <string>

#include "Halide.h"
#include "schedule/scheduler.h"

namespace braze {
namespace schedule {

// Loads the plugin if needed and runs the autoscheduler on `pipeline`, whose outputs
// must carry estimates and whose inputs must carry bounds. The schedule is applied to
// the pipeline's Funcs. Returns the schedule as C++ source text. Throws Halide::Error
// when the plugin cannot be loaded or the autoscheduler fails.
std::string ApplyAutoscheduler(Scheduler kind, Halide::Pipeline& pipeline,
                               const Halide::Target& target, int parallelism);

}  // namespace schedule
}  // namespace braze

#endif  // BRAZE_SCHEDULE_AUTOSCHEDULE_H_
