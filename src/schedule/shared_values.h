// Expensive values that several stored Funcs read: computed once, at root.
//
// The safe default schedule inlines every pure Func that is not an output, an
// accumulator or a matmul result, so a value is computed again in each stored Func that
// reads it. For a value that costs a few operations that is the right trade (cheaper
// than a store and a load), not for one that costs hundreds: a dropout's random draw (a
// Philox-4x32-10 block, about 150 integer operations per element) that its mask output,
// the residual sum and LayerNorm's two row reductions all read was drawn four times per
// element in the transformer block's cluster of the projection, dropout, residual and
// LayerNorm; GELU's gradient (its tanh form's sigmoid and a dozen products) was
// computed once for its output and again, 8 lanes wide, inside the bias gradient's
// column sum (docs/CHAR_LM.md). Stored, each is computed once and read back.
//
// Internal header: includes Halide.h (via pipeline_info.h).
#ifndef BRAZE_SCHEDULE_SHARED_VALUES_H_
#define BRAZE_SCHEDULE_SHARED_VALUES_H_

#include <cstdint>
#include <vector>

#include "schedule/pipeline_info.h"

namespace braze {
namespace schedule {

// A value of at least this many distinct IR nodes (its definition and those of the
// Funcs inlined into it, each node once) is stored rather than computed again per
// reader. An elementwise op lowers to a few nodes; Braze's exp and sigmoid (polynomials)
// to 80-100 each; a Philox block to about 150. A bound of 64 on a Func's own definition
// also stored the softmax's exp ([16, 4, 128, 128]) and GELU's sigmoids ([2048, 1024])
// by themselves, and the block step got slower than storing the draws alone (71.6
// against 69.3 ms of one thread's CPU): a value whose readers still recompute the chain
// around it saves little. Counting the chain, the whole gradient or mask is stored.
inline constexpr int kExpensiveValueNodes = 128;

struct SharedValue {
  Halide::Func func;
  int64_t nodes = 0;  // its cost: distinct IR nodes, inlined Funcs included
  Extents extents;    // its whole extents (PipelineInfo::value_extents)
};

// The pure Funcs (not plain loads, outputs, accumulators, matmul results or Funcs in
// `stored`) of at least kExpensiveValueNodes nodes that two or more stored Funcs read,
// directly or through Funcs that would be inlined, chosen costliest first (a value
// chosen is a stored reader of what it calls from then on). A library matmul's operands
// count as stored (its extern stage needs them in memory); nothing is chosen in a
// pipeline with an attention stage (its Funcs are computed per key tile), and nothing
// read at an index loaded from memory (a gather's: no bounds Halide could infer), and
// only values whose extents the lowering gave (every dim static): each is stored whole.
std::vector<SharedValue> ExpensiveSharedValues(const PipelineInfo& info,
                                               const std::vector<Halide::Func>& stored);

}  // namespace schedule
}  // namespace braze

#endif  // BRAZE_SCHEDULE_SHARED_VALUES_H_
