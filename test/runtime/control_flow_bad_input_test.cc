// cf (issue 40): bad input to Cond, While and Scan is a Status naming the node (and the
// branch, body or value), at build time where the types say so, else from the Run, in
// every mode; never a crash.
#include <stdexcept>
#include <string>
#include <vector>

#include "braze/braze.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace braze {
namespace {

using ::testing::HasSubstr;

std::vector<SessionOptions> Modes() {
  SessionOptions ref;
  ref.reference_only = true;
  SessionOptions jit;
  jit.global_jit_level = JitLevel::kOn1;
  jit.min_cluster_size = 1;
  jit.device = "cpu";
  return {ref, jit};
}

// The graph's error, and every mode's Run of `fetch` returning it.
void ExpectBuildError(const Graph& g, const Tensor& fetch, const std::vector<std::string>& parts) {
  ASSERT_FALSE(g.status().ok());
  EXPECT_EQ(g.status().code(), absl::StatusCode::kInvalidArgument);
  for (const std::string& p : parts) EXPECT_THAT(g.status().message(), HasSubstr(p));
  for (const SessionOptions& o : Modes()) {
    Session s(g, o);
    auto r = s.Run({}, {fetch});
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status(), g.status());
  }
}

BranchFn Returning(std::function<Tensor(Graph&, const std::vector<Tensor>&)> f) {
  return [f](Graph& g, const std::vector<Tensor>& a) { return std::vector<Tensor>{f(g, a)}; };
}

TEST(ControlFlowBadInput, APredicateThatIsNotAScalarBoolNamesTheNode) {
  for (int kind = 0; kind < 2; ++kind) {
    Graph g;
    Tensor x = Placeholder(g, DType::kF32, {3}, "x");
    Tensor pred = kind == 0 ? ScalarConst(g, 1.0) : Placeholder(g, DType::kBool, {2}, "p");
    auto id = Returning([](Graph&, const std::vector<Tensor>& a) { return a[0]; });
    std::vector<Tensor> y = Cond(pred, id, id, {x}, "choose");
    ExpectBuildError(g, y[0],
                     {"node 'choose' (Cond)", "predicate must be a scalar bool",
                      kind == 0 ? "f32[]" : "bool[2]"});
  }
}

TEST(ControlFlowBadInput, BranchesThatDisagreeNameBothBranches) {
  Graph g;
  Tensor p = Placeholder(g, DType::kBool, {}, "p");
  Tensor x = Placeholder(g, DType::kF32, {3}, "x");
  std::vector<Tensor> y =
      Cond(p, Returning([](Graph&, const std::vector<Tensor>& a) { return a[0]; }),
           Returning([](Graph&, const std::vector<Tensor>& a) {
             return Concat({a[0], a[0]}, 0);
           }),
           {x});
  ExpectBuildError(
      g, y[0],
      {"node 'Cond' (Cond)", "output 0", "then branch gives f32[3]", "else branch f32[6]"});
  Graph g2;
  Tensor p2 = Placeholder(g2, DType::kBool, {}, "p");
  Tensor x2 = Placeholder(g2, DType::kF32, {3}, "x");
  std::vector<Tensor> y2 =
      Cond(p2,
           [](Graph&, const std::vector<Tensor>& a) {
             return std::vector<Tensor>{a[0], a[0]};
           },
           Returning([](Graph&, const std::vector<Tensor>& a) { return Cast(a[0], DType::kI32); }),
           {x2});
  ExpectBuildError(g2, y2[0], {"then branch returns 2 tensors", "else branch 1"});
}

