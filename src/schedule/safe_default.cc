// The safe default schedule; see safe_default.h for the rules and why.
#include "schedule/safe_default.h"

#include <algorithm>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "absl/cleanup/cleanup.h"
#include "schedule/extremum_operands.h"

namespace braze {
namespace schedule {
namespace {

using Halide::Func;
using Halide::TailStrategy;
using Halide::Var;
using Halide::VarOrRVar;

// The tunable factors (ScheduleParams, stored_schedule.h) default to the choices made
// here: below min_parallel_work (2^15) elements of work a parallel loop costs more (a
// thread-pool wake-up is microseconds, docs/HALIDE14.md §3) than it saves; 4 parallel
// tasks per thread balance load and keep overhead low.
// Splits of pure definitions (vectors, parallel chunks, row tasks) shift their last
// piece inwards, recomputing a few elements, and never guard it: Halide 14 miscompiles
// GuardWithIf splits whose body has a select. A vector loop of two iterations whose
// last holds one element (extent w + 1) stored the first vector twice and never wrote
// the last element; a guarded split into parallel chunks lost the guard of its last
// chunk and wrote 64 floats past the output (heap corruption; braze-fuzz seed 3282).
// See test/e2e/miscompile_test.cc. Every factor here is at most the extent it splits
// (VectorWidth, the chunk and task sizes), which ShiftInwards needs.
constexpr TailStrategy kShift = TailStrategy::ShiftInwards;

// A streamed output's tile (stream_stores.h): computed into a stack buffer of about
// kStreamTileBytes, which stays in L1 until the copy writes it out. Chain8 ran fastest
// with 1-2 KiB tiles (2.7 ms; 4 KiB 3.0, the buffer and the output 4 KiB apart; 16 KiB
// 2.95: docs/STREAMING_STORES.md). A row pipeline streams whole rows of up to
// kMaxStreamTileBytes, the most Halide 14 puts on the stack (larger buffers are
// malloc'ed per use). Below kMinStreamTileBytes a copy call costs more than it saves.
constexpr int64_t kStreamTileBytes = 2 << 10;
constexpr int64_t kMaxStreamTileBytes = 16 << 10;
constexpr int64_t kMinStreamTileBytes = 1 << 10;
// The least work (elements reduced) worth a parallel task of its own: a Halide 14
// worker takes each loop iteration under the thread pool's lock. Row sums, one task a
// row, on 2 AVX2 cores: rows of 1024 ran slower than serial, rows of 4096 1.6x faster.
constexpr int64_t kMinTaskWork = 4096;
// Row pipelines (RowPipeline) need rows at least this long.
constexpr int64_t kMinRow = 8;

int64_t Product(const Extents& e) {
  int64_t p = 1;
  for (int64_t v : e) p *= v;
  return p;
}

// The largest factor a ShiftInwards split of dim d may use: its extent, or for a
// symbolic dim at most `least`, its least run-time extent (PipelineInfo::
// symbolic_min_extent: kMinSymbolicExtent, or 1 in the kernel for smaller sizes).
// Equal to e[d] for every static dim.
int64_t SplitBound(const Extents& e, const Symbolic& s, size_t d, int64_t least) {
  return IsSymbolic(s, d) ? std::min(e[d], least) : e[d];
}

// The smallest run-time extent of dims [from, e.size()) fused into one: the factor a
// ShiftInwards split of the fused var may use.
int64_t FusedSplitBound(const Extents& e, const Symbolic& s, size_t from, int64_t least) {
  int64_t p = 1;
  for (size_t d = from; d < e.size(); ++d) p *= SplitBound(e, s, d, least);
  return p;
}

// info.output_symbolic[i], or no symbolic dim where the lowering left it empty.
const Symbolic& OutputSymbolic(const PipelineInfo& info, size_t i) {
  static const Symbolic* const kNone = new Symbolic();
  return i < info.output_symbolic.size() ? info.output_symbolic[i] : *kNone;
}

// An output big enough for streaming stores (SafeScheduler::Streams).
bool StreamSized(const Func& f, const Extents& e, const Symbolic& sym, const Halide::Target& target,
                 const ScheduleParams& params) {
  if (target.arch != Halide::Target::X86 || params.stream_min_mib <= 0 || AnySymbolic(sym)) {
    return false;
  }
  return Product(e) * f.output_types()[0].bytes() >= (int64_t{params.stream_min_mib} << 20);
}

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

class SafeScheduler {
 public:
  SafeScheduler(const Halide::Target& target, int parallelism, const ScheduleParams& params)
      : target_(target), threads_(std::max(1, parallelism)), params_(params) {}

