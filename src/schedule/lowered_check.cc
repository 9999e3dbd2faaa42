// Checks of lowered code; see lowered_check.h.
#include "schedule/lowered_check.h"

#include <map>
#include <optional>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "schedule/gpu_launch_check.h"

namespace braze {
namespace schedule {
namespace {

using namespace Halide::Internal;  // IR node types, in this file only
using Halide::Expr;

// The names of the variables `e` reads.
std::set<std::string> VariableNames(const Expr& e) {
  class Vars : public IRGraphVisitor {
   public:
    std::set<std::string> names;

   private:
    using IRGraphVisitor::visit;
    void visit(const Variable* op) override { names.insert(op->name); }
  } vars;
  e.accept(&vars);
  return vars.names;
}

// The Func a buffer belongs to: "f" for "f", and for "f.0" (a Tuple component) too.
std::string FuncOfBuffer(const std::string& buffer) {
  const size_t dot = buffer.rfind('.');
  if (dot != std::string::npos && dot + 1 < buffer.size() &&
      buffer.find_first_not_of("0123456789", dot + 1) == std::string::npos) {
    return buffer.substr(0, dot);
  }
  return buffer;
}

// A loop of a Func's stage: "f.s0.x.x" -> func "f", stage "s0", var "x.x".
struct LoopName {
  std::string func, stage, var;
  static bool Parse(const std::string& name, LoopName* out) {
    for (size_t pos = name.find(".s"); pos != std::string::npos; pos = name.find(".s", pos + 1)) {
      size_t end = pos + 2;
      while (end < name.size() && std::isdigit(static_cast<unsigned char>(name[end]))) ++end;
      if (end == pos + 2 || end >= name.size() || name[end] != '.') continue;
      out->func = name.substr(0, pos);
      out->stage = name.substr(pos + 1, end - pos - 1);
      out->var = name.substr(end + 1);
      return true;
    }
    return false;
  }
  // Reduction variables are named "<rdom>$x" (and their splits keep the "$").
  bool pure() const { return var.find('$') == std::string::npos; }
};

class Checker : public IRVisitor {
 public:
  Checker(const std::map<std::string, int64_t>& sizes, const std::map<std::string, int64_t>& known)
      : sizes_(sizes), known_(known) {}
  std::string problem;

  // A parallel loop's body is outlined into a function of its own, whose argument is
  // the loop variable: such an argument encloses the whole body like a For.
  // `range` (min, extent), when known, is the loop's: its halide_do_par_for call's.
  void EnterFunctionArgument(const std::string& name,
                             const std::pair<int64_t, int64_t>* range = nullptr) {
    Loop loop{name, {}};
    if (LoopName::Parse(name, &loop.parsed)) loops_.push_back(loop);
    loop_names_.insert(name);
    if (range != nullptr) {
      // Loop variables are int32.
      scope_.push(name, Halide::Internal::Interval(
                            Expr(static_cast<int32_t>(range->first)),
                            Expr(static_cast<int32_t>(range->first + range->second - 1))));
    }
  }

 private:
  using IRVisitor::visit;

  struct Loop {
    std::string name;
    LoopName parsed;
  };

  // The loop variables (names) an expression depends on, through lets.
  std::set<std::string> DepsOf(const Expr& e) {
    std::set<std::string> deps;
    const std::set<std::string> names = VariableNames(e);
    for (const std::string& v : names) {
      if (loop_names_.count(v)) deps.insert(v);
      auto it = let_deps_.find(v);
      if (it != let_deps_.end()) deps.insert(it->second.begin(), it->second.end());
    }
    return deps;
  }

  // Whether `e` reads a predicated (masked) load, directly or through a let.
  bool ReadsMaskedLoad(const Expr& e) {
    class Finder : public IRGraphVisitor {
     public:
      explicit Finder(const std::set<std::string>& masked) : masked_(masked) {}
      bool found = false;

     private:
      using IRGraphVisitor::visit;
      void visit(const Load* op) override {
        if (!is_const_one(op->predicate)) found = true;
        IRGraphVisitor::visit(op);
      }
      void visit(const Variable* op) override {
        if (masked_.count(op->name)) found = true;
      }
      const std::set<std::string>& masked_;
    } finder(masked_lets_);
    e.accept(&finder);
    return finder.found;
  }

