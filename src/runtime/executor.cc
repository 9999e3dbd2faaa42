// Executor: see executor.h.
#include "runtime/executor.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <future>
#include <map>
#include <optional>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "braze/status.h"
#include "compile/cluster_key.h"
#include "device/cpu_gemm.h"
#include "device/cublas_gemm.h"
#include "ir/changing_dims.h"
#include "ir/logging.h"
#include "reference/reference.h"
#include "runtime/flags.h"
#include "runtime/timeline.h"
#include "runtime/verify.h"

namespace braze {
namespace {

std::string Label(const Node& n) {
  return absl::StrCat("node '", n.name(), "' (", n.op_name(), ")");
}

absl::Status Annotate(const std::string& what, const absl::Status& s) {
  return absl::Status(s.code(), absl::StrCat(what, ": ", s.message()));
}

SchedulerKind ToSchedulerKind(Scheduler s) {
  switch (s) {
    case Scheduler::kAuto:
      return SchedulerKind::kAuto;
    case Scheduler::kAdams2019:
      return SchedulerKind::kAdams2019;
    case Scheduler::kMullapudi2016:
      return SchedulerKind::kMullapudi2016;
    case Scheduler::kLi2018:
      return SchedulerKind::kLi2018;
    case Scheduler::kSafeDefault:
      return SchedulerKind::kSafeDefault;
  }
  return SchedulerKind::kSafeDefault;
}

void Warn(const std::string& msg) { LogWarning(msg); }

bool HostLike(Space s) { return s != Space::kDevice; }

// Counts one copy from space `from` to `to`.
void CountCopy(Space from, Space to, size_t bytes, SessionStats& stats) {
  // Onto a device: into jit:cpu's memory or a GPU; off it otherwise.
  if (to == Space::kDevice || (to == Space::kJitCpu && from == Space::kHost)) {
    ++stats.host_to_device_copies;
  } else {
    ++stats.device_to_host_copies;
  }
  stats.copied_bytes += static_cast<int64_t>(bytes);
}

// A copy between memory spaces as a timeline event of its own (runtime/timeline.h):
// category "copy", named by its direction, with its size.
class CopyEvent {
 public:
  CopyEvent(Space from, Space to, size_t bytes) : active_(Timeline::active()) {
    if (!active_) return;
    start_us_ = Timeline::NowMicros();
    name_ = absl::StrCat("copy ", SpaceName(from), " -> ", SpaceName(to));
    args_ = absl::StrCat("\"bytes\":", bytes);
  }
  ~CopyEvent() {
    if (active_)
      Timeline::Record(name_, "copy", start_us_, Timeline::NowMicros() - start_us_, args_);
  }
  CopyEvent(const CopyEvent&) = delete;
  CopyEvent& operator=(const CopyEvent&) = delete;

