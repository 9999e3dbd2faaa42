// cf (issue 40): control flow inside Function, under JitScope (the bodies' ops take the
// scope's marks; a body opens its own), and on OpenCL (POCL; skipped where absent), each
// checked against the reference executor.
#include <cmath>
#include <string>
#include <vector>

#include "braze/braze.h"
#include "braze/logging.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/flags.h"

namespace braze {
namespace {

void ExpectNear(const HostTensor& got, const HostTensor& want, double tol = 1e-4) {
  ASSERT_EQ(got.type(), want.type());
  for (int64_t i = 0; i < want.num_elements(); ++i) {
    const double w = want.GetDouble(i);
    EXPECT_NEAR(got.GetDouble(i), w, tol * (1 + std::abs(w))) << "element " << i;
  }
}

SessionOptions Reference() {
  SessionOptions o;
  o.reference_only = true;
  return o;
}

// A GRU-like cell over [T, B, 4] with its weights captured: its last and every state.
std::vector<Tensor> BuildRnn(Graph& g, Tensor xs, Tensor w, Tensor u) {
  Tensor h0 = Sum(xs, {0, 2}, true) * ScalarConst(g, 0.0);  // [1, B, 1] zeros of B rows
  h0 = Reshape(h0, {-1, 1}) + Reshape(ScalarConst(g, 0.0) * Sum(u, {1}), {1, 3});  // [B, 3]
  ScanResult r = Scan(
      [&](Graph& b, const std::vector<Tensor>& c, const std::vector<Tensor>& x) {
        Tensor gates = MatMul(x[0], w) + MatMul(c[0], u);  // [B, 6]
        Tensor z = Sigmoid(Slice(gates, {0, 0}, {-1, 3}));
        Tensor n = Tanh(Slice(gates, {0, 3}, {-1, 3}));
        Tensor h = z * c[0] + (ScalarConst(b, 1.0) - z) * n;
        return ScanStep{{h}, {h}};
      },
      {h0}, {xs});
  return {r.carry[0], r.stacked[0]};
}

TEST(ControlFlowModesTest, ScanTrainsInsideAFunction) {
  Graph g;
  Tensor w = Variable(g, HostTensor::RandomUniform(DType::kF32, {4, 6}, 1, -0.5, 0.5), "w");
  Tensor u = Variable(g, HostTensor::RandomUniform(DType::kF32, {3, 6}, 2, -0.5, 0.5), "u");
  FunctionOptions fo;
  fo.graph = &g;
  fo.input_signature = std::vector<TensorSpec>{{DType::kF32, {-1, -1, 4}}};
  fo.session.device = "cpu";
  fo.session.min_cluster_size = 1;
  fo.session.global_jit_level = JitLevel::kOn1;
  Function step(
      [&](Graph& fg, const std::vector<Tensor>& args) -> std::vector<Tensor> {
        std::vector<Tensor> out = BuildRnn(fg, args[0], w, u);
        Tensor loss = Mean(Square(out[1] - ScalarConst(fg, 0.25)));
        auto grads = Gradients({loss}, {w, u});
        if (!grads.ok()) return {};
        auto updates = ApplyGradients(Optimizer::Sgd(0.5), {{(*grads)[0], w}, {(*grads)[1], u}});
        if (!updates.ok()) return {};
        return {loss};
      },
      fo);
  std::vector<double> losses;
  for (int i = 0; i < 6; ++i) {
    const int64_t t = i % 2 == 0 ? 5 : 7;  // two lengths, one trace
    auto out = step({HostTensor::RandomUniform(DType::kF32, {t, 2, 4}, 3 + (i % 2))});
    ASSERT_TRUE(out.ok()) << out.status();
    losses.push_back((*out)[0].GetDouble(0));
  }
  EXPECT_EQ(step.tracing_count(), 1);
  EXPECT_LT(losses[4], losses[0]);  // the same batch, after two updates
  EXPECT_LT(losses[5], losses[1]);
  // The updated weights: the variables changed (read through the Function's copy).
  auto wv = ReadVariable(w);
  ASSERT_TRUE(wv.ok()) << wv.status();
}

TEST(ControlFlowModesTest, ForwardInsideAFunctionMatchesAReferenceSession) {
  Graph g;
  Tensor w = Variable(g, HostTensor::RandomUniform(DType::kF32, {4, 6}, 1, -0.5, 0.5), "w");
  Tensor u = Variable(g, HostTensor::RandomUniform(DType::kF32, {3, 6}, 2, -0.5, 0.5), "u");
  for (bool jit : {true, false}) {
    SCOPED_TRACE(jit);
    FunctionOptions fo;  // traces into a graph of its own, capturing w and u
    fo.jit_compile = jit;
    fo.session.device = "cpu";
    Function f(
        [&](Graph& fg, const std::vector<Tensor>& args) { return BuildRnn(fg, args[0], w, u); },
        fo);
    HostTensor x = HostTensor::RandomUniform(DType::kF32, {7, 3, 4}, 4);
    auto got = f({x});
    ASSERT_TRUE(got.ok()) << got.status();
    Graph rg;
    Tensor xs = Placeholder(rg, DType::kF32, {7, 3, 4}, "xs");
    Tensor rw = Variable(rg, *w.node().attrs_as<VariableAttrs>().initial_value, "w");
    Tensor ru = Variable(rg, *u.node().attrs_as<VariableAttrs>().initial_value, "u");
    std::vector<Tensor> ref_out = BuildRnn(rg, xs, rw, ru);
    Session ref(rg, Reference());
    auto want = ref.Run({{xs, x}}, ref_out);
    ASSERT_TRUE(want.ok()) << want.status();
    ExpectNear((*got)[0], (*want)[0]);
    ExpectNear((*got)[1], (*want)[1]);
    if (jit) EXPECT_GT(f.stats().cluster_launches, 0);
  }
}

TEST(ControlFlowModesTest, BodiesTakeTheJitScopeAroundTheOpAndTheirOwn) {
  for (int mode = 0; mode < 3; ++mode) {
    SCOPED_TRACE(mode);
    Graph g;
    Tensor xs = Placeholder(g, DType::kF32, {6, 2, 4}, "xs");
    Tensor w = Const(g, HostTensor::RandomUniform(DType::kF32, {4, 6}, 1, -0.5, 0.5), "w");
    Tensor u = Const(g, HostTensor::RandomUniform(DType::kF32, {3, 6}, 2, -0.5, 0.5), "u");
    std::vector<Tensor> out;
    if (mode == 0) {  // a scope around the op: the body compiles
      JitScope scope(g);
      out = BuildRnn(g, xs, w, u);
    } else if (mode == 1) {  // a false scope: nothing compiles
      JitScope scope(g, false);
      out = BuildRnn(g, xs, w, u);
    } else {  // no scope outside; the body opens one on its own graph
      ScanResult r = Scan(
          [&](Graph& b, const std::vector<Tensor>& c, const std::vector<Tensor>& x) {
            JitScope scope(b);
            Tensor h = Tanh(MatMul(x[0], Slice(w, {0, 0}, {4, 3})) +
                            MatMul(c[0], Slice(u, {0, 0}, {3, 3})));
            return ScanStep{{h}, {h}};
          },
          {Const(g, HostTensor::RandomUniform(DType::kF32, {2, 3}, 3))}, {xs});
      out = {r.carry[0], r.stacked[0]};
    }
    ASSERT_TRUE(g.status().ok()) << g.status();
    SessionOptions o;  // global JIT off: only scoped ops compile
    o.device = "cpu";
    Session s(g, o), ref(g, Reference());
    HostTensor x = HostTensor::RandomUniform(DType::kF32, {6, 2, 4}, 5);
    auto got = s.Run({{xs, x}}, out);
    auto want = ref.Run({{xs, x}}, out);
    ASSERT_TRUE(got.ok()) << got.status();
    ASSERT_TRUE(want.ok()) << want.status();
    for (size_t i = 0; i < out.size(); ++i) ExpectNear((*got)[i], (*want)[i]);
    if (mode == 1) {
      EXPECT_EQ(s.stats().cluster_launches, 0);
    } else {
      EXPECT_GE(s.stats().cluster_launches, 6);  // a body cluster per step
    }
  }
}

// --log_compiles says, once per node, how its bodies run: planned once, their compiled
// kernels and reference ops, each iteration on the plan (no whole-loop kernel).
TEST(ControlFlowModesTest, LogCompilesSaysHowTheBodiesRun) {
  Graph g;
  Tensor xs = Placeholder(g, DType::kF32, {5, 3, 4}, "xs");
  Tensor w = Const(g, HostTensor::RandomUniform(DType::kF32, {4, 6}, 1, -0.5, 0.5), "w");
  Tensor u = Const(g, HostTensor::RandomUniform(DType::kF32, {3, 6}, 2, -0.5, 0.5), "u");
  std::vector<Tensor> out;
  {
    JitScope scope(g);
    out = BuildRnn(g, xs, w, u);
  }
  ASSERT_TRUE(g.status().ok()) << g.status();
  BrazeFlags flags;
  flags.log_compiles = true;
  SetBrazeFlagsForTesting(flags);
  std::vector<std::string> infos;
  SetLogSink([&](LogSeverity, int, std::string_view text) { infos.emplace_back(text); });
  Session s(g), ref(g, Reference());
  bool ran = true;
  for (int run = 0; run < 2; ++run) {
    HostTensor x = HostTensor::RandomUniform(DType::kF32, {5, 3, 4}, 7 + run);
    auto got = s.Run({{xs, x}}, out);
    auto want = ref.Run({{xs, x}}, out);
    ran = ran && got.ok() && want.ok();
    if (got.ok() && want.ok()) {
      for (size_t i = 0; i < out.size(); ++i) ExpectNear((*got)[i], (*want)[i]);
    }
  }
  SetLogSink(nullptr);
  SetBrazeFlagsForTesting(BrazeFlags{});
  ASSERT_TRUE(ran);
  std::vector<std::string> lines;
  for (const std::string& line : infos) {
    if (line.rfind("control flow: ", 0) == 0) lines.push_back(line);
  }
  ASSERT_EQ(lines.size(), 1u) << "one line per node, at its first run";
  EXPECT_THAT(lines[0], ::testing::HasSubstr("Scan"));
  EXPECT_THAT(lines[0], ::testing::ContainsRegex("planned once \\([1-9][0-9]* compiled kernels"));
  EXPECT_THAT(lines[0], ::testing::HasSubstr("not one loop kernel"));
}

TEST(ControlFlowModesTest, OpenClCompilesTheBodiesForTheDevice) {
  if (absl::Status st = CheckOpenCLAvailable(); !st.ok()) GTEST_SKIP() << st.message();
  Graph g;
  Tensor p = Placeholder(g, DType::kBool, {}, "p");
  Tensor xs = Placeholder(g, DType::kF32, {-1, 2, 4}, "xs");
  Tensor w = Const(g, HostTensor::RandomUniform(DType::kF32, {4, 6}, 1, -0.5, 0.5), "w");
  Tensor u = Const(g, HostTensor::RandomUniform(DType::kF32, {3, 6}, 2, -0.5, 0.5), "u");
  std::vector<Tensor> out = BuildRnn(g, xs, w, u);
  std::vector<Tensor> c = Cond(
      p, [&](Graph&, const std::vector<Tensor>& a) { return std::vector<Tensor>{Exp(a[0])}; },
      [&](Graph&, const std::vector<Tensor>& a) { return std::vector<Tensor>{Neg(a[0])}; },
      {out[1]});
  ASSERT_TRUE(g.status().ok()) << g.status();
  SessionOptions o;
  o.device = "opencl:0";
  o.global_jit_level = JitLevel::kOn1;
  o.min_cluster_size = 1;
  Session s(g, o), ref(g, Reference());
  for (bool pv : {true, false}) {
    Feeds feeds = {{p, HostTensor::Scalar<bool>(pv)},
                   {xs, HostTensor::RandomUniform(DType::kF32, {5, 2, 4}, 6)}};
    auto got = s.Run(feeds, {out[0], c[0]});
    auto want = ref.Run(feeds, {out[0], c[0]});
    ASSERT_TRUE(got.ok()) << got.status();
    ASSERT_TRUE(want.ok()) << want.status();
    ExpectNear((*got)[0], (*want)[0]);
    ExpectNear((*got)[1], (*want)[1]);
  }
  EXPECT_GT(s.stats().host_to_device_copies, 0);  // the bodies ran on the device
  EXPECT_GT(s.stats().cluster_launches + s.stats().single_op_launches, 0);
}

}  // namespace
}  // namespace braze
