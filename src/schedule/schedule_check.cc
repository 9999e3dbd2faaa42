// Repair of schedules Halide 14 miscompiles; see schedule_check.h.
#include "schedule/schedule_check.h"

#include <map>
#include <set>
#include <string>

namespace braze {
namespace schedule {
namespace {

using Halide::Internal::Call;
using Halide::Internal::Function;

// Finds the constructs that trigger the miscompile, looking through calls to Funcs that
// are inlined into the expression.
class TriggerFinder : public Halide::Internal::IRGraphVisitor {
 public:
  bool found = false;

 private:
  using IRGraphVisitor::visit;

  void visit(const Halide::Internal::Select* op) override { Found(op); }
  void visit(const Halide::Internal::EQ* op) override { Found(op); }
  void visit(const Halide::Internal::NE* op) override { Found(op); }
  void visit(const Halide::Internal::LT* op) override { Found(op); }
  void visit(const Halide::Internal::LE* op) override { Found(op); }
  void visit(const Halide::Internal::GT* op) override { Found(op); }
  void visit(const Halide::Internal::GE* op) override { Found(op); }
  void visit(const Halide::Internal::And* op) override { Found(op); }
  void visit(const Halide::Internal::Or* op) override { Found(op); }
  void visit(const Halide::Internal::Not* op) override { Found(op); }

  template <typename T>
  void Found(const T* op) {
    found = true;
    IRGraphVisitor::visit(op);
  }

  void visit(const Call* op) override {
    // Bit tests count too: Braze's sums read NaN and infinities from the bits (and,
    // or, not, shifts) since 2026-11-28, and Li2018's vectorized guarded update of one
    // wrote only its first vector (braze-fuzz seed 12511906, Miscompile.
    // MinOverInnerAxesThenMeanLi2018: |mean| + 0.5 read as 3.86, not 2.49).
    if (op->is_intrinsic(Call::if_then_else) || op->is_intrinsic(Call::bitwise_and) ||
        op->is_intrinsic(Call::bitwise_or) || op->is_intrinsic(Call::bitwise_xor) ||
        op->is_intrinsic(Call::bitwise_not) || op->is_intrinsic(Call::shift_left) ||
        op->is_intrinsic(Call::shift_right) || op->name.rfind("is_nan_f", 0) == 0 ||
        op->name.rfind("is_inf_f", 0) == 0 || op->name.rfind("is_finite_f", 0) == 0) {
      found = true;
    }
    if (op->call_type == Call::Halide && op->func.defined()) {
      Function callee(op->func);
      Halide::LoopLevel level = callee.schedule().compute_level();
      level.lock();
      if (level.is_inlined() && !callee.has_update_definition() &&
          inlined_.insert(callee.name()).second) {
        for (const Halide::Expr& e : callee.values()) e.accept(this);
      }
    }
    IRGraphVisitor::visit(op);
  }

  std::set<std::string> inlined_;
};

std::map<std::string, Function> FuncsOf(const std::vector<Halide::Func>& outputs) {
  std::map<std::string, Function> env;
  for (const Halide::Func& out : outputs) {
    for (const auto& [name, f] : Halide::Internal::find_transitive_calls(out.function())) {
      env.emplace(name, f);
    }
  }
  return env;
}

}  // namespace

std::vector<std::string> DevectorizeGuardedUpdates(const std::vector<Halide::Func>& outputs) {
  using Halide::Internal::ForType;
  std::map<std::string, Function> env = FuncsOf(outputs);
  std::vector<std::string> changed;
  for (auto& [name, f] : env) {
    for (size_t i = 0; i < f.updates().size(); ++i) {
      Halide::Internal::Definition& def = f.update(static_cast<int>(i));
      Halide::Internal::StageSchedule& schedule = def.schedule();
      bool guarded = false;
      for (const auto& split : schedule.splits()) {
        guarded |= split.is_split() && split.tail == Halide::TailStrategy::GuardWithIf;
      }
      bool vectorized = false;
      for (const auto& dim : schedule.dims()) vectorized |= dim.for_type == ForType::Vectorized;
      if (!guarded || !vectorized) continue;
      TriggerFinder finder;
      for (const Halide::Expr& e : def.values()) e.accept(&finder);
      for (const Halide::Expr& e : def.args()) e.accept(&finder);
      if (!finder.found) continue;
      for (auto& dim : schedule.dims()) {
        if (dim.for_type == ForType::Vectorized) dim.for_type = ForType::Serial;
      }
      changed.push_back(name + ".update(" + std::to_string(i) + ")");
    }
  }
  return changed;
}

std::vector<std::string> StoreAtComputeLevels(const std::vector<Halide::Func>& outputs) {
  std::vector<std::string> changed;
  for (auto& [name, f] : FuncsOf(outputs)) {
    Halide::Internal::FuncSchedule& schedule = f.schedule();
    const std::string store = schedule.store_level().lock().to_string();
    const std::string compute = schedule.compute_level().lock().to_string();
    // An unset storage level (printed ".") means "with the compute level": not a change.
    if (store != compute && !schedule.store_level().is_inlined()) {
      changed.push_back(name + " (" + store + " -> " + compute + ")");
    }
    schedule.store_level() = schedule.compute_level();
  }
  return changed;
}

}  // namespace schedule
}  // namespace braze
