// Bounded inlining: the values a schedule stores so that no loop nest inlines an
// expression of unbounded size.
//
// Every schedule here inlines pure Funcs into their readers, and a cluster of a long
// elementwise chain (or a wide sum of many terms) is then one expression per loop nest
// holding the whole cluster. Halide 14's lowering takes time that grows faster than the
// square of that expression's size: it inlines one Func at a time and rewrites the
// definition after each (a common-subexpression pass over the whole of it), and its
// bounds inference walks the nested Lets the result is made of. Measured on a chain of
// elementwise ops, each read by the next two (docs/FUZZING_FAMILIES.md, "Large
// clusters"): 112 ops took 2.3 s to compile, 222 ops 14 s, 442 ops 155 s (load 3-10),
// all in Halide's "Inlining" and "computation bounds inference" steps, twice (the
// lowered check, then compile_jit); a 150-op chain and its gradient, one cluster of
// about 1,600 ops, did not compile in 15 minutes.
//
// So: walking the Funcs producers first, a pure Func whose inlined expression (its own
// IR nodes and those of every Func it inlines, each counted once, as CSE computes a
// shared subexpression once) exceeds the budget is stored instead; its readers then
// read it as a load and start afresh. A loop nest then inlines at most about
// (arity x budget) nodes, so lowering does O(budget) work per op and compile time grows
// linearly with the op count. XLA bounds its fusions likewise (a fusion that would grow
// too large is not formed); storing a value costs a write and a read of it, which is
// noise beside the hundreds of operations per element between two such stores.
//
// The budget is far above any cluster of the benchmarked models and examples (the
// largest inlined expression there: see kMaxInlinedNodes), so their schedules are
// unchanged.
//
// Internal header: includes Halide.h (via pipeline_info.h).
#ifndef BRAZE_SCHEDULE_INLINE_BUDGET_H_
#define BRAZE_SCHEDULE_INLINE_BUDGET_H_

#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "schedule/pipeline_info.h"

namespace braze {
namespace schedule {

// The most IR nodes (distinct, as CSE counts them) a Func's inlined expression may hold
// before the Func is stored.
inline constexpr int64_t kMaxInlinedNodes = 2048;

// A value stored to bound inlining: the Func and the size of its inlined expression.
struct InlineBreak {
  Halide::Func func;
  int64_t nodes = 0;
};

// The pure Funcs to store, producers first, so that no Func's inlined expression exceeds
// `budget` nodes by more than its own and its direct callees' share. Funcs in `stored`
// (or with an update or extern definition) already are; the outputs are never chosen,
// nor plain loads, nor Funcs that are no graph value (info.values: a value the schedule
// knows the extents of). Empty for a pipeline with an attention stage (its per-tile
// Funcs must stay at the tile loop). Linear in the number of Funcs (times the budget).
std::vector<InlineBreak> InlineBudgetBreaks(const PipelineInfo& info,
                                            const std::set<std::string>& stored,
                                            int64_t budget = kMaxInlinedNodes);

// Whether a schedule left `fn` inlined (its compute level is read on a locked copy: a
// level that compute_at set is locked only when the pipeline is lowered, and Halide
// refuses to inspect it before).
bool LeftInlined(const Halide::Internal::Function& fn);

// The largest inlined expression (nodes) of any loop nest of `info` with the Funcs in
// `stored` stored and every other pure Func inlined: what the budget bounds (tests,
// logs).
int64_t LargestInlinedExpression(const PipelineInfo& info, const std::set<std::string>& stored);

}  // namespace schedule
}  // namespace braze

#endif  // BRAZE_SCHEDULE_INLINE_BUDGET_H_
