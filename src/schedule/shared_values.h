// Values worth storing once because the safe default would recompute them many times.
//
// The safe default inlines every pure Func into its readers: a value read by two
// outputs, or by an output and a reduction, is computed again in each reader's loop
// nest, and a Pad (a Slice's gradient) reads its operand through a select that a
// vectorized loop evaluates on both sides, so a sum of Pads computes every padded
// operand over the whole padded width. For cheap values (an add of two loads) that
// recomputation costs less than a round trip through memory; for a sigmoid, a tanh or
// an exp (a polynomial of tens of operations each) it does not: the GRU cell's
// gradient body (issue 40, docs/CONTROL_FLOW.md) computed its gate values up to 12
// times per element in one cluster, and ran 4x slower fused than op by op.
//
// XLA's fusion makes the same call (an expensive elementwise producer is not duplicated
// into several consumers). Here the cluster stays one kernel; the schedule stores the
// expensive shared values at root, each computed once.
//
// Internal header: includes Halide.h (via pipeline_info.h).
#ifndef BRAZE_SCHEDULE_SHARED_VALUES_H_
#define BRAZE_SCHEDULE_SHARED_VALUES_H_

#include <set>
#include <string>
#include <vector>

#include "schedule/pipeline_info.h"

namespace braze {
namespace schedule {

// The least inlined cost (IR nodes of a Func's values, with the values of the Funcs it
// inlines) of a value stored by SharedExpensiveValues. An f32 exp or sigmoid is about 60
// nodes; an add, multiply or select of loads under 10.
inline constexpr int kMinSharedValueCost = 40;

// A value of more than kSharedValueCacheBytes (a core's L2 on the machines measured)
// stored at root is a write and a read through DRAM per reader, not through the caches:
// it is stored only when recomputing it costs more, when its extra evaluations
// ((evaluations - 1) x inlined cost) reach kMinLargeSharedValueCost. Evaluations are
// counted here per element of the value: a reader's calls weighted by its loop nest's
// elements over the value's where the nest has fewer (a 2x2 max pool of stride 2 reads
// each element of its input once through its four taps). Measured on the
// CNN example's step (issue 35, docs/CONVOLUTIONS.md): its BN1 backward cluster stored
// four 12.8 MB values of cost 65-99 read in two loop nests each, and ran 17% slower in
// CPU time, single-threaded, than recomputing them all (20.7 against 24.8 ms a call);
// storing only the one of cost 99 still lost 8%. A GRU cell's gates (cost 1490) or a
// dropout mask's hash stay stored at any size.
inline constexpr int64_t kSharedValueCacheBytes = int64_t{1} << 20;
inline constexpr int kMinLargeSharedValueCost = 160;

struct SharedValue {
  Halide::Func func;
  int64_t evaluations = 0;  // per element, inlined, before storing it
  int64_t cost = 0;         // its inlined cost (IR nodes)
};

// The pure Funcs (not `stored`, not plain loads, with extents in info.values) that the
// inlined schedule would evaluate two or more times per element, and whose inlined cost
// is at least `min_cost` (for a value over kSharedValueCacheBytes: whose extra
// evaluations cost at least kMinLargeSharedValueCost). Evaluations are counted as the code
// generator computes them: the distinct calls (callee and arguments, followed through every chain
// of inlined readers) in each stored Func's loop nest (an output, an accumulator, an operand). Two
// readers inlined into one loop nest at the same element are one evaluation (CSE
// computes the expression once: the terms of a GELU gradient each reading one
// sigmoid); two loop nests, or two elements (a Pad's shifted read), are two. Storing
// such a value at root costs a write and a read of the whole tensor per reader, which
// an elementwise chain recomputed in registers does not. Consumers come before their
// producers: storing a consumer first makes its producers' evaluations count once
// through it. Empty for a pipeline with an attention stage (its per-tile Funcs must stay
// at the tile loop).
std::vector<SharedValue> SharedExpensiveValues(const PipelineInfo& info,
                                               const std::set<std::string>& stored,
                                               int64_t min_cost = kMinSharedValueCost);

}  // namespace schedule
}  // namespace braze

#endif  // BRAZE_SCHEDULE_SHARED_VALUES_H_