 private:
  static const char* SpaceName(Space s) {
    return s == Space::kHost ? "host" : s == Space::kJitCpu ? "jit:cpu" : "device";
  }
  const bool active_;
  double start_us_ = 0;
  std::string name_, args_;
};

void AssignHost(const HostTensor& from, HostTensor* to) {
  if (to->type() == from.type()) {
    if (from.num_bytes() > 0) std::memcpy(to->raw_data(), from.raw_data(), from.num_bytes());
  } else {
    *to = from;
  }
}

std::string SignatureKey(const std::vector<TensorType>& types) {
  std::string key;
  for (const TensorType& t : types) absl::StrAppend(&key, TypeString(t), ";");
  return key;
}

// "input 0 dim 0 was 128, now 100": how `now` differs from `before` (same count).
std::string SignatureChange(const std::vector<TensorType>& before,
                            const std::vector<TensorType>& now) {
  std::vector<std::string> parts;
  for (size_t i = 0; i < now.size() && i < before.size(); ++i) {
    if (before[i].dtype != now[i].dtype || before[i].shape.size() != now[i].shape.size()) {
      parts.push_back(
          absl::StrCat("input ", i, " was ", TypeString(before[i]), ", now ", TypeString(now[i])));
      continue;
    }
    for (size_t d = 0; d < now[i].shape.size(); ++d) {
      if (before[i].shape[d] != now[i].shape[d]) {
        parts.push_back(absl::StrCat("input ", i, " dim ", d, " was ", before[i].shape[d], ", now ",
                                     now[i].shape[d]));
      }
    }
  }
  return parts.empty() ? "the same signature again" : absl::StrJoin(parts, ", ");
}

// --log_compiles (runtime/flags.h): one line per kernel a step prepares, with why it
// was needed and what the compile cache had.
void LogCompile(const Step& step, const std::vector<TensorType>& types, const std::string& reason,
                const CompileCache::Result& result) {
  std::string line =
      absl::StrCat("compile: ", step.kind == Step::Kind::kCluster ? "cluster '" : "'", step.name,
                   "' (", step.nodes.size(), " ops) for (");
  for (size_t i = 0; i < types.size(); ++i) {
    absl::StrAppend(&line, i > 0 ? ", " : "", TypeString(types[i]));
  }
  absl::StrAppend(&line, "): ", reason, "; ");
  if (!result.hit) {
    absl::StrAppend(&line, result.evicted ? "evicted from the compile cache earlier; "
                                          : "not in the compile cache; ");
    if (result.kernel.ok() && (*result.kernel)->kernel->loaded_from_disk()) {
      absl::StrAppend(&line, "loaded from the disk cache; ");
    }
  }
  if (!result.kernel.ok()) {
    absl::StrAppend(&line, "failed: ", result.kernel.status().message());
  } else {
    const CompiledKernel& k = *(*result.kernel)->kernel;
    absl::StrAppend(&line, SchedulerName(k.scheduler_used()),
                    result.hit ? ", cache hit" : absl::StrFormat(", %.1f ms", result.compile_ms));
    if (!k.schedule_note().empty()) absl::StrAppend(&line, "; ", k.schedule_note());
    if (absl::StrContains(k.schedule_text(), kCpuGemmF32Symbol) ||
        absl::StrContains(k.schedule_text(), kCpuGemmBiasF32Symbol)) {
      absl::StrAppend(&line, "; matmul by ", CpuGemmLibrary());
    }
    if (!result.hit && !k.disk_note().empty()) absl::StrAppend(&line, "; ", k.disk_note());
    for (const std::string& refused : k.scheduler_failures()) {
      absl::StrAppend(&line, "\n  refused first: ", refused);
    }
  }
  LogInfo(0, line);
}

}  // namespace

absl::StatusOr<HostTensor> ReadVariable(VariableSlot& slot, SessionStats& stats) {
  if (slot.host_valid) return slot.host;
  if (slot.jit_valid) {
    CopyEvent event(Space::kJitCpu, Space::kHost, slot.jit.num_bytes());
    AssignHost(slot.jit, &slot.host);
    CountCopy(Space::kJitCpu, Space::kHost, slot.jit.num_bytes(), stats);
  } else if (slot.device_valid) {
    CopyEvent event(Space::kDevice, Space::kHost, slot.on_device->num_bytes());
    BRAZE_RETURN_IF_ERROR(slot.on_device->CopyToHost(&slot.host));
    CountCopy(Space::kDevice, Space::kHost, slot.on_device->num_bytes(), stats);
  } else {
    return absl::FailedPreconditionError("the variable is uninitialized");
  }
  slot.host_valid = true;
  return slot.host;
}

Executor::Executor(const Graph& g, const SessionOptions& options, SessionStats& stats,
                   PlanState& state, std::unordered_map<int, VariableSlot>& variables)
    : g_(g),
      options_(options),
      stats_(stats),
      state_(state),
      variables_(variables),
      values_(g.num_nodes()) {
  for (int id = 0; id < g.num_nodes(); ++id) values_[id].resize(g.node(id).num_outputs());
}

void Executor::BindHost(const Tensor& t, const HostTensor* v) {
  Value& slot = Slot(t);
  slot = Value();
  slot.host = v;
}

void Executor::BindVariable(const Tensor& t) {
  Value& slot = Slot(t);
  slot = Value();
  slot.variable = t.node_id();
}

void Executor::SetDestination(const Tensor& t, HostTensor* dest) {
  destinations_.emplace(Key(t), dest);
}

absl::StatusOr<TensorType> Executor::TypeOf(const Value& v) const {
  if (v.host != nullptr) return v.host->type();
  if (v.device != nullptr) return v.device->type();
  const auto it = variables_.find(v.variable);
  if (it == variables_.end()) return absl::InternalError("unbound value");
  const VariableSlot& s = it->second;
  if (s.host_valid) return s.host.type();
  if (s.jit_valid) return s.jit.type();
  if (s.device_valid) return s.on_device->type();
  return absl::InternalError("uninitialized variable");
}

absl::Status Executor::CopyInto(const Value& from, Space space, const Device& device,
                                HostTensor* to_host, std::shared_ptr<DeviceTensor>* to_device) {
  if (HostLike(space)) {
    if (from.host != nullptr) {
      CopyEvent event(from.space, space, from.host->num_bytes());
      AssignHost(*from.host, to_host);
      CountCopy(from.space, space, from.host->num_bytes(), stats_);
    } else {
      CopyEvent event(Space::kDevice, space, from.device->num_bytes());
      BRAZE_RETURN_IF_ERROR(from.device->CopyToHost(to_host));
      CountCopy(Space::kDevice, space, from.device->num_bytes(), stats_);
    }
    return absl::OkStatus();
  }
  BRAZE_ASSIGN_OR_RETURN(const TensorType type, TypeOf(from));
  if (*to_device == nullptr || (*to_device)->type() != type ||
      !((*to_device)->device() == device)) {
    BRAZE_ASSIGN_OR_RETURN(std::unique_ptr<DeviceTensor> fresh,
                           DeviceTensor::Allocate(type, device));
    *to_device = std::move(fresh);
  }
  if (from.host != nullptr) {
    CopyEvent event(from.space, Space::kDevice, from.host->num_bytes());
    BRAZE_RETURN_IF_ERROR((*to_device)->CopyFromHost(*from.host));
    CountCopy(from.space, Space::kDevice, from.host->num_bytes(), stats_);
    return absl::OkStatus();
  }
  if (!(from.device->device() == device)) {
    return absl::UnimplementedError(absl::StrCat("copies between two GPU devices (",
                                                 from.device->device().ToString(), " to ",
                                                 device.ToString(), ") are not supported"));
  }
  return (*to_device)->CopyFrom(*from.device);
}

absl::StatusOr<Value> Executor::In(const Tensor& t, const Value& v, Space space,
                                   const Device& device) {
  Value out;
  out.space = space;
  if (v.variable >= 0) {
    VariableSlot& s = variables_.at(v.variable);
    bool* valid = space == Space::kHost     ? &s.host_valid
                  : space == Space::kJitCpu ? &s.jit_valid
                                            : &s.device_valid;
    if (space == Space::kDevice && s.device_valid && !(s.on_device->device() == device)) {
      return absl::UnimplementedError(absl::StrCat("variable '", g_.node(v.variable).name(),
                                                   "' lives on ", s.on_device->device().ToString(),
                                                   ", not ", device.ToString()));
    }
    if (!*valid) {
      Value from;
      if (s.host_valid) {
        from.host = &s.host;
      } else if (s.jit_valid) {
        from.space = Space::kJitCpu;
        from.host = &s.jit;
      } else if (s.device_valid) {
        from.space = Space::kDevice;
        from.device = s.on_device.get();
      } else {
        return absl::FailedPreconditionError(
            absl::StrCat("reading uninitialized variable '", g_.node(v.variable).name(), "'"));
      }
      HostTensor* host = space == Space::kJitCpu ? &s.jit : &s.host;
      BRAZE_RETURN_IF_ERROR(CopyInto(from, space, device, host, &s.on_device));
      *valid = true;
    }
    if (space == Space::kDevice) {
      out.device = s.on_device.get();
    } else {
      out.host = space == Space::kJitCpu ? &s.jit : &s.host;
    }
    return out;
  }
  if (v.space == space && (space != Space::kDevice || v.device->device() == device)) return v;
  Mirror& m = state_.mirrors[{t.node_id(), t.index(), space}];
  const bool constant = t.node().op() == OpKind::kConst && v.host != nullptr;
  const bool fresh =
      constant ? m.constant == v.host : mirrored_.count({t.node_id(), t.index(), space}) > 0;
  if (!fresh) {
    BRAZE_RETURN_IF_ERROR(CopyInto(v, space, device, &m.host, &m.device));
    if (constant) m.constant = v.host;
    mirrored_.insert({t.node_id(), t.index(), space});
  }
  if (space == Space::kDevice) {
    out.device = m.device.get();
  } else {
    out.host = &m.host;
  }
  return out;
}

absl::Status Executor::RunStep(const Step& step, StepState& state, bool compile_only) {
  if (compile_stopped_) return absl::OkStatus();
  if (state.fell_back) return RunFallback(step, state, compile_only);
  const Node& user = g_.node(step.nodes.front());
  std::vector<Value> inputs;
  std::vector<TensorType> types;
  for (const Tensor& in : step.inputs) {
    const Value& v = Slot(in);
    if (!v.defined()) {
      const bool overwritten = user.op() == OpKind::kAssign && in == user.input(0);
      if (overwritten) {
        types.push_back(in.type());
        inputs.emplace_back();
        continue;
      }
      if (in.node().op() == OpKind::kVariable) {
        return absl::FailedPreconditionError(
            absl::StrCat("reading uninitialized variable '", in.name(), "' (by ", step.name, ")"));
      }
      return absl::InternalError(
          absl::StrCat(step.name, ": input '", in.name(), "' was not computed"));
    }
    auto type = TypeOf(v);
    if (!type.ok()) {
      return absl::FailedPreconditionError(
          absl::StrCat("reading uninitialized variable '", in.name(), "' (by ", step.name, ")"));
    }
    inputs.push_back(v);
    types.push_back(*type);
  }
  if (step.kind == Step::Kind::kReference && user.op() == OpKind::kAssign) {
    if (compile_only) {
      StandIn(step, state, {types[1]});
      return absl::OkStatus();
    }
    return RunAssign(step, inputs);
  }
  switch (step.kind) {
    case Step::Kind::kReference: {
      if (compile_only) {
        auto out_types = InferOutputTypes(user.op(), user.attrs(), types);
        if (!out_types.ok()) return Annotate(Label(user), out_types.status());
        StandIn(step, state, *out_types);
        return absl::OkStatus();
      }
      return RunReference(step, state, inputs, types);
    }
    case Step::Kind::kCluster:
    case Step::Kind::kSingleOp:
      return RunCompiled(step, state, inputs, types, compile_only);
    case Step::Kind::kGemm:
      return RunGemm(step, state, inputs, types, compile_only);
  }
  return absl::InternalError("bad step kind");
}

// The step's compile, kernel or library call failed (`what_failed`, `why`): strict mode
// reports it (a library GEMM's refusal is not the user's error: it always falls back);
// otherwise the plan's fallback for the step runs, now and from then on, with one
// warning saying why.
absl::Status Executor::FallBack(const Step& step, StepState& state, const char* what_failed,
                                const absl::Status& why, bool compile_only) {
  const std::string what = step.kind == Step::Kind::kCluster
                               ? absl::StrCat("cluster '", step.name, "'")
                               : Label(g_.node(step.nodes.front()));
  if ((options_.strict && step.kind != Step::Kind::kGemm) || step.fallback.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, " ", what_failed, " (strict mode): ", why.message()));
  }
  const char* instead = step.kind == Step::Kind::kGemm      ? "running it as Halide kernels"
                        : step.kind == Step::Kind::kCluster ? "running it op by op"
                                                            : "running it on the reference kernel";
  Warn(absl::StrCat(what, " ", what_failed, ": ", why.message(), "; ", instead));
  state = StepState();
  state.fell_back = true;
  state.fallback.resize(step.fallback.size());
  return RunFallback(step, state, compile_only);
}

