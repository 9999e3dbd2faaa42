// Gradients of the fused attention op: against f64 central finite differences (causal
// and not, Tq != Tk, a query that sees no key), against the unfused composite's
// gradients, compiled (forward and backward one kernel each) against the reference, and
// the backward ops' own gradients refused with a clear message.
#include <string>
#include <vector>

#include "autodiff/grad_check.h"
#include "braze/gradients.h"
#include "braze/jit_scope.h"
#include "braze/ops.h"
#include "braze/session.h"
#include "gtest/gtest.h"

namespace braze {
namespace {

using gradtest::CheckGradients;
using gradtest::GradCheckOptions;
using gradtest::RunReference;

const DType f32 = DType::kF32;
const DType f64 = DType::kF64;

struct Sizes {
  int64_t tq, tk, d, dv;
};

TEST(AttentionGradTest, MatchesFiniteDifferences) {
  // Tq > Tk with causal: the first two queries see no key (their rows are 0). With
  // dropout the mask is fixed by the step: the function stays smooth.
  for (const Sizes& n : {Sizes{4, 4, 3, 2}, Sizes{5, 3, 2, 3}, Sizes{2, 5, 1, 1}}) {
    for (int variant = 0; variant < 3; ++variant) {
      const bool causal = variant >= 1;
      const double dropout = variant == 2 ? 0.3 : 0.0;
      SCOPED_TRACE(testing::Message()
                   << n.tq << "x" << n.tk << "x" << n.d << " variant " << variant);
      Graph g;
      Tensor q = Placeholder(g, f64, {2, n.tq, n.d}, "q");
      Tensor k = Placeholder(g, f64, {2, n.tk, n.d}, "k");
      Tensor v = Placeholder(g, f64, {2, n.tk, n.dv}, "v");
      AttentionOptions o;
      o.causal = causal;
      o.dropout = dropout;
      o.step = Placeholder(g, DType::kI32, {}, "step");
      Tensor y = ScaledDotProductAttention(q, k, v, o);
      GradCheckOptions opt;
      opt.tolerance = 1e-6;
      opt.extra_feeds = {{o.step, HostTensor::Scalar<int32_t>(3)}};
      EXPECT_TRUE(CheckGradients(y,
                                 {{q, HostTensor::RandomUniform(f64, {2, n.tq, n.d}, 1, -2, 2)},
                                  {k, HostTensor::RandomUniform(f64, {2, n.tk, n.d}, 2, -2, 2)},
                                  {v, HostTensor::RandomUniform(f64, {2, n.tk, n.dv}, 3)}},
                                 opt));
    }
  }
}

// The fused op's value and gradients are the unfused composite's (reference kernels).
TEST(AttentionGradTest, FusedMatchesUnfused) {
  for (int variant = 0; variant < 3; ++variant) {
    const bool causal = variant >= 1;
    Graph g;
    const Shape qs = {2, 3, 7, 5}, ks = {2, 3, 6, 5}, vs = {2, 3, 6, 4};
    Tensor q = Placeholder(g, f64, qs, "q"), k = Placeholder(g, f64, ks, "k"),
           v = Placeholder(g, f64, vs, "v");
    AttentionOptions o;
    o.causal = causal;
    o.dropout = variant == 2 ? 0.5 : 0.0;
    o.seed = 17;
    Tensor step = Placeholder(g, DType::kI32, {}, "step");
    o.step = step;
    Tensor fused = ScaledDotProductAttention(q, k, v, o);
    o.fused = false;
    Tensor unfused = ScaledDotProductAttention(q, k, v, o);
    Tensor w = Placeholder(g, f64, {2, 3, 7, 4}, "w");
    auto gf = Gradients({Sum(fused * w)}, {q, k, v});
    auto gu = Gradients({Sum(unfused * w)}, {q, k, v});
    ASSERT_TRUE(gf.ok() && gu.ok()) << gf.status() << gu.status();
    std::vector<Tensor> fetches = {fused,   (*gf)[0], (*gf)[1], (*gf)[2],
                                   unfused, (*gu)[0], (*gu)[1], (*gu)[2]};
    const Feeds feeds = {{q, HostTensor::RandomUniform(f64, qs, 4, -2, 2)},
                         {k, HostTensor::RandomUniform(f64, ks, 5, -2, 2)},
                         {v, HostTensor::RandomUniform(f64, vs, 6)},
                         {w, HostTensor::RandomUniform(f64, {2, 3, 7, 4}, 7)},
                         {step, HostTensor::Scalar<int32_t>(2)}};
    std::vector<HostTensor> got = RunReference(g, feeds, fetches);
    for (int i = 0; i < 4; ++i) {
      std::string why;
      EXPECT_TRUE(AllClose(got[i], got[i + 4], 1e-10, 1e-12, &why)) << i << why;
    }
  }
}

// Forward and backward under a scope with separate compiled gradients: the forward is
// one kernel, the backward (logsumexp, delta and the three gradient ops) another, and
// both give the reference's values.
TEST(AttentionGradTest, ForwardAndBackwardAreOneKernelEach) {
  Graph g;
  const Shape qs = {2, 2, 37, 16}, vs = {2, 2, 37, 8};
  Tensor q = Placeholder(g, f32, qs, "q"), k = Placeholder(g, f32, qs, "k"),
         v = Placeholder(g, f32, vs, "v"), dout = Placeholder(g, f32, {2, 2, 37, 8}, "dout");
  Tensor y;
  {
    JitScope scope(g, JitScope::Options{true, true});
    AttentionOptions o;
    o.causal = true;
    y = ScaledDotProductAttention(q, k, v, o);
  }
  auto grads = Gradients({y}, {q, k, v}, {dout});
  ASSERT_TRUE(grads.ok()) << grads.status();
  const Feeds feeds = {{q, HostTensor::RandomUniform(f32, qs, 8, -2, 2)},
                       {k, HostTensor::RandomUniform(f32, qs, 9, -2, 2)},
                       {v, HostTensor::RandomUniform(f32, vs, 10)},
                       {dout, HostTensor::RandomUniform(f32, {2, 2, 37, 8}, 11)}};
  std::vector<Tensor> fetches = {y, (*grads)[0], (*grads)[1], (*grads)[2]};
  std::vector<HostTensor> want = RunReference(g, feeds, fetches);

  Session session(g);
  auto fwd = session.Run(feeds, {y});
  ASSERT_TRUE(fwd.ok()) << fwd.status();
  EXPECT_EQ(session.stats().cluster_launches + session.stats().single_op_launches, 1);
  EXPECT_EQ(session.stats().reference_launches, 0);
  session.ResetStats();
  auto got = session.Run(feeds, fetches);
  ASSERT_TRUE(got.ok()) << got.status();
  // The forward's kernel (the backward reads its output) and the backward's.
  EXPECT_EQ(session.stats().cluster_launches + session.stats().single_op_launches, 2)
      << session.ClusteringDebugString();
  EXPECT_EQ(session.stats().reference_launches, 0);
  for (size_t i = 0; i < fetches.size(); ++i) {
    std::string why;
    EXPECT_TRUE(AllClose((*got)[i], want[i], 1e-3, 1e-4, &why)) << i << why;
  }
}

TEST(AttentionGradTest, TheBackwardOpsHaveNoGradientAndSayWhy) {
  Graph g;
  Tensor q = Placeholder(g, f64, {3, 2}, "q"), k = Placeholder(g, f64, {3, 2}, "k"),
         v = Placeholder(g, f64, {3, 2}, "v");
  Tensor y = ScaledDotProductAttention(q, k, v);
  auto dq = Gradients({Sum(y)}, {q});
  ASSERT_TRUE(dq.ok()) << dq.status();
  auto ddq = Gradients({Sum((*dq)[0])}, {k});
  ASSERT_FALSE(ddq.ok());
  EXPECT_EQ(ddq.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_NE(ddq.status().message().find("gradient of node 'gradients/Attention"), std::string::npos)
      << ddq.status();
  EXPECT_NE(ddq.status().message().find("have no gradient"), std::string::npos) << ddq.status();
}

}  // namespace
}  // namespace braze
