// The register rule for the PTX tests: every kernel's blocks fit a multiprocessor's
// register file (schedule::RegistersPerBlock: registers x threads, per warp, <= 65536).
// Halide 14 gives ptxas no block size (no .maxntid: a schedule cannot set one), but its
// CUDA runtime loads every module with CU_JIT_MAX_REGISTERS = 64 (HL_CUDA_JIT_MAX_REGISTERS
// overrides), so a block of up to 1024 threads launches: a kernel over this rule would
// spill under that cap, and fail to launch (CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES) with a
// cap raised above 65536 / threads. docs/CUDA.md, "Launch limits".
#ifndef BRAZE_TEST_COMPILE_PTX_REGISTERS_H_
#define BRAZE_TEST_COMPILE_PTX_REGISTERS_H_

#include <unistd.h>

#include <string>

#include "absl/strings/str_cat.h"
#include "compile/cuda_codegen.h"
#include "schedule/gpu_launch_check.h"

namespace braze {

// Whether the toolkit's ptxas is here (the PTX tests assemble what they generate).
inline bool HavePtxas() { return access(PtxasPath().c_str(), X_OK) == 0; }

// How many times `needle` occurs in `text` (instructions in PTX, markers in a schedule).
inline int Count(const std::string& text, const std::string& needle) {
  int n = 0;
  for (size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) ++n;
  return n;
}

// Empty when the rule holds for every kernel of `report`, else which kernel breaks it.
// Each kernel is judged at the cluster's largest block (max_threads_per_block): ptxas'
// report does not say which launch a kernel has, so this errs towards flagging.
inline std::string CheckRegistersPerBlock(const CudaKernelCode& code, const PtxasReport& report) {
  const int64_t threads = code.max_threads_per_block;
  if (threads <= 0) return "";
  for (const PtxasKernel& k : report.kernels) {
    const int64_t per_block = schedule::RegistersPerBlock(k.registers, threads);
    if (per_block > schedule::kMaxGpuRegistersPerBlock) {
      return absl::StrCat("GPU kernel ", k.name, ": ", k.registers,
                          " registers a thread in blocks of up to ", threads, " threads take ",
                          per_block, " registers (at most ", schedule::kMaxGpuRegistersPerBlock,
                          "): it spills under the runtime's cap of 64 registers, or fails to "
                          "launch above it");
    }
  }
  return "";
}

}  // namespace braze

#endif  // BRAZE_TEST_COMPILE_PTX_REGISTERS_H_