TEST(ControlFlowBadInput, ABodyChangingACarriedShapeOrDtypeNamesTheNodeAndTheValue) {
  Graph g;
  Tensor xs = Placeholder(g, DType::kF32, {4, 2}, "xs");
  ScanResult r = Scan(
      [](Graph&, const std::vector<Tensor>& c, const std::vector<Tensor>& x) {
        return ScanStep{{c[0], Concat({c[1], x[0]}, 0)}, {}};
      },
      {ScalarConst(g, 0), Placeholder(g, DType::kF32, {2}, "c")}, {xs}, {false, "rnn"});
  ExpectBuildError(g, r.carry[0],
                   {"node 'rnn' (Scan)", "fn changes carried value 1 from f32[2] to f32[4]"});
  Graph g2;
  Tensor v = Placeholder(g2, DType::kF32, {2}, "v");
  std::vector<Tensor> out =
      While([](Graph& b,
               const std::vector<Tensor>&) { return Less(ScalarConst(b, 0), ScalarConst(b, 1)); },
            [](Graph&, const std::vector<Tensor>& s) {
              return std::vector<Tensor>{Cast(s[0], DType::kF64)};
            },
            {v}, 3);
  ExpectBuildError(g2, out[0],
                   {"node 'While' (While)", "body changes loop variable 0 from f32[2] to f64[2]"});
}

TEST(ControlFlowBadInput, ACarriedShapeThatChangesOnlyAtRunTimeFailsTheRunNamingTheNode) {
  Graph g;
  Tensor xs = Placeholder(g, DType::kF32, {3, 2}, "xs");
  Tensor c0 = Placeholder(g, DType::kF32, {-1}, "c0");
  ScanResult r = Scan(
      [](Graph&, const std::vector<Tensor>& c, const std::vector<Tensor>& x) {
        return ScanStep{{Concat({c[0], x[0]}, 0)}, {}};  // [-1] stays [-1] at build time
      },
      {c0}, {xs});
  ASSERT_TRUE(g.status().ok()) << g.status();
  for (const SessionOptions& o : Modes()) {
    Session s(g, o);
    auto out = s.Run({{xs, HostTensor(DType::kF32, {3, 2})}, {c0, HostTensor(DType::kF32, {1})}},
                     {r.carry[0]});
    ASSERT_FALSE(out.ok());
    EXPECT_THAT(out.status().message(), HasSubstr("node 'Scan' (Scan)"));
    EXPECT_THAT(out.status().message(), HasSubstr("f32[1] to f32[3]"));
  }
}

// A Run whose loop fails changes no variable, even one the loop read and an update
// built before it.
TEST(ControlFlowBadInput, AFailedLoopChangesNoVariable) {
  Graph g;
  Tensor v = Variable(g, HostTensor::From<float>({1, 2}, {2}), "v");
  Tensor bump = AssignAdd(v, ScalarConst(g, 1) + ScalarConst(g, 0) * v);
  Tensor xs = Placeholder(g, DType::kF32, {3, 2}, "xs");
  Tensor c0 = Placeholder(g, DType::kF32, {-1}, "c0");
  ScanResult r = Scan(
      [&](Graph&, const std::vector<Tensor>& c, const std::vector<Tensor>& x) {
        return ScanStep{{Concat({c[0], x[0] * v}, 0)}, {}};
      },
      {c0}, {xs});
  ASSERT_TRUE(g.status().ok()) << g.status();
  for (const SessionOptions& o : Modes()) {
    Session s(g, o);
    auto out = s.Run({{xs, HostTensor(DType::kF32, {3, 2})}, {c0, HostTensor(DType::kF32, {1})}},
                     {r.carry[0]}, {bump});
    ASSERT_FALSE(out.ok());
    auto value = s.VariableValue(v);
    ASSERT_TRUE(value.ok()) << value.status();
    EXPECT_EQ(value->GetDouble(0), 1);
    EXPECT_EQ(value->GetDouble(1), 2);
  }
}

TEST(ControlFlowBadInput, ACaptureFromAnotherGraphNamesIt) {
  Graph other;
  Tensor stranger = Placeholder(other, DType::kF32, {2}, "stranger");
  Graph g;
  Tensor xs = Placeholder(g, DType::kF32, {3, 2}, "xs");
  ScanResult r = Scan(
      [&](Graph&, const std::vector<Tensor>& c, const std::vector<Tensor>& x) {
        return ScanStep{{c[0] + x[0] * stranger}, {}};
      },
      {Placeholder(g, DType::kF32, {2}, "c")}, {xs});
  ExpectBuildError(g, r.carry[0], {"node 'Scan' (Scan)", "'stranger'", "another graph"});
}

