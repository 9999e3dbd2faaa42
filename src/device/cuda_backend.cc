// The CUDA backend: kernels compiled for the host target plus CUDA, in device memory
// (DeviceTensor), in the device's primary context on the legacy default stream. Every
// answer Braze needs of a CUDA device comes from this file (device/backend.h); the
// driver probe is cuda_driver.cc (CheckCudaAvailable) and the library GEMM is
// cublas_gemm.cc, each its own concern.
//
// Halide's JIT runtime would create a CUDA context of its own (cuCtxCreate) and report
// errors by calling abort() when no pipeline's handler is in place. Braze installs JIT
// handlers instead: the context is the device's primary context (shared with the CUDA
// runtime API, hence cuBLAS), the stream is the legacy default stream, and errors are
// recorded per thread and returned as Status (device_tensor.cc).
//
// Copies between the host and the device go through pinned staging (a page-locked block
// per tensor, from a pool: device/staging_pool.h) with async copies on the legacy default
// stream, not through Halide's copies (cuMemcpyHtoD/DtoH from the buffer's pageable host
// mirror; docs/CUDA.md, "Copies"). BRAZE_CUDA_PINNED=0 (or SetCudaPinnedCopies(false))
// turns them off; a driver without the entry points or a failed pin falls back to
// Halide's path, with a one-time warning naming the reason.
#include <dlfcn.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <mutex>
#include <string>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/strings/str_cat.h"
#include "braze/device.h"
#include "braze/status.h"
#include "device/backend.h"
#include "device/device_tensor.h"
#include "device/device_tensor_impl.h"
#include "device/halide_util.h"
#include "device/jit_memory.h"
#include "device/staging_pool.h"
#include "ir/logging.h"
#include "ir/timeline.h"

