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
// A schedule over either limit is rejected like one Halide rejects (the compile driver
// falls through to the next scheduler). OpenCL gets the same limits: the portable
// minimum a GPU schedule may assume.
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

// One kernel launch of a lowered module, as the host code computes it. A count is -1
// when it is not a constant even with the known buffer fields substituted (a symbolic
// shape's), and then `*_bound` is the largest value it can take, or -1 when none is known.
struct GpuLaunch {
  std::string api;     // "cuda", "opencl", ...
  std::string kernel;  // the entry point
  int64_t threads = -1, threads_bound = -1;
  int64_t shared_bytes = -1, shared_bound = -1;
};

// Every halide_<api>_run call in `module`'s host code. `known_values` ("in0.extent.1"
// -> 61) are buffer fields the cluster fixes.
std::vector<GpuLaunch> GpuLaunches(const Halide::Module& module,
                                   const std::map<std::string, int64_t>& known_values = {});

// Empty when every launch in `module` keeps the limits above, else what is wrong, naming
// the kernel. A count with no constant bound cannot be judged and passes.
std::string CheckGpuLaunchLimits(const Halide::Module& module,
                                 const std::map<std::string, int64_t>& known_values = {});

}  // namespace schedule
}  // namespace braze

#endif  // BRAZE_SCHEDULE_GPU_LAUNCH_CHECK_H_