  void NoteLet(const std::string& name, const Expr& value) {
    let_deps_[name] = DepsOf(value);
    // A buffer's min or extent that the cluster fixes is that constant, not the
    // _halide_buffer_get_* call the let reads it with.
    auto known = known_.find(name);
    let_values_[name] = known == known_.end() ? value : Expr(static_cast<int32_t>(known->second));
    if (ReadsMaskedLoad(value)) masked_lets_.insert(name);
  }

  // A masked load leaves its inactive lanes undefined, and LLVM treats an integer
  // division by an undefined lane as undefined behaviour for the whole vector: Halide's
  // own `b == 0` guard cannot help, since each use of an undefined value may differ.
  // Adams2019 vectorized a GuardWithIf split over 2 elements and every lane came out 0
  // (braze-fuzz seed 23864).
  void CheckDivisor(const Expr& divisor, const char* op_name) {
    if (!problem.empty() || !divisor.type().is_vector() || divisor.type().is_float()) return;
    if (!ReadsMaskedLoad(divisor)) return;
    std::ostringstream s;
    s << "Halide 14 miscompiled the schedule: a vectorized integer " << op_name
      << " divides by lanes of a masked load (" << divisor << "), which are undefined";
    problem = s.str();
  }

  void visit(const Div* op) override {
    IRVisitor::visit(op);
    CheckDivisor(op->b, "division");
  }

  void visit(const Mod* op) override {
    IRVisitor::visit(op);
    CheckDivisor(op->b, "modulo");
  }

  void visit(const LetStmt* op) override {
    op->value.accept(this);
    NoteLet(op->name, op->value);
    op->body.accept(this);
    let_values_.erase(op->name);
  }

  void visit(const Let* op) override {
    op->value.accept(this);
    NoteLet(op->name, op->value);
    op->body.accept(this);
    let_values_.erase(op->name);
  }

  void visit(const For* op) override {
    op->min.accept(this);
    op->extent.accept(this);
    Loop loop{op->name, {}};
    const bool named = LoopName::Parse(op->name, &loop.parsed);
    const bool trivial = is_const_one(op->extent);
    if (named && !trivial) loops_.push_back(loop);
    loop_names_.insert(op->name);
    scope_.push(
        op->name,
        Halide::Internal::Interval(
            Halide::Internal::bounds_of_expr_in_scope(op->min, scope_).min,
            Halide::Internal::bounds_of_expr_in_scope(op->min + op->extent - 1, scope_).max));
    symbolic_loops_.push_back(
        {op->name, Halide::Internal::Interval(WithLetsSubstituted(op->min),
                                              WithLetsSubstituted(op->min + op->extent - 1))});
    op->body.accept(this);
    symbolic_loops_.pop_back();
    scope_.pop(op->name);
    loop_names_.erase(op->name);
    if (named && !trivial) loops_.pop_back();
  }

  // Inside a branch on a loop variable the variable may be pinned (loop partitioning
  // of an outlined parallel loop gives `if (v < 1) {first} else {tail}`, and the tail's
  // store is then at a constant place): stores there are not checked against it.
  // The branch also narrows the loop variables' ranges for the bounds check: an
  // outlined parallel loop's last chunk is its `else`.
  void visit(const IfThenElse* op) override {
    op->condition.accept(this);
    const std::set<std::string> deps = DepsOf(op->condition);
    for (const std::string& v : deps) ++pinned_[v];
    const Expr condition = WithLetsSubstituted(op->condition);
    Narrowed then_scope(this, deps, condition);
    op->then_case.accept(this);
    then_scope.Release();
    if (op->else_case.defined()) {
      Narrowed else_scope(this, deps, !condition);
      op->else_case.accept(this);
    }
    for (const std::string& v : deps) --pinned_[v];
  }