  std::string text() const { return log_.str(); }
  const std::vector<std::string>& streamed() const { return streamed_; }
  void set_symbolic_min_extent(int64_t least) { least_ = std::max<int64_t>(1, least); }
  int64_t Bound(const Extents& e, const Symbolic& s, size_t d) const {
    return SplitBound(e, s, d, least_);
  }
  int64_t FusedBound(const Extents& e, const Symbolic& s, size_t from) const {
    return FusedSplitBound(e, s, from, least_);
  }
  void Log(const std::string& line) { log_ << line << "\n"; }

  // The largest power of two <= the natural vector width (x `factor`) that is <= extent.
  int VectorWidth(const Halide::Type& type, int64_t extent, int factor = 1) const {
    int w = target_.natural_vector_size(type) * factor;
    while (w > 1 && w > extent) w /= 2;
    return w;
  }

  // Vectorizes dim 0 and parallelizes over the outer dims of a pure definition.
  // One task's share of `extent`, in whole vectors of w.
  int64_t Chunk(int64_t extent, int w) const {
    const int64_t tasks = threads_ * int64_t{params_.tasks_per_thread};
    const int64_t chunk = (extent + tasks - 1) / tasks;
    return ((std::max<int64_t>(chunk, w) + w - 1) / w) * w;
  }

  // Whether output f (extents e) is written with streaming stores (stream_stores.h): on
  // x86, every dim static, at least stream_min_mib MiB. Below a few MiB the output is
  // better left in the caches for its reader; the default (32 MiB) is past the L2 of
  // every core together on the machines measured (docs/STREAMING_STORES.md).
  bool Streams(const Func& f, const Extents& e, const Symbolic& sym) const {
    return StreamSized(f, e, sym, target_, params_);
  }

  // Whether output f (static, on x86) is small enough that its pipeline's data stays in
  // the caches: below the size from which outputs stream (stream_min_mib, or its default
  // where streaming is off).
  bool CacheResident(const Func& f, const Extents& e, const Symbolic& sym) const {
    ScheduleParams p = params_;
    if (p.stream_min_mib <= 0) p.stream_min_mib = ScheduleParams().stream_min_mib;
    return target_.arch == Halide::Target::X86 && !AnySymbolic(sym) &&
           !StreamSized(f, e, sym, target_, p);
  }

  // Whether a row pipeline's output f, its rows (dim 0) vectorized by w, streams a row at
  // a time: rows of whole vectors, 1 to 16 KiB (a shorter row copies too little per
  // call; a longer one would not fit Halide's stack buffers).
  bool StreamsRows(const Func& f, const Extents& e, const Symbolic& sym, int w) const {
    const int64_t row_bytes = e[0] * f.output_types()[0].bytes();
    return w > 1 && e[0] % w == 0 && row_bytes >= kMinStreamTileBytes &&
           row_bytes <= kMaxStreamTileBytes && Streams(f, e, sym);
  }

  // A streamed tile: about kStreamTileBytes of whole vectors of w, at most `extent`.
  int64_t StreamTile(const Func& f, int64_t extent, int w) const {
    const int64_t bytes = f.output_types()[0].bytes();
    const int64_t tile = std::max<int64_t>(1, kStreamTileBytes / (bytes * w)) * w;
    return std::min(tile, extent / w * w);
  }

  // Pointwise's tile for output f when it streams (elements of dim 0, whole vectors),
  // else 0. The tile cuts the span dim 0 is scheduled in: a task's chunk when dim 0 is
  // split into chunks, else the row. Tiles must divide the span, or be at most a quarter
  // of it: a last tile shifted inwards over the one before recomputes their overlap.
  int64_t PointwiseStreamTile(const Func& f, const Extents& e, const Symbolic& sym) const {
    const int w = VectorWidth(f.output_types()[0], Bound(e, sym, 0), params_.vector_factor);
    if (w <= 1 || !Streams(f, e, sym)) return 0;
    const int64_t span = ChunksDim0(e, sym) ? Chunk(e[0], w) : e[0];
    const int64_t tile = StreamTile(f, span, w);
    const bool whole = span % tile == 0 || tile * 4 <= span;
    return tile >= w && whole && tile * f.output_types()[0].bytes() >= kMinStreamTileBytes ? tile
                                                                                           : 0;
  }

