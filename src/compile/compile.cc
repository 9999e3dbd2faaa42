// CompileCluster: lower, schedule (falling through the scheduler chain), JIT-compile,
// and the CompiledKernel that runs the result on HostTensors without copying.
//
// Every Halide call sits inside CatchHalideErrors, so compile-time and run-time errors
// come back as Status. Kernels run through Pipeline::realize, whose JIT error handler
// records the message and throws instead of calling the default handler (which would
// abort the process, docs/HALIDE14.md rule 4).
#include "compile/compile.h"

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <mutex>
#include <set>
#include <sstream>
#include <thread>
#include <utility>

#include "Halide.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "braze/status.h"
#include "compile/codegen_workarounds.h"
#include "compile/disk_cache.h"
#include "compile/gpu_scheduling.h"
#include "device/backend.h"
#include "device/cpu_gemm.h"
#include "device/device_tensor_impl.h"
#include "device/halide_util.h"
#include "device/jit_memory.h"
#include "device/stream_copy.h"
#include "device/thread_pool.h"
#include "ir/logging.h"
#include "lower/lower_util.h"
#include "lower/lowering.h"
#include "schedule/autoschedule.h"
#include "schedule/extremum_operands.h"
#include "schedule/lowered_check.h"
#include "schedule/safe_default.h"
#include "schedule/schedule_check.h"
#include "schedule/stream_stores.h"

namespace braze {

namespace {

using device::CatchHalideErrors;
using lower::LoweredCluster;

int HardwareThreads() { return std::max(1u, std::thread::hardware_concurrency()); }

// A scheduler of the chain failed and the next one gets the cluster: a verbose line, as
// the kernel's scheduler_failures() keep the reason anyway; when the last one fails, the
// compile's error says it all.
void LogFallThrough(const std::string& name, const std::string& failure, bool last) {
  if (last || !VLogIsOn(1)) return;
  LogInfo(1, absl::StrCat(name, ": ", failure, "; falling through to the next scheduler"));
}

// Halide's thread pool is process-wide; kernels' loops run on Braze's (device/
// thread_pool.h), Halide's takes those launched while Braze's is busy, whose
// halide_default_do_par_for is found here too. halide_set_num_threads is not exported by
// libHalide, only by the JIT shared runtime, which exists after the first compile_jit
// (docs/HALIDE14.md §3). Setting the count before the pool's first parallel call is
// reliable; raising it later takes effect at once, lowering it may lag.
class ThreadCount {
 public:
  static void Use(int n, const Halide::Target& target) {
    if (current_.load(std::memory_order_relaxed) == n) return;
    static std::mutex mu;
    std::lock_guard<std::mutex> lock(mu);
    if (set_num_threads_ == nullptr) {
      for (auto& module : Halide::Internal::JITSharedRuntime::get(
               nullptr, target.with_feature(Halide::Target::JIT), false)) {
        auto symbol = module.find_symbol_by_name("halide_set_num_threads");
        if (symbol.address != nullptr) {
          set_num_threads_ = reinterpret_cast<int (*)(int)>(symbol.address);
          // The same runtime's pool takes loops Braze's is too busy for (thread_pool.h).
          auto pool = module.find_symbol_by_name("halide_default_do_par_for");
          if (pool.address != nullptr) {
            device::SetJitHalidePool(reinterpret_cast<device::ParallelForFunction>(pool.address));
          }
          break;
        }
      }
      if (set_num_threads_ == nullptr) return;  // no JIT runtime yet: nothing runs
    }
    set_num_threads_(n);  // 0 restores Halide's default (HL_NUM_THREADS or all cores)
    current_.store(n, std::memory_order_relaxed);
  }

 private:
  static inline std::atomic<int> current_{-1};
  static inline int (*set_num_threads_)(int) = nullptr;
};

class HalideKernel : public CompiledKernel {
 public:
  HalideKernel(std::string name, LoweredCluster lowered, Halide::Pipeline pipeline,
               Halide::Target target, int num_threads, SchedulerKind used,
               std::vector<std::string> failures, std::string schedule, bool on_device = false)
      : name_(std::move(name)),
        lowered_(std::move(lowered)),
        pipeline_(std::move(pipeline)),
        target_(std::move(target)),
        num_threads_(num_threads),
        used_(used),
        failures_(std::move(failures)),
        schedule_(std::move(schedule)),
        on_device_(on_device) {}

