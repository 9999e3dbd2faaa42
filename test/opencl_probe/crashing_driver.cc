// An OpenCL driver (ICD) that fails as NVIDIA's OpenCL driver did under Braze on an H200
// machine ("terminate called after throwing an instance of 'std::bad_cast'", then abort).
// BRAZE_CRASHING_DRIVER picks where:
//   terminate (the default)  its first call, clGetExtensionFunctionAddress (asked by the
//                            ICD loader for clIcdGetPlatformIDsKHR), throws std::bad_cast
//                            where it cannot pass, so the process terminates;
//   throw                    that call lets std::bad_cast out to its caller;
//   context, build           the driver loads and lists one GPU device, and terminates
//                            the process the same way in clCreateContext, or in
//                            clBuildProgram after a context, a queue and buffers: the
//                            calls only real use makes (a compiled cluster's first run);
//   lock                     the driver lists one GPU, taking a mutex of its own first,
//                            which a program that loaded it can hold from another thread
//                            (BrazeFakeDriverLock/Unlock): a lock of a library loaded in
//                            both that program and its probe, as LLVM's or Halide's are
//                            while another thread compiles. Its builds fail (it compiles
//                            nothing), returning CL_BUILD_PROGRAM_FAILURE.
// In the last three modes the calls the ICD loader dispatches come through the table of
// the OpenCL ICD extension (cl_khr_icd), whose first member every object points to.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <typeinfo>
#include <utility>

