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

}  // namespace testing_util
}  // namespace braze

#endif  // BRAZE_TEST_COMMON_RUN_COMMAND_H_
