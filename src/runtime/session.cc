// Session::Run: validates feeds and fetches, finds (or builds) the plan for this
// fetch/target/feed combination, binds sources, runs the plan's steps, copies the fetches
// out and finally commits variable updates (so every read in one Run sees the values the
// variables had when it started).
#include "braze/session.h"

#include <algorithm>
#include <cmath>
#include <mutex>
#include <new>
#include <unordered_map>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/str_cat.h"
#include "braze/status.h"
#include "device/features.h"
#include "ir/changing_dims.h"
#include "runtime/dump.h"
#include "runtime/executor.h"
#include "runtime/flags.h"
#include "runtime/live_bytes.h"
#include "runtime/plan.h"
#include "runtime/plan_state.h"
#include "schedule/stored_schedule.h"

namespace braze {
namespace {}  // namespace

struct Session::State {
  mutable std::mutex mu;
  std::unordered_map<int, VariableSlot> variables;  // by node id, once initialized/assigned
  // Per (feeds, fetches, targets): the plan, built once, and what running it keeps.
  struct PlanEntry {
    std::unique_ptr<const Plan> plan;
    std::unique_ptr<PlanState> state;
  };
  std::unordered_map<std::string, PlanEntry> plans;
  // SessionOptions::device, parsed (and "auto" resolved) once, when the session starts;
  // a bad name is every Run's error.
  absl::StatusOr<Device> default_device;
  absl::Status options_status;  // CheckOptions: a field out of range is every Run's error
  const Plan* last_plan = nullptr;
  SessionStats stats;
  SessionDumper dumper;  // observability: BRAZE_FLAGS --dump_to, --clustering_debug
};

namespace {
// The sessions whose Run is on this thread's stack: a HostCall that runs its own
// session again, or reads or sets its variables (directly, or as a Function sharing
// them does), would wait for that session's lock forever (a black-box test, a review).
thread_local std::vector<const Session*> running_here;

bool RunningHere(const Session* s) {
  return std::find(running_here.begin(), running_here.end(), s) != running_here.end();
}

absl::Status NotRunningHere(const Session* s, const char* what) {
  if (!RunningHere(s)) return absl::OkStatus();
  return absl::FailedPreconditionError(
      absl::StrCat(what,
                   " called from inside one of this session's own Runs (a HostCall's function?): "
                   "the Run holds the session; use another Session"));
}

// Whether an enum value is one of its enum's: a switch with no default, so a new value
// is a -Werror=switch error here until it is listed.
bool Known(JitLevel v) {
  switch (v) {
    case JitLevel::kOff:
    case JitLevel::kOn1:
    case JitLevel::kOn2:
      return true;
  }
  return false;
}
bool Known(CompilePolicy v) {
  switch (v) {
    case CompilePolicy::kEager:
    case CompilePolicy::kLazy:
    case CompilePolicy::kAsync:
      return true;
  }
  return false;
}
bool Known(SessionOptions::CudaMatMul v) {
  switch (v) {
    case SessionOptions::CudaMatMul::kCublas:
    case SessionOptions::CudaMatMul::kHalide:
      return true;
  }
  return false;
}
bool Known(SessionOptions::CpuMatMul v) {
  switch (v) {
    case SessionOptions::CpuMatMul::kLibrary:
    case SessionOptions::CpuMatMul::kHalide:
      return true;
  }
  return false;
}
bool Known(Scheduler v) {
  switch (v) {
#define V(id, name) case Scheduler::id:
#include "braze/schedulers.def"
#undef V
    return true;
  }
  return false;
}

// SessionOptions' numbers and enums, checked once: out of range, a negative num_threads
// failed every compile (a warning per op, then the reference kernels), a NaN verify
// tolerance passed every kernel, and a lazy threshold of 0 or an unknown enum value
// did whatever the comparisons made of it.
absl::Status CheckOptions(const SessionOptions& o) {
  auto bad = [](const char* field, auto value, const char* want) {
    return absl::InvalidArgumentError(
        absl::StrCat("SessionOptions::", field, " is ", value, "; it must be ", want));
  };
  if (o.num_threads < 0) return bad("num_threads", o.num_threads, ">= 0 (0: all CPUs)");
  if (o.min_cluster_size < 1) return bad("min_cluster_size", o.min_cluster_size, ">= 1");
  if (o.max_cluster_size < 1) return bad("max_cluster_size", o.max_cluster_size, ">= 1");
  if (o.max_matmuls_per_cluster < 0) {
    return bad("max_matmuls_per_cluster", o.max_matmuls_per_cluster, ">= 0");
  }
  // max_signatures_per_cluster <= 0 (no guard) and lazy_compile_threshold 0 (as 1) always
  // worked: every int is accepted. An infinite tolerance passes every kernel, as asked.
  if (std::isnan(o.verify_rtol) || o.verify_rtol < 0) {
    return bad("verify_rtol", o.verify_rtol, ">= 0 (+inf too), not NaN");
  }
  if (std::isnan(o.verify_atol) || o.verify_atol < 0) {
    return bad("verify_atol", o.verify_atol, ">= 0 (+inf too), not NaN");
  }
  if (!Known(o.global_jit_level)) {
    return bad("global_jit_level", static_cast<int>(o.global_jit_level), "a JitLevel");
  }
  if (!Known(o.compile_policy)) {
    return bad("compile_policy", static_cast<int>(o.compile_policy), "a CompilePolicy");
  }
  if (!Known(o.cuda_matmul)) {
    return bad("cuda_matmul", static_cast<int>(o.cuda_matmul), "a CudaMatMul");
  }
  if (!Known(o.cpu_matmul)) {
    return bad("cpu_matmul", static_cast<int>(o.cpu_matmul), "a CpuMatMul");
  }
  if (!Known(o.scheduler)) {
    return bad("scheduler", static_cast<int>(o.scheduler), "a braze::Scheduler");
  }
  // A directory that is not one (a typo) was skipped: its tuned schedules were never used.
  for (size_t i = 0; i < o.schedule_dirs.size(); ++i) {
    if (absl::Status dir = CheckScheduleDirectory(o.schedule_dirs[i]); !dir.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("SessionOptions::schedule_dirs[", i, "] is ", dir.message(),
                       "; it must be a directory of stored schedules"));
    }
  }
  return absl::OkStatus();
}
}  // namespace

