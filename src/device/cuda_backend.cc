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
// per copy in flight, from a pool: device/staging_pool.h) with async copies on the legacy
// default stream, not through Halide's copies (cuMemcpyHtoD/DtoH from the buffer's pageable host
// mirror; docs/CUDA.md, "Copies"). BRAZE_CUDA_PINNED=0 (or SetCudaPinnedCopies(false))
// turns them off; a driver without the entry points, a failed pin or the cap on pinned
// bytes in use falls back to Halide's path, with a one-time warning naming the reason.
#include <dlfcn.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <map>
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
  // A block's release (required with the pinned copies) and device time in the timeline.
  CuResult (*event_query)(CuEvent event) = nullptr;
  // Device time in the timeline (optional: without it, no device row).
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
      !Resolve(lib, "cuEventDestroy_v2", &d.event_destroy) || d.event_query == nullptr) {
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

// Up to 256 MiB of pinned blocks may be in use at once (copies in flight), and up to
// 256 MiB of free ones are kept for the process (device/staging_pool.h); the device's
// primary context, which owns them, lives as long.
constexpr size_t kMaxCachedPinnedBytes = size_t{256} << 20;
constexpr size_t kMaxInUsePinnedBytes = size_t{256} << 20;

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
      kMaxCachedPinnedBytes, kMaxInUsePinnedBytes);
  return *pool;
}

// Copies to the device whose async copy may still read its block, oldest first (the
// legacy stream runs them in that order). A block goes back to the pool once its
// copy's event has completed: at the next copy, a synchronization, or when the tensor
// it writes is freed. Guarded by CopyMutex().
struct Upload {
  StagingBlock block;
  CuEvent done = nullptr;
  CuDevicePtr dst = 0;
};
struct Uploads {
  std::deque<Upload> in_flight;
  std::vector<CuEvent> free_events;
};
Uploads& InFlight() {
  static Uploads* uploads = new Uploads();
  return *uploads;
}
// One pinned copy at a time: the copies share the legacy stream anyway, and the uploads
// in flight are one list.
std::mutex& CopyMutex() {
  static std::mutex* mu = new std::mutex();
  return *mu;
}

// Gives back the blocks of the uploads that are done, oldest first: every one when the
// host has just waited for the stream (`stream_idle`), else those whose event says so.
// With CopyMutex() held and the context current.
void ReleaseFinishedUploads(const Driver& d, bool stream_idle) {
  Uploads& u = InFlight();
  while (!u.in_flight.empty()) {
    Upload& up = u.in_flight.front();
    // Not done (CUDA_ERROR_NOT_READY), or an error the next synchronization reports:
    // either way the block stays out.
    if (!stream_idle && d.event_query(up.done) != 0) break;
    PinnedPool().Release(up.block);
    u.free_events.push_back(up.done);
    u.in_flight.pop_front();
  }
}

// Waits for the uploads into device memory [dst, dst + bytes), which is about to be
// freed, and gives their blocks back. With CopyMutex() held and the context current.
void WaitForUploadsInto(const Driver& d, CuDevicePtr dst, size_t bytes) {
  const Uploads& u = InFlight();
  CuEvent last = nullptr;
  for (const Upload& up : u.in_flight) {
    if (up.dst >= dst && up.dst < dst + bytes) last = up.done;
  }
  // The stream runs the uploads in order: the last one's completion covers the others.
  if (last != nullptr && d.event_synchronize(last) != 0) return;  // the context is lost
  ReleaseFinishedUploads(d, /*stream_idle=*/false);
}

// Copies that took the pageable path because of the in-use cap (CudaCopyStats).
std::atomic<int64_t>& PageableOverCap() {
  static std::atomic<int64_t> count{0};
  return count;
}

// Once per process: copies over the in-use cap go through Halide's pageable path.
void WarnOverCapOnce(const absl::Status& why) {
  static std::atomic<bool> warned{false};
  if (warned.exchange(true)) return;
  LogWarning(absl::StrCat(
      "CUDA: a host<->device copy went through pageable memory (slower; counted in "
      "CudaCopyStats::pageable_over_cap) because the pinned staging in use is capped: ",
      why.message()));
}

