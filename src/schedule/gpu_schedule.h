// Braze's own GPU schedule heuristic for a lowered cluster and a CUDA target.
//
// Halide 14's autoschedulers do not help here (docs/HALIDE14.md §4): Adams2019 and
// Mullapudi2016 silently emit CPU code for a CUDA target, and Li2018 computes every Func
// at root, one thread per output, with no cooperation within a reduction. So:
//
// - Pointwise outputs: gpu_tile with dim 0 (contiguous) on threadIdx.x, so a warp reads
//   one contiguous run (32x8 tiles, or up to 256x1 when there is one row); the block
//   tiles are fused into one block dim (gridDim.y/z are limited to 65535). Every split
//   is GuardWithIf, so any extent works (7x3, 1x1, 17x33x65).
// - Row reductions (over the innermost dim: softmax, layernorm, cross entropy): a block
//   per row whose threads cooperate. The update is rfactored into per-thread partials
//   (thread u reads elements u, u+T, ... : coalesced; T threads for about 16 elements
//   each, 32 to 256) held in shared memory, combined in a tree of fan-in 8 down to one
//   thread (64 -> 8 -> 1). When the only consumer is one
//   output whose rows match, the reduction is computed inside that output's block (a
//   softmax is one kernel); otherwise it gets a kernel of its own. Producers are inlined
//   into the partials, but a cluster input whose rows those reductions read more than
//   once (and which only that kernel reads) is staged: loaded once per row into shared
//   memory at the row's block, thread u loading u, u + T, ... (coalesced), then read
//   there by every reduction and the output. A softmax otherwise loaded each element
//   from global memory three times (max, sum of exps, output). Rows are staged only while
//   the kernel's shared memory, partials included, stays within 32 KiB (8192 f32 rows do
//   not: they keep the global reads). Where a staged row is a whole number of passes of
//   4 elements per thread (1024 = 4 x 64 threads x 4), each thread stages 4 adjacent
//   ones at a time (8-byte global loads: half the load instructions).
//   Many very short rows (<= 16 elements) get a thread per row.
//   On CUDA, kernels whose rows are all at most kWarpRow (2048) long take one warp per
//   row instead, and there a combine of 32-bit values (a float Max's accumulators)
//   runs in registers across the lanes by warp shuffles (gpu_lanes; Halide 14 cannot
//   shuffle the f64 sums, which stay in shared memory). Not on OpenCL, whose Halide 14
//   back end does not lower gpu_lanes.
//   An online softmax's pass (lower/online_softmax.h, Stage::lanes: a row's max and sum
//   of exps in one walk, 32 lanes each over a strided part of the row) is computed a
//   thread per lane where the combines reading it compute their partials, in registers,
//   then copied to shared memory; its rows are staged as a row reduction's are.
// - Column reductions (over outer dims) with many outputs: one thread per output, a
//   serial loop (adjacent threads read adjacent columns). With few outputs, and full
//   reductions or few long rows: two stages. The reduction domain is split and
//   rfactored into partials computed at root on the GPU, then a second small kernel (or
//   the consumer's kernel) combines them.
// - MatMul: the result is tiled 16x16 over (n, m) with batch dims in the block index,
//   and the accumulator computed per thread (in registers) over k. The filter gradient
//   and a strided input gradient likewise, their window reduced per thread.
// - Conv2D, and Conv2DBackpropInput at stride 1: shared-memory tiles
//   (gpu_conv_tiles.h): per chunk of input channels the
//   block stages the input patch and filter slice its tile reads, each thread sums 2x2
//   outputs in registers; the matmul-like schedule above where the geometry rules the
//   tiles out (the log says why), and in the serial plan.
//
// Symbolic extents (pipeline_info.h): the splits above are guarded, so a schedule made
// at the estimates holds for every size, with three exceptions kept off symbolic dims:
// dim 0 cut into whole vectors of 4 (a RoundUp split, only where a static extent divides
// by 4), a row staged in shared memory (sized by its static length), and a row short
// enough to take a thread per element, unsplit (a symbolic row is always split, since
// its run-time length may exceed a block).
//
// No Func with an update definition is ever left unscheduled (docs/HALIDE14.md rule 2): each
// one is computed at root or at a loop of a GPU kernel, and this is checked at the end.
//
// The code: gpu_heuristic.h's class, its steps in one file per concern (listed there).
//
// Internal header: includes Halide.h (via pipeline_info.h).
#ifndef BRAZE_SCHEDULE_GPU_SCHEDULE_H_
#define BRAZE_SCHEDULE_GPU_SCHEDULE_H_

#include <string>

#include "schedule/pipeline_info.h"
#include "schedule/scheduler.h"
#include "schedule/stored_schedule.h"

namespace braze {
namespace schedule {

// Schedules the Funcs in `info` for `target` (which must have Target::CUDA). Returns the
// schedule as text, one line per scheduled Func; row reductions scheduled cooperatively
// say "cooperative". Throws Halide::Error if Halide rejects a directive, and
// Halide::CompileError if some Func with an update definition would be left unscheduled.
// `plan` is one of the heuristic's plans (kGpuFused, kGpuSeparate, kGpuSerial; see
// schedule/scheduler.h), each the fallback of the one before. `params`: the sizes a
// stored entry chose (braze-tune); the defaults are the heuristic's own.
std::string ApplyGpuSchedule(const PipelineInfo& info, const Halide::Target& target, Scheduler plan,
                             const GpuScheduleParams& params = {});

}  // namespace schedule
}  // namespace braze

#endif  // BRAZE_SCHEDULE_GPU_SCHEDULE_H_
