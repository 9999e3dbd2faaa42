// Executor: runs one Session::Run's plan steps against a table of values that live in
// memory spaces (runtime/plan.h: the host, jit:cpu, a CUDA device).
//
// A step runs in its space; an input that lives elsewhere is copied into a Mirror kept
// on the plan (once per Run, or once ever for a Const) and the copy is counted in
// SessionStats. So values stay on their device between kernels, and copies happen only
// at feeds, fetches, reference/HostCall ops and edges between devices.
//
// Variables have a replica per space (VariableSlot): a read in a space whose replica is
// stale copies from a fresh one (counted) and keeps it, so a training loop on a GPU
// uploads each variable once. Updates commit at the end of a Run into the replica of
// the space the new value was computed in, and mark the others stale.
#ifndef BRAZE_RUNTIME_EXECUTOR_H_
#define BRAZE_RUNTIME_EXECUTOR_H_

#include <memory>
#include <set>
#include <tuple>
#include <unordered_map>
#include <vector>

#include "absl/status/status.h"
#include "braze/graph.h"
#include "braze/session.h"
#include "runtime/dump.h"
#include "runtime/plan.h"

namespace braze {

struct VariableSlot {
  HostTensor host;  // kHost
  HostTensor jit;   // kJitCpu
  std::shared_ptr<DeviceTensor> cuda;
  bool host_valid = false, jit_valid = false, cuda_valid = false;
  bool defined() const { return host_valid || jit_valid || cuda_valid; }
};

// A value during one Run.
struct Value {
  Space space = Space::kHost;
  const HostTensor* host = nullptr;  // kHost, kJitCpu
  DeviceTensor* device = nullptr;    // kCuda
  int variable = -1;                 // a Variable's node id: read from its slot per space
  bool defined() const { return host != nullptr || device != nullptr || variable >= 0; }
};

// The variable's value on the host, copying it off a device if need be (counted).
absl::StatusOr<HostTensor> ReadVariable(VariableSlot& slot, SessionStats& stats);

class Executor {
 public:
  Executor(const Graph& g, const SessionOptions& options, SessionStats& stats, Plan& plan,
           std::unordered_map<int, VariableSlot>& variables);

  void BindHost(const Tensor& t, const HostTensor* v);
  void BindVariable(const Tensor& t);
  // Compiled host steps producing `t` write straight into `dest` when the types agree.
  void SetDestination(const Tensor& t, HostTensor* dest);
  void set_dumper(SessionDumper* dumper) { dumper_ = dumper; }

  absl::Status RunStep(Step& step, bool compile_only);
  // Copies fetch `t` into `out` (off a device: counted).
  absl::Status Fetch(const Tensor& t, HostTensor* out);
  // Commits the Run's variable updates (Assign family).
  absl::Status CommitUpdates();

 private:
  static int64_t Key(const Tensor& t) { return static_cast<int64_t>(t.node_id()) * 64 + t.index(); }
  Value& Slot(const Tensor& t) { return values_[t.node_id()][t.index()]; }
  absl::StatusOr<TensorType> TypeOf(const Value& v) const;
  // `v` (the value of `t`) in `space`, copying it there if needed.
  absl::StatusOr<Value> In(const Tensor& t, const Value& v, Space space, int ordinal);
  // Copies `from` into host memory `*to_host` or device tensor `*to_device` in `space`.
  absl::Status CopyInto(const Value& from, Space space, int ordinal, HostTensor* to_host,
                        std::shared_ptr<DeviceTensor>* to_device);

  void FallBack(Step& step);
  absl::Status RunFallback(Step& step, bool compile_only);
  absl::Status StandIn(Step& step, const std::vector<TensorType>& out_types);
  absl::Status RunAssign(Step& step, const std::vector<Value>& inputs);
  absl::Status RunReference(Step& step, const std::vector<Value>& inputs,
                            const std::vector<TensorType>& types);
  absl::Status RunCompiled(Step& step, const std::vector<Value>& inputs,
                           const std::vector<TensorType>& types, bool compile_only);
  absl::Status RunGemm(Step& step, const std::vector<Value>& inputs,
                       const std::vector<TensorType>& types, bool compile_only);
  absl::Status CheckShapes(const Step& step, const std::vector<TensorType>& types);
  absl::Status EnsureDeviceBuffers(Step& step, const std::vector<TensorType>& out_types);
  void BindOutputs(Step& step);

  const Graph& g_;
  const SessionOptions& options_;
  SessionStats& stats_;
  Plan& plan_;
  std::unordered_map<int, VariableSlot>& variables_;
  std::vector<std::vector<Value>> values_;
  std::vector<std::pair<int, Value>> updates_;
  std::unordered_map<int64_t, HostTensor*> destinations_;
  std::set<std::tuple<int, int, Space>> mirrored_;  // mirrors filled in this Run
  SessionDumper* dumper_ = nullptr;
};

}  // namespace braze

#endif  // BRAZE_RUNTIME_EXECUTOR_H_