TEST(ControlFlowBadInput, ABodyThatThrowsOrAssignsIsAnErrorNamingTheNode) {
  Graph g;
  Tensor p = Placeholder(g, DType::kBool, {}, "p");
  Tensor x = Placeholder(g, DType::kF32, {3}, "x");
  std::vector<Tensor> y =
      Cond(p,
           [](Graph&, const std::vector<Tensor>&) -> std::vector<Tensor> {
             throw std::runtime_error("boom");
           },
           Returning([](Graph&, const std::vector<Tensor>& a) { return a[0]; }), {x});
  ExpectBuildError(g, y[0], {"node 'Cond' (Cond)", "then threw: boom"});
  Graph g2;
  Tensor v = Variable(g2, HostTensor::From<float>({1, 2, 3}, {3}), "v");
  Tensor xs = Placeholder(g2, DType::kF32, {2, 3}, "xs");
  ScanResult r = Scan(
      [&](Graph& b, const std::vector<Tensor>& c, const std::vector<Tensor>& xr) {
        Tensor own = Variable(b, HostTensor::From<float>({0, 0, 0}, {3}), "own");
        return ScanStep{{c[0] + xr[0] + own}, {}};
      },
      {v}, {xs});
  ExpectBuildError(g2, r.carry[0], {"node 'Scan' (Scan)", "may not create or assign a Variable"});
}

TEST(ControlFlowBadInput, ScanElemsOfNoOrDifferentLengthsNameTheNode) {
  Graph g;
  Tensor a = Placeholder(g, DType::kF32, {3, 2}, "a");
  Tensor b = Placeholder(g, DType::kF32, {4, 2}, "b");
  auto fn = [](Graph&, const std::vector<Tensor>& c, const std::vector<Tensor>& x) {
    return ScanStep{{c[0]}, {x[0]}};
  };
  ScanResult r = Scan(fn, {ScalarConst(g, 0)}, {a, b});
  ExpectBuildError(g, r.carry[0], {"node 'Scan' (Scan)", "different lengths: 3 and 4"});
  Graph g2;
  ScanResult r2 = Scan(fn, {ScalarConst(g2, 0)}, {ScalarConst(g2, 1)});
  ExpectBuildError(g2, r2.carry[0], {"node 'Scan' (Scan)", "is a scalar"});
}

TEST(ControlFlowBadInput, AWhileCondThatIsNotAScalarBoolNamesTheNode) {
  Graph g;
  Tensor v = Placeholder(g, DType::kF32, {2}, "v");
  std::vector<Tensor> out =
      While([](Graph&, const std::vector<Tensor>& s) { return Greater(s[0], s[0]); },
            [](Graph&, const std::vector<Tensor>& s) { return s; }, {v}, 2, "loop");
  ExpectBuildError(g, out[0],
                   {"node 'loop' (While)", "cond must return one scalar bool", "bool[2]"});
}

TEST(ControlFlowBadInput, TheGraphDumpPrintsBodiesNested) {
  Graph g;
  Tensor xs = Placeholder(g, DType::kF32, {3, 2}, "xs");
  ScanResult r = Scan(
      [](Graph&, const std::vector<Tensor>& c, const std::vector<Tensor>& x) {
        Tensor s = c[0] + Exp(x[0]);
        return ScanStep{{s}, {s}};
      },
      {Placeholder(g, DType::kF32, {2}, "c")}, {xs});
  ASSERT_TRUE(g.status().ok());
  const std::string dump = g.DebugString();
  EXPECT_THAT(dump, HasSubstr("Scan = Scan(c, xs) -> f32[2], f32[3,2], f32[3,2]"));
  EXPECT_THAT(dump, HasSubstr("  fn {\n"));
  EXPECT_THAT(dump, HasSubstr("    %"));
  EXPECT_THAT(dump, HasSubstr("Exp"));
  EXPECT_THAT(dump, HasSubstr("    return Add, Add\n"));
  EXPECT_TRUE(VerifyGraph(g).ok());
}

}  // namespace
}  // namespace braze
