#include "braze/device.h"

#include <dlfcn.h>

#include <mutex>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace braze {

std::string Device::ToString() const {
  std::string base = kind == Kind::kCpu ? "cpu" : absl::StrCat("cuda:", index);
  return force_compile ? absl::StrCat("jit:", base) : base;
}

absl::StatusOr<Device> ParseDevice(const std::string& name) {
  auto bad = [&]() {
    return absl::InvalidArgumentError(absl::StrCat(
        "bad device \"", name, "\": expected cpu, cuda, cuda:N, jit:cpu, jit:cuda or jit:cuda:N"));
  };
  Device d;
  std::string rest = name;
  if (rest.rfind("jit:", 0) == 0) {
    d.force_compile = true;
    rest = rest.substr(4);
  }
  std::vector<std::string> parts = absl::StrSplit(rest, ':');
  if (parts.empty() || parts.size() > 2) return bad();
  if (parts[0] == "cpu") {
    if (parts.size() == 2 && parts[1] != "0") return bad();
    d.kind = Device::Kind::kCpu;
  } else if (parts[0] == "cuda") {
    d.kind = Device::Kind::kCuda;
    if (parts.size() == 2 && (!absl::SimpleAtoi(parts[1], &d.index) || d.index < 0)) {
      return bad();
    }
  } else {
    return bad();
  }
  return d;
}

bool IsJitDevice(const std::string& device) { return device.rfind("jit:", 0) == 0; }

DeviceScope::DeviceScope(Graph& graph, const std::string& device)
    : graph_(graph), previous_(graph.device()) {
  auto parsed = ParseDevice(device);
  if (!parsed.ok()) {
    graph_.RecordError(parsed.status());
    return;
  }
  graph_.set_device(parsed->ToString());
}

DeviceScope::~DeviceScope() { graph_.set_device(previous_); }

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