  // Within its lifetime, the range of each of `vars` that has one is intersected with
  // where `condition` can hold.
  class Narrowed {
   public:
    Narrowed(Checker* checker, const std::set<std::string>& vars, const Expr& condition)
        : checker_(checker) {
      for (const std::string& v : vars) {
        if (!checker_->scope_.contains(v)) continue;
        const Halide::Internal::Interval where =
            Halide::Internal::solve_for_outer_interval(condition, v);
        checker_->scope_.push(
            v, Halide::Internal::Interval::make_intersection(checker_->scope_.get(v), where));
        pushed_.push_back(v);
      }
    }
    ~Narrowed() { Release(); }
    void Release() {
      for (const std::string& v : pushed_) checker_->scope_.pop(v);
      pushed_.clear();
    }

   private:
    Checker* checker_;
    std::vector<std::string> pushed_;
  };

  Expr WithLetsSubstituted(Expr e) const {
    for (int round = 0; round < 16; ++round) {
      Expr next = Halide::Internal::substitute(let_values_, e);
      if (next.same_as(e)) break;
      e = next;
    }
    return Halide::Internal::simplify(e);
  }

  void visit(const Store* op) override {
    IRVisitor::visit(op);
    if (!problem.empty()) return;
    CheckInBounds(op);
    if (!problem.empty()) return;
    const std::string func = FuncOfBuffer(op->name);
    std::set<std::string> deps = DepsOf(op->index);
    const std::set<std::string> pred = DepsOf(op->predicate);
    deps.insert(pred.begin(), pred.end());
    for (const Loop& loop : loops_) {
      if (loop.parsed.func != func || !loop.parsed.pure() || pinned_[loop.name] > 0) continue;
      if (!deps.count(loop.name)) {
        std::ostringstream s;
        s << "Halide 14 miscompiled the schedule of " << func << ": its store to " << op->name
          << "[" << op->index << "] does not move with loop " << loop.name;
        problem = s.str();
        return;
      }
    }
  }

  // Bounds each loop's variable by its own min and extent, innermost first, before the
  // outer ones: an inner loop whose extent depends on an outer variable (Halide's loop
  // partitioning writes `for (v, 0, 3 - u)`) then keeps that dependence, which the
  // constant ranges in `scope_` lose. A store there was flagged at index 35 of 32 when it
  // reached 31 (braze-fuzz seed 86930). Both bounds are sound, so a store is judged out
  // of bounds only when this one says so too.
  bool WithinByDependentLoops(const Expr& index, int64_t size) const {
    Halide::Internal::Interval bound(index, index);
    for (auto it = symbolic_loops_.rbegin(); it != symbolic_loops_.rend(); ++it) {
      Halide::Internal::Scope<Halide::Internal::Interval> one;
      one.push(it->first, it->second);
      const Halide::Internal::Interval lo =
          Halide::Internal::bounds_of_expr_in_scope(bound.min, one);
      const Halide::Internal::Interval hi =
          Halide::Internal::bounds_of_expr_in_scope(bound.max, one);
      if (!lo.has_lower_bound() || !hi.has_upper_bound()) return false;
      bound = Halide::Internal::Interval(Halide::Internal::simplify(lo.min),
                                         Halide::Internal::simplify(hi.max));
    }
    // What remains (outlined parallel loops, narrowed branches) from the constant ranges.
    const Halide::Internal::Interval lo =
        Halide::Internal::bounds_of_expr_in_scope(bound.min, scope_);
    const Halide::Internal::Interval hi =
        Halide::Internal::bounds_of_expr_in_scope(bound.max, scope_);
    if (!lo.has_lower_bound() || !hi.has_upper_bound()) return false;
    const Expr min = Halide::Internal::simplify(lo.min), max = Halide::Internal::simplify(hi.max);
    const int64_t* l = as_const_int(min);
    const int64_t* h = as_const_int(max);
    return l != nullptr && h != nullptr && *l >= 0 && *h < size;
  }

