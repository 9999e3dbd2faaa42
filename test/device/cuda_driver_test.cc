// The CUDA driver probe: a Status on machines without a driver, never an abort.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "braze/device.h"

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

}  // namespace
}  // namespace braze
