// cf (issue 40) with the mixed-precision policy (braze/precision.h): Cond, While and Scan
// built under a bf16 PrecisionScope (or FunctionOptions::precision) trace their bodies
// under it, so a body's matmuls compute in bf16 like the enclosing graph's; carried
// values keep their dtype. Checked structurally (the bodies' MatMuls read bf16) and by
// value: compiled against the reference executor on the same graph, and against the f32
// graph, with bf16 tolerances, gradients included.
#include <cmath>
#include <string>
#include <vector>

#include "braze/braze.h"
#include "gtest/gtest.h"

namespace braze {
namespace {

SessionOptions ReferenceOnly() {
  SessionOptions o;
  o.reference_only = true;
  return o;
}

// The dtypes of the first input of every MatMul in `g` and, recursively, in its bodies.
void MatMulInputDtypes(const Graph& g, std::vector<DType>* out) {
  for (int id = 0; id < g.num_nodes(); ++id) {
    const Node& n = g.node(id);
    if (n.op() == OpKind::kMatMul) out->push_back(n.inputs()[0].dtype());
    if (const auto* a = std::get_if<ControlFlowAttrs>(&n.attrs())) {
      for (const auto& b : a->bodies) MatMulInputDtypes(*b->graph, out);
    }
  }
}

// A model with all three ops, their bodies reading captured f32 weights through MatMuls:
// a tanh RNN Scan over xs [T, B, D], a Cond whose branches differ in precision (a MatMul
// in one, none in the other), and a While applying a MatMul step a data-dependent number
// of times. Returns {scan carry, scan stacked, cond, while, loss}.
struct Model {
  Tensor xs, wx, wh, wc;
  std::vector<Tensor> outs;
};
Model BuildModel(Graph& g, DType precision, int64_t b, int64_t d, int64_t h) {
  Model m;
  m.xs = Placeholder(g, DType::kF32, {-1, b, d}, "xs");
  m.wx = Variable(g, HostTensor::RandomUniform(DType::kF32, {d, h}, 11, -0.6, 0.6), "wx");
  m.wh = Variable(g, HostTensor::RandomUniform(DType::kF32, {h, h}, 12, -0.6, 0.6), "wh");
  m.wc = Variable(g, HostTensor::RandomUniform(DType::kF32, {h, h}, 13, -0.5, 0.5), "wc");
  PrecisionScope policy(g, precision);
  Tensor h0 = Tanh(MatMul(Sum(m.xs, {0}), m.wx));  // [B, H], policy dtype
  h0 = Cast(h0, DType::kF32);                      // an f32 carry
  ScanResult r = Scan(
      [&](Graph& s, const std::vector<Tensor>& c, const std::vector<Tensor>& x) {
        Tensor hn = Tanh(MatMul(x[0], m.wx) + MatMul(c[0], m.wh));
        return ScanStep{{hn}, {hn * ScalarConst(s, 0.5, hn.dtype())}};
      },
      {h0}, {m.xs});
  Tensor last = r.carry[0];
  Tensor pred = Greater(Sum(last), ScalarConst(g, 0.0));
  Tensor cond = Cond(
      pred,
      [&](Graph&, const std::vector<Tensor>& a) {
        return std::vector<Tensor>{Sigmoid(MatMul(a[0], m.wc))};
      },
      [&](Graph&, const std::vector<Tensor>& a) { return std::vector<Tensor>{Tanh(a[0])}; },
      {last})[0];
  // Runs until the state's sum of squares passes 2 (at most 6 times).
  std::vector<Tensor> w = While(
      [&](Graph& s, const std::vector<Tensor>& v) {
        return Less(Sum(Square(v[0])), ScalarConst(s, 2.0));
      },
      [&](Graph& s, const std::vector<Tensor>& v) {
        return std::vector<Tensor>{MatMul(v[0], m.wc) + v[0] * ScalarConst(s, 1.5)};
      },
      {last * ScalarConst(g, 0.25)}, 6);
  Tensor loss = Mean(Square(r.stacked[0])) + Mean(cond) + Mean(Square(w[0]));
  m.outs = {last, r.stacked[0], cond, w[0], loss};
  return m;
}

TEST(ControlFlowPrecisionTest, BodiesComputeMatMulsInBf16) {
  Graph g;
  Model m = BuildModel(g, DType::kBF16, 3, 4, 7);
  ASSERT_TRUE(g.status().ok()) << g.status();
  std::vector<DType> dtypes;
  MatMulInputDtypes(g, &dtypes);
  ASSERT_EQ(dtypes.size(), 5u);  // h0, two in the Scan, one in the Cond, one in the While
  for (DType dt : dtypes) EXPECT_EQ(dt, DType::kBF16);
  EXPECT_EQ(m.outs[0].dtype(), DType::kF32);   // the carry keeps its dtype
  EXPECT_EQ(m.outs[1].dtype(), DType::kBF16);  // a step output as the body computed it
  EXPECT_EQ(m.outs[2].dtype(), DType::kF32);   // bf16 and f32 branches: widened
  EXPECT_EQ(m.outs[3].dtype(), DType::kF32);   // the While's carry
  EXPECT_EQ(m.outs[4].dtype(), DType::kF32);
  // Without the policy nothing is bf16.
  Graph g32;
  BuildModel(g32, DType::kF32, 3, 4, 7);
  ASSERT_TRUE(g32.status().ok()) << g32.status();
  dtypes.clear();
  MatMulInputDtypes(g32, &dtypes);
  ASSERT_EQ(dtypes.size(), 5u);
  for (DType dt : dtypes) EXPECT_EQ(dt, DType::kF32);
}

HostTensor ToF32(const HostTensor& t) {
  HostTensor out(DType::kF32, t.shape());
  for (int64_t i = 0; i < t.num_elements(); ++i) out.SetDouble(i, t.GetDouble(i));
  return out;
}

void ExpectClose(const HostTensor& got, const HostTensor& want, double tol,
                 const std::string& what) {
  const HostTensor a = ToF32(got), b = ToF32(want);
  std::string why;
  EXPECT_TRUE(AllClose(a, b, tol, tol, &why)) << what << ": " << why;
}

// The bf16 graph compiled, against the same graph on the reference kernels and against the
// f32 graph, forward and gradients of the f32 weights, at odd, prime and tiny sizes.
TEST(ControlFlowPrecisionTest, MatchesTheReferenceAndF32WithBf16Tolerances) {
  struct Size {
    int64_t t, b, d, h;
  };
  for (Size s : {Size{7, 3, 5, 11}, Size{1, 1, 1, 1}, Size{13, 2, 3, 5}}) {
    SCOPED_TRACE(testing::Message() << "T=" << s.t << " B=" << s.b << " D=" << s.d << " H=" << s.h);
    Graph g16, g32;
    Model m16 = BuildModel(g16, DType::kBF16, s.b, s.d, s.h);
    Model m32 = BuildModel(g32, DType::kF32, s.b, s.d, s.h);
    auto grads16 = Gradients({m16.outs[4]}, {m16.wx, m16.wh, m16.wc});
    auto grads32 = Gradients({m32.outs[4]}, {m32.wx, m32.wh, m32.wc});
    ASSERT_TRUE(grads16.ok()) << grads16.status();
    ASSERT_TRUE(grads32.ok()) << grads32.status();
    std::vector<Tensor> f16 = m16.outs, f32 = m32.outs;
    f16.insert(f16.end(), grads16->begin(), grads16->end());
    f32.insert(f32.end(), grads32->begin(), grads32->end());
    for (const Tensor& gr : *grads16) EXPECT_EQ(gr.dtype(), DType::kF32);
    const HostTensor xs =
        HostTensor::RandomUniform(DType::kF32, {s.t, s.b, s.d}, 100 + s.t, -1.0, 1.0);
    SessionOptions jit;
    jit.min_cluster_size = 1;
    jit.global_jit_level = JitLevel::kOn1;
    Session compiled(g16, jit), reference(g16, ReferenceOnly()), full(g32, ReferenceOnly());
    auto got = compiled.Run({{m16.xs, xs}}, f16);
    auto ref = reference.Run({{m16.xs, xs}}, f16);
    auto want = full.Run({{m32.xs, xs}}, f32);
    ASSERT_TRUE(got.ok()) << got.status();
    ASSERT_TRUE(ref.ok()) << ref.status();
    ASSERT_TRUE(want.ok()) << want.status();
    EXPECT_GT(compiled.stats().cluster_launches, 0);
    // A bf16 op is within 2^-8 of its result; the loop chains a few per step, and the
    // compiled and reference bf16 runs may round an accumulation differently.
    const std::vector<std::string> names = {"carry", "stacked", "cond", "while",
                                            "loss",  "d wx",    "d wh", "d wc"};
    for (size_t i = 0; i < f16.size(); ++i) {
      ExpectClose((*got)[i], (*ref)[i], 3e-2, "compiled vs reference: " + names[i]);
      ExpectClose((*got)[i], (*want)[i], 6e-2, "bf16 vs f32: " + names[i]);
    }
  }
}

// FunctionOptions::precision: a Function's body traced under the policy takes its Scan's
// body with it (the Scan's MatMuls in bf16), checked against the f32 Function.
TEST(ControlFlowPrecisionTest, FunctionPrecisionReachesTheScanBody) {
  const HostTensor w = HostTensor::RandomUniform(DType::kF32, {5, 5}, 3, -0.5, 0.5);
  const HostTensor x = HostTensor::RandomUniform(DType::kF32, {7, 3, 5}, 4, -1.0, 1.0);
  std::vector<HostTensor> results;
  for (DType precision : {DType::kBF16, DType::kF32}) {
    Graph g;
    Tensor wt = Variable(g, w, "w");
    FunctionOptions fo;
    fo.graph = &g;
    fo.precision = precision;
    fo.session.device = "cpu";
    fo.session.min_cluster_size = 1;
    fo.session.global_jit_level = JitLevel::kOn1;
    DType body_matmul = DType::kF32;
    Function f(
        [&](Graph&, const std::vector<Tensor>& args) -> std::vector<Tensor> {
          ScanResult r = Scan(
              [&](Graph& b, const std::vector<Tensor>& c, const std::vector<Tensor>& e) {
                Tensor m = MatMul(c[0] + e[0], wt);
                body_matmul = m.dtype();
                return ScanStep{{Tanh(m)}, {}};
              },
              {Sum(args[0], {0})}, {args[0]});
          return {r.carry[0]};
        },
        fo);
    auto out = f({x});
    ASSERT_TRUE(out.ok()) << out.status();
    EXPECT_EQ(body_matmul, precision);
    EXPECT_EQ((*out)[0].dtype(), DType::kF32);
    results.push_back((*out)[0]);
  }
  ExpectClose(results[0], results[1], 4e-2, "bf16 Function vs f32 Function");
  EXPECT_FALSE(AllClose(results[0], results[1], 0, 0)) << "the bf16 run rounded nothing";
}

}  // namespace
}  // namespace braze