  // Whether Pointwise splits a static dim 0 into one chunk per parallel task (rank 1, or
  // too few rows to share out).
  bool ChunksDim0(const Extents& e, const Symbolic& sym) const {
    int64_t outer_extent = 1;
    for (size_t d = 1; d < e.size(); ++d) outer_extent *= e[d];
    return threads_ > 1 && Product(e) >= params_.min_parallel_work && outer_extent < 2 * threads_ &&
           !IsSymbolic(sym, 0);
  }

  // Splits dim 0 (or `inner`, the chunk's var) of a streamed output f into tiles of
  // `tile`, vectorized by w, unless the tile is the whole span; records f as streamed.
  void StreamTiles(Func f, Var inner, int64_t span, int64_t tile, int w, std::ostream& line) {
    if (tile < span) {
      Var xt(inner.name() + "_t"), xv(inner.name() + "_v");
      f.split(inner, xt, xv, static_cast<int>(tile), kShift).vectorize(xv, w, kShift);
      line << " split(" << tile << ")";
    } else {
      f.vectorize(inner, w, kShift);
    }
    line << " vectorize(" << w << ") streaming stores";
    streamed_.push_back(f.name());
  }

  // `output`: f is a pipeline output (its buffer's extents can be tested at run time).
  void Pointwise(Func f, const Extents& e, const Symbolic& sym, bool output = false) {
    std::vector<Var> args = f.args();
    const int rank = static_cast<int>(args.size());
    const int w = VectorWidth(f.output_types()[0], Bound(e, sym, 0), params_.vector_factor);
    const bool parallel = threads_ > 1 && Product(e) >= params_.min_parallel_work;
    std::ostringstream line;
    line << f.name() << ":";
    int64_t outer_extent = 1;
    for (int d = 1; d < rank; ++d) outer_extent *= e[d];
    // A symbolic dim 0 cannot be cut into chunks: a chunk would be a split factor above
    // kMinSymbolicExtent. Its rows go parallel instead, if there are two; else serial,
    // except for an output, whose chunked schedule is a specialization for run-time
    // extents of at least a chunk (Halide tests the buffer's extent once per launch).
    const bool sym0 = IsSymbolic(sym, 0);
    if (parallel && outer_extent < 2 * threads_ && sym0 && output) {
      const int64_t chunk = Chunk(e[0], w);
      Var xo(args[0].name() + "_o"), xi(args[0].name() + "_i");
      Halide::Stage big =
          f.specialize(f.output_buffer().dim(0).extent() >= static_cast<int>(chunk));
      big.split(args[0], xo, xi, static_cast<int>(chunk), kShift).parallel(xo);
      if (w > 1) big.vectorize(xi, w, kShift);
      if (w > 1) f.vectorize(args[0], w, kShift);
      line << " specialize(extent >= " << chunk << "): split(" << args[0].name() << ", " << chunk
           << ").parallel vectorize(" << w << "); else vectorize(" << w << ")";
    } else if (parallel && outer_extent < 2 * threads_ && !sym0) {
      // Too few rows (or rank 1): split dim 0 into one chunk per task.
      Var xo(args[0].name() + "_o"), xi(args[0].name() + "_i");
      const int64_t chunk = Chunk(e[0], w);
      f.split(args[0], xo, xi, static_cast<int>(chunk), kShift).parallel(xo);
      line << " split(" << args[0].name() << ", " << chunk << ").parallel";
      const int64_t tile = output ? PointwiseStreamTile(f, e, sym) : 0;
      if (tile > 0) {
        // Streamed: tiles of whole vectors, each computed to the stack and then copied.
        StreamTiles(f, xi, chunk, tile, w, line);
      } else if (w > 1) {
        f.vectorize(xi, w, kShift);
        line << " vectorize(" << w << ")";
      }
    } else {
      // A row (or the whole of rank 1 on one thread) streamed in tiles.
      const int64_t tile = output ? PointwiseStreamTile(f, e, sym) : 0;
      if (tile > 0) {
        StreamTiles(f, args[0], e[0], tile, w, line);
      } else if (w > 1) {
        f.vectorize(args[0], w, kShift);
        line << " vectorize(" << args[0].name() << ", " << w << ")";
      }
      if (parallel && sym0 && outer_extent < 2) line << " serial (symbolic dim 0, one row)";
      if (parallel && outer_extent >= 2) {
        Var outer = args[rank - 1];
        for (int d = rank - 2; d >= 1; --d) {
          Var fused(outer.name() + "_" + args[d].name());
          f.fuse(args[d], outer, fused);
          outer = fused;
        }
        int64_t task = std::max<int64_t>(1, outer_extent / (threads_ * params_.tasks_per_thread));
        // Symbolic rows: the task split must hold at their smallest run-time extent.
        if (AnySymbolic(sym)) task = std::min(task, FusedBound(e, sym, 1));
        if (task > 1) {
          f.parallel(outer, static_cast<int>(task), kShift);
        } else {
          f.parallel(outer);
        }
        line << " parallel(" << outer.name() << ", task " << task << ")";
      }
    }
    log_ << line.str() << "\n";
  }

