// Expensive values stored once; see shared_values.h.
#include "schedule/shared_values.h"

#include <algorithm>
#include <functional>
#include <map>
#include <set>

namespace braze {
namespace schedule {
namespace {

using Halide::Internal::Call;
using Halide::Internal::Function;

constexpr int64_t kSaturated = int64_t{1} << 40;  // evaluation counts stop growing here

// The distinct IR nodes of some expressions (a common subexpression counts once, as
// the code generator's CSE computes it once), and the distinct calls to each Func.
class Census : public Halide::Internal::IRGraphVisitor {
 public:
  int64_t nodes = 0;
  std::map<std::string, int64_t> calls;

 private:
  using IRGraphVisitor::include;
  using IRGraphVisitor::visit;
  void include(const Halide::Expr& e) override {
    if (e.defined() && counted_.insert(e.get()).second) ++nodes;
    IRGraphVisitor::include(e);
  }
  void visit(const Call* op) override {
    IRGraphVisitor::visit(op);
    if (op->call_type == Call::Halide && op->func.defined()) ++calls[Function(op->func).name()];
  }
  std::set<const Halide::Internal::IRNode*> counted_;
};

struct Node {
  Function fn;
  int64_t own = 0;                       // IR nodes of its own values
  std::map<std::string, int64_t> calls;  // callee -> distinct call sites
};

}  // namespace

std::vector<SharedValue> SharedExpensiveValues(const PipelineInfo& info,
                                               const std::set<std::string>& stored_in,
                                               int64_t min_cost) {
  for (const Stage& s : info.stages) {
    if (s.kind == StageKind::kAttention) return {};
  }
  std::map<std::string, Node> graph;
  for (const Halide::Func& out : info.outputs) {
    const auto calls = Halide::Internal::find_transitive_calls(out.function());
    for (const auto& [name, fn] : calls) graph[name].fn = fn;
    graph[out.name()].fn = out.function();
  }
  for (auto& [name, node] : graph) {
    Census census;
    for (const Halide::Expr& v : AllValues(node.fn)) v.accept(&census);
    node.own = census.nodes;
    node.calls = std::move(census.calls);
  }
  std::set<std::string> stored = stored_in;
  auto inlined = [&](const std::string& name) {
    const Node& n = graph.at(name);
    return stored.count(name) == 0 && !n.fn.has_update_definition() &&
           !n.fn.has_extern_definition();
  };
  // The cost of evaluating a Func where it is read: its nodes and those of every Func
  // it inlines, once per call site.
  std::map<std::string, int64_t> cost;
  std::function<int64_t(const std::string&)> cost_of = [&](const std::string& name) {
    if (auto it = cost.find(name); it != cost.end()) return it->second;
    const Node& n = graph.at(name);
    int64_t c = n.own;
    for (const auto& [callee, sites] : n.calls) {
      if (graph.count(callee) && inlined(callee)) {
        c = std::min(kSaturated, c + sites * cost_of(callee));
      }
    }
    cost[name] = c;
    return c;
  };
  // Consumers before producers: the reverse of a depth-first postorder from the outputs.
  std::vector<std::string> order;
  std::set<std::string> seen;
  std::function<void(const std::string&)> visit = [&](const std::string& name) {
    if (!seen.insert(name).second) return;
    for (const auto& [callee, sites] : graph.at(name).calls) {
      if (graph.count(callee)) visit(callee);
    }
    order.push_back(name);
  };
  for (const Halide::Func& out : info.outputs) visit(out.name());
  std::reverse(order.begin(), order.end());

  std::vector<SharedValue> result;
  std::map<std::string, int64_t> evaluations;  // per element of the Func, inlined
  for (const std::string& name : order) {
    const Node& n = graph.at(name);
    const int64_t evals = evaluations[name];
    if (inlined(name) && evals >= 2 && !IsPlainLoad(n.fn) && info.values.count(name) > 0 &&
        cost_of(name) >= min_cost) {
      stored.insert(name);
      result.push_back({Halide::Func(n.fn), evals, cost_of(name)});
    }
    // What this Func's evaluations cost its callees: one per call site when it is
    // stored, else one per call site each time it is evaluated.
    const int64_t times = inlined(name) ? std::max<int64_t>(evals, 1) : 1;
    for (const auto& [callee, sites] : n.calls) {
      int64_t& e = evaluations[callee];
      e = std::min(kSaturated, e + sites * times);
    }
  }
  return result;
}

}  // namespace schedule
}  // namespace braze
