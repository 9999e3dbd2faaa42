// The safe default schedule's drivers, and its schedules of pure Funcs: outputs (vectorized,
// parallel in chunks or rows, written with streaming stores when large), transposes.
// safe_default.h has the rules and why; safe_scheduler.h maps the other files.
#include "schedule/safe_default.h"

#include <algorithm>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "absl/cleanup/cleanup.h"
#include "braze/dtype.h"
#include "schedule/extremum_operands.h"
#include "schedule/safe_scheduler.h"

namespace braze {
namespace schedule {
namespace safe_default_internal {

using Halide::Func;
using Halide::Var;

namespace {

// A streamed output's tile (stream_stores.h): computed into a stack buffer of about
// kStreamTileBytes, which stays in L1 until the copy writes it out. Chain8 ran fastest
// with 1-2 KiB tiles (2.7 ms; 4 KiB 3.0, the buffer and the output 4 KiB apart; 16 KiB
// 2.95: docs/STREAMING_STORES.md). A row pipeline streams whole rows of up to
// kMaxStreamTileBytes, the most Halide 14 puts on the stack (larger buffers are
// malloc'ed per use). Below kMinStreamTileBytes a copy call costs more than it saves.
constexpr int64_t kStreamTileBytes = 2 << 10;
constexpr int64_t kMaxStreamTileBytes = 16 << 10;
constexpr int64_t kMinStreamTileBytes = 1 << 10;

// An output big enough for streaming stores (SafeScheduler::Streams).
bool StreamSized(const Func& f, const Extents& e, const Symbolic& sym, const Halide::Target& target,
                 const ScheduleParams& params) {
  if (target.arch != Halide::Target::X86 || params.stream_min_mib <= 0 || AnySymbolic(sym)) {
    return false;
  }
  return NumElements(e) * f.output_types()[0].bytes() >= (int64_t{params.stream_min_mib} << 20);
}

// The Funcs the outputs read once every Func not in `stored` (pure, no update) is
// inlined: an inlined Func's argument that its body does not use is dropped with the
// call, and so is every read inside it. MaxPoolGradGrad reads its gradient operand at
// the argmax's tap; a gradient that is a constant inlined ignores the tap, and the
// argmax stage, stored by its schedule, is then read nowhere. Halide 14 realizes it all
// the same but never defines the region nothing reads, which its explicit bounds' check
// and its loops name: "Symbol not found: MaxPoolGradGrad_51_argmax.s1.dim3.min" at code
// generation (braze-fuzz seed 13310041).
class ReadAfterInlining : public Halide::Internal::IRGraphVisitor {
 public:
  explicit ReadAfterInlining(const std::set<std::string>& stored) : stored_(stored) {}
  // The Funcs info's outputs read, and in `dropping` the Funcs that drop a read.
  static std::set<std::string> Of(const PipelineInfo& info, const std::set<std::string>& stored,
                                  std::set<std::string>* dropping) {
    ReadAfterInlining reads(stored);
    for (const Halide::Func& f : info.outputs) reads.Reach(f.function());
    *dropping = reads.dropping;
    return reads.reached;
  }
  std::set<std::string> reached;
  // Inlined Funcs whose calls drop an argument that reads a Func.
  std::set<std::string> dropping;

  void Reach(const Halide::Internal::Function& f) {
    if (!reached.insert(f.name()).second) return;
    for (const Halide::Expr& v : f.values()) Visit(v);
    for (const Halide::Internal::Definition& u : f.updates()) {
      for (const Halide::Expr& v : u.values()) Visit(v);
      for (const Halide::Expr& a : u.args()) Visit(a);
      for (const Halide::Internal::ReductionVariable& rv : u.schedule().rvars()) {
        Visit(rv.min), Visit(rv.extent);
      }
      if (u.predicate().defined()) Visit(u.predicate());
    }
  }

 private:
  // Lets substituted: a Let's value is read only where its variable is (the lowering
  // binds the argmax's tap to a Let used in the dropped arguments).
  void Visit(const Halide::Expr& e) { Halide::Internal::substitute_in_all_lets(e).accept(this); }