  // A store to an output or to an allocation of constant size whose index the enclosing
  // loops bound to constants must stay inside it: a guarded split that lost its guard
  // wrote past the end of an output, and, in an outlined parallel loop, past the end of
  // an internal accumulator (Mullapudi2016, braze-fuzz seed 3957). An index that does
  // not bound to constants (offset by a loop-dependent min, say) is not judged.
  void CheckInBounds(const Store* op) {
    auto size = sizes_.find(op->name);
    if (size == sizes_.end() || !is_const_one(op->predicate)) return;
    // Lets substituted and simplified first, so that terms which cancel do cancel.
    const Expr index = WithLetsSubstituted(op->index);
    // Only affine indices: over min, max or select (a shifted-inwards tail, say) the
    // interval is loose, and a correct store was flagged (braze-fuzz seed 12266); so it
    // is over a floor division or modulo of anything but a loop variable (plus a
    // constant): loop partitioning's ((y * -3) / 2) * 2 + y * 3 "reached" 8 of 6
    // elements for values 0 and -1 (braze-fuzz seed 900918). A fused loop's v / e and
    // v % e stay judged: their intervals are exact.
    class Nonlinear : public IRGraphVisitor {
     public:
      bool found = false;

     private:
      using IRGraphVisitor::visit;
      static bool PlainVariable(const Expr& e) {
        if (const auto* add = e.as<Add>()) {
          return (add->a.as<Variable>() && is_const(add->b)) ||
                 (add->b.as<Variable>() && is_const(add->a));
        }
        return e.as<Variable>() != nullptr;
      }
      void visit(const Div* op) override {
        if (!PlainVariable(op->a) || !is_const(op->b)) found = true;
        IRGraphVisitor::visit(op);
      }
      void visit(const Mod* op) override {
        if (!PlainVariable(op->a) || !is_const(op->b)) found = true;
        IRGraphVisitor::visit(op);
      }
      void visit(const Min*) override { found = true; }
      void visit(const Max*) override { found = true; }
      void visit(const Select*) override { found = true; }
      void visit(const Load*) override { found = true; }
      void visit(const Call*) override { found = true; }
    } nonlinear;
    index.accept(&nonlinear);
    if (nonlinear.found) return;
    const Halide::Internal::Interval i = Halide::Internal::bounds_of_expr_in_scope(index, scope_);
    // The simplified bounds are held here: as_const_int points into its argument.
    const Expr min = i.has_lower_bound() ? Halide::Internal::simplify(i.min) : Expr();
    const Expr max = i.has_upper_bound() ? Halide::Internal::simplify(i.max) : Expr();
    const int64_t* lo = min.defined() ? as_const_int(min) : nullptr;
    const int64_t* hi = max.defined() ? as_const_int(max) : nullptr;
    if (((lo != nullptr && *lo < 0) || (hi != nullptr && *hi >= size->second)) &&
        !WithinByDependentLoops(index, size->second)) {
      std::ostringstream s;
      s << "Halide 14 miscompiled the schedule: a store to " << op->name << " reaches index "
        << (lo != nullptr && *lo < 0 ? *lo : *hi) << " of " << size->second << " elements";
      problem = s.str();
    }
  }

  void visit(const AssertStmt* op) override {
    if (problem.empty() && is_const_zero(WithLetsSubstituted(op->condition))) {
      std::ostringstream s;
      s << "the schedule can never run at these shapes: " << op->message;
      problem = s.str();
    }
    IRVisitor::visit(op);
  }

  std::vector<Loop> loops_;
  std::set<std::string> loop_names_;
  std::map<std::string, std::set<std::string>> let_deps_;
  std::map<std::string, int> pinned_;       // loop var -> enclosing branches on it
  std::map<std::string, int64_t> sizes_;    // buffer -> elements (outputs, allocations)
  std::map<std::string, int64_t> known_;    // "in0.extent.1" -> 61: fixed buffer shapes
  std::map<std::string, Expr> let_values_;  // the lets around the current node
  std::set<std::string> masked_lets_;       // lets whose value reads a masked load
  Halide::Internal::Scope<Halide::Internal::Interval> scope_;
  // The enclosing For loops' own ranges, outermost first, in terms of outer variables.
  std::vector<std::pair<std::string, Halide::Internal::Interval>> symbolic_loops_;
};

// What the whole module tells each function's checker: the elements of every
// allocation of constant size, and the range of each outlined parallel loop (from its
// halide_do_par_for call in the caller).
class ModuleFacts : public IRGraphVisitor {
 public:
  std::map<std::string, int64_t> allocations;
  std::map<std::string, std::pair<int64_t, int64_t>> par_for_ranges;  // function -> min, extent

