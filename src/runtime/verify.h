// Verify mode (SessionOptions::verify, BRAZE_FLAGS=--verify): a compiled step's outputs
// against the same ops run on the reference kernels.
#ifndef BRAZE_RUNTIME_VERIFY_H_
#define BRAZE_RUNTIME_VERIFY_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "braze/graph.h"
#include "braze/host_tensor.h"
#include "compile/compile.h"
#include "runtime/plan.h"

namespace braze {

struct VerifyOptions {
  double rtol = 2e-3;
  double atol = 2e-4;
  std::string dump_to;  // where a failing kernel is written; empty: a new temp dir
};

// The relative tolerance for an output of type `t`: `rtol`, or for a 16-bit float an ulp
// of its type where that is more (2^-7 of a bf16 value at most, 2^-10 of an f16). Such an
// output is rounded once from f32 values the kernel and the reference kernels may
// compute an f32 ulp apart (another summation order, an FMA): one next to a rounding
// boundary lands on either side of it (the bf16 MLP step's first layer: 0.738281
// against 0.742188, one element of 131072). Verify mode and braze-tune both use it.
double OutputRtol(DType t, double rtol);

// Runs `step`'s nodes on the reference kernels from `inputs` (host copies of the step's
// inputs, in step order) and compares with `outputs` (host copies of what the kernel
// wrote, in step order). Internal, naming the cluster, its ops, `kernel`'s scheduler,
// the output and the worst element, and the dump written, when they differ.
absl::Status VerifyStep(const Graph& g, const Step& step, const std::vector<HostTensor>& inputs,
                        const std::vector<HostTensor>& outputs, const CompiledKernel& kernel,
                        const VerifyOptions& options);

}  // namespace braze

#endif  // BRAZE_RUNTIME_VERIFY_H_
