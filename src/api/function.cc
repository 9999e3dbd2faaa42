// braze::Function (braze/function.h): traces a body per signature into a graph, runs
// each trace in one Session of the function's own, keeps captured variables coherent
// with other Functions (api/variable_sync.h) and warns about excessive retracing.
#include "braze/function.h"

#include <algorithm>
#include <atomic>
#include <deque>
#include <exception>
#include <iterator>
#include <map>
#include <mutex>
#include <new>
#include <optional>
#include <set>
#include <shared_mutex>
#include <tuple>
#include <unordered_map>
#include <utility>
#include <variant>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "api/signature.h"
#include "api/static_args.h"
#include "api/variable_sync.h"
#include "braze/jit_scope.h"
#include "braze/ops.h"
#include "braze/precision.h"
#include "braze/status.h"
#include "frontend/eager_body.h"
#include "ir/changing_dims.h"
#include "ir/logging.h"
#include "ir/tracing.h"

namespace braze {
namespace function_internal {

// A Variable a trace reads or assigns, and the version of it the function's session has.
struct VariableUse {
  Tensor variable;
  bool assigned = false;
  bool captured = false;  // a stand-in for a Variable of another graph
  std::shared_ptr<api::SharedVariable> shared;
  uint64_t* held = nullptr;  // in Shared::held; guarded by the SharedVariable's mutex
};

// What a function's graph holds for tensors of other graphs its bodies used: a Variable
// standing for each outside Variable (sharing its value through api::SharedVariable)
// and a copy of each outside Const.
struct Captures {
  std::map<std::tuple<uint64_t, int, int>, Tensor> here;  // outside tensor -> stand-in
  std::unordered_map<int, Tensor> outside_variable;       // stand-in id -> outside Variable
  // Forgets the stand-ins of a failed trace (its nodes from `first_node` on are gone).
  void DropFrom(int first_node) {
    for (auto it = here.begin(); it != here.end();) {
      it = it->second.node_id() >= first_node ? here.erase(it) : std::next(it);
    }
    for (auto it = outside_variable.begin(); it != outside_variable.end();) {
      it = it->first >= first_node ? outside_variable.erase(it) : std::next(it);
    }
  }
};

struct Trace {
  int first_node = 0;  // the trace's nodes are first_node.. in the graph
  api::Signature signature;
  api::StaticKey statics;  // per argument: its static value, nullopt for a tensor
  std::string root;        // the name scope the body ran in: "name", "name_1", ...
  std::vector<Tensor> inputs, outputs, targets;
  // Variables the body created (not stand-ins for captured ones), in node order, and
  // for those that stand for a variable the function created earlier (an eager call
  // creating again what its first call created), that variable.
  std::vector<Tensor> created;
  std::unordered_map<int, Tensor> homes;
  std::vector<VariableUse> variables;
  std::unique_ptr<ConcreteFunction> concrete;
};

struct Shared {
  TracedArgsBody body;
  bool takes_values = true;  // false: a FunctionBody (tensor arguments only)
  FunctionOptions options;
  std::unique_ptr<Graph> own_graph;
  Graph* graph = nullptr;
  std::shared_ptr<std::shared_mutex> graph_mu;  // api::GraphLock(*graph)
  std::unique_ptr<Session> session;
  Captures captures;  // guarded by the graph lock (held exclusively while tracing)

