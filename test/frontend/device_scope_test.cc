// DeviceScope (braze/device.h): placement as tf.device, nested and restored, a bad
// device a graph error. ParseDevice itself is tested in test/ir/device_test.cc, and
// clustering across devices in test/passes/mark_for_compilation_test.cc.
#include "braze/device.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "braze/ops.h"

namespace braze {
namespace {

using ::testing::HasSubstr;

TEST(Device, ScopesNestAndRestore) {
  Graph g;
  Tensor a = Placeholder(g, DType::kF32, {4}, "a");
  {
    DeviceScope outer(g, "cuda");
    Tensor b = Exp(a);
    EXPECT_EQ(b.node().device(), "cuda:0");
    {
      DeviceScope inner(g, "cpu");
      EXPECT_EQ(Exp(a).node().device(), "cpu");
    }
    EXPECT_EQ(Exp(a).node().device(), "cuda:0");
  }
  EXPECT_EQ(Exp(a).node().device(), "");
  EXPECT_TRUE(g.status().ok());
  {
    DeviceScope bad(g, "tpu:0");
    EXPECT_EQ(Exp(a).node().device(), "");
  }
  EXPECT_THAT(std::string(g.status().message()), HasSubstr("bad device \"tpu:0\""));
}

}  // namespace
}  // namespace braze
