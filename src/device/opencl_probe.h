// The OpenCL probe as a process of its own: braze-opencl-probe (src/device/opencl_probe/
// main.cc), started with posix_spawn, loads the drivers, lists their devices and (for a
// GPU) runs a one-kernel Halide pipeline, before this process loads any driver
// (device/opencl_driver.h says why: a driver that throws or aborts ends the probe, not
// the program).
//
// Why a spawned executable and not a forked copy of this process: fork copies every lock
// another thread holds at that moment (the C library's stdio locks, LLVM's and Halide's
// JIT locks, a driver's own) without the thread that would release it, so a forked child
// that needed one hung until its time limit and OpenCL was reported unavailable. A
// spawned process starts from its own image, with no lock held.
//
// Where the executable is looked for, in order (OpenCLProbeExecutable):
//   1. $BRAZE_OPENCL_PROBE, when set: that file only (a relocated install, a bundle);
//   2. the one built with this library (its build tree's path);
//   3. beside the running program (a program shipped with the probe next to it, as
//      tools/gpu-bundle.sh packs the test binaries);
//   4. the installed one, <prefix>/libexec/braze/braze-opencl-probe (cmake/install.cmake).
// When none exists, OpenCL is unavailable with a Status naming every place looked at
// and the variable to set; no driver is loaded into this process then (and a warning
// says so where drivers are installed: TheListing in opencl_driver.cc).
#ifndef BRAZE_DEVICE_OPENCL_PROBE_H_
#define BRAZE_DEVICE_OPENCL_PROBE_H_

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace braze {
namespace device {

// What the probe and this library say to each other, and which probe may answer:
// RunOpenCLProbe passes both the protocol (the arguments, the listing's format) and this
// build's ID, a random string CMake draws once per build directory (BRAZE_PROBE_BUILD_ID
// in its cache, compiled into opencl_probe.cc alone); the probe refuses (exit 64) a
// protocol or an ID other than its own, and starts its listing with the header line
// OpenCLProbeHeader(), which RunOpenCLProbe checks in turn. So a probe of another build
// directory, or another version, of Braze is refused, not misread, even when it speaks
// the same protocol. Two builds from one build directory (a rebuild after a change) share
// an ID: the probe then comes from the same tree as the library, which every target that
// links braze_device rebuilds it with.
inline constexpr int kOpenCLProbeProtocol = 2;
inline constexpr char kOpenCLProbeName[] = "braze-opencl-probe";
const char* OpenCLProbeBuildId();
// "braze-opencl-probe <protocol> <build ID>\n".
std::string OpenCLProbeHeader();

// The probe executable's path (see above), or kUnavailable naming where it was looked for.
absl::StatusOr<std::string> OpenCLProbeExecutable();

// Runs the probe with the ICD loader reading its drivers from `vendors_dir`
// (OCL_ICD_VENDORS), listing and, with `run_kernel`, running the kernel stage
// (OpenCLProbeMain). OK when it passed, with its listing (opencl_driver.cc's
// SerializeListing) in `*listing`. kUnavailable when the probe could not be run at all
// (not found, not started, another build's, its status reaped elsewhere): no driver was
// judged. Else FailedPrecondition saying how it ended (a signal, an exit status, its time
// limit, or that it did not exit within 5 s of SIGKILL: a driver stuck in the kernel,
// left as a zombie rather than hanging the caller) with the first and last lines it wrote
// to stderr. The probe runs in a process group of its own, which is killed at the time
// limit (with the processes a driver started), with the default action for the signals
// a program commonly ignores or handles (SIGCHLD, SIGPIPE, SIGINT, SIGTERM, SIGHUP) and
// no signal blocked. Its environment is this process's, copied under the lock of
// ir/environment.h (a setenv by code outside Braze on another thread meanwhile is not
// covered: see there), with OCL_ICD_VENDORS set and OCL_ICD_FILENAMES removed.
absl::Status RunOpenCLProbe(const std::string& vendors_dir, bool run_kernel, std::string* listing);

// What braze-opencl-probe does (defined in opencl_driver.cc, beside the Loader it fills):
//   braze-opencl-probe --protocol=N --build=ID [--kernel]   as RunOpenCLProbe starts it:
//       the listing goes to file descriptor 3, after OpenCLProbeHeader()'s line;
//   braze-opencl-probe [--kernel]                           by hand: the listing on stdout.
// Exits 0 when the drivers were listed (the listing carries their own Status) and the
// kernel stage, if asked and opencl:0 is not a CPU device, passed; 3 when the kernel
// failed with a Status (on stderr); 2 when an exception reached it; 64 on bad arguments
// (an unknown one, a protocol that is not a positive number) or another protocol or
// build ID. In every case through _exit after flushing stdio: the drivers' atexit
// handlers and destructors do not run.
int OpenCLProbeMain(int argc, char** argv);

}  // namespace device
}  // namespace braze

#endif  // BRAZE_DEVICE_OPENCL_PROBE_H_