Session::Session(const Graph& graph, SessionOptions options)
    : graph_(graph), options_(std::move(options)), state_(std::make_unique<State>()) {
  state_->default_device = device::ResolveSessionDevice(options_.device);
  state_->options_status = CheckOptions(options_);
}

Session::~Session() = default;

absl::StatusOr<HostTensor> Session::VariableValue(const Tensor& variable) const {
  if (variable.graph() != &graph_ || variable.node().op() != OpKind::kVariable) {
    return absl::InvalidArgumentError("VariableValue needs a Variable of this session's graph");
  }
  BRAZE_RETURN_IF_ERROR(NotRunningHere(this, "Session::VariableValue"));
  std::lock_guard<std::mutex> lock(state_->mu);
  auto it = state_->variables.find(variable.node_id());
  if (it != state_->variables.end() && it->second.defined()) {
    return ReadVariable(it->second, state_->stats);
  }
  const auto& attrs = variable.node().attrs_as<VariableAttrs>();
  if (attrs.initial_value) return *attrs.initial_value;
  return absl::FailedPreconditionError(
      absl::StrCat("variable '", variable.name(), "' is uninitialized"));
}

absl::Status Session::AssignVariable(const Tensor& variable, const HostTensor& value) {
  if (!variable.valid() || variable.graph() != &graph_ ||
      variable.node().op() != OpKind::kVariable) {
    return absl::InvalidArgumentError("AssignVariable needs a Variable of this session's graph");
  }
  const TensorType& want = variable.type();
  if (value.num_elements() < 0) {  // a scalar's type matches a moved-from tensor's
    return absl::InvalidArgumentError(absl::StrCat("AssignVariable to ", NodeLabel(variable.node()),
                                                   ": the value's ", BadValueShape(value.shape())));
  }
  if (value.dtype() != want.dtype || value.shape() != want.shape) {
    return absl::InvalidArgumentError(absl::StrCat("AssignVariable to ", NodeLabel(variable.node()),
                                                   ": expected ", TypeString(want), ", got ",
                                                   TypeString(value.type())));
  }
  BRAZE_RETURN_IF_ERROR(NotRunningHere(this, "Session::AssignVariable"));
  std::lock_guard<std::mutex> lock(state_->mu);
  VariableSlot& slot = state_->variables[variable.node_id()];
  slot = VariableSlot{};
  slot.host = value;
  slot.host_valid = true;
  return absl::OkStatus();
}