  static bool ReadsAFunc(const Halide::Expr& e) {
    struct Finder : Halide::Internal::IRGraphVisitor {
      using IRGraphVisitor::visit;
      bool found = false;
      void visit(const Halide::Internal::Call* c) override {
        found = found || c->call_type == Halide::Internal::Call::Halide;
        IRGraphVisitor::visit(c);
      }
    } finder;
    e.accept(&finder);
    return finder.found;
  }

  bool Inlined(const Halide::Internal::Function& f) const {
    return stored_.count(f.name()) == 0 && !f.has_update_definition();
  }

  // Which of f's arguments its values use once inlined Funcs are: not those passed only
  // as arguments an inlined callee drops (Add(a, b) of two constants drops its own).
  const std::vector<bool>& UsedArgs(const Halide::Internal::Function& f) {
    auto it = used_args_.find(f.name());
    if (it != used_args_.end()) return it->second;
    struct Uses : Halide::Internal::IRGraphVisitor {
      Uses(ReadAfterInlining& reads, const std::string& var) : reads(reads), var(var) {}
      using IRGraphVisitor::visit;
      void visit(const Halide::Internal::Variable* v) override { found = found || v->name == var; }
      void visit(const Halide::Internal::Call* c) override {
        if (c->call_type != Halide::Internal::Call::Halide || !c->func.defined() ||
            !reads.Inlined(Halide::Internal::Function(c->func))) {
          IRGraphVisitor::visit(c);
          return;
        }
        const std::vector<bool>& used = reads.UsedArgs(Halide::Internal::Function(c->func));
        for (size_t i = 0; i < c->args.size(); ++i) {
          if (i >= used.size() || used[i]) c->args[i].accept(this);
        }
      }
      ReadAfterInlining& reads;
      const std::string& var;
      bool found = false;
    };
    std::vector<Halide::Expr> values;
    for (const Halide::Expr& v : f.values()) {
      values.push_back(Halide::Internal::substitute_in_all_lets(v));
    }
    std::vector<bool> used_args;
    for (const std::string& arg : f.args()) {
      Uses uses(*this, arg);
      for (const Halide::Expr& v : values) v.accept(&uses);
      used_args.push_back(uses.found);
    }
    return used_args_.emplace(f.name(), std::move(used_args)).first->second;
  }