absl::Status Executor::RunFallback(const Step& step, StepState& state, bool compile_only) {
  for (size_t i = 0; i < step.fallback.size(); ++i) {
    BRAZE_RETURN_IF_ERROR(RunStep(step.fallback[i], state.fallback[i], compile_only));
  }
  return absl::OkStatus();
}

// Compile-only: reference steps do not run (HostCalls have side effects), so their
// outputs are stood in for by zeros of the inferred types, enough to plan and compile
// the steps after them. A HostCall output of unknown shape ends compile-ahead there;
// the rest compiles at the first Run.
void Executor::StandIn(const Step& step, StepState& state,
                       const std::vector<TensorType>& out_types) {
  state.buffers.clear();
  for (const TensorType& t : out_types) {
    if (!IsFullyDefined(t.shape)) {
      compile_stopped_ = true;
      return;
    }
    state.buffers.emplace_back(t.dtype, t.shape);
  }
  BindOutputs(step, state);
}

// Assign: no kernel, wherever the new value lives. The output is the new value; the
// variable takes it when the Run commits.
absl::Status Executor::RunAssign(const Step& step, const std::vector<Value>& inputs) {
  const Node& node = g_.node(step.nodes.front());
  const TensorType want = node.input(0).type();
  BRAZE_ASSIGN_OR_RETURN(const TensorType got, TypeOf(inputs[1]));
  if (got.dtype != want.dtype || !ShapeMatches(want.shape, got.shape)) {
    return absl::InvalidArgumentError(absl::StrCat(
        Label(node), ": the variable is ", TypeString(want), ", the value ", TypeString(got)));
  }
  Slot(step.outputs[0]) = inputs[1];
  updates_.emplace_back(node.input(0).node_id(), inputs[1]);
  return absl::OkStatus();
}

absl::Status Executor::RunReference(const Step& step, StepState& state,
                                    const std::vector<Value>& inputs,
                                    const std::vector<TensorType>& types) {
  TimelineEvent trace(step.name, "reference");  // observability: runtime/timeline.h
  const Node& node = g_.node(step.nodes.front());
  std::vector<HostTensor> in;
  in.reserve(inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (!inputs[i].defined()) {
      in.emplace_back(types[i].dtype, types[i].shape);
      continue;
    }
    BRAZE_ASSIGN_OR_RETURN(Value host, In(step.inputs[i], inputs[i], Space::kHost, Device{}));
    in.push_back(*host.host);
  }
  auto out_types = InferOutputTypes(node.op(), node.attrs(), types);
  if (!out_types.ok()) return Annotate(Label(node), out_types.status());
  auto outputs = RunReferenceKernel(node, in, *out_types);
  if (!outputs.ok()) return Annotate(Label(node), outputs.status());
  state.buffers = *std::move(outputs);
  ++stats_.reference_launches;
  BindOutputs(step, state);
  if (OpCategoryOf(node.op()) == OpCategory::kState) {
    Value v;
    v.host = &state.buffers[0];
    updates_.emplace_back(node.input(0).node_id(), v);
  }
  return absl::OkStatus();
}

absl::Status Executor::EnsureDeviceBuffers(const Step& step, StepState& state,
                                           const std::vector<TensorType>& out_types) {
  state.device_buffers.resize(out_types.size());
  for (size_t o = 0; o < out_types.size(); ++o) {
    auto& b = state.device_buffers[o];
    if (b != nullptr && b->type() == out_types[o] && b->device() == step.device) continue;
    auto fresh = DeviceTensor::Allocate(out_types[o], step.device);
    if (!fresh.ok()) return Annotate(step.name, fresh.status());
    b = *std::move(fresh);
  }
  return absl::OkStatus();
}

