// RunSchedulerChain: lower, schedule (falling through the scheduler chain), compile
// (see scheduler_chain.h). Every Halide call sits inside CatchHalideErrors, so
// compile-time errors come back as Status.
#include "compile/scheduler_chain.h"

#include <algorithm>
#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <thread>
#include <utility>
#include <vector>

#include "Halide.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "braze/status.h"
#include "compile/codegen_workarounds.h"
#include "compile/float16_bits.h"
#include "compile/gpu_scheduling.h"
#include "compile/jit_kernel.h"
#include "device/backend.h"
#include "device/cpu_conv.h"
#include "device/cpu_gemm.h"
#include "device/features.h"
#include "device/halide_util.h"
#include "device/stream_copy.h"
#include "ir/logging.h"
#include "lower/conv_bn_fold.h"
#include "lower/lower_util.h"
#include "lower/lowering.h"
#include "schedule/autoschedule.h"
#include "schedule/extremum_operands.h"
#include "schedule/lowered_check.h"
#include "schedule/safe_default.h"
#include "schedule/schedule_check.h"
#include "schedule/stream_stores.h"

namespace braze {
namespace compile {

namespace {

using device::CatchHalideErrors;
using lower::kFoldNotePrefix;
using lower::LoweredCluster;

// A scheduler of the chain failed and the next one gets the cluster: a verbose line, as
// the kernel's scheduler_failures() keep the reason anyway; when the last one fails, the
// compile's error says it all.
void LogFallThrough(const std::string& name, const std::string& failure, bool last) {
  if (last || !VLogIsOn(1)) return;
  LogInfo(1, absl::StrCat(name, ": ", failure, "; falling through to the next scheduler"));
}

absl::StatusOr<Halide::Target> JitTarget(const device::Backend& backend, const std::string& name) {
  Halide::Target target;
  BRAZE_RETURN_IF_ERROR(
      CatchHalideErrors(name + ": bad Halide target", absl::StatusCode::kInvalidArgument, [&] {
        target = backend.JitTarget();
        return absl::OkStatus();
      }));
  return target;
}

// kAuto's choice (see compile.h): row reductions, matmuls, convolutions and attention
// (whose per-tile Funcs an autoscheduler may store whole: [Tq, Tk]) get the safe
// default (its register tiles), and so does a pipeline with an output it writes with
// streaming stores, which the autoschedulers cannot (schedule/stream_stores.h).
Scheduler PickScheduler(const schedule::PipelineInfo& info, const Halide::Target& target,
                        int parallelism) {
  if (schedule::StreamsAnOutput(info, target, parallelism, ScheduleParams())) {
    return Scheduler::kSafeDefault;
  }
  for (const schedule::Stage& stage : info.stages) {
    const bool reduction =
        stage.kind == schedule::StageKind::kReduction || stage.kind == schedule::StageKind::kArgMax;
    if (reduction && stage.reduces_innermost) return Scheduler::kSafeDefault;
    if (schedule::IsTiled(stage.kind) || stage.kind == schedule::StageKind::kLibraryMatMul ||
        stage.kind == schedule::StageKind::kAttention) {
      return Scheduler::kSafeDefault;
    }
  }
  return Scheduler::kAdams2019;
}

// Applies `kind` to the freshly lowered `lowered` (whose Funcs `pipeline` holds) for
// `target`; returns the schedule as text. Throws Halide::Error when Halide rejects it.
// `params`: a stored schedule's template factors (the safe default's own when null).
// `fresh`: the cluster lowered again, for Adams2019's bounded search (autoschedule.h).
std::string ApplyScheduler(Scheduler kind, const LoweredCluster& lowered,
                           Halide::Pipeline& pipeline, const Halide::Target& target, bool gpu,
                           int parallelism, const ScheduleParams* params,
                           std::vector<std::string>* streamed,
                           const schedule::FreshPipeline& fresh) {
  if (gpu) {
    return compile::ApplyGpuScheduler(kind, lowered, pipeline, target,
                                      params ? params->gpu : GpuScheduleParams());
  }
  // Found before an autoscheduler runs too: Mullapudi2016 inlines pure Funcs by
  // rewriting their readers' definitions (and refuses Funcs scheduled beforehand), after
  // which a shared value is no Func any more, and each reader rounds its own copy.
  const std::vector<Halide::Func> shared_before =
      kind == Scheduler::kSafeDefault ? std::vector<Halide::Func>()
                                      : schedule::ComparedReductionOperands(lowered.info);
  std::string schedule =
      kind == Scheduler::kSafeDefault
          ? schedule::ApplySafeDefault(lowered.info, target, parallelism,
                                       params ? *params : ScheduleParams(), streamed)
          : schedule::ApplyAutoscheduler(kind, pipeline, target, parallelism, fresh);
  if (kind != Scheduler::kSafeDefault) {
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
    // Inlining bounded as under the safe default (schedule/inline_budget.h): Halide's
    // lowering of an unbounded inlined expression takes time beyond the square of its size.
    for (absl::string_view line :
         absl::StrSplit(schedule::StoreInlineBreaks(lowered.info, target, parallelism), '\n',
                        absl::SkipEmpty())) {
      absl::StrAppend(&schedule, "// ", line, "\n");
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

// What the lowered-code checks know of the cluster (schedule/lowered_check.h): each
// output's elements and the buffer fields the lowering fixed.
schedule::LoweredCheckInputs CheckInputs(const LoweredCluster& lowered) {
  schedule::LoweredCheckInputs inputs;
  for (size_t j = 0; j < lowered.output_types.size(); ++j) {
    // A symbolic output's size is known at run time only: its stores are not bounded.
    if (lowered.pipeline_output[j] < 0 || !IsFullyDefined(lowered.output_types[j].shape)) {
      continue;
    }
    const Halide::Func& f = lowered.info.outputs[lowered.pipeline_output[j]];
    inputs.output_sizes[f.name()] =
        std::max<int64_t>(1, NumElements(lowered.output_types[j].shape));
  }
  // Every buffer's min and extent that the lowering constrained to a constant.
  auto note = [&](const Halide::Internal::Parameter& p) {
    for (int d = 0; d < p.dimensions(); ++d) {
      const std::string prefix = p.name() + ".";
      if (const int64_t* v = Halide::Internal::as_const_int(p.min_constraint(d))) {
        inputs.known_values[prefix + "min." + std::to_string(d)] = *v;
      }
      if (const int64_t* v = Halide::Internal::as_const_int(p.extent_constraint(d))) {
        inputs.known_values[prefix + "extent." + std::to_string(d)] = *v;
      }
    }
  };
  for (size_t i = 0; i < lowered.params.size(); ++i) {
    if (!lowered.input_elided[i]) note(lowered.params[i].parameter());
  }
  for (const Halide::Func& f : lowered.info.outputs) {
    note(f.output_buffer().parameter());
    inputs.outputs.push_back(f.name());
  }
  return inputs;
}

// A GPU pipeline's checks need its offloaded kernels (launches, PTX), which Halide makes
// after the custom lowering passes: it is lowered once more to be checked, and rejected
// (Halide::CompileError) as CheckLoweredModule and FindUnwrittenBuffer say. A loop of its
// host code that LLVM 14's loop vectorizer miscompiles goes in `check` (llvm_loop, with
// loop_opt_off set), as the CPU's check pass would put it. (A CPU pipeline is checked
// inside its compile: AddLoweredCheckPass.)
void CheckLoweredGpuModule(const LoweredCluster& lowered, Halide::Pipeline& pipeline,
                           const Halide::Target& target, schedule::LoweredCheckState* check) {
  const schedule::LoweredCheckInputs inputs = CheckInputs(lowered);
  const Halide::Module module =
      pipeline.compile_to_module(ArgumentsOf(lowered), "braze_check", target);
  std::string problem =
      schedule::CheckLoweredModule(module, inputs.output_sizes, inputs.known_values);
  if (problem.empty()) problem = schedule::FindUnwrittenBuffer(module, inputs.outputs);
  if (!problem.empty()) throw Halide::CompileError(problem);
  check->llvm_loop = schedule::FindStridedReadModifyWriteLoop(module);
  check->loop_opt_off = !check->llvm_loop.empty();
}

// Runs `compile(target)` and acts on what the check pass found there (lowered_check.h):
// a rejected schedule throws Halide::CompileError (now, outside Halide's lowering); a loop
// LLVM 14's loop vectorizer would miscompile compiles again with LLVM's loop optimizations
// off (only such pipelines: the others keep LLVM's vectorization of the scalar loops the
// schedules leave, the safe default's reductions over an odd dim 0, say). Returns the
// target compiled for.
template <typename Compile>
Halide::Target CompileChecked(Halide::Pipeline& pipeline, const Halide::Target& target,
                              schedule::LoweredCheckState& check, const Compile& compile) {
  Halide::Target compiled =
      check.loop_opt_off ? target.with_feature(Halide::Target::DisableLLVMLoopOpt) : target;
  compile(compiled);
  if (!check.problem.empty()) throw Halide::CompileError(check.problem);
  if (check.needs_loop_opt_off) {
    // What compiled was an empty statement: compiled again for the other target.
    check.needs_loop_opt_off = false;
    check.loop_opt_off = true;
    pipeline.invalidate_cache();
    compiled = target.with_feature(Halide::Target::DisableLLVMLoopOpt);
    compile(compiled);
    if (!check.problem.empty()) throw Halide::CompileError(check.problem);
  }
  check.passed = true;
  return compiled;
}

// One schedule to try: a scheduler of the chain, or the stored schedule (`stored`).
struct Attempt {
  Scheduler kind;
  const StoredSchedule* stored = nullptr;
};

// The stored schedule, if any applies, then the chain that starts at `first`. A stored
// autoscheduler choice cannot apply to a symbolic cluster (only the safe default's
// splits hold for every size), nor a CPU entry to a GPU cluster or a GPU entry to a CPU
// one: refused with a warning, noted in `*note`. (The GPU heuristic's splits are all
// guarded: its entries apply to symbolic clusters.)
std::vector<Attempt> Attempts(const CompileOptions& options, Scheduler first, bool gpu,
                              bool symbolic, std::string* note) {
  std::vector<Attempt> attempts;
  if (options.stored_schedule) {
    const StoredSchedule& stored = *options.stored_schedule;
    const Scheduler kind = stored.params.scheduler;
    std::string why;
    if (IsGpuHeuristic(kind) != gpu) {
      why = absl::StrCat("it names ", SchedulerName(kind), ", and this cluster is compiled for ",
                         gpu ? "a GPU" : "the CPU");
    } else if (!gpu && symbolic && kind != Scheduler::kSafeDefault) {
      why = absl::StrCat("it names ", SchedulerName(kind), ", and this cluster has symbolic dims");
    }
    if (!why.empty()) {
      WarnStoredScheduleRefused(stored.path, why);
      *note =
          absl::StrCat("stored schedule ", stored.path, " refused (", why, "): default schedule");
    } else {
      attempts.push_back({kind, &stored});
    }
  }
  for (Scheduler kind : SchedulerChain(first, gpu)) attempts.push_back({kind});
  return attempts;
}

// How an attempt lowers: the CPU GEMM library takes the big f32 and bf16 matmuls under
// the CPU safe default (the autoschedulers and GPU schedules plan their own loops),
// unless the options or the stored schedule turn it off or no library loads.
lower::LowerOptions LoweringFor(const CompileOptions& options, const Attempt& attempt, bool gpu,
                                int parallelism) {
  lower::LowerOptions lo;
  lo.gpu = gpu;
  lo.cuda = device::FeaturesOf(options.device).libdevice_math;
  // Adams2019 and Mullapudi2016 keep one serial f32 accumulator over a long sum's terms
  // (braze-fuzz seed 61100011): they get it in blocks. The safe default, Li2018 and the
  // GPU heuristic split long reductions themselves (lower/long_sums.h).
  lo.block_long_sums =
      !gpu && (attempt.kind == Scheduler::kAdams2019 || attempt.kind == Scheduler::kMullapudi2016);
  const bool wanted = options.cpu_gemm_library && !gpu && attempt.kind == Scheduler::kSafeDefault &&
                      (attempt.stored == nullptr || attempt.stored->params.matmul_library);
  if (!wanted) return lo;
  const absl::Status available = CpuGemmAvailable();
  if (!available.ok()) {
    static std::once_flag once;  // not silent, but once per process, not per cluster
    std::call_once(once, [&] { LogWarning(std::string(available.message())); });
    return lo;
  }
  lo.library_gemm_min_work = options.cpu_gemm_min_work;
  lo.library_conv_min_work = options.cpu_gemm_min_work == kLibraryGemmMinWork
                                 ? kLibraryConvMinWork
                                 : options.cpu_gemm_min_work;
  lo.library_gemm_threads = parallelism;
  lo.library_gemm_bf16 = CpuGemmTakesBF16();
  return lo;
}

// A pipeline calling the CPU GEMM library or the streaming copy gets their addresses
// from us: Braze's static libraries export no symbols for Halide's JIT linker to find.
void InstallJitExterns(const LoweredCluster& lowered, bool streams, Halide::Pipeline& pipeline) {
  // Added to those the repairs installed (codegen_workarounds.h).
  std::map<std::string, Halide::JITExtern> externs = pipeline.get_jit_externs();
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
    std::vector<Halide::Type> conv_args = {buffer, buffer, buffer, buffer};
    conv_args.insert(conv_args.end(), 20, Halide::Int(32));
    conv_args.push_back(buffer);
    externs.emplace(
        kCpuConvF32Symbol,
        Halide::JITExtern(Halide::ExternCFunction(
            CpuConvF32Address(), Halide::ExternSignature(Halide::Int(32), false, conv_args))));
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

// The lowering's folds as comment lines of the schedule text ("// folded ...\n"): dumps
// show them, --log_compiles reads them back (kernel_source.cc), and a kernel loaded from
// the disk cache keeps them with its text.
std::string FoldNotes(const LoweredCluster& lowered) {
  std::string notes;
  for (const std::string& fold : lowered.folds)
    absl::StrAppend(&notes, kFoldNotePrefix, fold, "\n");
  return notes;
}

double MsSince(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t).count();
}

}  // namespace

int Parallelism(const CompileOptions& options) {
  return options.num_threads > 0
             ? options.num_threads
             : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
}

absl::StatusOr<std::string> ObjectTarget(const CompileOptions& options, const std::string& name) {
  BRAZE_ASSIGN_OR_RETURN(const Halide::Target target,
                         JitTarget(device::BackendFor(options.device), name));
  return target.without_feature(Halide::Target::JIT).to_string();
}

// One driver for every target: the chain of schedulers for the target (CPU: the
// options' scheduler, with kAuto resolved per cluster; GPU: the GPU chain), each tried
// on freshly lowered Funcs (a failed schedule leaves directives on the old ones) until
// Halide accepts one. Compiling needs no device; running a device kernel does.
absl::StatusOr<ProducedKernel> RunSchedulerChain(const ClusterSpec& spec,
                                                 const CompileOptions& options,
                                                 const std::string* object_path) {
  const auto start = std::chrono::steady_clock::now();
  const std::string name = spec.name.empty() ? "cluster" : spec.name;
  const device::Backend& backend = device::BackendFor(options.device);
  const bool gpu = backend.device_memory();
  const int parallelism = Parallelism(options);
  BRAZE_ASSIGN_OR_RETURN(const Halide::Target target, JitTarget(backend, name));
  // Lowering errors are the cluster's, not the schedule's: no point in going on.
  // Lowered as the safe default would lower it (the scheduler of every cluster with a
  // matmul), so the usual first attempt takes this lowering rather than making another.
  const Attempt likely{
      options.scheduler == Scheduler::kAuto ? Scheduler::kSafeDefault : options.scheduler,
      options.stored_schedule ? &*options.stored_schedule : nullptr};
  const lower::LowerOptions first_options = LoweringFor(options, likely, gpu, parallelism);
  BRAZE_ASSIGN_OR_RETURN(LoweredCluster first_lowering, lower::LowerCluster(spec, first_options));
  // No matmul the library would take: every attempt's lowering is this one (as far as
  // the library goes; long sums too when there are none).
  const bool library_irrelevant =
      first_options.library_gemm_min_work >= 0 && !first_lowering.calls_library;
  const bool long_sums = first_lowering.long_sums;
  Scheduler first = gpu ? options.gpu_scheduler : options.scheduler;
  if (first_lowering.info.symbolic && gpu) {
    // Symbolic extents on a GPU: the heuristic's splits are all guarded, so they hold
    // for every size (schedule/gpu_schedule.h); Li2018's output tiles shift inwards,
    // which needs an extent of at least the tile. The caller compiles for concrete
    // shapes if it fails.
    if (!IsGpuHeuristic(first)) first = Scheduler::kGpuFused;
  } else if (first_lowering.info.symbolic) {
    // Symbolic extents: only the safe default's splits are chosen to hold for every size
    // (schedule/pipeline_info.h); the caller compiles for concrete shapes if it fails.
    if (first != Scheduler::kAuto && first != Scheduler::kSafeDefault) {
      return absl::UnimplementedError(
          absl::StrCat(name, ": symbolic shapes are compiled by the CPU safe default only, not by ",
                       SchedulerName(first)));
    }
    first = Scheduler::kSafeDefault;
  } else if (!gpu && first == Scheduler::kAuto) {
    // Auto's safe-default chain goes on to the autoschedulers (scheduler.h).
    if (PickScheduler(first_lowering.info, target, parallelism) == Scheduler::kAdams2019) {
      first = Scheduler::kAdams2019;
    }
  }
  ProducedKernel produced;
  if (object_path != nullptr && gpu) {
    produced.no_object = "a device kernel is JIT-compiled";
    object_path = nullptr;
  }
  // Halide 14 assumes a constant embedded in ahead-of-time code is aligned to whatever
  // the index allows (only JIT code looks at the real address): with a vectorized,
  // predicated or shifted load that was an aligned 64-byte load from a misaligned
  // address, a SIGSEGV (braze-fuzz seeds 80005, 80006, ...: every crash embedded a
  // Const). Such kernels are JIT-compiled (docs/DISK_CACHE.md).
  if (object_path != nullptr && first_lowering.embeds_constants) {
    produced.no_object = "it embeds a constant buffer";
    object_path = nullptr;
  }
  const bool to_object = object_path != nullptr;
  std::vector<std::string> failures;
  bool fresh = true;          // first_lowering's Funcs carry no schedule yet
  std::string schedule_note;  // --log_compiles: the stored schedule used or refused
  const std::vector<Attempt> attempts =
      Attempts(options, first, gpu, first_lowering.info.symbolic, &schedule_note);
  for (const Attempt& attempt : attempts) {
    const Scheduler kind = attempt.kind;
    const bool last = &attempt == &attempts.back();
    const std::string what = attempt.stored != nullptr
                                 ? absl::StrCat("stored schedule ", attempt.stored->path)
                                 : std::string(SchedulerName(kind));
    const lower::LowerOptions lowering = LoweringFor(options, attempt, gpu, parallelism);
    LoweredCluster lowered;
    const bool same_lowering =
        (library_irrelevant ||
         lowering.library_gemm_min_work == first_options.library_gemm_min_work) &&
        (!long_sums || lowering.block_long_sums == first_options.block_long_sums);
    if (fresh && same_lowering) {
      lowered = std::move(first_lowering);
      fresh = false;
    } else {
      BRAZE_ASSIGN_OR_RETURN(lowered, lower::LowerCluster(spec, lowering));
    }
    // Object code finds the CPU GEMM library's extern and the streaming copy in the
    // disk cache's runtime (aot_kernel.cc's trampolines).
    std::vector<std::string> streamed;
    Halide::Pipeline pipeline;
    Halide::Target compile_target = target;  // CompileChecked's choice
    auto check = std::make_shared<schedule::LoweredCheckState>();
    std::string schedule = "(every output is empty: nothing to compute)\n";
    std::string timing;
    if (!lowered.info.outputs.empty()) {
      absl::Status s = CatchHalideErrors(what, absl::StatusCode::kInternal, [&] {
        // Autoscheduler progress, lowering's warnings: to the log at --v=2.
        device::HalideOutputCapture halide_output;
        pipeline = Halide::Pipeline(lowered.info.outputs);
        InstallCodegenWorkarounds(pipeline, gpu);
        InstallFloat16AsBits(pipeline, target);  // OpenCL: after the repairs above
        backend.InstallHandlers(&pipeline.jit_handlers());
        const auto t0 = std::chrono::steady_clock::now();
        // Adams2019's greedy probe schedules a copy: Funcs take one schedule only.
        const schedule::FreshPipeline fresh = [&]() {
          absl::StatusOr<LoweredCluster> again = lower::LowerCluster(spec, lowering);
          if (!again.ok()) throw Halide::CompileError(std::string(again.status().message()));
          return Halide::Pipeline(again->info.outputs);
        };
        schedule =
            ApplyScheduler(kind, lowered, pipeline, target, gpu, parallelism,
                           attempt.stored ? &attempt.stored->params : nullptr, &streamed, fresh);
        const double schedule_ms = MsSince(t0);
        const auto t1 = std::chrono::steady_clock::now();
        // Checked with plain stores: the rewrite to streaming stores (installed after)
        // copies each tile to exactly the elements the checked stores wrote.
        if (gpu) {
          CheckLoweredGpuModule(lowered, pipeline, target, check.get());
          check->check_ms = MsSince(t1);
        } else {
          schedule::AddLoweredCheckPass(pipeline, target, CheckInputs(lowered), check);
        }
        auto rewritten = std::make_shared<int>(0);
        if (!streamed.empty()) {
          schedule::AddStreamStoresPass(pipeline, streamed, kStreamCopySymbol, kStreamFenceSymbol,
                                        rewritten);
        }
        InstallJitExterns(lowered, !streamed.empty(), pipeline);
        const auto t2 = std::chrono::steady_clock::now();
        compile_target = CompileChecked(pipeline, target, *check, [&](const Halide::Target& t) {
          if (to_object) {
            pipeline.compile_to_object(
                *object_path, ArgumentsOf(lowered), "braze_kernel",
                t.without_feature(Halide::Target::JIT).with_feature(Halide::Target::NoRuntime));
          } else {
            pipeline.compile_jit(t);
          }
        });
        if (!check->llvm_loop.empty()) {
          absl::StrAppend(&schedule, "// LLVM's loop optimizations off (LLVM 14's loop ",
                          "vectorizer reorders strided read-modify-writes): ", check->llvm_loop,
                          "\n");
        }
        // A CPU pipeline's check runs inside its compile (and its time is part of it).
        timing = absl::StrFormat("// schedule %.1f ms, check %.1f ms%s, %s %.1f ms\n", schedule_ms,
                                 check->check_ms, gpu ? "" : " (in the compile)",
                                 to_object ? "compile_to_object" : "compile_jit", MsSince(t2));
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
        "\n", timing, FoldNotes(lowered), schedule);
    KernelLayout layout = LayoutOf(lowered, kind, failures, schedule_text);
    produced.schedule_note = schedule_note;
    if (to_object && !lowered.info.outputs.empty()) {
      produced.object = layout;
      // The scheduled pipeline, kept for jit_instead (a std::function is copyable).
      auto scheduled = std::make_shared<std::pair<LoweredCluster, Halide::Pipeline>>(
          std::move(lowered), std::move(pipeline));
      produced.jit_instead =
          [=, threads = options.num_threads]() -> absl::StatusOr<std::unique_ptr<CompiledKernel>> {
        Halide::Target jit_target = compile_target;
        BRAZE_RETURN_IF_ERROR(CatchHalideErrors(what, absl::StatusCode::kInternal, [&] {
          device::HalideOutputCapture halide_output;
          jit_target =
              CompileChecked(scheduled->second, compile_target, *check,
                             [&](const Halide::Target& t) { scheduled->second.compile_jit(t); });
          return absl::OkStatus();
        }));
        auto kernel = std::make_unique<JitKernel>(name, layout, std::move(scheduled->first),
                                                  std::move(scheduled->second), jit_target, threads,
                                                  /*on_device=*/false);
        kernel->set_compile_ms(MsSince(start));
        kernel->set_schedule_note(schedule_note);
        return std::unique_ptr<CompiledKernel>(std::move(kernel));
      };
      return produced;
    }
    auto kernel =
        std::make_unique<JitKernel>(name, std::move(layout), std::move(lowered),
                                    std::move(pipeline), compile_target, options.num_threads, gpu);
    kernel->set_compile_ms(MsSince(start));
    kernel->set_schedule_note(schedule_note);
    produced.kernel = std::move(kernel);
    return produced;
  }
  return absl::InternalError(absl::StrCat(name, ": every ", gpu ? "GPU schedule" : "scheduler",
                                          " failed: ", absl::StrJoin(failures, "; ")));
}

}  // namespace compile
}  // namespace braze
