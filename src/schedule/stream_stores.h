// Streaming stores for large CPU outputs (docs/STREAMING_STORES.md). The safe default
// picks them (ApplySafeDefault's `streamed`): an output of at least
// ScheduleParams::stream_min_mib MiB, every dim static, on x86. Its innermost loop over
// whole vectors, a tile of about 16 KiB, then computes into a buffer on the stack, and one
// call of the copy function (device/stream_copy.h) writes the tile to the output with
// non-temporal stores; a store fence ends each parallel task and the pipeline. Halide 14
// has no non-temporal store of its own.
//
// The rewrite is a custom lowering pass on the final loop nest: a loop is rewritten only
// when it is exactly `for (v, min, n) { lets; out[ramp(b(v), 1, L)] = value }` with n
// constant, b linear in v with step L (consecutive vectors, so the tile is one
// contiguous run of n * L elements), an unpredicated store, and no load of any streamed
// output in the loop. Any other loop is left as it is: plain stores, the same values.
//
// Internal header: includes Halide.h.
#ifndef BRAZE_SCHEDULE_STREAM_STORES_H_
#define BRAZE_SCHEDULE_STREAM_STORES_H_

#include <memory>
#include <string>
#include <vector>

#include "Halide.h"

namespace braze {
namespace schedule {

// Installs the pass for `outputs` (Func names) on `pipeline` (which owns it from then
// on). Each rewritten loop calls `copy_symbol` (device/stream_copy.h's signature), which
// does not fence; `fence_symbol` (int(), a store fence) is called at the end of every
// parallel task that copied, before a parallel loop that follows copies made outside
// any, and at the end of the pipeline. `*rewritten`, when given,
// counts the loops it rewrote (each compile lowers again: the count adds up).
void AddStreamStoresPass(Halide::Pipeline& pipeline, const std::vector<std::string>& outputs,
                         const std::string& copy_symbol, const std::string& fence_symbol,
                         std::shared_ptr<int> rewritten = nullptr);

}  // namespace schedule
}  // namespace braze

#endif  // BRAZE_SCHEDULE_STREAM_STORES_H_
