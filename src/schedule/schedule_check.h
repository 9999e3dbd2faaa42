// Repairs schedules that Halide 14 is known to miscompile silently.
//
// The first case: an update definition with a GuardWithIf split and a vectorized loop
// whose value (including Funcs inlined into it) contains a select, a comparison or
// boolean logic, or an is_nan-style test. Halide 14's vectorization of such a stage can
// drop the outer loop's index, so every iteration rewrites the first vector and the
// tail elements keep their initial value. Seen with Mullapudi2016 and Li2018 schedules
// of Max/Min/ArgMax updates over 9 or 17 rows split by 8 or 16, and reproduced
// standalone: select(acc > v, acc, v), select(is_nan(m(x)), ...) and
// min(acc, (is_nan(m(x)) && is_nan(v)) || v == m(x) ...) fail; plain arithmetic,
// min/max and exp were always correct, and some comparisons were too, but the trigger
// is not pinned down further. Bit operations (and, or, not, xor, shifts) count too: a
// float Sum whose NaN and infinity terms read the bits lost its outer index the same
// way under Li2018 (braze-fuzz seed 12511906). Updates without those nodes are left
// alone (MatMul: serializing its update cost Mullapudi2016 ~30x; Braze's float Max/Min,
// which track NaN with integer max, unless a value inlined into them tests bits, as Abs
// does). The safe default never makes such stages, so only autoscheduler schedules pay.
//
// The repair keeps the autoscheduler's schedule but runs those loops serially (the
// guard is correct without vectorization). The safe default never makes such stages.
// A serial loop is LLVM's loop vectorizer's to vectorize, and LLVM 14 miscompiles one
// kind, a strided read-modify-write (a convolution's update serial over the batch:
// braze-fuzz seed 13200191); the compile driver compiles a pipeline with one without
// LLVM's loop optimizations (FindStridedReadModifyWriteLoop, lowered_check.h).
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
// that has a GuardWithIf split and contains a select, comparison, boolean logic, bit
// operation or is_nan-style test into serial
// loops. Returns the stages it changed ("f.update(0)").
std::vector<std::string> DevectorizeGuardedUpdates(const std::vector<Halide::Func>& outputs);

// In the pipeline computing `outputs`, stores every Func at the level it is computed at,
// and returns those that an autoscheduler had stored further out ("f (g.s0.y -> g.s0.x)").
// A storage level outside the compute level lets Halide 14 slide a window or fold
// storage over the loops between them, and its sliding window got one case wrong:
// Adams2019 stored a [9] row product at `y.outer`, computed it at `y.inner` inside a
// loop over z it does not depend on, and Halide computed it only at the first z, so
// every later z read the last y.inner's row for every y.inner (braze-fuzz seed 40455:
// 194 of 1080 elements wrong, no error). Braze's ops have no stencils for a sliding
// window to save work on, so none is allowed.
std::vector<std::string> StoreAtComputeLevels(const std::vector<Halide::Func>& outputs);

}  // namespace schedule
}  // namespace braze

#endif  // BRAZE_SCHEDULE_SCHEDULE_CHECK_H_