namespace {

// A copy of a cluster's nodes in a graph of its own, its inputs placeholders of their
// concrete types: what a background compile lowers, so that it never reads the
// program's graph while the program goes on (and perhaps adds nodes to it).
struct ClusterSnapshot {
  std::shared_ptr<Graph> graph = std::make_shared<Graph>();
  ClusterSpec spec;
};

// Null when a node reads a value that is neither the cluster's nor one of its inputs
// (not expected: the caller then compiles on its own thread).
std::shared_ptr<ClusterSnapshot> Snapshot(const ClusterSpec& spec) {
  auto snap = std::make_shared<ClusterSnapshot>();
  Graph& h = *snap->graph;
  std::map<std::pair<int, int>, Tensor> here;  // (node id, output) -> tensor of h
  for (size_t i = 0; i < spec.inputs.size(); ++i) {
    const Tensor& in = spec.inputs[i];
    Tensor p = h.AddNode(OpKind::kPlaceholder, {},
                         PlaceholderAttrs{spec.input_types[i].dtype, spec.input_types[i].shape},
                         absl::StrCat("input_", i));
    here[{in.node_id(), in.index()}] = p;
    snap->spec.inputs.push_back(p);
  }
  auto find = [&](const Tensor& t, Tensor* out) {
    auto it = here.find({t.node_id(), t.index()});
    if (it == here.end()) return false;
    *out = it->second;
    return true;
  };
  for (int id : spec.nodes) {
    const Node& n = spec.graph->node(id);
    std::vector<Tensor> inputs(n.num_inputs());
    for (int i = 0; i < n.num_inputs(); ++i) {
      if (!find(n.input(i), &inputs[i])) return nullptr;
    }
    Tensor t = h.AddNode(n.op(), std::move(inputs), n.attrs(), n.name());
    for (int o = 0; o < n.num_outputs(); ++o) here[{id, o}] = Tensor(&h, t.node_id(), o);
    snap->spec.nodes.push_back(t.node_id());
  }
  for (const Tensor& out : spec.outputs) {
    snap->spec.outputs.emplace_back();
    if (!find(out, &snap->spec.outputs.back())) return nullptr;
  }
  if (!h.status().ok()) return nullptr;
  snap->spec.graph = &h;
  snap->spec.name = spec.name;
  snap->spec.input_types = spec.input_types;
  snap->spec.node_types = spec.node_types;
  snap->spec.input_symbols = spec.input_symbols;
  return snap;
}

ClusterSpec SpecFor(const Graph& g, const Step& step, const std::vector<TensorType>& types,
                    std::vector<TensorType> node_types) {
  return ClusterSpec{&g,    step.name,    step.nodes,           step.inputs,
                     types, step.outputs, std::move(node_types)};
}

// The concrete type of each step output for these input types: a node's (node_types is
// parallel to step.nodes) or an input's. A symbolic kernel's own output types have -1s.
std::vector<TensorType> OutputTypes(const Step& step, const std::vector<TensorType>& types,
                                    const std::vector<TensorType>& node_types) {
  std::vector<TensorType> out;
  for (const Tensor& t : step.outputs) {
    TensorType type;
    for (size_t p = 0; p < step.nodes.size() && p < node_types.size(); ++p) {
      if (step.nodes[p] == t.node_id()) type = node_types[p];
    }
    for (size_t i = 0; i < step.inputs.size(); ++i) {
      if (step.inputs[i] == t) type = types[i];
    }
    out.push_back(type);
  }
  return out;
}

// "input 0 dim 0": the symbolic dims of `symbols`, for the compile log.
std::string SymbolicDims(const std::vector<std::vector<int>>& symbols) {
  std::vector<std::string> dims;
  for (size_t i = 0; i < symbols.size(); ++i) {
    for (size_t d = 0; d < symbols[i].size(); ++d) {
      if (symbols[i][d] >= 0) dims.push_back(absl::StrCat("input ", i, " dim ", d));
    }
  }
  return absl::StrJoin(dims, ", ");
}

// The compile cache's key for `spec`, and the options to compile it with: `copts` plus
// the stored schedule (schedule/stored_schedule.h) found for it in `schedule_dirs`, if
// any. Only CPU clusters under the default scheduler (kAuto) look one up: a scheduler
// the program chose explicitly is respected. The stored schedule's parameters enter
// the key, so kernels compiled with and without it are different kernels.
std::string KeyAndOptions(const ClusterSpec& spec, const CompileOptions& copts, bool disk_cache,
                          const std::vector<std::string>& schedule_dirs, CompileOptions* with) {
  *with = copts;
  std::string key = ClusterKey(spec, copts);
  if (!schedule_dirs.empty() && copts.device.kind == Device::Kind::kCpu &&
      copts.scheduler == SchedulerKind::kAuto) {
    // Threads do not enter the stored schedule's key (its factors are per thread): the
    // key under default options, which is `key` itself unless a thread count was set
    // or the GEMM library turned off.
    const bool default_key = copts.num_threads == 0 && copts.cpu_gemm_library &&
                             copts.cpu_gemm_min_work == kLibraryGemmMinWork;
    const std::string lookup =
        ScheduleKeyHash(default_key ? key : ClusterKey(spec, CompileOptions()));
    static const absl::StatusOr<std::string> target = JitTargetString(Device::Kind::kCpu);
    if (target.ok()) with->stored_schedule = FindStoredSchedule(schedule_dirs, lookup, *target);
    if (with->stored_schedule) {
      absl::StrAppend(&key, ";stored=", ParamsSummary(with->stored_schedule->params));
    }
  }
  if (disk_cache) with->disk_key = key;
  return key;
}

// When a symbol class of `spec` is smaller than kMinSymbolicExtent, makes `spec` the one
// of the kernel for sizes 1 to 15: each class at a fixed estimate (15 - class, never 1,
// which would broadcast), shapes inferred again. The estimate below kMinSymbolicExtent
// is what marks that kernel (its key, its splits by 1); all its small sizes share it.
bool ForSmallSizes(ClusterSpec* spec) {
  bool small = false;
  for (size_t i = 0; i < spec->input_symbols.size() && i < spec->input_types.size(); ++i) {
    for (size_t d = 0; d < spec->input_symbols[i].size(); ++d) {
      small |= spec->input_symbols[i][d] >= 0 && spec->input_types[i].shape[d] < kMinSymbolicExtent;
    }
  }
  if (!small) return false;
  for (size_t i = 0; i < spec->input_symbols.size() && i < spec->input_types.size(); ++i) {
    for (size_t d = 0; d < spec->input_symbols[i].size(); ++d) {
      const int k = spec->input_symbols[i][d];
      if (k >= 0) spec->input_types[i].shape[d] = std::max<int64_t>(2, kMinSymbolicExtent - 1 - k);
    }
  }
  spec->node_types.clear();
  return true;
}

// The kernel for `spec` from the compile cache (compiled on a miss): the symbolic one
// when spec has symbols, else, or when that is refused (symbolic.h says when), the one
// for its concrete shapes. What happened is appended to `*note` for the compile log.
CompileCache::Result GetKernel(ClusterSpec spec, const CompileOptions& copts, bool disk_cache,
                               const std::vector<std::string>& schedule_dirs, std::string* note) {
  if (!spec.input_symbols.empty()) {
    ClusterSpec symbolic = spec;
    const bool small = ForSmallSizes(&symbolic);
    CompileOptions with_key;
    const std::string key = KeyAndOptions(symbolic, copts, disk_cache, schedule_dirs, &with_key);
    CompileCache::Result result = CompileCache::Global().GetOrCompile(
        key, [&] { return CompileCluster(symbolic, with_key); });
    if (result.kernel.ok()) {
      absl::StrAppend(
          note, "; symbolic in ", SymbolicDims(spec.input_symbols),
          small ? absl::StrCat(" (a size below ", kMinSymbolicExtent,
                               ": one kernel for every size >= 1, its symbolic "
                               "dims unsplit)")
                : absl::StrCat(" (one kernel for every size >= ", kMinSymbolicExtent, ")"));
      result.input_symbols = spec.input_symbols;
      result.input_types = symbolic.input_types;
      return result;
    }
    absl::StrAppend(note, "; no symbolic kernel (", result.kernel.status().message(),
                    "): compiled for these sizes");
    spec.input_symbols.clear();
  }
  CompileOptions with_key;
  const std::string key = KeyAndOptions(spec, copts, disk_cache, schedule_dirs, &with_key);
  return CompileCache::Global().GetOrCompile(key, [&] { return CompileCluster(spec, with_key); });
}

// The signature as kernels see it: symbolic dims (`symbols`) as -2 - class, so every
// size of them is one signature (the recompile guard counts kernels, not sizes).
std::vector<TensorType> KernelSignature(std::vector<TensorType> types,
                                        const std::vector<std::vector<int>>& symbols) {
  for (size_t i = 0; i < types.size() && i < symbols.size(); ++i) {
    for (size_t d = 0; d < types[i].shape.size() && d < symbols[i].size(); ++d) {
      if (symbols[i][d] >= 0) types[i].shape[d] = -2 - symbols[i][d];
    }
  }
  return types;
}

}  // namespace

