// CheckOpenCLAvailable with a driver that crashes the process that loads it, or only the
// process that uses it (a context, a kernel's build): the probe runs in child processes
// first (device/opencl_driver.cc), so this program gets a Status naming what happened,
// and goes on; beside a driver that works, the crashing one is left out and the other
// kept. Its own binary: the probe runs once per process (test/CMakeLists.txt runs it
// once per mode of the driver, test/opencl_probe/crashing_driver.cc).
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>
#include <vector>

#include "braze/device.h"
#include "braze/logging.h"
#include "device/opencl_driver.h"

namespace braze {
namespace {

// A vendors directory holding the crashing driver's .icd (named `icd_name`) and, when
// `with_system` is set, copies of the system's own (/etc/OpenCL/vendors); OCL_ICD_VENDORS
// names it. Empty when the ICD loader itself is missing (no driver is ever loaded then).
std::filesystem::path MakeVendorsDir(const std::string& icd_name, bool with_system) {
  void* loader = dlopen("libOpenCL.so.1", RTLD_LAZY | RTLD_LOCAL);
  if (loader == nullptr) return {};
  dlclose(loader);
  const std::filesystem::path dir = std::filesystem::path(::testing::TempDir()) /
                                    ("braze_crashing_icd_" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  std::ofstream(dir / icd_name) << BRAZE_CRASHING_DRIVER_PATH << "\n";
  std::error_code ec;
  if (with_system) {
    for (const auto& entry : std::filesystem::directory_iterator("/etc/OpenCL/vendors", ec)) {
      if (entry.path().extension() == ".icd") {
        std::filesystem::copy_file(entry.path(), dir / entry.path().filename(), ec);
      }
    }
  }
  setenv("OCL_ICD_VENDORS", dir.c_str(), 1);
  return dir;
}

std::string Mode() {
  const char* mode = std::getenv("BRAZE_CRASHING_DRIVER");
  return mode != nullptr ? mode : "terminate";
}

TEST(OpenCLProbe, ADriverThatCrashesIsAStatusNotAnAbort) {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  GTEST_SKIP() << "OpenCL is not loaded in ASan/TSan builds (device/opencl_driver.cc)";
#endif
  const std::filesystem::path dir = MakeVendorsDir("crashing.icd", false);
  if (dir.empty()) GTEST_SKIP() << "no libOpenCL.so.1 (ocl-icd-libopencl1)";
  const std::string mode = Mode();
  const absl::Status s = CheckOpenCLAvailable();
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
  const std::string message(s.message());
  if (mode == "throw") {  // the exception reaches the probe, which ends its process
    EXPECT_NE(message.find("exited with status 2, saying: a driver threw std::bad_cast"),
              std::string::npos)
        << message;
  } else {  // the driver terminates the process that called it
    EXPECT_NE(message.find("was killed by signal 6"), std::string::npos) << message;
    EXPECT_NE(message.find("terminate called after throwing an instance of 'std::bad_cast'"),
              std::string::npos)
        << message;
  }
  if (mode == "context" || mode == "build") {
    // Loading and listing passed (without loading the driver here); using it did not.
    EXPECT_EQ(device::ListedOpenCLDevices(),
              std::vector<std::string>{"Braze fake driver: fake GPU (GPU)"});
    EXPECT_NE(message.find("ran a one-kernel Halide pipeline on opencl:0 was killed"),
              std::string::npos)
        << message;
  } else {
    EXPECT_TRUE(device::ListedOpenCLDevices().empty());
  }
  EXPECT_NE(message.find(dir.string()), std::string::npos) << message;
  EXPECT_TRUE(OpenCLDevices().empty());
  // Asked again: the same answer, and still no crash.
  EXPECT_EQ(CheckOpenCLAvailable(), s);
  std::filesystem::remove_all(dir);
}

// Beside the system's drivers (POCL here), the crashing one is left out with a warning
// naming it, and the others are kept and run kernels. Named to sort first, so that it
// is the first platform where the ICD loader keeps the directory's order.
TEST(OpenCLProbe, ADriverThatCrashesIsLeftOutAndTheOthersKept) {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  GTEST_SKIP() << "OpenCL is not loaded in ASan/TSan builds (device/opencl_driver.cc)";
#endif
  const std::filesystem::path dir = MakeVendorsDir("0crashing.icd", true);
  if (dir.empty()) GTEST_SKIP() << "no libOpenCL.so.1 (ocl-icd-libopencl1)";
  if (std::distance(std::filesystem::directory_iterator(dir), {}) < 2) {
    GTEST_SKIP() << "no OpenCL driver installed in /etc/OpenCL/vendors beside the crashing one";
  }
  std::vector<std::string> warnings;
  SetLogSink([&](LogSeverity severity, int, std::string_view m) {
    if (severity == LogSeverity::kWarning) warnings.emplace_back(m);
  });
  const absl::Status s = CheckOpenCLAvailable();
  SetLogSink(nullptr);
  ASSERT_TRUE(s.ok()) << s;
  ASSERT_FALSE(OpenCLDevices().empty());
  for (const std::string& d : OpenCLDevices())
    EXPECT_EQ(d.find("Braze fake"), std::string::npos) << d;
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_NE(warnings[0].find("leaving out: 0crashing.icd: "), std::string::npos) << warnings[0];
  EXPECT_NE(warnings[0].find("std::bad_cast"), std::string::npos) << warnings[0];
  // The kept drivers run this process's kernels.
  EXPECT_TRUE(device::RunOpenCLProbeKernel().ok());
  // The user's OCL_ICD_VENDORS is as it was.
  EXPECT_EQ(std::string(std::getenv("OCL_ICD_VENDORS")), dir.string());
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace braze