namespace braze {
namespace device {
namespace {

// The few driver entry points Braze calls itself (from the libcuda.so.1 that
// CheckCudaAvailable loaded; no CUDA header or library at build time).
using CuResult = int;
using CuContext = void*;
using CuStream = void*;  // nullptr: the legacy default stream, which Halide's kernels use
using CuEvent = void*;
using CuDevicePtr = unsigned long long;
constexpr unsigned kEventDisableTiming = 2;  // CU_EVENT_DISABLE_TIMING
struct Driver {
  CuResult (*device_get)(int* device, int ordinal) = nullptr;
  CuResult (*primary_ctx_retain)(CuContext* ctx, int device) = nullptr;
  CuResult (*ctx_push)(CuContext ctx) = nullptr;
  CuResult (*ctx_pop)(CuContext* ctx) = nullptr;
  CuResult (*ctx_synchronize)() = nullptr;
  // The pinned copies' entry points (every driver since CUDA 3.2 has them; without
  // one, copies go through Halide: `copies` says why).
  CuResult (*mem_host_alloc)(void** p, size_t bytes, unsigned flags) = nullptr;
  CuResult (*mem_free_host)(void* p) = nullptr;
  CuResult (*memcpy_htod_async)(CuDevicePtr dst, const void* src, size_t bytes,
                                CuStream stream) = nullptr;
  CuResult (*memcpy_dtoh_async)(void* dst, CuDevicePtr src, size_t bytes,
                                CuStream stream) = nullptr;
  CuResult (*stream_synchronize)(CuStream stream) = nullptr;
  CuResult (*event_create)(CuEvent* event, unsigned flags) = nullptr;
  CuResult (*event_record)(CuEvent event, CuStream stream) = nullptr;
  CuResult (*event_synchronize)(CuEvent event) = nullptr;
  CuResult (*event_destroy)(CuEvent event) = nullptr;
  CuResult (*get_error_name)(CuResult rc, const char** name) = nullptr;  // optional
  // Device time in the timeline (optional: without them, no device row).
  CuResult (*event_query)(CuEvent event) = nullptr;
  CuResult (*event_elapsed)(float* ms, CuEvent start, CuEvent end) = nullptr;
  absl::Status copies;  // OK when the pinned copies' entry points resolved
};

struct CudaState {
  std::mutex mu;
  bool initialized = false;
  absl::Status status;
  int ordinal = -1;
  CuContext context = nullptr;
  Driver driver;
  const halide_device_interface_t* interface = nullptr;
};

// "CUDA_ERROR_INVALID_VALUE (1)", or the number alone.
std::string ErrorName(const Driver& d, CuResult rc) {
  const char* name = nullptr;
  if (d.get_error_name != nullptr && d.get_error_name(rc, &name) == 0 && name != nullptr) {
    return absl::StrCat(name, " (", rc, ")");
  }
  return absl::StrCat("CUDA error ", rc);
}

CudaState& State() {
  static CudaState* state = new CudaState();
  return *state;
}

int32_t AcquireContext(Halide::JITUserContext*, void** ctx, bool create) {
  CudaState& s = State();
  *ctx = s.context;
  return s.context == nullptr ? -1 : 0;
}
int32_t ReleaseContext(Halide::JITUserContext*) { return 0; }
int32_t GetStream(Halide::JITUserContext*, void*, void** stream) {
  *stream = nullptr;  // the legacy default stream: ordered with cuBLAS and copies
  return 0;
}

// Braze's CUDA context (the device's primary) and stream (the legacy default) handlers:
// every CUDA pipeline's jit_handlers() get them, so no realize can see Halide's own
// context handler while Halide resets its defaults.
void UseCudaHandlers(Halide::JITHandlers* handlers) {
  handlers->custom_cuda_acquire_context = AcquireContext;
  handlers->custom_cuda_release_context = ReleaseContext;
  handlers->custom_cuda_get_stream = GetStream;
}

// The JIT target of CUDA kernels: the sanitized host target plus CUDA at capability
// 8.6, the highest Halide 14 knows (its PTX runs on sm_90).
Halide::Target CudaJitTarget() {
  return SanitizedJitTarget()
      .with_feature(Halide::Target::CUDA)
      .with_feature(Halide::Target::CUDACapability86);
}

template <typename F>
bool Resolve(void* lib, const char* name, F* fn) {
  *fn = reinterpret_cast<F>(dlsym(lib, name));
  return *fn != nullptr;
}

absl::Status Initialize(CudaState& s, int ordinal) {
  BRAZE_RETURN_IF_ERROR(CheckCudaAvailable());
  if (ordinal < 0 || ordinal >= CudaDeviceCount()) {
    return absl::InvalidArgumentError(
        absl::StrCat("no CUDA device ", ordinal, " (this machine has ", CudaDeviceCount(), ")"));
  }
  void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_GLOBAL);
  if (lib == nullptr) return absl::FailedPreconditionError("cannot load libcuda.so.1");
  Driver& d = s.driver;
  if (!Resolve(lib, "cuDeviceGet", &d.device_get) ||
      !Resolve(lib, "cuDevicePrimaryCtxRetain", &d.primary_ctx_retain) ||
      !Resolve(lib, "cuCtxPushCurrent_v2", &d.ctx_push) ||
      !Resolve(lib, "cuCtxPopCurrent_v2", &d.ctx_pop) ||
      !Resolve(lib, "cuCtxSynchronize", &d.ctx_synchronize)) {
    return absl::FailedPreconditionError("libcuda.so.1 lacks a driver entry point Braze needs");
  }
  Resolve(lib, "cuGetErrorName", &d.get_error_name);
  Resolve(lib, "cuEventQuery", &d.event_query);
  Resolve(lib, "cuEventElapsedTime", &d.event_elapsed);
  if (!Resolve(lib, "cuMemHostAlloc", &d.mem_host_alloc) ||
      !Resolve(lib, "cuMemFreeHost", &d.mem_free_host) ||
      !Resolve(lib, "cuMemcpyHtoDAsync_v2", &d.memcpy_htod_async) ||
      !Resolve(lib, "cuMemcpyDtoHAsync_v2", &d.memcpy_dtoh_async) ||
      !Resolve(lib, "cuStreamSynchronize", &d.stream_synchronize) ||
      !Resolve(lib, "cuEventCreate", &d.event_create) ||
      !Resolve(lib, "cuEventRecord", &d.event_record) ||
      !Resolve(lib, "cuEventSynchronize", &d.event_synchronize) ||
      !Resolve(lib, "cuEventDestroy_v2", &d.event_destroy)) {
    d.copies = absl::FailedPreconditionError(
        "libcuda.so.1 lacks an entry point of the pinned copies (cuMemHostAlloc, "
        "cuMemFreeHost, cuMemcpyHtoDAsync_v2, cuMemcpyDtoHAsync_v2, cuStreamSynchronize, "
        "cuEvent*)");
  }
  int device = 0;
  if (CuResult rc = d.device_get(&device, ordinal); rc != 0) {
    return absl::FailedPreconditionError(absl::StrCat("cuDeviceGet(", ordinal, ") failed: ", rc));
  }
  if (CuResult rc = d.primary_ctx_retain(&s.context, device); rc != 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("cuDevicePrimaryCtxRetain(", ordinal, ") failed: ", rc));
  }
  // Defaults, for the device calls Braze makes outside pipelines; every CUDA pipeline
  // also carries the context and stream handlers itself (UseCudaHandlers).
  InstallDefaultDeviceHandlers(UseCudaHandlers);
  s.ordinal = ordinal;
  return CatchHalideErrors("Halide's CUDA runtime", absl::StatusCode::kInternal, [&] {
    s.interface = Halide::get_device_interface_for_device_api(Halide::DeviceAPI::CUDA,
                                                              CudaJitTarget(), "braze");
    return s.interface != nullptr
               ? absl::OkStatus()
               : absl::InternalError("no CUDA device interface in the JIT runtime");
  });
}

// Halide's CUDA device interface in the JIT runtime, with Braze's handlers installed
// (primary context, default stream, errors recorded instead of abort). Status when CUDA
// is unavailable or `ordinal` is not the device this process uses.
absl::StatusOr<const halide_device_interface_t*> CudaInterface(int ordinal) {
  CudaState& s = State();
  std::lock_guard<std::mutex> lock(s.mu);
  if (!s.initialized) {
    s.initialized = true;
    s.status = Initialize(s, ordinal);
  }
  BRAZE_RETURN_IF_ERROR(s.status);
  if (ordinal != s.ordinal) {
    // Halide's runtime has one context per process; Braze gives it one device.
    return absl::UnimplementedError(absl::StrCat("this process uses CUDA device ", s.ordinal,
                                                 "; one CUDA device per process is supported, "
                                                 "cuda:",
                                                 ordinal, " is not available"));
  }
  return s.interface;
}

// Pushes the primary context for the calls made in its lifetime (cuBLAS, sync).
class ContextScope {
 public:
  explicit ContextScope(CudaState& s) : s_(s) { ok_ = s.driver.ctx_push(s.context) == 0; }
  ~ContextScope() {
    CuContext old = nullptr;
    if (ok_) s_.driver.ctx_pop(&old);
  }
  bool ok() const { return ok_; }

