// The GPU heuristic's sizes and the tiling building blocks it composes (see
// gpu_schedule.h for the rules and why): pointwise tiles, fused reduction domains, the
// shared memory of a cooperative reduction, a cluster input's constant extents.
//
// The sizes braze-tune may vary (threads per block, a pointwise tile's width, elements
// per thread of a row, the warp-per-row limit, the vector width, the matmul tile) are
// GpuScheduleParams (stored_schedule.h), whose defaults are the constants below.
//
// Internal header: includes Halide.h (via pipeline_info.h).
#ifndef BRAZE_SCHEDULE_GPU_TILES_H_
#define BRAZE_SCHEDULE_GPU_TILES_H_

#include <cstdint>
#include <vector>

#include "schedule/pipeline_info.h"
#include "schedule/stored_schedule.h"

namespace braze {
namespace schedule {
namespace gpu {

using Halide::Func;
using Halide::RVar;
using Halide::TailStrategy;
using Halide::Var;

// Every split is guarded: shapes are exact, but any extent (1, 3, 65) must work with
// tiles of 32 or 256, and an RVar split can only be guarded anyway.
inline constexpr TailStrategy kGuard = TailStrategy::GuardWithIf;
inline constexpr int kWarp = 32;
// Fan-in of each level of a cooperative combine (see Cooperative).
inline constexpr int kFanIn = 8;
inline constexpr int kMaxThreads = 256;  // GpuScheduleParams::block_threads' default
// A block per row keeps an H100 (132 SMs) busy from about this many rows on; with fewer
// rows, a row this long is split over many blocks instead (two stages).
inline constexpr int64_t kManyRows = 128;
inline constexpr int64_t kLongRow = 16384;
// Rows this short, when there are this many, get a thread each instead of a block.
inline constexpr int64_t kShortRowLen = 16;
inline constexpr int64_t kManyShortRows = 4096;
// One thread per column reduction output is enough parallelism from this many outputs
// on, or when each thread's serial loop is this short.
inline constexpr int64_t kManyOutputs = 8192;
inline constexpr int64_t kShortColumn = 64;
// Two-stage reductions aim at about this many threads in the first stage, each summing
// at least kMinPerThread elements (fewer, longer threads waste no launch overhead).
inline constexpr int64_t kTargetThreads = 65536;
// Block reductions one output's kernel may host on OpenCL (see ChooseHosts).
inline constexpr int kMaxOpenCLHostedBlockReductions = 2;
inline constexpr int64_t kMinPerThread = 16;
// Shared allocations are multiples of this many elements: 8 bytes for any element type
// (see Cooperative for the Halide 14 bug this avoids).
inline constexpr int kSharedAlign = 8;
// Elements per thread of a plain pointwise CUDA output (see ScheduleOutput).
inline constexpr int kCudaVector = 4;

// MatMul result tile: 256 threads, each accumulating one output over k in registers.
inline constexpr int kMatMulTile = 16;
// Shared memory one kernel may use: the least CL_DEVICE_LOCAL_MEM_SIZE the OpenCL backend
// accepts, and below the 48 KiB a CUDA kernel gets without opting in. Rows are staged in
// shared memory (see StageRows) only while the kernel's whole use stays within it.
inline constexpr int64_t kSharedBudget = 32 * 1024;

// Threads cooperating on one row of `len` elements: each thread reads about
// kRowElementsPerThread elements, and a block is 1 to 8 warps. 16, not 4: a row of 1024
// then has 64 threads, whose partials combine in two levels (64 -> 8 -> 1) instead of
// three, with fewer barriers and shared-memory round trips per element; the softmax
// kernel had 31 barriers and 25 shared loads per element at 4 (H200, 109 us for
// 16384x1024 against 51 us for PyTorch's eager kernel).
inline constexpr int kRowElementsPerThread = 16;

// CUDA kernels whose rows are at most this long take one warp per row (see
// ChooseWarpRows in gpu_fusion.cc): up to 64 elements per lane, as PyTorch's eager
// softmax takes a warp per row up to 1024 elements and more.
inline constexpr int64_t kWarpRow = 2048;

// Bytes of an online softmax's state per lane in shared memory (f32 max, f64 sum, two
// 32-bit maxima of bits; lower/online_softmax.h), each aligned as the combines' are.
inline constexpr int64_t kOnlineStateBytes = 4 + 8 + 4 + 4;

int64_t CeilDiv(int64_t a, int64_t b);

// The smallest power of two >= n, capped at `cap`.
int Pow2AtLeast(int64_t n, int cap);

// Threads cooperating on one row of `len` elements (see kRowElementsPerThread): about
// len / p.row_elements, a power of two from a warp to p.block_threads.
int RowThreads(int64_t len, const GpuScheduleParams& p = {});

// Elements each of a row's `threads` threads loads at a time, adjacent, when it stages a
// static row of `len` in shared memory (StageRow): kCudaVector where every pass covers
// threads * kCudaVector elements exactly (no tail), else 1. Halves the loads of a row of
// 1024 f32 (PTX: 16 ld.global.nc.f32 -> 8 ld.global.nc.u64; the 2-D row's address is
// not known 16-byte aligned to Halide, so no ld.global.nc.v4.f32), with no register more.
int RowVector(int64_t len, int threads);

// Extents with the unit dims dropped: a keep_dims reduction {1, R} has the rows of {R}.
Extents WithoutUnitDims(const Extents& e);

// Tiles `vars` (innermost first) of a pure Func: dim 0 on threadIdx.x, the other dims
// fused onto threadIdx.y, the tiles fused into one block dim. Extents may be empty
// (unknown): 32x8 or 256 then (p.tile_x x p.block_threads / p.tile_x, or
// p.block_threads). Returns the innermost thread Var.
// With `vector` > 1 (which must divide e[0]), dim 0 is first split into vectors of
// that many lanes, vectorized inside each thread.
Var PointwiseTile(Func f, const std::vector<Var>& vars, const Extents& e, int vector = 1,
                  const GpuScheduleParams& p = {});

// The RVars of an update fused into one (innermost first), so lanes and chunks can be
// split off whatever the number of reduced dims.
RVar FuseRVars(Func acc, const Halide::RDom& r);

// Bytes of shared memory the cooperative reduction of `s` takes (see Cooperative): its
// per-thread partials and each combine level, every one aligned to kSharedAlign.
// `threads`: the threads over its row (at most the row's length are used).
int64_t CooperativeBytes(const Stage& s, int threads);

// The constant extents of the cluster input (or constant) a plain load reads; empty
// when some extent is only known at run time.
Extents LoadExtents(const Halide::Internal::Function& fn);

}  // namespace gpu
}  // namespace schedule
}  // namespace braze

#endif  // BRAZE_SCHEDULE_GPU_TILES_H_
