// ParseDevice (src/ir/device.cc): the canonical forms and the bad ones.
#include "braze/device.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

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

}  // namespace
}  // namespace braze
