// Helpers of the PTX tests. The register rule: every kernel's blocks fit a multiprocessor's
// register file (schedule::RegistersPerBlock: registers x threads, per warp, <= 65536).
// Halide 14 gives ptxas no block size (no .maxntid: a schedule cannot set one), but its
// CUDA runtime loads every module with CU_JIT_MAX_REGISTERS = 64 (HL_CUDA_JIT_MAX_REGISTERS
// overrides), so a block of up to 1024 threads launches: a kernel over this rule would
// spill under that cap, and fail to launch (CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES) with a
// cap raised above 65536 / threads. docs/CUDA.md, "Launch limits".
#ifndef BRAZE_TEST_COMPILE_PTX_REGISTERS_H_
#define BRAZE_TEST_COMPILE_PTX_REGISTERS_H_

#include <unistd.h>

#include <cctype>
#include <cstdint>
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

// The first PTX float immediate that is an infinity or a NaN (0f... for f32, 0d... for
// f64, and the 0x.... an f16 immediate is written as; LLVM writes integers in decimal),
// or "" if none. A kernel whose Halide code held such a constant now reads it from a
// kernel argument (compile/codegen_workarounds.h, "Non-finite constants"); those left
// are Halide's code generator's own (its exp, log and pow expansions) and libdevice's.
inline std::string NonFiniteImmediate(const std::string& ptx) {
  for (size_t at = ptx.find('0'); at != std::string::npos; at = ptx.find('0', at + 1)) {
    if (at > 0 && (std::isalnum(static_cast<unsigned char>(ptx[at - 1])) || ptx[at - 1] == '_')) {
      continue;  // inside a name or a number
    }
    const char kind = at + 1 < ptx.size() ? ptx[at + 1] : ' ';
    const size_t digits = kind == 'f' ? 8 : kind == 'd' ? 16 : kind == 'x' ? 4 : 0;
    if (digits == 0 || at + 2 + digits > ptx.size()) continue;
    const std::string hex = ptx.substr(at + 2, digits);
    if (hex.find_first_not_of("0123456789abcdefABCDEF") != std::string::npos) continue;
    const size_t end = at + 2 + digits;
    if (end < ptx.size() && std::isxdigit(static_cast<unsigned char>(ptx[end]))) continue;
    const uint64_t bits = std::stoull(hex, nullptr, 16);
    const uint64_t exponent = kind == 'f' ? 0x7f800000 : kind == 'd' ? 0x7ff0000000000000 : 0x7c00;
    if ((bits & exponent) == exponent) return ptx.substr(at, 2 + digits);
  }
  return "";
}

}  // namespace braze

#endif  // BRAZE_TEST_COMPILE_PTX_REGISTERS_H_
