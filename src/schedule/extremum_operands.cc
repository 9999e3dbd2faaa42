// Values stored once for their comparisons; see extremum_operands.h.
#include "schedule/extremum_operands.h"

#include <map>
#include <set>
#include <string>

namespace braze {
namespace schedule {
namespace {

using Halide::Internal::Call;
using Halide::Internal::Function;

using Env = std::map<std::string, Function>;

// The Funcs a set of expressions calls, following calls into Funcs that are inlined
// (pure, not stored): those are evaluated where they are read.
class Callees : public Halide::Internal::IRGraphVisitor {
 public:
  explicit Callees(const std::set<std::string>& stored) : stored_(stored) {}
  std::set<std::string> names;

 private:
  using IRGraphVisitor::visit;
  void visit(const Call* op) override {
    IRGraphVisitor::visit(op);
    if (op->call_type != Call::Halide || !op->func.defined()) return;
    Function f(op->func);
    if (!names.insert(f.name()).second) return;
    if (stored_.count(f.name()) == 0 && !f.has_update_definition()) {
      for (const Halide::Expr& v : f.values()) v.accept(this);
    }
  }
  const std::set<std::string>& stored_;
};

// The Funcs read under comparison nodes, following inlined Funcs.
class ComparedCallees : public Halide::Internal::IRGraphVisitor {
 public:
  explicit ComparedCallees(const std::set<std::string>& stored) : callees(stored) {}
  Callees callees;

 private:
  using IRGraphVisitor::visit;
  template <typename T>
  void Compared(const T* op) {
    op->a.accept(&callees);
    op->b.accept(&callees);
  }
  void visit(const Halide::Internal::EQ* op) override { Compared(op); }
  void visit(const Halide::Internal::NE* op) override { Compared(op); }
  void visit(const Halide::Internal::LT* op) override { Compared(op); }
  void visit(const Halide::Internal::LE* op) override { Compared(op); }
  void visit(const Halide::Internal::GT* op) override { Compared(op); }
  void visit(const Halide::Internal::GE* op) override { Compared(op); }
};

}  // namespace

std::vector<Halide::Func> ComparedReductionOperands(const PipelineInfo& info) {
  Env env;
  for (const Halide::Func& out : info.outputs) {
    const Env calls = Halide::Internal::find_transitive_calls(out.function());
    env.insert(calls.begin(), calls.end());
    env.emplace(out.name(), out.function());
  }
  std::set<std::string> stored;
  for (const Halide::Func& out : info.outputs) stored.insert(out.name());
  for (const Stage& s : info.stages) {
    stored.insert(s.acc.name());
    if (s.result.defined()) stored.insert(s.result.name());
  }
  std::vector<Halide::Func> result;
  std::set<std::string> chosen;
  for (const Stage& s : info.stages) {
    if (s.kind == StageKind::kLibraryMatMul) continue;  // an extern stage: no update
    // The Funcs the update reads directly: storing those stores everything inlined
    // into them too, once.
    std::set<std::string> all;  // every Func counts as stored: no recursion
    for (const auto& [name, unused] : env) all.insert(name);
    Callees read(all);
    for (const Halide::Expr& v : s.acc.function().update(0).values()) v.accept(&read);
    for (const std::string& name : read.names) {
      auto it = env.find(name);
      if (it == env.end() || stored.count(name) || chosen.count(name)) continue;
      const Function& f = it->second;
      if (f.has_update_definition() || IsPlainLoad(f)) continue;
      // An ArgMax compares its input with the max that a second accumulator takes of
      // the same input: always two readers (braze-fuzz seed 13860: index 8 of 0..7).
      bool compared = s.kind == StageKind::kArgMax;
      for (const auto& [other, g] : env) {
        if (other == s.acc.name() || compared) continue;
        ComparedCallees cmp(stored);
        for (const Halide::Expr& v : AllValues(g)) v.accept(&cmp);
        compared = cmp.callees.names.count(name) > 0;
      }
      if (compared) {
        chosen.insert(name);
        result.push_back(Halide::Func(f));
      }
    }
  }
  return result;
}

}  // namespace schedule
}  // namespace braze
