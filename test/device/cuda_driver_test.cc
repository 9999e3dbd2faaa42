// The CUDA driver probe: a Status on machines without a driver, never an abort.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "braze/device.h"
#include "device/halide_util.h"

namespace braze {
namespace {

using ::testing::HasSubstr;

TEST(Device, CudaAvailabilityIsAStatusNeverAnAbort) {
  absl::Status s = CheckCudaAvailable();
  if (s.ok()) {
    EXPECT_GT(CudaDeviceCount(), 0);
  } else {
    EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
    EXPECT_THAT(std::string(s.message()), HasSubstr("CUDA is not available"));
    EXPECT_EQ(CudaDeviceCount(), 0);
  }
}

// A kernel's fault is sticky: the Status of that error and of every later CUDA call says
// the context is lost (a Halide run-time error, a copy), and other errors do not.
TEST(Device, AStickyCudaErrorSaysTheContextIsLost) {
  const std::string fault =
      "copy to the device failed (Halide error -15): CUDA: "
      "cuMemcpyHtoD failed: CUDA_ERROR_LAUNCH_FAILED";
  EXPECT_TRUE(device::NamesLostCudaContext(fault));
  const std::string noted = device::NoteLostCudaContext(fault);
  EXPECT_THAT(noted, HasSubstr("the CUDA context is lost"));
  EXPECT_EQ(device::NoteLostCudaContext(noted), noted);  // said once
  absl::Status s = device::CatchHalideErrors(
      "k: Halide run-time error", absl::StatusCode::kInvalidArgument, []() -> absl::Status {
        throw Halide::RuntimeError(
            "CUDA: cuLaunchKernel failed: "
            "CUDA_ERROR_ILLEGAL_ADDRESS");
      });
  EXPECT_THAT(std::string(s.message()), HasSubstr("the CUDA context is lost"));
  const std::string launch = "CUDA: cuLaunchKernel failed: CUDA_ERROR_INVALID_VALUE";
  EXPECT_FALSE(device::NamesLostCudaContext(launch));
  EXPECT_EQ(device::NoteLostCudaContext(launch), launch);
}

}  // namespace
}  // namespace braze
