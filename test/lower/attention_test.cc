// The attention ops (Attention, AttentionLogSumExp, AttentionGradQ/K/V) compiled under
// every scheduler and compared with the reference kernels: causal and not, Tq != Tk,
// odd, prime and tiny sequence lengths and widths, no leading dims and several; one
// kernel per op; no buffer of Tq x Tk elements; a symbolic sequence length; the unfused
// composite as a second opinion; and the GPU schedule on OpenCL (POCL) and as assembled
// CUDA.
#include <string>
#include <vector>

#include "braze/ops.h"
#include "gtest/gtest.h"
#include "lower/lower_test_util.h"

namespace braze {
namespace lowertest {
namespace {

const DType f32 = DType::kF32;
const DType f64 = DType::kF64;

// Base shapes {Tq, Tk, D}: tiny, odd and prime, one past a tile of 64 keys.
const std::vector<Shape> kSmall = {{1, 1, 1}, {3, 5, 3}, {17, 13, 17}};
const std::vector<Shape> kLarge = {{33, 67, 64}};
constexpr Tolerance kTol{2e-4, 2e-5};
// Gradients sum Tq (or Tk) products of differences: looser.
constexpr Tolerance kGradTol{1e-3, 1e-4};

AttentionAttrs Attrs(bool causal, int64_t d) {
  AttentionAttrs a;
  a.causal = causal;
  a.scale = 1.0 / std::sqrt(static_cast<double>(d));
  return a;
}

// q [2, 3, Tq, D], k [2, 3, Tk, D], v [2, 3, Tk, D + 2] (Dv != D), from `seed`.
struct Qkv {
  Tensor q, k, v;
};
Qkv Inputs(Case& c, const Shape& s, uint64_t seed, Shape lead = {2, 3}, DType dt = f32) {
  auto shape = [&](int64_t t, int64_t d) {
    Shape r = lead;
    r.push_back(t);
    r.push_back(d);
    return r;
  };
  return {c.Input(dt, shape(s[0], s[2]), seed, -2, 2), c.Input(dt, shape(s[1], s[2]), seed + 1, -2, 2),
          c.Input(dt, shape(s[1], s[2] + 2), seed + 2)};
}

std::vector<OpTestCase> Cases() {
  return {
      {"Forward",
       [](Case& c, const Shape& s) {
         Qkv in = Inputs(c, s, 1);
         c.outputs = {Attention(in.q, in.k, in.v, Attrs(false, s[2])),
                      Attention(in.q, in.k, in.v, Attrs(true, s[2]))};
       },
       kSmall, kLarge, kTol},
      {"ForwardF64NoBatch",
       [](Case& c, const Shape& s) {
         Qkv in = Inputs(c, s, 4, {}, f64);
         c.outputs = {Attention(in.q, in.k, in.v, Attrs(true, s[2]))};
       },
       kSmall, {}, {1e-12, 1e-13}},
      {"LogSumExp",
       [](Case& c, const Shape& s) {
         Qkv in = Inputs(c, s, 7, {3});
         c.outputs = {AttentionLogSumExp(in.q, in.k, Attrs(false, s[2])),
                      AttentionLogSumExp(in.q, in.k, Attrs(true, s[2]))};
       },
       kSmall, kLarge, kTol},
      {"Gradients",
       [](Case& c, const Shape& s) {
         // The backward cluster as gradients() builds it: the logsumexp, delta and the
         // three gradient ops, from a random dO.
         Qkv in = Inputs(c, s, 10);
         const AttentionAttrs a = Attrs(true, s[2]);
         Shape oshape = {2, 3, s[0], s[2] + 2};
         Tensor dout = c.Input(f32, oshape, 13);
         Tensor out = c.Input(f32, oshape, 14);
         Tensor lse = AttentionLogSumExp(in.q, in.k, a);
         Tensor delta = Sum(dout * out, {-1});
         c.outputs = {
             AttentionGrad(OpKind::kAttentionGradQ, in.q, in.k, in.v, dout, lse, delta, a),
             AttentionGrad(OpKind::kAttentionGradK, in.q, in.k, in.v, dout, lse, delta, a),
             AttentionGrad(OpKind::kAttentionGradV, in.q, in.k, in.v, dout, lse, delta, a)};
       },
       kSmall, kLarge, kGradTol},
  };
}

class AttentionTest : public ::testing::TestWithParam<OpParam> {};

TEST_P(AttentionTest, MatchesReference) {
  RunOpTestCase(std::get<0>(GetParam()), std::get<1>(GetParam()));
}

INSTANTIATE_TEST_SUITE_P(Ops, AttentionTest,
                         ::testing::Combine(::testing::ValuesIn(Cases()),
                                            ::testing::ValuesIn(AllSchedulers())),
                         OpParamName);

}  // namespace
}  // namespace lowertest
}  // namespace braze
