// Checks a scheduled pipeline's lowered code for two ways Halide 14 gets a schedule
// wrong that would otherwise surface only at run time, or never:
//
// - A store of a pure definition that does not move with its loop. Halide 14's
//   vectorization of a GuardWithIf-split loop whose body holds a select can drop the
//   loop's index: every iteration stores the first vector and the tail is never
//   written, silently (seen with the safe default at extent w + 1, with Adams2019 and
//   Mullapudi2016 schedules; test/e2e/miscompile_test.cc). In a loop over a pure var of
//   a Func's own stage, every store to that Func must depend on the loop variable.
//   (Loops over reduction variables legitimately store to one place: they are not
//   checked.)
// - An assertion that always fails. With every extent fixed at compile time, a split
//   larger than its extent (an autoscheduler's ShiftInwards split of 64 over 8 columns,
//   say) makes the bounds check of an input constant-false: the kernel could never run.
//
// A schedule that fails either check is rejected like one Halide rejects, so the
// compile driver falls through to the next scheduler.
//
// Internal header: includes Halide.h.
#ifndef BRAZE_SCHEDULE_LOWERED_CHECK_H_
#define BRAZE_SCHEDULE_LOWERED_CHECK_H_

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "Halide.h"

namespace braze {
namespace schedule {

// - A store out of its output. Where the loops around a store to an output
//   (`output_sizes`: buffer name -> elements) have constant bounds (the last piece of a
//   partitioned loop, say), its index must stay inside the output. A guarded split into parallel
//   chunks lost its guard in Halide 14 and wrote past the end of an output (heap corruption;
//   braze-fuzz seed 3282).
// - A vectorized integer division or modulo by lanes of a masked load. The inactive
//   lanes of a GuardWithIf tail's load are undefined, and LLVM may fold the division of
//   the whole vector away (Adams2019 gave 0 for every element; braze-fuzz seed 23864).
//
// Empty when `module` (the pipeline lowered for its target) passes the checks, else
// what is wrong, naming the Func and the loop or the failing check.
//
// `known_values` ("in0.min.1" -> 0, "in0.extent.1" -> 61) are buffer fields the cluster
// fixes: assertions are judged with them, so a bounds check that must fail at run time
// ("Input buffer in0 is accessed at 120, which is beyond the max (60)": Adams2019 on a
// padded softmax, braze-fuzz seed 57088) rejects the schedule at compile time. The
// shapes of the buffers embedded in `module` (constants) are known without being given.
//
// A CUDA module's PTX (the "..._gpu_source_kernels" buffers) is checked too, by
// CheckPtxBitFieldExtracts, and a GPU module's launches by CheckGpuLaunchLimits
// (gpu_launch_check.h: threads and shared memory per block).
std::string CheckLoweredModule(const Halide::Module& module,
                               const std::map<std::string, int64_t>& output_sizes = {},
                               const std::map<std::string, int64_t>& known_values = {});

// Empty, or the first scalar loop of `module` in which LLVM 14's loop vectorizer may
// move a buffer's load above its own store: a serial loop with no vector code in its
// body (LLVM vectorizes only such loops) that stores to a buffer and loads from it, both
// at an index that moves with the loop by a stride other than -1, 0 and 1 (or by no
// constant stride). Halide 14 runs LLVM's loop vectorizer on every loop (docs/HALIDE14.md,
// "LLVM's loop vectorizer"), which unrolls the small loops inside such a loop and
// vectorizes it with interleaved groups: the accesses of one iteration at different
// offsets become one wide load at the group's first member, and a load that follows a
// store to the same element in the same iteration then reads it from before the store
// (the miscompile of LLVM issue 63602, closed in 2023). A convolution's accumulator,
// updated once per filter tap under a serial loop over the batch (Mullapudi2016's
// update, made serial by DevectorizeGuardedUpdates; a plain serial update too), lost
// taps in 3 of the 6 outputs of each of images 0-7 (braze-fuzz seed 13200191). The
// compile driver compiles such a pipeline with Halide's DisableLLVMLoopOpt.
std::string FindStridedReadModifyWriteLoop(const Halide::Module& module);

// Empty, or the first `bfe` in `ptx` whose constant field runs past its operand's width
// (position + length > 32 or 64). LLVM 14's NVPTX backend selects (x >> c) & mask on 64
// bits as such a bfe when c > 32 (its match sizes the field by the shift amount's i32
// type), and PTX then extracts only the bits that exist: `bfe.u64 x, 63, 63` is x's sign
// bit, not 63 copies of it. An f64 Min came out wrong that way on an H200. Lowering
// avoids the pattern (lower_reduce.cc); this catches it anywhere else.
std::string CheckPtxBitFieldExtracts(const std::string& ptx);

// Empty, or what `module` (lowered for a CPU target) computes that it never writes:
// one of `outputs` (the pipeline's output Funcs; each has elements) that no store and
// no extern call (a library stage) writes, or a buffer it allocates and reads but never
// stores to. Halide 14's simplifier takes a load or store it can prove to lie outside
// its allocation for unreachable code, and spreads that outward: a loop that runs at
// least once around unreachable code is unreachable, and so on up to the pipeline's
// body, which it deletes. A realization of negative extent (Halide 14's bounds of a
// Func read under a condition that holds nowhere in one tile: a causal attention's
// weights for a tile of queries that see no key) lets it prove that, and the kernel
// then returned without computing anything: every output stayed 0 (braze-fuzz seed
// 14530153, Adams2019 with 3 threads; docs/HALIDE14.md). A GPU module's kernels are not
// in its functions: nothing is judged for one.
std::string FindUnwrittenBuffer(const Halide::Module& module,
                                const std::vector<std::string>& outputs);

// The checks above (CheckLoweredModule, FindUnwrittenBuffer and
// FindStridedReadModifyWriteLoop) run inside the compile that generates the code, as the
// last custom lowering pass but the ones added after it, so a CPU pipeline is lowered
// once rather than once to check and once more to compile (Halide 14 reuses no lowering:
// 8% of the lowering tests' compile time, measured; docs/HALIDE14.md). The pass sees the main
// statement before Halide outlines its parallel loops (a parallel loop is a For there, with its
// bounds), and the constant buffers it reads (a Const's data) with their shapes. For CPU targets
// only: a GPU module's checks need its offloaded kernels, which come after the custom passes.
struct LoweredCheckInputs {
  std::map<std::string, int64_t> output_sizes;  // as CheckLoweredModule's
  std::map<std::string, int64_t> known_values;  // as CheckLoweredModule's
  std::vector<std::string> outputs;             // as FindUnwrittenBuffer's
};

// What the pass found. It throws nothing: an exception thrown inside Halide's lowering
// unwinds the separate stack Halide lowers on (run_with_large_stack's makecontext fiber),
// which AddressSanitizer cannot follow, and the stale poison it leaves there was reported
// as a stack-buffer-overflow in a later lowering (docs/HALIDE14.md). Instead the pass
// replaces the statement with an empty one (nothing worth generating code for) and the
// caller, after the compile returns, throws or compiles again.
struct LoweredCheckState {
  // What is wrong with the schedule (the checks' text): the caller rejects it
  // (Halide::CompileError), as Halide's own rejections are.
  std::string problem;
  // FindStridedReadModifyWriteLoop's loop, when there is one.
  std::string llvm_loop;
  // The target compiles with Halide's DisableLLVMLoopOpt (set by the caller, or by the GPU
  // module check): such a loop is then no reason to stop.
  bool loop_opt_off = false;
  // The pass emptied the statement for such a loop: the caller compiles again for a
  // target with DisableLLVMLoopOpt, a feature fixed before lowering starts.
  bool needs_loop_opt_off = false;
  // Set by the caller once the pipeline compiled: later lowerings (a dump's statement, a
  // kernel's launches, the JIT compile of a kernel first compiled to an object) lower the
  // same statement and skip the checks.
  bool passed = false;
  double check_ms = 0;  // the checks' own time, summed over the compiles
};

// Adds the pass to `pipeline` (`target`: the CPU target it compiles for); what it finds is
// in `*state` after each compile.
void AddLoweredCheckPass(Halide::Pipeline& pipeline, const Halide::Target& target,
                         LoweredCheckInputs inputs, std::shared_ptr<LoweredCheckState> state);

}  // namespace schedule
}  // namespace braze

#endif  // BRAZE_SCHEDULE_LOWERED_CHECK_H_
