// Bounded inlining; see inline_budget.h.
#include "schedule/inline_budget.h"

#include <algorithm>
#include <limits>
#include <map>
#include <utility>

namespace braze {
namespace schedule {
namespace {

using Halide::Internal::Function;

// The distinct IR nodes of a Func's expressions (a shared subexpression counts once).
int64_t OwnNodes(const Function& fn) {
  struct Counter : Halide::Internal::IRGraphVisitor {
    using IRGraphVisitor::include;
    void include(const Halide::Expr& e) override {
      if (e.defined() && seen.insert(e.get()).second) ++nodes;
      IRGraphVisitor::include(e);
    }
    std::set<const Halide::Internal::IRNode*> seen;
    int64_t nodes = 0;
  } counter;
  for (const Halide::Expr& v : AllValues(fn)) v.accept(&counter);
  return counter.nodes;
}

// The pipeline's Funcs, numbered producers first, with their own sizes and direct
// callees.
class FuncGraph {
 public:
  FuncGraph(const PipelineInfo& info, const std::set<std::string>& stored) {
    std::vector<Function> outputs;
    for (const Halide::Func& f : info.outputs) outputs.push_back(f.function());
    const std::map<std::string, Function> env = Halide::Internal::build_environment(outputs);
    std::map<std::string, int> index;
    for (const auto& [name, fn] : env) {
      index[name] = static_cast<int>(funcs_.size());
      funcs_.push_back(fn);
    }
    const int n = static_cast<int>(funcs_.size());
    own_.resize(n);
    callees_.resize(n);
    inlined_.resize(n);
    for (int i = 0; i < n; ++i) {
      const Function& fn = funcs_[i];
      own_[i] = OwnNodes(fn);
      for (const auto& [callee, unused] : Halide::Internal::find_direct_calls(fn)) {
        const auto it = index.find(callee);
        if (callee != fn.name() && it != index.end()) callees_[i].push_back(it->second);
      }
      inlined_[i] = stored.count(fn.name()) == 0 && !fn.has_update_definition() &&
                    !fn.has_extern_definition();
    }
    for (const Halide::Func& f : info.outputs) inlined_[index.at(f.name())] = false;
    // Producers first: a depth-first postorder from every Func (iterative: a chain of
    // thousands of Funcs is as deep).
    std::vector<int> state(n, 0);  // 0 unseen, 1 on the stack, 2 done
    for (int root = 0; root < n; ++root) {
      if (state[root] != 0) continue;
      std::vector<std::pair<int, size_t>> stack = {{root, 0}};
      state[root] = 1;
      while (!stack.empty()) {
        auto& [f, next] = stack.back();
        if (next < callees_[f].size()) {
          const int c = callees_[f][next++];
          if (state[c] == 0) {
            state[c] = 1;
            stack.emplace_back(c, 0);
          }
          continue;
        }
        state[f] = 2;
        order_.push_back(f);
        stack.pop_back();
      }
    }
    stamp_.assign(n, -1);
  }

  int size() const { return static_cast<int>(funcs_.size()); }
  const std::vector<int>& order() const { return order_; }
  const Function& func(int i) const { return funcs_[i]; }
  bool inlined(int i) const { return inlined_[i]; }
  void Store(int i) { inlined_[i] = false; }

  // The nodes of Func i's expression with every inlined Func it reads substituted, each
  // counted once; the count stops once past `cap`.
  int64_t InlinedNodes(int i, int64_t cap) {
    ++visit_;
    int64_t total = own_[i];
    std::vector<int> stack = {i};
    stamp_[i] = visit_;
    while (!stack.empty() && total <= cap) {
      const int f = stack.back();
      stack.pop_back();
      for (int c : callees_[f]) {
        if (!inlined_[c] || stamp_[c] == visit_) continue;
        stamp_[c] = visit_;
        total += own_[c];
        stack.push_back(c);
      }
    }
    return total;
  }

 private:
  std::vector<Function> funcs_;
  std::vector<int64_t> own_;
  std::vector<std::vector<int>> callees_;
  std::vector<bool> inlined_;
  std::vector<int> order_;
  std::vector<int> stamp_;  // the InlinedNodes walk that last reached each Func
  int visit_ = 0;
};

bool HasAttention(const PipelineInfo& info) {
  for (const Stage& s : info.stages) {
    if (s.kind == StageKind::kAttention) return true;
  }
  return false;
}

}  // namespace

std::vector<InlineBreak> InlineBudgetBreaks(const PipelineInfo& info,
                                            const std::set<std::string>& stored, int64_t budget) {
  if (HasAttention(info)) return {};
  FuncGraph graph(info, stored);
  std::vector<InlineBreak> breaks;
  for (int i : graph.order()) {
    const Function& fn = graph.func(i);
    if (!graph.inlined(i) || IsPlainLoad(fn) || info.values.count(fn.name()) == 0) continue;
    const int64_t nodes = graph.InlinedNodes(i, budget);
    if (nodes <= budget) continue;
    graph.Store(i);
    breaks.push_back({Halide::Func(fn), nodes});
  }
  return breaks;
}

bool LeftInlined(const Halide::Internal::Function& fn) {
  Halide::LoopLevel level;
  level.set(fn.schedule().compute_level());
  return level.lock().is_inlined();
}

int64_t LargestInlinedExpression(const PipelineInfo& info, const std::set<std::string>& stored) {
  FuncGraph graph(info, stored);
  int64_t largest = 0;
  for (int i = 0; i < graph.size(); ++i) {
    if (graph.inlined(i)) continue;
    largest = std::max(largest, graph.InlinedNodes(i, std::numeric_limits<int64_t>::max()));
  }
  return largest;
}

}  // namespace schedule
}  // namespace braze