CompileOptions Executor::CompileOptionsFor(const Step& step) const {
  CompileOptions copts{ToSchedulerKind(options_.scheduler), options_.num_threads};
  if (step.space == Space::kDevice) copts.device = step.device;
  copts.cpu_gemm_library = options_.cpu_matmul == SessionOptions::CpuMatMul::kLibrary &&
                           GetBrazeFlags().cpu_gemm_library;
  if (GetBrazeFlags().cpu_gemm_min_work > 0) {
    copts.cpu_gemm_min_work = GetBrazeFlags().cpu_gemm_min_work;
  }
  return copts;
}

std::vector<std::string> Executor::ScheduleDirs() const {
  const BrazeFlags& flags = GetBrazeFlags();
  if (!options_.stored_schedules || !flags.stored_schedules) return {};
  std::vector<std::string> dirs = options_.schedule_dirs;
  dirs.insert(dirs.end(), flags.schedule_dirs.begin(), flags.schedule_dirs.end());
  for (std::string& dir : DefaultScheduleDirs()) dirs.push_back(std::move(dir));
  return dirs;
}

std::vector<std::vector<int>> Executor::InputSymbols(const Step& step,
                                                     const std::vector<TensorType>& types) const {
  if (!options_.symbolic_shapes || !GetBrazeFlags().symbolic_shapes ||
      step.space == Space::kDevice) {
    return {};
  }
  const SchedulerKind scheduler = ToSchedulerKind(options_.scheduler);
  if (scheduler != SchedulerKind::kAuto && scheduler != SchedulerKind::kSafeDefault) return {};
  std::vector<std::vector<int>> symbols(types.size());
  std::vector<int64_t> sizes;  // of each class: equal sizes share one
  for (size_t i = 0; i < types.size() && i < step.inputs.size(); ++i) {
    const Shape& declared = step.inputs[i].shape();  // the graph's: -1 where unknown
    const Shape& shape = types[i].shape;
    symbols[i].assign(shape.size(), -1);
    if (declared.size() != shape.size()) continue;
    for (size_t d = 0; d < shape.size(); ++d) {
      if (declared[d] != -1 || shape[d] < 1) continue;  // size 0: nothing to compute
      auto it = std::find(sizes.begin(), sizes.end(), shape[d]);
      symbols[i][d] = static_cast<int>(it - sizes.begin());
      if (it == sizes.end()) sizes.push_back(shape[d]);
    }
  }
  if (sizes.empty()) return {};
  return symbols;
}

// The kernel for `types` (compiled, or found in the cache) and output buffers of its
// types, once per input signature. A compile failure is `*compile_error` (the caller
// falls back); the status is for errors a fallback would not cure.
absl::Status Executor::Prepare(const Step& step, StepState& state,
                               const std::vector<TensorType>& types,
                               std::vector<TensorType> node_types, const std::string& reason,
                               absl::Status* compile_error) {
  ClusterSpec spec = SpecFor(g_, step, types, std::move(node_types));
  spec.input_symbols = InputSymbols(step, types);
  std::vector<TensorType> out_types = OutputTypes(step, types, spec.node_types);
  const CompileOptions copts = CompileOptionsFor(step);
  CompileCache::Result result;
  std::string note = reason;
  if (options_.inject_compile_failure && options_.inject_compile_failure(step.name)) {
    // Not through the cache: the failure is this session's alone.
    result.kernel = absl::InternalError("injected compile failure");
  } else {
    TimelineEvent trace(step.name, "compile");  // observability: runtime/timeline.h
    const bool wanted_symbols = !spec.input_symbols.empty();
    result = GetKernel(std::move(spec), copts, options_.disk_cache, ScheduleDirs(), &note);
    if (wanted_symbols && result.kernel.ok() && result.input_symbols.empty()) {
      state.symbolic_refused = true;
    }
    trace.set_args(result.hit ? "\"cache_hit\":true" : "\"cache_hit\":false");
  }
  return Install(step, state, types, std::move(out_types), note, result, compile_error);
}

