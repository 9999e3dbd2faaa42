#include "braze/device.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "braze/jit_scope.h"
#include "braze/ops.h"
#include "passes/mark_for_compilation.h"

namespace braze {
namespace {

using ::testing::HasSubstr;

TEST(Device, ParsesCanonicalForms) {
  EXPECT_EQ(ParseDevice("cpu")->ToString(), "cpu");
  EXPECT_EQ(ParseDevice("cuda")->ToString(), "cuda:0");
  EXPECT_EQ(ParseDevice("cuda:3")->ToString(), "cuda:3");
  EXPECT_EQ(ParseDevice("jit:cpu")->ToString(), "jit:cpu");
  EXPECT_EQ(ParseDevice("jit:cuda:1")->ToString(), "jit:cuda:1");
  EXPECT_TRUE(ParseDevice("jit:cuda")->force_compile);
  for (const char* bad : {"", "gpu", "cuda:-1", "cuda:x", "cpu:1", "jit:", "cuda:0:1"}) {
    auto d = ParseDevice(bad);
    EXPECT_FALSE(d.ok()) << bad;
    if (!d.ok()) EXPECT_THAT(std::string(d.status().message()), HasSubstr("bad device"));
  }
}

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

TEST(Device, ClusteringNeverMergesDevicesAndJitDevicesAlwaysCompile) {
  Graph g;
  Tensor a = Placeholder(g, DType::kF32, {4}, "a");
  Tensor x, y, z;
  {
    DeviceScope d(g, "jit:cpu");
    x = Tanh(Exp(a));  // no JitScope, jit level off: compiled because of the device
  }
  y = Log(x);  // unplaced: the default device (cpu)
  {
    DeviceScope d(g, "cpu");
    JitScope s(g);
    z = Sqrt(y) + y;  // explicitly cpu: clusters with the unplaced Log
  }
  ClusteringOptions opts;  // kOff
  auto r = MarkForCompilation(g, opts);
  ASSERT_TRUE(r.ok()) << r.status();
  const int cx = r->ClusterOf(x.node_id());
  const int cy = r->ClusterOf(y.node_id());
  const int cz = r->ClusterOf(z.node_id());
  ASSERT_GE(cx, 0);
  EXPECT_EQ(cx, r->ClusterOf(x.node().input(0).node_id()));
  EXPECT_EQ(r->clusters[cx].device, "jit:cpu");
  ASSERT_GE(cz, 0);
  EXPECT_EQ(cy, cz);
  EXPECT_NE(cx, cz);
  EXPECT_EQ(r->clusters[cz].device, "cpu");
}

}  // namespace
}  // namespace braze
