// The order in which schedulers fall through. The vocabulary itself, CPU and GPU, and
// its one table of names are public: braze/scheduler.h, from braze/schedulers.def.
//
// A cluster is scheduled by the first scheduler of its chain that Halide accepts; each
// failure is kept with its reason (CompiledKernel::scheduler_failures) and shown in the
// dumps and the compile log. No Halide include: the runtime, dumps and tests use it.
#ifndef BRAZE_SCHEDULE_SCHEDULER_H_
#define BRAZE_SCHEDULE_SCHEDULER_H_

#include <cstdint>
#include <string>
#include <vector>

#include "braze/scheduler.h"

namespace braze {

// Symbolic shapes: a -1 dim of the program is compiled as a run-time extent, and one
// kernel serves every size from this up: the safe default's vectors and row strips split
// such a dim by up to 16 with ShiftInwards, which needs the extent to be at least the
// factor. Sizes 1 to 15 share a second kernel, compiled when one first occurs, whose
// splits of symbolic dims are by 1 (it serves every size >= 1, slower). Size 0 (no
// elements) compiles for its concrete shape: a kernel with nothing to compute.
constexpr int64_t kMinSymbolicExtent = 16;

// The words the safe default's schedule text gives each expensive shared value it
// stores once instead of inlining into every reader (schedule/shared_values.h), which
// --log_compiles counts ("; 3 shared values stored once").
inline constexpr char kSharedValueStoredOnce[] = "shared value stored once";
// Likewise each value a schedule stores to bound inlining (schedule/inline_budget.h):
// "; 12 values stored to bound inlining".
inline constexpr char kInlineBudgetStored[] = "stored to bound inlining";

// The schedulers tried, in order, when `first` is chosen. For the CPU, the caller
// resolves kAuto: when Auto picks Adams2019 it passes kAdams2019; when Auto picks the
// safe default it passes kAuto, whose chain continues with the autoschedulers after the
// safe default, so Auto never ends at a failed scheduler (an explicit kSafeDefault
// does not fall through).
// For a GPU (`gpu`), the chain is first (Li2018 or a heuristic plan) then every later
// heuristic plan; a CPU scheduler asked for a GPU starts at the fused plan.
std::vector<Scheduler> SchedulerChain(Scheduler first, bool gpu);

// The autoscheduler plugin loaded for `kind` (Adams2019, Mullapudi2016, Li2018; "" for
// the others): $BRAZE_HALIDE_PLUGIN_DIR/libautoschedule_<name>.so when that variable is
// set, else the path CMake found at build time. Loaded at most once per process.
std::string AutoschedulerPluginPath(Scheduler kind);

}  // namespace braze

#endif  // BRAZE_SCHEDULE_SCHEDULER_H_