  absl::Status Launch(absl::Span<const KernelArg> inputs,
                      absl::Span<const KernelArg> outputs) override {
    BRAZE_RETURN_IF_ERROR(CheckArgs(inputs, outputs));
    if (lowered_.info.outputs.empty()) return absl::OkStatus();  // nothing to compute
    if (!on_device_) ThreadCount::Use(num_threads_, target_);
    device::ScopedKernelThreads threads(num_threads_);
    device::TakeRuntimeError();  // drop messages of earlier calls
    absl::Status status = CatchHalideErrors(name_ + ": Halide run-time error",
                                            absl::StatusCode::kInvalidArgument, [&] {
                                              for (size_t i = 0; i < inputs.size(); ++i) {
                                                if (!lowered_.input_elided[i])
                                                  lowered_.params[i].set(BufferOf(inputs[i]));
                                              }
                                              std::vector<Halide::Buffer<>> buffers;
                                              for (size_t j = 0; j < outputs.size(); ++j) {
                                                if (lowered_.pipeline_output[j] >= 0)
                                                  buffers.push_back(BufferOf(outputs[j]));
                                              }
                                              Halide::Realization realization(buffers);
                                              pipeline_.realize(realization, target_);
                                              return absl::OkStatus();
                                            });
    // Drop the references to the caller's memory.
    for (size_t i = 0; i < inputs.size(); ++i) {
      if (!lowered_.input_elided[i]) lowered_.params[i].reset();
    }
    // A device runtime reports some errors (an unknown CUDA error code, say) through
    // the default handler rather than the pipeline's: add them.
    if (std::string more = device::TakeRuntimeError(); !status.ok() && !more.empty()) {
      status = absl::Status(status.code(), absl::StrCat(status.message(), " [", more, "]"));
    }
    return status;
  }
  bool on_device() const override { return on_device_; }

  const std::vector<TensorType>& output_types() const override { return lowered_.output_types; }
  SchedulerKind scheduler_used() const override { return used_; }
  const std::vector<std::string>& scheduler_failures() const override { return failures_; }
  double compile_ms() const override { return compile_ms_; }
  std::string schedule_text() const override { return schedule_; }
  std::string lowered_stmt() const override {
    if (lowered_.info.outputs.empty()) return "// nothing to compute: every output is empty\n";
    std::vector<Halide::Argument> args;
    for (size_t i = 0; i < lowered_.params.size(); ++i) {
      if (!lowered_.input_elided[i]) args.push_back(lowered_.params[i]);
    }
    char path[] = "/tmp/braze_stmt_XXXXXX";
    const int fd = mkstemp(path);
    if (fd < 0) return "// could not create a temporary file for the statement\n";
    close(fd);
    std::string text;
    absl::Status s =
        CatchHalideErrors(name_ + ": lowered statement", absl::StatusCode::kInternal, [&] {
          device::HalideOutputCapture halide_output;  // lowering repeats its warnings
          Halide::Pipeline p = pipeline_;
          p.compile_to_lowered_stmt(path, args, Halide::Text, target_);
          return absl::OkStatus();
        });
    std::ifstream in(path);
    std::stringstream ss;
    ss << in.rdbuf();
    std::remove(path);
    return s.ok() ? ss.str() : absl::StrCat("// ", s.message(), "\n");
  }
  DeviceSource device_source() const override {
    if (!on_device_ || lowered_.info.outputs.empty()) return {};
    std::vector<Halide::Argument> args;
    for (size_t i = 0; i < lowered_.params.size(); ++i) {
      if (!lowered_.input_elided[i]) args.push_back(lowered_.params[i]);
    }
    DeviceSource source;
    source.extension = target_.has_feature(Halide::Target::OpenCL) ? "cl" : "ptx";
    absl::Status s = CatchHalideErrors(name_ + ": device source", absl::StatusCode::kInternal, [&] {
      device::HalideOutputCapture halide_output;
      Halide::Pipeline p = pipeline_;
      const Halide::Module module = p.compile_to_module(args, "braze_dump", target_);
      // Halide keeps each GPU loop nest's source in a buffer "..._gpu_source_kernels".
      for (const Halide::Buffer<>& b : module.buffers()) {
        if (b.name().find("gpu_source_kernels") == std::string::npos) continue;
        const char* bytes = static_cast<const char*>(b.data());
        std::string text(bytes, bytes + b.size_in_bytes());
        while (!text.empty() && text.back() == '\0') text.pop_back();
        absl::StrAppend(&source.text, "// ", b.name(), "\n", text, "\n");
      }
      return absl::OkStatus();
    });
    if (!s.ok()) source.text = absl::StrCat("// ", s.message(), "\n");
    return source;
  }
  void set_compile_ms(double ms) { compile_ms_ = ms; }