namespace {

bool Mode(const char* name) {
  const char* mode = std::getenv("BRAZE_CRASHING_DRIVER");
  return mode != nullptr && std::strcmp(mode, name) == 0;
}

// Whether the driver loads and lists its GPU (else its first call ends the process).
bool Lists() { return Mode("context") || Mode("build") || Mode("lock"); }

std::mutex& DriverLock() {
  static std::mutex* mu = new std::mutex();
  return *mu;
}

void ThrowThroughNoexcept() noexcept {
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wterminate"
  throw std::bad_cast();
#pragma GCC diagnostic pop
}

// The dispatch table: entries by their index in cl_khr_icd's table; every entry this
// driver does not implement says which it is and aborts (a call the probe did not
// expect shows in the test's message).
constexpr int kEntries = 160;
void* dispatch[kEntries];

template <int N>
intptr_t Unimplemented() {
  std::fprintf(stderr, "fake OpenCL driver: dispatch entry %d is not implemented\n", N);
  std::abort();
}

template <int... N>
void FillUnimplemented(std::integer_sequence<int, N...>) {
  ((dispatch[N] = reinterpret_cast<void*>(&Unimplemented<N>)), ...);
}

struct Object {
  void** table = dispatch;  // the ICD loader dispatches through this first member
};
Object platform, device, context, queue, program;
struct Memory {
  void** table = dispatch;
  char* bytes = nullptr;
};

using Int = int32_t;
constexpr Int kSuccess = 0, kInvalidValue = -30, kDeviceNotFound = -1;

// Writes `n` bytes of `value` as an info query's answer.
Int Answer(const void* value, size_t n, size_t size, void* out, size_t* size_ret) {
  if (size_ret != nullptr) *size_ret = n;
  if (out != nullptr) {
    if (size < n) return kInvalidValue;
    std::memcpy(out, value, n);
  }
  return kSuccess;
}
Int AnswerString(const char* s, size_t size, void* out, size_t* size_ret) {
  return Answer(s, std::strlen(s) + 1, size, out, size_ret);
}
template <typename T>
Int AnswerValue(T v, size_t size, void* out, size_t* size_ret) {
  return Answer(&v, sizeof(v), size, out, size_ret);
}

Int GetPlatformIds(uint32_t n, void** platforms, uint32_t* count) {
  if (Mode("lock")) {  // waits for whoever holds it
    DriverLock().lock();
    DriverLock().unlock();
  }
  if (count != nullptr) *count = 1;
  if (platforms != nullptr && n > 0) platforms[0] = &platform;
  return kSuccess;
}

Int GetPlatformInfo(void*, uint32_t what, size_t size, void* out, size_t* size_ret) {
  switch (what) {
    case 0x0900:
      return AnswerString("FULL_PROFILE", size, out, size_ret);
    case 0x0901:
      return AnswerString("OpenCL 1.2 braze-fake", size, out, size_ret);
    case 0x0902:
      return AnswerString("Braze fake driver", size, out, size_ret);
    case 0x0903:
      return AnswerString("Braze", size, out, size_ret);
    case 0x0904:
      return AnswerString("cl_khr_icd", size, out, size_ret);
    case 0x0920:
      return AnswerString("BRAZEFAKE", size, out, size_ret);  // ICD suffix
    default:
      return kInvalidValue;
  }
}

Int GetDeviceIds(void*, uint64_t type, uint32_t n, void** devices, uint32_t* count) {
  if ((type & (1 | 4)) == 0) return kDeviceNotFound;  // DEFAULT or GPU (ALL has both)
  if (count != nullptr) *count = 1;
  if (devices != nullptr && n > 0) devices[0] = &device;
  return kSuccess;
}

Int GetDeviceInfo(void*, uint32_t what, size_t size, void* out, size_t* size_ret) {
  switch (what) {
    case 0x1000:
      return AnswerValue<uint64_t>(4, size, out, size_ret);  // TYPE: GPU
    case 0x1002:
      return AnswerValue<uint32_t>(1, size, out, size_ret);  // compute units
    case 0x1004:
      return AnswerValue<size_t>(1024, size, out, size_ret);  // work-group
    case 0x1020:
      return AnswerValue<uint64_t>(65536, size, out, size_ret);  // constant buffer
    case 0x1021:
      return AnswerValue<uint32_t>(8, size, out, size_ret);  // constant args
    case 0x1023:
      return AnswerValue<uint64_t>(49152, size, out, size_ret);  // local memory
    case 0x102B:
      return AnswerString("fake GPU", size, out, size_ret);
    case 0x1030:
      return AnswerString("", size, out, size_ret);  // extensions
    case 0x1031:
      return AnswerValue<void*>(&platform, size, out, size_ret);
    default: {  // anything else reads as zeros
      static const char zeros[64] = {0};
      return Answer(zeros, size < sizeof(zeros) ? size : sizeof(zeros), size, out, size_ret);
    }
  }
}

void* CreateContext(const intptr_t*, uint32_t, void* const*, void*, void*, Int* err) {
  if (Mode("context")) ThrowThroughNoexcept();
  if (err != nullptr) *err = kSuccess;
  return &context;
}

Int GetContextInfo(void*, uint32_t what, size_t size, void* out, size_t* size_ret) {
  switch (what) {
    case 0x1080:
      return AnswerValue<uint32_t>(1, size, out, size_ret);  // reference count
    case 0x1081:
      return AnswerValue<void*>(&device, size, out, size_ret);  // devices
    case 0x1083:
      return AnswerValue<uint32_t>(1, size, out, size_ret);  // device count
    default:
      return kInvalidValue;
  }
}

void* CreateQueue(void*, void*, uint64_t, Int* err) {
  if (err != nullptr) *err = kSuccess;
  return &queue;
}

void* CreateBuffer(void*, uint64_t, size_t bytes, void* host, Int* err) {
  auto* m = new Memory();
  m->bytes = static_cast<char*>(std::calloc(bytes > 0 ? bytes : 1, 1));
  if (host != nullptr) std::memcpy(m->bytes, host, bytes);
  if (err != nullptr) *err = kSuccess;
  return m;
}

Int ReadBuffer(void*, void* mem, uint32_t, size_t offset, size_t n, void* to, uint32_t, const void*,
               void**) {
  std::memcpy(to, static_cast<Memory*>(mem)->bytes + offset, n);
  return kSuccess;
}

Int WriteBuffer(void*, void* mem, uint32_t, size_t offset, size_t n, const void* from, uint32_t,
                const void*, void**) {
  std::memcpy(static_cast<Memory*>(mem)->bytes + offset, from, n);
  return kSuccess;
}

void* CreateProgram(void*, uint32_t, const char**, const size_t*, Int* err) {
  if (err != nullptr) *err = kSuccess;
  return &program;
}

Int BuildProgram(void*, uint32_t, void* const*, const char*, void*, void*) {
  if (Mode("build")) ThrowThroughNoexcept();
  return -11;  // CL_BUILD_PROGRAM_FAILURE: this driver compiles nothing
}

Int GetProgramBuildInfo(void*, void*, uint32_t, size_t size, void* out, size_t* size_ret) {
  return AnswerString("", size, out, size_ret);
}

Int Done(void*) { return kSuccess; }  // retain, release, flush, finish

void* ExtensionFunction(const char* name);
void* ExtensionFunctionForPlatform(void*, const char* name) { return ExtensionFunction(name); }

void FillDispatch() {
  FillUnimplemented(std::make_integer_sequence<int, kEntries>());
  auto set = [](int i, auto* f) { dispatch[i] = reinterpret_cast<void*>(f); };
  set(0, GetPlatformIds);
  set(1, GetPlatformInfo);
  set(2, GetDeviceIds);
  set(3, GetDeviceInfo);
  set(4, CreateContext);
  set(6, Done);
  set(7, Done);
  set(8, GetContextInfo);
  set(9, CreateQueue);
  set(10, Done);
  set(11, Done);
  set(14, CreateBuffer);
  set(17, Done);
  set(18, Done);
  set(26, CreateProgram);
  set(28, Done);
  set(29, Done);
  set(30, BuildProgram);
  set(33, GetProgramBuildInfo);
  set(46, Done);
  set(47, Done);
  set(48, ReadBuffer);
  set(49, WriteBuffer);
  set(65, ExtensionFunction);
  set(94, Done);
  set(95, Done);
  set(107, ExtensionFunctionForPlatform);
}

void* ExtensionFunction(const char* name) {
  if (std::strcmp(name, "clIcdGetPlatformIDsKHR") == 0) {
    static const bool filled = (FillDispatch(), true);
    (void)filled;
    return reinterpret_cast<void*>(&GetPlatformIds);
  }
  return nullptr;
}

}  // namespace

extern "C" __attribute__((visibility("default"))) void* clGetExtensionFunctionAddress(
    const char* name) {
  if (Lists()) return ExtensionFunction(name);
  if (Mode("throw")) throw std::bad_cast();
  ThrowThroughNoexcept();
  return nullptr;
}

// Exported as well, as real drivers do: ocl-icd looks them up by name first.
extern "C" __attribute__((visibility("default"))) int32_t clIcdGetPlatformIDsKHR(uint32_t n,
                                                                                 void** platforms,
                                                                                 uint32_t* count) {
  if (!Lists()) ThrowThroughNoexcept();
  FillDispatch();
  return GetPlatformIds(n, platforms, count);
}

extern "C" __attribute__((visibility("default"))) int32_t clGetPlatformInfo(void* platform,
                                                                            uint32_t what,
                                                                            size_t size, void* out,
                                                                            size_t* size_ret) {
  return GetPlatformInfo(platform, what, size, out, size_ret);
}

// For the "lock" mode's test: the driver's mutex, held by the caller's thread.
extern "C" __attribute__((visibility("default"))) void BrazeFakeDriverLock() {
  DriverLock().lock();
}
extern "C" __attribute__((visibility("default"))) void BrazeFakeDriverUnlock() {
  DriverLock().unlock();
}