 private:
  CudaState& s_;
  bool ok_ = false;
};

void WriteDeviceTimesAfterSync(const Driver& d);  // the timeline's section, below

// ---- Pinned copies -------------------------------------------------------------------

std::atomic<bool>& PinnedEnabled() {
  static std::atomic<bool> enabled{[] {
    const char* env = std::getenv("BRAZE_CUDA_PINNED");
    return env == nullptr || std::strcmp(env, "0") != 0;
  }()};
  return enabled;
}

struct CopyCounters {
  std::atomic<int64_t> pinned_to_device{0}, pinned_to_host{0};
  std::atomic<int64_t> pageable_to_device{0}, pageable_to_host{0};
};
CopyCounters& Counters() {
  static CopyCounters* counters = new CopyCounters();
  return *counters;
}

// Once per process: a copy that was to be pinned goes through Halide's pageable path.
void WarnPageableOnce(const absl::Status& why) {
  static std::atomic<bool> warned{false};
  if (warned.exchange(true)) return;
  LogWarning(
      absl::StrCat("CUDA: host<->device copies go through pageable memory (slower, "
                   "and each copy to the device waits for the device): ",
                   why.message()));
}

// Up to 256 MiB of free pinned blocks are kept for the process (device/staging_pool.h);
// the device's primary context, which owns them, lives as long.
constexpr size_t kMaxCachedPinnedBytes = size_t{256} << 20;

StagingPool& PinnedPool() {
  static StagingPool* pool = new StagingPool(
      {[](size_t bytes) -> absl::StatusOr<void*> {
         CudaState& s = State();
         ContextScope scope(s);
         if (!scope.ok()) return absl::InternalError("cannot make the CUDA context current");
         void* p = nullptr;
         if (CuResult rc = s.driver.mem_host_alloc(&p, bytes, 0); rc != 0) {
           return absl::ResourceExhaustedError(absl::StrCat(
               "cuMemHostAlloc of ", bytes, " bytes failed: ", ErrorName(s.driver, rc)));
         }
         return p;
       },
       [](void* p) {
         CudaState& s = State();
         ContextScope scope(s);
         if (scope.ok()) s.driver.mem_free_host(p);  // else the driver is gone: leak
       }},
      kMaxCachedPinnedBytes);
  return *pool;
}

// A tensor's pinned block and the event of the last async copy from it. Destroyed with
// the tensor: waits for that copy, then gives the block back to the pool.
class CudaStaging : public HostStaging {
 public:
  CudaStaging(StagingBlock block, CuEvent done) : block_(block), done_(done) {}
  ~CudaStaging() override {
    CudaState& s = State();
    ContextScope scope(s);
    if (!scope.ok()) return;  // the driver shut down (process exit): leak
    if (pending_) s.driver.event_synchronize(done_);
    s.driver.event_destroy(done_);
    PinnedPool().Release(block_);
  }
  void* data() const { return block_.data; }
  size_t capacity() const { return block_.capacity; }
  CuEvent done() const { return done_; }
  // An async copy from the block is queued before `done`.
  void set_pending(bool pending) { pending_ = pending; }
  // Waits for the last async copy from the block, so it can be written.
  absl::Status WaitIdle(const Driver& d) {
    if (!pending_) return absl::OkStatus();
    if (CuResult rc = d.event_synchronize(done_); rc != 0) {
      return absl::InternalError(
          absl::StrCat("waiting for the previous copy to the device failed: ", ErrorName(d, rc)));
    }
    pending_ = false;
    return absl::OkStatus();
  }

