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
  EXPECT_EQ(std::string(ParseDevice("gpu").status().message()),
            "bad device \"gpu\": expected cpu, cuda, cuda:N, opencl, opencl:N, or one of them "
            "after jit:");
}

// Every kind's name parses back to it: a kind given a name (src/ir/device.cc, KindName,
// which the build checks) but left out of the parser's list fails here. The kinds are
// walked by value until one has no name.
TEST(Device, EveryKindRoundTrips) {
  int kinds = 0;
  for (int k = 0; k < 64; ++k, ++kinds) {
    const Device::Kind kind = static_cast<Device::Kind>(k);
    const Device d{kind, kind == Device::Kind::kCpu ? 0 : 2, /*force_compile=*/k % 2 == 1};
    if (d.ToString().find('?') != std::string::npos) break;
    auto parsed = ParseDevice(d.ToString());
    ASSERT_TRUE(parsed.ok()) << d.ToString() << ": " << parsed.status();
    EXPECT_TRUE(*parsed == d) << d.ToString();
  }
  EXPECT_GE(kinds, 3);
}

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
  EXPECT_EQ(r->clusters[cx].device.ToString(), "jit:cpu");
  ASSERT_GE(cz, 0);
  EXPECT_EQ(cy, cz);
  EXPECT_NE(cx, cz);
  EXPECT_EQ(r->clusters[cz].device.ToString(), "cpu");
}

}  // namespace
}  // namespace braze
