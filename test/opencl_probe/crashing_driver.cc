// An OpenCL driver (ICD) that fails its first call, as NVIDIA's OpenCL driver did in
// Braze's probe on an H200 machine (2026-11-28: "terminate called after throwing an
// instance of 'std::bad_cast'", then abort). The ICD loader (ocl-icd) asks a driver for
// clIcdGetPlatformIDsKHR through clGetExtensionFunctionAddress. BRAZE_CRASHING_DRIVER
// picks how that call fails: "terminate" (the default) throws std::bad_cast where it
// cannot pass, so the process terminates; "throw" lets the exception out to the caller.
#include <cstdlib>
#include <cstring>
#include <typeinfo>

namespace {

void ThrowThroughNoexcept() noexcept {
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wterminate"
  throw std::bad_cast();
#pragma GCC diagnostic pop
}

}  // namespace

extern "C" __attribute__((visibility("default"))) void* clGetExtensionFunctionAddress(
    const char* /*name*/) {
  const char* mode = std::getenv("BRAZE_CRASHING_DRIVER");
  if (mode != nullptr && std::strcmp(mode, "throw") == 0) throw std::bad_cast();
  ThrowThroughNoexcept();
  return nullptr;
}