 private:
  StagingBlock block_;
  CuEvent done_;
  bool pending_ = false;
};

// The tensor's staging (made on its first copy), or the reason there is none: the
// caller copies through Halide then. Call with the context current.
absl::StatusOr<CudaStaging*> StagingFor(CudaState& s, DeviceTensor::Impl& tensor, size_t bytes) {
  if (!PinnedEnabled().load(std::memory_order_relaxed)) {
    return absl::FailedPreconditionError("pinned copies are off (BRAZE_CUDA_PINNED=0)");
  }
  BRAZE_RETURN_IF_ERROR(s.driver.copies);
  if (tensor.staging != nullptr) {
    auto* staging = static_cast<CudaStaging*>(tensor.staging.get());
    if (staging->capacity() >= bytes) return staging;
  }
  BRAZE_ASSIGN_OR_RETURN(StagingBlock block, PinnedPool().Acquire(bytes));
  CuEvent event = nullptr;
  if (CuResult rc = s.driver.event_create(&event, kEventDisableTiming); rc != 0) {
    PinnedPool().Release(block);
    return absl::InternalError(absl::StrCat("cuEventCreate failed: ", ErrorName(s.driver, rc)));
  }
  tensor.staging = std::make_unique<CudaStaging>(block, event);
  return static_cast<CudaStaging*>(tensor.staging.get());
}

// Copies through pinned staging; `fallback` (Halide's copy) when pinning is off or
// impossible: with a warning, once, unless the user turned it off.
template <typename Fallback>
absl::Status WithStaging(DeviceTensor::Impl& tensor, size_t bytes,
                         absl::FunctionRef<absl::Status(CudaState&, CudaStaging&)> copy,
                         Fallback fallback) {
  CudaState& s = State();
  ContextScope scope(s);
  if (!scope.ok()) return absl::InternalError("cannot make the CUDA context current");
  // One pinned copy at a time: two threads copying the same tensor would otherwise both
  // make its staging, and the second would free the first's block under its copy. The
  // copies share the legacy stream anyway.
  static std::mutex mu;
  std::lock_guard<std::mutex> lock(mu);
  absl::StatusOr<CudaStaging*> staging = StagingFor(s, tensor, bytes);
  if (!staging.ok()) {
    if (PinnedEnabled().load(std::memory_order_relaxed)) WarnPageableOnce(staging.status());
    return fallback();
  }
  absl::Status status = copy(s, **staging);
  if (status.ok()) return status;
  // A kernel's fault shows first here, at the next copy: say the context is lost.
  return absl::Status(status.code(), NoteLostCudaContext(std::string(status.message())));
}

absl::Status PinnedCopyToDevice(DeviceTensor::Impl& tensor, const void* src, size_t bytes,
                                absl::FunctionRef<absl::Status()> fallback) {
  return WithStaging(
      tensor, bytes,
      [&](CudaState& s, CudaStaging& staging) {
        const Driver& d = s.driver;
        BRAZE_RETURN_IF_ERROR(staging.WaitIdle(d));
        std::memcpy(staging.data(), src, bytes);
        halide_buffer_t* b = tensor.buffer.raw_buffer();
        if (CuResult rc = d.memcpy_htod_async(b->device, staging.data(), bytes, nullptr); rc != 0) {
          return absl::InternalError(
              absl::StrCat("cuMemcpyHtoDAsync of ", bytes, " bytes failed: ", ErrorName(d, rc)));
        }
        if (CuResult rc = d.event_record(staging.done(), nullptr); rc != 0) {
          // Without the event the block's reuse cannot wait for the copy: wait now.
          if (CuResult rs = d.stream_synchronize(nullptr); rs != 0) {
            return absl::InternalError(
                absl::StrCat("cuStreamSynchronize after a copy failed: ", ErrorName(d, rs)));
          }
        } else {
          staging.set_pending(true);
        }
        // The device holds the newest data; the host mirror is stale (device dirty: Halide
        // copies it back first if a pipeline ever reads it on the host).
        tensor.buffer.get()->set_host_dirty(false);
        tensor.buffer.get()->set_device_dirty(true);
        Counters().pinned_to_device.fetch_add(1, std::memory_order_relaxed);
        return absl::OkStatus();
      },
      [&] {
        Counters().pageable_to_device.fetch_add(1, std::memory_order_relaxed);
        return fallback();
      });
}

absl::Status PinnedCopyToHost(DeviceTensor::Impl& tensor, void* dst, size_t bytes,
                              absl::FunctionRef<absl::Status()> fallback) {
  return WithStaging(
      tensor, bytes,
      [&](CudaState& s, CudaStaging& staging) {
        const Driver& d = s.driver;
        halide_buffer_t* b = tensor.buffer.raw_buffer();
        // Ordered after the kernels and any copy from the block queued before it.
        if (CuResult rc = d.memcpy_dtoh_async(staging.data(), b->device, bytes, nullptr); rc != 0) {
          return absl::InternalError(
              absl::StrCat("cuMemcpyDtoHAsync of ", bytes, " bytes failed: ", ErrorName(d, rc)));
        }
        if (CuResult rc = d.stream_synchronize(nullptr); rc != 0) {
          return absl::InternalError(
              absl::StrCat("copy to the host: cuStreamSynchronize failed: ", ErrorName(d, rc)));
        }
        staging.set_pending(false);
        WriteDeviceTimesAfterSync(d);
        std::memcpy(dst, staging.data(), bytes);
        Counters().pinned_to_host.fetch_add(1, std::memory_order_relaxed);
        return absl::OkStatus();
      },
      [&] {
        Counters().pageable_to_host.fetch_add(1, std::memory_order_relaxed);
        return fallback();
      });
}

// ---- Device time in the timeline (device/device_timeline.h) --------------------------

// Spans queued on the legacy stream, in order. A bar's device start is the anchor's host
// time plus the device time from the anchor event to the span's start event; the anchor
// is an event the host waited for (when it completed, the host read its clock), taken
// again after a second so the two clocks do not drift apart.
struct TimedSpan {
  CuEvent start = nullptr, end = nullptr;
  std::string name, args;
  const char* category = "";
};
struct DeviceTimes {
  std::mutex mu;
  std::deque<TimedSpan*> pending;
  std::vector<CuEvent> free_events;
  CuEvent anchor = nullptr;
  double anchor_us = -1e300;
  std::string row;
};
DeviceTimes& Times() {
  static DeviceTimes* times = new DeviceTimes();
  return *times;
}
constexpr double kReanchorMicros = 1e6;

bool CanTime(const Driver& d) {
  return d.copies.ok() && d.event_query != nullptr && d.event_elapsed != nullptr;
}

// An event from the free list or a new one (with timing); nullptr if none can be made.
CuEvent TimingEvent(const Driver& d, DeviceTimes& t) {
  if (!t.free_events.empty()) {
    CuEvent e = t.free_events.back();
    t.free_events.pop_back();
    return e;
  }
  CuEvent e = nullptr;
  return d.event_create(&e, 0) == 0 ? e : nullptr;
}

// Writes the bars of the spans the device has finished, oldest first (with `t.mu` held
// and the context current).
void WriteFinishedSpans(const Driver& d, DeviceTimes& t) {
  while (!t.pending.empty()) {
    TimedSpan* span = t.pending.front();
    if (d.event_query(span->end) != 0) break;  // not run yet (or an error a sync reports)
    float from_anchor_ms = 0, duration_ms = 0;
    if (d.event_elapsed(&from_anchor_ms, t.anchor, span->start) == 0 &&
        d.event_elapsed(&duration_ms, span->start, span->end) == 0) {
      Timeline::RecordOnRow(t.row, span->name, span->category, t.anchor_us + 1e3 * from_anchor_ms,
                            1e3 * duration_ms, span->args);
    }
    t.free_events.push_back(span->start);
    t.free_events.push_back(span->end);
    t.pending.pop_front();
    delete span;
  }
}

void* BeginCudaSpan(int ordinal) {
  CudaState& s = State();
  if (!CudaInterface(ordinal).ok() || !CanTime(s.driver)) return nullptr;
  const Driver& d = s.driver;
  ContextScope scope(s);
  if (!scope.ok()) return nullptr;
  DeviceTimes& t = Times();
  std::lock_guard<std::mutex> lock(t.mu);
  if (t.pending.empty() && Timeline::NowMicros() - t.anchor_us > kReanchorMicros) {
    if (t.anchor == nullptr) t.anchor = TimingEvent(d, t);
    if (t.anchor == nullptr || d.event_record(t.anchor, nullptr) != 0 ||
        d.event_synchronize(t.anchor) != 0) {
      return nullptr;
    }
    t.anchor_us = Timeline::NowMicros();
    t.row = absl::StrCat("cuda:", ordinal, " (device time)");
  }
  auto* span = new TimedSpan();
  span->start = TimingEvent(d, t);
  span->end = TimingEvent(d, t);
  if (span->start == nullptr || span->end == nullptr || d.event_record(span->start, nullptr) != 0) {
    if (span->start != nullptr) t.free_events.push_back(span->start);
    if (span->end != nullptr) t.free_events.push_back(span->end);
    delete span;
    return nullptr;
  }
  return span;
}

void EndCudaSpan(void* opaque, std::string name, const char* category, std::string args,
                 bool wait) {
  auto* span = static_cast<TimedSpan*>(opaque);
  CudaState& s = State();
  const Driver& d = s.driver;
  ContextScope scope(s);
  DeviceTimes& t = Times();
  std::lock_guard<std::mutex> lock(t.mu);
  if (!scope.ok() || d.event_record(span->end, nullptr) != 0) {
    t.free_events.push_back(span->start);
    t.free_events.push_back(span->end);
    delete span;
    return;
  }
  span->name = std::move(name);
  span->category = category;
  span->args = std::move(args);
  t.pending.push_back(span);
  if (wait) d.event_synchronize(span->end);  // a failure is the next sync's to report
  WriteFinishedSpans(d, t);
}

// After the host waited for the stream (a copy to the host, CudaSynchronize): every span
// queued before is done. Call with the context current.
void WriteDeviceTimesAfterSync(const Driver& d) {
  if (!CanTime(d)) return;
  DeviceTimes& t = Times();
  std::lock_guard<std::mutex> lock(t.mu);
  WriteFinishedSpans(d, t);
}

class CudaBackend : public Backend {
 public:
  Device::Kind kind() const override { return Device::Kind::kCuda; }
  const Features& features() const override {
    static const Features features = [] {
      Features f;
      f.device_memory = true;
      f.library_gemm = true;    // cuBLASLt (device/cublas_gemm.h)
      f.libdevice_math = true;  // Halide links libdevice into every PTX module
      return f;
    }();
    return features;
  }
  absl::Status CheckAvailable(int index) const override {
    BRAZE_RETURN_IF_ERROR(CheckCudaAvailable());
    if (index >= CudaDeviceCount()) {
      return absl::InvalidArgumentError(
          absl::StrCat("this machine has ", CudaDeviceCount(), " CUDA device(s)"));
    }
    return absl::OkStatus();
  }
  bool PreferredForAuto() const override { return CheckCudaAvailable().ok(); }
  Halide::Target JitTarget() const override { return CudaJitTarget(); }
  void InstallHandlers(Halide::JITHandlers* handlers) const override {
    UseJitBufferCache(handlers);  // host-side intermediates of the pipeline
    UseCudaHandlers(handlers);
  }
  absl::StatusOr<const halide_device_interface_t*> Interface(int ordinal) const override {
    return CudaInterface(ordinal);
  }
  // Halide's device_free aborts when the CUDA runtime cannot make the context current
  // (a driver shut down at exit): leak the allocation then instead.
  void FreeDeviceBuffer(Halide::Runtime::Buffer<>* buffer) const override {
    CudaState& s = State();
    if (s.driver.ctx_push == nullptr || s.driver.ctx_push(s.context) != 0) {
      halide_buffer_t* b = buffer->raw_buffer();
      b->device = 0;
      b->device_interface = nullptr;
      return;
    }
    CuContext old = nullptr;
    s.driver.ctx_pop(&old);
    buffer->device_free();
  }
  absl::Status CopyToDevice(DeviceTensor::Impl& tensor, const void* src,
                            size_t bytes) const override {
    return PinnedCopyToDevice(tensor, src, bytes,
                              [&] { return Backend::CopyToDevice(tensor, src, bytes); });
  }
  absl::Status CopyToHost(DeviceTensor::Impl& tensor, void* dst, size_t bytes) const override {
    return PinnedCopyToHost(tensor, dst, bytes,
                            [&] { return Backend::CopyToHost(tensor, dst, bytes); });
  }
  void* BeginDeviceSpan(int ordinal) const override { return BeginCudaSpan(ordinal); }
  void EndDeviceSpan(void* span, std::string name, const char* category, std::string args_json,
                     bool wait) const override {
    EndCudaSpan(span, std::move(name), category, std::move(args_json), wait);
  }
};

}  // namespace

