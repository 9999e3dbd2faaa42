// GPU launch limits; see gpu_launch_check.h.
#include "schedule/gpu_launch_check.h"

#include <sstream>
#include <utility>
#include <vector>

namespace braze {
namespace schedule {
namespace {

using namespace Halide::Internal;  // IR node types, in this file only
using Halide::Expr;

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
    for (int d = 0; d < 3; ++d) {
      launch.blocks[d] = Evaluate(op->args[k + 1 + d]);
      launch.thread_dims[d] = Evaluate(op->args[k + 4 + d]);
    }
    const LaunchCount threads = Evaluate(op->args[k + 4] * op->args[k + 5] * op->args[k + 6]);
    const LaunchCount shared = Evaluate(op->args[k + 7]);
    launch.threads = threads.value;
    launch.threads_bound = threads.bound;
    launch.shared_bytes = shared.value;
    launch.shared_bound = shared.bound;
    launches.push_back(launch);
  }

  // `e` with the enclosing lets and the known buffer fields substituted, simplified.
  LaunchCount Evaluate(Expr e) const {
    // Innermost let first: a let's value may read the lets outside it.
    for (auto it = lets_.rbegin(); it != lets_.rend(); ++it) {
      auto known = known_.find(it->first);
      e = substitute(it->first, known != known_.end() ? known->second : it->second, e);
    }
    e = simplify(substitute(known_, e));
    LaunchCount c;
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

const char* const kAxis[3] = {"x", "y", "z"};

// What is wrong with `count` against `limit`, or "" (`what`: "blockDim.x", ...).
// Unbounded counts are wrong when `unbounded_ok` is false.
std::string OverLimit(const LaunchCount& count, int64_t limit, const std::string& what,
                      bool unbounded_ok) {
  std::ostringstream why;
  const int64_t judged = count.judged();
  if (judged < 0) {
    if (unbounded_ok) return "";
    why << what << " has no constant bound (a run-time extent's), and above " << limit
        << " the launch fails";
  } else if (judged > limit) {
    why << what << " is " << (count.value >= 0 ? "" : "up to ") << judged << " (at most " << limit
        << ")";
  }
  return why.str();
}

// The first limit `l` passes, or "".
std::string Problem(const GpuLaunch& l) {
  std::vector<std::string> problems;
  for (int d = 0; d < 3; ++d) {
    problems.push_back(OverLimit(l.thread_dims[d], kMaxGpuBlockDim[d],
                                 std::string("blockDim.") + kAxis[d], false));
  }
  problems.push_back(
      OverLimit({l.threads, l.threads_bound}, kMaxGpuThreadsPerBlock, "threads per block", false));
  // gridDim.x: Halide passes it as an int32, so it cannot pass 2^31 - 1 even unbounded.
  for (int d = 0; d < 3; ++d) {
    problems.push_back(
        OverLimit(l.blocks[d], kMaxGpuGridDim[d], std::string("gridDim.") + kAxis[d], d == 0));
  }
  problems.push_back(OverLimit(
      {l.shared_bytes, l.shared_bound}, kMaxGpuSharedBytesPerBlock,
      "shared memory per block (bytes; Halide's " + l.api + " launch gets no more)", false));
  for (const std::string& p : problems) {
    if (!p.empty()) return p;
  }
  return "";
}

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
    const std::string problem = Problem(l);
    if (problem.empty()) continue;
    const bool unbounded = problem.find("no constant bound") != std::string::npos;
    return "GPU kernel " + l.kernel + " would fail to launch" +
           (unbounded ? " at some run-time extents" : "") + ": " + problem;
  }
  return "";
}

namespace {
std::string Show(const LaunchCount& c) {
  if (c.value >= 0) return std::to_string(c.value);
  return c.bound >= 0 ? "<=" + std::to_string(c.bound) : "?";
}
}  // namespace

std::string DescribeGpuLaunches(const Halide::Module& module) {
  std::ostringstream out;
  for (const GpuLaunch& l : GpuLaunches(module)) {
    out << "kernel " << l.kernel << ": grid " << Show(l.blocks[0]) << " x " << Show(l.blocks[1])
        << " x " << Show(l.blocks[2]) << " blocks of " << Show(l.thread_dims[0]) << " x "
        << Show(l.thread_dims[1]) << " x " << Show(l.thread_dims[2]) << " threads, "
        << Show({l.shared_bytes, l.shared_bound}) << " bytes of shared memory\n";
  }
  return out.str();
}

int64_t RegistersPerBlock(int64_t registers_per_thread, int64_t threads) {
  constexpr int64_t kWarp = 32, kUnit = 256;
  const int64_t per_warp = (registers_per_thread * kWarp + kUnit - 1) / kUnit * kUnit;
  return per_warp * ((threads + kWarp - 1) / kWarp);
}

}  // namespace schedule
}  // namespace braze
