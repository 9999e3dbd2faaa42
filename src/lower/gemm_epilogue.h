// Which bias Adds (and ReLUs after them) a cluster's matmuls may take into a library
// GEMM's call (device/cpu_gemm.h's braze_cpu_gemm_bias_f32), as cuBLASLt's epilogue
// takes them on CUDA (passes/gemm_match.h, which works on the whole graph before
// clustering; this works inside one cluster):
//
//   MatMul(a, b) -> Add(., bias[n]) [-> Relu(.)]
//        |              |
//        read once, by the Add alone, in the cluster; neither is a cluster output
//
// A Conv2D (either format) may take a second Add after the first, a residual of its
// output's shape (device/cpu_conv.h's binary_add post-op), and the Relu after that:
//
//   Conv2D(x, f) -> Add(., bias or residual) [-> Add(., residual)] [-> Relu(.)]
//
// Which operand is a bias and which a residual is the lowering's decision, by shape
// (lower_conv_library.cc). Pure graph logic: whether the call is made (the library is used, the
// bias is [n] of the product's type, f32 or bf16, and lowered before the matmul) is the lowering's
// decision (lower_reduce.cc).
#ifndef BRAZE_LOWER_GEMM_EPILOGUE_H_
#define BRAZE_LOWER_GEMM_EPILOGUE_H_

#include <map>

#include "braze/graph.h"
#include "lower/cluster_spec.h"

namespace braze {
namespace lower {

struct GemmEpilogueNodes {
  int add = -1;           // the bias Add
  int residual_add = -1;  // a Conv2D's: the Add alone reading `add`, or -1
  int relu = -1;          // the Relu after the last of them, or -1
  Tensor bias;            // the Add's other operand
  Tensor residual;        // residual_add's other operand
};

// By MatMul/BatchMatMul and Conv2D node id: the epilogue each could take.
std::map<int, GemmEpilogueNodes> FindGemmEpilogues(const ClusterSpec& spec);

}  // namespace lower
}  // namespace braze

#endif  // BRAZE_LOWER_GEMM_EPILOGUE_H_
