// GPU launch limits; see gpu_launch_check.h.
#include "schedule/gpu_launch_check.h"

#include <sstream>
#include <utility>

namespace braze {
namespace schedule {
namespace {

using namespace Halide::Internal;  // IR node types, in this file only
using Halide::Expr;

// A launch's counts: a constant, or -1 and a constant upper bound (or -1).
struct Count {
  int64_t value = -1, bound = -1;
};

class LaunchFinder : public IRVisitor {
 public:
  explicit LaunchFinder(const std::map<std::string, int64_t>& known) {
    for (const auto& [name, value] : known) {
      known_[name] = Halide::Internal::make_const(Halide::Int(32), value);
    }
  }
  std::vector<GpuLaunch> launches;

 private:
  using IRVisitor::visit;

  void visit(const LetStmt* op) override {
    op->value.accept(this);
    lets_.emplace_back(op->name, op->value);
    op->body.accept(this);
    lets_.pop_back();
  }

  // halide_<api>_run(state, "kernel", bx, by, bz, tx, ty, tz, shared, sizes, args, ...).
  void visit(const Call* op) override {
    IRVisitor::visit(op);
    const std::string& n = op->name;
    const std::string prefix = "halide_", suffix = "_run";
    if (n.size() <= prefix.size() + suffix.size() || n.compare(0, prefix.size(), prefix) != 0 ||
        n.compare(n.size() - suffix.size(), suffix.size(), suffix) != 0) {
      return;
    }
    size_t k = 0;
    while (k < op->args.size() && op->args[k].as<StringImm>() == nullptr) ++k;
    if (k + 7 >= op->args.size()) return;
    GpuLaunch launch;
    launch.api = n.substr(prefix.size(), n.size() - prefix.size() - suffix.size());
    launch.kernel = op->args[k].as<StringImm>()->value;
    const Count threads = Evaluate(op->args[k + 4] * op->args[k + 5] * op->args[k + 6]);
    const Count shared = Evaluate(op->args[k + 7]);
    launch.threads = threads.value;
    launch.threads_bound = threads.bound;
    launch.shared_bytes = shared.value;
    launch.shared_bound = shared.bound;
    launches.push_back(launch);
  }

  // `e` with the enclosing lets and the known buffer fields substituted, simplified.
  Count Evaluate(Expr e) const {
    // Innermost let first: a let's value may read the lets outside it.
    for (auto it = lets_.rbegin(); it != lets_.rend(); ++it) {
      auto known = known_.find(it->first);
      e = substitute(it->first, known != known_.end() ? known->second : it->second, e);
    }
    e = simplify(substitute(known_, e));
    Count c;
    if (const int64_t* v = as_const_int(e)) {
      c.value = *v;
      return c;
    }
    const Expr bound = simplify(find_constant_bound(e, Direction::Upper));
    if (const int64_t* b = bound.defined() ? as_const_int(bound) : nullptr) c.bound = *b;
    return c;
  }

  std::map<std::string, Expr> known_;
  std::vector<std::pair<std::string, Expr>> lets_;
};

// The value a check judges: the constant, else its bound (-1: unknown).
int64_t Judged(int64_t value, int64_t bound) { return value >= 0 ? value : bound; }

}  // namespace

std::vector<GpuLaunch> GpuLaunches(const Halide::Module& module,
                                   const std::map<std::string, int64_t>& known_values) {
  LaunchFinder finder(known_values);
  for (const LoweredFunc& f : module.functions()) f.body.accept(&finder);
  return finder.launches;
}

std::string CheckGpuLaunchLimits(const Halide::Module& module,
                                 const std::map<std::string, int64_t>& known_values) {
  for (const GpuLaunch& l : GpuLaunches(module, known_values)) {
    const int64_t threads = Judged(l.threads, l.threads_bound);
    const int64_t shared = Judged(l.shared_bytes, l.shared_bound);
    std::ostringstream why;
    if (threads > kMaxGpuThreadsPerBlock) {
      why << (l.threads >= 0 ? "" : "up to ") << threads << " threads per block (the most a "
          << "block may have is " << kMaxGpuThreadsPerBlock << ")";
    } else if (shared > kMaxGpuSharedBytesPerBlock) {
      why << (l.shared_bytes >= 0 ? "" : "up to ") << shared << " bytes of shared memory per "
          << "block (Halide's " << l.api << " launch gets at most " << kMaxGpuSharedBytesPerBlock
          << ")";
    } else {
      continue;
    }
    return "GPU kernel " + l.kernel + " would fail to launch: " + why.str();
  }
  return "";
}

}  // namespace schedule
}  // namespace braze