 private:
  using IRGraphVisitor::visit;
  std::set<std::string> conflicting_;

  void visit(const Allocate* op) override {
    int64_t elements = 1;
    bool constant = true;
    for (const Expr& e : op->extents) {
      const int64_t* c = as_const_int(e);
      constant = constant && c != nullptr;
      if (c != nullptr) elements *= *c;
    }
    // A name allocated twice with different sizes is not judged.
    auto [it, fresh] = allocations.emplace(op->name, elements);
    if (!constant || (!fresh && it->second != elements) || conflicting_.count(op->name)) {
      conflicting_.insert(op->name);
      allocations.erase(op->name);
    }
    IRGraphVisitor::visit(op);
  }

  void visit(const Call* op) override {
    IRGraphVisitor::visit(op);
    if (op->name != "halide_do_par_for" || op->args.size() < 3) return;
    Expr fn = op->args[0];
    while (const auto* wrap = fn.as<Call>()) {
      if (wrap->args.size() != 1) break;
      fn = wrap->args[0];
    }
    while (const auto* cast = fn.as<Cast>()) fn = cast->value;
    const auto* var = fn.as<Variable>();
    const int64_t* min = as_const_int(op->args[1]);
    const int64_t* extent = as_const_int(op->args[2]);
    if (var == nullptr || min == nullptr || extent == nullptr) return;
    std::string name = var->name;
    if (name.rfind("::", 0) == 0) name = name.substr(2);
    par_for_ranges[name] = {*min, *extent};
  }
};

// Whether Halide outlines `op`'s body into a function of its own when it lowers parallel
// tasks (after the custom lowering passes): a parallel loop, and a serial one whose body
// is an Acquire (Halide 14's LowerParallelTasks.cpp). So are an Acquire and a Fork.
bool OutlinedByHalide(const For* op) {
  return op->for_type == ForType::Parallel || op->body.as<Acquire>() != nullptr;
}

// Whether a statement holds any vector value: LLVM's loop vectorizer leaves a loop with
// one alone ("unvectorizable type"), so only loops without are candidates. Code that Halide
// outlines (a parallel loop's body, say) is another function's, not the loop's.
bool HasVectors(const Stmt& s) {
  class Finder : public IRGraphVisitor {
   public:
    bool found = false;

   private:
    using IRGraphVisitor::visit;
    void visit(const For* op) override {
      if (!OutlinedByHalide(op)) IRGraphVisitor::visit(op);
    }
    void visit(const Acquire*) override {}
    void visit(const Fork*) override {}
    using IRGraphVisitor::include;
    void include(const Expr& e) override {
      if (found) return;
      if (e.type().is_vector()) {
        found = true;
        return;
      }
      IRGraphVisitor::include(e);
    }
  } finder;
  s.accept(&finder);
  return finder.found;
}

// FindStridedReadModifyWriteLoop's search: for each serial loop without vector code,
// the buffers stored and loaded in it at an index strided in its variable.
class StridedRmwFinder : public IRVisitor {
 public:
  std::string found;

 private:
  using IRVisitor::visit;

  struct Loop {
    std::string name;
    bool scalar = false;
    std::map<std::string, std::string> stored;  // buffer -> its stride, as text
    std::set<std::string> loaded;
  };

