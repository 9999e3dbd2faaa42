// The CUDA driver probe (braze/device.h: CheckCudaAvailable, CudaDeviceCount). The
// driver is loaded at run time, so a build with the CUDA toolkit runs on machines
// without a driver, and tells why CUDA is unavailable instead of failing to start.
#include <dlfcn.h>

#include "absl/strings/str_cat.h"
#include "braze/device.h"

namespace braze {
namespace {

struct CudaDriver {
  absl::Status status;
  int count = 0;
};

const CudaDriver& Driver() {
  static const CudaDriver* driver = [] {
    auto* d = new CudaDriver();
    // RTLD_GLOBAL: Halide's CUDA runtime resolves cu* symbols already in the process
    // before it tries dlopen("libcuda.so"), which only the toolkit's dev symlink provides.
    void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_GLOBAL);
    if (lib == nullptr) {
      d->status = absl::FailedPreconditionError(
          absl::StrCat("CUDA is not available: cannot load libcuda.so.1 (", dlerror(),
                       "); is the NVIDIA driver installed?"));
      return d;
    }
    using InitFn = int (*)(unsigned);
    using CountFn = int (*)(int*);
    auto init = reinterpret_cast<InitFn>(dlsym(lib, "cuInit"));
    auto count = reinterpret_cast<CountFn>(dlsym(lib, "cuDeviceGetCount"));
    if (init == nullptr || count == nullptr) {
      d->status = absl::FailedPreconditionError("CUDA is not available: libcuda.so.1 lacks cuInit");
      return d;
    }
    if (int rc = init(0); rc != 0) {
      d->status = absl::FailedPreconditionError(
          absl::StrCat("CUDA is not available: cuInit failed with CUDA error ", rc));
      return d;
    }
    if (int rc = count(&d->count); rc != 0 || d->count == 0) {
      d->count = 0;
      d->status = absl::FailedPreconditionError("CUDA is not available: no CUDA device found");
    }
    return d;
  }();
  return *driver;
}

}  // namespace

absl::Status CheckCudaAvailable() { return Driver().status; }
int CudaDeviceCount() { return Driver().count; }

}  // namespace braze