absl::Status Session::Compile(const Feeds& feeds, const std::vector<Tensor>& fetches,
                              const std::vector<Tensor>& targets) {
  return RunInternal(feeds, fetches, targets, /*compile_only=*/true, nullptr);
}

absl::StatusOr<std::vector<HostTensor>> Session::Run(const Feeds& feeds,
                                                     const std::vector<Tensor>& fetches,
                                                     const std::vector<Tensor>& targets) {
  std::vector<HostTensor> outputs;
  BRAZE_RETURN_IF_ERROR(RunInternal(feeds, fetches, targets, /*compile_only=*/false, &outputs));
  return outputs;
}

absl::Status Session::RunInto(const Feeds& feeds, const std::vector<Tensor>& fetches,
                              std::vector<HostTensor>* outputs,
                              const std::vector<Tensor>& targets) {
  if (outputs == nullptr) return absl::InvalidArgumentError("RunInto needs an output vector");
  return RunInternal(feeds, fetches, targets, /*compile_only=*/false, outputs);
}

// A tensor too large for memory (BroadcastTo to a shape of 2^40 elements, say) is an
// error of the Run, never an uncaught std::bad_alloc; nothing is committed then.
absl::Status Session::RunInternal(const Feeds& feeds, const std::vector<Tensor>& fetches,
                                  const std::vector<Tensor>& targets, bool compile_only,
                                  std::vector<HostTensor>* outputs) {
  BRAZE_RETURN_IF_ERROR(NotRunningHere(this, "Session::Run"));
  running_here.push_back(this);
  const auto pop = absl::MakeCleanup([] { running_here.pop_back(); });
  try {
    return RunUnguarded(feeds, fetches, targets, compile_only, outputs);
  } catch (const std::bad_alloc&) {
    return absl::ResourceExhaustedError(
        "out of memory: a tensor of this Run could not be allocated (see the graph's shapes)");
  }
}

