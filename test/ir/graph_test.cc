#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "braze/ops.h"

namespace braze {
namespace {

using ::testing::HasSubstr;

TEST(Graph, UniqueNamesAndNameScopes) {
  Graph g;
  Tensor a = Placeholder(g, DType::kF32, {2, 3}, "a");
  Tensor w = Placeholder(g, DType::kF32, {3, 4}, "w");
  Tensor m0 = MatMul(a, w);
  Tensor m1 = MatMul(a, w);
  EXPECT_EQ(m0.name(), "MatMul");
  EXPECT_EQ(m1.name(), "MatMul_1");
  {
    NameScope s(g, "dense");
    EXPECT_EQ(MatMul(a, w).name(), "dense/MatMul");
    EXPECT_EQ(MatMul(a, w).name(), "dense/MatMul_1");
    NameScope inner(g, "inner");
    EXPECT_EQ(Relu(a).name(), "dense/inner/Relu");
  }
  EXPECT_EQ(Relu(a).name(), "Relu");
  EXPECT_EQ(g.FindTensor("dense/MatMul_1")->node().op(), OpKind::kMatMul);
  EXPECT_TRUE(g.status().ok());
  EXPECT_TRUE(VerifyGraph(g).ok());
}

TEST(Graph, NodeDefViewAndOpList) {
  Graph g;
  Tensor a = Placeholder(g, DType::kF32, {2, 3}, "a");
  Tensor s = Sum(a, {-1}, true);
  NodeDef def(s.node());
  EXPECT_STREQ(def.op(), "Sum");
  EXPECT_EQ(def.name(), "Sum");
  EXPECT_EQ(std::get<ReduceAttrs>(def.attrs()).axes, std::vector<int>{1});
  EXPECT_EQ(OpFromName("MatMul"), OpKind::kMatMul);
  EXPECT_FALSE(OpFromName("NoSuchOp").has_value());
  EXPECT_EQ(OpArity(OpKind::kSelect), 3);
  EXPECT_EQ(OpArity(OpKind::kConcat), -1);
  for (int i = 0; i < kNumOps; ++i) {
    EXPECT_EQ(OpFromName(OpName(static_cast<OpKind>(i))), static_cast<OpKind>(i));
  }
}

TEST(Graph, PrinterShowsNodesTypesAndErrors) {
  Graph g;
  Tensor a = Placeholder(g, DType::kF32, {-1, 3}, "x");
  Tensor b = Exp(a) + 1.0;
  (void)b;
  std::string text = g.DebugString();
  EXPECT_THAT(text, HasSubstr("x = Placeholder() -> f32[?,3]"));
  EXPECT_THAT(text, HasSubstr("Exp = Exp(x) -> f32[?,3]"));
  EXPECT_THAT(text, HasSubstr("Add = Add(Exp, Const) -> f32[?,3]"));
}

TEST(Graph, ErrorNodesPoisonTheGraphButNotTheProcess) {
  Graph g;
  Tensor a = Placeholder(g, DType::kF32, {2, 3}, "a");
  Tensor b = Placeholder(g, DType::kF32, {4}, "b");
  Tensor bad = Add(a, b);
  Tensor after = Exp(bad);  // building on an invalid node is fine, still an error
  EXPECT_FALSE(g.status().ok());
  EXPECT_THAT(std::string(g.status().message()), HasSubstr("node 'Add' (Add)"));
  EXPECT_THAT(std::string(g.status().message()), HasSubstr("incompatible shapes"));
  EXPECT_FALSE(after.node().status().ok());
  EXPECT_FALSE(VerifyGraph(g).ok());
}

TEST(Graph, TensorFromAnotherGraphIsAnError) {
  Graph g1, g2;
  Tensor a = Placeholder(g1, DType::kF32, {2}, "a");
  Tensor b = Placeholder(g2, DType::kF32, {2}, "b");
  Tensor c = Add(a, b);
  EXPECT_EQ(c.graph(), &g1);
  EXPECT_THAT(std::string(g1.status().message()), HasSubstr("comes from another graph"));
  EXPECT_THAT(std::string(g1.status().message()), HasSubstr("'Add'"));
  EXPECT_TRUE(g2.status().ok());
}

}  // namespace
}  // namespace braze