// A pinned block for a copy of `bytes`, or the reason there is none: the caller copies
// through Halide then, after the warnings above. A copy to the host (`to_host`) waits
// for the stream anyway: over the cap, it waits first, so that the uploads before it
// give their blocks back. With CopyMutex() held and the context current.
absl::StatusOr<StagingBlock> AcquireStaging(CudaState& s, size_t bytes, bool to_host) {
  if (!PinnedEnabled().load(std::memory_order_relaxed)) {
    return absl::FailedPreconditionError("pinned copies are off (BRAZE_CUDA_PINNED=0)");
  }
  if (!s.driver.copies.ok()) {
    WarnPageableOnce(s.driver.copies);
    return s.driver.copies;
  }
  ReleaseFinishedUploads(s.driver, /*stream_idle=*/false);
  StagingPool& pool = PinnedPool();
  if (!pool.Fits(bytes) && to_host && s.driver.stream_synchronize(nullptr) == 0) {
    ReleaseFinishedUploads(s.driver, /*stream_idle=*/true);
  }
  if (!pool.Fits(bytes)) {
    PageableOverCap().fetch_add(1, std::memory_order_relaxed);
    const absl::Status why = absl::ResourceExhaustedError(absl::StrCat(
        "a copy of ", bytes, " bytes would put the pinned bytes in use (",
        pool.stats().in_use_bytes, ", copies the device has not done yet) over the cap of ",
        pool.max_in_use_bytes(), " bytes"));
    WarnOverCapOnce(why);
    return why;
  }
  absl::StatusOr<StagingBlock> block = pool.Acquire(bytes);
  if (!block.ok()) WarnPageableOnce(block.status());
  return block;
}

// Copies through a pinned block; `fallback` (Halide's copy) when pinning is off or
// impossible: with a warning, once, unless the user turned it off.
template <typename Fallback>
absl::Status WithStaging(size_t bytes, bool to_host,
                         absl::FunctionRef<absl::Status(CudaState&, StagingBlock)> copy,
                         Fallback fallback) {
  CudaState& s = State();
  ContextScope scope(s);
  if (!scope.ok()) return absl::InternalError("cannot make the CUDA context current");
  std::lock_guard<std::mutex> lock(CopyMutex());
  absl::StatusOr<StagingBlock> block = AcquireStaging(s, bytes, to_host);
  if (!block.ok()) return fallback();
  absl::Status status = copy(s, *block);
  if (status.ok()) return status;
  // A kernel's fault shows first here, at the next copy: say the context is lost.
  return absl::Status(status.code(), NoteLostCudaContext(std::string(status.message())));
}

// An event for an upload: a free one, else a new one; nullptr when none can be made.
CuEvent UploadEvent(const Driver& d) {
  Uploads& u = InFlight();
  if (!u.free_events.empty()) {
    CuEvent e = u.free_events.back();
    u.free_events.pop_back();
    return e;
  }
  CuEvent e = nullptr;
  return d.event_create(&e, kEventDisableTiming) == 0 ? e : nullptr;
}

