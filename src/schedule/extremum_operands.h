// Values that must be stored once because a comparison elsewhere reads them too.
//
// A pure Func that the schedule inlines is computed once per reader, in each reader's
// loop nest: inside a reduction's update and again inside a comparison, one scalar and
// one vectorized, say. Under LLVM's fast-math the two need not round alike (a vector
// rsqrt or reciprocal estimate against a scalar divide), so the comparison can flip
// where it tests a value against its own reduction:
// - the gradient of Max(x) compares x == max(x): false everywhere in a row, and the
//   gradient vanished there (braze-fuzz seed 1401);
// - ArgMax compares its input with the max a second accumulator takes of it, and
//   returned an index past the end (seed 13860);
// - Less(Mean(v), v) flipped in rows of equal values (seed 11293), as did
//   Equal(Mean(v), v) in 195 of 481 elements (test/e2e/miscompile_test.cc).
// Stored once, every reader sees the same bits.
//
// Internal header: includes Halide.h (via pipeline_info.h).
#ifndef BRAZE_SCHEDULE_EXTREMUM_OPERANDS_H_
#define BRAZE_SCHEDULE_EXTREMUM_OPERANDS_H_

#include <vector>

#include "schedule/pipeline_info.h"

namespace braze {
namespace schedule {

// The pure Funcs (not plain loads, outputs or accumulators) that the update of any
// accumulator (reduction, ArgMax, MatMul) reads and that a comparison in another Func
// also reads, directly or through Funcs that would be inlined, and every input of an
// ArgMax (its index pass compares it with the max its other pass takes). Each should be
// computed at root.
std::vector<Halide::Func> ComparedReductionOperands(const PipelineInfo& info);

}  // namespace schedule
}  // namespace braze

#endif  // BRAZE_SCHEDULE_EXTREMUM_OPERANDS_H_
