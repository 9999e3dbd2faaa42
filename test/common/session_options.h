// SessionOptions that tests share.
#ifndef BRAZE_TEST_COMMON_SESSION_OPTIONS_H_
#define BRAZE_TEST_COMMON_SESSION_OPTIONS_H_

#include "braze/session.h"

namespace braze {
namespace testing_util {

// The CPU under the safe default in strict mode, so that a compile failure is an error
// rather than an op-by-op fallback, on `threads` threads: for tests of what the safe
// default schedules (its row, rfactor and shared-value paths).
inline SessionOptions StrictSafeDefault(int threads) {
  SessionOptions o;
  o.device = "cpu";
  o.strict = true;
  o.scheduler = Scheduler::kSafeDefault;
  o.num_threads = threads;
  return o;
}

}  // namespace testing_util
}  // namespace braze

#endif  // BRAZE_TEST_COMMON_SESSION_OPTIONS_H_
