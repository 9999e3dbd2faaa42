// Expensive values that several stored Funcs read: computed once, at root.
//
// The safe default schedule inlines every pure Func that is not an output, an
// accumulator or a matmul result, so a value is computed again in each stored Func that
// reads it. For most elementwise ops that is the right trade (a multiply is cheaper than
// a store and a load), but not for a Func whose own definition is long: a random draw
// (a Philox-4x32-10 block, about 150 integer operations per element) that a dropout mask
// output, a residual sum and LayerNorm's two row reductions all read was drawn four
// times per element in the transformer block's cluster of the projection, dropout,
// residual and LayerNorm (docs/CHAR_LM.md). Stored, it is drawn once and read back from
// memory: 4 bytes written and read per element against a hundred-odd operations.
//
// Internal header: includes Halide.h (via pipeline_info.h).
#ifndef BRAZE_SCHEDULE_SHARED_VALUES_H_
#define BRAZE_SCHEDULE_SHARED_VALUES_H_

#include <cstdint>
#include <vector>

#include "schedule/pipeline_info.h"

namespace braze {
namespace schedule {

// A pure Func's own definition (its values, not those of the Funcs it calls) of at
// least this many distinct IR nodes is expensive enough to store rather than compute
// again per reader. An elementwise op lowers to a few nodes; Braze's exp and sigmoid
// (polynomials) to 80-100; a Philox block to about 150. Storing the exp and sigmoids
// too (a bound of 64: the softmax's [16, 4, 128, 128] exp, GELU's [2048, 1024]
// sigmoids) made the transformer block step slower than storing the draws alone (71.6
// against 69.3 ms of one thread's CPU, docs/CHAR_LM.md): a value past the L2 is cheaper
// to compute again than to write and read back.
inline constexpr int kExpensiveValueNodes = 128;

// The pure Funcs (not plain loads, outputs, accumulators, matmul results or Funcs in
// `stored`) of at least kExpensiveValueNodes nodes that two or more stored Funcs read,
// directly or through Funcs that would be inlined. A library matmul's operands count
// as stored (its extern stage needs them in memory).
std::vector<Halide::Func> ExpensiveSharedValues(const PipelineInfo& info,
                                                const std::vector<Halide::Func>& stored);

// The number of distinct IR nodes of f's values (lets substituted nowhere: a shared
// subexpression counts once, as Halide computes it once).
int64_t OwnDefinitionNodes(const Halide::Func& f);

}  // namespace schedule
}  // namespace braze

#endif  // BRAZE_SCHEDULE_SHARED_VALUES_H_
