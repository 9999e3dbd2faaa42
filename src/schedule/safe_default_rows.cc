// The safe default schedule of row pipelines (softmax, layernorm): the pipeline's
// accumulators computed per output row, next to the output, their updates vectorized by
// rfactor, and values several readers of a row compute stored once per row. Before it
// schedules, it proves the pipeline is one (every read of an accumulator at the reader's
// own row), with the IR walkers at the top of this file. safe_scheduler.h maps the
// other files of the safe default; safe_default.h has the rules and why.
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "braze/dtype.h"
#include "schedule/safe_scheduler.h"

namespace braze {
namespace schedule {
namespace safe_default_internal {

using Halide::Func;
using Halide::Var;
using Halide::VarOrRVar;

namespace {

// Row pipelines (RowPipeline) need rows at least this long.
constexpr int64_t kMinRow = 8;

// Every call to a Func in `accs` made by `value` (a definition of the Func `caller`),
// looking through inlined pure Funcs by substituting their arguments. Returns false
// when a call's dims that index rows (acc dims >= `first_row_dim`) are not exactly the
// caller's own row vars (caller dim d + `shift`), or when the expansion grows too big.
class RowCallChecker : public Halide::Internal::IRGraphMutator {
 public:
  // Calls to Funcs in `skip` (other accumulators) are neither checked nor refused.
  RowCallChecker(const std::set<std::string>& accs, std::vector<std::string> caller_vars,
                 int first_row_dim, int shift, const std::set<std::string>& skip = {})
      : accs_(accs),
        skip_(skip),
        caller_vars_(std::move(caller_vars)),
        first_(first_row_dim),
        shift_(shift) {}
  bool ok = true;
  bool seen = false;  // some call to a Func in `accs` was checked

 private:
  using IRGraphMutator::visit;
  using Call = Halide::Internal::Call;

  Halide::Expr visit(const Call* op) override {
    if (!ok || ++work_ > 20000) {
      ok = false;
      return op;
    }
    std::vector<Halide::Expr> args;
    for (const Halide::Expr& a : op->args) args.push_back(mutate(a));
    if (op->call_type == Call::Halide && op->func.defined()) {
      Halide::Internal::Function f(op->func);
      if (skip_.count(f.name())) {
        return op;
      } else if (accs_.count(f.name())) {
        seen = true;
        for (size_t d = first_; d < args.size(); ++d) {
          const Halide::Expr a = Halide::Internal::simplify(args[d]);
          const auto* v = a.as<Halide::Internal::Variable>();
          const size_t cd = d + shift_;
          if (v == nullptr || cd >= caller_vars_.size() || v->name != caller_vars_[cd]) {
            ok = false;
          }
        }
      } else if (f.has_extern_definition() ||
                 op->value_index >= static_cast<int>(f.values().size())) {
        ok = false;
      } else if (!f.has_update_definition()) {
        std::map<std::string, Halide::Expr> sub;
        for (size_t i = 0; i < f.args().size() && i < args.size(); ++i) sub[f.args()[i]] = args[i];
        return mutate(Halide::Internal::substitute(sub, f.values()[op->value_index]));
      } else {
        ok = false;  // another Func with an update: not a row pipeline we know
      }
    }
    return op;
  }

  const std::set<std::string>& accs_;
  const std::set<std::string> skip_;
  std::vector<std::string> caller_vars_;
  size_t first_;
  size_t shift_;
  int work_ = 0;
};

// Counts the operations of an expression, and whether it calls a math library function.
class OperationCounter : public Halide::Internal::IRVisitor {
 public:
  bool math_call = false;
  int ops = 0;

