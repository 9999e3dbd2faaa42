// A GRU (gated recurrent unit) layer, the recurrent model of examples/gru.cc and of the
// GRU training-step benchmarks (bench/gru_bench.cc). One cell function serves both
// forms of the recurrence: hand-unrolled (a C++ loop building every step into the
// graph) and a Scan over the steps (the cell traced once, run 28 times).
//
// The cell follows torch::nn::GRU's equations and weight layout (gates r, z, n):
//   r = sigmoid(x W_ir + b_ir + h W_hr + b_hr)
//   z = sigmoid(x W_iz + b_iz + h W_hz + b_hz)
//   n = tanh(x W_in + b_in + r * (h W_hn + b_hn))
//   h' = (1 - z) * n + z * h
// with the three gates' weights side by side: w_i [input, 3H] is torch's weight_ih
// transposed, w_h [H, 3H] its weight_hh transposed, b_i and b_h its two biases.
#ifndef BRAZE_EXAMPLES_LIB_GRU_H_
#define BRAZE_EXAMPLES_LIB_GRU_H_

#include <cstdint>
#include <string>
#include <vector>

#include "braze/braze.h"

namespace braze_examples {

struct GruWeights {
  braze::Tensor w_i, w_h, b_i, b_h;
  int64_t input = 0, hidden = 0;
  std::vector<braze::Tensor> variables() const { return {w_i, w_h, b_i, b_h}; }
};

// The layer's initial values, uniform in +-1/sqrt(hidden) as torch::nn::GRU initializes
// them (seeds seed + 1 .. seed + 4, in this order).
struct GruInit {
  braze::HostTensor w_i, w_h, b_i, b_h;
};
GruInit GruInitialValues(int64_t input, int64_t hidden, uint64_t seed);

// The layer's variables ("<name>/w_i", ...), starting from `init`.
GruWeights MakeGru(braze::Graph& g, const GruInit& init, const std::string& name);

// One step: the state after reading x_t [B, input] in state h [B, hidden].
braze::Tensor GruCell(const GruWeights& w, braze::Tensor x_t, braze::Tensor h);

// The zero state [B, hidden] for inputs x [B, ...] (B may be -1: a Function's batch).
braze::Tensor GruZeroState(const GruWeights& w, braze::Tensor x);

// The last state over `steps` steps of x [B, steps * input] (step t reads columns
// t*input .. (t+1)*input - 1), hand-unrolled: GruCell built once per step.
braze::Tensor GruUnrolled(const GruWeights& w, braze::Tensor x, int64_t steps);

// The same last state as one Scan (braze/control_flow.h) over the steps: x's rows
// [steps, B, input] are its elems, the state its carry, GruCell its body.
braze::Tensor GruScan(const GruWeights& w, braze::Tensor x, int64_t steps);

}  // namespace braze_examples

#endif  // BRAZE_EXAMPLES_LIB_GRU_H_
