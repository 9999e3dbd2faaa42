// CUDA code generation for a cluster, and assembling the result with ptxas: everything
// about the GPU path that can be checked without a GPU.
//
// GenerateCudaCode lowers the cluster (LowerCluster), schedules it for the Halide target
// x86-64-linux-...-cuda-cuda_capability_86 (the highest capability Halide 14 knows; its
// PTX assembles for sm_90) and lowers the pipeline to a Halide Module. Halide compiles
// the GPU loops to one PTX module during that lowering and keeps it in the Module as
// the buffer "cuda_gpu_source_kernels", so no host object and no GPU are needed.
//
// AssemblePtx runs ptxas (-v) on PTX and reports per-kernel registers, spills and stack,
// the numbers that say whether a schedule's kernels fit a GPU's register file.
//
// No Halide include here: the runtime and tests see only ClusterSpec and strings.
#ifndef BRAZE_COMPILE_CUDA_CODEGEN_H_
#define BRAZE_COMPILE_CUDA_CODEGEN_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "compile/compile.h"

namespace braze {

struct CudaKernelCode {
  std::string target;                // the Halide target string the code is for
  std::string ptx;                   // one PTX module; empty when no output has elements
  std::vector<std::string> kernels;  // the PTX entry points, in PTX order
  int launches = 0;                  // kernel launches in the host code, per run
  int host_loops = 0;                // loops left on the host (0: all compute on the GPU)
  // The most threads and dynamic shared bytes of any launch (the bound of a symbolic
  // one; -1 unknown): schedule/gpu_launch_check.h's limits hold for an accepted schedule.
  int64_t max_threads_per_block = 0;
  int64_t max_shared_bytes = 0;
  // The scheduler that produced the schedule (schedule/scheduler.h).
  Scheduler scheduler_used = Scheduler::kGpuFused;
  // What produced the schedule: "Li2018", or "heuristic (fused|separate|serial)" (the
  // heuristic's fallbacks when Halide rejects a more ambitious plan).
  std::string scheduler;
  // Why each schedule tried before `scheduler` failed, in order: "<what>: <message>".
  std::vector<std::string> scheduler_failures;
  std::string schedule;  // the schedule, as text
  double compile_ms = 0;
};

// Generates the CUDA code for `spec` (concrete input types, as for CompileCluster).
// Halide errors come back as a Status, naming the cluster; a schedule that fails falls
// through to the next (Li2018 -> heuristic fused -> separate -> serial). `params`: the
// heuristic's sizes, as a stored entry gives them (the defaults: its own).
absl::StatusOr<CudaKernelCode> GenerateCudaCode(const ClusterSpec& spec, Scheduler which,
                                                const GpuScheduleParams& params = {});

struct PtxasKernel {
  std::string name;
  int registers = 0;
  int barriers = 0;
  int64_t stack_bytes = 0;
  int64_t spill_store_bytes = 0;
  int64_t spill_load_bytes = 0;
  int64_t shared_bytes = 0;  // static shared memory only; Halide's is dynamic
};

struct PtxasReport {
  std::vector<PtxasKernel> kernels;  // in ptxas' order
  std::string log;                   // ptxas' full -v output
};

// The ptxas used by AssemblePtx: the one CMake found (BRAZE_WITH_CUDA builds), else
// /usr/local/cuda/bin/ptxas. It may not exist.
std::string PtxasPath();

// Assembles `ptx` with `ptxas --gpu-name <gpu_name> -v` in a temporary directory.
// FailedPrecondition when ptxas is missing; Internal with ptxas' output when it fails.
absl::StatusOr<PtxasReport> AssemblePtx(const std::string& ptx,
                                        const std::string& gpu_name = "sm_90");

}  // namespace braze

#endif  // BRAZE_COMPILE_CUDA_CODEGEN_H_