  mutable std::mutex mu;  // everything below
  std::vector<std::unique_ptr<Trace>> traces;
  std::unordered_map<api::SharedVariable*, uint64_t> held;
  // The last 10 calls: the signature and static values of each that traced, nullopt for
  // the others.
  std::deque<std::optional<std::pair<api::Signature, api::StaticKey>>> recent;
  bool warned = false;
  int tracing_count = 0;
  // The Variables the body created, by name within its scope (Trace::root), all in
  // `graph`: those of its first trace (or first eager call). Only the first may create
  // variables (tf.function's rule); an eager call, which runs the body anew, creates
  // them again, and what it creates stands for these.
  std::map<std::string, Tensor> created;
  // The signature of the first eager call, when no trace came before it.
  std::optional<api::Signature> eager_first;
};

}  // namespace function_internal

namespace {

using function_internal::Captures;
using function_internal::Shared;
using function_internal::Trace;
using function_internal::VariableUse;

std::atomic<bool> run_eagerly{false};

// Re-entrant calls on one thread. A Function called from its own body while it traces,
// or a Function on the same graph called then, waited forever for a lock its own thread
// held (black-box tests): such a call is an error. A call from a HostCall of a running
// trace shares the running call's graph lock (and its Session refuses a nested Run).
thread_local std::vector<const Shared*> tracing_here;
struct HeldGraphLock {
  const std::shared_mutex* mu;
  bool exclusive;
};
thread_local std::vector<HeldGraphLock> graph_locks_here;

// Before anything takes s.mu, which the tracing call holds.
absl::Status NotTracingHere(const Shared& s) {
  if (std::find(tracing_here.begin(), tracing_here.end(), &s) == tracing_here.end()) {
    return absl::OkStatus();
  }
  return absl::FailedPreconditionError(absl::StrCat(
      "Function '", s.options.name,
      "' was called from its own body while it is being traced: recursion is not supported"));
}

// Holds a graph lock for its scope: exclusive to trace (the graph grows), shared to run.
// Where this thread holds it already, a shared request reuses the hold and anything
// else fails (status()).
class ScopedGraphLock {
 public:
  ScopedGraphLock(std::shared_mutex& mu, bool exclusive, const FunctionOptions& options)
      : mu_(mu), exclusive_(exclusive) {
    for (const HeldGraphLock& held : graph_locks_here) {
      if (held.mu != &mu) continue;
      if (exclusive || held.exclusive) {
        status_ = absl::FailedPreconditionError(absl::StrCat(
            "Function '", options.name, "' was called while ",
            held.exclusive ? "a Function on its graph is being traced"
                           : "a Function on its graph runs",
            " on this thread (from a Function body or a HostCall): ",
            exclusive ? "tracing" : "running", " it would wait for that call forever"));
      }
      return;
    }
    exclusive ? mu.lock() : mu.lock_shared();
    locked_ = true;
    graph_locks_here.push_back({&mu, exclusive});
  }
  ~ScopedGraphLock() {
    if (!locked_) return;
    graph_locks_here.pop_back();
    exclusive_ ? mu_.unlock() : mu_.unlock_shared();
  }
  const absl::Status& status() const { return status_; }

