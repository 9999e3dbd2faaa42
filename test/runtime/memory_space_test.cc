// Values stay in the memory space of the device that computed them; copies happen only
// at feeds, fetches, reference/HostCall ops and edges between devices, and are counted.
// Each test runs on jit:cpu (a device of its own, as XLA_CPU) and on jit:opencl:0 (POCL
// here, a GPU's code path: DeviceTensors, device kernels); the same executor paths carry
// CUDA values (test/e2e/cuda_test.cc).
#include <gtest/gtest.h>

#include "braze/braze.h"
#include "common/reference_check.h"
#include "common/softmax_training.h"

namespace braze {
namespace {

constexpr int64_t kF32 = 4;
using testing_util::ExpectMatchesReference;

class MemorySpaces : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    if (GetParam().find("opencl") != std::string::npos) {
      if (absl::Status s = CheckOpenCLAvailable(); !s.ok()) GTEST_SKIP() << s.message();
    }
  }
  const std::string& device() const { return GetParam(); }
  // Ops outside the DeviceScope run on the host, as these tests count. The default
  // device, "auto", is cuda:0 where a CUDA device is present (or opencl:0 where
  // OpenCL's first device is a GPU): on an H200 that put those ops on cuda:0, so the
  // jit:cpu test counted 2 copies each way, not 1, and the jit:opencl ones needed
  // cuda:0 <-> opencl:0 copies, which are not supported (Unimplemented).
  static SessionOptions OnHost() {
    SessionOptions o;
    o.device = "cpu";
    return o;
  }
};

TEST_P(MemorySpaces, FeedAndFetchAreTheOnlyCopiesOfADeviceChain) {
  Graph g;
  Tensor x = Placeholder(g, DType::kF32, {7, 5}, "x");
  Tensor y;
  {
    DeviceScope on(g, device());
    y = Tanh(Exp(x) * 0.5 + 1.0) - x;
  }
  Session s(g, OnHost());
  Feeds feeds = {{x, HostTensor::RandomUniform(DType::kF32, {7, 5}, 1)}};
  for (int run = 1; run <= 3; ++run) {
    auto out = s.Run(feeds, {y});
    ASSERT_TRUE(out.ok()) << out.status();
    ExpectMatchesReference(g, feeds, {y}, *out);
    EXPECT_EQ(s.stats().host_to_device_copies, run);
    EXPECT_EQ(s.stats().device_to_host_copies, run);
    EXPECT_EQ(s.stats().copied_bytes, run * 2 * 7 * 5 * kF32);
  }
  EXPECT_EQ(s.stats().cluster_launches, 3);
}

TEST_P(MemorySpaces, CrossDeviceEdgesCopyOncePerValue) {
  Graph g;
  Tensor x = Placeholder(g, DType::kF32, {4, 3}, "x");
  Tensor a = Exp(x);  // host
  Tensor b;
  {
    DeviceScope on(g, device());
    b = a * 2.0 + a;  // reads `a` twice: one copy onto the device
  }
  Tensor c = Sqrt(b) + b;  // host, reads `b` twice: one copy off it
  Session s(g, OnHost());
  Feeds feeds = {{x, HostTensor::RandomUniform(DType::kF32, {4, 3}, 2)}};
  auto out = s.Run(feeds, {c});
  ASSERT_TRUE(out.ok()) << out.status();
  ExpectMatchesReference(g, feeds, {c}, *out);
  EXPECT_EQ(s.stats().host_to_device_copies, 1);
  EXPECT_EQ(s.stats().device_to_host_copies, 1);
}

TEST_P(MemorySpaces, HostCallBetweenDeviceOpsCopiesOffAndOn) {
  Graph g;
  Tensor x = Placeholder(g, DType::kF32, {6}, "x");
  Tensor y;
  {
    DeviceScope on(g, device());
    Tensor a = Exp(x);
    auto h =
        HostCall(g, "on_host", {a}, {{DType::kF32, {6}}},
                 [](absl::Span<const HostTensor> in) -> absl::StatusOr<std::vector<HostTensor>> {
                   return std::vector<HostTensor>{in[0]};
                 });
    y = Log(h[0]) * 3.0;
  }
  Session s(g, OnHost());
  Feeds feeds = {{x, HostTensor::RandomUniform(DType::kF32, {6}, 3)}};
  auto out = s.Run(feeds, {y});
  ASSERT_TRUE(out.ok()) << out.status();
  ExpectMatchesReference(g, feeds, {y}, *out);
  // x onto the device; a off for the HostCall; its result on again; y off.
  EXPECT_EQ(s.stats().host_to_device_copies, 2);
  EXPECT_EQ(s.stats().device_to_host_copies, 2);
  EXPECT_EQ(s.stats().reference_launches, 1);
}