 private:
  using IRVisitor::visit;
  void visit(const Halide::Internal::Call* op) override {
    math_call |= op->call_type == Halide::Internal::Call::PureExtern;
    const bool read = op->call_type == Halide::Internal::Call::Halide ||
                      op->call_type == Halide::Internal::Call::Image;
    ops += read ? 0 : 1;  // a reinterpret, a shift: an operation; a read is not
    IRVisitor::visit(op);
  }
  void visit(const Halide::Internal::Add* op) override { Count(op); }
  void visit(const Halide::Internal::Sub* op) override { Count(op); }
  void visit(const Halide::Internal::Mul* op) override { Count(op); }
  void visit(const Halide::Internal::Div* op) override { Count(op); }
  void visit(const Halide::Internal::Min* op) override { Count(op); }
  void visit(const Halide::Internal::Max* op) override { Count(op); }
  void visit(const Halide::Internal::Select* op) override { Count(op); }
  void visit(const Halide::Internal::Cast* op) override { Count(op); }
  template <typename T>
  void Count(const T* op) {
    ++ops;
    IRVisitor::visit(op);
  }
};

// True when a definition of `f` is worth computing once rather than once per reader:
// it calls a math library function (log, pow, ...) or is a long formula of its own, as
// Braze's f32 exp is (a polynomial and its reduction, some 40 operations:
// lower_elementwise.cc).
bool ExpensiveToRecompute(const Halide::Internal::Function& f) {
  constexpr int kLongFormula = 24;  // operations; x * scale + bias is 2
  OperationCounter counter;
  for (const Halide::Expr& v : f.values()) v.accept(&counter);
  return counter.math_call || counter.ops >= kLongFormula;
}

// The pure Funcs `reader`'s definitions read, directly or through other pure Funcs
// (which are inlined into it), not looking past Funcs with an update (the
// accumulators) or extern definitions.
void PureFuncsReadBy(const Halide::Internal::Function& reader, std::set<std::string>* seen,
                     std::map<std::string, Halide::Internal::Function>* found) {
  for (const auto& [name, callee] : Halide::Internal::find_direct_calls(reader)) {
    if (callee.has_update_definition() || callee.has_extern_definition() ||
        !seen->insert(name).second) {
      continue;
    }
    (*found)[name] = callee;
    PureFuncsReadBy(callee, seen, found);
  }
}

// The input buffers (ImageParams) `f`'s definitions read, directly or through the pure
// Funcs inlined into it (not through accumulators: PureFuncsReadBy).
std::vector<Halide::Internal::Parameter> InputParamsReadBy(const Halide::Internal::Function& f) {
  struct Finder : Halide::Internal::IRVisitor {
    std::map<std::string, Halide::Internal::Parameter> params;
    using IRVisitor::visit;
    void visit(const Halide::Internal::Call* op) override {
      if (op->call_type == Halide::Internal::Call::Image && op->param.defined()) {
        params.emplace(op->param.name(), op->param);
      }
      IRVisitor::visit(op);
    }
  } finder;
  std::set<std::string> seen;
  std::map<std::string, Halide::Internal::Function> inlined;
  PureFuncsReadBy(f, &seen, &inlined);
  for (const Halide::Expr& v : f.values()) v.accept(&finder);
  for (const auto& [name, g] : inlined) {
    for (const Halide::Expr& v : g.values()) v.accept(&finder);
  }
  std::vector<Halide::Internal::Parameter> out;
  for (const auto& [name, p] : finder.params) out.push_back(p);
  return out;
}

}  // namespace

bool SafeScheduler::RowPipeline(const PipelineInfo& info) {
  if (info.outputs.size() != 1 || info.stages.empty()) return false;
  Func out = info.outputs[0];
  const Extents& e = info.output_extents[0];
  const Symbolic& sym = OutputSymbolic(info, 0);
  const int rank = static_cast<int>(e.size());
  // Rows shorter than kMinRow stay compute_root: with a reduction of a few elements
  // computed next to its reader, LLVM's fast-math (no-NaNs) folded a 1-element row's
  // max(-inf, x) into x and lost the NaN (Softmax(Log(x)) gave 1, not NaN; the Max then kept
  // a float value beside its NaN flag).
  if (rank < 2 || NumElements(e) <= 0 || Bound(e, sym, 0) < kMinRow ||
      out.has_update_definition()) {
    return false;
  }
  int64_t rows = 1;
  for (int d = 1; d < rank; ++d) rows *= e[d];
  std::set<std::string> accs;
  int shift = -1;  // acc dim d is output dim d + shift
  // The rfactor below splits each row's RVar by a factor that divides the row: only
  // with a static row and static RDoms. (Equal estimates below are only a heuristic
  // for symbolic extents; bounds inference keeps the schedule correct regardless.)
  bool exact_rows = !IsSymbolic(sym, 0);
  for (const Stage& s : info.stages) {
    exact_rows = exact_rows && !s.reduction_symbolic;
    if (s.kind != StageKind::kReduction || !s.reduces_innermost) return false;
    if (s.rdom.dimensions() != 1 || s.reduction_extent != e[0]) return false;
    if (s.acc.num_update_definitions() != 1) return false;
    const Extents& a = s.extents;
    int sh;
    if (static_cast<int>(a.size()) == rank && a[0] == 1) {
      sh = 0;
    } else if (static_cast<int>(a.size()) == rank - 1) {
      sh = 1;
    } else {
      return false;
    }
    for (int d = 1 - sh; d < static_cast<int>(a.size()); ++d) {
      if (a[d] != e[d + sh]) return false;
    }
    if (shift != -1 && shift != sh) return false;
    shift = sh;
    accs.insert(s.acc.name());
  }
  auto names = [](const std::vector<Var>& vars) {
    std::vector<std::string> n;
    for (const Var& v : vars) n.push_back(v.name());
    return n;
  };
  // Row dims of an acc: 1.. with keep_dims (dim 0 is the reduced one, extent 1),
  // else all; acc dim d is output dim d + shift, and the same dim of another acc.
  const int first = shift == 0 ? 1 : 0;
  {
    RowCallChecker check(accs, names(out.args()), first, shift);
    for (const Halide::Expr& v : out.function().values()) check.mutate(v);
    if (!check.ok) return false;
  }
  for (const Stage& s : info.stages) {
    RowCallChecker check(accs, names(s.acc.args()), first, 0);
    for (const Halide::Expr& v : s.acc.function().update(0).values()) check.mutate(v);
    for (const Halide::Expr& v : s.acc.function().values()) check.mutate(v);
    if (!check.ok) return false;
  }

  // The output: vectorized dim 0, fused rows, parallel chunks of rows.
  std::vector<Var> args = out.args();
  const int w = VectorWidth(out.output_types()[0], Bound(e, sym, 0), params_.vector_factor);
  const bool parallel =
      threads_ > 1 && NumElements(e) >= params_.min_parallel_work && rows >= 2 * threads_;
  std::ostringstream line;
  line << out.name() << ":";
  const bool streams = StreamsRows(out, e, sym, w);
  // A streamed row longer than a tile is written a tile at a time when the tiles
  // divide it: LayerNorm's 4 KiB rows as one tile each ran 4.0 ms at 16384 rows, in
  // 2 KiB tiles 3.5 (docs/STREAMING_STORES.md).
  const int64_t tile = streams ? StreamTile(out, e[0], w) : 0;
  if (streams && tile < e[0] && e[0] % tile == 0) {
    StreamTiles(out, args[0], e[0], tile, w, line);
  } else if (w > 1) {
    out.vectorize(args[0], w, kShift);
    line << " vectorize(" << args[0].name() << ", " << w << ")";
    if (streams) {
      streamed_.push_back(out.name());
      line << " streaming stores";
    }
  }
  const Var row = FuseAll(out, std::vector<Var>(args.begin() + 1, args.end()));
  Var at = row;
  if (parallel) {
    int64_t task = std::max<int64_t>(1, rows / (threads_ * params_.tasks_per_thread));
    // Symbolic rows: the task split must hold at their smallest run-time extent.
    if (AnySymbolic(sym)) task = std::min(task, FusedBound(e, sym, 1));
    if (task > 1) {
      Var ro(row.name() + "_o"), ri(row.name() + "_i");
      out.split(row, ro, ri, static_cast<int>(task), kShift).parallel(ro);
      at = ri;
    } else {
      out.parallel(row);
    }
    line << " parallel(" << row.name() << ", task " << task << ")";
  }
  log_ << line.str() << "\n";

  // Found before the rfactors below, which move the accumulators' reads into new Funcs.
  const std::vector<Func> shared =
      params_.row_materialize ? SharedRowValues(info, accs) : std::vector<Func>();
  for (const Stage& s : info.stages) {
    Func f = s.acc;
    f.compute_at(out, at);
    // Lanes: twice the vector width (independent accumulators), halved until they
    // divide the row exactly (the RVar split has no tail) and it holds two of them.
    // The RDom may be shorter than the row: a sum of non-negative terms reads them in
    // groups (lower_reduce.cc, GroupsTerms).
    const int64_t* rdom_extent = Halide::Internal::as_const_int(s.rdom[0].extent());
    const int64_t n = rdom_extent != nullptr ? *rdom_extent : e[0];
    int lanes = params_.row_lanes * target_.natural_vector_size(Halide::Float(32));
    while (lanes > 1 && (n % lanes != 0 || n < 2 * lanes)) lanes /= 2;
    std::ostringstream l;
    l << f.name() << ": compute_at(" << out.name() << ", " << at.name() << ")";
    if (exact_rows && lanes >= 4 && n >= 2 * lanes) {
      Halide::RVar r = s.rdom[0];
      Halide::RVar ro(r.name() + "_o"), ri(r.name() + "_i");
      Var u(f.name() + "_lane");
      Halide::Stage update = f.update(0);
      update.split(r, ro, ri, lanes);  // exact: lanes divides the row
      bool factored = false;
      try {
        Func intm = update.rfactor(ri, u);
        intm.compute_at(out, at).vectorize(u);
        intm.update(0).reorder({VarOrRVar(u), VarOrRVar(ro)}).vectorize(u);
        l << " update split(" << r.name() << ", " << lanes << ").rfactor vectorize";
        factored = true;
      } catch (const Halide::Error&) {
        // Not provably associative: the split update stays scalar (and exact).
        l << " update split(" << r.name() << ", " << lanes << ") (no rfactor)";
      }
      if (factored) {
        // The lanes' fold as a vector reduce (a tree of shuffles and vector ops), not
        // `lanes` dependent scalar ops: 64 vmaxss in a chain per softmax row (5-10%
        // of a row pipeline on one thread, side by side). Exact for max, min and the
        // wrapping integer sum; an f64 sum only changes which f64 roundings it makes.
        // Its operator is the one rfactor just proved associative. Outside the try:
        // Halide sets the loop type before it checks, so a throw here would leave a
        // half-made schedule; it fails the scheduler instead (the compile falls through).
        f.update(0).atomic().vectorize(ri);
        l << " tree";
      }
    } else {
      f.update(0).unscheduled();  // a scalar loop over the row, as defined
      if (!exact_rows) l << " update scalar (symbolic row)";
    }
    log_ << l.str() << "\n";
  }
  for (Func f : shared) {
    f.compute_at(out, at);
    const int fw = VectorWidth(f.output_types()[0], Bound(e, sym, 0));
    if (fw > 1) f.vectorize(f.args()[0], fw, kShift);
    // The next row of each input this loop reads, one line per vector, while this
    // row's arithmetic runs, so that the first pass over the next row (the max) reads
    // it from L1. Halide 14's prefetch is prefetchnta, and what it does depends on the
    // machine: Softmax 4096x1024 (cache-resident) went 1.25 -> 1.10 ms with it on one
    // Sapphire Rapids VM, but 1.22-1.35 -> 1.89-2.27 ms on the Xeon VM CI runs on
    // (2026-11-30, side by side, the kernel's time on the load after each prefetchnta);
    // from DRAM (16384 rows) 6.3 -> 8.0 ms on the first VM, 3.2-3.8 -> 2.9-3.1 on a
    // Zen 5 VM. So no row prefetches by default (`row_prefetch: 0`); a stored schedule
    // may say 1 (cache-resident outputs only) or 2 (always), as braze-tune finds for a
    // machine. Static shapes only (a symbolic one's size is unknown), and rows of whole
    // vectors: the offset is a row of them.
    std::string prefetched;
    const bool prefetch =
        params_.row_prefetch == 2 || (params_.row_prefetch == 1 && CacheResident(out, e, sym));
    if (prefetch && !AnySymbolic(sym) && fw > 1 && e[0] % fw == 0) {
      for (const Halide::Internal::Parameter& p : InputParamsReadBy(f.function())) {
        f.prefetch(p, f.args()[0], f.args()[0], static_cast<int>(e[0] / fw),
                   Halide::PrefetchBoundStrategy::NonFaulting);
        prefetched += " prefetch(" + p.name() + ", next row)";
      }
    }
    log_ << f.name() << ": compute_at(" << out.name() << ", " << at.name() << ") vectorize(" << fw
         << ")" << prefetched << " (read by several of the row's readers)\n";
  }
  return true;
}

// Values of a row pipeline that two or more of its readers (the output, each
// accumulator) compute and that cost a math call each, like softmax's exp(x - max),
// read by the sum and by the division: inlined, every reader computes them again
// (Softmax 4096x1024 ran at 0.35x a hand loop that computes each exp once). They are
// computed per row instead, next to the accumulators, vectorized over the row, which
// the output reads at its own position (checked), so the split holds. Returns them.
std::vector<Func> SafeScheduler::SharedRowValues(const PipelineInfo& info,
                                                 const std::set<std::string>& accs) {
  std::vector<Func> shared;
  Func out = info.outputs[0];
  std::vector<Halide::Internal::Function> readers = {out.function()};
  for (const Stage& s : info.stages) readers.push_back(s.acc.function());
  std::map<std::string, int> readers_of;
  std::map<std::string, Halide::Internal::Function> funcs;
  for (const Halide::Internal::Function& r : readers) {
    std::set<std::string> seen;
    std::map<std::string, Halide::Internal::Function> found;
    PureFuncsReadBy(r, &seen, &found);
    for (const auto& [name, fn] : found) {
      ++readers_of[name];
      funcs.emplace(name, fn);
    }
  }
  std::vector<std::string> out_vars;
  for (const Var& v : out.args()) out_vars.push_back(v.name());
  for (const auto& [name, fn] : funcs) {
    if (readers_of[name] < 2 || fn.args().size() != out_vars.size() || !ExpensiveToRecompute(fn) ||
        !fn.output_types()[0].is_float()) {
      continue;
    }
    // Read by the output, and only at the output's own position: each row's region
    // is then the whole row, at least the vector width. (Read by accumulators alone,
    // its region may be one element of the row: a value broadcast along it.)
    const std::set<std::string> self = {name};
    RowCallChecker check(self, out_vars, 0, 0, accs);
    for (const Halide::Expr& v : out.function().values()) check.mutate(v);
    if (check.ok && check.seen) shared.emplace_back(fn);
  }
  return shared;
}

}  // namespace safe_default_internal
}  // namespace schedule
}  // namespace braze
