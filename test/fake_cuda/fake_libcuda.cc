// A stand-in for NVIDIA's libcuda.so.1, for testing Braze's CUDA driver wrapper and copy
// path on machines without a GPU (cuda_copies_test.cc). "Device memory" is host memory
// from malloc, so Halide's CUDA runtime allocates and copies with it; it runs no kernel.
// Each entry point counts its calls (fake_cuda_calls), and a few fail on request:
//   FAKE_CUDA_FAIL_HOST_ALLOC=1   cuMemHostAlloc returns CUDA_ERROR_OUT_OF_MEMORY (2)
//   FAKE_CUDA_FAIL_HTOD_ASYNC=N   cuMemcpyHtoDAsync_v2 returns N
//   FAKE_CUDA_EVENTS_PENDING=1    an event recorded now stays not done (cuEventQuery:
//                                 CUDA_ERROR_NOT_READY) until it, the stream or the
//                                 context is synchronized: copies the device is behind on
// Built twice: complete, and with FAKE_CUDA_LACKS_PINNED (no cuMemHostAlloc), a driver
// without the pinned copies' entry points.
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <string>

namespace {

std::mutex mu;
std::map<std::string, long>& Calls() {
  static auto* calls = new std::map<std::string, long>();
  return *calls;
}
int Count(const char* name) {
  std::lock_guard<std::mutex> lock(mu);
  ++Calls()[name];
  return 0;
}
int EnvCode(const char* name) {
  const char* v = std::getenv(name);
  return v == nullptr ? 0 : std::atoi(v);
}
int context_token;
// Each event's state: whether its work is done (the copies themselves run at once).
std::map<void*, bool>& Events() {
  static auto* events = new std::map<void*, bool>();
  return *events;
}
void AllEventsDone() {
  std::lock_guard<std::mutex> lock(mu);
  for (auto& [e, done] : Events()) done = true;
}

}  // namespace