absl::Status Session::RunUnguarded(const Feeds& feeds, const std::vector<Tensor>& fetches,
                                   const std::vector<Tensor>& targets, bool compile_only,
                                   std::vector<HostTensor>* outputs) {
  BRAZE_RETURN_IF_ERROR(graph_.status());
  BRAZE_RETURN_IF_ERROR(state_->options_status);
  BRAZE_RETURN_IF_ERROR(BrazeFlagsStatus());  // a bad BRAZE_FLAGS: runtime/flags.h
  const int num_nodes = graph_.num_nodes();
  auto check_tensor = [&](const Tensor& t, const char* what, size_t i,
                          bool is_target = false) -> absl::Status {
    if (!t.valid()) {
      return absl::InvalidArgumentError(
          absl::StrCat(what, " ", i, " is not a tensor", internal::kNotATensorHint));
    }
    if (t.graph() != &graph_) {
      return absl::InvalidArgumentError(
          absl::StrCat(what, " ", i, " ('", t.name(), "') comes from another graph"));
    }
    // A target may be a node with no outputs (its handle's index 0); a feed or fetch is
    // a value.
    if (!graph_.HasOutput(t, /*allow_no_outputs=*/is_target)) {
      return absl::InvalidArgumentError(absl::StrCat(what, " ", i,
                                                     " names no output of the graph (node id ",
                                                     t.node_id(), ", output ", t.index(), ")"));
    }
    return absl::OkStatus();
  };
  std::vector<bool> fed(num_nodes, false);
  std::vector<int> fed_outputs(num_nodes, 0);
  std::string plan_key = "f:";
  for (size_t i = 0; i < feeds.size(); ++i) {
    const auto& [t, value] = feeds[i];
    BRAZE_RETURN_IF_ERROR(check_tensor(t, "feed", i));
    const TensorType& want = t.type();
    if (value.num_elements() < 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "feed for ", NodeLabel(t.node()), ": the value's ", BadValueShape(value.shape())));
    }
    if (value.dtype() != want.dtype || !ShapeMatches(want.shape, value.shape())) {
      return absl::InvalidArgumentError(absl::StrCat("feed for ", NodeLabel(t.node()),
                                                     ": expected ", TypeString(want), ", got ",
                                                     TypeString(value.type())));
    }
    for (size_t j = 0; j < i; ++j) {
      if (feeds[j].first.node_id() == t.node_id() && feeds[j].first.index() == t.index()) {
        return absl::InvalidArgumentError(
            absl::StrCat(NodeLabel(t.node()), " is fed twice (feeds ", j, " and ", i, ")"));
      }
    }
    ++fed_outputs[t.node_id()];
    absl::StrAppend(&plan_key, t.node_id(), ".", t.index(), ",");
  }
  // A fed node is not run. A node of several outputs (a HostCall, a Cond, a While, a
  // Scan) would still run for the outputs not fed and overwrite the fed one: it is fed
  // whole or not at all.
  for (const auto& [t, value] : feeds) {
    const int outputs = t.node().num_outputs();
    if (fed_outputs[t.node_id()] != outputs) {
      return absl::InvalidArgumentError(absl::StrCat(
          "feed for output ", t.index(), " of ", NodeLabel(t.node()), ": it has ", outputs,
          " outputs and ", fed_outputs[t.node_id()],
          " of them are fed; a fed node is not run, so feed every output of it or none"));
    }
    fed[t.node_id()] = true;
  }
  absl::StrAppend(&plan_key, "|o:");
  for (size_t i = 0; i < fetches.size(); ++i) {
    BRAZE_RETURN_IF_ERROR(check_tensor(fetches[i], "fetch", i));
    absl::StrAppend(&plan_key, fetches[i].node_id(), ".", fetches[i].index(), ",");
  }
  absl::StrAppend(&plan_key, "|t:");
  for (size_t i = 0; i < targets.size(); ++i) {
    BRAZE_RETURN_IF_ERROR(check_tensor(targets[i], "target", i, /*is_target=*/true));
    if (fed[targets[i].node_id()]) {
      // Its feed stands in for it, so it would not run: an update asked for and dropped.
      return absl::InvalidArgumentError(absl::StrCat(
          "target ", i, ": ", NodeLabel(targets[i].node()), " is fed, and a fed node is not run"));
    }
    absl::StrAppend(&plan_key, targets[i].node_id(), ",");
  }
  // A graph may grow between runs; plans are per graph size too.
  absl::StrAppend(&plan_key, "|n:", num_nodes);

  std::lock_guard<std::mutex> lock(state_->mu);
  auto& entry = state_->plans[plan_key];
  if (entry.plan == nullptr) {
    if (!state_->default_device.ok()) {
      state_->plans.erase(plan_key);
      return state_->default_device.status();
    }
    auto plan = BuildPlan(graph_, options_, *state_->default_device, fetches, targets, fed);
    if (!plan.ok()) {
      state_->plans.erase(plan_key);
      return plan.status();
    }
    // Observability (runtime/dump.h): --dump_to graphs, --clustering_debug summary.
    absl::Status dumped = state_->dumper.OnPlanBuilt(graph_, **plan);
    if (!dumped.ok()) {
      state_->plans.erase(plan_key);
      return dumped;
    }
    entry.plan = *std::move(plan);
    entry.state = std::make_unique<PlanState>(*entry.plan);
  }
  const Plan& plan = *entry.plan;
  state_->last_plan = &plan;
  if (!compile_only) ++state_->stats.runs;

  Executor exec(graph_, options_, state_->stats, *entry.state, state_->variables);
  exec.set_dumper(&state_->dumper);
  for (const auto& [t, value] : feeds) exec.BindHost(t, &value);
  for (int id = 0; id < num_nodes; ++id) {
    if (!plan.needed[id]) continue;
    const Node& node = graph_.node(id);
    Tensor t(const_cast<Graph*>(&graph_), id, 0);
    if (node.op() == OpKind::kPlaceholder) {
      return absl::InvalidArgumentError(absl::StrCat("missing feed for ", NodeLabel(node)));
    }
    if (node.op() == OpKind::kVariable) {
      VariableSlot& slot = state_->variables[id];
      const auto& attrs = node.attrs_as<VariableAttrs>();
      if (!slot.defined() && attrs.initial_value) {
        slot.host = *attrs.initial_value;
        slot.host_valid = true;
      }
      if (slot.defined()) exec.BindVariable(t);
    } else if (node.op() == OpKind::kConst) {
      // Bound even inside clusters: an op-by-op fallback reads them from here.
      exec.BindHost(t, node.attrs_as<ConstAttrs>().value.get());
    }
  }
  if (outputs != nullptr) {
    outputs->resize(fetches.size());
    for (size_t i = 0; i < fetches.size(); ++i) exec.SetDestination(fetches[i], &(*outputs)[i]);
  }
  for (size_t i = 0; i < plan.steps.size(); ++i) {
    BRAZE_RETURN_IF_ERROR(exec.RunStep(plan.steps[i], entry.state->steps[i], compile_only));
  }
  BRAZE_RETURN_IF_ERROR(exec.WaitCollectives());
  if (compile_only) return absl::OkStatus();  // perhaps stopped early: compile_stopped()

  for (size_t i = 0; i < fetches.size(); ++i) {
    BRAZE_RETURN_IF_ERROR(exec.Fetch(fetches[i], &(*outputs)[i]));
  }
  const LiveBytes live = MeasureLiveBytes(graph_, plan, fed, exec);
  SessionStats& st = state_->stats;
  st.peak_live_bytes = std::max(st.peak_live_bytes, live.peak);
  st.step_output_bytes = std::max(st.step_output_bytes, live.total);
  st.peak_activation_bytes = std::max(st.peak_activation_bytes, live.activation_peak);
  return exec.CommitUpdates();
}

std::optional<std::string> Session::ClusterOf(const Tensor& t) const {
  std::lock_guard<std::mutex> lock(state_->mu);
  if (state_->last_plan == nullptr || t.graph() != &graph_) return std::nullopt;
  std::string name = state_->last_plan->clustering.ClusterNameOf(t.node_id());
  if (name.empty()) return std::nullopt;
  return name;
}

std::string Session::ClusteringDebugString() const {
  std::lock_guard<std::mutex> lock(state_->mu);
  if (state_->last_plan == nullptr) return "no plan yet\n";
  return state_->last_plan->clustering.DebugString();
}

SessionStats Session::stats() const {
  if (RunningHere(this)) return state_->stats;  // this thread holds the lock
  std::lock_guard<std::mutex> lock(state_->mu);
  return state_->stats;
}

void Session::ResetStats() {
  std::lock_guard<std::mutex> lock(state_->mu);
  state_->stats = SessionStats{};
}

}  // namespace braze