  // A transpose (f(x, y) = g(y, x) in dims 0 and 1): square tiles vectorized in both
  // dims, so that Halide loads whole rows of g and transposes them in registers instead
  // of gathering with the row stride; tiles in parallel over the outer dims.
  void Transpose(Func f, const Extents& e, const Symbolic& sym) {
    std::vector<Var> args = f.args();
    // Tiles of w x w, ShiftInwards: w may not exceed a symbolic dim's smallest extent.
    const int w = std::min(VectorWidth(f.output_types()[0], Bound(e, sym, 0)),
                           static_cast<int>(std::min<int64_t>(Bound(e, sym, 1), 8)));
    std::ostringstream line;
    line << f.name() << ":";
    Var x = args[0], y = args[1], xo(x.name() + "_o"), yo(y.name() + "_o"), xi(x.name() + "_t"),
        yi(y.name() + "_t");
    Var outer = yo;
    if (w > 1) {
      f.tile(x, y, xo, yo, xi, yi, w, w, kShift).vectorize(xi).vectorize(yi);
      line << " tile(" << w << ", " << w << ").vectorize(both)";
    } else {
      outer = y;
    }
    for (size_t d = 2; d < args.size(); ++d) {
      Var fused(outer.name() + "_" + args[d].name());
      f.fuse(outer, args[d], fused);
      outer = fused;
    }
    if (threads_ > 1 && Product(e) >= params_.min_parallel_work) {
      f.parallel(outer);
      line << " parallel(" << outer.name() << ")";
    }
    log_ << line.str() << "\n";
  }

