// CheckOpenCLAvailable with a driver that crashes the process that loads it, or only the
// process that uses it (a context, a kernel's build): the probe runs in processes of its
// own first (braze-opencl-probe, device/opencl_probe.h), so this program gets a Status
// naming what happened, and goes on; beside a driver that works, the crashing one is left
// out and the other kept; a lock another thread holds does not hang the probe; without
// the probe executable, OpenCL is unavailable with a Status saying where it was looked
// for. Its own binary: the probe runs once per process (test/CMakeLists.txt runs it once
// per mode of the driver, test/opencl_probe/crashing_driver.cc).
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "braze/device.h"
#include "braze/logging.h"
#include "device/opencl_driver.h"
#include "device/opencl_probe.h"

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

// A thread of this program holds a lock of a library that the probe uses too (the fake
// driver's, in its "lock" mode, loaded here as well: as LLVM's or Halide's lock is held
// while another thread compiles) for as long as the probe runs. A child forked from this
// process inherited that lock held, with no thread to release it, and hung until the
// probe's 60 s limit ("did not finish in 60 s": OpenCL unavailable, nothing listed); a
// spawned probe starts with no lock held: it lists the driver's GPU, and the kernel stage
// ends the way this driver's builds end.
TEST(OpenCLProbe, ALockHeldByAnotherThreadDoesNotHangTheProbe) {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  GTEST_SKIP() << "OpenCL is not loaded in ASan/TSan builds (device/opencl_driver.cc)";
#endif
  ASSERT_EQ(Mode(), "lock") << "test/CMakeLists.txt runs this case with that mode";
  const std::filesystem::path dir = MakeVendorsDir("locking.icd", false);
  if (dir.empty()) GTEST_SKIP() << "no libOpenCL.so.1 (ocl-icd-libopencl1)";
  void* driver = dlopen(BRAZE_CRASHING_DRIVER_PATH, RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(driver, nullptr) << dlerror();
  auto lock = reinterpret_cast<void (*)()>(dlsym(driver, "BrazeFakeDriverLock"));
  auto unlock = reinterpret_cast<void (*)()>(dlsym(driver, "BrazeFakeDriverUnlock"));
  ASSERT_TRUE(lock != nullptr && unlock != nullptr);
  int locked[2], release[2];
  ASSERT_EQ(pipe(locked), 0);
  ASSERT_EQ(pipe(release), 0);
  std::thread holder([&] {
    lock();
    char byte = 1;
    EXPECT_EQ(write(locked[1], &byte, 1), 1);
    EXPECT_EQ(read(release[0], &byte, 1), 1);  // until both probes have answered
    unlock();
  });
  char byte = 0;
  ASSERT_EQ(read(locked[0], &byte, 1), 1);
  const std::vector<std::string> listed = device::ListedOpenCLDevices();
  const absl::Status s = CheckOpenCLAvailable();
  EXPECT_EQ(write(release[1], &byte, 1), 1);
  holder.join();
  for (int fd : {locked[0], locked[1], release[0], release[1]}) close(fd);
  EXPECT_EQ(listed, std::vector<std::string>{"Braze fake driver: fake GPU (GPU)"});
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
  const std::string message(s.message());
  EXPECT_EQ(message.find("did not finish"), std::string::npos) << message;
  EXPECT_NE(message.find("ran a one-kernel Halide pipeline on opencl:0 exited with status 3"),
            std::string::npos)
      << message;
  std::filesystem::remove_all(dir);
}

// Without the probe executable (BRAZE_OPENCL_PROBE names a file that does not exist, as
// test/CMakeLists.txt sets it for this case), OpenCL is unavailable with a Status naming
// the variable, and one warning says so, since drivers are installed (POCL here, or the
// crashing one, which would end this program if it were loaded here instead).
TEST(OpenCLProbe, WithoutTheProbeExecutableNoDriverIsLoaded) {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  GTEST_SKIP() << "OpenCL is not loaded in ASan/TSan builds (device/opencl_driver.cc)";
#endif
  const char* probe = std::getenv("BRAZE_OPENCL_PROBE");
  ASSERT_NE(probe, nullptr) << "test/CMakeLists.txt sets BRAZE_OPENCL_PROBE for this case";
  const std::filesystem::path dir = MakeVendorsDir("crashing.icd", true);
  if (dir.empty()) GTEST_SKIP() << "no libOpenCL.so.1 (ocl-icd-libopencl1)";
  std::vector<std::string> warnings;
  SetLogSink([&](LogSeverity severity, int, std::string_view m) {
    if (severity == LogSeverity::kWarning) warnings.emplace_back(m);
  });
  const absl::Status s = CheckOpenCLAvailable();
  SetLogSink(nullptr);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
  const std::string message(s.message());
  EXPECT_NE(message.find(std::string("BRAZE_OPENCL_PROBE=") + probe + " is not an executable file"),
            std::string::npos)
      << message;
  EXPECT_EQ(message.find("would end this program"), std::string::npos) << message;
  EXPECT_TRUE(device::ListedOpenCLDevices().empty());
  EXPECT_TRUE(OpenCLDevices().empty());
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_EQ(warnings[0], message);
  std::filesystem::remove_all(dir);
}

// BRAZE_OPENCL_PROBE set to `path` for the life of this object, then restored.
class ProbeOverride {
 public:
  explicit ProbeOverride(const std::string& path) {
    const char* set = std::getenv("BRAZE_OPENCL_PROBE");
    had_ = set != nullptr;
    if (had_) saved_ = set;
    if (path.empty()) {
      unsetenv("BRAZE_OPENCL_PROBE");
    } else {
      setenv("BRAZE_OPENCL_PROBE", path.c_str(), 1);
    }
  }
  ~ProbeOverride() {
    if (had_) {
      setenv("BRAZE_OPENCL_PROBE", saved_.c_str(), 1);
    } else {
      unsetenv("BRAZE_OPENCL_PROBE");
    }
  }

 private:
  bool had_ = false;
  std::string saved_;
};

// A shell script standing in for a probe, `body` after "#!/bin/sh"; its path.
std::string FakeProbe(const std::string& name, const std::string& body) {
  const std::filesystem::path path =
      std::filesystem::path(::testing::TempDir()) / (name + "_" + std::to_string(getpid()) + ".sh");
  std::ofstream(path) << "#!/bin/sh\n" << body;
  std::filesystem::permissions(path, std::filesystem::perms::owner_all);
  return path.string();
}

// The exit status of the build tree's probe run with `args` (stderr discarded).
int ProbeExitStatus(const std::string& probe, const std::string& args) {
  const int rc = std::system((probe + " " + args + " 2>/dev/null").c_str());
  return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

// The probe found in this build tree lists the drivers. A probe of another build is
// refused even when it speaks this protocol: this build's probe refuses another build ID
// (exit 64), and a probe that answers this protocol with another build's ID in its header
// line (here a script), or no header at all (/bin/true), is refused as such, not read as
// a listing.
TEST(OpenCLProbe, TheProbeOfAnotherBuildIsRefused) {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  GTEST_SKIP() << "OpenCL is not loaded in ASan/TSan builds (device/opencl_driver.cc)";
#endif
  std::string listing;
  std::string probe;
  {
    ProbeOverride none("");
    const absl::StatusOr<std::string> found = device::OpenCLProbeExecutable();
    ASSERT_TRUE(found.ok()) << found.status();
    probe = *found;
    EXPECT_NE(probe.find(device::kOpenCLProbeName), std::string::npos) << probe;
    const absl::Status ours = device::RunOpenCLProbe("/nonexistent-vendors", false, &listing);
    EXPECT_TRUE(ours.ok()) << ours;
    // No drivers there: the listing carries the loader's own Status.
    EXPECT_NE(listing.find("no OpenCL platform with a device"), std::string::npos) << listing;
  }
  const std::string protocol = "--protocol=" + std::to_string(device::kOpenCLProbeProtocol);
  const std::string build = std::string("--build=") + device::OpenCLProbeBuildId();
  EXPECT_EQ(ProbeExitStatus(probe, protocol + " --build=not-this-build 3>/dev/null"), 64);
  EXPECT_EQ(ProbeExitStatus(probe, protocol + " 3>/dev/null"), 64);
  EXPECT_EQ(ProbeExitStatus(probe, "--protocol=999 " + build + " 3>/dev/null"), 64);
  EXPECT_EQ(ProbeExitStatus(probe, "--protocol=2x " + build + " 3>/dev/null"), 64);
  EXPECT_EQ(ProbeExitStatus(probe, "--protocol= " + build + " 3>/dev/null"), 64);

  const std::string other_build =
      FakeProbe("other_build", "printf '%s\\n' '" + std::string(device::kOpenCLProbeName) + " " +
                                   std::to_string(device::kOpenCLProbeProtocol) +
                                   " not-this-build' >&3\nprintf 'OK\\n' >&3\n");
  {
    ProbeOverride fake(other_build);
    const absl::Status s = device::RunOpenCLProbe("/nonexistent-vendors", false, &listing);
    EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable) << s;
    EXPECT_NE(s.message().find("exited without this build's header line"), std::string::npos) << s;
    EXPECT_NE(s.message().find("not-this-build"), std::string::npos) << s;
    EXPECT_NE(s.message().find(device::OpenCLProbeBuildId()), std::string::npos) << s;
  }
  const std::string refusing = FakeProbe("refusing", "echo 'build mismatch' >&2\nexit 64\n");
  {
    ProbeOverride fake(refusing);
    const absl::Status s = device::RunOpenCLProbe("/nonexistent-vendors", false, &listing);
    EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable) << s;
    EXPECT_NE(s.message().find("refused its arguments"), std::string::npos) << s;
    EXPECT_NE(s.message().find("build mismatch"), std::string::npos) << s;
  }
  {
    ProbeOverride fake("/bin/true");
    const absl::Status s = device::RunOpenCLProbe("/nonexistent-vendors", false, &listing);
    EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable) << s;
    EXPECT_NE(s.message().find("/bin/true exited without this build's header line"),
              std::string::npos)
        << s;
  }
  std::filesystem::remove(other_build);
  std::filesystem::remove(refusing);
}

