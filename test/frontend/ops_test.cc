// The op builders' operators (braze/ops.h): which op each builds, and a scalar operand
// as a Const of the tensor's dtype.
#include "braze/ops.h"

#include <gtest/gtest.h>

namespace braze {
namespace {

TEST(Ops, OperatorsBuildTheRightOps) {
  Graph g;
  Tensor a = Placeholder(g, DType::kF32, {2}, "a");
  Tensor b = Placeholder(g, DType::kF32, {2}, "b");
  EXPECT_EQ((a + b).node().op(), OpKind::kAdd);
  EXPECT_EQ((a - b).node().op(), OpKind::kSub);
  EXPECT_EQ((a * b).node().op(), OpKind::kMul);
  EXPECT_EQ((a / b).node().op(), OpKind::kDiv);
  EXPECT_EQ((-a).node().op(), OpKind::kNeg);
  Tensor c = 2.0 * a;
  EXPECT_EQ(c.node().input(0).node().op(), OpKind::kConst);
  EXPECT_EQ(c.node().input(0).dtype(), DType::kF32);
}

}  // namespace
}  // namespace braze
