// Executor: runs one Session::Run's plan steps against a table of values that live in
// memory spaces (runtime/plan.h: the host, jit:cpu, a CUDA device). The plan is read
// only; kernels, buffers, mirrors and fallbacks are kept in the PlanState.
//
// Every compiled step, whatever its space, launches through one path (RunCompiled ->
// CompiledKernel::Launch): its inputs are brought into its space, its outputs are
// buffers of that space. A step whose compile, kernel or library call fails switches
// to the fallback the plan computed for it, and stays there.
//
// A step runs in its space; an input that lives elsewhere is copied into a Mirror kept
// in the plan state (once per Run, or once ever for a Const) and the copy is counted
// in SessionStats. So values stay on their device between kernels, and copies happen only
// at feeds, fetches, reference/HostCall ops and edges between devices.
//
// Variables have a replica per space (VariableSlot): a read in a space whose replica is
// stale copies from a fresh one (counted) and keeps it, so a training loop on a GPU
// uploads each variable once. Updates commit at the end of a Run into the replica of
// the space the new value was computed in, and mark the others stale.
#ifndef BRAZE_RUNTIME_EXECUTOR_H_
#define BRAZE_RUNTIME_EXECUTOR_H_

#include <future>
#include <memory>
#include <optional>
#include <set>
#include <tuple>
#include <unordered_map>
#include <vector>

#include "absl/status/status.h"
#include "braze/graph.h"
#include "braze/session.h"
#include "runtime/dump.h"
#include "runtime/plan.h"
#include "runtime/plan_state.h"

namespace braze {

struct VariableSlot {
  HostTensor host;                          // kHost
  HostTensor jit;                           // kJitCpu
  std::shared_ptr<DeviceTensor> on_device;  // kDevice: on the device it was last used on
  bool host_valid = false, jit_valid = false, device_valid = false;
  bool defined() const { return host_valid || jit_valid || device_valid; }
};

// A value during one Run.
struct Value {
  Space space = Space::kHost;
  const HostTensor* host = nullptr;  // kHost, kJitCpu
  DeviceTensor* device = nullptr;    // kDevice
  int variable = -1;                 // a Variable's node id: read from its slot per space
  bool defined() const { return host != nullptr || device != nullptr || variable >= 0; }
};

// "node 'x' (Exp)": how errors name a node.
std::string NodeLabel(const Node& n);
// `s` with "`what`: " before its message.
absl::Status Annotate(const std::string& what, const absl::Status& s);

// The variable's value on the host, copying it off a device if need be (counted).
absl::StatusOr<HostTensor> ReadVariable(VariableSlot& slot, SessionStats& stats);

class Executor {
 public:
  Executor(const Graph& g, const SessionOptions& options, SessionStats& stats, PlanState& state,
           std::unordered_map<int, VariableSlot>& variables);
  // Waits for collectives still running (their buffers belong to the plan state).
  ~Executor();
  Executor(const Executor&) = delete;
  Executor& operator=(const Executor&) = delete;

  void BindHost(const Tensor& t, const HostTensor* v);
  void BindVariable(const Tensor& t);
  // Compiled host steps producing `t` write straight into `dest` when the types agree.
  void SetDestination(const Tensor& t, HostTensor* dest);
  void set_dumper(SessionDumper* dumper) { dumper_ = dumper; }

  // Runs `step` (plan.steps[i], with state.steps[i]). compile_only: compiles what the
  // step needs and binds stand-ins for its outputs instead of running it.
  absl::Status RunStep(const Step& step, StepState& state, bool compile_only);
  // Compile-only runs stop at the first step whose inputs have an unknown shape (a
  // HostCall's output): the rest compiles at the first Run. True once that happened;
  // RunStep then does nothing.
  bool compile_stopped() const { return compile_stopped_; }
  // Copies fetch `t` into `out` (off a device: counted).
  absl::Status Fetch(const Tensor& t, HostTensor* out);
  // Commits the Run's variable updates (Assign family).
  absl::Status CommitUpdates();
  // Waits for every collective started in this Run (before fetches and commits); the
  // first failure, naming its node.
  absl::Status WaitCollectives();
  // A collective step's output `t` is being computed on the communication thread:
  // RunStep waits for `done` before a step that reads it (step_collective.cc).
  void AddPending(const Tensor& t, std::shared_future<absl::Status> done) {
    pending_[Key(t)] = std::move(done);
  }

