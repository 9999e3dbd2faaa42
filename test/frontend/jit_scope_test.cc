// JitScope: what it records on nodes, scope ids, nesting, and misuse.
#include "braze/jit_scope.h"

#include <memory>
#include <stdexcept>
#include <string>

#include "braze/ops.h"
#include "gtest/gtest.h"

namespace braze {
namespace {

class ScopeFixture : public ::testing::Test {
 protected:
  ScopeFixture()
      : a(Placeholder(g, DType::kF32, {2, 2}, "a")), b(Placeholder(g, DType::kF32, {2, 2}, "b")) {}
  Graph g;
  Tensor a;
  Tensor b;
};

TEST_F(ScopeFixture, OpsOutsideAnyScopeRecordNothing) {
  Tensor c = MatMul(a, b);
  EXPECT_FALSE(c.node().jit().compile.has_value());
  EXPECT_EQ(c.node().jit().scope, "");
  EXPECT_FALSE(c.node().jit().separate_compiled_gradients);
  EXPECT_TRUE(g.jit_frames().empty());
}

// The seed documentation's first example, on the nodes themselves.
TEST_F(ScopeFixture, SeedExampleCompileFlags) {
  Tensor c, d, mm, e;
  {
    JitScope s(g);
    c = MatMul(a, b);
  }
  {
    JitScope s(g, false);
    d = MatMul(a, c);
  }
  {
    JitScope s(g, [](const NodeDef& n) {
      return std::string(n.op()).find("MatMul") != std::string::npos;
    });
    mm = MatMul(a, b);
    e = mm + d;
  }
  EXPECT_EQ(c.node().jit().compile, true);
  EXPECT_EQ(d.node().jit().compile, false);
  EXPECT_EQ(mm.node().jit().compile, true);
  EXPECT_EQ(e.node().op(), OpKind::kAdd);
  EXPECT_EQ(e.node().jit().compile, false);
  // Three outermost scopes: three ids.
  EXPECT_EQ(c.node().jit().scope, "jit_scope_0");
  EXPECT_EQ(d.node().jit().scope, "jit_scope_1");
  EXPECT_EQ(mm.node().jit().scope, "jit_scope_2");
  EXPECT_EQ(e.node().jit().scope, "jit_scope_2");
  EXPECT_TRUE(g.status().ok()) << g.status();
}

TEST_F(ScopeFixture, PredicateSeesTheNodeDef) {
  std::vector<std::string> seen;
  Tensor x;
  {
    JitScope s(g, [&](const NodeDef& n) {
      seen.push_back(std::string(n.op()) + ":" + n.name());
      return n.op_kind() == OpKind::kExp;
    });
    x = Exp(a);
    Neg(x);
  }
  ASSERT_EQ(seen.size(), 2u);
  EXPECT_EQ(seen[0], "Exp:" + x.name());
  EXPECT_EQ(seen[1].substr(0, 4), "Neg:");
}

TEST_F(ScopeFixture, CompilePredicateObjectAndFunctionPointer) {
  CompilePredicate only_neg = [](const NodeDef& n) { return n.op_kind() == OpKind::kNeg; };
  Tensor n1, e1, n2;
  {
    JitScope s(g, only_neg);
    n1 = Neg(a);
    e1 = Exp(a);
  }
  bool (*never)(const NodeDef&) = [](const NodeDef&) { return false; };
  {
    JitScope s(g, never);
    n2 = Neg(a);
  }
  EXPECT_EQ(n1.node().jit().compile, true);
  EXPECT_EQ(e1.node().jit().compile, false);
  EXPECT_EQ(n2.node().jit().compile, false);
}

TEST_F(ScopeFixture, NestedScopesInheritTheOutermostId) {
  Tensor outer, inner, inner2, after, next;
  {
    JitScope s0(g);
    EXPECT_EQ(s0.scope(), "jit_scope_0");
    outer = Exp(a);
    {
      JitScope s1(g, false);
      EXPECT_EQ(s1.scope(), "jit_scope_0");
      inner = Exp(a);
      {
        JitScope s2(g);
        inner2 = Exp(inner);
      }
    }
    after = Exp(outer);
    EXPECT_EQ(g.jit_frames().size(), 1u);
  }
  {
    JitScope s(g);
    next = Exp(a);
  }
  EXPECT_EQ(outer.node().jit().scope, "jit_scope_0");
  EXPECT_EQ(inner.node().jit().scope, "jit_scope_0");
  EXPECT_EQ(inner2.node().jit().scope, "jit_scope_0");
  EXPECT_EQ(after.node().jit().scope, "jit_scope_0");
  EXPECT_EQ(next.node().jit().scope, "jit_scope_1");
  EXPECT_EQ(outer.node().jit().compile, true);
  EXPECT_EQ(inner.node().jit().compile, false);  // an inner false wins for its ops
  EXPECT_EQ(inner2.node().jit().compile, true);
  EXPECT_EQ(after.node().jit().compile, true);  // the outer flag is back
  EXPECT_TRUE(g.jit_frames().empty());
}

// The seeds' third example on the nodes: an outer false scope around an inner true one.
TEST_F(ScopeFixture, OuterFalseInnerTrue) {
  Tensor x, y, z;
  {
    JitScope off(g, false);
    x = Exp(a);
    {
      JitScope on(g);
      y = Neg(x);
    }
    z = Exp(y);
  }
  EXPECT_EQ(x.node().jit().compile, false);
  EXPECT_EQ(y.node().jit().compile, true);
  EXPECT_EQ(z.node().jit().compile, false);
  EXPECT_EQ(y.node().jit().scope, x.node().jit().scope);
}

TEST_F(ScopeFixture, ScopeIdsArePerGraph) {
  Graph other;
  Tensor p = Placeholder(other, DType::kF32, {2}, "p");
  {
    JitScope s(g);
    Exp(a);
  }
  {
    JitScope s(g);
    Exp(a);
  }
  Tensor q;
  {
    JitScope s(other);
    q = Exp(p);
  }
  EXPECT_EQ(q.node().jit().scope, "jit_scope_0");
  // A scope on one graph does not touch another's stack.
  JitScope s(g);
  EXPECT_TRUE(other.jit_frames().empty());
  EXPECT_EQ(s.scope(), "jit_scope_2");
}

TEST_F(ScopeFixture, SeparateCompiledGradientsIsRecordedAndInherited) {
  Tensor x, y, z, w, v;
  {
    JitScope s(g, JitScope::Options{true, true});
    x = Exp(a);
    {
      JitScope inner(g, false);  // does not set it: inherits true
      y = Exp(a);
    }
    {
      JitScope inner(g, JitScope::Options{true, false});  // sets it
      z = Exp(a);
    }
  }
  {
    JitScope s(g);
    w = Exp(a);
  }
  {
    JitScope s(
        g, JitScope::Options{[](const NodeDef& n) { return n.op_kind() == OpKind::kNeg; }, true});
    v = Neg(a);
  }
  EXPECT_TRUE(x.node().jit().separate_compiled_gradients);
  EXPECT_EQ(x.node().jit().compile, true);
  EXPECT_TRUE(y.node().jit().separate_compiled_gradients);
  EXPECT_EQ(y.node().jit().compile, false);
  EXPECT_FALSE(z.node().jit().separate_compiled_gradients);
  EXPECT_FALSE(w.node().jit().separate_compiled_gradients);
  EXPECT_TRUE(v.node().jit().separate_compiled_gradients);
  EXPECT_EQ(v.node().jit().compile, true);
}

TEST_F(ScopeFixture, EachScopeGetsADistinctToken) {
  JitScope s0(g);
  JitScope s1(g);
  ASSERT_EQ(g.jit_frames().size(), 2u);
  EXPECT_EQ(g.jit_frames()[0].token, s0.token());
  EXPECT_EQ(g.jit_frames()[1].token, s1.token());
  EXPECT_NE(s0.token(), s1.token());
}

TEST_F(ScopeFixture, ExceptionUnwindingRestoresTheStack) {
  Tensor before_throw;
  try {
    JitScope s0(g);
    JitScope s1(g, false);
    before_throw = Exp(a);
    throw std::runtime_error("boom");
  } catch (const std::runtime_error&) {
  }
  EXPECT_TRUE(g.jit_frames().empty());
  EXPECT_TRUE(g.status().ok()) << g.status();
  EXPECT_EQ(before_throw.node().jit().compile, false);
  Tensor after = Exp(a);
  EXPECT_FALSE(after.node().jit().compile.has_value());
  // A fresh outermost scope after the throw gets the next id.
  JitScope s(g);
  EXPECT_EQ(s.scope(), "jit_scope_1");
}

TEST_F(ScopeFixture, ExceptionFromAPredicateIsAGraphErrorNotAnUnscopedOp) {
  {
    JitScope s(g, [](const NodeDef&) -> bool { throw std::runtime_error("predicate"); });
    Tensor e = Exp(a);
    // The op is not compiled and does not look unscoped (which could auto-cluster it).
    EXPECT_EQ(e.node().jit().compile, false);
    EXPECT_EQ(e.node().jit().scope, s.scope());
  }
  EXPECT_TRUE(g.jit_frames().empty());
  ASSERT_FALSE(g.status().ok());
  EXPECT_NE(std::string(g.status().message()).find("predicate threw"), std::string::npos);
}

int BuildWithEarlyReturn(Graph& g, Tensor a, bool early) {
  JitScope s(g);
  Exp(a);
  if (early) return 1;
  JitScope inner(g, false);
  Exp(a);
  return 2;
}

TEST_F(ScopeFixture, EarlyReturnRestoresTheStack) {
  EXPECT_EQ(BuildWithEarlyReturn(g, a, true), 1);
  EXPECT_TRUE(g.jit_frames().empty());
  EXPECT_EQ(BuildWithEarlyReturn(g, a, false), 2);
  EXPECT_TRUE(g.jit_frames().empty());
  EXPECT_TRUE(g.status().ok());
}

TEST_F(ScopeFixture, OutOfOrderDestructionIsAClearError) {
  auto outer = std::make_unique<JitScope>(g);
  auto inner = std::make_unique<JitScope>(g, false);
  const uint64_t inner_token = inner->token();
  ASSERT_TRUE(g.status().ok());
  outer.reset();  // wrong: inner is still alive
  EXPECT_EQ(g.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(g.status().message().find("jit_scope_0"), std::string::npos) << g.status();
  EXPECT_NE(g.status().message().find("out of order"), std::string::npos) << g.status();
  // Only the outer frame went; the inner one still applies to new ops.
  ASSERT_EQ(g.jit_frames().size(), 1u);
  EXPECT_EQ(g.jit_frames()[0].token, inner_token);
  Tensor x = Exp(a);
  EXPECT_EQ(x.node().jit().compile, false);
  EXPECT_EQ(x.node().jit().scope, "jit_scope_0");
  inner.reset();  // now the stack is empty, cleanly
  EXPECT_TRUE(g.jit_frames().empty());
  EXPECT_FALSE(Exp(a).node().jit().compile.has_value());
}

TEST_F(ScopeFixture, OutOfOrderInTheMiddleKeepsTheOthers) {
  auto s0 = std::make_unique<JitScope>(g);
  auto s1 = std::make_unique<JitScope>(g, false);
  auto s2 = std::make_unique<JitScope>(g);
  const uint64_t t0 = s0->token(), t2 = s2->token();
  s1.reset();
  EXPECT_EQ(g.status().code(), absl::StatusCode::kFailedPrecondition);
  ASSERT_EQ(g.jit_frames().size(), 2u);
  EXPECT_EQ(g.jit_frames()[0].token, t0);
  EXPECT_EQ(g.jit_frames()[1].token, t2);
  s2.reset();
  s0.reset();
  EXPECT_TRUE(g.jit_frames().empty());
}

TEST_F(ScopeFixture, FrameRemovedBehindTheScopesBackIsReported) {
  {
    JitScope s(g);
    g.mutable_jit_frames().clear();
  }
  EXPECT_EQ(g.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(g.status().message().find("no longer"), std::string::npos) << g.status();
}

TEST_F(ScopeFixture, EmptyPredicateIsScopeMisuse) {
  Tensor x;
  {
    JitScope s(g, CompilePredicate());
    x = Exp(a);
  }
  EXPECT_EQ(g.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(x.node().jit().compile, false);
}

}  // namespace
}  // namespace braze