 private:
  // Halide checks the type and exact shape of every buffer it is given (bounds and
  // strides are set at compile time); what it never sees is checked here: counts,
  // nulls, the memory space, outputs that are not pipeline outputs, elided inputs.
  absl::Status CheckArgs(absl::Span<const KernelArg> inputs,
                         absl::Span<const KernelArg> outputs) const {
    if (inputs.size() != lowered_.params.size() || outputs.size() != lowered_.output_types.size()) {
      return absl::InvalidArgumentError(
          absl::StrCat(name_, ": launched with ", inputs.size(), " inputs and ", outputs.size(),
                       " outputs; the kernel takes ", lowered_.params.size(), " and ",
                       lowered_.output_types.size()));
    }
    const char* want = on_device_ ? "a device tensor" : "a host tensor";
    auto check = [&](const KernelArg& a, const char* what, size_t i) -> absl::Status {
      const bool ok = on_device_ ? (a.device != nullptr && a.host == nullptr)
                                 : (a.host != nullptr && a.device == nullptr);
      if (!ok)
        return absl::InvalidArgumentError(
            absl::StrCat(name_, ": ", what, " ", i, " must be ", want));
      return absl::OkStatus();
    };
    for (size_t i = 0; i < inputs.size(); ++i) {
      BRAZE_RETURN_IF_ERROR(check(inputs[i], "input", i));
      const TensorType type = TypeOf(inputs[i]);
      if (lowered_.input_elided[i] && NumElements(type.shape) != 0) {
        return absl::InvalidArgumentError(
            absl::StrCat(name_, ": input ", i, " is ", TypeString(type),
                         " but the kernel was compiled for an empty tensor"));
      }
    }
    for (size_t j = 0; j < outputs.size(); ++j) {
      BRAZE_RETURN_IF_ERROR(check(outputs[j], "output", j));
      const bool checked_by_halide = lowered_.pipeline_output[j] >= 0;
      const TensorType& want = lowered_.output_types[j];  // -1 dims: symbolic
      const TensorType got = TypeOf(outputs[j]);
      if (!checked_by_halide && (got.dtype != want.dtype || !ShapeMatches(want.shape, got.shape))) {
        return absl::InvalidArgumentError(
            absl::StrCat(name_, ": output ", j, " is ", TypeString(TypeOf(outputs[j])),
                         ", expected ", TypeString(lowered_.output_types[j])));
      }
    }
    return absl::OkStatus();
  }

  static TensorType TypeOf(const KernelArg& a) {
    return a.host != nullptr ? a.host->type() : a.device->type();
  }

  // The argument as Halide sees it: a host tensor wrapped without a copy (dims
  // reversed; rank 0 is one element of a 1-D buffer, as the pipeline sees it), or the
  // device tensor's own buffer.
  static Halide::Buffer<> BufferOf(const KernelArg& a) {
    if (a.device != nullptr) return a.device->impl().buffer;
    HostTensor& t = *a.host;
    std::vector<int> sizes;
    for (int d = t.rank() - 1; d >= 0; --d) sizes.push_back(static_cast<int>(t.dim(d)));
    if (sizes.empty()) sizes.push_back(1);
    return Halide::Buffer<>(device::HalideType(t.dtype()), t.raw_data(), sizes);
  }

