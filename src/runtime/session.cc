// Session::Run: validates feeds and fetches, finds (or builds) the plan for this
// fetch/target/feed combination, binds sources, runs the plan's steps, copies the fetches
// out and finally commits variable updates (so every read in one Run sees the values the
// variables had when it started).
#include "braze/session.h"

#include <cstdio>
#include <cstring>
#include <mutex>
#include <unordered_map>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "braze/status.h"
#include "reference/reference.h"
#include "runtime/cluster_key.h"
#include "runtime/dump.h"
#include "runtime/flags.h"
#include "runtime/plan.h"
#include "runtime/timeline.h"

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

void Warn(const std::string& msg) { std::fprintf(stderr, "braze: warning: %s\n", msg.c_str()); }

}  // namespace

struct Session::State {
  mutable std::mutex mu;
  std::unordered_map<int, HostTensor> variables;  // by node id, once initialized/assigned
  std::unordered_map<std::string, std::unique_ptr<Plan>> plans;
  const Plan* last_plan = nullptr;
  SessionStats stats;
  SessionDumper dumper;  // observability: BRAZE_FLAGS --dump_to, --clustering_debug
};

// Runs one Run's steps against a value table.
class Executor {
 public:
  Executor(const Graph& g, const SessionOptions& options, SessionStats& stats)
      : g_(g), options_(options), stats_(stats), values_(g.num_nodes()) {
    for (int id = 0; id < g.num_nodes(); ++id) values_[id].resize(g.node(id).num_outputs());
  }

  void Bind(const Tensor& t, const HostTensor* v) { values_[t.node_id()][t.index()] = v; }
  // Compiled steps producing `t` write straight into `dest` when the types agree.
  void SetDestination(const Tensor& t, HostTensor* dest) {
    destinations_.emplace(static_cast<int64_t>(t.node_id()) * 64 + t.index(), dest);
  }
  const HostTensor* Value(const Tensor& t) const { return values_[t.node_id()][t.index()]; }
  // Observability (runtime/dump.h): each kernel a step gets is dumped with --dump_to.
  void set_dumper(SessionDumper* dumper) { dumper_ = dumper; }

  // Assign-family steps whose results commit to variables at the end of the Run.
  const std::vector<std::pair<int, const HostTensor*>>& updates() const { return updates_; }

  absl::Status RunStep(Step& step, bool compile_only) {
    if (step.fell_back) return RunFallback(step, compile_only);
    std::vector<const HostTensor*> inputs;
    std::vector<TensorType> types;
    for (const Tensor& in : step.inputs) {
      const HostTensor* v = Value(in);
      const Node& user = g_.node(step.nodes.front());
      if (v == nullptr) {
        const bool overwritten = step.kind == Step::Kind::kReference &&
                                 user.op() == OpKind::kAssign && in == user.input(0);
        if (overwritten) {
          types.push_back(in.type());
          inputs.push_back(nullptr);
          continue;
        }
        if (in.node().op() == OpKind::kVariable) {
          return absl::FailedPreconditionError(absl::StrCat("reading uninitialized variable '",
                                                            in.name(), "' (by ", step.name, ")"));
        }
        return absl::InternalError(
            absl::StrCat(step.name, ": input '", in.name(), "' was not computed"));
      }
      inputs.push_back(v);
      types.push_back(v->type());
    }
    switch (step.kind) {
      case Step::Kind::kReference:
        if (compile_only) return StandInForReference(step, types);
        return RunReference(step, inputs, types);
      case Step::Kind::kCluster:
      case Step::Kind::kSingleOp:
        return RunCompiled(step, inputs, types, compile_only);
    }
    return absl::InternalError("bad step kind");
  }

 private:
  // A cluster falls back to one step per op; a single op to its reference kernel.
  void FallBack(Step& step) {
    step.fell_back = true;
    step.kernel.reset();
    step.input_types.clear();
    if (step.kind == Step::Kind::kCluster) {
      step.fallback = OpByOpSteps(g_, step.nodes, options_);
    } else {
      Step ref;
      ref.kind = Step::Kind::kReference;
      ref.name = step.name;
      ref.nodes = step.nodes;
      ref.inputs = step.inputs;
      ref.outputs = step.outputs;
      step.fallback = {std::move(ref)};
    }
  }

  absl::Status RunFallback(Step& step, bool compile_only) {
    for (Step& s : step.fallback) BRAZE_RETURN_IF_ERROR(RunStep(s, compile_only));
    return absl::OkStatus();
  }

