// The launch limits every GPU kernel of a scheduled pipeline must keep, checked in the
// pipeline's lowered host code before anything is compiled for a device.
//
// Halide 14 launches a kernel with halide_<api>_run(..., blocks x/y/z, threads x/y/z,
// shared_mem_bytes, ...): the threads are the extents of the kernel's gpu_threads loops,
// and all its shared memory (every Func stored in MemoryType::GPUShared at the block
// level) is one dynamic allocation sized at the launch. Halide's CUDA runtime passes it
// to cuLaunchKernel without ever raising CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
// so a block over 48 KiB of shared memory, or over 1024 threads, fails to launch
// (CUDA_ERROR_INVALID_VALUE): on an H200 the ResNet block's convolutions and an f64
// Conv2D (braze-fuzz seed 69) compiled fine and then never ran. Nothing before the
// launch says so: PTX declares no dynamic shared memory and ptxas cannot see it.
//
// The other limits of a launch are per dimension: blockDim.x and .y at most 1024 and
// .z at most 64, gridDim.x below 2^31 and .y and .z at most 65535. A count with no
// constant bound (a symbolic shape's) is judged by what a run could make it: threads,
// grid y and z and shared memory could pass their limits at some run-time extent and
// fail to launch then, so such a launch is rejected; a grid x count is an int32 in
// Halide's launch, never above its limit.
//
// A schedule over a limit is rejected like one Halide rejects (the compile driver falls
// through to the next scheduler). OpenCL gets the same limits: the portable minimum a
// GPU schedule may assume.
//
// Registers are not known here: ptxas (or the driver, loading the PTX) allocates them,
// and a block needs registers x threads <= 65536 (CUDA's register file per block).
// Halide 14's CUDA runtime loads every module with CU_JIT_MAX_REGISTERS = 64, which
// keeps 1024-thread blocks launchable (by spilling, if need be); RegistersPerBlock below
// is the rule, for whoever has ptxas' count (the PTX tests: CheckRegistersPerBlock in
// test/compile/ptx_registers.h; docs/CUDA.md, "Launch limits").
//
// Internal header: includes Halide.h.
#ifndef BRAZE_SCHEDULE_GPU_LAUNCH_CHECK_H_
#define BRAZE_SCHEDULE_GPU_LAUNCH_CHECK_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "Halide.h"

namespace braze {
namespace schedule {

// What a GPU block may use: CUDA's limits without an opt-in.
inline constexpr int64_t kMaxGpuThreadsPerBlock = 1024;
inline constexpr int64_t kMaxGpuSharedBytesPerBlock = 48 * 1024;
inline constexpr int64_t kMaxGpuBlockDim[3] = {1024, 1024, 64};
inline constexpr int64_t kMaxGpuGridDim[3] = {(int64_t{1} << 31) - 1, 65535, 65535};
inline constexpr int64_t kMaxGpuRegistersPerBlock = 65536;

// A launch's count: a constant `value`, or -1 and `bound`, the largest value it can
// take (-1: none known).
struct LaunchCount {
  int64_t value = -1, bound = -1;
  // The value a check judges: the constant, else its bound (-1: unknown).
  int64_t judged() const { return value >= 0 ? value : bound; }
};

// One kernel launch of a lowered module, as the host code computes it, with the known
// buffer fields substituted.
struct GpuLaunch {
  std::string api;                        // "cuda", "opencl", ...
  std::string kernel;                     // the entry point
  LaunchCount blocks[3], thread_dims[3];  // x, y, z
  // threads: the product of thread_dims.
  int64_t threads = -1, threads_bound = -1;
  int64_t shared_bytes = -1, shared_bound = -1;
};

// Every halide_<api>_run call in `module`'s host code. `known_values` ("in0.extent.1"
// -> 61) are buffer fields the cluster fixes.
std::vector<GpuLaunch> GpuLaunches(const Halide::Module& module,
                                   const std::map<std::string, int64_t>& known_values = {});

// Empty when every launch in `module` keeps the limits above, else what is wrong, naming
// the kernel ("GPU kernel K would fail to launch: ...", or "... would fail to launch at
// some run-time extents: ..." for a count with no constant bound).
std::string CheckGpuLaunchLimits(const Halide::Module& module,
                                 const std::map<std::string, int64_t>& known_values = {});

// `module`'s launches, one per line: "kernel K: grid X x Y x Z blocks of X x Y x Z
// threads, S bytes of shared memory" (a symbolic count: "<=B", or "?" without a bound).
// For an error that names no kernel: Halide 14's CUDA runtime reports a failed launch
// as "CUDA: cuLaunchKernel failed: <error>" alone.
std::string DescribeGpuLaunches(const Halide::Module& module);

// The registers a block of `threads` threads takes when each uses `registers_per_thread`
// (as ptxas reports them): CUDA allocates them per warp, in units of 256. A block
// launches only when this is at most kMaxGpuRegistersPerBlock.
int64_t RegistersPerBlock(int64_t registers_per_thread, int64_t threads);

}  // namespace schedule
}  // namespace braze

#endif  // BRAZE_SCHEDULE_GPU_LAUNCH_CHECK_H_