TEST_P(MemorySpaces, ConstantsAreCopiedOntoTheDeviceOnce) {
  Graph g;
  Tensor x = Placeholder(g, DType::kF32, {3, 4}, "x");
  Tensor w = Const(g, HostTensor::RandomUniform(DType::kF32, {3, 4}, 4), "w");
  Tensor y;
  {
    DeviceScope on(g, device());
    y = x * w + w;
  }
  Session s(g, OnHost());
  Feeds feeds = {{x, HostTensor::RandomUniform(DType::kF32, {3, 4}, 5)}};
  for (int run = 0; run < 4; ++run) ASSERT_TRUE(s.Run(feeds, {y}).ok());
  // Four feeds, one constant; four fetches.
  EXPECT_EQ(s.stats().host_to_device_copies, 5);
  EXPECT_EQ(s.stats().device_to_host_copies, 4);
}

using testing_util::Trained;
using testing_util::TrainSoftmax;

TEST_P(MemorySpaces, VariablesStayOnTheDeviceAcrossTrainingSteps) {
  const int kSteps = 6;
  Trained host = TrainSoftmax("cpu", kSteps);
  Trained dev = TrainSoftmax(device(), kSteps);
  ASSERT_EQ(dev.losses.size(), static_cast<size_t>(kSteps));
  for (int i = 0; i < kSteps; ++i) EXPECT_NEAR(dev.losses[i], host.losses[i], 1e-5) << i;
  EXPECT_LT(dev.losses.back(), dev.losses.front());
  std::string why;
  EXPECT_TRUE(AllClose(dev.w, host.w, 1e-5, 1e-5, &why)) << why;
  // Per step: two feeds on, the loss off. Once: each variable on (w, b) and w off for
  // VariableValue. Constants (learning rate, ...) once each at most.
  EXPECT_EQ(dev.stats.device_to_host_copies, kSteps + 1);
  EXPECT_GE(dev.stats.host_to_device_copies, 2 * kSteps + 2);
  EXPECT_LE(dev.stats.host_to_device_copies, 2 * kSteps + 2 + 10);
  EXPECT_EQ(host.stats.host_to_device_copies, 0);
  EXPECT_EQ(host.stats.device_to_host_copies, 0);
}

TEST_P(MemorySpaces, VariableAssignedOnHostIsReadFreshOnTheDevice) {
  Graph g;
  Tensor v = Variable(g, HostTensor::From<float>({1, 2, 3}, {3}), "v");
  Tensor bump = Assign(v, v + 1.0);  // on the host
  Tensor read;
  {
    DeviceScope on(g, device());
    read = v * 10.0;
  }
  Session s(g, OnHost());
  for (int i = 0; i < 3; ++i) {
    auto out = s.Run({}, {read});
    ASSERT_TRUE(out.ok()) << out.status();
    EXPECT_FLOAT_EQ((*out)[0].GetDouble(0), 10.0 * (1 + i));
    ASSERT_TRUE(s.Run({}, {}, {bump}).ok());
  }
  auto final_v = s.VariableValue(v);
  ASSERT_TRUE(final_v.ok());
  EXPECT_FLOAT_EQ(final_v->GetDouble(2), 6.0);
}

TEST_P(MemorySpaces, AssignChecksTheValueTypeAgainstTheVariable) {
  Graph g;
  Tensor v = Variable(g, DType::kF32, {3}, "v");
  Tensor p = Placeholder(g, DType::kF32, {-1}, "p");
  Tensor set = Assign(v, p, "set_v");
  Session s(g, OnHost());
  auto bad = s.Run({{p, HostTensor::Filled(DType::kF32, {4}, 1)}}, {}, {set});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("set_v"), std::string::npos) << bad.status();
  ASSERT_TRUE(s.Run({{p, HostTensor::Filled(DType::kF32, {3}, 2)}}, {}, {set}).ok());
  auto value = s.VariableValue(v);
  ASSERT_TRUE(value.ok());
  EXPECT_EQ(value->GetDouble(1), 2.0);
}

INSTANTIATE_TEST_SUITE_P(Devices, MemorySpaces, ::testing::Values("jit:cpu", "jit:opencl"),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           return info.param == "jit:cpu" ? std::string("JitCpu")
                                                          : std::string("OpenCL");
                         });

// Halide's OpenCL runtime drives one device: opencl:1 is refused, naming the node.
TEST(MemorySpacesOpenCL, OnlyTheFirstDevice) {
  if (absl::Status s = CheckOpenCLAvailable(); !s.ok()) GTEST_SKIP() << s.message();
  Graph g;
  Tensor x = Placeholder(g, DType::kF32, {3}, "x");
  Tensor y;
  {
    DeviceScope on(g, "opencl:1");
    y = Exp(x);
  }
  Session s(g);
  auto out = s.Run({{x, HostTensor::From<float>({1, 2, 3}, {3})}}, {y});
  ASSERT_FALSE(out.ok());
  EXPECT_NE(out.status().message().find("node 'Exp' is placed on opencl:1"), std::string::npos)
      << out.status();
}

}  // namespace
}  // namespace braze