const Backend& CudaBackendInstance() {
  static const CudaBackend* backend = new CudaBackend();
  return *backend;
}

}  // namespace device

absl::Status CudaSynchronize() {
  device::CudaState& s = device::State();
  {
    std::lock_guard<std::mutex> lock(s.mu);
    if (!s.initialized || !s.status.ok()) return absl::OkStatus();
  }
  device::ContextScope scope(s);
  if (!scope.ok()) return absl::InternalError("cannot make the CUDA context current");
  if (int rc = s.driver.ctx_synchronize(); rc != 0) {
    return absl::InternalError(device::NoteLostCudaContext(
        absl::StrCat("cuCtxSynchronize failed: ", device::ErrorName(s.driver, rc))));
  }
  device::WriteDeviceTimesAfterSync(s.driver);
  return absl::OkStatus();
}

void SetCudaPinnedCopies(bool enabled) {
  device::PinnedEnabled().store(enabled, std::memory_order_relaxed);
}

CudaCopyStats GetCudaCopyStats() {
  const device::CopyCounters& c = device::Counters();
  CudaCopyStats stats;
  stats.pinned_to_device = c.pinned_to_device.load(std::memory_order_relaxed);
  stats.pinned_to_host = c.pinned_to_host.load(std::memory_order_relaxed);
  stats.pageable_to_device = c.pageable_to_device.load(std::memory_order_relaxed);
  stats.pageable_to_host = c.pageable_to_host.load(std::memory_order_relaxed);
  const device::StagingPool::Stats pool = device::PinnedPool().stats();
  stats.pinned_bytes = pool.allocated_bytes;
  stats.pinned_blocks_reused = pool.reused;
  return stats;
}

absl::Status RunInCudaContext(int ordinal, const std::function<absl::Status()>& fn) {
  BRAZE_RETURN_IF_ERROR(device::CudaInterface(ordinal).status());
  device::ContextScope scope(device::State());
  if (!scope.ok()) return absl::InternalError("cannot make the CUDA context current");
  return fn();
}

}  // namespace braze
