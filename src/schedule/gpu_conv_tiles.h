// Shared-memory tiles for a GPU Conv2D, or a Conv2DBackpropInput at stride 1 (a kConv
// stage with a Stage::ConvWindow; the backprop is a Conv2D of dy over the flipped filter,
// dy in x's place below): the GPU heuristic's schedule for direct convolutions (see
// gpu_schedule.h).
//
// Without them each thread reduces its output's whole window reading global memory: a
// 3x3 window over 64 channels loads every input element 9 x (output channels) times and
// every filter element once per output pixel, through L1 at best. Here a block computes a
// tile of T0 x T1 outputs (dims 0 and 1 of the result: C_out x W in NHWC, W x H in NCHW):
//
//   for each chunk of K input channels (rdom.x split; the taps stay whole in the chunk):
//     the block loads the input patch the tile reads for those channels (every tap:
//     (T-1) * stride + (window-1) * dilation + 1 along W, and H) and the filter slice
//     (T0 or 1 output channels x K x KW x KH) into shared memory, its threads spreading
//     the loads over one fused loop (coalesced along dim 0), then a barrier;
//     each thread sums the chunk's taps for its rx x ry (2x2) adjacent outputs in
//     registers, reading both operands from shared memory, and adds the sums to the
//     block's accumulators; a barrier.
//
// The per-chunk sums are an rfactor of the accumulator over the chunk index, computed
// inside the thread loops (a constant rx x ry box: registers, unrolled). The
// accumulators themselves are the block's tile in shared memory, one add per output and
// chunk: Halide 14 keeps a Func computed at a block level there (registers across chunks
// would need CUDA-only gpu_lanes). Without the rfactor every multiply-add loaded and
// stored its accumulator in shared memory (PTX: 166 ld.shared and 72 st.shared in the
// 32 -> 64 channel kernel, against 61 and 8). The staged Funcs are the ConvWindow views,
// which clamp their reads, so each is computed over a constant box (bound_extent)
// whatever the tile's position: the shared allocation has a constant size, and a tile
// past the edge of the output or the input reads nothing outside a buffer (its extra
// values are never used).
//
// The chunk K is the most input channels (of C_in / groups, balanced over the chunks)
// whose boxes and accumulators fit kSharedBudget (32 KiB, below CUDA's 48 KiB and what
// the OpenCL backend accepts). The stage keeps the old schedule (a thread per output),
// saying why in the log, when even one channel does not fit (a huge dilation or stride
// widens the patch) or when the tiles would not pay: each staged element read by fewer
// than two multiply-adds.
//
// Internal header: includes Halide.h (via pipeline_info.h).
#ifndef BRAZE_SCHEDULE_GPU_CONV_TILES_H_
#define BRAZE_SCHEDULE_GPU_CONV_TILES_H_

#include <ostream>

#include "schedule/pipeline_info.h"

namespace braze {
namespace schedule {
namespace gpu {

// Schedules `s` (a kConv stage whose conv.x_view is defined): the result at root, a
// block per tile, the accumulator at the block, the views staged per chunk. Returns true
// when it did; false when the geometry rules the tiles out, with nothing scheduled. Either
// way `log` gets the decision, the tile and the chunk, or the reason.
bool ConvTiles(const Stage& s, std::ostream& log);

}  // namespace gpu
}  // namespace schedule
}  // namespace braze

#endif  // BRAZE_SCHEDULE_GPU_CONV_TILES_H_
