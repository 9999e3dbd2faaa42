// The OpenCL device: the probe (a Status, never an abort), device names, and
// DeviceTensors on opencl:0 (POCL here: tools/setup.sh installs it) round-tripping
// through Halide's OpenCL runtime loaded in its own link-map namespace.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdio>

#include "absl/strings/match.h"
#include "absl/strings/str_join.h"
#include "braze/device.h"
#include "device/device_tensor.h"
#include "device/features.h"
#include "device/opencl_driver.h"

namespace braze {
namespace {

using ::testing::HasSubstr;

const Device kOpenCL0{Device::Kind::kOpenCL, 0};

TEST(OpenCL, DeviceNamesParseAndPrint) {
  for (const char* name : {"opencl", "opencl:0", "opencl:2", "jit:opencl", "jit:opencl:1"}) {
    auto d = ParseDevice(name);
    ASSERT_TRUE(d.ok()) << name << ": " << d.status();
    EXPECT_EQ(d->kind, Device::Kind::kOpenCL) << name;
  }
  EXPECT_EQ(ParseDevice("opencl")->ToString(), "opencl:0");
  EXPECT_EQ(ParseDevice("jit:opencl:1")->ToString(), "jit:opencl:1");
  EXPECT_FALSE(ParseDevice("opencl:-1").ok());
  EXPECT_FALSE(ParseDevice("opencl:x").ok());
  EXPECT_THAT(std::string(ParseDevice("ocl").status().message()), HasSubstr("opencl:N"));
}

TEST(OpenCL, AvailabilityIsAStatusNeverAnAbort) {
  absl::Status s = CheckOpenCLAvailable();
  // What the probe found, in the log of a run on another machine (tools/gpu-check.sh).
  const std::string found =
      s.ok() ? "devices: " + absl::StrJoin(OpenCLDevices(), "; ") : std::string(s.message());
  RecordProperty("opencl_probe", found);
  std::printf("OpenCL probe: %s\n", found.c_str());
  if (s.ok()) {
    ASSERT_FALSE(OpenCLDevices().empty());
    EXPECT_THAT(OpenCLDevices()[0], HasSubstr(": "));
  } else {
    EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
    EXPECT_THAT(std::string(s.message()), HasSubstr("OpenCL is not available"));
    EXPECT_TRUE(OpenCLDevices().empty());
  }
}

class OpenCLTensorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (absl::Status s = CheckOpenCLAvailable(); !s.ok()) GTEST_SKIP() << s.message();
  }
};

TEST_F(OpenCLTensorTest, RoundTripsEveryDTypeAndCopiesOnTheDevice) {
  for (DType dtype : {DType::kF32, DType::kF64, DType::kI32, DType::kBF16, DType::kF16}) {
    const HostTensor host = HostTensor::RandomUniform(dtype, {3, 7, 5}, 17, -4, 4);
    auto a = DeviceTensor::Allocate(host.type(), kOpenCL0);
    ASSERT_TRUE(a.ok()) << a.status();
    EXPECT_EQ((*a)->device(), kOpenCL0);
    ASSERT_TRUE((*a)->CopyFromHost(host).ok());
    auto b = DeviceTensor::Allocate(host.type(), kOpenCL0);
    ASSERT_TRUE(b.ok()) << b.status();
    ASSERT_TRUE((*b)->CopyFrom(**a).ok());
    HostTensor back;
    ASSERT_TRUE((*b)->CopyToHost(&back).ok());
    ASSERT_EQ(back.type(), host.type());
    for (int64_t i = 0; i < host.num_elements(); ++i) {
      ASSERT_EQ(back.GetDouble(i), host.GetDouble(i)) << DTypeName(dtype) << " element " << i;
    }
  }
}

// The probe reads opencl:0's extensions (whole names only), and the JIT target has
// CLHalf exactly when cl_khr_fp16 is one of them (docs/OPENCL.md, "bf16 and f16").
TEST_F(OpenCLTensorTest, TheTargetHasHalfExactlyWhenTheDeviceHasFp16) {
  EXPECT_FALSE(device::OpenCLDeviceHasExtension(""));
  EXPECT_FALSE(device::OpenCLDeviceHasExtension("cl_khr"));
  EXPECT_FALSE(device::OpenCLDeviceHasExtension("cl_khr_fp16 cl_khr_fp64"));
  auto target = device::JitTargetString(kOpenCL0);
  ASSERT_TRUE(target.ok()) << target.status();
  EXPECT_EQ(absl::StrContains(*target, "cl_half"), device::OpenCLDeviceHasExtension("cl_khr_fp16"))
      << *target;
}

TEST_F(OpenCLTensorTest, EmptyScalarAndBadRequests) {
  auto empty = DeviceTensor::Allocate(TensorType{DType::kF32, {4, 0}}, kOpenCL0);
  ASSERT_TRUE(empty.ok()) << empty.status();
  HostTensor back;
  EXPECT_TRUE((*empty)->CopyToHost(&back).ok());
  EXPECT_EQ(back.num_elements(), 0);

  auto scalar = DeviceTensor::Allocate(TensorType{DType::kF32, {}}, kOpenCL0);
  ASSERT_TRUE(scalar.ok()) << scalar.status();
  ASSERT_TRUE((*scalar)->CopyFromHost(HostTensor::Scalar<float>(2.5f)).ok());
  ASSERT_TRUE((*scalar)->CopyToHost(&back).ok());
  EXPECT_EQ(back.GetDouble(0), 2.5);

  // Wrong type in, another ordinal, the host, a partial shape: Status, not a crash.
  EXPECT_EQ((*scalar)->CopyFromHost(HostTensor::Scalar<int32_t>(1)).code(),
            absl::StatusCode::kInvalidArgument);
  auto other =
      DeviceTensor::Allocate(TensorType{DType::kF32, {2}}, Device{Device::Kind::kOpenCL, 1});
  EXPECT_EQ(other.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_THAT(std::string(other.status().message()), HasSubstr("opencl:1"));
  EXPECT_EQ(DeviceTensor::Allocate(TensorType{DType::kF32, {2}}, Device{}).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(DeviceTensor::Allocate(TensorType{DType::kF32, {-1, 2}}, kOpenCL0).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace braze
