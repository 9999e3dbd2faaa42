// CompileCluster: lower, schedule (falling through the scheduler chain), JIT-compile,
// and the CompiledKernel that runs the result on HostTensors without copying.
//
// Every Halide call sits inside CatchHalideErrors, so compile-time and run-time errors
// come back as Status. Kernels run through Pipeline::realize, whose JIT error handler
// records the message and throws instead of calling the default handler (which would
// abort the process, HALIDE14.md rule 4).
#include "compile/compile.h"

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <mutex>
#include <sstream>
#include <thread>
#include <utility>

#include "Halide.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "braze/status.h"
#include "compile/gpu_scheduling.h"
#include "device/device_tensor_impl.h"
#include "device/halide_util.h"
#include "device/jit_memory.h"
#include "ir/logging.h"
#include "lower/lower_util.h"
#include "lower/lowering.h"
#include "schedule/autoschedule.h"
#include "schedule/safe_default.h"
#include "schedule/schedule_check.h"

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

// Halide's thread pool is process-wide. halide_set_num_threads is not exported by
// libHalide, only by the JIT shared runtime, which exists after the first compile_jit
// (HALIDE14.md §3). Setting the count before the pool's first parallel call is
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

  absl::Status Run(absl::Span<const HostTensor* const> inputs,
                   absl::Span<HostTensor* const> outputs) override {
    if (on_device_) {
      return absl::FailedPreconditionError(
          absl::StrCat(name_, ": a CUDA kernel runs on device tensors (RunOnDevice)"));
    }
    if (inputs.size() != lowered_.params.size() || outputs.size() != lowered_.output_types.size()) {
      return absl::InvalidArgumentError(
          absl::StrCat(name_, ": Run got ", inputs.size(), " inputs and ", outputs.size(),
                       " outputs; the kernel takes ", lowered_.params.size(), " and ",
                       lowered_.output_types.size()));
    }
    // Halide checks the type and exact shape of every buffer it is given (bounds and
    // strides are set at compile time); tensors it never sees are checked here.
    for (size_t i = 0; i < inputs.size(); ++i) {
      if (inputs[i] == nullptr) {
        return absl::InvalidArgumentError(absl::StrCat(name_, ": input ", i, " is null"));
      }
    }
    for (size_t j = 0; j < outputs.size(); ++j) {
      if (outputs[j] == nullptr) {
        return absl::InvalidArgumentError(absl::StrCat(name_, ": output ", j, " is null"));
      }
      if (lowered_.pipeline_output[j] < 0 && outputs[j]->type() != lowered_.output_types[j]) {
        return absl::InvalidArgumentError(
            absl::StrCat(name_, ": output ", j, " is ", TypeString(outputs[j]->type()),
                         ", expected ", TypeString(lowered_.output_types[j])));
      }
    }
    for (size_t i = 0; i < inputs.size(); ++i) {
      if (lowered_.input_elided[i] && inputs[i]->num_elements() != 0) {
        return absl::InvalidArgumentError(
            absl::StrCat(name_, ": input ", i, " is ", TypeString(inputs[i]->type()),
                         " but the kernel was compiled for an empty tensor"));
      }
    }
    if (lowered_.info.outputs.empty()) return absl::OkStatus();  // nothing to compute

    ThreadCount::Use(num_threads_, target_);
    absl::Status status = CatchHalideErrors(
        name_ + ": Halide run-time error", absl::StatusCode::kInvalidArgument, [&] {
          for (size_t i = 0; i < inputs.size(); ++i) {
            if (lowered_.input_elided[i]) continue;
            lowered_.params[i].set(Wrap(const_cast<HostTensor&>(*inputs[i])));
          }
          std::vector<Halide::Buffer<>> buffers;
          for (size_t j = 0; j < outputs.size(); ++j) {
            if (lowered_.pipeline_output[j] >= 0) buffers.push_back(Wrap(*outputs[j]));
          }
          Halide::Realization realization(buffers);
          pipeline_.realize(realization, target_);
          return absl::OkStatus();
        });
    // Drop the references to the caller's memory.
    for (size_t i = 0; i < inputs.size(); ++i) {
      if (!lowered_.input_elided[i]) lowered_.params[i].reset();
    }
    return status;
  }

  absl::Status RunOnDevice(absl::Span<DeviceTensor* const> inputs,
                           absl::Span<DeviceTensor* const> outputs) override {
    if (!on_device_) return CompiledKernel::RunOnDevice(inputs, outputs);
    if (inputs.size() != lowered_.params.size() || outputs.size() != lowered_.output_types.size()) {
      return absl::InvalidArgumentError(
          absl::StrCat(name_, ": RunOnDevice got ", inputs.size(), " inputs and ", outputs.size(),
                       " outputs; the kernel takes ", lowered_.params.size(), " and ",
                       lowered_.output_types.size()));
    }
    for (size_t i = 0; i < inputs.size(); ++i) {
      if (inputs[i] == nullptr) {
        return absl::InvalidArgumentError(absl::StrCat(name_, ": input ", i, " is null"));
      }
      if (lowered_.input_elided[i] && inputs[i]->num_elements() != 0) {
        return absl::InvalidArgumentError(
            absl::StrCat(name_, ": input ", i, " is ", TypeString(inputs[i]->type()),
                         " but the kernel was compiled for an empty tensor"));
      }
    }
    for (size_t j = 0; j < outputs.size(); ++j) {
      if (outputs[j] == nullptr || outputs[j]->type() != lowered_.output_types[j]) {
        return absl::InvalidArgumentError(absl::StrCat(name_, ": output ", j,
                                                       " must be a device tensor of ",
                                                       TypeString(lowered_.output_types[j])));
      }
    }
    if (lowered_.info.outputs.empty()) return absl::OkStatus();
    device::TakeRuntimeError();  // drop messages of earlier calls
    absl::Status status = CatchHalideErrors(name_ + ": Halide run-time error",
                                            absl::StatusCode::kInvalidArgument, [&] {
                                              for (size_t i = 0; i < inputs.size(); ++i) {
                                                if (!lowered_.input_elided[i])
                                                  lowered_.params[i].set(inputs[i]->impl().buffer);
                                              }
                                              std::vector<Halide::Buffer<>> buffers;
                                              for (size_t j = 0; j < outputs.size(); ++j) {
                                                if (lowered_.pipeline_output[j] >= 0)
                                                  buffers.push_back(outputs[j]->impl().buffer);
                                              }
                                              Halide::Realization realization(buffers);
                                              pipeline_.realize(realization, target_);
                                              return absl::OkStatus();
                                            });
    for (size_t i = 0; i < inputs.size(); ++i) {
      if (!lowered_.input_elided[i]) lowered_.params[i].reset();
    }
    // The CUDA runtime reports some errors (an unknown CUDA error code, say) through
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
  void set_compile_ms(double ms) { compile_ms_ = ms; }

 private:
  // A Halide buffer over the tensor's own memory (no copy), dims reversed; rank 0 is
  // one element of a 1-D buffer, as the pipeline sees it.
  static Halide::Buffer<> Wrap(HostTensor& t) {
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

absl::StatusOr<std::string> JitTargetString(bool cuda) {
  std::string result;
  BRAZE_RETURN_IF_ERROR(
      CatchHalideErrors("bad Halide target", absl::StatusCode::kInvalidArgument, [&] {
        result = (cuda ? device::CudaJitTarget() : device::SanitizedJitTarget()).to_string();
        return absl::OkStatus();
      }));
  return result;
}

// kAuto's choice (see compile.h): row reductions and matmuls get the safe default.
SchedulerKind PickScheduler(const schedule::PipelineInfo& info) {
  for (const schedule::Stage& stage : info.stages) {
    const bool reduction =
        stage.kind == schedule::StageKind::kReduction || stage.kind == schedule::StageKind::kArgMax;
    if (reduction && stage.reduces_innermost) return SchedulerKind::kSafeDefault;
    if (stage.kind == schedule::StageKind::kMatMul) return SchedulerKind::kSafeDefault;
  }
  return SchedulerKind::kAdams2019;
}

// The CUDA JIT: the GPU schedule chain of options.gpu_scheduler, compiled for
// CudaJitTarget(). Compiling needs no GPU; running does.
static absl::StatusOr<std::unique_ptr<CompiledKernel>> CompileCudaCluster(
    const ClusterSpec& spec, const CompileOptions& options, const std::string& name,
    const Halide::Target& target, std::chrono::steady_clock::time_point start) {
  std::vector<std::string> failures;
  const std::vector<SchedulerKind> chain = SchedulerChain(options.gpu_scheduler, /*gpu=*/true);
  for (SchedulerKind kind : chain) {
    const std::string what = SchedulerName(kind);
    // Fresh Funcs every attempt: a failed schedule leaves directives on the old ones.
    BRAZE_ASSIGN_OR_RETURN(LoweredCluster lowered, lower::LowerCluster(spec));
    Halide::Pipeline pipeline;
    std::string schedule = "(every output is empty: nothing to compute)\n";
    if (!lowered.info.outputs.empty()) {
      absl::Status s = CatchHalideErrors(what, absl::StatusCode::kInternal, [&] {
        device::HalideOutputCapture halide_output;  // to the log at --v=2
        pipeline = Halide::Pipeline(lowered.info.outputs);
        device::UseJitBufferCache(&pipeline.jit_handlers());
        device::UseCudaHandlers(&pipeline.jit_handlers());
        schedule = compile::ApplyGpuScheduler(kind, lowered, pipeline, target);
        pipeline.compile_jit(target);
        return absl::OkStatus();
      });
      if (!s.ok()) {
        failures.push_back(s.message().rfind(what, 0) == 0 ? std::string(s.message())
                                                           : absl::StrCat(what, ": ", s.message()));
        LogFallThrough(name, failures.back(), kind == chain.back());
        continue;
      }
    }
    auto kernel = std::make_unique<HalideKernel>(
        name, std::move(lowered), std::move(pipeline), target, options.num_threads, kind, failures,
        absl::StrCat("// CUDA: ", what, "\n", schedule), /*on_device=*/true);
    kernel->set_compile_ms(
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
            .count());
    return std::unique_ptr<CompiledKernel>(std::move(kernel));
  }
  return absl::InternalError(
      absl::StrCat(name, ": every GPU schedule failed: ", absl::StrJoin(failures, "; ")));
}

absl::StatusOr<std::unique_ptr<CompiledKernel>> CompileCluster(const ClusterSpec& spec,
                                                               const CompileOptions& options) {
  const auto start = std::chrono::steady_clock::now();
  const std::string name = spec.name.empty() ? "cluster" : spec.name;
  if (options.num_threads < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(name, ": num_threads must be >= 0, got ", options.num_threads));
  }
  const int parallelism = options.num_threads > 0 ? options.num_threads : HardwareThreads();
  Halide::Target target;
  BRAZE_RETURN_IF_ERROR(
      CatchHalideErrors(name + ": bad Halide target", absl::StatusCode::kInvalidArgument, [&] {
        target = options.cuda ? device::CudaJitTarget() : device::SanitizedJitTarget();
        return absl::OkStatus();
      }));
  if (options.cuda) return CompileCudaCluster(spec, options, name, target, start);
  SchedulerKind first = options.scheduler;
  if (first == SchedulerKind::kAuto) {
    BRAZE_ASSIGN_OR_RETURN(LoweredCluster probe, lower::LowerCluster(spec));
    // Auto's safe-default chain goes on to the autoschedulers (scheduler.h).
    if (PickScheduler(probe.info) == SchedulerKind::kAdams2019) first = SchedulerKind::kAdams2019;
  }
  const std::vector<SchedulerKind> chain = SchedulerChain(first, /*gpu=*/false);
  std::vector<std::string> failures;
  for (SchedulerKind kind : chain) {
    BRAZE_ASSIGN_OR_RETURN(LoweredCluster lowered, lower::LowerCluster(spec));
    Halide::Pipeline pipeline;
    std::string schedule;
    std::string timing;
    if (!lowered.info.outputs.empty()) {
      absl::Status s = CatchHalideErrors(SchedulerName(kind), absl::StatusCode::kInternal, [&] {
        // Adams2019's passes, lowering's warnings: to the log at --v=2.
        device::HalideOutputCapture halide_output;
        pipeline = Halide::Pipeline(lowered.info.outputs);
        device::UseJitBufferCache(&pipeline.jit_handlers());
        const auto t0 = std::chrono::steady_clock::now();
        if (kind == SchedulerKind::kSafeDefault) {
          schedule = schedule::ApplySafeDefault(lowered.info, target, parallelism);
        } else {
          schedule = schedule::ApplyAutoscheduler(kind, pipeline, target, parallelism);
        }
        const std::vector<std::string> repaired =
            schedule::DevectorizeGuardedUpdates(lowered.info.outputs);
        if (!repaired.empty()) {
          schedule += absl::StrCat(
              "// Serial instead of vectorized (Halide 14 miscompiles ",
              "vectorized GuardWithIf updates): ", absl::StrJoin(repaired, ", "), "\n");
        }
        const auto t1 = std::chrono::steady_clock::now();
        pipeline.compile_jit(target);
        const auto t2 = std::chrono::steady_clock::now();
        timing = absl::StrFormat("// schedule %.1f ms, compile_jit %.1f ms\n",
                                 std::chrono::duration<double, std::milli>(t1 - t0).count(),
                                 std::chrono::duration<double, std::milli>(t2 - t1).count());
        return absl::OkStatus();
      });
      if (!s.ok()) {
        failures.push_back(s.message().rfind(SchedulerName(kind), 0) == 0
                               ? std::string(s.message())
                               : absl::StrCat(SchedulerName(kind), ": ", s.message()));
        LogFallThrough(name, failures.back(), kind == chain.back());
        continue;
      }
    } else {
      schedule = "(every output is empty: nothing to compute)\n";
    }
    auto kernel = std::make_unique<HalideKernel>(
        name, std::move(lowered), std::move(pipeline), target, options.num_threads, kind, failures,
        absl::StrCat("// ", SchedulerName(kind), "\n", timing, schedule));
    kernel->set_compile_ms(
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
            .count());
    return std::unique_ptr<CompiledKernel>(std::move(kernel));
  }
  return absl::InternalError(
      absl::StrCat(name, ": every scheduler failed: ", absl::StrJoin(failures, "; ")));
}

}  // namespace braze
