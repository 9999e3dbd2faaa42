// The compiled step kinds: a fused cluster (kCluster) and one op's kernel (kSingleOp).
// Their kernels come from the step's KernelSource (compile/kernel_source.h), which
// decides which kernel and when; this file installs what it answers (output buffers,
// dumps, the session's counters) and launches it, or runs the step op by op while
// the kernel is not ready.
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "braze/status.h"
#include "compile/kernel_source.h"
#include "device/device_timeline.h"
#include "ir/timeline.h"
#include "runtime/executor.h"
#include "runtime/flags.h"
#include "runtime/step_kind.h"

namespace braze {
namespace {

// The kernel source's options for `step`: the session's options and BRAZE_FLAGS, read
// here once so that the compile layer never sees either.
KernelSourceOptions SourceOptionsFor(Executor& ex, const Step& step) {
  const BrazeFlags& flags = GetBrazeFlags();
  KernelSourceOptions o;
  o.compile.scheduler = ex.options().scheduler;
  // A GPU heuristic plan chosen for the session starts the chain of its GPU kernels
  // (BuildPlan refuses it for a session with compiled CPU steps).
  if (IsGpuHeuristic(ex.options().scheduler)) o.compile.gpu_scheduler = ex.options().scheduler;
  o.compile.num_threads = ex.options().num_threads;
  if (step.space == Space::kDevice) o.compile.device = step.device;
  o.compile.cpu_gemm_library =
      ex.options().cpu_matmul == SessionOptions::CpuMatMul::kLibrary && flags.cpu_gemm_library;
  if (flags.cpu_gemm_min_work > 0) o.compile.cpu_gemm_min_work = flags.cpu_gemm_min_work;
  // Stored schedules: the session's schedule_dirs, BRAZE_FLAGS --schedule_dirs, then
  // DefaultScheduleDirs(); none when turned off.
  if (ex.options().stored_schedules && flags.stored_schedules) {
    o.schedule_dirs = ex.options().schedule_dirs;
    o.schedule_dirs.insert(o.schedule_dirs.end(), flags.schedule_dirs.begin(),
                           flags.schedule_dirs.end());
    for (std::string& dir : DefaultScheduleDirs()) o.schedule_dirs.push_back(std::move(dir));
  }
  o.disk_cache = ex.options().disk_cache;
  o.symbolic_shapes = ex.options().symbolic_shapes && flags.symbolic_shapes;
  o.policy = ex.options().compile_policy;
  o.lazy_compile_threshold = ex.options().lazy_compile_threshold;
  o.max_signatures = ex.options().max_signatures_per_cluster;
  o.can_wait = !ex.options().strict && !step.fallback.empty();
  o.what = ex.What(step);
  o.is_cluster = step.kind == Step::Kind::kCluster;
  o.log_compiles = flags.log_compiles;
  o.inject_failure = ex.options().inject_compile_failure;
  return o;
}

// Makes `answer`'s kernel the step's kernel for `types`, with its output buffers.
absl::Status Install(Executor& ex, const Step& step, StepState& state,
                     const std::vector<TensorType>& types, KernelAnswer answer) {
  state.kernel = std::move(answer.kernel);
  state.input_types = types;
  state.verified = false;
  state.buffers.clear();
  state.device_buffers.clear();
  state.output_types = std::move(answer.output_types);
  const std::vector<TensorType>& out = state.output_types;
  if (step.space == Space::kDevice) {
    BRAZE_RETURN_IF_ERROR(ex.EnsureDeviceBuffers(step, state, out));
  } else {
    for (const TensorType& t : out) state.buffers.emplace_back(t.dtype, t.shape);
  }
  if (ex.dumper() != nullptr) {  // observability: runtime/dump.h
    // A symbolic kernel's .cluster holds it as compiled: its classes at their estimates.
    BRAZE_RETURN_IF_ERROR(ex.dumper()->OnKernelReady(ex.graph(), step, types, *state.kernel->kernel,
                                                     answer.input_symbols, answer.compiled_types));
  }
  return absl::OkStatus();
}

void CountCompile(Executor& ex, const KernelAnswer& answer) {
  switch (answer.origin) {
    case KernelAnswer::Origin::kNone:
      break;
    case KernelAnswer::Origin::kMemoryCache:
      ++ex.stats().cache_hits;
      break;
    case KernelAnswer::Origin::kDiskCache:
      ++ex.stats().disk_cache_hits;
      break;
    case KernelAnswer::Origin::kCompiled:
      ++ex.stats().compiles;
      ex.stats().compile_ms += answer.compile_ms;
      break;
  }
}

absl::Status RunCompiled(Executor& ex, const Step& step, StepState& state,
                         const std::vector<Value>& inputs, const std::vector<TensorType>& types,
                         bool compile_only) {
  if (state.no_compile && !step.fallback.empty()) {
    return ex.RunOpByOp(step, state, compile_only, /*compile_ops=*/false);
  }
  if (state.source == nullptr) {
    ClusterSpec cluster;
    cluster.graph = &ex.graph();
    cluster.name = step.name;
    cluster.nodes = step.nodes;
    cluster.inputs = step.inputs;
    cluster.outputs = step.outputs;
    state.source = std::make_unique<KernelSource>(std::move(cluster), SourceOptionsFor(ex, step));
  }
  if (!compile_only) state.source->CountRun();
  if (state.kernel == nullptr || types != state.input_types) {
    // Shape errors are the user's: report them before asking for a kernel.
    BRAZE_ASSIGN_OR_RETURN(std::vector<TensorType> node_types, ex.CheckShapes(step, types));
    KernelAnswer answer = state.source->Get(types, std::move(node_types), compile_only);
    CountCompile(ex, answer);
    switch (answer.state) {
      case KernelAnswer::State::kNotReady:
        return ex.RunOpByOp(step, state, compile_only,
                            /*compile_ops=*/answer.wait == KernelAnswer::Wait::kMegamorphic);
      case KernelAnswer::State::kFailed:
        return ex.FallBack(step, state, "failed to compile", answer.error, compile_only);
      case KernelAnswer::State::kReady:
        BRAZE_RETURN_IF_ERROR(Install(ex, step, state, types, std::move(answer)));
        break;
    }
  }
  const std::vector<TensorType>& out_types = state.output_types;
  if (compile_only) {
    if (step.space == Space::kDevice) {
      ex.StandIn(step, state, out_types);
    } else {
      ex.BindOutputs(step, state);
    }
    return absl::OkStatus();
  }
  std::vector<KernelArg> ins, outs;
  for (size_t i = 0; i < inputs.size(); ++i) {
    BRAZE_ASSIGN_OR_RETURN(Value v, ex.In(step.inputs[i], inputs[i], step.space, step.device));
    ins.push_back(v.device != nullptr ? KernelArg::Device(v.device) : KernelArg::Host(v.host));
  }
  BRAZE_RETURN_IF_ERROR(ex.OutputArgs(step, state, &outs));
  bool any_elements = false;
  for (const TensorType& t : out_types) any_elements |= NumElements(t.shape) > 0;
  absl::Status run_status;
  if (any_elements) {
    std::lock_guard<std::mutex> lock(state.kernel->mu);
    // Observability (ir/timeline.h): one bar per launch, after the lock wait.
    const char* category = step.kind == Step::Kind::kCluster ? "cluster" : "op";
    TimelineEvent trace(step.name, category);
    device::DeviceSpan device_time(step.device, step.name, category);  // GPUs: its own row
    run_status = state.kernel->kernel->Launch(ins, outs);
  }
  if (!run_status.ok()) {
    // Inputs were checked against the plan's shapes, so a Halide run-time error here
    // is the kernel's fault (e.g. a schedule's bounds): treated like a failed compile.
    // The kernel's errors already name the cluster or op.
    return ex.FallBack(step, state, "failed to run", run_status, /*compile_only=*/false);
  }
  if (ex.options().inject_wrong_result && ex.options().inject_wrong_result(step.name) &&
      outs[0].host != nullptr && outs[0].host->num_elements() > 0) {
    outs[0].host->SetDouble(0, outs[0].host->GetDouble(0) + 1);  // testing hook
  }
  if ((ex.options().verify || GetBrazeFlags().verify) && !state.verified) {
    BRAZE_RETURN_IF_ERROR(ex.Verify(step, state, inputs, outs));
  }
  for (size_t o = 0; o < step.outputs.size(); ++o) {
    Value& v = ex.Slot(step.outputs[o]);
    v = Value();
    v.space = step.space;
    v.host = outs[o].host;
    v.device = outs[o].device;
  }
  if (step.kind == Step::Kind::kCluster) {
    ++ex.stats().cluster_launches;
  } else {
    ++ex.stats().single_op_launches;
  }
  return absl::OkStatus();
}

class CompiledStepKind : public StepKind {
 public:
  CompiledStepKind(const char* instead, const char* runs_as)
      : instead_(instead), runs_as_(runs_as) {}
  absl::Status Run(Executor& ex, const Step& step, StepState& state,
                   const std::vector<Value>& inputs, const std::vector<TensorType>& types,
                   bool compile_only) const override {
    return RunCompiled(ex, step, state, inputs, types, compile_only);
  }
  const char* instead() const override { return instead_; }
  const char* runs_as() const override { return runs_as_; }

 private:
  const char* instead_;
  const char* runs_as_;
};

}  // namespace

const StepKind& ClusterStepKind() {
  static const CompiledStepKind kind("running it op by op", "fused cluster");
  return kind;
}

const StepKind& SingleOpStepKind() {
  static const CompiledStepKind kind("running it on the reference kernel", "single-op kernel");
  return kind;
}

}  // namespace braze