  // Compile-only: reference steps do not run (HostCalls have side effects), so their
  // outputs are stood in for by zeros of the inferred types, enough to plan and compile
  // the steps after them. A HostCall output of unknown shape ends compile-ahead there;
  // the rest compiles at the first Run.
  absl::Status StandInForReference(Step& step, const std::vector<TensorType>& types) {
    const Node& node = g_.node(step.nodes.front());
    auto out_types = InferOutputTypes(node.op(), node.attrs(), types);
    if (!out_types.ok()) return Annotate(Label(node), out_types.status());
    step.buffers.clear();
    for (const TensorType& t : *out_types) {
      if (!IsFullyDefined(t.shape)) return absl::CancelledError("unknown shape");
      step.buffers.emplace_back(t.dtype, t.shape);
    }
    BindOutputs(step);
    return absl::OkStatus();
  }

  absl::Status RunReference(Step& step, const std::vector<const HostTensor*>& inputs,
                            const std::vector<TensorType>& types) {
    TimelineEvent trace(step.name, "reference");  // observability: runtime/timeline.h
    const Node& node = g_.node(step.nodes.front());
    std::vector<HostTensor> in;
    in.reserve(inputs.size());
    for (size_t i = 0; i < inputs.size(); ++i) {
      in.push_back(inputs[i] ? *inputs[i] : HostTensor(types[i].dtype, types[i].shape));
    }
    auto out_types = InferOutputTypes(node.op(), node.attrs(), types);
    if (!out_types.ok()) return Annotate(Label(node), out_types.status());
    auto outputs = RunReferenceKernel(node, in, *out_types);
    if (!outputs.ok()) return Annotate(Label(node), outputs.status());
    step.buffers = *std::move(outputs);
    ++stats_.reference_launches;
    BindOutputs(step);
    if (OpCategoryOf(node.op()) == OpCategory::kState) {
      updates_.emplace_back(node.input(0).node_id(), &step.buffers[0]);
    }
    return absl::OkStatus();
  }

  absl::Status RunCompiled(Step& step, const std::vector<const HostTensor*>& inputs,
                           const std::vector<TensorType>& types, bool compile_only) {
    if (step.kernel == nullptr || types != step.input_types) {
      ClusterSpec spec{&g_, step.name, step.nodes, step.inputs, types, step.outputs};
      CompileOptions copts{ToSchedulerKind(options_.scheduler), options_.num_threads};
      // Shape errors are the user's: report them before trying to compile.
      BRAZE_RETURN_IF_ERROR(CheckShapes(step, types));
      CompileCache::Result result;
      if (options_.inject_compile_failure && options_.inject_compile_failure(step.name)) {
        // Not through the cache: the failure is this session's alone.
        result.kernel = absl::InternalError("injected compile failure");
      } else {
        TimelineEvent trace(step.name, "compile");  // observability: runtime/timeline.h
        result = CompileCache::Global().GetOrCompile(ClusterKey(spec, copts),
                                                     [&] { return CompileCluster(spec, copts); });
        trace.set_args(result.hit ? "\"cache_hit\":true" : "\"cache_hit\":false");
      }
      if (result.hit) {
        ++stats_.cache_hits;
      } else if (result.kernel.ok() || result.compile_ms > 0) {
        ++stats_.compiles;
        stats_.compile_ms += result.compile_ms;
      }
      if (!result.kernel.ok()) {
        const std::string what = step.kind == Step::Kind::kCluster
                                     ? absl::StrCat("cluster '", step.name, "'")
                                     : Label(g_.node(step.nodes.front()));
        if (options_.strict) {
          return absl::InvalidArgumentError(absl::StrCat(
              what, " failed to compile (strict mode): ", result.kernel.status().message()));
        }
        Warn(absl::StrCat(
            what, " failed to compile, running it op by op: ", result.kernel.status().message()));
        FallBack(step);
        return RunFallback(step, compile_only);
      }
      step.kernel = *result.kernel;
      step.input_types = types;
      const auto& out_types = step.kernel->kernel->output_types();
      step.buffers.clear();
      for (const TensorType& t : out_types) step.buffers.emplace_back(t.dtype, t.shape);
      if (dumper_ != nullptr) {  // observability: runtime/dump.h
        BRAZE_RETURN_IF_ERROR(dumper_->OnKernelReady(g_, step, types, *step.kernel->kernel));
      }
    }
    if (compile_only) {
      BindOutputs(step);
      return absl::OkStatus();
    }
    bool any_elements = false;
    for (const HostTensor& b : step.buffers) any_elements |= b.num_elements() > 0;
    std::vector<HostTensor*> outs;
    for (size_t o = 0; o < step.buffers.size(); ++o) {
      const Tensor& t = step.outputs[o];
      auto it = destinations_.find(static_cast<int64_t>(t.node_id()) * 64 + t.index());
      const bool direct = it != destinations_.end() && it->second->type() == step.buffers[o].type();
      outs.push_back(direct ? it->second : &step.buffers[o]);
    }
    if (any_elements) {
      absl::Status run_status;
      {
        std::lock_guard<std::mutex> lock(step.kernel->mu);
        // Observability (runtime/timeline.h): one bar per launch, after the lock wait.
        TimelineEvent trace(step.name, step.kind == Step::Kind::kCluster ? "cluster" : "op");
        run_status = step.kernel->kernel->Run(inputs, outs);
      }
      if (!run_status.ok()) {
        // Inputs were checked against the plan's shapes, so a Halide run-time error here
        // is the kernel's fault (e.g. a schedule's bounds): treated like a failed compile.
        // The kernel's errors already name the cluster or op.
        if (options_.strict) return run_status;
        Warn(absl::StrCat(run_status.message(), "; running '", step.name, "' op by op"));
        FallBack(step);
        return RunFallback(step, false);
      }
    }
    if (step.kind == Step::Kind::kCluster) {
      ++stats_.cluster_launches;
    } else {
      ++stats_.single_op_launches;
    }
    for (size_t o = 0; o < step.outputs.size(); ++o) Bind(step.outputs[o], outs[o]);
    return absl::OkStatus();
  }

