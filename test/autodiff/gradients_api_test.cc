// The Gradients API: seeds and summation, the unconnected rule, errors, naming, and the
// gradient scopes of separate_compiled_gradients (with clustering when available).
#include <algorithm>
#include <cmath>
#include <limits>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "autodiff/grad_check.h"
#include "braze/gradients.h"
#include "braze/jit_scope.h"
#include "braze/ops.h"
#include "gtest/gtest.h"
#include "passes/mark_for_compilation.h"

namespace braze {
namespace {

using gradtest::RunReference;

std::vector<double> D(const HostTensor& t) { return t.ToVector<double>(); }

TEST(GradientsApiTest, DefaultSeedIsOnesAndContributionsOfSeveralYsAdd) {
  Graph g;
  Tensor x = Placeholder(g, DType::kF64, {3}, "x");
  Tensor y1 = x * 2.0;
  Tensor y2 = Square(x);
  auto grads = Gradients({y1, y2, y1}, {x});
  ASSERT_TRUE(grads.ok()) << grads.status();
  HostTensor dx = RunReference(g, {{x, HostTensor::From<double>({1, 2, 3}, {3})}}, *grads)[0];
  EXPECT_EQ(D(dx), (std::vector<double>{6, 8, 10}));  // 2 + 2x + 2
}

TEST(GradientsApiTest, ExplicitGradYsWeightTheYs) {
  Graph g;
  Tensor x = Placeholder(g, DType::kF64, {2}, "x");
  Tensor y = Square(x);
  Tensor seed = Const(g, HostTensor::From<double>({10, -1}, {2}));
  auto grads = Gradients({y, x}, {x}, {seed, Const(g, HostTensor::From<double>({1, 1}, {2}))});
  ASSERT_TRUE(grads.ok()) << grads.status();
  // A y that is itself an x contributes its grad_y directly.
  HostTensor dx = RunReference(g, {{x, HostTensor::From<double>({1, 3}, {2})}}, *grads)[0];
  EXPECT_EQ(D(dx), (std::vector<double>{21, -5}));
}

TEST(GradientsApiTest, IntermediateXsCollectEveryPath) {
  Graph g;
  Tensor a = Placeholder(g, DType::kF64, {}, "a");
  Tensor h = a * 3.0;
  Tensor y = Square(h) + h * a;
  auto grads = Gradients({y}, {h, a});
  ASSERT_TRUE(grads.ok()) << grads.status();
  auto out = RunReference(g, {{a, HostTensor::Scalar(2.0)}}, *grads);
  EXPECT_EQ(out[0].GetDouble(0), 2 * 6 + 2);  // dy/dh = 2h + a
  EXPECT_EQ(out[1].GetDouble(0), 24 * 2);     // y = 9a^2 + 3a^2 = 12a^2 -> 24a
}

// StopGradient (tf.stop_gradient) is x in the forward pass and passes nothing back:
// y = x * StopGradient(x) has dy/dx = StopGradient(x) = x, not 2x; y = StopGradient(x)
// alone leaves x unconnected (zeros), as does an i32 value; compiled as on the reference.
TEST(GradientsApiTest, StopGradientPassesNothingBack) {
  Graph g;
  Tensor x = Placeholder(g, DType::kF32, {-1, 3}, "x");
  Tensor i = Placeholder(g, DType::kI32, {2}, "i");
  Tensor y, s, k;
  {
    JitScope scope(g);
    s = StopGradient(x);
    y = Sum(x * s + Tanh(StopGradient(x * 2.0)));
    k = StopGradient(i) + 1;
  }
  auto grads = Gradients({y}, {x});
  ASSERT_TRUE(grads.ok()) << grads.status();
  auto stopped = Gradients({Sum(s)}, {x});
  ASSERT_TRUE(stopped.ok()) << stopped.status();
  const HostTensor xv = HostTensor::RandomUniform(DType::kF32, {5, 3}, 7, -2, 2);
  const Feeds feeds = {{x, xv}, {i, HostTensor::From<int32_t>({4, -9}, {2})}};
  for (bool reference : {true, false}) {
    SessionOptions options;
    options.reference_only = reference;
    Session session(g, options);
    auto out = session.Run(feeds, {s, (*grads)[0], (*stopped)[0], k});
    ASSERT_TRUE(out.ok()) << out.status();
    EXPECT_EQ((*out)[0].ToVector<float>(), xv.ToVector<float>()) << reference;
    EXPECT_EQ((*out)[1].ToVector<float>(), xv.ToVector<float>()) << reference;
    EXPECT_EQ((*out)[2].ToVector<float>(), std::vector<float>(15, 0.0f)) << reference;
    EXPECT_EQ((*out)[3].ToVector<int32_t>(), (std::vector<int32_t>{5, -8})) << reference;
  }
}

// Where the graph leaves a dim of y or grad_y unknown, grad_y may broadcast against y at
// run time: the gradients are those of sum(y * grad_y) under broadcasting, each of its
// x's shape (they used to take the broadcast shape), compiled and on the reference; a
// grad_y that does not broadcast against y fails the Run, naming an op.
TEST(GradientsApiTest, AGradYThatBroadcastsAtRunTimeGivesGradientsOfTheXsShape) {
  Graph g;
  Tensor x = Placeholder(g, DType::kF64, {-1, 3}, "x");
  Tensor seed = Placeholder(g, DType::kF64, {-1, 3}, "seed");
  Tensor y;
  {
    JitScope scope(g);
    y = Square(x);
  }
  auto grads = Gradients({y}, {x}, {seed});
  ASSERT_TRUE(grads.ok()) << grads.status();
  struct Pattern {
    HostTensor x, seed;
    std::vector<double> dx;  // empty: the Run fails
  };
  const std::vector<Pattern> patterns = {
      // seed's one row spread over x's two: dx = 2 x seed
      {HostTensor::From<double>({1, 2, 3, 4, 5, 6}, {2, 3}),
       HostTensor::From<double>({10, -1, 0.5}, {1, 3}),
       {20, -4, 3, 80, -10, 6}},
      // x's one row against seed's two: dx = 2 x (seed's rows summed)
      {HostTensor::From<double>({1, 2, 3}, {1, 3}),
       HostTensor::From<double>({1, 2, 3, 4, 5, 6}, {2, 3}),
       {10, 28, 54}},
      // the same shapes: dx = 2 x seed, bit for bit (-0 stays -0)
      {HostTensor::From<double>({1, 2, 3}, {1, 3}),
       HostTensor::From<double>({-0.0, 2, 3}, {1, 3}),
       {-0.0, 8, 18}},
      // two rows against three: no broadcast
      {HostTensor::From<double>({1, 2, 3, 4, 5, 6}, {2, 3}),
       HostTensor::RandomUniform(DType::kF64, {3, 3}, 4),
       {}},
  };
  for (bool reference : {true, false}) {
    SessionOptions options;
    options.reference_only = reference;
    Session session(g, options);
    for (size_t p = 0; p < patterns.size(); ++p) {
      SCOPED_TRACE(absl::StrCat("pattern ", p, reference ? " reference" : " compiled"));
      auto out = session.Run({{x, patterns[p].x}, {seed, patterns[p].seed}}, {(*grads)[0]});
      if (patterns[p].dx.empty()) {
        ASSERT_FALSE(out.ok());
        EXPECT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument) << out.status();
        EXPECT_NE(std::string(out.status().message()).find("node '"), std::string::npos)
            << out.status();
        continue;
      }
      ASSERT_TRUE(out.ok()) << out.status();
      EXPECT_EQ((*out)[0].shape(), patterns[p].x.shape());
      const std::vector<double> got = D((*out)[0]);
      ASSERT_EQ(got.size(), patterns[p].dx.size());
      for (size_t i = 0; i < got.size(); ++i) {
        EXPECT_EQ(got[i], patterns[p].dx[i]) << i;
        EXPECT_EQ(std::signbit(got[i]), std::signbit(patterns[p].dx[i])) << i;
      }
    }
  }
}

// A -1 dim that is 1 only at run time broadcasts there, and its gradient is summed back
// to the operand's shape when the Run knows the sizes (SumToShapeOf, TF's
// BroadcastGradientArgs). The dim used to be taken as not broadcast: dx of x [1, 3]
// against y [4, 3] came back [4, 3], and a MatMul reading it refused the Run. Checked on
// every pattern of sizes, compiled and on the reference.
TEST(GradientsApiTest, ARunTimeBroadcastOfAMinusOneDimIsSummedBack) {
  Graph g;
  Tensor x = Placeholder(g, DType::kF64, {-1, 3}, "x");
  Tensor y = Placeholder(g, DType::kF64, {-1, 3}, "y");
  Tensor w = Const(g, HostTensor::From<double>({1, -2, 0.5, 3, 0.25, -1}, {3, 2}));
  Tensor c = Const(g, HostTensor::From<double>({1, 2, 3, 4, 5, 6, 7, 8, 9}, {3, 3}));
  Tensor loss;
  {
    JitScope scope(g);
    // x * y broadcasts either way; Exp(x) adds a second path of x's own shape; x + c
    // against a static 3 rows; MatMul(x * y, w) reads the product's gradient.
    Tensor p = x * y;
    loss = Sum(MatMul(p, w)) + Sum(Exp(x)) + Sum(Square(x + c));
  }
  auto grads = Gradients({loss}, {x, y});
  ASSERT_TRUE(grads.ok()) << grads.status();
  // d loss / d p = rowsum(w) per column: {-1, 3.5, -0.75}.
  const std::vector<double> wsum = {-1, 3.5, -0.75};
  for (const auto& [rx, ry] : std::vector<std::pair<int, int>>{{1, 3}, {3, 3}, {3, 1}, {1, 1}}) {
    const HostTensor xv = HostTensor::RandomUniform(DType::kF64, {rx, 3}, 11 + rx, -1, 1);
    const HostTensor yv = HostTensor::RandomUniform(DType::kF64, {ry, 3}, 17 + ry, -1, 1);
    const int rows = std::max(rx, ry);
    std::vector<double> dx(rx * 3, 0.0), dy(ry * 3, 0.0);
    for (int r = 0; r < rows; ++r) {
      for (int j = 0; j < 3; ++j) {
        const double xe = xv.GetDouble((rx == 1 ? 0 : r) * 3 + j);
        const double ye = yv.GetDouble((ry == 1 ? 0 : r) * 3 + j);
        dx[(rx == 1 ? 0 : r) * 3 + j] += wsum[j] * ye;
        dy[(ry == 1 ? 0 : r) * 3 + j] += wsum[j] * xe;
      }
    }
    for (int r = 0; r < rx; ++r) {
      for (int j = 0; j < 3; ++j) {
        const double xe = xv.GetDouble(r * 3 + j);
        dx[r * 3 + j] += std::exp(xe);
        // x + c is [3, 3]: x's row r meets every row of c when rx is 1, row r otherwise.
        for (int k = 0; k < 3; ++k) {
          if (rx == 1 || k == r) dx[r * 3 + j] += 2 * (xe + (k * 3 + j + 1));
        }
      }
    }
    for (bool reference : {true, false}) {
      SessionOptions options;
      options.reference_only = reference;
      Session session(g, options);
      auto out = session.Run({{x, xv}, {y, yv}}, *grads);
      ASSERT_TRUE(out.ok()) << out.status() << " rows " << rx << ", " << ry;
      ASSERT_EQ((*out)[0].shape(), (Shape{rx, 3})) << reference << " rows " << rx << ", " << ry;
      ASSERT_EQ((*out)[1].shape(), (Shape{ry, 3})) << reference << " rows " << rx << ", " << ry;
      for (int i = 0; i < rx * 3; ++i) {
        EXPECT_NEAR((*out)[0].GetDouble(i), dx[i], 1e-9)
            << reference << " rows " << rx << ", " << ry;
      }
      for (int i = 0; i < ry * 3; ++i) {
        EXPECT_NEAR((*out)[1].GetDouble(i), dy[i], 1e-9)
            << reference << " rows " << rx << ", " << ry;
      }
    }
  }
}

// Where both -1 dims come from one source (x and Max(x) over its other axis, a MatMul's
// rows), no run-time sum is needed, and none is built: the gradient graph of a softmax
// over a -1 batch is what it was.
TEST(GradientsApiTest, DimsOfOneSourceBuildNoRunTimeSum) {
  Graph g;
  Tensor x = Placeholder(g, DType::kF32, {-1, 5}, "x");
  Tensor w = Const(g, HostTensor::RandomUniform(DType::kF32, {5, 4}, 3, -1, 1));
  Tensor h = MatMul(Tanh(x), w);
  Tensor z = h - Max(h, {1}, true);
  Tensor loss = Sum(Exp(z) + h * Sigmoid(h)) + Sum(x * Tanh(x) - Mean(x, {1}, true));
  auto grads = Gradients({loss}, {x});
  ASSERT_TRUE(grads.ok()) << grads.status();
  for (int id = 0; id < g.num_nodes(); ++id) {
    EXPECT_NE(g.node(id).op(), OpKind::kSumToShapeOf) << g.node(id).name();
  }
}

// SumToShapeOf refuses a like that does not broadcast to x, naming the node: when the
// graph is built where both sizes are known, and in the Run where one is -1.
TEST(GradientsApiTest, SumToShapeOfOfAShapeThatDoesNotBroadcastIsAnError) {
  Graph g;
  Tensor x = Placeholder(g, DType::kF32, {4, 3}, "x");
  SumToShapeOf(x, Placeholder(g, DType::kF32, {2, 3}, "like"));
  EXPECT_EQ(g.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(g.status().message().find("SumToShapeOf"), std::string::npos) << g.status();
  Graph h;
  Tensor y = Placeholder(h, DType::kF32, {-1, 3}, "y");
  Tensor like = Placeholder(h, DType::kF32, {2, 3}, "like");
  Tensor s = SumToShapeOf(y, like);
  ASSERT_TRUE(h.status().ok()) << h.status();
  Session session(h, SessionOptions{});
  auto out = session.Run({{y, HostTensor::Filled(DType::kF32, {4, 3}, 1.0)},
                          {like, HostTensor::Filled(DType::kF32, {2, 3}, 1.0)}},
                         {s});
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(out.status().message().find("SumToShapeOf"), std::string::npos) << out.status();
}

// A residual chain reaches each value by two paths per step: the walk that finds a
// dim's source visits each value once (2^80 paths here), and the chain's dims are all
// x's batch, so no run-time sum is built.
TEST(GradientsApiTest, AResidualChainIsWalkedOncePerValue) {
  Graph g;
  Tensor x = Placeholder(g, DType::kF32, {-1, 4}, "x");
  Tensor h = x;
  for (int i = 0; i < 80; ++i) h = h + Tanh(h) * Sigmoid(h);
  auto grads = Gradients({Sum(h)}, {x});
  ASSERT_TRUE(grads.ok()) << grads.status();
  for (int id = 0; id < g.num_nodes(); ++id) {
    EXPECT_NE(g.node(id).op(), OpKind::kSumToShapeOf) << g.node(id).name();
  }
}

// Gradient ops are ordinary ops, so gradients of gradients work (here a Hessian times
// a weight vector, checked by finite differences of the first gradient).
TEST(GradientsApiTest, SecondOrderGradients) {
  Graph g;
  Tensor x = Placeholder(g, DType::kF64, {2, 3}, "x");
  Tensor w = Const(g, HostTensor::RandomUniform(DType::kF64, {3, 3}, 5, -1, 1));
  Tensor y = Sum(Tanh(MatMul(x, w)) * Sigmoid(x) / (Square(x) + 1.0)) + Max(Exp(x));
  auto first = Gradients({y}, {x});
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_TRUE(gradtest::CheckGradients((*first)[0], {{x, gradtest::Distinct({2, 3}, 6)}}));
}

// The unconnected rule: zeros of x's dtype and shape, never an invalid tensor.
TEST(GradientsApiTest, UnconnectedXsGetZerosOfTheirShapeAndDtype) {
  Graph g;
  Tensor x = Placeholder(g, DType::kF64, {2}, "x");
  Tensor free_static = Placeholder(g, DType::kF32, {2, 3}, "free_static");
  Tensor free_dynamic = Placeholder(g, DType::kF64, {-1, 2}, "free_dynamic");
  Tensor ints = Placeholder(g, DType::kI32, {2}, "ints");
  Tensor y = Square(x) + Cast(ints, DType::kF64);
  auto grads = Gradients({y}, {free_static, free_dynamic, ints, x});
  ASSERT_TRUE(grads.ok()) << grads.status();
  EXPECT_EQ((*grads)[0].type(), (TensorType{DType::kF32, {2, 3}}));
  EXPECT_EQ((*grads)[1].type(), (TensorType{DType::kF64, {-1, 2}}));
  EXPECT_EQ((*grads)[2].type(), (TensorType{DType::kI32, {2}}));
  // A fully defined shape needs nothing fed; an unknown one takes x's runtime shape and
  // stays zero where x is NaN or infinite.
  HostTensor zs = RunReference(g, {}, {(*grads)[0]})[0];
  EXPECT_EQ(zs.ToVector<float>(), std::vector<float>(6, 0));
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double inf = std::numeric_limits<double>::infinity();
  auto out =
      RunReference(g,
                   {{x, HostTensor::From<double>({1, 2}, {2})},
                    {ints, HostTensor::From<int32_t>({1, 2}, {2})},
                    {free_dynamic, HostTensor::From<double>({nan, inf, -inf, 1, 2, 3}, {3, 2})}},
                   {(*grads)[1], (*grads)[2], (*grads)[3]});
  EXPECT_EQ(out[0].shape(), (Shape{3, 2}));
  EXPECT_EQ(D(out[0]), std::vector<double>(6, 0));
  EXPECT_EQ(out[1].ToVector<int32_t>(), (std::vector<int32_t>{0, 0}));
  EXPECT_EQ(D(out[2]), (std::vector<double>{2, 4}));
}

TEST(GradientsApiTest, NoXsIsAnEmptyResult) {
  Graph g;
  Tensor x = Placeholder(g, DType::kF64, {2}, "x");
  const int before = g.num_nodes();
  auto grads = Gradients({Square(x)}, {});
  ASSERT_TRUE(grads.ok()) << grads.status();
  EXPECT_TRUE(grads->empty());
  EXPECT_EQ(g.num_nodes(), before + 1);  // only the Square built above
}

TEST(GradientsApiTest, OpsLiveUnderTheNameScopeAndTheGraphStaysValid) {
  Graph g;
  Tensor x = Placeholder(g, DType::kF64, {2, 2}, "x");
  Tensor y = Tanh(MatMul(x, x));
  const int first = g.num_nodes();
  ASSERT_TRUE(Gradients({y}, {x}).ok());
  const int second = g.num_nodes();
  ASSERT_TRUE(Gradients({y}, {x}).ok());
  const int third = g.num_nodes();
  ASSERT_TRUE(Gradients({y}, {x}, {}, "mygrads").ok());
  auto starts_with = [](const std::string& s, const std::string& p) { return s.rfind(p, 0) == 0; };
  for (int id = first; id < g.num_nodes(); ++id) {
    const std::string prefix = id < second  ? "gradients/"
                               : id < third ? "gradients_1/"
                                            : "mygrads/";
    EXPECT_TRUE(starts_with(g.node(id).name(), prefix)) << g.node(id).name();
  }
  EXPECT_TRUE(g.status().ok()) << g.status();
  EXPECT_TRUE(VerifyGraph(g).ok()) << VerifyGraph(g);
}

TEST(GradientsApiTest, BadArgumentsAreInvalidArgumentAndBuildNothing) {
  Graph g, other;
  Tensor x = Placeholder(g, DType::kF64, {2}, "x");
  Tensor y = Square(x);
  Tensor ints = Placeholder(g, DType::kI32, {2}, "ints");
  Tensor foreign = Placeholder(other, DType::kF64, {2}, "foreign");
  Tensor broken = MatMul(x, x);  // rank-1 operands: a build error on the node
  Tensor seed3 = Const(g, HostTensor(DType::kF64, {3}));
  Tensor seed_f32 = Const(g, HostTensor(DType::kF32, {2}));
  struct Case {
    std::string what;
    absl::StatusOr<std::vector<Tensor>> result;
    std::string message;
  };
  const int before = g.num_nodes();
  std::vector<Case> cases;
  cases.push_back({"no ys", Gradients({}, {x}), "ys is empty"});
  cases.push_back({"invalid y", Gradients({Tensor()}, {x}), "ys[0] is not a tensor"});
  cases.push_back({"invalid x", Gradients({y}, {x, Tensor()}), "xs[1] is not a tensor"});
  cases.push_back({"foreign x", Gradients({y}, {foreign}), "another graph"});
  cases.push_back({"foreign y", Gradients({y, foreign}, {x}), "another graph"});
  cases.push_back({"int y", Gradients({ints}, {x}), "only floating"});
  cases.push_back({"broken y", Gradients({broken}, {x}), "is invalid"});
  cases.push_back({"grad_ys count", Gradients({y}, {x}, {seed3, seed3}), "2 grad_ys given for 1"});
  cases.push_back({"grad_ys shape", Gradients({y}, {x}, {seed3}), "grad_ys[0] is f64[3]"});
  cases.push_back({"grad_ys dtype", Gradients({y}, {x}, {seed_f32}), "grad_ys[0] is f32[2]"});
  cases.push_back({"bad node id", Gradients({y}, {Tensor(&g, 999)}), "does not name an output"});
  for (const Case& c : cases) {
    ASSERT_FALSE(c.result.ok()) << c.what;
    EXPECT_EQ(c.result.status().code(), absl::StatusCode::kInvalidArgument) << c.what;
    EXPECT_NE(c.result.status().message().find(c.message), std::string::npos)
        << c.what << ": " << c.result.status();
  }
  EXPECT_EQ(g.num_nodes(), before);
}

// ---- Gradient scopes (separate_compiled_gradients) ----

class GradientScopeTest : public ::testing::Test {
 protected:
  // The seeds' example: f = MatMul(a, b) in a scope, then two Gradients calls.
  void BuildSeedExample(bool separate) {
    JitScope::Options options;
    options.separate_compiled_gradients = separate;
    JitScope scope(g, options);
    a = Placeholder(g, DType::kF32, {2, 3}, "a");
    b = Placeholder(g, DType::kF32, {3, 4}, "b");
    f = MatMul(a, b);
    auto g1 = Gradients({f}, {a, b}, {}, "mygrads1");
    auto g2 = Gradients({f}, {a, b}, {}, "mygrads2");
    ASSERT_TRUE(g1.ok() && g2.ok());
    grads1 = *g1;
    grads2 = *g2;
  }
  // Every node whose name starts with `prefix`.
  std::vector<const Node*> NodesUnder(const std::string& prefix) const {
    std::vector<const Node*> out;
    for (int id = 0; id < g.num_nodes(); ++id) {
      if (g.node(id).name().rfind(prefix, 0) == 0) out.push_back(&g.node(id));
    }
    return out;
  }
  Graph g;
  Tensor a, b, f;
  std::vector<Tensor> grads1, grads2;
};

TEST_F(GradientScopeTest, SeparateCompiledGradientsGetTheirOwnScopes) {
  BuildSeedExample(/*separate=*/true);
  EXPECT_EQ(f.node().jit().scope, "jit_scope_0");
  for (const Tensor& t : grads1) EXPECT_EQ(t.node().jit().scope, "jit_scope_0_grad_mygrads1");
  for (const Tensor& t : grads2) EXPECT_EQ(t.node().jit().scope, "jit_scope_0_grad_mygrads2");
  // Every op that differentiates a scoped op is in that scope, compiled.
  for (const std::string call : {"mygrads1", "mygrads2"}) {
    for (const Node* n : NodesUnder(call + "/")) {
      if (n->op() == OpKind::kMatMul) {
        EXPECT_EQ(n->jit().scope, "jit_scope_0_grad_" + call) << n->name();
        EXPECT_EQ(n->jit().compile, std::optional<bool>(true)) << n->name();
      }
    }
  }
  EXPECT_TRUE(g.jit_frames().empty());
  EXPECT_TRUE(g.status().ok()) << g.status();
}

TEST_F(GradientScopeTest, SeparateCompiledGradientsCompileInThreeClusters) {
  BuildSeedExample(/*separate=*/true);
  absl::StatusOr<ClusteringResult> r = MarkForCompilation(g, ClusteringOptions{});
  ASSERT_TRUE(r.ok()) << r.status();
  const int cf = r->ClusterOf(f.node_id());
  const int cg = r->ClusterOf(grads1[0].node_id());
  const int ch = r->ClusterOf(grads2[0].node_id());
  ASSERT_GE(cf, 0);
  ASSERT_GE(cg, 0);
  ASSERT_GE(ch, 0);
  EXPECT_EQ(std::set<int>({cf, cg, ch}).size(), 3u) << r->DebugString();
  // Both gradients of one call share their seed and so one cluster.
  EXPECT_EQ(r->ClusterOf(grads1[1].node_id()), cg) << r->DebugString();
  EXPECT_EQ(r->ClusterOf(grads2[1].node_id()), ch) << r->DebugString();
}

// The seed example's MatMul gradients do not read f, so their clusters would be apart
// anyway. With a forward op whose gradient reads its output (Tanh), the scope decides.
TEST_F(GradientScopeTest, GradientsJoinTheForwardClusterUnlessSeparated) {
  for (bool separate : {false, true}) {
    Graph graph;
    JitScope::Options options;
    options.separate_compiled_gradients = separate;
    Tensor x = Placeholder(graph, DType::kF32, {4, 4}, "x");
    Tensor y;
    {
      JitScope scope(graph, options);
      y = Tanh(MatMul(x, x));
    }
    const int before = graph.num_nodes();
    ASSERT_TRUE(Gradients({y}, {x}, {}, "g").ok());
    // Tanh's gradient dy * (1 - y^2) starts with Square(y): an edge from the forward op.
    Tensor square;
    for (int id = before; id < graph.num_nodes(); ++id) {
      if (graph.node(id).op() == OpKind::kSquare) square = Tensor(&graph, id);
    }
    ASSERT_TRUE(square.valid());
    ASSERT_EQ(square.node().input(0), y);
    EXPECT_EQ(square.node().jit().scope, separate ? "jit_scope_0_grad_g" : "jit_scope_0");
    absl::StatusOr<ClusteringResult> r = MarkForCompilation(graph, ClusteringOptions{});
    ASSERT_TRUE(r.ok()) << r.status();
    const int cy = r->ClusterOf(y.node_id()), cdx = r->ClusterOf(square.node_id());
    ASSERT_GE(cy, 0);
    ASSERT_GE(cdx, 0);
    if (separate) {
      EXPECT_NE(cy, cdx) << r->DebugString();
    } else {
      EXPECT_EQ(cy, cdx) << r->DebugString();
    }
  }
}

TEST_F(GradientScopeTest, GradientsInheritTheForwardCompileDecision) {
  Tensor x = Placeholder(g, DType::kF32, {3}, "x");
  Tensor y1, y2, y3;
  {
    JitScope off(g, false);
    y1 = Exp(x);
  }
  {
    JitScope by_op(g, [](const NodeDef& n) { return n.op_kind() == OpKind::kTanh; });
    y2 = Tanh(x);
    y3 = Sigmoid(x);
  }
  auto grads = Gradients({y1, y2, y3}, {x});
  ASSERT_TRUE(grads.ok()) << grads.status();
  int checked = 0;
  for (const Node* n : NodesUnder("gradients/")) {
    if (n->op() != OpKind::kMul) continue;
    // Each Mul takes dy and a forward value: Exp's y1, Tanh's 1 - y^2, Sigmoid's y(1 - y).
    bool reads_y1 = false, reads_scope1 = false;
    for (const Tensor& in : n->inputs()) {
      reads_y1 |= in == y1;
      reads_scope1 |= in.node().jit().scope == "jit_scope_1";
    }
    if (reads_y1) {
      EXPECT_EQ(n->jit().compile, std::optional<bool>(false)) << n->name();
      EXPECT_EQ(n->jit().scope, "jit_scope_0") << n->name();
      ++checked;
    } else if (reads_scope1) {
      EXPECT_EQ(n->jit().scope, "jit_scope_1") << n->name();
      ++checked;
    }
  }
  EXPECT_GE(checked, 3);
  // The predicate answered per forward op; its gradient ops carry that answer.
  for (const Node* n : NodesUnder("gradients/")) {
    if (n->jit().scope != "jit_scope_1") continue;
    bool from_tanh = false, from_sigmoid = false;
    for (const Tensor& in : n->inputs()) {
      from_tanh |= in == y2;
      from_sigmoid |= in == y3;
    }
    if (from_tanh) {
      EXPECT_EQ(n->jit().compile, std::optional<bool>(true)) << n->name();
    }
    if (from_sigmoid) {
      EXPECT_EQ(n->jit().compile, std::optional<bool>(false)) << n->name();
    }
  }
}

// Gradient ops of unscoped forward ops are built in the caller's active scope; frames
// pushed for scoped forward ops sit on top and leave the caller's stack unchanged.
TEST_F(GradientScopeTest, CallingGradientsInsideAnActiveScope) {
  Tensor x = Placeholder(g, DType::kF32, {3}, "x");
  Tensor unscoped = Exp(x);
  Tensor scoped;
  {
    JitScope::Options options;
    options.separate_compiled_gradients = true;
    JitScope s(g, options);
    scoped = Tanh(unscoped);
  }
  JitScope outer(g, false);
  const uint64_t token = g.jit_frames().back().token;
  auto grads = Gradients({scoped}, {x}, {}, "inner");
  ASSERT_TRUE(grads.ok()) << grads.status();
  ASSERT_EQ(g.jit_frames().size(), 1u);
  EXPECT_EQ(g.jit_frames().back().token, token);
  // dx = dy * exp(x) differentiates the unscoped Exp: the caller's scope (jit_scope_1,
  // compile=false).
  EXPECT_EQ((*grads)[0].node().jit().scope, "jit_scope_1");
  EXPECT_EQ((*grads)[0].node().jit().compile, std::optional<bool>(false));
  bool saw_tanh_grad = false;
  for (const Node* n : NodesUnder("inner/")) {
    if (n->jit().scope == "jit_scope_0_grad_inner") {
      saw_tanh_grad = true;
      EXPECT_EQ(n->jit().compile, std::optional<bool>(true)) << n->name();
    }
  }
  EXPECT_TRUE(saw_tanh_grad);
  EXPECT_TRUE(g.status().ok()) << g.status();
}

}  // namespace
}  // namespace braze