  const std::string name_;
  LoweredCluster lowered_;
  Halide::Pipeline pipeline_;
  const Halide::Target target_;
  const int num_threads_;
  const SchedulerKind used_;
  const std::vector<std::string> failures_;
  const std::string schedule_;
  const bool on_device_;
  double compile_ms_ = 0;
};

}  // namespace

namespace {

// The disk cache could not be used (no C compiler driver, an unwritable directory):
// said once per process, then kernels are JIT-compiled as without it.
void DiskCacheUnusable(const absl::Status& why) {
  static std::once_flag once;
  std::call_once(
      once, [&] { LogWarning(absl::StrCat("disk cache off for this process: ", why.message())); });
}

std::atomic<bool> disk_cache_broken{false};

// The non-elided inputs, the arguments of the compiled function.
std::vector<Halide::Argument> ArgumentsOf(const LoweredCluster& lowered) {
  std::vector<Halide::Argument> args;
  for (size_t i = 0; i < lowered.params.size(); ++i) {
    if (!lowered.input_elided[i]) args.push_back(lowered.params[i]);
  }
  return args;
}

}  // namespace

absl::StatusOr<std::string> JitTargetString(const Device& device) {
  return device::JitTargetString(device);
}

// Whether the cluster has a MatMul or BatchMatMul (which the GEMM library may take).
bool HasMatMul(const ClusterSpec& spec) {
  for (int id : spec.nodes) {
    const OpKind op = spec.graph->node(id).op();
    if (op == OpKind::kMatMul || op == OpKind::kBatchMatMul) return true;
  }
  return false;
}

// kAuto's choice (see compile.h): row reductions and matmuls get the safe default, and
// so does a pipeline with an output it writes with streaming stores, which the
// autoschedulers cannot (schedule/stream_stores.h).
SchedulerKind PickScheduler(const schedule::PipelineInfo& info, const Halide::Target& target,
                            int parallelism) {
  if (schedule::StreamsAnOutput(info, target, parallelism, ScheduleParams())) {
    return SchedulerKind::kSafeDefault;
  }
  for (const schedule::Stage& stage : info.stages) {
    const bool reduction =
        stage.kind == schedule::StageKind::kReduction || stage.kind == schedule::StageKind::kArgMax;
    if (reduction && stage.reduces_innermost) return SchedulerKind::kSafeDefault;
    if (stage.kind == schedule::StageKind::kMatMul ||
        stage.kind == schedule::StageKind::kLibraryMatMul) {
      return SchedulerKind::kSafeDefault;
    }
  }
  return SchedulerKind::kAdams2019;
}

namespace {

// Applies `kind` to the freshly lowered `lowered` (whose Funcs `pipeline` holds) for
// `target`; returns the schedule as text. Throws Halide::Error when Halide rejects it.
// `params`: a stored schedule's template factors (the safe default's own when null).
std::string ApplyScheduler(SchedulerKind kind, const LoweredCluster& lowered,
                           Halide::Pipeline& pipeline, const Halide::Target& target, bool gpu,
                           int parallelism, const ScheduleParams* params,
                           std::vector<std::string>* streamed) {
  if (gpu) return compile::ApplyGpuScheduler(kind, lowered, pipeline, target);
  // Found before an autoscheduler runs too: Mullapudi2016 inlines pure Funcs by
  // rewriting their readers' definitions (and refuses Funcs scheduled beforehand), after
  // which a shared value is no Func any more, and each reader rounds its own copy.
  const std::vector<Halide::Func> shared_before =
      kind == SchedulerKind::kSafeDefault ? std::vector<Halide::Func>()
                                          : schedule::ComparedReductionOperands(lowered.info);
  std::string schedule =
      kind == SchedulerKind::kSafeDefault
          ? schedule::ApplySafeDefault(lowered.info, target, parallelism,
                                       params ? *params : ScheduleParams(), streamed)
          : schedule::ApplyAutoscheduler(kind, pipeline, target, parallelism);
  if (kind != SchedulerKind::kSafeDefault) {
    std::set<std::string> shared_after;
    for (const Halide::Func& f : schedule::ComparedReductionOperands(lowered.info)) {
      shared_after.insert(f.name());
    }
    for (const Halide::Func& f : shared_before) {
      if (shared_after.count(f.name()) == 0) {
        // braze-fuzz seed 58698: x == max(x) false in whole columns of a Max gradient.
        throw Halide::CompileError(absl::StrCat(
            SchedulerName(kind), " inlined ", f.name(),
            ", which a reduction and a comparison both read, into their definitions: each "
            "would round its own copy"));
      }
    }
    // The autoschedulers may inline a value into both a reduction and a comparison
    // with it; stored once, both read the same bits (schedule/extremum_operands.h; the
    // safe default does this itself).
    for (Halide::Func f : schedule::ComparedReductionOperands(lowered.info)) {
      f.compute_root();
      schedule +=
          absl::StrCat("// ", f.name(), ": compute_root (read by a reduction and a comparison)\n");
    }
  }
  const std::vector<std::string> restored = schedule::StoreAtComputeLevels(lowered.info.outputs);
  if (!restored.empty()) {
    schedule += absl::StrCat("// Stored where computed (no sliding windows, Halide 14 ",
                             "miscompiles some): ", absl::StrJoin(restored, ", "), "\n");
  }
  const std::vector<std::string> repaired =
      schedule::DevectorizeGuardedUpdates(lowered.info.outputs);
  if (!repaired.empty()) {
    schedule +=
        absl::StrCat("// Serial instead of vectorized (Halide 14 miscompiles ",
                     "vectorized GuardWithIf updates): ", absl::StrJoin(repaired, ", "), "\n");
  }
  return schedule;
}

// Lowers the scheduled pipeline once more and rejects (throws Halide::CompileError) a
// schedule Halide 14 miscompiles silently or that could never run at these shapes
// (schedule/lowered_check.h). Costs one lowering, no code generation.
void CheckLowered(const LoweredCluster& lowered, Halide::Pipeline& pipeline,
                  const Halide::Target& target) {
  std::vector<Halide::Argument> args;
  for (size_t i = 0; i < lowered.params.size(); ++i) {
    if (!lowered.input_elided[i]) args.push_back(lowered.params[i]);
  }
  std::map<std::string, int64_t> output_sizes;
  for (size_t j = 0; j < lowered.output_types.size(); ++j) {
    // A symbolic output's size is known at run time only: its stores are not bounded.
    if (lowered.pipeline_output[j] < 0 || !IsFullyDefined(lowered.output_types[j].shape)) {
      continue;
    }
    const Halide::Func& f = lowered.info.outputs[lowered.pipeline_output[j]];
    output_sizes[f.name()] = std::max<int64_t>(1, NumElements(lowered.output_types[j].shape));
  }
  // Every buffer's min and extent that the lowering constrained to a constant.
  std::map<std::string, int64_t> known;
  auto note = [&](const Halide::Internal::Parameter& p) {
    for (int d = 0; d < p.dimensions(); ++d) {
      const std::string prefix = p.name() + ".";
      if (const int64_t* v = Halide::Internal::as_const_int(p.min_constraint(d))) {
        known[prefix + "min." + std::to_string(d)] = *v;
      }
      if (const int64_t* v = Halide::Internal::as_const_int(p.extent_constraint(d))) {
        known[prefix + "extent." + std::to_string(d)] = *v;
      }
    }
  };
  for (size_t i = 0; i < lowered.params.size(); ++i) {
    if (!lowered.input_elided[i]) note(lowered.params[i].parameter());
  }
  for (const Halide::Func& f : lowered.info.outputs) note(f.output_buffer().parameter());
  const Halide::Module module = pipeline.compile_to_module(args, "braze_check", target);
  const std::string problem = schedule::CheckLoweredModule(module, output_sizes, known);
  if (!problem.empty()) throw Halide::CompileError(problem);
}

// One schedule to try: a scheduler of the chain, or the stored schedule (`stored`).
struct Attempt {
  SchedulerKind kind;
  const StoredSchedule* stored = nullptr;
};

// The stored schedule, if any applies, then the chain that starts at `first`. A stored
// autoscheduler choice cannot apply to a symbolic cluster (only the safe default's
// splits hold for every size): refused with a warning, noted in `*note`.
std::vector<Attempt> Attempts(const CompileOptions& options, SchedulerKind first, bool gpu,
                              bool symbolic, std::string* note) {
  std::vector<Attempt> attempts;
  if (!gpu && options.stored_schedule) {
    const StoredSchedule& stored = *options.stored_schedule;
    if (symbolic && stored.params.scheduler != SchedulerKind::kSafeDefault) {
      const std::string why = absl::StrCat("it names ", SchedulerName(stored.params.scheduler),
                                           ", and this cluster has symbolic dims");
      WarnStoredScheduleRefused(stored.path, why);
      *note =
          absl::StrCat("stored schedule ", stored.path, " refused (", why, "): default schedule");
    } else {
      attempts.push_back({stored.params.scheduler, &stored});
    }
  }
  for (SchedulerKind kind : SchedulerChain(first, gpu)) attempts.push_back({kind});
  return attempts;
}

// How an attempt lowers: the CPU GEMM library takes the big f32 matmuls under the CPU
// safe default (the autoschedulers and GPU schedules plan their own loops), unless the
// options or the stored schedule turn it off or no library loads.
lower::LowerOptions LoweringFor(const CompileOptions& options, const Attempt& attempt, bool gpu,
                                int parallelism) {
  lower::LowerOptions lo;
  lo.gpu = gpu;
  lo.cuda = device::FeaturesOf(options.device).libdevice_math;
  const bool wanted = options.cpu_gemm_library && !gpu &&
                      attempt.kind == SchedulerKind::kSafeDefault &&
                      (attempt.stored == nullptr || attempt.stored->params.matmul_library);
  if (!wanted) return lo;
  const absl::Status available = CpuGemmAvailable();
  if (!available.ok()) {
    static std::once_flag once;  // not silent, but once per process, not per cluster
    std::call_once(once, [&] { LogWarning(std::string(available.message())); });
    return lo;
  }
  lo.library_gemm_min_work = options.cpu_gemm_min_work;
  lo.library_gemm_threads = parallelism;
  return lo;
}

// A pipeline calling the CPU GEMM library or the streaming copy gets their addresses
// from us: Braze's static libraries export no symbols for Halide's JIT linker to find.
void InstallJitExterns(const LoweredCluster& lowered, bool streams, Halide::Pipeline& pipeline) {
  std::map<std::string, Halide::JITExtern> externs;
  const Halide::Type buffer = Halide::type_of<halide_buffer_t*>();
  if (lowered.calls_library) {
    const Halide::ExternSignature signature(
        Halide::Int(32), false,
        {buffer, buffer, Halide::Int(32), Halide::Int(32), Halide::Int(32), Halide::Int(32),
         Halide::UInt(64), buffer});
    externs.emplace(kCpuGemmF32Symbol,
                    Halide::JITExtern(Halide::ExternCFunction(CpuGemmF32Address(), signature)));
    const Halide::ExternSignature bias_signature(
        Halide::Int(32), false,
        {buffer, buffer, buffer, Halide::Int(32), Halide::Int(32), Halide::Int(32), Halide::Int(32),
         Halide::Int(32), Halide::UInt(64), buffer});
    externs.emplace(kCpuGemmBiasF32Symbol, Halide::JITExtern(Halide::ExternCFunction(
                                               CpuGemmBiasF32Address(), bias_signature)));
  }
  if (streams) {
    const Halide::Type pointer = Halide::type_of<void*>();
    const Halide::ExternSignature signature(
        Halide::Int(32), false,
        {pointer, Halide::Int(64), pointer, Halide::Int(64), Halide::Int(64)});
    externs.emplace(kStreamCopySymbol,
                    Halide::JITExtern(Halide::ExternCFunction(StreamCopyAddress(), signature)));
    externs.emplace(kStreamFenceSymbol, Halide::JITExtern(Halide::ExternCFunction(
                                            StreamFenceAddress(),
                                            Halide::ExternSignature(Halide::Int(32), false, {}))));
  }
  if (!externs.empty()) pipeline.set_jit_externs(externs);
}

double MsSince(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t).count();
}

}  // namespace

