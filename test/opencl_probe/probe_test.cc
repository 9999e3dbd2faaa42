// CheckOpenCLAvailable with a driver that crashes the process that loads it: the probe
// runs in a child process first (device/opencl_driver.cc), so this program gets a Status
// naming what happened, and goes on. Its own binary: the probe runs once per process,
// and it must see only the crashing driver.
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "braze/device.h"

namespace braze {
namespace {

TEST(OpenCLProbe, ADriverThatCrashesIsAStatusNotAnAbort) {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  GTEST_SKIP() << "OpenCL is not loaded in ASan/TSan builds (device/opencl_driver.cc)";
#endif
  // The ICD loader itself (ocl-icd): without it no driver is ever loaded.
  void* loader = dlopen("libOpenCL.so.1", RTLD_LAZY | RTLD_LOCAL);
  if (loader == nullptr) GTEST_SKIP() << "no libOpenCL.so.1 (ocl-icd-libopencl1): " << dlerror();
  dlclose(loader);
  const std::filesystem::path dir = std::filesystem::path(::testing::TempDir()) /
                                    ("braze_crashing_icd_" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "crashing.icd") << BRAZE_CRASHING_DRIVER_PATH << "\n";
  setenv("OCL_ICD_VENDORS", dir.c_str(), 1);

  // test/CMakeLists.txt runs this binary once per way the driver fails.
  const char* mode = std::getenv("BRAZE_CRASHING_DRIVER");
  const bool throws = mode != nullptr && std::string(mode) == "throw";
  const absl::Status s = CheckOpenCLAvailable();
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
  const std::string message(s.message());
  if (throws) {  // the exception reaches the probe, which ends its process
    EXPECT_NE(message.find("exited with status 2, saying: a driver threw std::bad_cast"),
              std::string::npos)
        << message;
  } else {  // the driver terminates the process that called it
    EXPECT_NE(message.find("was killed by signal 6"), std::string::npos) << message;
    EXPECT_NE(message.find("terminate called after throwing an instance of 'std::bad_cast'"),
              std::string::npos)
        << message;
  }
  EXPECT_NE(message.find(dir.string()), std::string::npos) << message;
  EXPECT_TRUE(OpenCLDevices().empty());
  // Asked again: the same answer, and still no crash.
  EXPECT_EQ(CheckOpenCLAvailable(), s);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace braze
