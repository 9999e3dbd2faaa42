// Finding and running the OpenCL probe executable; see opencl_probe.h.
#include "device/opencl_probe.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "ir/environment.h"

#ifndef BRAZE_PROBE_BUILD_ID
#error "BRAZE_PROBE_BUILD_ID is set by CMakeLists.txt (a random ID drawn once per build dir)"
#endif

namespace braze {
namespace device {
namespace {

// How long a probe may take: loading POCL (and its LLVM), compiling the probe's pipeline
// and building its kernel take a few seconds on a loaded machine. A driver that hangs is
// killed at this limit, and OpenCL reported unavailable with that reason.
constexpr int kProbeSeconds = 60;
// How long a killed probe may take to be reaped: one stuck in an uninterruptible call
// into a driver's kernel module (state D) ends only when that call returns, which may be
// never; the caller (a static initializer, with every thread that asks for a device
// waiting on it) is not held hostage to it.
constexpr int kReapAfterKillSeconds = 5;

bool IsExecutableFile(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) && access(path.c_str(), X_OK) == 0;
}

// The folder of the running program, from /proc/self/exe; empty when unknown.
std::string ProgramDir() {
  char buffer[PATH_MAX];
  const ssize_t n = readlink("/proc/self/exe", buffer, sizeof(buffer) - 1);
  if (n <= 0) return "";
  const std::string path(buffer, static_cast<size_t>(n));
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? "" : path.substr(0, slash);
}

// Appends what can be read from the non-blocking `fd` now to `out`, up to 64 KiB.
void Drain(int fd, std::string* out) {
  char buffer[4096];
  for (;;) {
    const ssize_t got = read(fd, buffer, sizeof(buffer));
    if (got > 0) {
      if (out->size() < (64u << 10)) out->append(buffer, static_cast<size_t>(got));
      continue;
    }
    if (got < 0 && errno == EINTR) continue;
    return;  // EAGAIN (nothing now) or end of file
  }
}

// The first and the last non-empty lines of what the probe wrote, as one clause.
std::string FirstAndLastLines(const std::string& text) {
  std::vector<std::string> lines;
  for (size_t at = 0; at < text.size();) {
    size_t end = text.find('\n', at);
    if (end == std::string::npos) end = text.size();
    if (end > at) lines.push_back(text.substr(at, end - at));
    at = end + 1;
  }
  if (lines.empty()) return "";
  if (lines.size() == 1) return lines[0];
  return absl::StrCat(lines.front(), " ... ", lines.back());
}

// This process's environment (copied under ir/environment.h's lock) with
// OCL_ICD_VENDORS set to `vendors_dir` and the Khronos loader's list of more drivers
// (OCL_ICD_FILENAMES) removed.
std::vector<std::string> ProbeEnvironment(const std::string& vendors_dir) {
  std::vector<std::string> env;
  for (std::string& e : CopyEnvironment()) {
    if (absl::StartsWith(e, "OCL_ICD_VENDORS=") || absl::StartsWith(e, "OCL_ICD_FILENAMES=")) {
      continue;
    }
    env.push_back(std::move(e));
  }
  env.push_back("OCL_ICD_VENDORS=" + vendors_dir);
  return env;
}

std::vector<char*> Pointers(std::vector<std::string>& strings) {
  std::vector<char*> out;
  for (std::string& s : strings) out.push_back(s.data());
  out.push_back(nullptr);
  return out;
}

// The pipes the probe writes to: its stderr and its listing (file descriptor 3 there).
// Each end this process keeps is non-blocking; each end the probe gets is duplicated to
// a number of 10 or more, so that posix_spawn's dup2 to 2 or 3 always makes a new
// descriptor (a dup2 onto itself would keep close-on-exec).
struct ProbePipes {
  int err_read = -1, err_write = -1, data_read = -1, data_write = -1;
  ~ProbePipes() {
    for (int fd : {err_read, err_write, data_read, data_write}) {
      if (fd >= 0) close(fd);
    }
  }
  bool Open() {
    int err[2], data[2];
    if (pipe2(err, O_CLOEXEC) != 0) return false;
    err_read = err[0];
    err_write = Above10(err[1]);
    if (pipe2(data, O_CLOEXEC) != 0) return false;
    data_read = data[0];
    data_write = Above10(data[1]);
    fcntl(err_read, F_SETFL, O_NONBLOCK);
    fcntl(data_read, F_SETFL, O_NONBLOCK);
    return err_write >= 0 && data_write >= 0;
  }
  void CloseWriteEnds() {
    close(err_write);
    close(data_write);
    err_write = data_write = -1;
  }
  static int Above10(int fd) {
    const int high = fcntl(fd, F_DUPFD_CLOEXEC, 10);
    close(fd);
    return high;
  }
};

// Starts `exe` with `args` and `env`, its stdin and stdout /dev/null, its stderr and
// file descriptor 3 the pipes'. Returns posix_spawn's error number (0 when started).
int Spawn(const std::string& exe, std::vector<std::string> args, std::vector<std::string> env,
          const ProbePipes& pipes, pid_t* pid) {
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_adddup2(&actions, pipes.err_write, 2);
  posix_spawn_file_actions_adddup2(&actions, pipes.data_write, 3);
  // Nothing else of this process's: a pipe a user's program waits on would otherwise
  // stay open as long as the probe (or a process its driver started) lives.
  posix_spawn_file_actions_addclosefrom_np(&actions, 4);
  // Signals this thread blocks are not blocked in the probe, and those this program may
  // ignore (an ignored signal stays ignored across exec) have their default action: a
  // driver that forks and waits for its child must not find SIGCHLD ignored (its
  // children reaped behind its back), nor a probe writing to a closed pipe live on.
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  sigset_t none, defaults;
  sigemptyset(&none);
  sigemptyset(&defaults);
  for (int sig : {SIGCHLD, SIGPIPE, SIGINT, SIGTERM, SIGHUP}) sigaddset(&defaults, sig);
  posix_spawnattr_setsigmask(&attr, &none);
  posix_spawnattr_setsigdefault(&attr, &defaults);
  // A process group of its own (its ID the probe's), so that killing the group at the
  // time limit kills the processes a driver started too.
  posix_spawnattr_setpgroup(&attr, 0);
  posix_spawnattr_setflags(&attr,
                           POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETPGROUP);
  std::vector<char*> argv = Pointers(args), envp = Pointers(env);
  const int rc = posix_spawn(pid, exe.c_str(), &actions, &attr, argv.data(), envp.data());
  posix_spawnattr_destroy(&attr);
  posix_spawn_file_actions_destroy(&actions);
  return rc;
}

// Kills the probe's process group and reaps the probe, waiting at most
// kReapAfterKillSeconds. False when it was not reaped (left a zombie, reaped by the
// kernel's init only once this process ends).
bool KillAndReap(pid_t pid, int* status) {
  kill(-pid, SIGKILL);
  for (int waited_ms = 0; waited_ms < kReapAfterKillSeconds * 1000; waited_ms += 10) {
    const pid_t r = waitpid(pid, status, WNOHANG);
    if (r == pid) return true;
    if (r < 0 && errno != EINTR) return false;
    usleep(10000);
  }
  return false;
}

}  // namespace

const char* OpenCLProbeBuildId() { return BRAZE_PROBE_BUILD_ID; }

std::string OpenCLProbeHeader() {
  return absl::StrCat(kOpenCLProbeName, " ", kOpenCLProbeProtocol, " ", OpenCLProbeBuildId(), "\n");
}

absl::StatusOr<std::string> OpenCLProbeExecutable() {
  if (const char* env = std::getenv("BRAZE_OPENCL_PROBE"); env != nullptr && *env != '\0') {
    if (IsExecutableFile(env)) return std::string(env);
    return absl::UnavailableError(absl::StrCat("BRAZE_OPENCL_PROBE=", env,
                                               " is not an executable file (it names ",
                                               kOpenCLProbeName, ", the OpenCL probe)"));
  }
  std::vector<std::string> candidates;
#ifdef BRAZE_OPENCL_PROBE_BUILD_PATH
  candidates.push_back(BRAZE_OPENCL_PROBE_BUILD_PATH);
#endif
  if (const std::string dir = ProgramDir(); !dir.empty()) {
    candidates.push_back(absl::StrCat(dir, "/", kOpenCLProbeName));
  }
#ifdef BRAZE_OPENCL_PROBE_INSTALLED_PATH
  candidates.push_back(BRAZE_OPENCL_PROBE_INSTALLED_PATH);
#endif
  for (const std::string& c : candidates) {
    if (IsExecutableFile(c)) return c;
  }
  return absl::UnavailableError(absl::StrCat(
      "the OpenCL probe executable ", kOpenCLProbeName,
      " was not found (BRAZE_OPENCL_PROBE is unset; ", "looked for ",
      absl::StrJoin(candidates, ", "),
      "), and without it no driver is loaded into this process: set BRAZE_OPENCL_PROBE to "
      "the installed one (<prefix>/libexec/braze/",
      kOpenCLProbeName, ")"));
}

absl::Status RunOpenCLProbe(const std::string& vendors_dir, bool run_kernel, std::string* listing) {
  absl::StatusOr<std::string> exe = OpenCLProbeExecutable();
  if (!exe.ok()) return exe.status();
  ProbePipes pipes;
  if (!pipes.Open()) {
    return absl::UnavailableError(
        absl::StrCat("cannot make pipes for the OpenCL probe: ", std::strerror(errno)));
  }
  std::vector<std::string> args = {*exe, absl::StrCat("--protocol=", kOpenCLProbeProtocol),
                                   absl::StrCat("--build=", OpenCLProbeBuildId())};
  if (run_kernel) args.push_back("--kernel");
  pid_t pid = -1;
  if (const int rc = Spawn(*exe, args, ProbeEnvironment(vendors_dir), pipes, &pid); rc != 0) {
    return absl::UnavailableError(
        absl::StrCat("cannot start the OpenCL probe ", *exe, ": ", std::strerror(rc)));
  }
  pipes.CloseWriteEnds();
  // Read while waiting (a probe that fills a pipe would otherwise block), never waiting
  // for the end of file: a process the driver started may hold the pipes open.
  std::string output, data;
  int status = 0;
  bool timed_out = false;
  for (int waited_ms = 0;; waited_ms += 10) {
    Drain(pipes.err_read, &output);
    Drain(pipes.data_read, &data);
    const pid_t r = waitpid(pid, &status, WNOHANG);
    if (r == pid) break;
    if (r < 0 && errno != EINTR) {
      // Not ours to reap (a SIGCHLD handler took it, or SIGCHLD is ignored).
      return absl::UnavailableError(
          absl::StrCat("the OpenCL probe ", *exe, "'s exit status was reaped elsewhere"));
    }
    if (waited_ms >= kProbeSeconds * 1000) {
      if (!KillAndReap(pid, &status)) {
        return absl::FailedPreconditionError(absl::StrCat(
            "the OpenCL probe did not exit after SIGKILL (", kProbeSeconds, " s after it started ",
            "loading the drivers of ", vendors_dir, ", and ", kReapAfterKillSeconds,
            " s after it was killed): a driver is stuck in the kernel; OpenCL is not used"));
      }
      timed_out = true;
      break;
    }
    usleep(10000);
  }
  Drain(pipes.err_read, &output);
  Drain(pipes.data_read, &data);
  const std::string said = FirstAndLastLines(output);
  if (!timed_out && WIFEXITED(status) && WEXITSTATUS(status) == 64) {
    return absl::UnavailableError(absl::StrCat(
        "the OpenCL probe ", *exe, " refused its arguments (protocol ", kOpenCLProbeProtocol,
        ", build ", OpenCLProbeBuildId(), "): it is another build's or version's of Braze",
        said.empty() ? "" : ": ", said));
  }
  if (!timed_out && WIFEXITED(status) && WEXITSTATUS(status) == 0) {
    const std::string header = OpenCLProbeHeader();
    if (!absl::StartsWith(data, header)) {
      const std::string first = data.substr(0, std::min(data.find('\n'), size_t{200}));
      return absl::UnavailableError(
          absl::StrCat("the OpenCL probe ", *exe, " exited without this build's header line ('",
                       absl::StripSuffix(header, "\n"), "'; it wrote ",
                       first.empty() ? "none" : absl::StrCat("'", first, "'"),
                       "): it is another build's or version's of Braze, or not Braze's probe"));
    }
    *listing = data.substr(header.size());
    return absl::OkStatus();
  }
  const char* signal_name = WIFSIGNALED(status) ? sigdescr_np(WTERMSIG(status)) : nullptr;
  const std::string how = timed_out ? absl::StrCat("did not finish in ", kProbeSeconds, " s")
                          : WIFSIGNALED(status)
                              ? absl::StrCat("was killed by signal ", WTERMSIG(status), " (",
                                             signal_name != nullptr ? signal_name : "unknown", ")")
                              : absl::StrCat("exited with status ", WEXITSTATUS(status));
  return absl::FailedPreconditionError(absl::StrCat(
      "a process that loaded the OpenCL drivers of ", vendors_dir, ", listed their devices",
      run_kernel ? " and ran a one-kernel Halide pipeline on opencl:0 " : " ", how,
      said.empty() ? "" : absl::StrCat(", saying: ", said)));
}

}  // namespace device
}  // namespace braze
