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
}

}  // namespace
}  // namespace braze