// Starts compiling `types` on another thread (CompilePolicy::kAsync), from a snapshot.
std::optional<std::shared_future<CompileCache::Result>> Executor::CompileInBackground(
    const Step& step, const std::vector<TensorType>& types, std::vector<TensorType> node_types) {
  ClusterSpec spec = SpecFor(g_, step, types, std::move(node_types));
  spec.input_symbols = InputSymbols(step, types);
  const CompileOptions copts = CompileOptionsFor(step);
  if (options_.inject_compile_failure && options_.inject_compile_failure(step.name)) {
    std::promise<CompileCache::Result> failed;
    CompileCache::Result result;
    result.kernel = absl::InternalError("injected compile failure");
    failed.set_value(std::move(result));
    return failed.get_future().share();
  }
  std::shared_ptr<ClusterSnapshot> snap = Snapshot(spec);
  if (snap == nullptr) return std::nullopt;
  const std::string name = step.name;
  const bool disk_cache = options_.disk_cache;
  return std::async(std::launch::async,
                    [snap, copts, disk_cache, name, dirs = ScheduleDirs()]() {
                      TimelineEvent trace(name, "compile");
                      std::string note;  // the install logs "compiled in the background"
                      return GetKernel(snap->spec, copts, disk_cache, dirs, &note);
                    })
      .share();
}

// Makes `result` the step's kernel for `types`, with its output buffers.
absl::Status Executor::Install(const Step& step, StepState& state,
                               const std::vector<TensorType>& types,
                               std::vector<TensorType> out_types, const std::string& reason,
                               const CompileCache::Result& result, absl::Status* compile_error) {
  if (result.hit) {
    ++stats_.cache_hits;
  } else if (result.kernel.ok() && (*result.kernel)->kernel->loaded_from_disk()) {
    ++stats_.disk_cache_hits;
  } else if (result.kernel.ok() || result.compile_ms > 0) {
    ++stats_.compiles;
    stats_.compile_ms += result.compile_ms;
  }
  if (GetBrazeFlags().log_compiles) LogCompile(step, types, reason, result);
  if (!result.kernel.ok()) {
    *compile_error = result.kernel.status();
    return absl::OkStatus();
  }
  state.kernel = *result.kernel;
  state.input_types = types;
  state.verified = false;
  state.buffers.clear();
  state.device_buffers.clear();
  state.output_types = std::move(out_types);
  const std::vector<TensorType>& out = state.output_types;
  if (step.space == Space::kDevice) {
    BRAZE_RETURN_IF_ERROR(EnsureDeviceBuffers(step, state, out));
  } else {
    for (const TensorType& t : out) state.buffers.emplace_back(t.dtype, t.shape);
  }
  if (dumper_ != nullptr) {  // observability: runtime/dump.h
    // A symbolic kernel's .cluster holds it as compiled: its classes at their estimates.
    BRAZE_RETURN_IF_ERROR(dumper_->OnKernelReady(g_, step, types, *state.kernel->kernel,
                                                 result.input_symbols, result.input_types));
  }
  return absl::OkStatus();
}

// The step's output arguments: its own buffers in its space, or, on the host, the
// caller's destination tensor when the step produces a fetch of the same type (in
// place; jit:cpu's results are copied off the device when fetched).
absl::Status Executor::OutputArgs(const Step& step, StepState& state,
                                  std::vector<KernelArg>* outs) {
  for (size_t o = 0; o < step.outputs.size(); ++o) {
    if (step.space == Space::kDevice) {
      outs->push_back(KernelArg::Device(state.device_buffers[o].get()));
      continue;
    }
    auto it =
        step.space == Space::kHost ? destinations_.find(Key(step.outputs[o])) : destinations_.end();
    const bool direct = it != destinations_.end() && it->second->type() == state.buffers[o].type();
    outs->push_back(KernelArg{direct ? it->second : &state.buffers[o], nullptr});
  }
  return absl::OkStatus();
}

absl::Status Executor::RunCompiled(const Step& step, StepState& state,
                                   const std::vector<Value>& inputs,
                                   const std::vector<TensorType>& types, bool compile_only) {
  if (state.no_compile && !step.fallback.empty()) {
    return RunWithoutCompiling(step, state, compile_only);
  }
  if (!compile_only) ++state.guard.runs;
  if (state.kernel == nullptr || types != state.input_types) {
    // Shape errors are the user's: report them before trying to compile.
    BRAZE_ASSIGN_OR_RETURN(std::vector<TensorType> node_types, CheckShapes(step, types));
    if (Megamorphic(step, state, types)) return RunWithoutCompiling(step, state, compile_only);
    const std::string reason =
        state.input_types.empty()
            ? std::string("first use")
            : absl::StrCat("new signature: ", SignatureChange(state.input_types, types));
    absl::Status compile_error;
    bool ready = false;  // a background compile finished and was installed
    if (!compile_only && !options_.strict && !step.fallback.empty() &&
        options_.compile_policy != CompilePolicy::kEager) {
      const std::string signature = SignatureKey(types);
      if (options_.compile_policy == CompilePolicy::kLazy &&
          ++state.lazy_runs[signature] < options_.lazy_compile_threshold) {
        return RunWithoutCompiling(step, state, compile_only);
      }
      if (options_.compile_policy == CompilePolicy::kAsync) {
        auto it = state.pending.find(signature);
        if (it == state.pending.end()) {
          auto started = CompileInBackground(step, types, node_types);
          if (started.has_value()) {
            state.pending.emplace(signature, *std::move(started));
            return RunWithoutCompiling(step, state, compile_only);
          }
          // Not copyable for another thread: compiled here, below.
        } else if (it->second.wait_for(std::chrono::seconds(0)) != std::future_status::ready) {
          return RunWithoutCompiling(step, state, compile_only);
        } else {
          const CompileCache::Result result = it->second.get();
          state.pending.erase(it);
          BRAZE_RETURN_IF_ERROR(Install(step, state, types, OutputTypes(step, types, node_types),
                                        absl::StrCat(reason, " (compiled in the background)"),
                                        result, &compile_error));
          ready = true;
        }
      }
    }
    if (!ready) {
      BRAZE_RETURN_IF_ERROR(
          Prepare(step, state, types, std::move(node_types), reason, &compile_error));
    }
    if (!compile_error.ok()) {
      return FallBack(step, state, "failed to compile", compile_error, compile_only);
    }
  }
  const std::vector<TensorType>& out_types = state.output_types;
  if (compile_only) {
    if (step.space == Space::kDevice) {
      StandIn(step, state, out_types);
    } else {
      BindOutputs(step, state);
    }
    return absl::OkStatus();
  }
  std::vector<KernelArg> ins, outs;
  for (size_t i = 0; i < inputs.size(); ++i) {
    BRAZE_ASSIGN_OR_RETURN(Value v, In(step.inputs[i], inputs[i], step.space, step.device));
    ins.push_back(v.device != nullptr ? KernelArg::Device(v.device) : KernelArg::Host(v.host));
  }
  BRAZE_RETURN_IF_ERROR(OutputArgs(step, state, &outs));
  bool any_elements = false;
  for (const TensorType& t : out_types) any_elements |= NumElements(t.shape) > 0;
  absl::Status run_status;
  if (any_elements) {
    std::lock_guard<std::mutex> lock(state.kernel->mu);
    // Observability (runtime/timeline.h): one bar per launch, after the lock wait.
    TimelineEvent trace(step.name, step.kind == Step::Kind::kCluster ? "cluster" : "op");
    run_status = state.kernel->kernel->Launch(ins, outs);
  }
  if (!run_status.ok()) {
    // Inputs were checked against the plan's shapes, so a Halide run-time error here
    // is the kernel's fault (e.g. a schedule's bounds): treated like a failed compile.
    // The kernel's errors already name the cluster or op.
    return FallBack(step, state, "failed to run", run_status, /*compile_only=*/false);
  }
  if (options_.inject_wrong_result && options_.inject_wrong_result(step.name) &&
      outs[0].host != nullptr && outs[0].host->num_elements() > 0) {
    outs[0].host->SetDouble(0, outs[0].host->GetDouble(0) + 1);  // testing hook
  }
  if ((options_.verify || GetBrazeFlags().verify) && !state.verified) {
    BRAZE_RETURN_IF_ERROR(Verify(step, state, inputs, outs));
  }
  for (size_t o = 0; o < step.outputs.size(); ++o) {
    Value& v = Slot(step.outputs[o]);
    v = Value();
    v.space = step.space;
    v.host = outs[o].host;
    v.device = outs[o].device;
  }
  if (step.kind == Step::Kind::kCluster) {
    ++stats_.cluster_launches;
  } else {
    ++stats_.single_op_launches;
  }
  return absl::OkStatus();
}