absl::Status CompiledKernel::Run(absl::Span<const HostTensor* const> inputs,
                                 absl::Span<HostTensor* const> outputs) {
  std::vector<KernelArg> in, out;
  for (const HostTensor* t : inputs) in.push_back(KernelArg::Host(t));
  for (HostTensor* t : outputs) out.push_back(KernelArg{t, nullptr});
  return Launch(in, out);
}

absl::Status CompiledKernel::RunOnDevice(absl::Span<DeviceTensor* const> inputs,
                                         absl::Span<DeviceTensor* const> outputs) {
  std::vector<KernelArg> in, out;
  for (DeviceTensor* t : inputs) in.push_back(KernelArg::Device(t));
  for (DeviceTensor* t : outputs) out.push_back(KernelArg::Device(t));
  return Launch(in, out);
}

// One driver for every target: the chain of schedulers for the target (CPU: the
// options' scheduler, with kAuto resolved per cluster; GPU: the GPU chain), each tried
// on freshly lowered Funcs (a failed schedule leaves directives on the old ones) until
// Halide accepts one. Compiling needs no device; running a device kernel does.
absl::StatusOr<std::unique_ptr<CompiledKernel>> CompileCluster(const ClusterSpec& spec,
                                                               const CompileOptions& options) {
  const auto start = std::chrono::steady_clock::now();
  const std::string name = spec.name.empty() ? "cluster" : spec.name;
  if (options.num_threads < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(name, ": num_threads must be >= 0, got ", options.num_threads));
  }
  const device::Backend& backend = device::BackendFor(options.device);
  const bool gpu = backend.device_memory();
  const int parallelism = options.num_threads > 0 ? options.num_threads : HardwareThreads();
  Halide::Target target;
  BRAZE_RETURN_IF_ERROR(
      CatchHalideErrors(name + ": bad Halide target", absl::StatusCode::kInvalidArgument, [&] {
        target = backend.JitTarget();
        return absl::OkStatus();
      }));
  // The disk cache (compile/disk_cache.h), CPU kernels only: a stored kernel is loaded
  // instead of compiled; else the kernel is compiled ahead of time into it.
  disk_cache::Settings disk;
  std::string full_key, runtime_target;
  if (!gpu && !options.disk_key.empty() && !disk_cache_broken.load()) {
    disk = disk_cache::CurrentSettings();
    runtime_target = target.without_feature(Halide::Target::JIT).to_string();
    if (disk.enabled) {
      // Whether the GEMM library loads here (libdnnl may be gone since a kernel calling
      // it was stored: that kernel would fail, where a compile here lowers its matmuls to
      // Halide loops), asked only of clusters with a matmul; and the cores a kernel's
      // schedule and GEMM calls were sized for, when the options leave it to the machine
      // (a cache directory shared by machines of other sizes).
      const bool gemm = options.cpu_gemm_library && HasMatMul(spec) && CpuGemmAvailable().ok();
      full_key = disk_cache::FullKey(
          absl::StrCat(options.disk_key, ";gemm=", gemm ? 1 : 0, ";cores=", parallelism),
          runtime_target);
    }
  }
  std::string stale_note;  // why the disk cache missed, when another build stored it
  if (!full_key.empty()) {
    absl::StatusOr<std::unique_ptr<CompiledKernel>> stored =
        disk_cache::Load(disk, full_key, runtime_target, name, options.num_threads);
    if (stored.ok()) {
      const std::string text = (*stored)->schedule_text();
      if (options.stored_schedule && text.rfind("// stored schedule ", 0) == 0) {
        (*stored)->set_schedule_note(text.substr(3, text.find('\n') - 3));
      }
      return stored;
    }
    if (absl::IsNotFound(stored.status())) {
      stale_note = disk_cache::StaleNote(disk, options.disk_key, runtime_target);
    } else {
      disk_cache_broken = true;
      DiskCacheUnusable(stored.status());
      full_key.clear();
    }
  }
  // Lowering errors are the cluster's, not the schedule's: no point in going on.
  // Lowered as the safe default would lower it (the scheduler of every cluster with a
  // matmul), so the usual first attempt takes this lowering rather than making another.
  const Attempt likely{
      options.scheduler == SchedulerKind::kAuto ? SchedulerKind::kSafeDefault : options.scheduler,
      options.stored_schedule ? &*options.stored_schedule : nullptr};
  const lower::LowerOptions first_options = LoweringFor(options, likely, gpu, parallelism);
  BRAZE_ASSIGN_OR_RETURN(LoweredCluster first_lowering, lower::LowerCluster(spec, first_options));
  // No matmul the library would take: every attempt's lowering is this one.
  const bool library_irrelevant =
      first_options.library_gemm_min_work >= 0 && !first_lowering.calls_library;
  SchedulerKind first = gpu ? options.gpu_scheduler : options.scheduler;
  if (first_lowering.info.symbolic) {
    // Symbolic extents: only the safe default's splits are chosen to hold for every size
    // (schedule/pipeline_info.h); the caller compiles for concrete shapes if it fails.
    if (gpu || (first != SchedulerKind::kAuto && first != SchedulerKind::kSafeDefault)) {
      return absl::UnimplementedError(
          absl::StrCat(name, ": symbolic shapes are compiled by the CPU safe default only, not by ",
                       SchedulerName(first)));
    }
    first = SchedulerKind::kSafeDefault;
  } else if (!gpu && first == SchedulerKind::kAuto) {
    // Auto's safe-default chain goes on to the autoschedulers (scheduler.h).
    if (PickScheduler(first_lowering.info, target, parallelism) == SchedulerKind::kAdams2019) {
      first = SchedulerKind::kAdams2019;
    }
  }
  // Halide 14 assumes a constant embedded in ahead-of-time code is aligned to whatever
  // the index allows (only JIT code looks at the real address): with a vectorized,
  // predicated or shifted load that was an aligned 64-byte load from a misaligned
  // address, a SIGSEGV (braze-fuzz seeds 80005, 80006, ...: every crash embedded a
  // Const). Such kernels are JIT-compiled and not stored (docs/DISK_CACHE.md).
  std::string disk_note;
  if (first_lowering.embeds_constants && !full_key.empty()) {
    full_key.clear();
    disk_note = "not stored in the disk cache: it embeds a constant buffer";
  }
  std::string object_path;
  if (!full_key.empty()) {
    char path[] = "/tmp/braze_kernel_XXXXXX.o";
    const int fd = mkstemps(path, 2);
    if (fd >= 0) {
      close(fd);
      object_path = path;
    } else {
      full_key.clear();  // no temporary file: JIT-compiled, the cache untouched
    }
  }
  std::vector<std::string> failures;
  bool fresh = true;          // first_lowering's Funcs carry no schedule yet
  std::string schedule_note;  // --log_compiles: the stored schedule used or refused
  const std::vector<Attempt> attempts =
      Attempts(options, first, gpu, first_lowering.info.symbolic, &schedule_note);
  for (const Attempt& attempt : attempts) {
    const SchedulerKind kind = attempt.kind;
    const bool last = &attempt == &attempts.back();
    const std::string what = attempt.stored != nullptr
                                 ? absl::StrCat("stored schedule ", attempt.stored->path)
                                 : std::string(SchedulerName(kind));
    const lower::LowerOptions lowering = LoweringFor(options, attempt, gpu, parallelism);
    LoweredCluster lowered;
    const bool same_lowering =
        library_irrelevant || lowering.library_gemm_min_work == first_options.library_gemm_min_work;
    if (fresh && same_lowering) {
      lowered = std::move(first_lowering);
      fresh = false;
    } else {
      BRAZE_ASSIGN_OR_RETURN(lowered, lower::LowerCluster(spec, lowering));
    }
    // Stored kernels find the CPU GEMM library's extern and the streaming copy in the
    // stored runtime (disk_cache.cc's trampolines).
    const bool store = !full_key.empty();
    std::vector<std::string> streamed;
    Halide::Pipeline pipeline;
    std::string schedule = "(every output is empty: nothing to compute)\n";
    std::string timing;
    if (!lowered.info.outputs.empty()) {
      absl::Status s = CatchHalideErrors(what, absl::StatusCode::kInternal, [&] {
        // Autoscheduler progress, lowering's warnings: to the log at --v=2.
        device::HalideOutputCapture halide_output;
        pipeline = Halide::Pipeline(lowered.info.outputs);
        InstallCodegenWorkarounds(pipeline, gpu);
        backend.InstallHandlers(&pipeline.jit_handlers());
        const auto t0 = std::chrono::steady_clock::now();
        schedule = ApplyScheduler(kind, lowered, pipeline, target, gpu, parallelism,
                                  attempt.stored ? &attempt.stored->params : nullptr, &streamed);
        const double schedule_ms = MsSince(t0);
        const auto t1 = std::chrono::steady_clock::now();
        // Checked with plain stores: the rewrite to streaming stores (installed after)
        // copies each tile to exactly the elements the checked stores wrote.
        CheckLowered(lowered, pipeline, target);
        const double check_ms = MsSince(t1);
        auto rewritten = std::make_shared<int>(0);
        if (!streamed.empty()) {
          schedule::AddStreamStoresPass(pipeline, streamed, kStreamCopySymbol, kStreamFenceSymbol,
                                        rewritten);
        }
        InstallJitExterns(lowered, !streamed.empty(), pipeline);
        const auto t2 = std::chrono::steady_clock::now();
        if (store) {
          pipeline.compile_to_object(
              object_path, ArgumentsOf(lowered), "braze_kernel",
              target.without_feature(Halide::Target::JIT).with_feature(Halide::Target::NoRuntime));
        } else {
          pipeline.compile_jit(target);
        }
        timing =
            absl::StrFormat("// schedule %.1f ms, check %.1f ms, %s %.1f ms\n", schedule_ms,
                            check_ms, store ? "compile_to_object" : "compile_jit", MsSince(t2));
        if (!streamed.empty()) {
          // A tile loop the rewrite did not recognize keeps plain stores (same values).
          absl::StrAppend(&timing, "// ", *rewritten, " tile loop(s) of ",
                          absl::StrJoin(streamed, ", "), " rewritten to ", kStreamCopySymbol, "\n");
        }
        return absl::OkStatus();
      });
      if (!s.ok()) {
        failures.push_back(s.message().rfind(what, 0) == 0 ? std::string(s.message())
                                                           : absl::StrCat(what, ": ", s.message()));
        if (attempt.stored != nullptr) {
          WarnStoredScheduleRefused(attempt.stored->path, std::string(s.message()));
          schedule_note = absl::StrCat(what, " refused (Halide rejected it): default schedule");
        }
        LogFallThrough(name, failures.back(), last);
        if (VLogIsOn(2)) LogInfo(2, absl::StrCat(name, ": the refused schedule:\n", schedule));
        continue;
      }
    }
    if (attempt.stored != nullptr) {
      schedule_note = absl::StrCat(what, ": ", ParamsSummary(attempt.stored->params));
    }
    const std::string schedule_text = absl::StrCat(
        "// ", gpu ? options.device.ToString() + ": " : "",
        attempt.stored ? absl::StrCat(what, ": ", ParamsSummary(attempt.stored->params)) : what,
        "\n", timing, schedule);
    if (store && !lowered.info.outputs.empty()) {
      disk_cache::KernelLayout layout{
          lowered.input_elided, lowered.pipeline_output, lowered.output_types, kind, failures,
          schedule_text};
      absl::StatusOr<std::unique_ptr<CompiledKernel>> stored = disk_cache::StoreAndLoad(
          disk, full_key, runtime_target, name, options.num_threads, object_path, layout);
      std::remove(object_path.c_str());
      if (stored.ok()) {
        disk_cache::RecordBuild(disk, options.disk_key, runtime_target);
        if (!stale_note.empty()) (*stored)->set_disk_note(stale_note + "; compiled and stored");
        (*stored)->set_schedule_note(schedule_note);
        return stored;
      }
      // Not stored: JIT-compiled after all (the schedule is already on the pipeline).
      disk_cache_broken = true;
      DiskCacheUnusable(stored.status());
      disk_note = absl::StrCat("not stored in the disk cache: ", stored.status().message());
      absl::Status jit = CatchHalideErrors(what, absl::StatusCode::kInternal, [&] {
        device::HalideOutputCapture halide_output;
        pipeline.compile_jit(target);
        return absl::OkStatus();
      });
      if (!jit.ok()) return jit;
    }
    if (!object_path.empty()) std::remove(object_path.c_str());
    auto kernel =
        std::make_unique<HalideKernel>(name, std::move(lowered), std::move(pipeline), target,
                                       options.num_threads, kind, failures, schedule_text, gpu);
    kernel->set_compile_ms(MsSince(start));
    if (!stale_note.empty()) {
      disk_note = absl::StrCat(stale_note, disk_note.empty() ? "" : "; ", disk_note);
    }
    kernel->set_disk_note(disk_note);
    kernel->set_schedule_note(schedule_note);
    return std::unique_ptr<CompiledKernel>(std::move(kernel));
  }
  if (!object_path.empty()) std::remove(object_path.c_str());
  return absl::InternalError(absl::StrCat(name, ": every ", gpu ? "GPU schedule" : "scheduler",
                                          " failed: ", absl::StrJoin(failures, "; ")));
}

}  // namespace braze
