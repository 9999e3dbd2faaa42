// Expensive values stored once; see shared_values.h.
#include "schedule/shared_values.h"

#include <map>
#include <set>
#include <string>

namespace braze {
namespace schedule {
namespace {

using Halide::Internal::Call;
using Halide::Internal::Function;

// Counts the distinct nodes an IRGraphVisitor reaches (a shared subexpression once).
class NodeCount : public Halide::Internal::IRGraphVisitor {
 public:
  int64_t count() const { return static_cast<int64_t>(seen_.size()); }
  void Count(const Halide::Expr& e) { include(e); }

 private:
  using IRGraphVisitor::include;
  void include(const Halide::Expr& e) override {
    if (seen_.insert(e.get()).second) e.accept(this);
  }
  std::set<const Halide::Internal::IRNode*> seen_;
};

// Whether an expression reads memory (a Func or a buffer): an index that does
// (a gather's) has no bounds that Halide can infer for a stored callee.
bool ReadsMemory(const Halide::Expr& e) {
  struct Finder : Halide::Internal::IRGraphVisitor {
    using IRGraphVisitor::visit;
    bool found = false;
    void visit(const Call* c) override {
      found = found || c->call_type == Call::Halide || c->call_type == Call::Image;
      IRGraphVisitor::visit(c);
    }
  } finder;
  e.accept(&finder);
  return finder.found;
}

// From one stored Func, the Funcs it reads, following calls into Funcs that would be
// inlined (pure, not stored). Records callees read at an index that reads memory.
class Reads : public Halide::Internal::IRGraphVisitor {
 public:
  Reads(const std::set<std::string>& stored, std::set<std::string>* indirect)
      : stored_(stored), indirect_(indirect) {}
  std::set<std::string> names;

 private:
  using IRGraphVisitor::visit;
  void visit(const Call* op) override {
    IRGraphVisitor::visit(op);
    if (op->call_type != Call::Halide || !op->func.defined()) return;
    Function f(op->func);
    for (const Halide::Expr& a : op->args) {
      if (ReadsMemory(a)) indirect_->insert(f.name());
    }
    if (!names.insert(f.name()).second) return;
    if (stored_.count(f.name()) == 0 && !f.has_update_definition()) {
      for (const Halide::Expr& v : f.values()) v.accept(this);
    }
  }
  const std::set<std::string>& stored_;
  std::set<std::string>* indirect_;
};

std::vector<Halide::Expr> AllValues(const Function& f) {
  std::vector<Halide::Expr> values = f.values();
  for (const auto& update : f.updates()) {
    for (const Halide::Expr& v : update.values()) values.push_back(v);
    for (const Halide::Expr& a : update.args()) values.push_back(a);
  }
  return values;
}

// Nodes of f's values and of the inlined Funcs they call, each distinct node once.
class InlinedCount : public NodeCount {
 public:
  explicit InlinedCount(const std::set<std::string>& stored) : stored_(stored) {}

 private:
  using NodeCount::visit;
  void visit(const Call* op) override {
    NodeCount::visit(op);
    if (op->call_type != Call::Halide || !op->func.defined()) return;
    Function f(op->func);
    if (stored_.count(f.name()) || f.has_update_definition() ||
        !seen_funcs_.insert(f.name()).second) {
      return;
    }
    for (const Halide::Expr& v : f.values()) Count(v);
  }
  const std::set<std::string>& stored_;
  std::set<std::string> seen_funcs_;
};

}  // namespace

std::vector<SharedValue> ExpensiveSharedValues(const PipelineInfo& info,
                                               const std::vector<Halide::Func>& stored_too) {
  // An attention stage computes its Funcs per key tile: at root they would be the
  // [Tq, Tk] buffers it exists to avoid.
  for (const Stage& s : info.stages) {
    if (s.kind == StageKind::kAttention) return {};
  }
  std::map<std::string, Function> env;
  std::vector<Function> roots;
  std::set<std::string> stored;
  auto add_root = [&](const Halide::Func& f) {
    if (f.defined() && stored.insert(f.name()).second) roots.push_back(f.function());
  };
  for (const Halide::Func& out : info.outputs) {
    const auto calls = Halide::Internal::find_transitive_calls(out.function());
    env.insert(calls.begin(), calls.end());
    env.emplace(out.name(), out.function());
    add_root(out);
  }
  for (const Stage& s : info.stages) {
    add_root(s.acc);
    add_root(s.result);
    for (const Stage::Operand& operand : s.operands) add_root(operand.func);
  }
  for (const Halide::Func& f : stored_too) add_root(f);

  // Greedily, the costliest value (counting what it inlines) that two or more stored
  // Funcs read; once stored it is one reader of what it calls, so the counts are taken
  // again after each choice.
  std::vector<SharedValue> result;
  for (;;) {
    std::map<std::string, std::set<std::string>> readers;
    std::set<std::string> indirect;
    for (const Function& root : roots) {
      Reads reads(stored, &indirect);
      for (const Halide::Expr& v : AllValues(root)) v.accept(&reads);
      for (const std::string& name : reads.names) {
        if (name != root.name()) readers[name].insert(root.name());
      }
    }
    int64_t best_cost = 0;
    const Function* best = nullptr;
    for (const auto& [name, by] : readers) {
      if (by.size() < 2 || stored.count(name) || indirect.count(name)) continue;
      auto it = env.find(name);
      if (it == env.end()) continue;
      const Function& f = it->second;
      if (f.has_update_definition() || f.has_extern_definition() || IsPlainLoad(f)) continue;
      if (f.args().empty() || f.outputs() != 1) continue;
      // Stored whole, bounded and split by its extents: a value the lowering defined
      // with every dim static (StoredValue).
      auto extents = info.value_extents.find(name);
      if (extents == info.value_extents.end() || extents->second.size() != f.args().size()) {
        continue;
      }
      InlinedCount count(stored);
      for (const Halide::Expr& v : f.values()) count.Count(v);
      if (count.count() >= kExpensiveValueNodes && count.count() > best_cost) {
        best_cost = count.count();
        best = &f;
      }
    }
    if (best == nullptr) break;
    result.push_back({Halide::Func(*best), best_cost, info.value_extents.at(best->name())});
    add_root(result.back().func);
  }
  return result;
}

}  // namespace schedule
}  // namespace braze
