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
#include "compile/kernel_source.h"
#include "device/communicator.h"
#include "device/cpu_gemm.h"
#include "device/cublas_gemm.h"
#include "ir/logging.h"
#include "ir/timeline.h"
#include "reference/reference.h"
#include "runtime/flags.h"
#include "runtime/step_kind.h"
#include "runtime/verify.h"

namespace braze {
namespace {

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

// A copy between memory spaces as a timeline event of its own (ir/timeline.h):
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

}  // namespace

std::string NodeLabel(const Node& n) {
  return absl::StrCat("node '", n.name(), "' (", n.op_name(), ")");
}

absl::Status Annotate(const std::string& what, const absl::Status& s) {
  return absl::Status(s.code(), absl::StrCat(what, ": ", s.message()));
}

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

Executor::~Executor() {
  for (auto& [key, done] : pending_) (void)comm::ProcessCommQueue().Wait(done);
}

absl::Status Executor::WaitCollectives() {
  absl::Status first;
  for (auto& [key, done] : pending_) {
    absl::Status s = comm::ProcessCommQueue().Wait(done);
    if (first.ok() && !s.ok()) first = s;
  }
  pending_.clear();
  return first;
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
    if (auto it = pending_.find(Key(in)); it != pending_.end()) {  // a collective's output
      absl::Status done = comm::ProcessCommQueue().Wait(it->second);
      pending_.erase(it);
      BRAZE_RETURN_IF_ERROR(done);
    }
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
  return StepKindOf(step.kind).Run(*this, step, state, inputs, types, compile_only);
}

// A step whose compile, kernel or library call failed: see executor.h.
absl::Status Executor::FallBack(const Step& step, StepState& state, const char* what_failed,
                                const absl::Status& why, bool compile_only) {
  const StepKind& kind = StepKindOf(step.kind);
  if ((options_.strict && kind.strict_reports_failure()) || step.fallback.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(What(step), " ", what_failed, " (strict mode): ", why.message()));
  }
  Warn(absl::StrCat(What(step), " ", what_failed, ": ", why.message(), "; ", kind.instead()));
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

std::string Executor::What(const Step& step) const {
  return step.kind == Step::Kind::kCluster ? absl::StrCat("cluster '", step.name, "'")
                                           : NodeLabel(g_.node(step.nodes.front()));
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

absl::Status Executor::RunOpByOp(const Step& step, StepState& state, bool compile_only,
                                 bool compile_ops) {
  state.fallback.resize(step.fallback.size());
  for (StepState& f : state.fallback) f.no_compile = !compile_ops;
  return RunFallback(step, state, compile_only);
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
    if (!out.ok()) return Annotate(NodeLabel(n), out.status());
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
