// Compiling one cluster into one Halide pipeline, without exposing Halide: the runtime
// and tests see only ClusterSpec -> CompiledKernel. Halide errors (compile or run time)
// come back as absl::Status; no Halide handler may abort the process.
#ifndef BRAZE_COMPILE_COMPILE_H_
#define BRAZE_COMPILE_COMPILE_H_

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "braze/device.h"
#include "braze/host_tensor.h"
#include "device/device_tensor.h"
#include "lower/cluster_spec.h"
#include "schedule/scheduler.h"
#include "schedule/stored_schedule.h"

namespace braze {

// The least batch * m * n * k for which a matmul calls the CPU GEMM library: below it
// the call's fixed cost exceeds Braze's own tiled loops. It was 2^21 while every call
// started libgomp's team (at 64^3 dnnl_sgemm took 39 us, OpenBLAS 5); a call on one
// matrix now runs on Braze's pool (docs/CPU_GEMM.md, "One pool"), and from 2^18 the
// training steps measured were faster on the library or level ("Why").
inline constexpr int64_t kLibraryGemmMinWork = int64_t{1} << 18;
// The same for a convolution (batch * output pixels * output channels * taps): its
// oneDNN call still starts libgomp's team.
inline constexpr int64_t kLibraryConvMinWork = int64_t{1} << 21;

struct CompileOptions {
  // CPU kernels: which scheduler starts the chain (schedule/scheduler.h).
  Scheduler scheduler = Scheduler::kAuto;
  // Halide worker threads while this kernel runs; 0: Halide's default (HL_NUM_THREADS,
  // else all cores). Halide's pool is process-wide: the count is applied before each Run
  // whose kernel asks for a different one than the last Run did.
  int num_threads = 0;
  // The device the kernel runs on (its backend, device/backend.h, gives the target and
  // the runtime handlers). A GPU (CUDA: the JIT host target plus cuda_capability_86)
  // starts the GPU chain at `gpu_scheduler` (Li2018 or a heuristic plan), and its
  // kernel launches on DeviceTensors of device `device.index`.
  Device device;
  Scheduler gpu_scheduler = Scheduler::kGpuFused;
  // The cluster key (compile/cluster_key.h) under which a CPU kernel is kept in the
  // disk cache (compile/disk_cache.h); empty: the disk cache is not used.
  std::string disk_key;
  // A stored, tuned schedule for this cluster (schedule/stored_schedule.h; CPU only),
  // tried before the scheduler chain. When it cannot apply (Halide refuses it, or it
  // names an autoscheduler for a symbolic cluster) one warning names its file and the
  // chain runs as without it.
  std::optional<StoredSchedule> stored_schedule;
  // CPU safe-default kernels: an f32 MatMul/BatchMatMul of at least
  // kLibraryGemmMinWork multiply-adds calls the CPU GEMM library (device/cpu_gemm.h)
  // from inside the pipeline when it loads (SessionOptions::cpu_matmul; a stored
  // schedule's matmul_library can turn it off per cluster).
  bool cpu_gemm_library = true;
  // The least batch * m * n * k for which it does (BRAZE_FLAGS --cpu_gemm_min_work); a
  // convolution's threshold is kLibraryConvMinWork while this is the default, else this.
  int64_t cpu_gemm_min_work = kLibraryGemmMinWork;
};

// A kernel argument: a tensor in host memory or in a device's memory (one is set).
struct KernelArg {
  HostTensor* host = nullptr;
  DeviceTensor* device = nullptr;
  // An input is only read: a kernel never writes through an input's pointer.
  static KernelArg Host(const HostTensor* t) { return {const_cast<HostTensor*>(t), nullptr}; }
  static KernelArg Device(DeviceTensor* t) { return {nullptr, t}; }
};

class CompiledKernel {
 public:
  virtual ~CompiledKernel() = default;
  // The one launch path, for every backend and every kind of kernel (its checks,
  // buffer wrapping and thread setting are compile/launch.h's): inputs and outputs in
  // ClusterSpec order, in the memory the kernel was compiled for (host tensors for CPU
  // kernels, device tensors of `CompileOptions::device` for GPU kernels, see
  // on_device()); outputs preallocated with output_types(), written in place. Device
  // kernels are asynchronous (queued on the device's stream). Thread-compatible: one
  // Launch at a time per kernel. Outputs are written through the pointers in `outputs`.
  virtual absl::Status Launch(absl::Span<const KernelArg> inputs,
                              absl::Span<const KernelArg> outputs) = 0;
  // Launch on host tensors (CPU kernels).
  absl::Status Run(absl::Span<const HostTensor* const> inputs,
                   absl::Span<HostTensor* const> outputs);
  // Launch on device tensors (device kernels).
  absl::Status RunOnDevice(absl::Span<DeviceTensor* const> inputs,
                           absl::Span<DeviceTensor* const> outputs);
  // True when the kernel's arguments live in a device's memory.
  virtual bool on_device() const { return false; }
  virtual const std::vector<TensorType>& output_types() const = 0;
  // The scheduler that actually produced the schedule (after fall-through).
  virtual Scheduler scheduler_used() const = 0;
  // Why each scheduler tried before scheduler_used() failed, in order, one entry each:
  // "<Scheduler>: <Halide's message>". Empty when the chosen scheduler worked.
  virtual const std::vector<std::string>& scheduler_failures() const = 0;
  virtual double compile_ms() const = 0;
  // Lowered statement / schedule text, for dumps.
  virtual std::string schedule_text() const = 0;
  // Halide's lowered statement of the scheduled pipeline (loop nest after scheduling),
  // produced on request: it lowers the pipeline again, so only dumps ask for it.
  virtual std::string lowered_stmt() const { return ""; }
  // A device kernel's generated device code, for dumps: OpenCL C for OpenCL, PTX for
  // CUDA, with its file extension ("cl", "ptx"); empty for CPU kernels. Produced on
  // request (it compiles the pipeline to a module again).
  struct DeviceSource {
    std::string extension, text;
  };
  virtual DeviceSource device_source() const { return {}; }
  // True when the kernel was loaded from the disk cache rather than compiled.
  virtual bool loaded_from_disk() const { return false; }
  // The stored schedule the kernel was compiled with ("stored schedule <file>"), or why
  // one was refused; empty when none was found. For --log_compiles.
  const std::string& schedule_note() const { return schedule_note_; }
  void set_schedule_note(std::string note) { schedule_note_ = std::move(note); }
  // What --log_compiles says of the disk cache for a kernel it compiled: why the
  // kernel was not stored there, or why the cache missed ("disk entry stale: Halide
  // build changed ..."). Empty when there is nothing to say or the cache was off.
  const std::string& disk_note() const { return disk_note_; }
  void set_disk_note(std::string note) { disk_note_ = std::move(note); }

 private:
  std::string disk_note_;
  std::string schedule_note_;
};

// Lowers, schedules (falling through the scheduler chain on failure) and JIT-compiles;
// a CPU kernel with options.disk_key goes through the disk cache first (loaded from it,
// or compiled ahead of time and stored). compile.cc has the map of the parts.
absl::StatusOr<std::unique_ptr<CompiledKernel>> CompileCluster(const ClusterSpec& spec,
                                                               const CompileOptions& options);

// The Halide target CompileCluster compiles for ("x86-64-linux-avx-avx2-...-jit"):
// HL_JIT_TARGET or the host, minus CPU features the host lacks, plus
// the device's features (cuda-cuda_capability_86 for CUDA). Part of any key for caching compiled
// kernels. InvalidArgument if HL_JIT_TARGET does not parse.
absl::StatusOr<std::string> JitTargetString(const Device& device = Device{});

// Which ops have a lowering: OpIsCompilable (braze/graph.h, from op_list.def).

}  // namespace braze

#endif  // BRAZE_COMPILE_COMPILE_H_
