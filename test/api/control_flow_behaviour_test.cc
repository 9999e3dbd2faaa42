// Control flow (braze/control_flow.h) as a user of tf.cond / tf.while_loop / tf.scan
// writes it: what the runtime tests do not cover (hunt, 2026-11-30). Each case runs on
// the reference kernels, op by op and auto-clustered, against a hand computation.
#include <cmath>
#include <string>
#include <vector>

#include "braze/braze.h"
#include "gtest/gtest.h"

namespace braze {
namespace {

std::vector<SessionOptions> AllModes() {
  SessionOptions ref, eager, jit;
  ref.reference_only = true;
  jit.global_jit_level = JitLevel::kOn1;
  jit.min_cluster_size = 1;
  for (SessionOptions* o : {&ref, &eager, &jit}) o->device = "cpu";
  return {ref, eager, jit};
}

// An op of a body whose FIRST input is a captured tensor of the enclosing graph (w * x,
// MatMul(w, x), Gather(table, ids)) is the body's op, as x * w is: it was built in the
// enclosing graph, with an input of the body ("input 1 comes from another graph").
TEST(ControlFlowBehaviour, BodyOpsMayTakeACaptureAsTheirFirstInput) {
  Graph g;
  Tensor w = Placeholder(g, DType::kF32, {2, 2}, "w");
  Tensor v = Placeholder(g, DType::kF32, {2}, "v");
  Tensor table = Placeholder(g, DType::kF32, {5, 2}, "table");
  Tensor ids = Placeholder(g, DType::kI32, {-1}, "ids");
  Tensor p = Placeholder(g, DType::kBool, {}, "p");
  ScanResult r = Scan(
      [&](Graph&, const std::vector<Tensor>& c, const std::vector<Tensor>& x) {
        Tensor row = Gather(table, Reshape(x[0], {1}));  // [1, 2]
        // A Cond nested in the body: its branch multiplies by the outermost graph's v.
        std::vector<Tensor> y = Cond(
            p, [&](Graph&, const std::vector<Tensor>& a) { return std::vector<Tensor>{v * a[0]}; },
            [&](Graph&, const std::vector<Tensor>& a) { return std::vector<Tensor>{a[0]}; },
            {Reshape(MatMul(w, Reshape(c[0], {2, 1})), {2})});
        Tensor s = y[0] + Reshape(row, {2});
        return ScanStep{{s}, {s}};
      },
      {Placeholder(g, DType::kF32, {2}, "c0")}, {ids});
  ASSERT_TRUE(g.status().ok()) << g.status();
  Tensor c0 = *g.FindTensor("c0");
  HostTensor wv = HostTensor::RandomUniform(DType::kF32, {2, 2}, 1);
  HostTensor vv = HostTensor::RandomUniform(DType::kF32, {2}, 4);
  HostTensor tv = HostTensor::RandomUniform(DType::kF32, {5, 2}, 2);
  HostTensor cv = HostTensor::RandomUniform(DType::kF32, {2}, 3);
  HostTensor iv = HostTensor::From<int32_t>({4, 0, 3}, {3});
  for (bool pv : {true, false}) {
    // Hand: c = (p ? v .* (w c)[0..1] : w c) + table[id].
    std::vector<double> c = {cv.GetDouble(0), cv.GetDouble(1)};
    for (int t = 0; t < 3; ++t) {
      std::vector<double> m(2);
      for (int i = 0; i < 2; ++i)
        m[i] = wv.GetDouble(i * 2) * c[0] + wv.GetDouble(i * 2 + 1) * c[1];
      for (int i = 0; i < 2; ++i) {
        c[i] = (pv ? vv.GetDouble(i) * m[i] : m[i]) + tv.GetDouble(iv.GetDouble(t) * 2 + i);
      }
    }
    for (const SessionOptions& o : AllModes()) {
      Session s(g, o);
      auto out = s.Run(
          {{w, wv}, {v, vv}, {table, tv}, {ids, iv}, {p, HostTensor::Scalar<bool>(pv)}, {c0, cv}},
          {r.carry[0]});
      ASSERT_TRUE(out.ok()) << out.status();
      for (int i = 0; i < 2; ++i) EXPECT_NEAR((*out)[0].GetDouble(i), c[i], 1e-5) << pv;
    }
  }
}

// The same inside a Function: the capture that comes first is a program's Variable (b)
// or a Function's argument (a[1]); both reach the body through the Function's captures.
TEST(ControlFlowBehaviour, InAFunctionTooForVariablesAndArguments) {
  Graph g;
  Tensor w = Variable(g, HostTensor::RandomUniform(DType::kF32, {3, 3}, 1), "w");
  Tensor b = Variable(g, HostTensor::RandomUniform(DType::kF32, {3}, 2), "b");
  for (bool jit : {true, false}) {
    FunctionOptions fo;
    fo.graph = &g;
    fo.jit_compile = jit;
    fo.input_signature = {{{DType::kF32, {-1, 3}}, {DType::kF32, {3}}}};
    Function f(
        [&](Graph&, const std::vector<Tensor>& a) -> std::vector<Tensor> {
          ScanResult r = Scan(
              [&](Graph&, const std::vector<Tensor>& c, const std::vector<Tensor>& x) {
                Tensor m = Reshape(MatMul(Reshape(x[0], {1, 3}), w), {3});
                return ScanStep{{Tanh(m + b * c[0] + a[1] * x[0])}, {}};
              },
              {a[1]}, {a[0]});
          return {r.carry[0]};
        },
        fo);
    HostTensor x = HostTensor::RandomUniform(DType::kF32, {4, 3}, 3);
    HostTensor h0 = HostTensor::RandomUniform(DType::kF32, {3}, 4);
    auto out = f({x, h0});
    ASSERT_TRUE(out.ok()) << out.status();
    const HostTensor& wv = *w.node().attrs_as<VariableAttrs>().initial_value;
    const HostTensor& bv = *b.node().attrs_as<VariableAttrs>().initial_value;
    std::vector<double> c = {h0.GetDouble(0), h0.GetDouble(1), h0.GetDouble(2)};
    for (int t = 0; t < 4; ++t) {
      std::vector<double> n(3);
      for (int j = 0; j < 3; ++j) {
        double m = 0;
        for (int k = 0; k < 3; ++k) m += x.GetDouble(t * 3 + k) * wv.GetDouble(k * 3 + j);
        n[j] = std::tanh(m + bv.GetDouble(j) * c[j] + h0.GetDouble(j) * x.GetDouble(t * 3 + j));
      }
      c = n;
    }
    for (int j = 0; j < 3; ++j) EXPECT_NEAR((*out)[0].GetDouble(j), c[j], 1e-5) << jit;
  }
}

}  // namespace
}  // namespace braze