  // Re-infers every node's types for concrete inputs so a bad runtime shape is reported
  // against the node, as the reference path does.
  absl::Status CheckShapes(const Step& step, const std::vector<TensorType>& types) {
    std::unordered_map<int64_t, TensorType> known;
    auto key = [](const Tensor& t) { return static_cast<int64_t>(t.node_id()) * 64 + t.index(); };
    for (size_t i = 0; i < step.inputs.size(); ++i) known[key(step.inputs[i])] = types[i];
    for (int id : step.nodes) {
      const Node& n = g_.node(id);
      std::vector<TensorType> in;
      for (const Tensor& t : n.inputs()) in.push_back(known.at(key(t)));
      auto out = InferOutputTypes(n.op(), n.attrs(), in);
      if (!out.ok()) return Annotate(Label(n), out.status());
      for (int o = 0; o < n.num_outputs(); ++o)
        known[static_cast<int64_t>(id) * 64 + o] = (*out)[o];
    }
    return absl::OkStatus();
  }

  void BindOutputs(Step& step) {
    for (size_t o = 0; o < step.outputs.size(); ++o) Bind(step.outputs[o], &step.buffers[o]);
  }

  const Graph& g_;
  const SessionOptions& options_;
  SessionStats& stats_;
  std::vector<std::vector<const HostTensor*>> values_;
  std::vector<std::pair<int, const HostTensor*>> updates_;
  std::unordered_map<int64_t, HostTensor*> destinations_;
  SessionDumper* dumper_ = nullptr;
};

Session::Session(const Graph& graph, SessionOptions options)
    : graph_(graph), options_(std::move(options)), state_(std::make_unique<State>()) {}

Session::~Session() = default;

