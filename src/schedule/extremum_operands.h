// Values that must be stored once because a comparison elsewhere tests them for
// equality with their own extreme.
//
// The gradient of Max(x) (and Min, and ArgMax's consumers) compares x with the reduced
// value: Equal(x, BroadcastTo(Max(x))). When x is a pure Func that the schedule inlines,
// Halide computes it twice, once inside the accumulator's loop and once inside the
// comparison's, in different loop nests: one scalar and one vectorized, say. Under
// LLVM's fast-math the two need not round alike (a vector rsqrt estimate against a
// scalar sqrt and divide), so x == max(x) is false everywhere in a row and the gradient
// vanishes there (found by braze-fuzz, seed 1401: LayerNorm then Max; its gradient
// differed in 9 of 24 elements). Stored once, every reader sees the same bits.
//
// Internal header: includes Halide.h (via pipeline_info.h).
#ifndef BRAZE_SCHEDULE_EXTREMUM_OPERANDS_H_
#define BRAZE_SCHEDULE_EXTREMUM_OPERANDS_H_

#include <vector>

#include "schedule/pipeline_info.h"

namespace braze {
namespace schedule {

// The pure Funcs (not plain loads, outputs or accumulators) that the update of a Max,
// Min or ArgMax accumulator reads and that a comparison in another Func also reads,
// directly or through Funcs that would be inlined, and every input of an ArgMax (its
// index pass compares it with the max its other pass takes: an ArgMax of a computed
// value returned an index past the end). Each should be computed at root.
std::vector<Halide::Func> SharedExtremumOperands(const PipelineInfo& info);

}  // namespace schedule
}  // namespace braze

#endif  // BRAZE_SCHEDULE_EXTREMUM_OPERANDS_H_
