// The GPU heuristic's schedule of an attention op (a kAttention stage; lowering in
// lower/lower_attention.cc, design and expected speed in docs/ATTENTION.md): a kernel
// per op, a block per tile of kGpuRowTile rows of one batch entry, 512 threads.
//
//   block (row tile, batch...):
//     for each tile of the other sequence (serial at the block level):
//       the tile's Funcs in shared memory, one after the other, a barrier between:
//         the staged operand tile (a thread per (position, feature lane));
//         the products (a thread per 2 x 2 box of (position, row), summed over the
//         features in registers, stored once); the weights (a thread per position and
//         2 rows); the per-row tile reductions (a thread per row);
//       the weighted sum: a thread per (feature lane, 2 rows), the tile's partial sums
//         of its features in registers (rfactor), added into the block's accumulator.
//
// The boxes are constant (bound_extent: kGpuRowTile rows x the lowering's tile; the
// accumulator's features padded to lanes x serial), so the shared allocations are too
// and the host computes no sizes: a block past the end of the rows, or one whose causal
// predicate trims its rows, computes all of them (the lowering clamps every row and
// column it reads) and stores only its own; a tile past the end of the other sequence
// reads its last row (clamped too) and is masked out.
//
// Internal header: includes Halide.h (via pipeline_info.h).
#ifndef BRAZE_SCHEDULE_GPU_ATTENTION_H_
#define BRAZE_SCHEDULE_GPU_ATTENTION_H_

#include <ostream>
#include <set>
#include <string>

#include "schedule/pipeline_info.h"

namespace braze {
namespace schedule {
namespace gpu {

// Rows per block (the query or key rows each block owns), and the thread layout of
// each stage (a block of kGpuRowTile x 16 = 512 threads, see docs/ATTENTION.md):
inline constexpr int kGpuRowTile = 32;
// Wider rows (q, k or v wider than this) get half as many rows per block, so that the
// block's shared tiles (two staged operand tiles of 32 x width, the accumulator of rows
// x width) stay within the 48 KiB a CUDA block gets without opting in.
inline constexpr int64_t kGpuWideRow = 64;
// A product's thread computes kProductTile positions x kProductTile rows in registers.
inline constexpr int kProductTile = 2;
// A weight's thread computes kWeightRows rows of one position.
inline constexpr int kWeightRows = 2;
// An operand tile's, an accumulator's or a result's row is kFeatureLanes threads wide at
// most.
inline constexpr int kFeatureLanes = 16;

// Rows per block of `s`: kGpuRowTile, or half of it for wide rows.
int GpuRowTile(const Stage& s);

// Schedules `s` (its result compute_root, a kernel of its own); adds every Func with an
// update definition it placed to `placed`.
void ScheduleAttention(const Stage& s, std::ostream& log, std::set<std::string>& placed);

}  // namespace gpu
}  // namespace schedule
}  // namespace braze

#endif  // BRAZE_SCHEDULE_GPU_ATTENTION_H_