// Runs the step's fallback with none of its steps compiling: each op on its reference
// kernel (the recompile guard, and lazy or async compiles not ready yet).
absl::Status Executor::RunWithoutCompiling(const Step& step, StepState& state, bool compile_only) {
  state.fallback.resize(step.fallback.size());
  for (StepState& f : state.fallback) f.no_compile = true;
  return RunFallback(step, state, compile_only);
}

bool Executor::Megamorphic(const Step& step, StepState& state,
                           const std::vector<TensorType>& signature) {
  SignatureGuard& guard = state.guard;
  const std::vector<TensorType> types =
      state.symbolic_refused ? signature
                             : KernelSignature(signature, InputSymbols(step, signature));
  const int limit = options_.max_signatures_per_cluster;
  if (limit <= 0 || options_.strict || step.fallback.empty()) return false;
  const bool known = std::find(guard.seen.begin(), guard.seen.end(), types) != guard.seen.end();
  if (known) return false;
  if (guard.megamorphic) return true;
  if (static_cast<int>(guard.seen.size()) >= limit &&
      guard.runs <
          SignatureGuard::kRunsPerSignature * static_cast<int64_t>(guard.seen.size() + 1)) {
    guard.megamorphic = true;
    std::vector<std::vector<TensorType>> all = guard.seen;
    all.push_back(types);
    const std::string what = step.kind == Step::Kind::kCluster
                                 ? absl::StrCat("cluster '", step.name, "'")
                                 : Label(g_.node(step.nodes.front()));
    Warn(absl::StrCat(what, " met ", all.size(), " input signatures in ", guard.runs,
                      " runs (more than max_signatures_per_cluster = ", limit, ", fewer than ",
                      SignatureGuard::kRunsPerSignature,
                      " runs each): it is no longer compiled for new signatures, which run op "
                      "by op on the reference kernels. Changing: ",
                      ChangingDims(all, "input"),
                      ". A -1 dim in an input_signature with reduce_retracing, or padding to a "
                      "few sizes, avoids this."));
    return true;
  }
  guard.seen.push_back(types);
  return false;
}

absl::Status Executor::RunGemm(const Step& step, StepState& state, const std::vector<Value>& inputs,
                               const std::vector<TensorType>& types, bool compile_only) {
  if (types != state.input_types) {  // sizes once per input signature, not per Run
    const Node& mm = g_.node(step.nodes.front());
    BRAZE_RETURN_IF_ERROR(CheckShapes(step, types).status());
    auto mm_types = InferOutputTypes(mm.op(), mm.attrs(), {types[0], types[1]});
    if (!mm_types.ok()) return Annotate(Label(mm), mm_types.status());
    const TensorType& out = (*mm_types)[0];
    const auto& attrs = mm.attrs_as<MatMulAttrs>();
    GemmShape& shape = state.gemm;
    shape.dtype = out.dtype;
    const size_t r = out.shape.size();
    shape.m = out.shape[r - 2];
    shape.n = out.shape[r - 1];
    shape.k = attrs.transpose_a ? types[0].shape[r - 2] : types[0].shape[r - 1];
    shape.batch = 1;
    for (size_t d = 0; d + 2 < r; ++d) shape.batch *= out.shape[d];
    shape.transpose_a = attrs.transpose_a;
    shape.transpose_b = attrs.transpose_b;
    shape.epilogue = step.nodes.size() == 1   ? GemmEpilogue::kNone
                     : step.nodes.size() == 2 ? GemmEpilogue::kBias
                                              : GemmEpilogue::kBiasRelu;
    state.input_types = types;
    state.device_buffers.clear();
  }
  // The output: out's batch dims (a's) then m x n.
  TensorType out{state.gemm.dtype, Shape(types[0].shape.begin(), types[0].shape.end() - 2)};
  out.shape.push_back(state.gemm.m);
  out.shape.push_back(state.gemm.n);
  if (compile_only) {
    StandIn(step, state, {out});
    return absl::OkStatus();
  }
  const GemmShape& shape = state.gemm;
  absl::Status status = EnsureDeviceBuffers(step, state, {out});
  std::vector<DeviceTensor*> ins;
  for (size_t i = 0; status.ok() && i < inputs.size(); ++i) {
    auto v = In(step.inputs[i], inputs[i], Space::kDevice, step.device);
    status = v.status();
    if (v.ok()) ins.push_back(v->device);
  }
  if (status.ok()) {
    TimelineEvent trace(step.name, "gemm");
    DeviceTensor* result = state.device_buffers[0].get();
    status = RunInCudaContext(step.device.index, [&] {
      return CublasGemm(step.name, shape, ins[0]->device_address(), ins[1]->device_address(),
                        ins.size() > 2 ? ins[2]->device_address() : 0, result->device_address());
    });
  }
  // cuBLAS refused (or is missing): the same ops as Halide CUDA kernels.
  if (!status.ok()) return FallBack(step, state, "(cuBLAS GEMM) failed", status, false);
  ++stats_.gemm_launches;
  Value& v = Slot(step.outputs[0]);
  v = Value();
  v.space = Space::kDevice;
  v.device = state.device_buffers[0].get();
  return absl::OkStatus();
}

