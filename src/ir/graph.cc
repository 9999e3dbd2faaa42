// Graph construction: naming, input checks, build-time shape inference, JIT scope
// application, and the text printer.
#include "braze/graph.h"

#include <algorithm>
#include <atomic>
#include <limits>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "braze/random.h"
#include "ir/autocast.h"
#include "ir/tracing.h"

namespace braze {
namespace {

struct OpInfo {
  const char* name;
  OpCategory category;
  int arity;
  bool compiled;
};
constexpr bool kCompiled = true, kNotCompiled = false;

constexpr OpInfo kOpInfo[] = {
#define BRAZE_OP(e, name, cat, arity, compiled) {name, OpCategory::cat, arity, compiled},
#include "braze/op_list.def"
#undef BRAZE_OP
};

std::atomic<uint64_t> next_graph_id{1};

std::string NodeLabel(const std::string& name, OpKind op) {
  return absl::StrCat("node '", name, "' (", OpName(op), ")");
}

}  // namespace

const char* OpName(OpKind op) { return kOpInfo[static_cast<int>(op)].name; }
OpCategory OpCategoryOf(OpKind op) { return kOpInfo[static_cast<int>(op)].category; }
int OpArity(OpKind op) { return kOpInfo[static_cast<int>(op)].arity; }
bool OpIsCompilable(OpKind op) { return kOpInfo[static_cast<int>(op)].compiled; }

std::optional<OpKind> OpFromName(std::string_view name) {
  for (int i = 0; i < kNumOps; ++i) {
    if (name == kOpInfo[i].name) return static_cast<OpKind>(i);
  }
  return std::nullopt;
}

// What a handle naming no node of its graph reads (Tensor class comment): builders and
// messages read a handle's type and name before anything checks it.
const Node& Tensor::NoSuchNode() {
  static const Node* const kNoSuchNode = [] {
    auto* n = new Node();
    n->name_ = "<no such node>";
    n->outputs_ = {TensorType{DType::kF32, {}}};
    n->status_ = absl::InvalidArgumentError("a Tensor naming no node of its graph");
    return n;
  }();
  return *kNoSuchNode;
}
const Node& Tensor::node() const {
  if (graph_ != nullptr && node_id_ >= 0 && node_id_ < graph_->num_nodes()) {
    return graph_->node(node_id_);
  }
  return NoSuchNode();
}
const TensorType& Tensor::type() const {
  const Node& n = node();
  return index_ >= 0 && index_ < n.num_outputs() ? n.output(index_) : NoSuchNode().output(0);
}
const std::string& Tensor::name() const { return node().name(); }

bool Graph::HasOutput(const Tensor& t, bool allow_no_outputs) const {
  if (t.graph() != this || t.node_id() < 0 || t.node_id() >= num_nodes() || t.index() < 0) {
    return false;
  }
  const int n = node(t.node_id()).num_outputs();
  return t.index() < n || (allow_no_outputs && n == 0 && t.index() == 0);
}

Graph::Graph() : id_(next_graph_id.fetch_add(1)) {}

void Graph::RecordError(absl::Status status) {
  if (first_error_.ok() && !status.ok()) first_error_ = std::move(status);
}

absl::StatusOr<Tensor> Graph::Capture(const Tensor& t) {
  if (!t.valid() || t.graph() == this || !capture_) return t;
  return capture_(t);
}

namespace ir {
namespace {

struct TracingState {
  Graph* graph = nullptr;
  uint64_t first_new_id = 0;
  std::vector<Graph*> bodies;  // control-flow bodies being traced, outermost first
};

TracingState& Tracing() {
  thread_local TracingState state;
  return state;
}

}  // namespace

TracingScope::TracingScope(Graph* graph)
    : previous_graph_(Tracing().graph), previous_first_new_id_(Tracing().first_new_id) {
  Tracing().graph = graph;
  Tracing().first_new_id = next_graph_id.load();
}

TracingScope::~TracingScope() {
  Tracing().graph = previous_graph_;
  Tracing().first_new_id = previous_first_new_id_;
}

Graph* TracingGraph() { return Tracing().graph; }
uint64_t TracingFirstNewGraphId() { return Tracing().first_new_id; }

BodyTracingScope::BodyTracingScope(Graph* body) { Tracing().bodies.push_back(body); }
BodyTracingScope::~BodyTracingScope() { Tracing().bodies.pop_back(); }

Graph* InnermostTracedBody(const Graph* g, const std::vector<const Graph*>& graphs) {
  const std::vector<Graph*>& bodies = Tracing().bodies;
  for (auto it = bodies.rbegin(); it != bodies.rend() && *it != g; ++it) {
    if (std::find(graphs.begin(), graphs.end(), *it) != graphs.end()) return *it;
  }
  return nullptr;
}

}  // namespace ir

void Graph::Truncate(int num_nodes, absl::Status status) {
  if (num_nodes >= 0 && num_nodes < this->num_nodes()) nodes_.resize(num_nodes);
  first_error_ = std::move(status);
}

// As TF's name_scope: re-entering a scope name gives a fresh one ("Softmax_1/"), so
// composites built twice never interleave their ops' names.
void Graph::PushNameScope(std::string_view scope) { name_scopes_.push_back(UniqueName(scope)); }
void Graph::PopNameScope() {
  if (!name_scopes_.empty()) name_scopes_.pop_back();
}

std::string Graph::UniqueName(std::string_view base) {
  // name_scopes_ holds full paths, innermost last.
  std::string full = name_scopes_.empty()
                         ? std::string(base)
                         : absl::StrCat(name_scopes_.back(), "/", std::string(base));
  // TF naming: the first use keeps the name, later ones get _1, _2, ...; a generated
  // name that a user already took is skipped.
  int& count = name_counts_[full];
  std::string name = count == 0 ? full : absl::StrCat(full, "_", count);
  ++count;
  while (name_counts_.count(name) && name != full) {
    name = absl::StrCat(full, "_", count++);
  }
  if (name != full) name_counts_[name] = 1;
  return name;
}

std::string Graph::NextJitScopeName() { return absl::StrCat("jit_scope_", next_jit_scope_++); }

Tensor Graph::AddNode(OpKind op, std::vector<Tensor> inputs, Attrs attrs, std::string_view name) {
  // An op using a tensor of a control-flow body being traced belongs to that body.
  if (!inputs.empty()) {
    std::vector<const Graph*> graphs;
    for (const Tensor& in : inputs) {
      if (in.valid() && in.graph() != this) graphs.push_back(in.graph());
    }
    if (Graph* body = graphs.empty() ? nullptr : ir::InnermostTracedBody(this, graphs)) {
      return body->AddNode(op, std::move(inputs), std::move(attrs), name);
    }
  }
  // Inside a Function's trace, ops on the program's graphs belong to the function.
  if (Graph* traced = ir::TracingGraph();
      traced != nullptr && traced != this && id_ < ir::TracingFirstNewGraphId()) {
    return traced->AddNode(op, std::move(inputs), std::move(attrs), name);
  }
  absl::Status capture_error;
  if (capture_) {
    for (Tensor& in : inputs) {
      if (!in.valid() || in.graph() == this) continue;
      absl::StatusOr<Tensor> captured = capture_(in);
      if (captured.ok()) {
        in = *captured;
      } else if (capture_error.ok()) {
        capture_error = captured.status();
      }
    }
  }
  if (compute_dtype_ != DType::kF32 && !autocasting_) {
    // The policy's Casts go in before the node, so its inputs still precede it.
    autocasting_ = true;
    ir::AutocastInputs(*this, op, compute_dtype_, &inputs);
    autocasting_ = false;
  }
  auto node = std::make_unique<Node>();
  node->id_ = num_nodes();
  node->op_ = op;
  node->name_ = UniqueName(name.empty() ? std::string_view(OpName(op)) : name);
  node->attrs_ = std::move(attrs);
  // A random op's default key is its name's (RandomAttrs): fixed here, once the name is.
  if (auto* r = std::get_if<RandomAttrs>(&node->attrs_); r != nullptr && !r->op_key) {
    r->op_key = RandomOpKeyOf(node->name_);
  }
  node->device_ = device_;
  const std::string label = NodeLabel(node->name_, op);

  absl::Status status;
  if (!capture_error.ok()) {
    status = absl::InvalidArgumentError(absl::StrCat(label, ": ", capture_error.message()));
  }
  std::vector<TensorType> input_types;
  for (size_t i = 0; i < inputs.size() && status.ok(); ++i) {
    const Tensor& in = inputs[i];
    if (!in.valid()) {
      status = absl::InvalidArgumentError(
          absl::StrCat(label, ": input ", i, " is not a tensor", internal::kNotATensorHint));
    } else if (in.graph() != this) {
      status = absl::InvalidArgumentError(
          absl::StrCat(label, ": input ", i, " comes from another graph"));
    } else if (!HasOutput(in)) {
      status = absl::InvalidArgumentError(absl::StrCat(label, ": input ", i,
                                                       " names no output of the graph (node id ",
                                                       in.node_id(), ", output ", in.index(), ")"));
    } else if (!in.node().status().ok()) {
      status = absl::InvalidArgumentError(
          absl::StrCat(label, ": input ", i, " ('", in.name(), "') is invalid"));
    } else {
      input_types.push_back(in.type());
    }
  }
  const int arity = OpArity(op);
  if (status.ok() && arity >= 0 && static_cast<int>(inputs.size()) != arity) {
    status = absl::InvalidArgumentError(
        absl::StrCat(label, ": expects ", arity, " inputs, got ", inputs.size()));
  }
  if (status.ok() && OpCategoryOf(op) == OpCategory::kState &&
      inputs[0].node().op() != OpKind::kVariable) {
    status = absl::InvalidArgumentError(
        absl::StrCat(label, ": input 0 must be a Variable, got '", inputs[0].name(), "'"));
  }
  if (status.ok()) {
    auto types = InferOutputTypes(op, node->attrs_, input_types);
    if (types.ok()) {
      node->outputs_ = *std::move(types);
    } else {
      status =
          absl::Status(types.status().code(), absl::StrCat(label, ": ", types.status().message()));
    }
  }
  if (!status.ok()) {
    // Keep handles usable: an invalid node still has one (meaningless) output.
    node->outputs_ = {TensorType{DType::kF32, {}}};
    node->inputs_.clear();
    for (const Tensor& in : inputs) {
      if (HasOutput(in)) node->inputs_.push_back(in);
    }
    node->status_ = status;
    RecordError(status);
  } else {
    node->inputs_ = std::move(inputs);
  }

  Node* raw = node.get();
  nodes_.push_back(std::move(node));
  if (!jit_frames_.empty()) {
    const JitScopeFrame& frame = jit_frames_.back();
    raw->jit_.scope = frame.scope;
    raw->jit_.separate_compiled_gradients = frame.separate_compiled_gradients;
    if (!frame.predicate) {
      raw->jit_.compile = frame.compile;
    } else {
      // A user predicate that throws must not leave the node looking unscoped.
      try {
        raw->jit_.compile = frame.predicate(NodeDef(*raw));
      } catch (...) {
        raw->jit_.compile = false;
        RecordError(absl::InvalidArgumentError(
            absl::StrCat(label, ": the JitScope compile predicate threw an exception")));
      }
    }
  }
  return Tensor(this, raw->id_, 0);
}

std::vector<Tensor> Graph::Outputs(const Tensor& t) const {
  std::vector<Tensor> outs;
  if (!HasOutput(t, /*allow_no_outputs=*/true)) return outs;
  const Node& n = node(t.node_id());
  for (int i = 0; i < n.num_outputs(); ++i) outs.emplace_back(t.graph(), n.id(), i);
  return outs;
}

std::optional<Tensor> Graph::FindTensor(std::string_view name) const {
  for (const auto& n : nodes_) {
    if (n->name() == name) return Tensor(const_cast<Graph*>(this), n->id(), 0);
  }
  return std::nullopt;
}

std::string Graph::DebugString() const {
  std::string out;
  for (const auto& n : nodes_) {
    std::vector<std::string> outs, ins;
    for (const TensorType& t : n->outputs()) outs.push_back(TypeString(t));
    for (const Tensor& in : n->inputs()) {
      ins.push_back(in.index() == 0 ? in.name() : absl::StrCat(in.name(), ":", in.index()));
    }
    absl::StrAppend(&out, "%", n->id(), " ", n->name(), " = ", n->op_name(), "(",
                    absl::StrJoin(ins, ", "), ") -> ", absl::StrJoin(outs, ", "));
    if (n->jit().compile.has_value()) {
      absl::StrAppend(&out, "  [compile=", *n->jit().compile ? "true" : "false",
                      " scope=", n->jit().scope, "]");
    }
    if (n->device()) absl::StrAppend(&out, "  [device=", n->device()->ToString(), "]");
    if (!n->status().ok()) absl::StrAppend(&out, "  ERROR: ", n->status().message());
    out += "\n";
    // cf (issue 40): a control-flow op's bodies, nested under it.
    if (const auto* cf = std::get_if<ControlFlowAttrs>(&n->attrs()); cf != nullptr) {
      for (const auto& b : cf->bodies) {
        if (b == nullptr || b->graph == nullptr) continue;
        std::vector<std::string> results;
        for (const Tensor& r : b->results) {
          results.push_back(!r.valid()       ? "?"
                            : r.index() == 0 ? r.name()
                                             : absl::StrCat(r.name(), ":", r.index()));
        }
        absl::StrAppend(&out, "  ", b->name, " {\n");
        for (absl::string_view line :
             absl::StrSplit(b->graph->DebugString(), '\n', absl::SkipEmpty())) {
          absl::StrAppend(&out, "    ", line, "\n");
        }
        absl::StrAppend(&out, "    return ", absl::StrJoin(results, ", "), "\n  }\n");
      }
    }
  }
  return out;
}

absl::Status VerifyGraph(const Graph& g) {
  for (int id = 0; id < g.num_nodes(); ++id) {
    const Node& n = g.node(id);
    const std::string label = NodeLabel(n.name(), n.op());
    if (!n.status().ok()) return n.status();
    std::vector<TensorType> types;
    for (int i = 0; i < n.num_inputs(); ++i) {
      const Tensor& in = n.input(i);
      if (in.graph() != &g || in.node_id() >= id || in.node_id() < 0) {
        return absl::InternalError(absl::StrCat(label, ": input ", i, " does not precede it"));
      }
      types.push_back(in.type());
    }
    if (OpArity(n.op()) >= 0 && OpArity(n.op()) != n.num_inputs()) {
      return absl::InternalError(absl::StrCat(label, ": wrong arity"));
    }
    auto inferred = InferOutputTypes(n.op(), n.attrs(), types);
    if (!inferred.ok()) {
      return absl::InternalError(absl::StrCat(label, ": ", inferred.status().message()));
    }
    if (*inferred != n.outputs()) {
      return absl::InternalError(absl::StrCat(label, ": stored output types are stale"));
    }
    // cf (issue 40): a control-flow op's bodies are graphs of their own, checked alike.
    if (const auto* cf = std::get_if<ControlFlowAttrs>(&n.attrs()); cf != nullptr) {
      for (const auto& b : cf->bodies) {
        for (const Tensor& p : b->params) {
          if (p.graph() != b->graph.get() || p.node().op() != OpKind::kPlaceholder) {
            return absl::InternalError(
                absl::StrCat(label, ": a parameter of its ", b->name, " is not its Placeholder"));
          }
        }
        absl::Status body = VerifyGraph(*b->graph);
        if (!body.ok()) {
          return absl::Status(body.code(),
                              absl::StrCat(label, ", ", b->name, ": ", body.message()));
        }
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace braze