  using IRGraphVisitor::visit;
  void visit(const Halide::Internal::Call* op) override {
    if (op->call_type != Halide::Internal::Call::Halide || !op->func.defined()) {
      IRGraphVisitor::visit(op);
      return;
    }
    const Halide::Internal::Function f(op->func);
    const bool inlined = Inlined(f);
    for (size_t i = 0; i < op->args.size(); ++i) {
      if (!inlined || i >= f.args().size() || UsedArgs(f)[i]) {
        op->args[i].accept(this);
      } else if (ReadsAFunc(op->args[i])) {
        dropping.insert(f.name());
      }
    }
    Reach(f);
  }
  const std::set<std::string>& stored_;
  std::map<std::string, std::vector<bool>> used_args_;
};

}  // namespace

const Symbolic& OutputSymbolic(const PipelineInfo& info, size_t i) {
  static const Symbolic* const kNone = new Symbolic();
  return i < info.output_symbolic.size() ? info.output_symbolic[i] : *kNone;
}

bool SafeScheduler::Streams(const Func& f, const Extents& e, const Symbolic& sym) const {
  return StreamSized(f, e, sym, target_, params_);
}

bool SafeScheduler::CacheResident(const Func& f, const Extents& e, const Symbolic& sym) const {
  ScheduleParams p = params_;
  if (p.stream_min_mib <= 0) p.stream_min_mib = ScheduleParams().stream_min_mib;
  return target_.arch == Halide::Target::X86 && !AnySymbolic(sym) &&
         !StreamSized(f, e, sym, target_, p);
}

bool SafeScheduler::StreamsRows(const Func& f, const Extents& e, const Symbolic& sym, int w) const {
  const int64_t row_bytes = e[0] * f.output_types()[0].bytes();
  return w > 1 && e[0] % w == 0 && row_bytes >= kMinStreamTileBytes &&
         row_bytes <= kMaxStreamTileBytes && Streams(f, e, sym);
}

int64_t SafeScheduler::StreamTile(const Func& f, int64_t extent, int w) const {
  const int64_t bytes = f.output_types()[0].bytes();
  const int64_t tile = std::max<int64_t>(1, kStreamTileBytes / (bytes * w)) * w;
  return std::min(tile, extent / w * w);
}

int64_t SafeScheduler::PointwiseStreamTile(const Func& f, const Extents& e,
                                           const Symbolic& sym) const {
  const int w = VectorWidth(f.output_types()[0], Bound(e, sym, 0), params_.vector_factor);
  if (w <= 1 || !Streams(f, e, sym)) return 0;
  const int64_t span = ChunksDim0(e, sym) ? Chunk(e[0], w) : e[0];
  const int64_t tile = StreamTile(f, span, w);
  const bool whole = span % tile == 0 || tile * 4 <= span;
  return tile >= w && whole && tile * f.output_types()[0].bytes() >= kMinStreamTileBytes ? tile : 0;
}

bool SafeScheduler::ChunksDim0(const Extents& e, const Symbolic& sym) const {
  int64_t outer_extent = 1;
  for (size_t d = 1; d < e.size(); ++d) outer_extent *= e[d];
  return threads_ > 1 && NumElements(e) >= params_.min_parallel_work &&
         outer_extent < 2 * threads_ && !IsSymbolic(sym, 0);
}

void SafeScheduler::StreamTiles(Func f, Var inner, int64_t span, int64_t tile, int w,
                                std::ostream& line) {
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

void SafeScheduler::Pointwise(Func f, const Extents& e, const Symbolic& sym, bool output) {
  std::vector<Var> args = f.args();
  const int rank = static_cast<int>(args.size());
  const int w = VectorWidth(f.output_types()[0], Bound(e, sym, 0), params_.vector_factor);
  const bool parallel = threads_ > 1 && NumElements(e) >= params_.min_parallel_work;
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
    Halide::Stage big = f.specialize(f.output_buffer().dim(0).extent() >= static_cast<int>(chunk));
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
      const Var outer = FuseAll(f, std::vector<Var>(args.begin() + 1, args.end()));
      int64_t task = std::max<int64_t>(1, outer_extent / (threads_ * params_.tasks_per_thread));
      // Symbolic rows: the task split must hold at their smallest run-time extent.
      if (AnySymbolic(sym)) task = std::min(task, FusedBound(e, sym, 1));
      Var row = outer;  // the loop over one row (FuseSiblingOutputs fuses there)
      if (task > 1) {
        row = Var(outer.name() + "_r");
        f.split(outer, outer, row, static_cast<int>(task), kShift).parallel(outer);
      } else {
        f.parallel(outer);
      }
      line << " parallel(" << outer.name() << ", task " << task << ")";
      const bool streamed =
          std::find(streamed_.begin(), streamed_.end(), f.name()) != streamed_.end();
      if (output && !streamed && !AnySymbolic(sym)) row_loops_[f.name()] = row;
    }
  }
  log_ << line.str() << "\n";
}

void SafeScheduler::StoreAtRoot(Func f, const PipelineInfo::ValueExtents& e,
                                const std::string& why) {
  f.compute_root();
  // Bound, as a matmul's stored operand is: a vector shifted inwards over a region
  // narrower than itself would read before the value's start.
  BoundToExtents(f, e.extents, e.symbolic, e.extent_exprs);
  log_ << f.name() << ": compute_root, " << why << "\n";
  Pointwise(f, e.extents, e.symbolic);
}

void SafeScheduler::StoreShared(const SharedValue& v, const PipelineInfo::ValueExtents& e) {
  std::ostringstream why;
  why << kSharedValueStoredOnce << " (inlined: evaluated " << v.evaluations
      << " times per element, cost " << v.cost << ")";
  StoreAtRoot(v.func, e, why.str());
}

void SafeScheduler::StoreBreak(const InlineBreak& b, const PipelineInfo::ValueExtents& e) {
  std::ostringstream why;
  why << kInlineBudgetStored << " (inlined: at least " << b.nodes << " nodes)";
  StoreAtRoot(b.func, e, why.str());
}

void SafeScheduler::StoreCompared(Func f, const PipelineInfo& info) {
  f.compute_root();
  log_ << f.name() << ": compute_root (read by a reduction and a comparison)\n";
  // Not small in general: a batch norm's ReLU output that a MaxPoolGrad's argmax and the
  // ReLU's gradient both read is a whole activation (the CNN example's step, 3.2M
  // elements, 12.8 MB), which an unscheduled compute_root stored from one thread. Every
  // reader still reads the one stored value, whatever loop nest computed it.
  const auto it = info.values.find(f.name());
  if (it == info.values.end()) return;
  BoundToExtents(f, it->second.extents, it->second.symbolic, it->second.extent_exprs);
  Pointwise(f, it->second.extents, it->second.symbolic);
}

void SafeScheduler::FuseSiblingOutputs(const PipelineInfo& info) {
  const size_t n = info.outputs.size();
  std::vector<std::set<std::string>> calls(n);  // the Funcs each output reads
  for (size_t i = 0; i < n; ++i) {
    for (const auto& [name, f] :
         Halide::Internal::find_transitive_calls(info.outputs[i].function())) {
      if (name != info.outputs[i].name()) calls[i].insert(name);
    }
  }
  std::vector<bool> grouped(n, false);
  for (size_t a = 0; a < n; ++a) {
    const auto lead = row_loops_.find(info.outputs[a].name());
    if (grouped[a] || lead == row_loops_.end()) continue;
    std::vector<size_t> group = {a};
    for (size_t b = a + 1; b < n; ++b) {
      if (grouped[b] || row_loops_.count(info.outputs[b].name()) == 0 ||
          info.output_extents[b] != info.output_extents[a]) {
        continue;
      }
      bool independent = true;  // Halide fuses no stage with one it reads
      for (size_t m : group) {
        independent = independent && calls[b].count(info.outputs[m].name()) == 0 &&
                      calls[m].count(info.outputs[b].name()) == 0;
      }
      if (independent) group.push_back(b);
    }
    if (group.size() < 2) continue;
    Func parent = info.outputs[a];
    std::ostringstream line;
    for (size_t k = 1; k < group.size(); ++k) {
      grouped[group[k]] = true;
      Func child = info.outputs[group[k]];
      child.compute_with(parent, lead->second);
      line << (k > 1 ? ", " : "") << child.name();
    }
    log_ << line.str() << ": compute_with(" << parent.name() << ", " << lead->second.name()
         << ")\n";
  }
}

void SafeScheduler::Transpose(Func f, const Extents& e, const Symbolic& sym) {
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
  std::vector<Var> outer_dims = {outer};  // and the dims above the tiled two
  outer_dims.insert(outer_dims.end(), args.begin() + 2, args.end());
  outer = FuseAll(f, outer_dims);
  if (threads_ > 1 && NumElements(e) >= params_.min_parallel_work) {
    f.parallel(outer);
    line << " parallel(" << outer.name() << ")";
  }
  log_ << line.str() << "\n";
}

namespace {

// A stage read only through arguments that an inlined Func drops (ReadAfterInlining):
// that Func is stored, so that its call keeps them and the stage has a reader. Halide 14
// cannot lower a stored Func that nothing reads, with or without explicit bounds: its
// loops' bounds are never defined. Small and rare: a constant gradient read at the
// argmax's tap.
void StoreFuncsDroppingStageReads(const PipelineInfo& info, std::set<std::string> stored,
                                  const std::vector<Halide::Func>& shared, SafeScheduler& s) {
  // Stored Funcs keep their calls' arguments: the operands and the shared values too.
  for (const Halide::Func& f : shared) stored.insert(f.name());
  for (const Stage& stage : info.stages) {
    for (const Stage::Operand& operand : stage.operands) stored.insert(operand.func.name());
  }
  std::set<std::string> dropping;
  const std::set<std::string> reached = ReadAfterInlining::Of(info, stored, &dropping);
  bool unread = false;
  for (const Stage& stage : info.stages) unread |= reached.count(stage.acc.name()) == 0;
  if (!unread || dropping.empty()) return;
  std::map<std::string, Halide::Internal::Function> env;
  for (const Halide::Func& out : info.outputs) {
    const auto calls = Halide::Internal::find_transitive_calls(out.function());
    env.insert(calls.begin(), calls.end());
  }
  for (const std::string& name : dropping) {
    auto it = env.find(name);
    if (it == env.end()) continue;
    Halide::Func(it->second).compute_root();
    s.Log(name + ": compute_root (drops an argument that reads a stage)");
  }
}

}  // namespace

}  // namespace safe_default_internal

using safe_default_internal::OutputSymbolic;
using safe_default_internal::SafeScheduler;
using safe_default_internal::StoreFuncsDroppingStageReads;

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

std::string StoreInlineBreaks(const PipelineInfo& info, const Halide::Target& target,
                              int parallelism) {
  std::vector<Halide::Internal::Function> outputs;
  for (const Halide::Func& f : info.outputs) outputs.push_back(f.function());
  std::set<std::string> stored;
  for (const auto& [name, fn] : Halide::Internal::build_environment(outputs)) {
    if (!LeftInlined(fn)) stored.insert(name);
  }
  SafeScheduler s(target, parallelism, ScheduleParams());
  s.set_symbolic_min_extent(info.symbolic_min_extent);
  for (const InlineBreak& b : InlineBudgetBreaks(info, stored)) {
    s.StoreBreak(b, info.values.at(b.func.name()));
  }
  return s.text();
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
  std::vector<Halide::Func> shared = ComparedReductionOperands(info);
  // Funcs stored by their own schedule: outputs, accumulators and matmul results.
  std::set<std::string> materialized;
  for (const Halide::Func& f : info.outputs) materialized.insert(f.name());
  for (const Stage& stage : info.stages) {
    materialized.insert(stage.acc.name());
    if (stage.result.defined()) materialized.insert(stage.result.name());
  }
  std::set<std::string> stored = materialized;
  for (const Halide::Func& f : shared) stored.insert(f.name());
  for (const Stage& stage : info.stages) {
    for (const Stage::Operand& o : stage.operands) stored.insert(o.func.name());
  }
  // Inlining bounded (inline_budget.h): a cluster too large to inline whole takes the
  // general path, its breaks stored at root.
  const std::vector<InlineBreak> breaks = InlineBudgetBreaks(info, stored);
  if (shared.empty() && breaks.empty() && params.row_pipeline && s.RowPipeline(info)) {
    return s.text();
  }
  for (const Halide::Func& f : shared) s.StoreCompared(f, info);
  for (const InlineBreak& b : breaks) {
    s.StoreBreak(b, info.values.at(b.func.name()));
    stored.insert(b.func.name());
    materialized.insert(b.func.name());
    shared.push_back(b.func);  // stored: keeps its calls' arguments (below)
  }
  StoreFuncsDroppingStageReads(info, materialized, shared, s);
  // Expensive values that inlining would compute several times per element: stored
  // once, before the stages, whose operands then read them (shared_values.h).
  for (const SharedValue& v : SharedExpensiveValues(info, stored)) {
    s.StoreShared(v, info.values.at(v.func.name()));
    materialized.insert(v.func.name());
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
      case StageKind::kConv:
        s.Conv(stage, materialized);
        break;
      case StageKind::kAttention:
        s.Attention(stage);
        break;
    }
  }
  for (size_t i = 0; i < info.outputs.size(); ++i) {
    // A MatMul (or Conv) result that is also an output already has its tiled schedule.
    bool scheduled = false;
    for (const Stage& stage : info.stages) {
      scheduled |= (IsTiled(stage.kind) || stage.kind == StageKind::kLibraryMatMul ||
                    stage.kind == StageKind::kAttention) &&
                   stage.result.name() == info.outputs[i].name();
    }
    if (!scheduled) {
      s.Pointwise(info.outputs[i], info.output_extents[i], OutputSymbolic(info, i), true);
    }
  }
  s.FuseSiblingOutputs(info);
  return s.text();
}

}  // namespace schedule
}  // namespace braze
