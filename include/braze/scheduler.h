// Who schedules a compiled pipeline: one vocabulary for the public API and every layer
// below it (the list is braze/schedulers.def).
//
// CPU: if the chosen scheduler fails, compilation falls through (Adams2019 ->
// Mullapudi2016 -> SafeDefault; Li2018 -> SafeDefault). kAuto (the default): Braze's
// safe default for clusters that reduce over the innermost dim (softmax, layernorm:
// measured 2-4x faster than Adams2019 here) or hold a matmul, Adams2019 with exact
// estimates for the rest (elementwise chains).
// GPU: Braze's heuristic in three plans, each the fallback of the one before when
// Halide rejects a schedule: fused (reductions inside their consumer's kernel),
// separate (reductions in kernels of their own, still cooperative) and serial (a thread
// per reduction output, no rfactor); Li2018 may start the chain.
#ifndef BRAZE_SCHEDULER_H_
#define BRAZE_SCHEDULER_H_

#include <optional>
#include <string_view>

namespace braze {

enum class Scheduler {
#define V(kind, name) kind,
#include "braze/schedulers.def"
#undef V
};

// "Auto", "Adams2019", ..., "heuristic (serial)".
const char* SchedulerName(Scheduler scheduler);
// The scheduler named `name`, compared ignoring case ("safedefault" too); nullopt for
// none.
std::optional<Scheduler> ParseScheduler(std::string_view name);
// True for the plans of Braze's GPU heuristic (they schedule GPU kernels only).
bool IsGpuHeuristic(Scheduler scheduler);

}  // namespace braze

#endif  // BRAZE_SCHEDULER_H_
