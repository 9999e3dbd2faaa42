// Running a tool binary from a test: its exit status and what it printed.
#ifndef BRAZE_TEST_COMMON_RUN_COMMAND_H_
#define BRAZE_TEST_COMMON_RUN_COMMAND_H_

#include <sys/wait.h>

#include <cstdio>
#include <string>

namespace braze {
namespace testing_util {

// Runs `command` through the shell with stderr joined to stdout; returns its exit
// status (-1 when it could not run or did not exit) and its output in `*output`.
inline int RunCommand(const std::string& command, std::string* output) {
  FILE* pipe = popen((command + " 2>&1").c_str(), "r");
  output->clear();
  if (pipe == nullptr) return -1;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), pipe)) > 0) output->append(buf, n);
  const int status = pclose(pipe);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

// True when `output` (of a child that failed) shows LeakSanitizer's stop-the-world tracer
// crashing ("Tracer caught signal 11") and nothing else: no sanitizer report, no
// failed test. That crash is an intermittent fault of the sanitizer runtime, not a finding
// (docs/SANITIZERS.md); tools/sanitize.sh reruns a binary once for it, and a test that
// runs a child under ASan reruns the child (below).
inline bool OnlyLeakTracerCrashed(const std::string& output) {
  auto has = [&](const char* s) { return output.find(s) != std::string::npos; };
  return has("Tracer caught signal") && has("LeakSanitizer has encountered a fatal error") &&
         !has("ERROR: AddressSanitizer") && !has("ERROR: LeakSanitizer") &&
         !has("runtime error:") && !has("[  FAILED  ]");
}

// RunCommand, run again (twice at most) while the only failure is LeakSanitizer's tracer
// crash (above): CI saw it twice in a row in one child. Any other failure stands.
inline int RunCommandRetryingLeakTracerCrash(const std::string& command, std::string* output) {
  int rc = RunCommand(command, output);
  for (int rerun = 0; rerun < 2 && rc != 0 && OnlyLeakTracerCrashed(*output); ++rerun) {
    std::printf("LeakSanitizer's tracer crashed in a child (not a finding); running it again: %s\n",
                command.c_str());
    rc = RunCommand(command, output);
  }
  return rc;
}

}  // namespace testing_util
}  // namespace braze

#endif  // BRAZE_TEST_COMMON_RUN_COMMAND_H_