  void visit(const For* op) override {
    op->min.accept(this);
    op->extent.accept(this);
    if (OutlinedByHalide(op)) {
      // A serial loop around an Acquire becomes a task whose closure runs it as a loop
      // again: the body starts in that loop alone. A parallel loop's closure is given one
      // iteration: its body starts in no loop.
      if (op->for_type == ForType::Parallel) return Outlined(op->body);
      return Outlined(op->body, Loop{op->name, !HasVectors(op->body), {}, {}});
    }
    if (op->for_type != ForType::Serial || !found.empty()) {
      op->body.accept(this);
      return;
    }
    loops_.push_back({op->name, !HasVectors(op->body), {}, {}});
    op->body.accept(this);
    const Loop loop = loops_.back();
    loops_.pop_back();
    Report(loop);
  }

  void visit(const Acquire* op) override {
    op->semaphore.accept(this);
    op->count.accept(this);
    Outlined(op->body);
  }

  void visit(const Fork* op) override {
    Outlined(op->first);
    Outlined(op->rest);
  }

  // Code Halide outlines into a function of its own is no part of the loops around it:
  // LLVM sees a call there (the module's form this search was written for, where it ran
  // on each function, as it still can).
  void Outlined(const Stmt& body, std::optional<Loop> own = std::nullopt) {
    std::vector<Loop> enclosing;
    enclosing.swap(loops_);
    if (own) loops_.push_back(*own);
    body.accept(this);
    if (own) Report(loops_.back());
    loops_.swap(enclosing);
  }

  // Names the first buffer `loop` stored and loaded strided, if any.
  void Report(const Loop& loop) {
    for (const auto& [buffer, stride] : loop.stored) {
      if (found.empty() && loop.loaded.count(buffer)) {
        found =
            "a read-modify-write of " + buffer + " with stride " + stride + " in loop " + loop.name;
      }
    }
  }

  void visit(const Store* op) override {
    IRVisitor::visit(op);
    Note(op->name, op->index, true);
  }

  void visit(const Load* op) override {
    IRVisitor::visit(op);
    Note(op->name, op->index, false);
  }

  void visit(const LetStmt* op) override {
    op->value.accept(this);
    lets_[op->name] = {op->value, DepsOf(op->value)};
    op->body.accept(this);
    lets_.erase(op->name);
  }

  void visit(const Let* op) override {
    op->value.accept(this);
    lets_[op->name] = {op->value, DepsOf(op->value)};
    op->body.accept(this);
    lets_.erase(op->name);
  }

  // The enclosing loops' variables `e` depends on, through lets.
  std::set<std::string> DepsOf(const Expr& e) const {
    const std::set<std::string> names = VariableNames(e);
    std::set<std::string> deps;
    for (const std::string& v : names) {
      auto let = lets_.find(v);
      if (let != lets_.end()) deps.insert(let->second.deps.begin(), let->second.deps.end());
      for (const Loop& loop : loops_) {
        if (loop.name == v) deps.insert(v);
      }
    }
    return deps;
  }

  // Records an access of `buffer` at `index` in each scalar loop it is strided in.
  void Note(const std::string& buffer, const Expr& index, bool store) {
    if (!found.empty() || index.type().is_vector()) return;
    const std::set<std::string> deps = DepsOf(index);
    for (Loop& loop : loops_) {
      if (!loop.scalar || !deps.count(loop.name)) continue;
      const std::string stride = StrideIn(index, loop.name);
      if (stride == "1" || stride == "-1" || stride == "0") continue;
      if (store) {
        loop.stored.emplace(buffer, stride);
      } else {
        loop.loaded.insert(buffer);
      }
    }
  }

  // How far `index` moves when loop variable `v` steps by 1: a constant, or the
  // expression when it is none (which LLVM cannot group: treated as strided anyway).
  std::string StrideIn(Expr index, const std::string& v) const {
    for (int round = 0; round < 16; ++round) {
      std::map<std::string, Expr> moving;  // only the lets that depend on v
      const std::set<std::string> names = VariableNames(index);
      for (const std::string& name : names) {
        auto let = lets_.find(name);
        if (let != lets_.end() && let->second.deps.count(v)) moving[name] = let->second.value;
      }
      if (moving.empty()) break;
      index = substitute(moving, index);
    }
    const Expr var = Variable::make(index.type(), v);
    const Expr step = simplify(substitute(v, var + 1, index) - index);
    std::ostringstream s;
    s << step;
    return s.str();
  }

