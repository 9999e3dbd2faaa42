// Braze's own changes to the process environment, and its copies of it, under one lock.
// glibc's setenv may move `environ` (adding a variable reallocates the array) while
// another thread walks it, so Braze never calls setenv/unsetenv, or copies the whole
// environment (device/opencl_probe.cc, for the probe it spawns), except through these.
// In ir/ because the callers sit in layers that cannot see each other (schedule/'s
// HL_BEAM_SIZE, device/'s OCL_ICD_VENDORS and Open MPI's variables).
//
// The limit: a setenv by code outside Braze (the user's program, a driver, a library)
// does not take this lock; a program that changes its environment on one thread while
// another asks Braze for a device must not.
#ifndef BRAZE_IR_ENVIRONMENT_H_
#define BRAZE_IR_ENVIRONMENT_H_

#include <string>
#include <vector>

namespace braze {

// setenv(name, value, overwrite) and unsetenv(name), under the lock.
void SetEnvironmentVariable(const char* name, const std::string& value, bool overwrite);
void UnsetEnvironmentVariable(const char* name);

// Every "NAME=value" of the environment, copied under the lock.
std::vector<std::string> CopyEnvironment();

}  // namespace braze

#endif  // BRAZE_IR_ENVIRONMENT_H_
