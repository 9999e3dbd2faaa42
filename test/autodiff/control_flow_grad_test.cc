// cf (issue 40): gradients of Cond, Scan and bounded While against f64 central finite
// differences (grad_check.h, reference kernels), and the compiled gradient against the
// reference one.
#include <cmath>
#include <vector>

#include "autodiff/grad_check.h"
#include "braze/braze.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace braze {
namespace {

using gradtest::AwayFromZero;
using gradtest::CheckGradients;
using gradtest::GradCheckOptions;
using ::testing::HasSubstr;

constexpr DType kF64 = DType::kF64;

GradCheckOptions Tolerant() {
  GradCheckOptions o;
  o.tolerance = 1e-5;
  return o;
}

// h_t = tanh(x_t W + h_{t-1} U + b), with W, U and b captured placeholders.
struct Rnn {
  Graph g;
  Tensor xs, h0, w, u, b;
  ScanResult r;
  explicit Rnn(int64_t t, bool reverse = false) {
    xs = Placeholder(g, kF64, {t, 2, 3}, "xs");
    h0 = Placeholder(g, kF64, {2, 4}, "h0");
    w = Placeholder(g, kF64, {3, 4}, "w");
    u = Placeholder(g, kF64, {4, 4}, "u");
    b = Placeholder(g, kF64, {4}, "b");
    ScanOptions o;
    o.reverse = reverse;
    r = Scan(
        [&](Graph&, const std::vector<Tensor>& c, const std::vector<Tensor>& x) {
          Tensor h1 = Tanh(MatMul(x[0], w) + MatMul(c[0], u) + b);
          return ScanStep{{h1}, {Square(h1)}};
        },
        {h0}, {xs}, o);
  }
  Feeds Inputs(int64_t t) const {
    return {{xs, AwayFromZero({t, 2, 3}, 1, -1, 1, 0.1)},
            {h0, AwayFromZero({2, 4}, 2, -1, 1, 0.1)},
            {w, AwayFromZero({3, 4}, 3, -0.6, 0.6, 0.05)},
            {u, AwayFromZero({4, 4}, 4, -0.6, 0.6, 0.05)},
            {b, AwayFromZero({4}, 5, -0.3, 0.3, 0.05)}};
  }
};

TEST(ControlFlowGradTest, ScanMatchesFiniteDifferencesThroughStackedOutputs) {
  for (int64_t t : {1, 2, 7}) {
    SCOPED_TRACE(t);
    Rnn m(t);
    ASSERT_TRUE(m.g.status().ok()) << m.g.status();
    EXPECT_TRUE(CheckGradients(m.r.stacked[0], m.Inputs(t), Tolerant()));
  }
}

TEST(ControlFlowGradTest, ScanMatchesFiniteDifferencesThroughTheFinalCarry) {
  Rnn m(5);
  EXPECT_TRUE(CheckGradients(m.r.carry[0], m.Inputs(5), Tolerant()));
}

TEST(ControlFlowGradTest, ReverseScanAndAnUnknownLength) {
  Rnn m(-1, /*reverse=*/true);
  ASSERT_TRUE(m.g.status().ok()) << m.g.status();
  EXPECT_TRUE(CheckGradients(m.r.stacked[0], m.Inputs(3), Tolerant()));
}

TEST(ControlFlowGradTest, CondGivesTheTakenBranchsGradient) {
  Graph g;
  Tensor p = Placeholder(g, DType::kBool, {}, "p");
  Tensor x = Placeholder(g, kF64, {3, 2}, "x");
  Tensor w = Placeholder(g, kF64, {2, 2}, "w");
  Tensor v = Placeholder(g, kF64, {2}, "v");
  std::vector<Tensor> y = Cond(
      p,
      [&](Graph&, const std::vector<Tensor>& a) {
        return std::vector<Tensor>{Tanh(MatMul(a[0], w))};
      },
      [&](Graph&, const std::vector<Tensor>& a) { return std::vector<Tensor>{Exp(a[0]) * v}; },
      {x});
  ASSERT_TRUE(g.status().ok()) << g.status();
  for (bool taken : {true, false}) {
    SCOPED_TRACE(taken);
    GradCheckOptions o = Tolerant();
    o.extra_feeds = {{p, HostTensor::Scalar<bool>(taken)}};
    EXPECT_TRUE(CheckGradients(y[0],
                               {{x, AwayFromZero({3, 2}, 1, -1, 1)},
                                {w, AwayFromZero({2, 2}, 2, -1, 1)},
                                {v, AwayFromZero({2}, 3, -1, 1)}},
                               o));
  }
}

TEST(ControlFlowGradTest, ScanInsideCond) {
  Graph g;
  Tensor p = Placeholder(g, DType::kBool, {}, "p");
  Tensor xs = Placeholder(g, kF64, {4, 3}, "xs");
  Tensor w = Placeholder(g, kF64, {3}, "w");
  std::vector<Tensor> y = Cond(
      p,
      [&](Graph&, const std::vector<Tensor>& a) {
        ScanResult r = Scan(
            [&](Graph&, const std::vector<Tensor>& c, const std::vector<Tensor>& x) {
              Tensor s = Sin(c[0] * w + x[0]);
              return ScanStep{{s}, {s}};
            },
            {a[0] * ScalarConst(*a[0].graph(), 0.0, kF64)}, {a[1]});
        return std::vector<Tensor>{r.stacked[0]};
      },
      [&](Graph&, const std::vector<Tensor>& a) { return std::vector<Tensor>{a[1] * w}; }, {w, xs});
  ASSERT_TRUE(g.status().ok()) << g.status();
  for (bool taken : {true, false}) {
    GradCheckOptions o = Tolerant();
    o.extra_feeds = {{p, HostTensor::Scalar<bool>(taken)}};
    EXPECT_TRUE(
        CheckGradients(y[0], {{xs, AwayFromZero({4, 3}, 4)}, {w, AwayFromZero({3}, 5)}}, o));
  }
}

// A Scan whose body runs a Scan over the rows of its slice (a second-level recurrence),
// both capturing w: the inner Scan's gradient is built inside the outer's gradient body.
TEST(ControlFlowGradTest, ScanInsideScan) {
  Graph g;
  Tensor xs = Placeholder(g, kF64, {3, 2, 4}, "xs");
  Tensor w = Placeholder(g, kF64, {4}, "w");
  Tensor c0 = Placeholder(g, kF64, {4}, "c0");
  ScanResult outer = Scan(
      [&](Graph&, const std::vector<Tensor>& c, const std::vector<Tensor>& x) {
        ScanResult inner = Scan(
            [&](Graph&, const std::vector<Tensor>& ci, const std::vector<Tensor>& row) {
              Tensor h = Tanh(ci[0] * w + row[0]);
              return ScanStep{{h}, {}};
            },
            {c[0]}, {x[0]});
        Tensor h = Sin(inner.carry[0]) + c[0] * w;
        return ScanStep{{h}, {Square(h)}};
      },
      {c0}, {xs});
  ASSERT_TRUE(g.status().ok()) << g.status();
  EXPECT_TRUE(CheckGradients(outer.stacked[0],
                             {{xs, AwayFromZero({3, 2, 4}, 8, -1, 1, 0.1)},
                              {w, AwayFromZero({4}, 9, -0.8, 0.8, 0.1)},
                              {c0, AwayFromZero({4}, 10, -1, 1, 0.1)}},
                             Tolerant()));
}

// v <- tanh(v W) while the counter is below `limit`, at most 4 times.
TEST(ControlFlowGradTest, BoundedWhileStoppingEarlyAndAtItsBound) {
  Graph g;
  Tensor v = Placeholder(g, kF64, {2, 3}, "v");
  Tensor w = Placeholder(g, kF64, {3, 3}, "w");
  Tensor limit = Placeholder(g, DType::kI32, {}, "limit");
  std::vector<Tensor> out = While(
      [&](Graph&, const std::vector<Tensor>& s) { return Less(s[1], limit); },
      [&](Graph& b, const std::vector<Tensor>& s) {
        return std::vector<Tensor>{Tanh(MatMul(s[0], w)), s[1] + ScalarConst(b, 1, DType::kI32)};
      },
      {v, ScalarConst(g, 0, DType::kI32)}, 4);
  ASSERT_TRUE(g.status().ok()) << g.status();
  for (int lim : {2, 9}) {
    SCOPED_TRACE(lim);
    GradCheckOptions o = Tolerant();
    o.extra_feeds = {{limit, HostTensor::Scalar<int32_t>(lim)}};
    EXPECT_TRUE(CheckGradients(
        out[0], {{v, AwayFromZero({2, 3}, 6)}, {w, AwayFromZero({3, 3}, 7, -0.8, 0.8)}}, o));
  }
}

// Second order: the first-order gradient reads the forward's carry before each step (its
// kept carries), and the gradient of that gradient flows into them. It was dropped:
// Scan of c <- c * x_t stacking c over x = (2, 3) gave d/dx Sum(g1^2) = {0, 8}, not
// {4, 8}; a bounded While, replayed as a Scan, half its value.
TEST(ControlFlowGradTest, SecondOrderThroughKeptCarries) {
  {
    Graph g;
    Tensor x = Placeholder(g, kF64, {2}, "x");
    ScanResult r = Scan(
        [&](Graph&, const std::vector<Tensor>& c, const std::vector<Tensor>& e) {
          Tensor n = c[0] * e[0];
          return ScanStep{{n}, {n}};
        },
        {ScalarConst(g, 1.0, kF64)}, {x});
    auto g1 = Gradients({Sum(r.stacked[0])}, {x});
    ASSERT_TRUE(g1.ok()) << g1.status();
    Tensor loss = Sum(Square((*g1)[0]));
    auto g2 = Gradients({loss}, {x});
    ASSERT_TRUE(g2.ok()) << g2.status();
    auto out = Session(g, gradtest::ReferenceOnly())
                   .Run({{x, HostTensor::From<double>({2, 3}, {2})}}, {(*g1)[0], (*g2)[0]});
    ASSERT_TRUE(out.ok()) << out.status();
    EXPECT_EQ((*out)[0].ToVector<double>(), (std::vector<double>{4, 2}));  // (1 + x1, x0)
    EXPECT_EQ((*out)[1].ToVector<double>(), (std::vector<double>{4, 8}));  // (2 x0, 2 (1 + x1))
  }
  for (int64_t t : {1, 4}) {
    SCOPED_TRACE(t);
    Rnn m(t);
    auto g1 = Gradients({Sum(m.r.stacked[0])}, {m.w, m.u});
    ASSERT_TRUE(g1.ok()) << g1.status();
    Tensor loss = Sum(Square((*g1)[0])) + Sum(Square((*g1)[1]));
    EXPECT_TRUE(CheckGradients(loss, m.Inputs(t), Tolerant()));
  }
  Graph g;
  Tensor v = Placeholder(g, kF64, {2, 3}, "v");
  Tensor w = Placeholder(g, kF64, {3, 3}, "w");
  std::vector<Tensor> out = While(
      [&](Graph& b, const std::vector<Tensor>& s) {
        return Less(s[1], ScalarConst(b, 3, DType::kI32));
      },
      [&](Graph& b, const std::vector<Tensor>& s) {
        return std::vector<Tensor>{Tanh(MatMul(s[0], w)), s[1] + ScalarConst(b, 1, DType::kI32)};
      },
      {v, ScalarConst(g, 0, DType::kI32)}, 5);
  auto g1 = Gradients({Sum(out[0])}, {w});
  ASSERT_TRUE(g1.ok()) << g1.status();
  EXPECT_TRUE(CheckGradients(
      Sum(Square((*g1)[0])),
      {{v, AwayFromZero({2, 3}, 6)}, {w, AwayFromZero({3, 3}, 7, -0.8, 0.8)}}, Tolerant()));
}

TEST(ControlFlowGradTest, AnUnboundedWhileHasNoGradientAndSaysWhy) {
  Graph g;
  Tensor v = Placeholder(g, kF64, {2}, "v");
  std::vector<Tensor> out =
      While([&](Graph& b,
                const std::vector<Tensor>& s) { return Less(Sum(s[0]), ScalarConst(b, 9, kF64)); },
            [&](Graph& b, const std::vector<Tensor>& s) {
              return std::vector<Tensor>{s[0] * ScalarConst(b, 2, kF64)};
            },
            {v}, -1, "loop");
  auto grads = Gradients({out[0]}, {v});
  ASSERT_FALSE(grads.ok());
  EXPECT_EQ(grads.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_THAT(grads.status().message(), HasSubstr("node 'loop' (While)"));
  EXPECT_THAT(grads.status().message(), HasSubstr("max_iterations"));
}

// The gradient graph compiled (its bodies' clusters) against the reference, in f32.
TEST(ControlFlowGradTest, CompiledScanGradientMatchesTheReference) {
  Graph g;
  Tensor xs = Placeholder(g, DType::kF32, {-1, 3, 5}, "xs");
  Tensor h0 = Placeholder(g, DType::kF32, {3, 4}, "h0");
  Tensor w = Variable(g, HostTensor::RandomUniform(DType::kF32, {5, 4}, 1, -0.5, 0.5), "w");
  Tensor u = Variable(g, HostTensor::RandomUniform(DType::kF32, {4, 4}, 2, -0.5, 0.5), "u");
  ScanResult r = Scan(
      [&](Graph&, const std::vector<Tensor>& c, const std::vector<Tensor>& x) {
        Tensor h1 = Tanh(MatMul(x[0], w) + MatMul(c[0], u));
        return ScanStep{{h1}, {h1}};
      },
      {h0}, {xs});
  Tensor loss = Mean(Square(r.stacked[0]));
  auto grads = Gradients({loss}, {w, u, h0, xs});
  ASSERT_TRUE(grads.ok()) << grads.status();
  ASSERT_TRUE(g.status().ok()) << g.status();
  for (int64_t t : {1, 6, 11}) {
    SCOPED_TRACE(t);
    Feeds feeds = {{xs, HostTensor::RandomUniform(DType::kF32, {t, 3, 5}, 10 + t)},
                   {h0, HostTensor::RandomUniform(DType::kF32, {3, 4}, 20 + t)}};
    SessionOptions ro;
    ro.reference_only = true;
    SessionOptions jo;
    jo.global_jit_level = JitLevel::kOn1;
    jo.min_cluster_size = 1;
    jo.device = "cpu";
    Session ref(g, ro), jit(g, jo);
    auto want = ref.Run(feeds, *grads);
    auto got = jit.Run(feeds, *grads);
    ASSERT_TRUE(want.ok()) << want.status();
    ASSERT_TRUE(got.ok()) << got.status();
    for (size_t k = 0; k < grads->size(); ++k) {
      ASSERT_EQ((*got)[k].type(), (*want)[k].type());
      for (int64_t i = 0; i < (*want)[k].num_elements(); ++i) {
        const double wv = (*want)[k].GetDouble(i);
        EXPECT_NEAR((*got)[k].GetDouble(i), wv, 1e-5 + 1e-4 * std::abs(wv)) << k << " " << i;
      }
    }
    EXPECT_GT(jit.stats().cluster_launches + jit.stats().single_op_launches, 0);
  }
}

}  // namespace
}  // namespace braze
