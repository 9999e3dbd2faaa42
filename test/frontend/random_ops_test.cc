// The random op builders (docs/RANDOM.md): attrs, default op keys from node names, the
// output types, and step/dtype errors naming the node.
#include <string>

#include "braze/ops.h"
#include "braze/random.h"
#include "gtest/gtest.h"

namespace braze {
namespace {

TEST(RandomOpsBuilders, DefaultKeysAreTheNamesFingerprints) {
  Graph g;
  Tensor x = Placeholder(g, DType::kF32, {-1, 5});
  Tensor step = Placeholder(g, DType::kI32, {});
  Tensor u = RandomUniform(x, step, 17);
  Tensor n = RandomNormal(x, step, 17);
  Tensor pinned = RandomUniform(x, step, 17, DType::kF64, 99);
  ASSERT_TRUE(g.status().ok()) << g.status();
  EXPECT_EQ(u.type(), (TensorType{DType::kF32, {-1, 5}}));
  EXPECT_EQ(pinned.type(), (TensorType{DType::kF64, {-1, 5}}));
  const RandomAttrs& a = u.node().attrs_as<RandomAttrs>();
  EXPECT_EQ(a.seed, 17u);
  EXPECT_EQ(a.op_key, RandomOpKeyOf(u.node().name()));
  EXPECT_EQ(n.node().attrs_as<RandomAttrs>().op_key, RandomOpKeyOf(n.node().name()));
  EXPECT_EQ(pinned.node().attrs_as<RandomAttrs>().op_key, 99u);
  {
    NameScope scope(g, "layer");
    Tensor scoped = RandomUniform(x, step, 17);
    EXPECT_EQ(scoped.node().name(), "layer/RandomUniform");
    EXPECT_EQ(scoped.node().attrs_as<RandomAttrs>().op_key, RandomOpKeyOf("layer/RandomUniform"));
  }
}

TEST(RandomOpsBuilders, BadStepOrDtypeIsAnErrorNamingTheNode) {
  Graph g;
  Tensor x = Placeholder(g, DType::kF32, {3});
  Tensor y = RandomNormal(x, Placeholder(g, DType::kI32, {1}), 1);
  EXPECT_NE(y.node().status().message().find("RandomNormal"), std::string::npos)
      << y.node().status();
  EXPECT_NE(y.node().status().message().find("step must be an i32 scalar"), std::string::npos);
  Graph g2;
  Tensor x2 = Placeholder(g2, DType::kF32, {3});
  Tensor z = RandomNormal(x2, ScalarConst(g2, 1, DType::kI32), 1);
  EXPECT_TRUE(z.node().status().ok());
  Tensor w = RandomUniform(x2, ScalarConst(g2, 1, DType::kI32), 1, DType::kBool);
  EXPECT_NE(w.node().status().message().find("does not support dtype bool"), std::string::npos)
      << w.node().status();
}

}  // namespace
}  // namespace braze
