// Large programs for compile-time probes and tests (docs/FUZZING_FAMILIES.md, "Large
// clusters"): built with the public builders into the graph of their input, in the
// caller's JitScope. braze-compile-probe times them; the tests check their clusters'
// structure and results.
#ifndef BRAZE_TOOLS_PROBE_LARGE_PROGRAMS_H_
#define BRAZE_TOOLS_PROBE_LARGE_PROGRAMS_H_

#include <vector>

#include "absl/status/statusor.h"
#include "braze/graph.h"

namespace braze {
namespace probe {

// `n` elementwise ops (2.2 n graph nodes with their constants), each read by the next
// two, so the graph is a DAG and not a tree: Add, Tanh, Mul, Sigmoid and Maximum in turn.
Tensor ElementwiseChain(Tensor x, int n);

// The sum of `n` terms Tanh(x * c_i), added pairwise, and its row sums (x of rank 2):
// shallow, but one loop nest reads every term.
std::vector<Tensor> WideSum(Tensor x, int n);

// The chain's sum and that sum's gradient with respect to `x` (about 7.7 n nodes): the
// backward pass reads the forward values, so one cluster holds values read far apart.
absl::StatusOr<std::vector<Tensor>> ChainAndGradient(Tensor x, int n);

}  // namespace probe
}  // namespace braze

#endif  // BRAZE_TOOLS_PROBE_LARGE_PROGRAMS_H_
