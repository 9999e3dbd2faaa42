// GEMM pattern match: which MatMul/BatchMatMul ops a library GEMM runs (cuBLASLt on a
// CUDA device), with the ops folded into its epilogue. A planning stage (runtime/
// plan.cc), run before clustering: the matched ops are library calls, never clustered.
//
//   MatMul(a, b) -> Add(., bias[n]) -> Relu(.)       one GEMM with a bias (+ReLU) epilogue
//        |              |
//        only consumer  only consumer, same device, nothing else reads the value between
//
// Pure graph logic on placements: no driver is asked anything (which devices have a
// library GEMM is the caller's answer), so it is tested on the CPU
// (test/passes/gemm_match_test.cc).
#ifndef BRAZE_PASSES_GEMM_MATCH_H_
#define BRAZE_PASSES_GEMM_MATCH_H_

#include <functional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "braze/graph.h"

namespace braze {

struct GemmMatchOptions {
  // The device of ops built with no placement.
  Device default_device;
  // Whether a library GEMM runs MatMuls of a dtype placed on a device (the runtime asks
  // the device's backend, device/features.h, and the library: cuBLASLt on CUDA, for f32,
  // f64, bf16 and f16). Unset: none does.
  std::function<bool(const Device&, DType)> has_library_gemm;
  // Also fold a Relu after the bias (SessionOptions::cuda_relu_epilogue: opt-in, as
  // cuBLASLt does not document its ReLU's NaN handling and braze::Relu keeps NaN).
  bool fold_relu = false;
};

struct GemmMatch {
  std::vector<int> nodes;      // {matmul[, add[, relu]]}: the GEMM and its epilogue
  std::vector<Tensor> inputs;  // a, b[, bias]
  Tensor output;               // the last node's output: what consumers read
  bool bias() const { return nodes.size() >= 2; }
  bool relu() const { return nodes.size() >= 3; }
};

// Every MatMul/BatchMatMul in `needed` (by node id) placed on a device with a library
// GEMM for its dtype (options.has_library_gemm: CUDA's, f32, f64, bf16 and f16), with the
// bias Add (a [n] vector of the same dtype) that is its only consumer and the Relu after that
// (options.fold_relu), when no fetch (`fetched`: (node id, output index) pairs) or other
// op reads the values in between.
std::vector<GemmMatch> MatchGemms(const Graph& graph, const std::vector<bool>& needed,
                                  const std::set<std::pair<int, int>>& fetched,
                                  const GemmMatchOptions& options);

}  // namespace braze

#endif  // BRAZE_PASSES_GEMM_MATCH_H_