  // Row pipelines (softmax, layernorm): one output of rank >= 2 whose every reduction
  // runs over exactly the output's dim 0 and is read only at the reader's own row.
  // Then each accumulator is computed per output row (compute_at the output's row
  // loop, as docs/HALIDE14.md's hand schedule does), so the row stays in cache between the
  // reductions and the output, and its update is vectorized by rfactor over an exact
  // split of the row's RVar (no GuardWithIf on any update). Returns false, with nothing
  // scheduled, when the pipeline is not of that form. A symbolic row (or reduction) has
  // no exact split: its updates stay scalar loops over the row.
  bool RowPipeline(const PipelineInfo& info) {
    if (info.outputs.size() != 1 || info.stages.empty()) return false;
    Func out = info.outputs[0];
    const Extents& e = info.output_extents[0];
    const Symbolic& sym = OutputSymbolic(info, 0);
    const int rank = static_cast<int>(e.size());
    // Rows shorter than kMinRow stay compute_root: with a reduction of a few elements
    // computed next to its reader, LLVM's fast-math (no-NaNs) folded a 1-element row's
    // max(-inf, x) into x and lost the NaN (Softmax(Log(x)) gave 1, not NaN; the Max then kept
    // a float value beside its NaN flag).
    if (rank < 2 || Product(e) <= 0 || Bound(e, sym, 0) < kMinRow || out.has_update_definition()) {
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
        threads_ > 1 && Product(e) >= params_.min_parallel_work && rows >= 2 * threads_;
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
    Var row = args[rank - 1];
    for (int d = rank - 2; d >= 1; --d) {
      Var fused(row.name() + "_" + args[d].name());
      out.fuse(args[d], row, fused);
      row = fused;
    }
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
      // row's arithmetic runs: the first pass over the next row (the max) then reads it
      // from L1, not from L3 or memory. Halide 14's prefetch is prefetchnta. Where the
      // output stays in the caches it always paid (Softmax 4096x1024 1.25/1.42 ms ->
      // 1.10/1.25 on a Sapphire Rapids VM). From DRAM it depends on the machine:
      // Softmax 16384x1024 (streamed) ran 6.3 -> 8.0 ms on that VM, while a Zen 5 VM
      // went from 3.2-3.8 to 2.9-3.1 ms; so by default only cache-resident outputs
      // prefetch, and a stored schedule may say `row_prefetch: 2` (or 0). Static shapes
      // only (a symbolic one's size is unknown), and rows of whole vectors: the offset
      // is a row of them.
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
  static std::vector<Func> SharedRowValues(const PipelineInfo& info,
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
      if (readers_of[name] < 2 || fn.args().size() != out_vars.size() ||
          !ExpensiveToRecompute(fn) || !fn.output_types()[0].is_float()) {
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

  // A stored Func is computed over all of its extents, not just the region its readers
  // need: the splits here are sized for the full extents, and over a smaller region (a
  // Slice of a reduction or a matmul) they reached past the inputs (braze-fuzz seeds
  // 2204 and 2909: a Const read at index 5 of 4, and at -1). A symbolic dim has no
  // constant extent (its value is only an estimate): it is bounded to its run-time
  // extent when the lowering gave it (`exprs`), so a tile of up to 16 never shifts
  // below 0 when a reader needs only a few rows; else it is left free.
  static void BoundToExtents(Func f, const Extents& e, const Symbolic& sym,
                             const std::vector<Halide::Expr>& exprs = {}) {
    std::vector<Var> args = f.args();
    for (size_t d = 0; d < args.size() && d < e.size(); ++d) {
      if (!IsSymbolic(sym, d)) {
        f.bound(args[d], 0, static_cast<int>(e[d]));
      } else if (d < exprs.size() && exprs[d].defined()) {
        f.bound(args[d], 0, exprs[d]);
      }
    }
  }

  // The update of an accumulator whose dim 0 is symbolic and its only parallel work:
  // dim 0 cannot be split (see Reduction), so one task per element, and only where each
  // task reads a contiguous row worth a task. Column sums (the reduction over outer
  // input dims) stay serial, dim 0 innermost: parallel over it, each task would walk a
  // column with the row stride.
  void SymbolicParallelDim0(Halide::Stage update, const Stage& s, std::ostringstream& line) {
    const Var x = s.acc.args()[0];
    if (s.reduces_innermost && s.reduction_extent >= kMinTaskWork) {
      update.parallel(x);
      line << " parallel(" << x.name() << ") (symbolic: a task per element)";
    } else {
      if (s.reduces_innermost) update.unscheduled();  // a loop per row, as defined
      line << " serial (symbolic dim 0)";
    }
  }

  // A reduction or ArgMax accumulator: compute_root, parallel over its outermost pure
  // dim; the update is vectorized over dim 0 only when that keeps loads contiguous.
  void Reduction(const Stage& s) {
    Func f = s.acc;
    // Splits of accumulators divide their extents exactly (no GuardWithIf): Halide 14
    // miscompiles a vectorized update split with GuardWithIf when the update has a
    // select (Max, Min, ArgMax): the vector loop's index is dropped and only the first
    // lanes are ever written. And a guarded vectorized init (a constant store) made
    // LLVM take over 2 s to compile a 65x33 accumulator.
    // A symbolic dim 0 divides by nothing and cannot be bound: its init (a constant:
    // shifting reads no input) is vectorized ShiftInwards, and its update is not split
    // at all (an update allows no ShiftInwards; RoundUp would read past the input).
    const bool sym0 = IsSymbolic(s.symbolic, 0);
    int w = VectorWidth(f.output_types()[0], Bound(s.extents, s.symbolic, 0));
    while (!sym0 && w > 1 && s.extents[0] % w != 0) w /= 2;
    std::vector<Var> args = f.args();
    const int rank = static_cast<int>(args.size());
    f.compute_root();
    BoundToExtents(f, s.extents, s.symbolic, s.symbolic_extents);
    if (w > 1) f.vectorize(args[0], w, sym0 ? kShift : TailStrategy::RoundUp);
    log_ << f.name() << ": compute_root vectorize(" << w << ")\n";
    Halide::Stage update = f.update(0);
    std::ostringstream line;
    line << f.name() << ".update(0):";
    const bool parallel =
        threads_ > 1 && Product(s.extents) * s.reduction_extent >= params_.min_parallel_work;
    if (s.reduces_innermost || sym0) w = 1;
    Var x = args[0];
    Var xv(x.name() + "_v");
    if (w > 1) {
      // The reduction runs over outer input dims: dim 0 becomes the innermost loop,
      // vectorized, so each step reads a contiguous run of the input. (By default an
      // update's RVars are its innermost loops.) This split comes first: Halide allows
      // RoundUp in an update only on a var that is not the inner half of another split.
      update.split(x, x, xv, w, TailStrategy::RoundUp);
    }
    if (parallel && rank >= 2 && s.extents[rank - 1] >= threads_) {
      update.parallel(args[rank - 1]);
      line << " parallel(" << args[rank - 1].name() << ")";
    } else if (parallel && s.extents[0] >= 2 * threads_ && sym0) {
      SymbolicParallelDim0(update, s, line);
    } else if (parallel && s.extents[0] >= 2 * threads_) {
      // A rank-1 accumulator (row or column sums): parallel chunks of dim 0, each a
      // multiple of the vector width that divides the extent.
      const int64_t tasks = threads_ * int64_t{params_.tasks_per_thread};
      int64_t chunk = ((s.extents[0] + tasks - 1) / tasks + w - 1) / w * w;
      while (s.extents[0] % chunk != 0) chunk += w;
      if (chunk < s.extents[0]) {
        Var xo(x.name() + "_o"), xi(x.name() + "_i");
        update.split(x, xo, xi, static_cast<int>(chunk / w), TailStrategy::RoundUp).parallel(xo);
        line << " split(" << x.name() << ", " << chunk / w << ").parallel";
        x = xi;
      }
    }
    if (w > 1) {
      std::vector<VarOrRVar> order{xv};
      for (int i = 0; i < s.rdom.dimensions(); ++i) order.emplace_back(s.rdom[i]);
      update.reorder(order).vectorize(xv);
      line << " split(" << x.name() << ", " << w << ").reorder(inner, rdom).vectorize";
    } else if (!s.reduces_innermost) {
      // No exact vector split: still make dim 0 the innermost loop so the contiguous
      // loop is the one LLVM's loop vectorizer sees.
      std::vector<VarOrRVar> order{x};
      for (int i = 0; i < s.rdom.dimensions(); ++i) order.emplace_back(s.rdom[i]);
      update.reorder(order);
      line << " reorder(" << x.name() << ", rdom)";
    }
    log_ << line.str() << "\n";
  }

  // The register tile of a MatMul whose columns (dim 0) are symbolic: at most
  // kMinSymbolicExtent columns (n, a SplitBound), so as many whole vectors as fit in 16
  // (AVX2 f32: 2, AVX-512: 1), and strips of 12 / vectors rows, to keep about 12
  // accumulators in flight like the 3 x 4 tile (AVX2 f32: 16 x 6, BLIS's sgemm kernel:
  // 97-140 GFLOP/s at 512^3 and 1024^3 on 2 AVX2 cores, as fast as the static 3 x 4
  // tile; 16 x 4 gave 64-101). The row tile is a multiple of the strip, so the
  // accumulator's strips stay exact. (AVX-512's 16 x 12 is unmeasured.)
  static void SymbolicColumnTile(int64_t n, int vw, int* tile_x, int* tile_y, int* strip) {
    const int vectors = static_cast<int>(std::clamp<int64_t>(n / vw, 1, 3));
    *tile_x = vw * vectors;
    if (*tile_y < 1) return;
    *strip = std::min(12 / vectors, *tile_y);
    *tile_y = *tile_y / *strip * *strip;
  }

  // The library GEMM's extern stage and the operands it is handed are stored whole:
  // Halide passes an extern stage buffers, never values computed on demand.
  // Stored whole means bounded too: Halide realizes a Func handed to an extern stage
  // over the region the stage's bounds query answers, which it cannot check, so every
  // Func the call reads (its own result included, when another call reads it) is bound
  // to its extents.
  void LibraryMatMul(const Stage& s, const std::set<std::string>& materialized) {
    for (const Stage::Operand& o : s.operands) {
      Func f = o.func;
      // Not skipped for being another matmul's operand: that one may have left a plain
      // load inline, which an extern stage cannot read.
      scheduled_operands_.insert(f.name());
      if (materialized.count(f.name()) > 0 || !rooted_operands_.insert(f.name()).second) {
        continue;
      }
      f.compute_root();
      BoundToExtents(f, o.extents, o.symbolic, o.extent_exprs);
      log_ << f.name() << ": library matmul operand, compute_root bound to its extents\n";
      Pointwise(f, o.extents, o.symbolic);
    }
    Func gemm = s.result;
    gemm.compute_root();
    BoundToExtents(gemm, s.extents, s.symbolic, s.symbolic_extents);
    log_ << gemm.name() << ": extern " << gemm.function().extern_function_name()
         << " (the CPU GEMM library), compute_root bound to its extents\n";
  }

  // docs/HALIDE14.md §2f: the result is tiled (3 vectors) x 32 rows in 4-row strips, and the
  // accumulator is computed per strip so its 3x4 vectors stay in registers across the
  // k loop. Shapes are exact, so the tiles shrink to fit small extents (a vector, 1 row)
  // and every split is ShiftInwards on the pure result or exact on the accumulator: no
  // GuardWithIf (see Reduction for why), and constant extents that unroll.
  void MatMul(const Stage& s, const std::set<std::string>& materialized) {
    // Operands first: computed once, at root, unless they are stored anyway.
    for (const Stage::Operand& o : s.operands) {
      Func f = o.func;
      if (materialized.count(f.name()) > 0 || !scheduled_operands_.insert(f.name()).second) {
        continue;
      }
      if (!o.transpose && IsPlainLoad(f.function())) continue;  // a copy would gain nothing
      f.compute_root();
      rooted_operands_.insert(f.name());
      log_ << f.name() << ": matmul operand, compute_root\n";
      if (o.transpose) {
        Transpose(f, o.extents, o.symbolic);
      } else {
        Pointwise(f, o.extents, o.symbolic);
      }
    }
    Func res = s.result;
    Func acc = s.acc;
    std::vector<Var> args = res.args();
    Var x = args[0], y = args[1];
    // A symbolic dim's tile is at most kMinSymbolicExtent (SplitBound): 16 rows.
    const int64_t n = Bound(s.extents, s.symbolic, 0);
    const int64_t m = Bound(s.extents, s.symbolic, 1);
    const int vec = target_.natural_vector_size(res.output_types()[0]);
    int vw = vec;
    while (vw > 1 && vw > n) vw /= 2;
    const int vectors = params_.matmul_vectors;
    int tile_x = n >= vectors * vec ? vectors * vec : vw;
    int tile_y = static_cast<int>(std::min<int64_t>(params_.matmul_rows, m));
    int strip = std::min(params_.matmul_strip, tile_y);
    if (IsSymbolic(s.symbolic, 0)) SymbolicColumnTile(n, vw, &tile_x, &tile_y, &strip);
    Var xi("mm_xi"), yi("mm_yi"), yii("mm_yii"), xy("mm_xy");
    res.compute_root();
    BoundToExtents(res, s.extents, s.symbolic, s.symbolic_extents);
    res.tile(x, y, xi, yi, tile_x, tile_y).fuse(x, y, xy);
    Var outer = xy;
    for (size_t d = 2; d < args.size(); ++d) {  // batch dims
      Var fused(outer.name() + "_" + args[d].name());
      res.fuse(outer, args[d], fused);
      outer = fused;
    }
    if (threads_ > 1 && Product(s.extents) * s.reduction_extent >= params_.min_parallel_work) {
      res.parallel(outer);
    }
    res.split(yi, yi, yii, strip).vectorize(xi, vw).unroll(xi).unroll(yii);
    acc.compute_at(res, yi).vectorize(acc.args()[0], vw);
    acc.update(0)
        .reorder({VarOrRVar(acc.args()[0]), VarOrRVar(acc.args()[1]), VarOrRVar(s.rdom.x)})
        .vectorize(acc.args()[0], vw);
    log_ << res.name() << ": compute_root tile(" << tile_x << ", " << tile_y
         << ") parallel split(yi, " << strip << ") vectorize(" << vw << ")\n"
         << acc.name() << ": compute_at(" << res.name()
         << ", yi) update reorder(x, y, k) vectorize(" << vw << ")\n";
  }

 private:
  const Halide::Target& target_;
  const int threads_;
  const ScheduleParams params_;
  int64_t least_ = kMinSymbolicExtent;  // a symbolic dim's least run-time extent
  std::ostringstream log_;
  std::vector<std::string> streamed_;  // outputs written with streaming stores
  std::set<std::string> scheduled_operands_;
  std::set<std::string> rooted_operands_;  // the operands made compute_root so far
};

}  // namespace

bool StreamsAnOutput(const PipelineInfo& info, const Halide::Target& target, int parallelism,
                     const ScheduleParams& params) {
  SafeScheduler s(target, parallelism, params);
  s.set_symbolic_min_extent(info.symbolic_min_extent);
  for (size_t i = 0; i < info.outputs.size(); ++i) {
    if (s.PointwiseStreamTile(info.outputs[i], info.output_extents[i], OutputSymbolic(info, i)) >
        0) {
      return true;
    }
  }
  return false;
}

std::string ApplySafeDefault(const PipelineInfo& info, const Halide::Target& target,
                             int parallelism, const ScheduleParams& params,
                             std::vector<std::string>* streamed) {
  SafeScheduler s(target, parallelism, params);
  // What the schedule streams, whichever way it returns.
  auto cleanup = absl::MakeCleanup([&] {
    if (streamed != nullptr) *streamed = s.streamed();
  });
  s.set_symbolic_min_extent(info.symbolic_min_extent);
  if (params != ScheduleParams()) s.Log("// stored parameters: " + ParamsSummary(params));
  // Values a reduction and a comparison both read are stored once (extremum_operands.h);
  // the row pipeline inlines producers, so such clusters take the general path.
  const std::vector<Func> shared = ComparedReductionOperands(info);
  if (shared.empty() && params.row_pipeline && s.RowPipeline(info)) return s.text();
  for (Func f : shared) {
    f.compute_root();  // small and rare: a gradient's mask operand, left to LLVM
    s.Log(f.name() + ": compute_root (read by a reduction and a comparison)");
  }
  // Funcs stored by their own schedule: outputs, accumulators and matmul results.
  std::set<std::string> materialized;
  for (const Func& f : info.outputs) materialized.insert(f.name());
  for (const Stage& stage : info.stages) {
    materialized.insert(stage.acc.name());
    if (stage.result.defined()) materialized.insert(stage.result.name());
  }
  for (const Stage& stage : info.stages) {
    switch (stage.kind) {
      case StageKind::kReduction:
      case StageKind::kArgMax:
        s.Reduction(stage);
        break;
      case StageKind::kMatMul:
        s.MatMul(stage, materialized);
        break;
      case StageKind::kLibraryMatMul:
        s.LibraryMatMul(stage, materialized);
        break;
    }
  }
  for (size_t i = 0; i < info.outputs.size(); ++i) {
    // A MatMul result that is also an output already has its tiled schedule.
    bool scheduled = false;
    for (const Stage& stage : info.stages) {
      scheduled |= (stage.kind == StageKind::kMatMul || stage.kind == StageKind::kLibraryMatMul) &&
                   stage.result.name() == info.outputs[i].name();
    }
    if (!scheduled) {
      s.Pointwise(info.outputs[i], info.output_extents[i], OutputSymbolic(info, i), true);
    }
  }
  return s.text();
}

}  // namespace schedule
}  // namespace braze
