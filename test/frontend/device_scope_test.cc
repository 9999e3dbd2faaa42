// DeviceScope (braze/device.h): placement as tf.device, nested and restored, a bad
// device a graph error. ParseDevice itself is tested in test/ir/device_test.cc, and
// clustering across devices in test/passes/mark_for_compilation_test.cc.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "braze/device.h"
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
    EXPECT_EQ(b.node().device()->ToString(), "cuda:0");
    {
      DeviceScope inner(g, "cpu");
      EXPECT_EQ(Exp(a).node().device()->ToString(), "cpu");
    }
    EXPECT_EQ(Exp(a).node().device()->ToString(), "cuda:0");
  }
  EXPECT_FALSE(Exp(a).node().device().has_value());
  EXPECT_TRUE(g.status().ok());
  {
    DeviceScope bad(g, "tpu:0");
    EXPECT_FALSE(Exp(a).node().device().has_value());
  }
  EXPECT_THAT(std::string(g.status().message()), HasSubstr("bad device \"tpu:0\""));
}

TEST(Device, TypedScopeRecordsTheDevice) {
  Graph g;
  Tensor a = Placeholder(g, DType::kF32, {4}, "a");
  const Device jit_cuda{Device::Kind::kCuda, 1, /*force_compile=*/true};
  {
    DeviceScope d(g, jit_cuda);
    EXPECT_TRUE(Exp(a).node().device() == jit_cuda);
    DeviceScope s(g, "jit:cuda:1");  // the string form parses to the same device
    EXPECT_TRUE(Exp(a).node().device() == jit_cuda);
  }
  EXPECT_FALSE(Exp(a).node().device().has_value());
  EXPECT_NE(g.DebugString().find("[device=jit:cuda:1]"), std::string::npos);
  EXPECT_TRUE(g.status().ok());
}

}  // namespace
}  // namespace braze