using CUdeviceptr = unsigned long long;
extern "C" {

long fake_cuda_calls(const char* name) {
  std::lock_guard<std::mutex> lock(mu);
  auto it = Calls().find(name);
  return it == Calls().end() ? 0 : it->second;
}

int cuInit(unsigned) { return Count("cuInit"); }
int cuDeviceGetCount(int* n) {
  *n = 1;
  return Count("cuDeviceGetCount");
}
int cuDeviceGet(int* d, int ordinal) {
  *d = ordinal;
  return Count("cuDeviceGet");
}
int cuDeviceGetAttribute(int* v, int, int) {
  *v = 8;
  return Count("cuDeviceGetAttribute");
}
int cuDeviceGetName(char* name, int len, int) {
  std::strncpy(name, "fake", len);
  return Count("cuDeviceGetName");
}
int cuDeviceTotalMem_v2(size_t* bytes, int) {
  *bytes = size_t{1} << 30;
  return Count("cuDeviceTotalMem");
}
int cuDeviceTotalMem(size_t* bytes, int d) { return cuDeviceTotalMem_v2(bytes, d); }
int cuDevicePrimaryCtxRetain(void** ctx, int) {
  *ctx = &context_token;
  return Count("cuDevicePrimaryCtxRetain");
}
int cuCtxCreate_v2(void** ctx, unsigned, int) {
  *ctx = &context_token;
  return Count("cuCtxCreate");
}
int cuCtxDestroy_v2(void*) { return Count("cuCtxDestroy"); }
int cuProfilerStop() { return 0; }
int cuCtxGetApiVersion(void*, unsigned* v) {
  *v = 12000;
  return 0;
}
int cuCtxPushCurrent_v2(void*) { return Count("cuCtxPushCurrent"); }
int cuCtxPopCurrent_v2(void** ctx) {
  *ctx = &context_token;
  return Count("cuCtxPopCurrent");
}
int cuCtxSynchronize() {
  AllEventsDone();
  return Count("cuCtxSynchronize");
}
int cuModuleLoadData(void**, const void*) { return 200; }  // CUDA_ERROR_INVALID_IMAGE
int cuModuleUnload(void*) { return 0; }
int cuModuleGetFunction(void**, void*, const char*) { return 500; }
int cuModuleGetGlobal_v2(CUdeviceptr*, size_t*, void*, const char*) { return 500; }
int cuLaunchKernel(void*, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                   void*, void**, void**) {
  return 98;  // CUDA_ERROR_INVALID_HANDLE: this driver runs nothing
}
int cuMemAlloc_v2(CUdeviceptr* p, size_t bytes) {
  *p = reinterpret_cast<CUdeviceptr>(std::malloc(bytes));
  return Count("cuMemAlloc");
}
int cuMemFree_v2(CUdeviceptr p) {
  std::free(reinterpret_cast<void*>(p));
  return Count("cuMemFree");
}
// The synchronous copies wait for the work queued before them.
int cuMemcpyHtoD_v2(CUdeviceptr dst, const void* src, size_t bytes) {
  AllEventsDone();
  std::memcpy(reinterpret_cast<void*>(dst), src, bytes);
  return Count("cuMemcpyHtoD");
}
int cuMemcpyDtoH_v2(void* dst, CUdeviceptr src, size_t bytes) {
  AllEventsDone();
  std::memcpy(dst, reinterpret_cast<const void*>(src), bytes);
  return Count("cuMemcpyDtoH");
}
int cuMemcpyDtoD_v2(CUdeviceptr dst, CUdeviceptr src, size_t bytes) {
  std::memcpy(reinterpret_cast<void*>(dst), reinterpret_cast<const void*>(src), bytes);
  return Count("cuMemcpyDtoD");
}
int cuMemcpy3D_v2(const void*) { return 1; }
int cuPointerGetAttribute(void*, int, CUdeviceptr) { return 0; }
int cuStreamSynchronize(void*) {
  AllEventsDone();
  return Count("cuStreamSynchronize");
}

#ifndef FAKE_CUDA_LACKS_PINNED
int cuMemHostAlloc(void** p, size_t bytes, unsigned) {
  Count("cuMemHostAlloc");
  if (EnvCode("FAKE_CUDA_FAIL_HOST_ALLOC") != 0) return 2;  // CUDA_ERROR_OUT_OF_MEMORY
  *p = std::malloc(bytes);
  return 0;
}
#endif
int cuMemFreeHost(void* p) {
  std::free(p);
  return Count("cuMemFreeHost");
}
int cuMemcpyHtoDAsync_v2(CUdeviceptr dst, const void* src, size_t bytes, void*) {
  Count("cuMemcpyHtoDAsync");
  if (int rc = EnvCode("FAKE_CUDA_FAIL_HTOD_ASYNC"); rc != 0) return rc;
  std::memcpy(reinterpret_cast<void*>(dst), src, bytes);
  return 0;
}
int cuMemcpyDtoHAsync_v2(void* dst, CUdeviceptr src, size_t bytes, void*) {
  std::memcpy(dst, reinterpret_cast<const void*>(src), bytes);
  return Count("cuMemcpyDtoHAsync");
}
int cuEventCreate(void** e, unsigned) {
  {
    std::lock_guard<std::mutex> lock(mu);
    *e = new char;
    Events()[*e] = true;
  }
  return Count("cuEventCreate");
}
int cuEventRecord(void* e, void*) {
  const bool pending = EnvCode("FAKE_CUDA_EVENTS_PENDING") != 0;
  {
    std::lock_guard<std::mutex> lock(mu);
    Events()[e] = !pending;
  }
  return Count("cuEventRecord");
}
int cuEventSynchronize(void* e) {
  {
    std::lock_guard<std::mutex> lock(mu);
    Events()[e] = true;
  }
  return Count("cuEventSynchronize");
}
int cuEventDestroy_v2(void* e) {
  {
    std::lock_guard<std::mutex> lock(mu);
    Events().erase(e);
  }
  delete static_cast<char*>(e);
  return Count("cuEventDestroy");
}
int cuEventQuery(void* e) {
  bool done = true;
  {
    std::lock_guard<std::mutex> lock(mu);
    auto it = Events().find(e);
    done = it == Events().end() || it->second;
  }
  Count("cuEventQuery");
  return done ? 0 : 600;  // CUDA_ERROR_NOT_READY
}
int cuEventElapsedTime(float* ms, void*, void*) {
  *ms = 0.5f;
  return Count("cuEventElapsedTime");
}
int cuGetErrorName(int rc, const char** name) {
  switch (rc) {
    case 2:
      *name = "CUDA_ERROR_OUT_OF_MEMORY";
      return 0;
    case 700:
      *name = "CUDA_ERROR_ILLEGAL_ADDRESS";
      return 0;
    default:
      return 1;
  }
}

}  // extern "C"