  // Services for step kinds (runtime/step_kind.h): what their Run functions use.
  const Graph& graph() const { return g_; }
  const SessionOptions& options() const { return options_; }
  SessionStats& stats() { return stats_; }
  SessionDumper* dumper() const { return dumper_; }
  // The value of `t` in this Run.
  Value& Slot(const Tensor& t) { return values_[t.node_id()][t.index()]; }
  absl::StatusOr<TensorType> TypeOf(const Value& v) const;
  // `v` (the value of `t`) in `space`, copying it there if needed.
  absl::StatusOr<Value> In(const Tensor& t, const Value& v, Space space, const Device& device);
  // The step's compile, kernel or library call failed (`what_failed`, `why`): strict
  // mode reports it (if its kind says so); otherwise the plan's fallback for the step
  // runs, now and from then on, with one warning saying why.
  absl::Status FallBack(const Step& step, StepState& state, const char* what_failed,
                        const absl::Status& why, bool compile_only);
  // Runs the step's fallback (its ops one by one) while its own kernel is not ready,
  // without falling back for good. `compile_ops`: each op runs its compiled single-op
  // kernel (the recompile guard refused the step a kernel for this signature); else
  // each runs its reference kernel (a lazy or async compile not ready yet, which
  // compiling other kernels meanwhile would only delay).
  absl::Status RunOpByOp(const Step& step, StepState& state, bool compile_only, bool compile_ops);
  // Compile-only: binds zeros of `out_types` for the step's outputs (see compile_stopped).
  void StandIn(const Step& step, StepState& state, const std::vector<TensorType>& out_types);
  // Binds state.buffers as the step's outputs.
  void BindOutputs(const Step& step, StepState& state);
  // A variable update (Assign family) that commits at the end of the Run.
  void AddUpdate(int variable, const Value& value) { updates_.emplace_back(variable, value); }
  absl::Status EnsureDeviceBuffers(const Step& step, StepState& state,
                                   const std::vector<TensorType>& out_types);
  // Every node's types for concrete inputs (output 0 of each, parallel to step.nodes),
  // a bad shape reported against its node.
  absl::StatusOr<std::vector<TensorType>> CheckShapes(const Step& step,
                                                      const std::vector<TensorType>& types);
  // The step's output arguments: its own buffers in its space, or on the host the
  // caller's destination tensor when the types agree (written in place).
  absl::Status OutputArgs(const Step& step, StepState& state, std::vector<KernelArg>* outs);
  // Verify mode: the step's outputs against the reference kernels.
  absl::Status Verify(const Step& step, StepState& state, const std::vector<Value>& inputs,
                      const std::vector<KernelArg>& outs);
  // How messages name the step: "cluster 'x'" or "node 'y' (Exp)".
  std::string What(const Step& step) const;
  // `p` when it is one of this plan's step output buffers (reused across runs), mutable;
  // nullptr for memory the executor does not own (feeds, variables, mirrors, fetches).
  HostTensor* StepBuffer(const HostTensor* p);

 private:
  // A tensor's key in maps: node id and output index, without collisions.
  static int64_t Key(const Tensor& t) {
    return (static_cast<int64_t>(t.node_id()) << 32) | static_cast<uint32_t>(t.index());
  }
  // Copies `from` into host memory `*to_host` or device tensor `*to_device` in `space`.
  absl::Status CopyInto(const Value& from, Space space, const Device& device, HostTensor* to_host,
                        std::shared_ptr<DeviceTensor>* to_device);
  absl::Status RunFallback(const Step& step, StepState& state, bool compile_only);

  const Graph& g_;
  const SessionOptions& options_;
  SessionStats& stats_;
  PlanState& state_;
  std::unordered_map<int, VariableSlot>& variables_;
  std::vector<std::vector<Value>> values_;
  std::vector<std::pair<int, Value>> updates_;
  std::unordered_map<int64_t, HostTensor*> destinations_;
  std::set<std::tuple<int, int, Space>> mirrored_;  // mirrors filled in this Run
  // Outputs of collectives still running, by Key (AddPending).
  std::unordered_map<int64_t, std::shared_future<absl::Status>> pending_;
  SessionDumper* dumper_ = nullptr;
  bool compile_stopped_ = false;
};

}  // namespace braze

#endif  // BRAZE_RUNTIME_EXECUTOR_H_
