// Repairs schedules that Halide 14 is known to miscompile silently.
//
// The known case: an update definition with a GuardWithIf split and a vectorized loop
// whose value (including Funcs inlined into it) contains a select, a comparison or
// boolean logic, or an is_nan-style test. Halide 14's vectorization of such a stage can
// drop the outer loop's index, so every iteration rewrites the first vector and the
// tail elements keep their initial value. Seen with Mullapudi2016 and Li2018 schedules
// of Max/Min/ArgMax updates over 9 or 17 rows split by 8 or 16, and reproduced
// standalone: select(acc > v, acc, v), select(is_nan(m(x)), ...) and
// min(acc, (is_nan(m(x)) && is_nan(v)) || v == m(x) ...) fail; plain arithmetic,
// min/max and exp were always correct, and some comparisons were too, but the trigger
// is not pinned down further. Updates without those nodes (Sum, MatMul, and Braze's
// float Max/Min, which track NaN with integer max) are left alone: serializing MatMul's
// update cost Mullapudi2016 ~30x.
//
// The repair keeps the autoscheduler's schedule but runs those loops serially (the
// guard is correct without vectorization). The safe default never makes such stages.
//
// Internal header: includes Halide.h.
#ifndef BRAZE_SCHEDULE_SCHEDULE_CHECK_H_
#define BRAZE_SCHEDULE_SCHEDULE_CHECK_H_

#include <string>
#include <vector>

#include "Halide.h"

namespace braze {
namespace schedule {

// In the pipeline computing `outputs`, turns the vectorized loops of every update stage
// that has a GuardWithIf split and contains a select, comparison, boolean logic or
// is_nan-style test into serial
// loops. Returns the stages it changed ("f.update(0)").
std::vector<std::string> DevectorizeGuardedUpdates(const std::vector<Halide::Func>& outputs);

}  // namespace schedule
}  // namespace braze

#endif  // BRAZE_SCHEDULE_SCHEDULE_CHECK_H_
