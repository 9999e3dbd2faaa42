// See openmp_wait.h.
#include "device/openmp_wait.h"

#include <dlfcn.h>

#include <cstdlib>

namespace braze {
namespace onednn {
namespace {

bool Set(const char* name) {
  const char* value = std::getenv(name);
  return value != nullptr && value[0] != '\0';
}

bool LibgompLoaded() {
  // RTLD_NOLOAD: a handle only when it is already in the process (released at once).
  void* handle = dlopen("libgomp.so.1", RTLD_LAZY | RTLD_NOLOAD);
  if (handle == nullptr) return false;
  dlclose(handle);
  return true;
}

OpenMpWait DecideAndApply() {
  const OpenMpWait wait =
      DecideOpenMpWait(LibgompLoaded(), Set("OMP_WAIT_POLICY") || Set("GOMP_SPINCOUNT"));
  if (wait == OpenMpWait::kSetPassive) setenv("OMP_WAIT_POLICY", "passive", /*overwrite=*/1);
  return wait;
}

// Runs before main in every program linking this file (onednn_matmul.cc's loader uses
// it, so the linker keeps it wherever oneDNN can be loaded).
const OpenMpWait kProcessWait = DecideAndApply();

}  // namespace

OpenMpWait DecideOpenMpWait(bool libgomp_loaded, bool user_chose) {
  if (user_chose) return OpenMpWait::kUserChose;
  return libgomp_loaded ? OpenMpWait::kAlreadyLoaded : OpenMpWait::kSetPassive;
}

OpenMpWait ProcessOpenMpWait() { return kProcessWait; }

std::string OpenMpWaitWarning(OpenMpWait wait) {
  if (wait != OpenMpWait::kAlreadyLoaded) return "";
  return "libgomp (OpenMP) was loaded before Braze could set its waiting policy, and "
         "neither OMP_WAIT_POLICY nor GOMP_SPINCOUNT is set: oneDNN's threads spin about "
         "3 ms after each call inside a kernel, which on a machine with few cores can make "
         "a training step several times slower. Set OMP_WAIT_POLICY=passive (or a "
         "GOMP_SPINCOUNT) in the environment";
}

}  // namespace onednn
}  // namespace braze
