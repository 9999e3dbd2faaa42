// Whether a lowered module still writes what it computes; see FindUnwrittenBuffer in
// lowered_check.h.
#include <map>
#include <set>
#include <string>
#include <vector>

#include "schedule/lowered_check.h"

namespace braze {
namespace schedule {
namespace {

using namespace Halide::Internal;  // IR node types, in this file only
using Halide::Expr;

// The Func a buffer belongs to: "f" for "f", and for "f.0" (a Tuple component) too.
std::string FuncOf(const std::string& buffer) {
  const size_t dot = buffer.rfind('.');
  if (dot != std::string::npos && dot + 1 < buffer.size() &&
      buffer.find_first_not_of("0123456789", dot + 1) == std::string::npos) {
    return buffer.substr(0, dot);
  }
  return buffer;
}

// Halide's own calls on buffers that read or describe them (a bounds query's
// _halide_buffer_init included) but never write their elements.
bool DescribesBuffers(const std::string& call) {
  return call.rfind("_halide_buffer_", 0) == 0 || call.rfind("halide_error_", 0) == 0;
}

// Across every function of a module: the buffers stored to, loaded from and allocated,
// and the variables that extern calls (a library stage's) are given, through lets. In a
// module whose parallel loops are outlined, halide_do_par_for's closure is such a call,
// and every buffer it captures counts as written (a read in a parallel loop of a buffer
// nothing writes is not seen there); the compile's check pass sees the loops' bodies
// inline, before they are outlined (lowered_check.h), and judges such reads too.
class Accesses : public IRGraphVisitor {
 public:
  std::set<std::string> stored, loaded, allocated, extern_args;

 private:
  using IRGraphVisitor::visit;

  void visit(const Store* op) override {
    stored.insert(op->name);
    IRGraphVisitor::visit(op);
  }
  void visit(const Load* op) override {
    loaded.insert(op->name);
    IRGraphVisitor::visit(op);
  }
  void visit(const Allocate* op) override {
    allocated.insert(op->name);
    IRGraphVisitor::visit(op);
  }
  void visit(const LetStmt* op) override {
    NoteLet(op->name, op->value);
    IRGraphVisitor::visit(op);
  }
  void visit(const Let* op) override {
    NoteLet(op->name, op->value);
    IRGraphVisitor::visit(op);
  }
  // A branch a constant condition never takes reads nothing. Halide 14 leaves
  // `select((uint1)0, x, 0)` in strict_float code (its simplifier does not fold a
  // strict_float select) after bounds inference has found that x's producer need not run
  // (braze-fuzz seed 64600008: a Gather of out-of-range ids, through pool gradients, of a
  // conv's filter gradient, whose produce was dropped as its required region is empty).
  void visit(const Select* op) override {
    if (is_const_one(op->condition)) return op->true_value.accept(this);
    if (is_const_zero(op->condition)) return op->false_value.accept(this);
    IRGraphVisitor::visit(op);
  }
  void visit(const IfThenElse* op) override {
    if (is_const_one(op->condition)) return op->then_case.accept(this);
    if (is_const_zero(op->condition)) {
      if (op->else_case.defined()) op->else_case.accept(this);
      return;
    }
    IRGraphVisitor::visit(op);
  }
  void visit(const Call* op) override {
    if (op->is_intrinsic(Call::if_then_else) && !op->args.empty()) {
      if (is_const_one(op->args[0])) return op->args[1].accept(this);
      if (is_const_zero(op->args[0])) {
        if (op->args.size() > 2) op->args[2].accept(this);
        return;
      }
    }
    IRGraphVisitor::visit(op);
    const bool external = op->call_type == Call::Extern || op->call_type == Call::ExternCPlusPlus;
    if (!external || DescribesBuffers(op->name)) return;
    for (const Expr& arg : op->args) {
      const std::set<std::string> vars = VariablesOf(arg);
      extern_args.insert(vars.begin(), vars.end());
    }
  }

  // The variables `e` reads, and those the lets it reads read.
  std::set<std::string> VariablesOf(const Expr& e) const {
    class Names : public IRGraphVisitor {
     public:
      std::set<std::string> names;

     private:
      using IRGraphVisitor::visit;
      void visit(const Variable* op) override { names.insert(op->name); }
    } names;
    e.accept(&names);
    std::set<std::string> all = names.names;
    for (const std::string& v : names.names) {
      auto it = let_vars_.find(v);
      if (it != let_vars_.end()) all.insert(it->second.begin(), it->second.end());
    }
    return all;
  }
  void NoteLet(const std::string& name, const Expr& value) { let_vars_[name] = VariablesOf(value); }

  std::map<std::string, std::set<std::string>> let_vars_;
};

}  // namespace

std::string FindUnwrittenBuffer(const Halide::Module& module,
                                const std::vector<std::string>& outputs) {
  if (module.target().has_gpu_feature()) return "";
  Accesses accesses;
  for (const LoweredFunc& f : module.functions()) f.body.accept(&accesses);
  // A buffer handed to an extern call ("f.buffer", or its host pointer "f") may be
  // written there: a library stage's output, an outlined loop's closure.
  auto written = [&](const std::string& buffer) {
    return accesses.stored.count(buffer) > 0 || accesses.extern_args.count(buffer) > 0 ||
           accesses.extern_args.count(buffer + ".buffer") > 0;
  };
  std::set<std::string> stored_funcs;
  for (const std::string& b : accesses.stored) stored_funcs.insert(FuncOf(b));
  for (const std::string& out : outputs) {
    if (stored_funcs.count(out) == 0 && !written(out)) {
      return "Halide 14 deleted the computation of output " + out +
             ": the lowered code never writes it (its simplifier proved code unreachable "
             "from an access outside an allocation)";
    }
  }
  for (const std::string& b : accesses.allocated) {
    if (accesses.loaded.count(b) > 0 && !written(b)) {
      return "Halide 14 deleted the computation of " + b +
             ": the lowered code reads it but never writes it (its simplifier proved code "
             "unreachable from an access outside an allocation)";
    }
  }
  return "";
}

}  // namespace schedule
}  // namespace braze
