// Mixed precision (issue 38; docs/MIXED_PRECISION.md, "The policy"): torch.autocast /
// Keras mixed_float16 for Braze graphs. Ops built while a PrecisionScope is open on a
// graph compute matmuls, convolutions, attention and elementwise chains in bf16 or f16,
// and reductions, Exp/Log/Pow, softmax and normalization statistics in f32; Variables
// stay what they were made (f32 masters), so the optimizer updates f32 weights from f32
// gradients (the gradient of each Cast the policy puts after a master is a Cast back).
//
//   Graph g;
//   ... make f32 Variables ...
//   {
//     PrecisionScope policy(g, DType::kBF16);   // or kF16, with loss scaling
//     Tensor loss = Model(x, ...);              // 16-bit matmuls, f32 loss
//     auto train = Minimize(Optimizer::Adam(1e-3).WithLossScaling(), loss, params);
//   }
//
// FunctionOptions::precision traces a Function's body under the scope (the one option
// a training loop turns on). The scope applies at graph building, in Graph::AddNode,
// before any pass: the Casts are ordinary nodes, so clustering fuses them into the
// clusters around them, and the cluster boundaries carry 16-bit values. It changes
// nothing a graph already holds; a Session runs whatever the graph says.
#ifndef BRAZE_PRECISION_H_
#define BRAZE_PRECISION_H_

#include "braze/dtype.h"
#include "braze/graph.h"

namespace braze {

// RAII: ops built on `g` while it lives follow the policy of `compute` (kBF16 or kF16;
// kF32 turns the policy off inside an outer scope). Another dtype is recorded as the
// graph's error (Graph::status()) and leaves the policy as it was. Scopes nest; each
// restores the previous dtype when it closes.
class PrecisionScope {
 public:
  PrecisionScope(Graph& g, DType compute);
  ~PrecisionScope();
  PrecisionScope(const PrecisionScope&) = delete;
  PrecisionScope& operator=(const PrecisionScope&) = delete;

 private:
  Graph& g_;
  DType previous_;
};

}  // namespace braze

#endif  // BRAZE_PRECISION_H_
