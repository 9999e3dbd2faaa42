#include "lib/gru.h"

#include <cmath>

#include "absl/strings/str_cat.h"

namespace braze_examples {

using braze::DType;
using braze::HostTensor;
using braze::Tensor;

GruWeights MakeGru(braze::Graph& g, int64_t input, int64_t hidden, uint64_t seed,
                   const std::string& name) {
  const double bound = 1.0 / std::sqrt(static_cast<double>(hidden));
  auto uniform = [&](braze::Shape shape, uint64_t k, const char* what) {
    return braze::Variable(g,
                           HostTensor::RandomUniform(DType::kF32, shape, seed + k, -bound, bound),
                           absl::StrCat(name, "/", what));
  };
  GruWeights w;
  w.input = input;
  w.hidden = hidden;
  w.w_i = uniform({input, 3 * hidden}, 1, "w_i");
  w.w_h = uniform({hidden, 3 * hidden}, 2, "w_h");
  w.b_i = uniform({3 * hidden}, 3, "b_i");
  w.b_h = uniform({3 * hidden}, 4, "b_h");
  return w;
}

Tensor GruCell(const GruWeights& w, Tensor x_t, Tensor h) {
  const int64_t H = w.hidden;
  // The three gates' input and recurrent projections as two GEMMs of width 3H.
  const Tensor gi = braze::MatMul(x_t, w.w_i) + w.b_i;
  const Tensor gh = braze::MatMul(h, w.w_h) + w.b_h;
  auto gate = [H](Tensor t, int64_t k) { return braze::Slice(t, {0, k * H}, {-1, H}); };
  const Tensor r = braze::Sigmoid(gate(gi, 0) + gate(gh, 0));
  const Tensor z = braze::Sigmoid(gate(gi, 1) + gate(gh, 1));
  const Tensor n = braze::Tanh(gate(gi, 2) + r * gate(gh, 2));
  return n + z * (h - n);  // (1 - z) n + z h
}

Tensor GruZeroState(const GruWeights& w, Tensor x) {
  // [B, 1] zeros times a [1, H] zero row: B follows x, also when it is a -1 dim.
  braze::Graph& g = *x.graph();
  const Tensor column = braze::Slice(x, {0, 0}, {-1, 1}) * 0.0;
  return braze::MatMul(column, braze::Const(g, HostTensor(DType::kF32, {1, w.hidden})));
}

Tensor GruUnrolled(const GruWeights& w, Tensor x, int64_t steps) {
  Tensor h = GruZeroState(w, x);
  for (int64_t t = 0; t < steps; ++t) {
    h = GruCell(w, braze::Slice(x, {0, t * w.input}, {-1, w.input}), h);
  }
  return h;
}

}  // namespace braze_examples
