// The scheduler vocabulary's names (braze/scheduler.h), generated from
// braze/schedulers.def. In ir, the bottom layer, because every layer names schedulers.
#include "braze/scheduler.h"

#include "absl/strings/match.h"

namespace braze {

const char* SchedulerName(Scheduler scheduler) {
  switch (scheduler) {
#define V(kind, name)   \
  case Scheduler::kind: \
    return name;
#include "braze/schedulers.def"
#undef V
  }
  return "unknown";
}

std::optional<Scheduler> ParseScheduler(std::string_view name) {
#define V(kind, spelled)                                                            \
  if (absl::EqualsIgnoreCase(absl::string_view(name.data(), name.size()), spelled)) \
    return Scheduler::kind;
#include "braze/schedulers.def"
#undef V
  return std::nullopt;
}

bool IsGpuHeuristic(Scheduler scheduler) {
  return scheduler == Scheduler::kGpuFused || scheduler == Scheduler::kGpuSeparate ||
         scheduler == Scheduler::kGpuSerial;
}

}  // namespace braze