 private:
  std::shared_mutex& mu_;
  const bool exclusive_;
  bool locked_ = false;
  absl::Status status_;
};

constexpr int kRetraceWindow = 10;  // TF: 5 traces within the last 10 calls
constexpr int kRetraceLimit = 5;

SessionOptions SessionOptionsFor(const FunctionOptions& options, bool eager) {
  SessionOptions s = options.session;
  if (options.jit_compile == true) s.strict = true;
  if (eager) s.reference_only = true;
  return s;
}

std::string FunctionLabel(const FunctionOptions& options) {
  return absl::StrCat("function '", options.name, "'");
}

absl::Status Annotate(const FunctionOptions& options, const absl::Status& status) {
  if (status.ok()) return status;
  return absl::Status(status.code(), absl::StrCat(FunctionLabel(options), ": ", status.message()));
}

// Stateful ops built by a trace run on every call (TF's automatic control dependencies).
bool IsSideEffect(OpKind op) {
  return op == OpKind::kAssign || op == OpKind::kAssignAdd || op == OpKind::kAssignSub ||
         op == OpKind::kHostCall;
}

// Every Variable the outputs and targets depend on, and which of them targets assign.
std::vector<std::pair<Tensor, bool>> VariablesUsed(Graph& g, const std::vector<Tensor>& roots) {
  std::vector<bool> seen(g.num_nodes(), false);
  std::vector<int> stack;
  for (const Tensor& t : roots) stack.push_back(t.node_id());
  std::set<int> assigned;
  std::vector<std::pair<Tensor, bool>> out;
  while (!stack.empty()) {
    const int id = stack.back();
    stack.pop_back();
    if (seen[id]) continue;
    seen[id] = true;
    const Node& n = g.node(id);
    if (n.op() == OpKind::kAssign || n.op() == OpKind::kAssignAdd || n.op() == OpKind::kAssignSub) {
      assigned.insert(n.input(0).node_id());
    }
    for (const Tensor& in : n.inputs()) stack.push_back(in.node_id());
  }
  for (int id = 0; id < g.num_nodes(); ++id) {
    if (seen[id] && g.node(id).op() == OpKind::kVariable) {
      out.emplace_back(Tensor(&g, id, 0), assigned.count(id) > 0);
    }
  }
  return out;
}

// The capture function of a trace into `g`: outside Variables get a Variable of `g`
// (same type and initial value) whose value is shared with them; outside Consts a copy.
Graph::CaptureFn CaptureInto(Graph& g, Captures& captures) {
  return [&g, &captures](const Tensor& t) -> absl::StatusOr<Tensor> {
    if (t.graph() == nullptr || !t.graph()->HasOutput(t)) {
      return absl::InvalidArgumentError(
          absl::StrCat("a captured Tensor names no output of its graph (node ", t.node_id(),
                       ", output ", t.index(), ")"));
    }
    const auto key = std::make_tuple(t.graph()->id(), t.node_id(), t.index());
    if (auto it = captures.here.find(key); it != captures.here.end()) return it->second;
    const Node& n = t.node();
    if (!n.status().ok()) return n.status();
    if (n.op() != OpKind::kVariable && n.op() != OpKind::kConst) {
      return absl::InvalidArgumentError(absl::StrCat(
          "'", n.name(), "' (", n.op_name(),
          ") of another graph cannot be captured: a Function captures Variables and Consts; "
          "to use other tensors of a graph, trace into it (FunctionOptions::graph)"));
    }
    Tensor here = g.AddNode(n.op(), {}, n.attrs(), n.name());
    if (n.op() == OpKind::kVariable) captures.outside_variable[here.node_id()] = t;
    captures.here[key] = here;
    return here;
  };
}

// A variable's name within the body's scope: "Adam/w/m" for "step_1/Adam/w/m".
std::string RelativeName(const Trace& trace, const Tensor& variable) {
  const std::string& name = variable.name();
  if (absl::StartsWith(name, trace.root) && name.size() > trace.root.size() &&
      name[trace.root.size()] == '/') {
    return name.substr(trace.root.size() + 1);
  }
  return name;
}

std::vector<std::string> CreatedNames(const Trace& trace) {
  std::vector<std::string> names;
  for (const Tensor& v : trace.created) names.push_back(RelativeName(trace, v));
  return names;
}

// A trace (`what`: "its trace for (f32[8])") creating variables where it may not.
absl::Status VariableCreationError(const std::string& what, const std::vector<std::string>& names,
                                   const std::string& why) {
  std::string more;
  if (names.size() > 1) absl::StrAppend(&more, " (and ", names.size() - 1, " more)");
  return absl::FailedPreconditionError(absl::StrCat(
      what, " creates variable '", names.front(), "'", more, ", but ", why,
      ": a variable a later trace creates would start again from its initial value (an "
      "optimizer built in the body would restart). Create the variables outside the body (in "
      "FunctionOptions::graph or the program's graph) and use them in it, create them on the "
      "first call only (keep their Tensors and reuse them), or give "
      "FunctionOptions::input_signature with -1 for the dims that vary, so that one trace "
      "serves every call"));
}

// Checks what a trace created (Trace::created) before it is kept: fills Trace::homes, or
// returns why it may not create them.
using CreatedCheck = std::function<absl::Status(Trace& trace)>;

// jit_compile=true compiles the whole body, false none of it, whatever JitScopes inside
// say (as TF's XLA attribute on the function overrides them): the nodes of `g` from
// `first` on, and every node of their control-flow bodies (Cond's branches, a While's or
// a Scan's body, compiled apart but as the function says). A HostCall built under
// JitScope(g, false) stays outside (TF's outside_compilation): loss scaling's log line,
// in a strict body too.
void ApplyJitCompile(Graph& g, int first, bool compile) {
  for (int id = first; id < g.num_nodes(); ++id) {
    Node& n = g.mutable_node(id);
    const bool outside = n.op() == OpKind::kHostCall && n.jit().compile == false;
    if (!outside) n.mutable_jit().compile = compile;
    if (const auto* cf = std::get_if<ControlFlowAttrs>(&n.attrs())) {
      for (const auto& body : cf->bodies) ApplyJitCompile(*body->graph, 0, compile);
    }
  }
}

// Runs the body once into `g` for `signature`. On error (`check` included) the graph is
// rolled back to what it was, so a failed trace leaves nothing behind.
absl::StatusOr<std::unique_ptr<Trace>> TraceBody(const TracedArgsBody& body,
                                                 const FunctionOptions& options, Graph& g,
                                                 Captures& captures,
                                                 const api::Signature& signature,
                                                 const api::StaticKey& statics, bool eager,
                                                 const CreatedCheck& check) {
  const int start = g.num_nodes();
  const absl::Status status_before = g.status();
  const size_t frames_before = g.jit_frames().size();
  const Graph::NamesMark names_before = g.MarkNames();
  auto fail = [&](absl::Status status) {
    g.set_capture(nullptr);
    g.mutable_jit_frames().resize(frames_before);
    g.Truncate(start, status_before);
    g.RestoreNames(names_before);
    captures.DropFrom(start);
    return Annotate(options, status);
  };
  g.set_capture(CaptureInto(g, captures));
  auto trace = std::make_unique<Trace>();
  trace->first_node = start;
  trace->signature = signature;
  trace->statics = statics;
  frontend::EagerBody eager_body;
  // What the body threw, as a Status: failed after the scopes below are gone. Failed
  // inside them, the JitScope's destructor no longer found its frame (fail() cut the
  // stack back) and recorded an error on the graph after fail() restored its status:
  // every later trace, call and Run of the graph failed.
  std::optional<absl::Status> thrown;
  {
    // Before the arguments: a Function called while another traces (from its body) made
    // its arguments in the outer trace's graph, and then could not capture them.
    ir::TracingScope tracing(&g);  // ops on the program's graphs are built in g
    NameScope name(g, options.name);
    // The scope's full name ("step_1" for a second trace), from the name a node named ""
    // would get: the names of the variables the body creates are compared within it.
    const std::string probe = g.UniqueName("");
    trace->root = probe.substr(0, probe.rfind('/'));
    const std::vector<TracedArg> args = api::TraceArgs(g, signature, statics, &trace->inputs);
    std::optional<JitScope> scope;
    if (options.jit_compile.has_value() && !eager) scope.emplace(g, *options.jit_compile);
    PrecisionScope precision(g, options.precision);  // issue 38's policy; kF32: none
    frontend::EagerBody* outer = frontend::CurrentEagerBody();
    frontend::CurrentEagerBody() = eager ? &eager_body : nullptr;
    try {
      trace->outputs = body(g, args);
    } catch (const api::ArgKindError& e) {
      thrown = absl::InvalidArgumentError(e.what());
    } catch (const std::bad_alloc& e) {
      thrown = absl::ResourceExhaustedError(absl::StrCat("the body threw: ", e.what()));
    } catch (const std::exception& e) {
      // The user's code failed, as a control-flow body or a JitScope predicate that throws
      // (InvalidArgument); Internal said Braze was wrong.
      thrown = absl::InvalidArgumentError(absl::StrCat("the body threw: ", e.what()));
    } catch (...) {
      thrown = absl::InvalidArgumentError("the body threw a non-std::exception");
    }
    frontend::CurrentEagerBody() = outer;
  }
  if (thrown.has_value()) return fail(*thrown);
  if (!eager_body.first_jit_scope.empty()) {
    return fail(absl::FailedPreconditionError(
        absl::StrCat("JitScope ", eager_body.first_jit_scope,
                     " was opened while functions run eagerly (RunFunctionsEagerly(true)); as "
                     "tf.xla.experimental.jit_scope, it needs graph execution")));
  }
  if (!g.status().ok() && status_before.ok()) return fail(g.status());
  if (trace->outputs.empty()) {
    return fail(absl::InvalidArgumentError("the body returned no tensors"));
  }
  for (size_t i = 0; i < trace->outputs.size(); ++i) {
    Tensor& t = trace->outputs[i];
    if (!t.valid()) {
      return fail(absl::InvalidArgumentError(absl::StrCat("output ", i, " is not a tensor")));
    }
    if (t.graph() != &g) {  // an outside Variable or Const returned as it is
      absl::StatusOr<Tensor> here = g.Capture(t);
      if (!here.ok()) {
        return fail(absl::InvalidArgumentError(absl::StrCat(
            "output ", i, " is a tensor of another graph: ", here.status().message())));
      }
      t = *here;
    }
    if (!g.HasOutput(t)) {
      return fail(absl::InvalidArgumentError(
          absl::StrCat("output ", i, " names no output of the graph (node id ", t.node_id(),
                       ", output ", t.index(), ")")));
    }
  }
  g.set_capture(nullptr);
  if (options.jit_compile.has_value() && !eager) ApplyJitCompile(g, start, *options.jit_compile);
  for (int id = start; id < g.num_nodes(); ++id) {
    const Node& n = g.node(id);
    if (IsSideEffect(n.op())) trace->targets.emplace_back(&g, id, 0);
    if (n.op() == OpKind::kVariable && captures.outside_variable.count(id) == 0) {
      trace->created.emplace_back(&g, id, 0);
    }
  }
  if (absl::Status s = check(*trace); !s.ok()) return fail(std::move(s));
  return trace;
}

}  // namespace

// ---- Function ----

Function::Function(FunctionBody body, FunctionOptions options)
    : Function(api::TensorsOnlyBody(std::move(body)), std::move(options)) {
  shared_->takes_values = false;
}

Function::Function(TracedArgsBody body, FunctionOptions options)
    : shared_(std::make_unique<Shared>()) {
  shared_->body = std::move(body);
  shared_->options = std::move(options);
  if (shared_->options.graph == nullptr) {
    shared_->own_graph = std::make_unique<Graph>();
    shared_->graph = shared_->own_graph.get();
  } else {
    shared_->graph = shared_->options.graph;
  }
  shared_->graph_mu = api::GraphLock(*shared_->graph);
  shared_->session =
      std::make_unique<Session>(*shared_->graph, SessionOptionsFor(shared_->options, false));
}

Function::~Function() {
  std::lock_guard<std::mutex> lock(shared_->mu);
  for (const auto& trace : shared_->traces) {
    for (const VariableUse& v : trace->variables) {
      // The function's own graph holds only what its body created: it goes with it.
      if (!v.captured && shared_->own_graph != nullptr) continue;
      v.shared->Release(*shared_->session);
    }
  }
  if (shared_->own_graph != nullptr) api::ForgetVariablesOf(*shared_->own_graph);
}

const FunctionOptions& Function::options() const { return shared_->options; }

int Function::tracing_count() const {
  std::lock_guard<std::mutex> lock(shared_->mu);
  return shared_->tracing_count;
}

SessionStats Function::stats() const { return shared_->session->stats(); }

namespace {

// Runs `trace` in `session`: pulls stale variables in, runs, marks what it assigned.
absl::StatusOr<std::vector<HostTensor>> RunTrace(const FunctionOptions& options, Trace& trace,
                                                 Session& session,
                                                 const std::vector<HostTensor>& args) {
  for (VariableUse& v : trace.variables) {
    BRAZE_RETURN_IF_ERROR(Annotate(options, v.shared->PullInto(session, v.variable, v.held)));
  }
  Feeds feeds;
  feeds.reserve(args.size());
  for (size_t i = 0; i < args.size(); ++i) feeds.emplace_back(trace.inputs[i], args[i]);
  absl::StatusOr<std::vector<HostTensor>> out = session.Run(feeds, trace.outputs, trace.targets);
  if (!out.ok()) return Annotate(options, out.status());
  for (VariableUse& v : trace.variables) {
    if (v.assigned) v.shared->Updated(session, v.variable, v.held);
  }
  return out;
}

// Fills trace.variables; held versions live in `held` (one per session). A variable the
// trace created is shared as itself, or as the one it stands for (Trace::homes), whose
// value an eager call's new session takes first (with `eager`).
void BindVariables(Graph& g, Trace& trace, const Captures& captures,
                   std::unordered_map<api::SharedVariable*, uint64_t>& held, bool eager) {
  std::vector<Tensor> roots = trace.outputs;
  roots.insert(roots.end(), trace.targets.begin(), trace.targets.end());
  for (auto& [variable, assigned] : VariablesUsed(g, roots)) {
    auto outside = captures.outside_variable.find(variable.node_id());
    auto home = trace.homes.find(variable.node_id());
    VariableUse use;
    use.variable = variable;
    use.assigned = assigned;
    use.captured = outside != captures.outside_variable.end();
    use.shared = api::SharedVariableOf(use.captured                ? outside->second
                                       : home != trace.homes.end() ? home->second
                                                                   : variable);
    // 0 = the initial value, as a new session has; a variable created again starts from
    // the value (or initial value) of the one it stands for.
    const bool pull = eager && home != trace.homes.end();
    use.held = &held.try_emplace(use.shared.get(), pull ? ~uint64_t{0} : 0).first->second;
    trace.variables.push_back(std::move(use));
  }
}

// The trace whose signature covers `call`, preferring the most specific one.
Trace* FindTrace(Shared& s, const api::Signature& call, const api::StaticKey& statics) {
  Trace* best = nullptr;
  int best_unknown = 0;
  for (const auto& t : s.traces) {
    if (!api::SameStatics(t->statics, statics) || !api::Covers(t->signature, call)) continue;
    int unknown = 0;
    for (const TensorSpec& spec : t->signature) {
      for (int64_t d : spec.shape) unknown += d == kUnknownDim;
    }
    if (best == nullptr || unknown < best_unknown) {
      best = t.get();
      best_unknown = unknown;
    }
  }
  return best;
}

// Records a call for the excessive-retracing warning; warns once.
void NoteCall(Shared& s, bool traced, const api::Signature& signature,
              const api::StaticKey& statics) {
  if (s.warned) return;
  s.recent.push_back(traced ? std::make_optional(std::make_pair(signature, statics))
                            : std::nullopt);
  if (s.recent.size() > kRetraceWindow) s.recent.pop_front();
  std::vector<api::Signature> traced_signatures;
  std::vector<api::StaticKey> traced_statics;
  for (const auto& r : s.recent) {
    if (!r) continue;
    traced_signatures.push_back(r->first);
    traced_statics.push_back(r->second);
  }
  const int traces = static_cast<int>(traced_signatures.size());
  if (traces < kRetraceLimit) return;
  s.warned = true;
  LogWarning(api::RetraceWarning(FunctionLabel(s.options), traced_signatures, traced_statics,
                                 s.recent.size(), s.options.reduce_retracing));
}

// A C++ body takes a vector, so its arity and the positions of its static arguments
// are what its first trace (or the input_signature) had: a call with others is an
// error, not a retrace that would index past the arguments.
absl::Status CheckPattern(Shared& s, const api::StaticKey& statics) {
  std::lock_guard<std::mutex> lock(s.mu);
  if (s.traces.empty()) return absl::OkStatus();
  return api::CheckPattern(s.options.name, s.traces.front()->statics, statics);
}

// Points the variables `trace` creates again at those the function created before
// (Trace::homes), by name; returns the names of those it creates anew. Under s.mu.
absl::StatusOr<std::vector<std::string>> MatchCreated(const Shared& s, Trace& trace) {
  std::vector<std::string> fresh;
  for (const Tensor& v : trace.created) {
    std::string name = RelativeName(trace, v);
    auto it = s.created.find(name);
    if (it == s.created.end()) {
      fresh.push_back(std::move(name));
    } else if (it->second.type() != v.type()) {
      return absl::FailedPreconditionError(
          absl::StrCat("the body creates variable '", name, "' as ", TypeString(v.type()),
                       ", but its first call created it as ", TypeString(it->second.type())));
    } else {
      trace.homes[v.node_id()] = it->second;
    }
  }
  return fresh;
}

// The variables a first trace or eager call created anew become the function's (under
// s.mu). Those of a scratch graph get a Variable of the function's graph (its type and
// initial value) to live on in; the caller holds that graph's lock exclusively.
void KeepCreated(Shared& s, Trace& trace, Graph& g) {
  for (const Tensor& v : trace.created) {
    if (trace.homes.count(v.node_id()) > 0) continue;
    const std::string name = RelativeName(trace, v);
    if (&g == s.graph) {
      s.created.emplace(name, v);
      continue;
    }
    ir::TracingScope tracing(s.graph);  // not redirected into a trace this call is in
    Tensor home = s.graph->AddNode(OpKind::kVariable, {}, v.node().attrs(),
                                   absl::StrCat(s.options.name, ".variables/", name));
    s.created.emplace(name, home);
    trace.homes[v.node_id()] = home;
  }
}

// RunFunctionsEagerly: the body runs anew on the reference kernels; nothing is cached.
// A function with a graph of its own traces into a scratch graph, dropped after. The
// variables the body creates are the function's (Shared::created): each call creates
// them again, standing for them; as a trace, only the first call may create new ones,
// and a call that would trace again (not running eagerly) may create none.
absl::StatusOr<std::vector<HostTensor>> RunEagerly(Shared& s, const std::vector<HostTensor>& args,
                                                   const api::StaticKey& statics) {
  std::unique_ptr<Graph> scratch;
  Graph* g = s.graph;
  if (s.own_graph != nullptr) {
    scratch = std::make_unique<Graph>();
    g = scratch.get();
  }
  const std::shared_ptr<std::shared_mutex> graph_mu = api::GraphLock(*g);
  ScopedGraphLock graph_lock(*graph_mu, /*exclusive=*/true, s.options);
  BRAZE_RETURN_IF_ERROR(graph_lock.status());
  Captures scratch_captures;
  Captures& captures = scratch != nullptr ? scratch_captures : s.captures;
  const api::Signature call = api::SignatureOf(args);
  const api::Signature& spec = s.options.input_signature ? *s.options.input_signature : call;
  auto check = [&](Trace& trace) -> absl::Status {
    if (trace.created.empty()) return absl::OkStatus();
    std::lock_guard<std::mutex> lock(s.mu);
    const std::string what = absl::StrCat("its eager call with ", api::SignatureString(call));
    if (!s.traces.empty() || s.eager_first) {
      const api::Signature& first = s.traces.empty() ? *s.eager_first : s.traces.front()->signature;
      if (!api::Covers(first, spec)) {
        return VariableCreationError(
            what, CreatedNames(trace),
            absl::StrCat("only a function's first trace may create variables (as in "
                         "tf.function), here the one for ",
                         api::SignatureString(first),
                         ", and not running eagerly this call would trace again"));
      }
      BRAZE_ASSIGN_OR_RETURN(std::vector<std::string> fresh, MatchCreated(s, trace));
      if (!fresh.empty()) {
        return VariableCreationError(
            what, fresh,
            "the function's first call created no such variable, and only a function's first "
            "trace (or first eager call) may create variables (as in tf.function)");
      }
      return absl::OkStatus();
    }
    return MatchCreated(s, trace).status();
  };
  BRAZE_ASSIGN_OR_RETURN(std::unique_ptr<Trace> trace,
                         TraceBody(s.body, s.options, *g, captures, call, statics,
                                   /*eager=*/true, check));
  if (trace->homes.size() < trace->created.size()) {
    // Variables created anew: the function's graph grows by their homes.
    std::optional<ScopedGraphLock> home_lock;
    if (scratch != nullptr) {
      home_lock.emplace(*s.graph_mu, /*exclusive=*/true, s.options);
      BRAZE_RETURN_IF_ERROR(home_lock->status());
    }
    std::lock_guard<std::mutex> lock(s.mu);
    BRAZE_RETURN_IF_ERROR(Annotate(s.options, MatchCreated(s, *trace).status()));
    KeepCreated(s, *trace, *g);
  }
  Session session(*g, SessionOptionsFor(s.options, /*eager=*/true));
  std::unordered_map<api::SharedVariable*, uint64_t> held;
  BindVariables(*g, *trace, captures, held, /*eager=*/true);
  absl::StatusOr<std::vector<HostTensor>> out = RunTrace(s.options, *trace, session, args);
  for (const VariableUse& v : trace->variables) v.shared->Release(session);
  if (out.ok()) {
    std::lock_guard<std::mutex> lock(s.mu);
    if (s.traces.empty() && !s.eager_first) s.eager_first = spec;
  }
  return out;
}

}  // namespace

absl::StatusOr<ConcreteFunction*> Function::FindOrTrace(
    const std::vector<TensorSpec>& spec_in, const api::StaticKey& statics, bool* traced,
    const std::vector<TensorSpec>* reduce_call) {
  std::vector<TensorSpec> spec = spec_in;
  Shared& s = *shared_;
  *traced = false;
  BRAZE_RETURN_IF_ERROR(NotTracingHere(s));
  BRAZE_RETURN_IF_ERROR(CheckPattern(s, statics));
  auto find = [&]() -> ConcreteFunction* {
    for (const auto& t : s.traces) {
      if (api::SameStatics(t->statics, statics) && api::Covers(t->signature, spec) &&
          api::Covers(spec, t->signature)) {
        return t->concrete.get();
      }
    }
    return nullptr;
  };
  {
    std::lock_guard<std::mutex> lock(s.mu);
    if (ConcreteFunction* found = find()) return found;
  }
  // Tracing grows the graph: no Function may run on it meanwhile.
  ScopedGraphLock graph_lock(*s.graph_mu, /*exclusive=*/true, s.options);
  BRAZE_RETURN_IF_ERROR(graph_lock.status());
  std::lock_guard<std::mutex> lock(s.mu);
  if (reduce_call != nullptr) {
    // Threads that generalized against the same traces at once each traced their own
    // call: 3 traces where reduce_retracing allows 2 (a black-box test). Under this
    // lock the traces are current.
    if (Trace* covering = FindTrace(s, *reduce_call, statics)) return covering->concrete.get();
    std::vector<api::Signature> traces;  // of the same static values
    for (const auto& t : s.traces) {
      if (api::SameStatics(t->statics, statics)) traces.push_back(t->signature);
    }
    spec = api::Generalize(*reduce_call, traces);
  }
  if (ConcreteFunction* found = find()) return found;  // another thread traced it
  absl::StatusOr<std::unique_ptr<Trace>> traced_body;
  {
    tracing_here.push_back(&s);
    const auto pop = absl::MakeCleanup([] { tracing_here.pop_back(); });  // even on a throw
    // tf.function's rule: only the first trace may create variables (a later trace's
    // would be new ones, starting again from their initial values).
    auto check = [&s](Trace& trace) -> absl::Status {
      if (trace.created.empty()) return absl::OkStatus();
      if (s.traces.empty()) return MatchCreated(s, trace).status();
      return VariableCreationError(
          absl::StrCat("its trace for ", api::SignatureString(trace.signature)),
          CreatedNames(trace),
          absl::StrCat("only a function's first trace may create variables (as in tf.function), "
                       "here the one for ",
                       api::SignatureString(s.traces.front()->signature)));
    };
    traced_body =
        TraceBody(s.body, s.options, *s.graph, s.captures, spec, statics, /*eager=*/false, check);
  }
  BRAZE_ASSIGN_OR_RETURN(std::unique_ptr<Trace> trace, std::move(traced_body));
  KeepCreated(s, *trace, *s.graph);
  BindVariables(*s.graph, *trace, s.captures, s.held, /*eager=*/false);
  trace->concrete.reset(new ConcreteFunction(this, trace.get()));
  ++s.tracing_count;
  s.traces.push_back(std::move(trace));
  *traced = true;
  return s.traces.back()->concrete.get();
}

absl::StatusOr<ConcreteFunction*> Function::GetConcreteFunction(
    const std::vector<TensorSpec>& signature) {
  const FunctionOptions& o = shared_->options;
  if (o.input_signature) {
    BRAZE_RETURN_IF_ERROR(api::CheckAgainst(o.name, *o.input_signature, signature));
  }
  bool traced = false;
  return FindOrTrace(o.input_signature ? *o.input_signature : signature,
                     api::TensorsOnly(signature.size()), &traced);
}

absl::StatusOr<std::vector<HostTensor>> Function::operator()(const std::vector<HostTensor>& args) {
  return Run(args, api::TensorsOnly(args.size()));
}

absl::StatusOr<std::vector<HostTensor>> Function::Call(const std::vector<Arg>& args) {
  std::vector<HostTensor> tensors;
  api::StaticKey statics;
  api::SplitArgs(args, &tensors, &statics);
  if (!shared_->takes_values) {
    BRAZE_RETURN_IF_ERROR(api::CheckTensorsOnly(shared_->options.name, statics));
  }
  return Run(tensors, statics);
}

absl::StatusOr<std::vector<HostTensor>> Function::Run(const std::vector<HostTensor>& args,
                                                      const api::StaticKey& statics) {
  Shared& s = *shared_;
  BRAZE_RETURN_IF_ERROR(NotTracingHere(s));
  // The signature's own entries first, by their own index: with static arguments the
  // per-tensor checks below would name the wrong one.
  if (s.options.input_signature) {
    BRAZE_RETURN_IF_ERROR(api::CheckSpec(s.options.name, *s.options.input_signature));
  }
  for (size_t i = 0, t = 0; i < statics.size(); ++i) {
    if (statics[i].has_value()) continue;
    // Before the signature: a -1 dim there means "any size" and would trace generically.
    if (args[t++].num_elements() < 0) {
      return absl::InvalidArgumentError(absl::StrCat("Function '", s.options.name, "': argument ",
                                                     i, "'s ", BadValueShape(args[t - 1].shape())));
    }
  }
  const api::Signature call = api::SignatureOf(args);
  if (s.options.input_signature) {
    BRAZE_RETURN_IF_ERROR(
        api::HasStatic(statics)
            ? api::CheckTensorsAgainst(s.options.name, *s.options.input_signature, statics, call)
            : api::CheckAgainst(s.options.name, *s.options.input_signature, call));
  }
  BRAZE_RETURN_IF_ERROR(CheckPattern(s, statics));
  if (FunctionsRunEagerly()) return RunEagerly(s, args, statics);
  Trace* trace = nullptr;
  {
    std::lock_guard<std::mutex> lock(s.mu);
    trace = FindTrace(s, call, statics);
    if (trace != nullptr) NoteCall(s, false, call, statics);
  }
  if (trace == nullptr) {
    // With reduce_retracing, FindOrTrace generalizes the call under its tracing lock.
    const api::Signature& spec = s.options.input_signature ? *s.options.input_signature : call;
    bool traced = false;
    const bool reduce = !s.options.input_signature && s.options.reduce_retracing;
    BRAZE_ASSIGN_OR_RETURN(ConcreteFunction * concrete,
                           FindOrTrace(spec, statics, &traced, reduce ? &call : nullptr));
    trace = concrete->trace_;
    std::lock_guard<std::mutex> lock(s.mu);
    NoteCall(s, traced, call, statics);
  }
  ScopedGraphLock graph_lock(*s.graph_mu, /*exclusive=*/false, s.options);
  BRAZE_RETURN_IF_ERROR(graph_lock.status());
  return RunTrace(s.options, *trace, *s.session, args);
}

// ---- ConcreteFunction ----

const std::vector<TensorSpec>& ConcreteFunction::signature() const { return trace_->signature; }
const Graph& ConcreteFunction::graph() const { return *function_->shared_->graph; }
const std::vector<Tensor>& ConcreteFunction::inputs() const { return trace_->inputs; }
const std::vector<Tensor>& ConcreteFunction::outputs() const { return trace_->outputs; }
SessionStats ConcreteFunction::stats() const { return function_->stats(); }

absl::StatusOr<std::vector<HostTensor>> ConcreteFunction::operator()(
    const std::vector<HostTensor>& args) {
  Shared& s = *function_->shared_;
  const api::Signature call = api::SignatureOf(args);
  if (!api::Covers(trace_->signature, call)) {
    // As an input_signature check: the same words, naming the argument.
    BRAZE_RETURN_IF_ERROR(
        api::CheckAgainst(s.options.name, trace_->signature, call, "the concrete function's"));
  }
  ScopedGraphLock graph_lock(*s.graph_mu, /*exclusive=*/false, s.options);
  BRAZE_RETURN_IF_ERROR(graph_lock.status());
  return RunTrace(s.options, *trace_, *s.session, args);
}

// ---- process-wide ----

void RunFunctionsEagerly(bool enable) { run_eagerly.store(enable); }
bool FunctionsRunEagerly() { return run_eagerly.load(); }

absl::StatusOr<HostTensor> ReadVariable(const Tensor& variable) {
  if (!variable.valid() || variable.node().op() != OpKind::kVariable) {
    return absl::InvalidArgumentError("ReadVariable needs a Variable");
  }
  return api::SharedVariableOf(variable)->Read();
}

absl::Status AssignVariable(const Tensor& variable, const HostTensor& value) {
  if (!variable.valid() || variable.node().op() != OpKind::kVariable) {
    return absl::InvalidArgumentError("AssignVariable needs a Variable");
  }
  return api::SharedVariableOf(variable)->Write(value);
}

}  // namespace braze
