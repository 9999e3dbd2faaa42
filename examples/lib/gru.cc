#include "lib/gru.h"

#include <cmath>

#include "absl/strings/str_cat.h"

namespace braze_examples {

using braze::DType;
using braze::HostTensor;
using braze::Tensor;

GruInit GruInitialValues(int64_t input, int64_t hidden, uint64_t seed) {
  const double bound = 1.0 / std::sqrt(static_cast<double>(hidden));
  auto uniform = [&](braze::Shape shape, uint64_t k) {
    return HostTensor::RandomUniform(DType::kF32, std::move(shape), seed + k, -bound, bound);
  };
  return {uniform({input, 3 * hidden}, 1), uniform({hidden, 3 * hidden}, 2),
          uniform({3 * hidden}, 3), uniform({3 * hidden}, 4)};
}

GruWeights MakeGru(braze::Graph& g, const GruInit& init, const std::string& name) {
  GruWeights w;
  w.input = init.w_i.shape()[0];
  w.hidden = init.w_h.shape()[0];
  w.w_i = braze::Variable(g, init.w_i, absl::StrCat(name, "/w_i"));
  w.w_h = braze::Variable(g, init.w_h, absl::StrCat(name, "/w_h"));
  w.b_i = braze::Variable(g, init.b_i, absl::StrCat(name, "/b_i"));
  w.b_h = braze::Variable(g, init.b_h, absl::StrCat(name, "/b_h"));
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

Tensor GruScan(const GruWeights& w, Tensor x, int64_t steps) {
  // [B, steps * input] -> [steps, B, input]: Scan slices its elems on the leading axis.
  const Tensor rows = braze::Transpose(braze::Reshape(x, {-1, steps, w.input}), {1, 0, 2});
  const braze::ScanResult r = braze::Scan(
      [w](braze::Graph&, const std::vector<Tensor>& h, const std::vector<Tensor>& x_t) {
        return braze::ScanStep{{GruCell(w, x_t[0], h[0])}, {}};  // no per-step outputs
      },
      {GruZeroState(w, x)}, {rows}, {.name = "gru_scan"});
  return r.carry[0];
}

}  // namespace braze_examples