absl::Status PinnedCopyToDevice(DeviceTensor::Impl& tensor, const void* src, size_t bytes,
                                absl::FunctionRef<absl::Status()> fallback) {
  return WithStaging(
      bytes, /*to_host=*/false,
      [&](CudaState& s, StagingBlock block) {
        const Driver& d = s.driver;
        std::memcpy(block.data, src, bytes);
        halide_buffer_t* b = tensor.buffer.raw_buffer();
        if (CuResult rc = d.memcpy_htod_async(b->device, block.data, bytes, nullptr); rc != 0) {
          PinnedPool().Release(block);  // nothing was queued
          return absl::InternalError(
              absl::StrCat("cuMemcpyHtoDAsync of ", bytes, " bytes failed: ", ErrorName(d, rc)));
        }
        CuEvent done = UploadEvent(d);
        if (done != nullptr && d.event_record(done, nullptr) == 0) {
          InFlight().in_flight.push_back(Upload{block, done, b->device});
        } else {
          // Without the event the block's release cannot wait for the copy: wait now.
          if (done != nullptr) InFlight().free_events.push_back(done);
          CuResult rs = d.stream_synchronize(nullptr);
          PinnedPool().Release(block);
          if (rs != 0) {
            return absl::InternalError(
                absl::StrCat("cuStreamSynchronize after a copy failed: ", ErrorName(d, rs)));
          }
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
      bytes, /*to_host=*/true,
      [&](CudaState& s, StagingBlock block) {
        const Driver& d = s.driver;
        halide_buffer_t* b = tensor.buffer.raw_buffer();
        // Ordered after the kernels and the uploads queued before it.
        if (CuResult rc = d.memcpy_dtoh_async(block.data, b->device, bytes, nullptr); rc != 0) {
          PinnedPool().Release(block);  // nothing was queued
          return absl::InternalError(
              absl::StrCat("cuMemcpyDtoHAsync of ", bytes, " bytes failed: ", ErrorName(d, rc)));
        }
        if (CuResult rc = d.stream_synchronize(nullptr); rc != 0) {
          // The context is lost: no copy will touch the block again.
          PinnedPool().Release(block);
          return absl::InternalError(
              absl::StrCat("copy to the host: cuStreamSynchronize failed: ", ErrorName(d, rc)));
        }
        ReleaseFinishedUploads(d, /*stream_idle=*/true);
        WriteDeviceTimesAfterSync(d);
        std::memcpy(dst, block.data, bytes);
        PinnedPool().Release(block);
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
      f.library_gemm = true;      // cuBLASLt (device/cublas_gemm.h)
      f.libdevice_math = true;    // Halide links libdevice into every PTX module
      f.stored_schedules = true;  // the GPU heuristic's, per compute capability
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
  // "sm_90": the device's compute capability, which the target (capability 86 at most in
  // Halide 14) does not say.
  // Read once per device (every stored-schedule lookup of a GPU cluster asks).
  absl::StatusOr<std::string> Architecture(int ordinal) const override {
    static std::mutex mu;
    static std::map<int, std::string>* known = new std::map<int, std::string>;
    std::lock_guard<std::mutex> lock(mu);
    if (auto it = known->find(ordinal); it != known->end()) return it->second;
    BRAZE_ASSIGN_OR_RETURN(std::string arch, ReadArchitecture(ordinal));
    known->emplace(ordinal, arch);
    return arch;
  }
  absl::StatusOr<std::string> ReadArchitecture(int ordinal) const {
    BRAZE_RETURN_IF_ERROR(CheckAvailable(ordinal));
    void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_GLOBAL);  // loaded by the probe
    using GetFn = int (*)(int*, int);
    using AttributeFn = int (*)(int*, int, int);
    auto get = lib ? reinterpret_cast<GetFn>(dlsym(lib, "cuDeviceGet")) : nullptr;
    auto attribute =
        lib ? reinterpret_cast<AttributeFn>(dlsym(lib, "cuDeviceGetAttribute")) : nullptr;
    // CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR and _MINOR.
    constexpr int kMajor = 75, kMinor = 76;
    int device = 0, major = 0, minor = 0;
    if (get == nullptr || attribute == nullptr || get(&device, ordinal) != 0 ||
        attribute(&major, kMajor, device) != 0 || attribute(&minor, kMinor, device) != 0) {
      return absl::FailedPreconditionError(
          absl::StrCat("cannot read the compute capability of CUDA device ", ordinal));
    }
    return absl::StrCat("sm_", major, minor);
  }
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
    if (s.driver.copies.ok()) {
      // A pinned upload into this memory may still be running (cuMemFree need not wait
      // for it): wait, and give its block back.
      std::lock_guard<std::mutex> lock(CopyMutex());
      halide_buffer_t* b = buffer->raw_buffer();
      WaitForUploadsInto(s.driver, b->device, b->size_in_bytes());
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
  if (s.driver.copies.ok()) {
    std::lock_guard<std::mutex> lock(device::CopyMutex());
    device::ReleaseFinishedUploads(s.driver, /*stream_idle=*/true);
  }
  return absl::OkStatus();
}

void SetCudaPinnedCopies(bool enabled) {
  device::PinnedEnabled().store(enabled, std::memory_order_relaxed);
}

void SetCudaPinnedBytesInUseLimit(size_t bytes) {
  device::PinnedPool().set_max_in_use_bytes(bytes);
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
  stats.pinned_bytes_in_use = pool.in_use_bytes;
  stats.pinned_blocks_reused = pool.reused;
  stats.pageable_over_cap = device::PageableOverCap().load(std::memory_order_relaxed);
  return stats;
}

absl::Status RunInCudaContext(int ordinal, const std::function<absl::Status()>& fn) {
  BRAZE_RETURN_IF_ERROR(device::CudaInterface(ordinal).status());
  device::ContextScope scope(device::State());
  if (!scope.ok()) return absl::InternalError("cannot make the CUDA context current");
  return fn();
}

}  // namespace braze
