// Braze's environment changes and copies under one lock; see environment.h.
#include "ir/environment.h"

#include <cstdlib>
#include <mutex>

extern char** environ;

namespace braze {
namespace {

// Constant-initialized (std::mutex's constructor is constexpr), so usable from the
// static initializers that set variables before main (schedule/autoschedule.cc).
std::mutex environment_mutex;

}  // namespace

void SetEnvironmentVariable(const char* name, const std::string& value, bool overwrite) {
  std::lock_guard<std::mutex> lock(environment_mutex);
  setenv(name, value.c_str(), overwrite ? 1 : 0);
}

void UnsetEnvironmentVariable(const char* name) {
  std::lock_guard<std::mutex> lock(environment_mutex);
  unsetenv(name);
}

std::vector<std::string> CopyEnvironment() {
  std::lock_guard<std::mutex> lock(environment_mutex);
  std::vector<std::string> out;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) out.emplace_back(*e);
  return out;
}

}  // namespace braze
