// The scheduler vocabulary; see scheduler.h.
#include "schedule/scheduler.h"

namespace braze {

std::vector<Scheduler> SchedulerChain(Scheduler first, bool gpu) {
  using K = Scheduler;
  if (gpu) {
    std::vector<K> chain;
    switch (first) {
      case K::kLi2018:
        chain.push_back(K::kLi2018);
        [[fallthrough]];
      case K::kAuto:
      case K::kAdams2019:
      case K::kMullapudi2016:
      case K::kSafeDefault:
      case K::kGpuFused:
        chain.push_back(K::kGpuFused);
        [[fallthrough]];
      case K::kGpuSeparate:
        chain.push_back(K::kGpuSeparate);
        [[fallthrough]];
      case K::kGpuSerial:
        chain.push_back(K::kGpuSerial);
        break;
    }
    return chain;
  }
  switch (first) {
    case K::kAdams2019:
      return {K::kAdams2019, K::kMullapudi2016, K::kSafeDefault};
    case K::kMullapudi2016:
      return {K::kMullapudi2016, K::kSafeDefault};
    case K::kLi2018:
      return {K::kLi2018, K::kSafeDefault};
    case K::kAuto:  // Auto's safe-default choice: never ends at a failed scheduler
      return {K::kSafeDefault, K::kAdams2019, K::kMullapudi2016};
    case K::kSafeDefault:
      return {K::kSafeDefault};
    case K::kGpuFused:  // a GPU plan asked for a CPU kernel: the safe default
    case K::kGpuSeparate:
    case K::kGpuSerial:
      return {K::kSafeDefault};
  }
  return {K::kSafeDefault};
}

}  // namespace braze
