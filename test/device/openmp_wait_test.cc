// libgomp's waiting policy (device/openmp_wait.h): Braze sets OMP_WAIT_POLICY=passive
// before oneDNN loads libgomp, unless the user chose a policy or libgomp came first.
#include "device/openmp_wait.h"

#include <dlfcn.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "device/cpu_gemm.h"

namespace braze {
namespace onednn {
namespace {

using ::testing::HasSubstr;

TEST(OpenMpWaitTest, PassiveOnlyWhenNobodyChoseAndLibgompIsNotLoaded) {
  EXPECT_EQ(DecideOpenMpWait(/*libgomp_loaded=*/false, /*user_chose=*/false),
            OpenMpWait::kSetPassive);
  EXPECT_EQ(DecideOpenMpWait(false, true), OpenMpWait::kUserChose);
  EXPECT_EQ(DecideOpenMpWait(true, true), OpenMpWait::kUserChose);
  EXPECT_EQ(DecideOpenMpWait(true, false), OpenMpWait::kAlreadyLoaded);
}

TEST(OpenMpWaitTest, OnlyAnAlreadyLoadedLibgompWarns) {
  EXPECT_EQ(OpenMpWaitWarning(OpenMpWait::kSetPassive), "");
  EXPECT_EQ(OpenMpWaitWarning(OpenMpWait::kUserChose), "");
  EXPECT_THAT(OpenMpWaitWarning(OpenMpWait::kAlreadyLoaded),
              HasSubstr("Set OMP_WAIT_POLICY=passive"));
}

// This process: the decision was made before main and is in the environment that
// libgomp read when oneDNN brought it in. (ctest starts this binary without the
// variables unless the user's shell exports them; either way the check holds.)
TEST(OpenMpWaitTest, ThisProcessDecidedBeforeLibgompLoaded) {
  const OpenMpWait wait = ProcessOpenMpWait();
  if (wait == OpenMpWait::kSetPassive) {
    const char* policy = std::getenv("OMP_WAIT_POLICY");
    ASSERT_NE(policy, nullptr);
    EXPECT_STREQ(policy, "passive");
  }
  EXPECT_NE(wait, OpenMpWait::kAlreadyLoaded) << "this test binary links no OpenMP";
  if (!CpuGemmAvailable().ok()) GTEST_SKIP() << CpuGemmAvailable().message();
  // oneDNN's OpenMP build brings libgomp in with it, after the decision; libgomp's
  // omp_display_env (OpenMP 5.1) prints the policy it read.
  void* gomp = dlopen("libgomp.so.1", RTLD_LAZY | RTLD_NOLOAD);
  if (gomp == nullptr) GTEST_SKIP() << "this oneDNN does not thread with libgomp";
  auto display_env = reinterpret_cast<void (*)(int)>(dlsym(gomp, "omp_display_env"));
  dlclose(gomp);
  if (display_env == nullptr) GTEST_SKIP() << "libgomp has no omp_display_env";
  ::testing::internal::CaptureStderr();
  display_env(0);
  const std::string shown = ::testing::internal::GetCapturedStderr();
  if (wait == OpenMpWait::kSetPassive) EXPECT_THAT(shown, HasSubstr("OMP_WAIT_POLICY = 'PASSIVE'"));
}

}  // namespace
}  // namespace onednn
}  // namespace braze