  struct LetValue {
    Expr value;
    std::set<std::string> deps;
  };
  std::vector<Loop> loops_;
  std::map<std::string, LetValue> lets_;
};

}  // namespace

std::string FindStridedReadModifyWriteLoop(const Halide::Module& module) {
  for (const Halide::Internal::LoweredFunc& f : module.functions()) {
    StridedRmwFinder finder;
    f.body.accept(&finder);
    if (!finder.found.empty()) return finder.found;
  }
  return "";
}

std::string CheckPtxBitFieldExtracts(const std::string& ptx) {
  // bfe.{u,s}{32,64} %d, %a, <pos>, <len>; only immediate fields can be judged.
  // The regex runs on the lines that hold a bfe only: a module is thousands of lines.
  static const std::regex bfe(R"(bfe\.[us](32|64)\s+%\w+,\s*%\w+,\s*(\d+),\s*(\d+);)");
  for (size_t at = ptx.find("bfe."); at != std::string::npos; at = ptx.find("bfe.", at + 1)) {
    const size_t end = ptx.find('\n', at);
    const std::string line = ptx.substr(at, end == std::string::npos ? end : end - at);
    std::smatch m;
    if (!std::regex_search(line, m, bfe)) continue;
    const int width = std::stoi(m[1].str());
    const int64_t pos = std::stoll(m[2].str()), len = std::stoll(m[3].str());
    if (pos + len > width) {
      return "PTX bit-field extract past its operand (LLVM 14 NVPTX miscompile of a "
             "shift-and-mask): " +
             m.str();
    }
  }
  return "";
}

std::string CheckLoweredModule(const Halide::Module& module,
                               const std::map<std::string, int64_t>& output_sizes,
                               const std::map<std::string, int64_t>& known_values) {
  for (const Halide::Buffer<>& b : module.buffers()) {
    if (b.name().find("gpu_source_kernels") == std::string::npos) continue;
    if (!module.target().has_feature(Halide::Target::CUDA)) continue;
    const char* bytes = static_cast<const char*>(b.data());
    const std::string problem =
        CheckPtxBitFieldExtracts(std::string(bytes, bytes + b.size_in_bytes()));
    if (!problem.empty()) return problem;
  }
  // A buffer embedded in the module (a Const's data, lower_layout.cc) has a fixed shape
  // too, and Halide checks its bounds at run time like an input's: Adams2019's loops,
  // bounded by lets Halide 14's bounds inference did not cancel, required element 184 of
  // a constant of 160 at every run (braze-fuzz seed 700061).
  std::map<std::string, int64_t> known = known_values;
  for (const Halide::Buffer<>& b : module.buffers()) {
    for (int d = 0; d < b.dimensions(); ++d) {
      const std::string prefix = b.name() + ".";
      known.emplace(prefix + "min." + std::to_string(d), b.dim(d).min());
      known.emplace(prefix + "extent." + std::to_string(d), b.dim(d).extent());
    }
  }
  const std::string launch = CheckGpuLaunchLimits(module, known);
  if (!launch.empty()) return launch;
  ModuleFacts facts;
  for (const Halide::Internal::LoweredFunc& f : module.functions()) f.body.accept(&facts);
  std::map<std::string, int64_t> sizes = facts.allocations;
  for (const auto& [name, elements] : output_sizes) sizes[name] = elements;
  for (const Halide::Internal::LoweredFunc& f : module.functions()) {
    Checker checker(sizes, known);
    auto range = facts.par_for_ranges.find(f.name);
    for (const Halide::Internal::LoweredArgument& arg : f.args) {
      LoopName parsed;
      const bool loop = range != facts.par_for_ranges.end() && LoopName::Parse(arg.name, &parsed);
      checker.EnterFunctionArgument(arg.name, loop ? &range->second : nullptr);
    }
    f.body.accept(&checker);
    if (!checker.problem.empty()) return checker.problem;
  }
  return "";
}

}  // namespace schedule
}  // namespace braze
