// cf (issue 40): Cond, While and Scan (braze/control_flow.h) run compiled (bodies planned
// and compiled by sessions of their own) against the reference executor (bodies op by op
// on the reference kernels), on random inputs, with odd, prime, 1, 0 and -1 lengths.
#include <cmath>
#include <string>
#include <vector>

#include "braze/braze.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace braze {
namespace {

using ::testing::HasSubstr;

SessionOptions Reference() {
  SessionOptions o;
  o.reference_only = true;
  o.device = "cpu";
  return o;
}

SessionOptions Jit() {
  SessionOptions o;
  o.global_jit_level = JitLevel::kOn1;
  o.min_cluster_size = 1;
  o.device = "cpu";
  return o;
}

void ExpectNear(const HostTensor& got, const HostTensor& want, double tol = 1e-5) {
  ASSERT_EQ(got.type(), want.type());
  for (int64_t i = 0; i < want.num_elements(); ++i) {
    const double w = want.GetDouble(i);
    EXPECT_NEAR(got.GetDouble(i), w, tol * (1 + std::abs(w))) << "element " << i;
  }
}

// Runs `fetches` in a reference session and a JIT session; expects them to agree.
std::vector<HostTensor> RunBoth(const Graph& g, const Feeds& feeds,
                                const std::vector<Tensor>& fetches, SessionOptions jit = Jit()) {
  Session ref(g, Reference());
  auto want = ref.Run(feeds, fetches);
  EXPECT_TRUE(want.ok()) << want.status();
  Session compiled(g, jit);
  auto got = compiled.Run(feeds, fetches);
  EXPECT_TRUE(got.ok()) << got.status();
  if (!want.ok() || !got.ok()) return {};
  for (size_t i = 0; i < fetches.size(); ++i) ExpectNear((*got)[i], (*want)[i]);
  EXPECT_GT(compiled.stats().compiles + compiled.stats().cache_hits, 0);
  return *want;
}

// h_t = tanh(x_t W + h_{t-1} U): an RNN over a [T, B, D] sequence, W and U captured.
struct Rnn {
  Graph g;
  Tensor xs, h0, w, u;
  ScanResult r;
  Rnn(int64_t t, int64_t b, int64_t d, int64_t h) {
    xs = Placeholder(g, DType::kF32, {t, b, d}, "xs");
    h0 = Placeholder(g, DType::kF32, {b, h}, "h0");
    w = Const(g, HostTensor::RandomUniform(DType::kF32, {d, h}, 7, -0.5, 0.5), "w");
    u = Variable(g, HostTensor::RandomUniform(DType::kF32, {h, h}, 8, -0.5, 0.5), "u");
    r = Scan(
        [&](Graph& body, const std::vector<Tensor>& carry, const std::vector<Tensor>& x) {
          Tensor h1 = Tanh(MatMul(x[0], w) + MatMul(carry[0], u));
          return ScanStep{{h1}, {h1, Sum(h1, {1})}};
        },
        {h0}, {xs});
  }
};

// Sequential C++ of the same RNN, for a check that needs no Braze at all.
TEST(ControlFlowTest, ScanRunsAnRnnAsPlainLoopsDo) {
  Rnn m(5, 3, 4, 2);
  ASSERT_TRUE(m.g.status().ok()) << m.g.status();
  HostTensor xs = HostTensor::RandomUniform(DType::kF32, {5, 3, 4}, 1);
  HostTensor h0 = HostTensor::RandomUniform(DType::kF32, {3, 2}, 2);
  auto out = RunBoth(m.g, {{m.xs, xs}, {m.h0, h0}}, {m.r.carry[0], m.r.stacked[0], m.r.stacked[1]});
  ASSERT_EQ(out.size(), 3u);
  const HostTensor& w = *m.w.node().attrs_as<ConstAttrs>().value;
  const HostTensor& u = *m.u.node().attrs_as<VariableAttrs>().initial_value;
  std::vector<double> h(6);
  for (int i = 0; i < 6; ++i) h[i] = h0.GetDouble(i);
  for (int t = 0; t < 5; ++t) {
    std::vector<double> next(6);
    for (int b = 0; b < 3; ++b) {
      for (int j = 0; j < 2; ++j) {
        double s = 0;
        for (int k = 0; k < 4; ++k) s += xs.GetDouble((t * 3 + b) * 4 + k) * w.GetDouble(k * 2 + j);
        for (int k = 0; k < 2; ++k) s += h[b * 2 + k] * u.GetDouble(k * 2 + j);
        next[b * 2 + j] = std::tanh(s);
        EXPECT_NEAR(out[1].GetDouble((t * 3 + b) * 2 + j), next[b * 2 + j], 1e-5);
      }
    }
    h = next;
  }
  for (int i = 0; i < 6; ++i) EXPECT_NEAR(out[0].GetDouble(i), h[i], 1e-5);
  EXPECT_EQ(out[1].shape(), (Shape{5, 3, 2}));
  EXPECT_EQ(out[2].shape(), (Shape{5, 3}));
}

TEST(ControlFlowTest, ScanOfOddPrimeOneAndMinusOneLengths) {
  Rnn m(-1, 3, 4, 5);
  ASSERT_TRUE(m.g.status().ok()) << m.g.status();
  EXPECT_EQ(m.r.stacked[0].shape(), (Shape{-1, 3, 5}));
  for (int64_t t : {1, 7, 13}) {
    SCOPED_TRACE(t);
    HostTensor xs = HostTensor::RandomUniform(DType::kF32, {t, 3, 4}, 10 + t);
    HostTensor h0 = HostTensor::RandomUniform(DType::kF32, {3, 5}, 20 + t);
    auto out = RunBoth(m.g, {{m.xs, xs}, {m.h0, h0}}, {m.r.carry[0], m.r.stacked[0]});
    ASSERT_EQ(out.size(), 2u);
    EXPECT_EQ(out[1].shape(), (Shape{t, 3, 5}));
  }
}

TEST(ControlFlowTest, ScanOfLengthZeroReturnsInitAndEmptyStacks) {
  Rnn m(-1, 2, 3, 4);
  HostTensor xs(DType::kF32, {0, 2, 3});
  HostTensor h0 = HostTensor::RandomUniform(DType::kF32, {2, 4}, 3);
  for (SessionOptions o : {Reference(), Jit()}) {
    Session s(m.g, o);
    auto out = s.Run({{m.xs, xs}, {m.h0, h0}}, {m.r.carry[0], m.r.stacked[0]});
    ASSERT_TRUE(out.ok()) << out.status();
    ExpectNear((*out)[0], h0, 0);
    EXPECT_EQ((*out)[1].shape(), (Shape{0, 2, 4}));
  }
}

TEST(ControlFlowTest, ReverseScanGoesFromTheLastRowAndStacksInRowOrder) {
  Graph g;
  Tensor xs = Placeholder(g, DType::kF32, {-1, 3}, "xs");
  ScanOptions o;
  o.reverse = true;
  ScanResult r = Scan(
      [](Graph&, const std::vector<Tensor>& c, const std::vector<Tensor>& x) {
        Tensor s = c[0] + x[0];
        return ScanStep{{s}, {s}};
      },
      {ScalarConst(g, 0) + Placeholder(g, DType::kF32, {3}, "zero")}, {xs}, o);
  ASSERT_TRUE(g.status().ok()) << g.status();
  HostTensor x = HostTensor::RandomUniform(DType::kF32, {5, 3}, 4);
  Tensor zero = *g.FindTensor("zero");
  auto out =
      RunBoth(g, {{xs, x}, {zero, HostTensor(DType::kF32, {3})}}, {r.carry[0], r.stacked[0]});
  ASSERT_EQ(out.size(), 2u);
  for (int j = 0; j < 3; ++j) {  // suffix sums: row t holds sum of rows t..4
    double s = 0;
    for (int t = 4; t >= 0; --t) {
      s += x.GetDouble(t * 3 + j);
      EXPECT_NEAR(out[1].GetDouble(t * 3 + j), s, 1e-5);
    }
    EXPECT_NEAR(out[0].GetDouble(j), s, 1e-5);
  }
}

TEST(ControlFlowTest, CondRunsTheBranchThePredicateNames) {
  Graph g;
  Tensor p = Placeholder(g, DType::kBool, {}, "p");
  Tensor x = Placeholder(g, DType::kF32, {-1, 5}, "x");
  Tensor w = Const(g, HostTensor::RandomUniform(DType::kF32, {5, 3}, 5), "w");
  std::vector<Tensor> y = Cond(
      p,
      [&](Graph&, const std::vector<Tensor>& a) {
        return std::vector<Tensor>{Exp(MatMul(a[0], w))};
      },
      [&](Graph&, const std::vector<Tensor>& a) {
        return std::vector<Tensor>{Sum(a[0], {1}, true) * ScalarConst(*a[0].graph(), 0.5) +
                                   Square(MatMul(a[0], w))};
      },
      {x});
  ASSERT_TRUE(g.status().ok()) << g.status();
  ASSERT_EQ(y.size(), 1u);
  HostTensor xv = HostTensor::RandomUniform(DType::kF32, {7, 5}, 6);
  for (bool pv : {true, false}) {
    SCOPED_TRACE(pv);
    auto out = RunBoth(g, {{p, HostTensor::Scalar<bool>(pv)}, {x, xv}}, {y[0]});
    ASSERT_EQ(out.size(), 1u);
    const HostTensor& wv = *w.node().attrs_as<ConstAttrs>().value;
    double s = 0, rs = 0;
    for (int k = 0; k < 5; ++k) s += xv.GetDouble(k) * wv.GetDouble(k * 3), rs += xv.GetDouble(k);
    EXPECT_NEAR(out[0].GetDouble(0), pv ? std::exp(s) : 0.5 * rs + s * s, 1e-4);
  }
}

TEST(ControlFlowTest, WhileRunsUntilItsCondOrItsBound) {
  Graph g;
  Tensor x = Placeholder(g, DType::kF32, {4}, "x");
  Tensor limit = Placeholder(g, DType::kF32, {}, "limit");
  auto loop = [&](int64_t bound) {
    return While([&](Graph&, const std::vector<Tensor>& v) { return Less(Sum(v[0]), limit); },
                 [&](Graph& b, const std::vector<Tensor>& v) {
                   return std::vector<Tensor>{v[0] * ScalarConst(b, 1.5) + ScalarConst(b, 0.25),
                                              v[1] + ScalarConst(b, 1, DType::kI32)};
                 },
                 {x, ScalarConst(g, 0, DType::kI32)}, bound);
  };
  std::vector<Tensor> free = loop(-1), bounded = loop(3);
  ASSERT_TRUE(g.status().ok()) << g.status();
  HostTensor xv = HostTensor::From<float>({0.5f, 0.25f, 0.75f, 1.0f}, {4});
  auto out = RunBoth(g, {{x, xv}, {limit, HostTensor::Scalar<float>(100)}},
                     {free[0], free[1], bounded[0], bounded[1]});
  ASSERT_EQ(out.size(), 4u);
  std::vector<double> v = {0.5, 0.25, 0.75, 1.0};
  int n = 0;
  auto sum = [&] { return v[0] + v[1] + v[2] + v[3]; };
  while (sum() < 100) {
    for (double& e : v) e = e * 1.5 + 0.25;
    ++n;
  }
  EXPECT_EQ(out[1].GetDouble(0), n);
  EXPECT_NEAR(out[0].GetDouble(0), v[0], 1e-4 * v[0]);
  EXPECT_EQ(out[3].GetDouble(0), 3);
}

TEST(ControlFlowTest, ScanInsideCondAndCondInsideScan) {
  Graph g;
  Tensor p = Placeholder(g, DType::kBool, {}, "p");
  Tensor xs = Placeholder(g, DType::kF32, {-1, 3}, "xs");
  Tensor scale = Const(g, HostTensor::From<float>({1.5f, -0.5f, 2.0f}, {3}), "scale");
  auto cumsum = [&](Graph& b, Tensor seq, Tensor init) {
    return Scan(
               [&](Graph& bb, const std::vector<Tensor>& c, const std::vector<Tensor>& x) {
                 // A Cond inside the Scan's body: a step-dependent branch.
                 std::vector<Tensor> pick = Cond(
                     Greater(Sum(x[0]), ScalarConst(bb, 0)),
                     [&](Graph&, const std::vector<Tensor>& a) {
                       return std::vector<Tensor>{a[0] * scale};
                     },
                     [&](Graph&, const std::vector<Tensor>& a) {
                       return std::vector<Tensor>{Neg(a[0])};
                     },
                     {x[0]});
                 Tensor s = c[0] + pick[0];
                 return ScanStep{{s}, {s}};
               },
               {init}, {seq})
        .stacked[0];
  };
  std::vector<Tensor> y = Cond(
      p,
      [&](Graph& b, const std::vector<Tensor>& a) {
        return std::vector<Tensor>{cumsum(b, a[0], a[1])};
      },
      [&](Graph&, const std::vector<Tensor>& a) { return std::vector<Tensor>{Tanh(a[0])}; },
      {xs, Placeholder(g, DType::kF32, {3}, "init")});
  ASSERT_TRUE(g.status().ok()) << g.status();
  Tensor init = *g.FindTensor("init");
  HostTensor xv = HostTensor::RandomUniform(DType::kF32, {11, 3}, 9);
  HostTensor iv = HostTensor::RandomUniform(DType::kF32, {3}, 10);
  for (bool pv : {true, false}) {
    auto out = RunBoth(g, {{p, HostTensor::Scalar<bool>(pv)}, {xs, xv}, {init, iv}}, {y[0]});
    ASSERT_EQ(out.size(), 1u);
    EXPECT_EQ(out[0].shape(), (Shape{11, 3}));
  }
}

TEST(ControlFlowTest, BodiesArePlannedOnceAndCompiledOnce) {
  Rnn m(-1, 3, 4, 5);
  Session s(m.g, Jit());
  HostTensor h0 = HostTensor::RandomUniform(DType::kF32, {3, 5}, 1);
  ASSERT_TRUE(s.Run({{m.xs, HostTensor::RandomUniform(DType::kF32, {6, 3, 4}, 2)}, {m.h0, h0}},
                    {m.r.carry[0]})
                  .ok());
  const SessionStats first = s.stats();
  EXPECT_GT(first.compiles + first.cache_hits, 0);
  EXPECT_GE(first.cluster_launches + first.single_op_launches, 6);  // per step
  ASSERT_TRUE(s.Run({{m.xs, HostTensor::RandomUniform(DType::kF32, {9, 3, 4}, 3)}, {m.h0, h0}},
                    {m.r.carry[0]})
                  .ok());
  EXPECT_EQ(s.stats().compiles, first.compiles);  // nothing new: the body's shapes did not change
}

// Each iteration binds the carry and the captures by reference and the body's kernels
// write its results in place: the bytes copied are the elems' rows, the stacked rows and
// the initial carry (and the results of the first iteration, which has no buffers yet),
// never the captured weight, whatever the number of steps.
TEST(ControlFlowTest, IterationsCopyNeitherCarriesNorCaptures) {
  for (int64_t steps : {1, 7, 13}) {
    Graph g;
    Tensor xs = Placeholder(g, DType::kF32, {steps, 3, 5}, "xs");
    Tensor h0 = Placeholder(g, DType::kF32, {3, 5}, "h0");
    Tensor w = Const(g, HostTensor::RandomUniform(DType::kF32, {5, 5}, 9, -0.5, 0.5), "w");
    Tensor big = Const(g, HostTensor::RandomUniform(DType::kF32, {61, 67}, 10), "big");
    ScanResult r = Scan(
        [&](Graph&, const std::vector<Tensor>& c, const std::vector<Tensor>& x) {
          Tensor h1 = Tanh(MatMul(c[0], w) + x[0] + Mean(big));
          return ScanStep{{h1}, {Sum(h1, {1})}};
        },
        {h0}, {xs});
    ASSERT_TRUE(g.status().ok()) << g.status();
    const Feeds feeds = {{xs, HostTensor::RandomUniform(DType::kF32, {steps, 3, 5}, 11)},
                         {h0, HostTensor::RandomUniform(DType::kF32, {3, 5}, 12)}};
    RunBoth(g, feeds, {r.carry[0], r.stacked[0]});
    Session s(g, Jit());
    ASSERT_TRUE(s.Run(feeds, {r.carry[0], r.stacked[0]}).ok());
    const SessionStats& st = s.stats();
    EXPECT_EQ(st.body_runs, steps);
    const int64_t carry = 3 * 5 * 4, row = 3 * 5 * 4, out_row = 3 * 4;
    // Per step: the carry stacked for the gradient, the elems' row, the output's row.
    const int64_t per_step = carry + row + out_row;
    const int64_t first_results = carry + out_row;
    EXPECT_LE(st.body_copied_bytes, carry + steps * per_step + first_results) << steps;
    EXPECT_GE(st.body_copied_bytes, carry + steps * per_step) << steps;
    EXPECT_LT(st.body_copied_bytes, 61 * 67 * 4);  // the capture was never copied
  }
}

TEST(ControlFlowTest, AVariableReadInABodyReadsItsCurrentValue) {
  Graph g;
  Tensor v = Variable(g, HostTensor::From<float>({1, 2}, {2}), "v");
  Tensor xs = Placeholder(g, DType::kF32, {3, 2}, "xs");
  ScanResult r = Scan(
      [&](Graph&, const std::vector<Tensor>& c, const std::vector<Tensor>& x) {
        return ScanStep{{c[0] + x[0] * v}, {}};
      },
      {ScalarConst(g, 0) * v}, {xs});
  Tensor bump = AssignAdd(v, ScalarConst(g, 1) + ScalarConst(g, 0) * v);
  ASSERT_TRUE(g.status().ok()) << g.status();
  HostTensor x = HostTensor::Filled(DType::kF32, {3, 2}, 1);
  for (SessionOptions o : {Reference(), Jit()}) {
    Session s(g, o);
    auto a = s.Run({{xs, x}}, {r.carry[0]});
    ASSERT_TRUE(a.ok()) << a.status();
    EXPECT_EQ((*a)[0].GetDouble(1), 6);
    ASSERT_TRUE(s.Run({}, {}, {bump}).ok());
    auto b = s.Run({{xs, x}}, {r.carry[0]});
    ASSERT_TRUE(b.ok()) << b.status();
    EXPECT_EQ((*b)[0].GetDouble(1), 9);  // v is now {2, 3}
  }
}

}  // namespace
}  // namespace braze