absl::StatusOr<HostTensor> Session::VariableValue(const Tensor& variable) const {
  if (variable.graph() != &graph_ || variable.node().op() != OpKind::kVariable) {
    return absl::InvalidArgumentError("VariableValue needs a Variable of this session's graph");
  }
  std::lock_guard<std::mutex> lock(state_->mu);
  auto it = state_->variables.find(variable.node_id());
  if (it != state_->variables.end()) return it->second;
  const auto& attrs = variable.node().attrs_as<VariableAttrs>();
  if (attrs.initial_value) return *attrs.initial_value;
  return absl::FailedPreconditionError(
      absl::StrCat("variable '", variable.name(), "' is uninitialized"));
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

absl::Status Session::RunInternal(const Feeds& feeds, const std::vector<Tensor>& fetches,
                                  const std::vector<Tensor>& targets, bool compile_only,
                                  std::vector<HostTensor>* outputs) {
  BRAZE_RETURN_IF_ERROR(graph_.status());
  BRAZE_RETURN_IF_ERROR(BrazeFlagsStatus());  // a bad BRAZE_FLAGS: runtime/flags.h
  const int num_nodes = graph_.num_nodes();
  auto check_tensor = [&](const Tensor& t, const char* what, size_t i) -> absl::Status {
    if (!t.valid()) {
      return absl::InvalidArgumentError(absl::StrCat(what, " ", i, " is not a tensor"));
    }
    if (t.graph() != &graph_) {
      return absl::InvalidArgumentError(
          absl::StrCat(what, " ", i, " ('", t.name(), "') comes from another graph"));
    }
    return absl::OkStatus();
  };
  std::vector<bool> fed(num_nodes, false);
  std::string plan_key = "f:";
  for (size_t i = 0; i < feeds.size(); ++i) {
    const auto& [t, value] = feeds[i];
    BRAZE_RETURN_IF_ERROR(check_tensor(t, "feed", i));
    const TensorType& want = t.type();
    if (value.dtype() != want.dtype || !ShapeMatches(want.shape, value.shape())) {
      return absl::InvalidArgumentError(absl::StrCat("feed for ", Label(t.node()), ": expected ",
                                                     TypeString(want), ", got ",
                                                     TypeString(value.type())));
    }
    fed[t.node_id()] = t.node().num_outputs() == 1;
    absl::StrAppend(&plan_key, t.node_id(), ".", t.index(), ",");
  }
  absl::StrAppend(&plan_key, "|o:");
  for (size_t i = 0; i < fetches.size(); ++i) {
    BRAZE_RETURN_IF_ERROR(check_tensor(fetches[i], "fetch", i));
    absl::StrAppend(&plan_key, fetches[i].node_id(), ".", fetches[i].index(), ",");
  }
  absl::StrAppend(&plan_key, "|t:");
  for (size_t i = 0; i < targets.size(); ++i) {
    BRAZE_RETURN_IF_ERROR(check_tensor(targets[i], "target", i));
    absl::StrAppend(&plan_key, targets[i].node_id(), ",");
  }
  // A graph may grow between runs; plans are per graph size too.
  absl::StrAppend(&plan_key, "|n:", num_nodes);

  std::lock_guard<std::mutex> lock(state_->mu);
  auto& slot = state_->plans[plan_key];
  if (slot == nullptr) {
    auto plan = BuildPlan(graph_, options_, fetches, targets, fed);
    if (!plan.ok()) {
      state_->plans.erase(plan_key);
      return plan.status();
    }
    slot = *std::move(plan);
    // Observability (runtime/dump.h): --dump_to graphs, --clustering_debug summary.
    absl::Status dumped = state_->dumper.OnPlanBuilt(graph_, *slot);
    if (!dumped.ok()) {
      state_->plans.erase(plan_key);
      return dumped;
    }
  }
  Plan& plan = *slot;
  state_->last_plan = &plan;
  if (!compile_only) ++state_->stats.runs;

  Executor exec(graph_, options_, state_->stats);
  exec.set_dumper(&state_->dumper);
  for (const auto& [t, value] : feeds) exec.Bind(t, &value);
  for (int id = 0; id < num_nodes; ++id) {
    if (!plan.needed[id]) continue;
    const Node& node = graph_.node(id);
    Tensor t(const_cast<Graph*>(&graph_), id, 0);
    if (node.op() == OpKind::kPlaceholder) {
      return absl::InvalidArgumentError(absl::StrCat("missing feed for ", Label(node)));
    }
    if (node.op() == OpKind::kVariable) {
      auto it = state_->variables.find(id);
      const auto& attrs = node.attrs_as<VariableAttrs>();
      if (it != state_->variables.end()) {
        exec.Bind(t, &it->second);
      } else if (attrs.initial_value) {
        exec.Bind(t, attrs.initial_value.get());
      }
    } else if (node.op() == OpKind::kConst) {
      // Bound even inside clusters: an op-by-op fallback reads them from here.
      exec.Bind(t, node.attrs_as<ConstAttrs>().value.get());
    }
  }
  if (outputs != nullptr) {
    outputs->resize(fetches.size());
    for (size_t i = 0; i < fetches.size(); ++i) exec.SetDestination(fetches[i], &(*outputs)[i]);
  }
  for (Step& step : plan.steps) {
    absl::Status s = exec.RunStep(step, compile_only);
    if (compile_only && absl::IsCancelled(s)) return absl::OkStatus();
    BRAZE_RETURN_IF_ERROR(s);
  }
  if (compile_only) return absl::OkStatus();

  for (size_t i = 0; i < fetches.size(); ++i) {
    const Tensor& t = fetches[i];
    const HostTensor* v = exec.Value(t);
    if (v == nullptr) {
      if (t.node().op() == OpKind::kVariable) {
        return absl::FailedPreconditionError(
            absl::StrCat("reading uninitialized variable '", t.name(), "' (fetched)"));
      }
      return absl::InternalError(absl::StrCat("fetch '", t.name(), "' was not computed"));
    }
    HostTensor& out = (*outputs)[i];
    if (v == &out) continue;  // written in place
    if (out.type() == v->type()) {
      std::memcpy(out.raw_data(), v->raw_data(), v->num_bytes());
    } else {
      out = *v;
    }
  }
  for (const auto& [var, value] : exec.updates()) {
    auto it = state_->variables.find(var);
    if (it != state_->variables.end() && it->second.type() == value->type()) {
      std::memcpy(it->second.raw_data(), value->raw_data(), value->num_bytes());
    } else {
      state_->variables.insert_or_assign(var, *value);
    }
  }
  return absl::OkStatus();
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
  std::lock_guard<std::mutex> lock(state_->mu);
  return state_->stats;
}

void Session::ResetStats() {
  std::lock_guard<std::mutex> lock(state_->mu);
  state_->stats = SessionStats{};
}

}  // namespace braze
