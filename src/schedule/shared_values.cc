// Expensive values stored once; see shared_values.h.
#include "schedule/shared_values.h"

#include <algorithm>
#include <functional>
#include <map>
#include <set>
#include <sstream>
#include <utility>

namespace braze {
namespace schedule {
namespace {

using Halide::Internal::Call;
using Halide::Internal::Function;

constexpr int64_t kSaturated = int64_t{1} << 40;  // evaluation counts stop growing here

// The distinct IR nodes of some expressions (a common subexpression counts once, as
// the code generator's CSE computes it once), and the distinct calls to each Func with
// their arguments.
class Census : public Halide::Internal::IRGraphVisitor {
 public:
  int64_t nodes = 0;
  std::map<std::string, int64_t> calls;
  std::vector<std::pair<std::string, std::vector<Halide::Expr>>> sites;

 private:
  using IRGraphVisitor::include;
  using IRGraphVisitor::visit;
  void include(const Halide::Expr& e) override {
    if (e.defined() && counted_.insert(e.get()).second) ++nodes;
    IRGraphVisitor::include(e);
  }
  void visit(const Call* op) override {
    IRGraphVisitor::visit(op);
    if (op->call_type == Call::Halide && op->func.defined()) {
      const std::string name = Function(op->func).name();
      ++calls[name];
      sites.emplace_back(name, op->args);
    }
  }
  std::set<const Halide::Internal::IRNode*> counted_;
};

struct Node {
  Function fn;
  int64_t own = 0;                       // IR nodes of its own values
  std::map<std::string, int64_t> calls;  // callee -> distinct call sites
  // Each call site: the callee and its arguments, in this Func's variables.
  std::vector<std::pair<std::string, std::vector<Halide::Expr>>> sites;
};

// The call (callee and arguments) as text: two sites that print alike compute the same
// element, and CSE computes them once in one loop nest.
std::string CallKey(const std::string& callee, const std::vector<Halide::Expr>& args) {
  std::ostringstream key;
  key << callee << "(";
  for (const Halide::Expr& a : args) key << a << ",";
  key << ")";
  return key.str();
}

// A loop nest expands at most this many distinct inlined calls before its count
// saturates (a chain of shifted reads, a stencil, could otherwise grow without bound).
constexpr size_t kMaxCallsPerNest = 1 << 14;

// Whether storing the value would be a round trip through DRAM rather than the caches
// (its extents: the exact ones, or a symbolic dim's estimate).
bool Large(const Function& fn, const Extents& extents) {
  int64_t bytes = 0;
  for (const Halide::Type& t : fn.output_types()) bytes += t.bytes();
  for (int64_t e : extents) {
    bytes *= std::max<int64_t>(e, 1);
    if (bytes > kSharedValueCacheBytes) return true;
  }
  return false;
}

double Product(const Extents& extents) {
  double n = 1;
  for (int64_t e : extents) n *= static_cast<double>(std::max<int64_t>(e, 1));
  return n;
}

// The elements of a graph value (0: not one).
double ElementsOf(const PipelineInfo& info, const std::string& name) {
  const auto it = info.values.find(name);
  return it == info.values.end() ? 0 : Product(it->second.extents);
}

// The iterations of a stored Func's loop nest: a value's or an output's elements, an
// accumulator's times its reduction's extent; 0 when unknown.
double NestElements(const PipelineInfo& info, const std::string& name) {
  for (const Stage& s : info.stages) {
    if (s.acc.name() == name) return Product(s.extents) * static_cast<double>(s.reduction_extent);
  }
  for (size_t i = 0; i < info.outputs.size(); ++i) {
    if (info.outputs[i].name() == name) return Product(info.output_extents[i]);
  }
  return ElementsOf(info, name);
}

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
    node.sites = std::move(census.sites);
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

  // Evaluations per element of each inlined Func: its distinct calls (callee and
  // arguments, through every chain of inlined readers) in the loop nests of the stored
  // Funcs (outputs, accumulators, operands, values stored here). Two readers inlined
  // into one loop nest that read the same element make one evaluation there, since
  // CSE computes the expression once (a GELU gradient's terms each reading the
  // sigmoid); two loop nests, or two different elements (a Pad's shifted read), make
  // two.
  std::map<std::string, int64_t> evaluations;
  // The same per element of the value, each call weighted by the loop nest's elements
  // over the value's where the nest has fewer (a 2x2 max pool's four taps read each
  // element of its input once, not four times; a 3x3 pool of stride 2, 2.25 times).
  std::map<std::string, double> per_element;
  bool counted = false;
  auto count = [&] {
    evaluations.clear();
    per_element.clear();
    for (const auto& [root, node] : graph) {
      if (inlined(root)) continue;
      const double nest = NestElements(info, root);
      std::set<std::string> seen;
      std::function<void(const Node&, const std::map<std::string, Halide::Expr>&)> expand =
          [&](const Node& caller, const std::map<std::string, Halide::Expr>& args_of) {
            for (const auto& [callee, args] : caller.sites) {
              if (graph.count(callee) == 0 || !inlined(callee)) continue;
              std::vector<Halide::Expr> at;
              for (const Halide::Expr& a : args) {
                at.push_back(args_of.empty() ? a : Halide::Internal::substitute(args_of, a));
              }
              if (seen.size() >= kMaxCallsPerNest) {
                // Past the cap the count is unbounded (a stencil chain): stored at any
                // size, per_element too (the large-value test below reads it).
                evaluations[callee] = kSaturated;
                per_element[callee] = static_cast<double>(kSaturated);
                continue;
              }
              if (!seen.insert(CallKey(callee, at)).second) continue;
              int64_t& e = evaluations[callee];
              e = std::min(kSaturated, e + 1);
              const double value = ElementsOf(info, callee);
              per_element[callee] += nest > 0 && value > nest ? nest / value : 1.0;
              const Node& next = graph.at(callee);
              std::map<std::string, Halide::Expr> next_args;
              const std::vector<std::string> vars = next.fn.args();
              for (size_t i = 0; i < vars.size() && i < at.size(); ++i) next_args[vars[i]] = at[i];
              expand(next, next_args);
            }
          };
      expand(node, {});
    }
    counted = true;
  };

  std::vector<SharedValue> result;
  for (const std::string& name : order) {
    const Node& n = graph.at(name);
    if (!inlined(name) || IsPlainLoad(n.fn) || info.values.count(name) == 0 ||
        cost_of(name) < min_cost) {
      continue;
    }
    if (!counted) count();
    const int64_t evals = evaluations[name];
    // A saturated count (kMaxCallsPerNest) is stored whatever its size: its per-element
    // count was cut short there, and inlined its evaluations grow without bound.
    if (evals >= 2 && (evals >= kSaturated || !Large(n.fn, info.values.at(name).extents) ||
                       (per_element[name] - 1) * static_cast<double>(cost_of(name)) >=
                           kMinLargeSharedValueCost)) {
      stored.insert(name);
      result.push_back({Halide::Func(n.fn), evals, cost_of(name)});
      // Its producers are now evaluated in its loop nest, once per element it reads,
      // and the costs of its readers no longer include it.
      counted = false;
      cost.clear();
    }
  }
  return result;
}

}  // namespace schedule
}  // namespace braze