// The SigIgn mask of /proc/<pid>/status (the signals that process ignores).
uint64_t IgnoredSignals(const std::string& status) {
  const size_t at = status.find("SigIgn:");
  if (at == std::string::npos) return ~uint64_t{0};
  return std::strtoull(status.c_str() + at + 7, nullptr, 16);
}

// The probe starts with the default action for the signals this program ignores (an
// ignored signal would stay ignored across exec), and in a process group of its own
// (which RunOpenCLProbe kills at its time limit): a script answering as this build's
// probe reports its own SigIgn mask and process group.
TEST(OpenCLProbe, TheProbeStartsWithDefaultSignalsInItsOwnGroup) {
  const std::string header = device::OpenCLProbeHeader();
  const std::string reporter =
      FakeProbe("reporter", "printf '%s' '" + header + "' >&3\n" +
                                "grep '^SigIgn:' /proc/$$/status >&3\n"
                                "echo \"pid $$ pgid $(cut -d' ' -f5 /proc/$$/stat)\" >&3\n");
  const int ignored[] = {SIGPIPE, SIGINT, SIGTERM, SIGHUP};
  struct sigaction ignore = {}, saved[4];
  ignore.sa_handler = SIG_IGN;
  for (int i = 0; i < 4; ++i) sigaction(ignored[i], &ignore, &saved[i]);
  std::ifstream self("/proc/self/status");
  const std::string self_status((std::istreambuf_iterator<char>(self)), {});
  std::string listing;
  absl::Status s;
  {
    ProbeOverride fake(reporter);
    s = device::RunOpenCLProbe("/nonexistent-vendors", false, &listing);
  }
  for (int i = 0; i < 4; ++i) sigaction(ignored[i], &saved[i], nullptr);
  std::filesystem::remove(reporter);
  ASSERT_TRUE(s.ok()) << s;
  const uint64_t mask = IgnoredSignals(listing);
  for (int sig : ignored) {
    EXPECT_NE(IgnoredSignals(self_status) & (uint64_t{1} << (sig - 1)), 0u) << sig;
    EXPECT_EQ(mask & (uint64_t{1} << (sig - 1)), 0u) << "signal " << sig << ": " << listing;
  }
  int pid = 0, pgid = 0;
  const size_t at = listing.find("pid ");
  ASSERT_NE(at, std::string::npos) << listing;
  ASSERT_EQ(std::sscanf(listing.c_str() + at, "pid %d pgid %d", &pid, &pgid), 2) << listing;
  EXPECT_EQ(pid, pgid) << listing;
  EXPECT_NE(pgid, getpgrp()) << listing;
}

}  // namespace
}  // namespace braze
