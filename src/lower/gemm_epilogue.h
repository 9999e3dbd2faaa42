// Which bias Adds (and ReLUs after them) a cluster's matmuls may take into a library
// GEMM's call (device/cpu_gemm.h's braze_cpu_gemm_bias_f32), as cuBLASLt's epilogue
// takes them on CUDA (passes/gemm_match.h, which works on the whole graph before
// clustering; this works inside one cluster):
//
//   MatMul(a, b) -> Add(., bias[n]) [-> Relu(.)]
//        |              |
//        read once, by the Add alone, in the cluster; neither is a cluster output
//
// Pure graph logic: whether the call is made (the library is used, the bias is [n] of
// the product's type, f32 or bf16, and lowered before the matmul) is the lowering's
// decision (lower_reduce.cc).
#ifndef BRAZE_LOWER_GEMM_EPILOGUE_H_
#define BRAZE_LOWER_GEMM_EPILOGUE_H_

#include <map>

#include "braze/graph.h"
#include "lower/cluster_spec.h"

namespace braze {
namespace lower {

struct GemmEpilogueNodes {
  int add = -1;   // the bias Add
  int relu = -1;  // the Relu after it, or -1
  Tensor bias;    // the Add's other operand
};

// By MatMul/BatchMatMul node id (and NHWC Conv2D: device/cpu_conv.h takes the same bias
// and ReLU): the epilogue each could take.
std::map<int, GemmEpilogueNodes> FindGemmEpilogues(const ClusterSpec& spec);

}  // namespace lower
}  // namespace braze

#endif  // BRAZE_LOWER_GEMM_EPILOGUE_H_