// Infers every node's types for concrete inputs, once per input signature, so a bad
// runtime shape is reported against the node, as the reference path does. The types
// (output 0 of each node, parallel to step.nodes) go to the lowering, which then need
// not infer them again.
absl::StatusOr<std::vector<TensorType>> Executor::CheckShapes(
    const Step& step, const std::vector<TensorType>& types) {
  std::vector<TensorType> node_types;
  std::unordered_map<int64_t, TensorType> known;
  for (size_t i = 0; i < step.inputs.size(); ++i) known[Key(step.inputs[i])] = types[i];
  for (int id : step.nodes) {
    const Node& n = g_.node(id);
    std::vector<TensorType> in;
    for (const Tensor& t : n.inputs()) in.push_back(known.at(Key(t)));
    auto out = InferOutputTypes(n.op(), n.attrs(), in);
    if (!out.ok()) return Annotate(Label(n), out.status());
    for (int o = 0; o < n.num_outputs(); ++o) {
      known[Key(Tensor(const_cast<Graph*>(&g_), id, o))] = (*out)[o];
    }
    node_types.push_back((*out)[0]);
  }
  return node_types;
}

// Verify mode: the kernel's first run for this signature against the reference kernels
// (runtime/verify.h), on host copies of its inputs and outputs.
absl::Status Executor::Verify(const Step& step, StepState& state, const std::vector<Value>& inputs,
                              const std::vector<KernelArg>& outs) {
  std::vector<HostTensor> in, out;
  for (size_t i = 0; i < inputs.size(); ++i) {
    BRAZE_ASSIGN_OR_RETURN(Value host, In(step.inputs[i], inputs[i], Space::kHost, Device{}));
    in.push_back(*host.host);
  }
  for (const KernelArg& a : outs) {
    if (a.host != nullptr) {
      out.push_back(*a.host);
    } else {
      out.emplace_back();
      BRAZE_RETURN_IF_ERROR(a.device->CopyToHost(&out.back()));
    }
  }
  VerifyOptions o;
  o.rtol = options_.verify_rtol;
  o.atol = options_.verify_atol;
  o.dump_to = GetBrazeFlags().dump_to;
  BRAZE_RETURN_IF_ERROR(VerifyStep(g_, step, in, out, *state.kernel->kernel, o));
  state.verified = true;
  ++stats_.verified_kernels;
  return absl::OkStatus();
}

void Executor::BindOutputs(const Step& step, StepState& state) {
  for (size_t o = 0; o < step.outputs.size(); ++o) BindHost(step.outputs[o], &state.buffers[o]);
}

absl::Status Executor::Fetch(const Tensor& t, HostTensor* out) {
  const Value& v = Slot(t);
  if (!v.defined()) {
    if (t.node().op() == OpKind::kVariable) {
      return absl::FailedPreconditionError(
          absl::StrCat("reading uninitialized variable '", t.name(), "' (fetched)"));
    }
    return absl::InternalError(absl::StrCat("fetch '", t.name(), "' was not computed"));
  }
  if (v.variable >= 0) {
    auto value = ReadVariable(variables_.at(v.variable), stats_);
    if (!value.ok()) return Annotate(absl::StrCat("fetch '", t.name(), "'"), value.status());
    AssignHost(*value, out);
    return absl::OkStatus();
  }
  if (v.host == out) return absl::OkStatus();  // written in place
  if (v.device != nullptr) {
    CopyEvent event(Space::kDevice, Space::kHost, v.device->num_bytes());
    BRAZE_RETURN_IF_ERROR(v.device->CopyToHost(out));
    CountCopy(Space::kDevice, Space::kHost, v.device->num_bytes(), stats_);
    return absl::OkStatus();
  }
  std::optional<CopyEvent> event;
  if (v.space != Space::kHost) event.emplace(v.space, Space::kHost, v.host->num_bytes());
  AssignHost(*v.host, out);
  if (v.space != Space::kHost) CountCopy(v.space, Space::kHost, v.host->num_bytes(), stats_);
  return absl::OkStatus();
}

HostTensor* Executor::StepBuffer(const HostTensor* p) {
  for (StepState& step : state_.steps) {
    for (HostTensor& b : step.buffers) {
      if (&b == p) return &b;
    }
    for (StepState& fallback : step.fallback) {
      for (HostTensor& b : fallback.buffers) {
        if (&b == p) return &b;
      }
    }
  }
  return nullptr;
}

// A new value in one of the plan's step buffers becomes the variable's storage by a
// swap, not a copy: the step gets the variable's old storage and overwrites it on its
// next run, as it would its own. A training step's weights and optimizer slots (22 MB
// for the MLP example with Adam) were copied at every commit. Copied as before: values
// in a caller's tensor (fed, or fetched into), in a mirror (which may cache a Const),
// taken by two variables, or of another type than the variable's storage.
absl::Status Executor::CommitUpdates() {
  std::map<const HostTensor*, int> takers;
  for (const auto& [var, value] : updates_) {
    if (value.host != nullptr && value.variable < 0) ++takers[value.host];
  }
  // Assign(a, b) of another variable takes b's value from before the Run, as every read
  // in a Run does: read before any update is applied (Assign(p, q) after an update of q
  // committed q's new value into p; a review found it).
  std::map<size_t, HostTensor> sources;
  for (size_t i = 0; i < updates_.size(); ++i) {
    const auto& [var, value] = updates_[i];
    if (value.variable < 0 || value.variable == var) continue;
    auto host = ReadVariable(variables_.at(value.variable), stats_);
    if (!host.ok()) return host.status();
    sources[i] = *std::move(host);
  }
  for (size_t i = 0; i < updates_.size(); ++i) {
    const auto& [var, value] = updates_[i];
    VariableSlot& slot = variables_[var];
    Value v = value;
    if (v.variable >= 0) {  // Assign(a, b) of another variable: b's host value
      if (v.variable == var) continue;
      slot.host = std::move(sources.at(i));
      slot.host_valid = true;
      slot.jit_valid = slot.device_valid = false;
      continue;
    }
    if (v.device != nullptr) {
      BRAZE_RETURN_IF_ERROR(
          CopyInto(v, Space::kDevice, v.device->device(), nullptr, &slot.on_device));
    } else {
      HostTensor* to = v.space == Space::kJitCpu ? &slot.jit : &slot.host;
      HostTensor* owned = takers[v.host] == 1 ? StepBuffer(v.host) : nullptr;
      if (owned != nullptr && owned->type() == to->type()) {
        std::swap(*owned, *to);
      } else {
        AssignHost(*v.host, to);
      }
    }
    slot.host_valid = v.space == Space::kHost;
    slot.jit_valid = v.space == Space::kJitCpu;
    slot.device_valid = v.space == Space::kDevice;
  }
  return absl::OkStatus();
}

}  // namespace braze
