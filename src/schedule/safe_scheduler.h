// The safe default schedule's scheduler class, defined across three files, one family
// of Funcs each (safe_default.h has the rules and why):
//   safe_default.cc         the drivers (ApplySafeDefault, StreamsAnOutput); pure Funcs:
//                           outputs vectorized and parallel in chunks or rows, streamed
//                           outputs, transposes
//   safe_default_rows.cc    row pipelines (softmax, layernorm): accumulators computed per
//                           output row, their updates rfactored, shared row values
//   safe_default_stages.cc  reductions and ArgMax at root, MatMul's register tiles, the
//                           CPU GEMM library's extern stage
//   safe_default_conv.cc    convolutions' register tiles
//   safe_default_attention.cc  attention's row tiles and per-tile Funcs
// One class, so that what a schedule has done so far (its text, the streamed outputs,
// the operands already stored) is shared by all three.
//
// Internal to src/schedule/safe_default*.cc: includes Halide.h (via pipeline_info.h).
#ifndef BRAZE_SCHEDULE_SAFE_SCHEDULER_H_
#define BRAZE_SCHEDULE_SAFE_SCHEDULER_H_

#include <algorithm>
#include <cstdint>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "schedule/inline_budget.h"
#include "schedule/pipeline_info.h"
#include "schedule/shared_values.h"
#include "schedule/stored_schedule.h"

namespace braze {
namespace schedule {
namespace safe_default_internal {

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
inline constexpr Halide::TailStrategy kShift = Halide::TailStrategy::ShiftInwards;

// The largest factor a ShiftInwards split of dim d may use: its extent, or for a
// symbolic dim at most `least`, its least run-time extent (PipelineInfo::
// symbolic_min_extent: kMinSymbolicExtent, or 1 in the kernel for smaller sizes).
// Equal to e[d] for every static dim.
inline int64_t SplitBound(const Extents& e, const Symbolic& s, size_t d, int64_t least) {
  return IsSymbolic(s, d) ? std::min(e[d], least) : e[d];
}

// The smallest run-time extent of dims [from, e.size()) fused into one: the factor a
// ShiftInwards split of the fused var may use.
inline int64_t FusedSplitBound(const Extents& e, const Symbolic& s, size_t from, int64_t least) {
  int64_t p = 1;
  for (size_t d = from; d < e.size(); ++d) p *= SplitBound(e, s, d, least);
  return p;
}

// info.output_symbolic[i], or no symbolic dim where the lowering left it empty.
const Symbolic& OutputSymbolic(const PipelineInfo& info, size_t i);

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

  // One task's share of `extent`, in whole vectors of w.
  int64_t Chunk(int64_t extent, int w) const {
    const int64_t tasks = threads_ * int64_t{params_.tasks_per_thread};
    const int64_t chunk = (extent + tasks - 1) / tasks;
    return ((std::max<int64_t>(chunk, w) + w - 1) / w) * w;
  }

  // ---- Pure Funcs and streaming stores (safe_default.cc) ----

  // Whether output f (extents e) is written with streaming stores (stream_stores.h): on
  // x86, every dim static, at least stream_min_mib MiB. Below a few MiB the output is
  // better left in the caches for its reader; the default (32 MiB) is past the L2 of
  // every core together on the machines measured (docs/STREAMING_STORES.md).
  bool Streams(const Halide::Func& f, const Extents& e, const Symbolic& sym) const;
  // Whether output f (static, on x86) is small enough that its pipeline's data stays in
  // the caches: below the size from which outputs stream (stream_min_mib, or its default
  // where streaming is off).
  bool CacheResident(const Halide::Func& f, const Extents& e, const Symbolic& sym) const;
  // Whether a row pipeline's output f, its rows (dim 0) vectorized by w, streams a row at
  // a time: rows of whole vectors, 1 to 16 KiB (a shorter row copies too little per
  // call; a longer one would not fit Halide's stack buffers).
  bool StreamsRows(const Halide::Func& f, const Extents& e, const Symbolic& sym, int w) const;
  // A streamed tile: about kStreamTileBytes of whole vectors of w, at most `extent`.
  int64_t StreamTile(const Halide::Func& f, int64_t extent, int w) const;
  // Pointwise's tile for output f when it streams (elements of dim 0, whole vectors),
  // else 0. The tile cuts the span dim 0 is scheduled in: a task's chunk when dim 0 is
  // split into chunks, else the row. Tiles must divide the span, or be at most a quarter
  // of it: a last tile shifted inwards over the one before recomputes their overlap.
  int64_t PointwiseStreamTile(const Halide::Func& f, const Extents& e, const Symbolic& sym) const;
  // Whether Pointwise splits a static dim 0 into one chunk per parallel task (rank 1, or
  // too few rows to share out).
  bool ChunksDim0(const Extents& e, const Symbolic& sym) const;
  // Splits dim 0 (or `inner`, the chunk's var) of a streamed output f into tiles of
  // `tile`, vectorized by w, unless the tile is the whole span; records f as streamed.
  void StreamTiles(Halide::Func f, Halide::Var inner, int64_t span, int64_t tile, int w,
                   std::ostream& line);
  // Vectorizes dim 0 and parallelizes over the outer dims of a pure definition.
  // `output`: f is a pipeline output (its buffer's extents can be tested at run time).
  void Pointwise(Halide::Func f, const Extents& e, const Symbolic& sym, bool output = false);
  // A value inlining would evaluate several times per element (shared_values.h):
  // computed once at root, bound to its extents, vectorized and parallel as Pointwise.
  void StoreShared(const SharedValue& v, const PipelineInfo::ValueExtents& e);
  // A value stored to bound inlining (inline_budget.h): computed once at root, bound to
  // its extents, vectorized and parallel as Pointwise.
  void StoreBreak(const InlineBreak& b, const PipelineInfo::ValueExtents& e);
  // A value a reduction and a comparison both read (extremum_operands.h): computed once
  // at root, and, where its extents are known, bound to them, vectorized and parallel.
  void StoreCompared(Halide::Func f, const PipelineInfo& info);
  // Outputs of the same static extents that Pointwise parallelized over their rows, none
  // reading another: computed in one loop nest (compute_with at the row loop), so each
  // row of the values they share (an optimizer's gradient, m and v in its three updates)
  // is read from memory once and from the cache after (policy, issue 38).
  void FuseSiblingOutputs(const PipelineInfo& info);
  // A transpose (f(x, y) = g(y, x) in dims 0 and 1): square tiles vectorized in both
  // dims, so that Halide loads whole rows of g and transposes them in registers instead
  // of gathering with the row stride; tiles in parallel over the outer dims.
  void Transpose(Halide::Func f, const Extents& e, const Symbolic& sym);

  // ---- Row pipelines (safe_default_rows.cc) ----

  // Row pipelines (softmax, layernorm): one output of rank >= 2 whose every reduction
  // runs over exactly the output's dim 0 and is read only at the reader's own row.
  // Then each accumulator is computed per output row (compute_at the output's row
  // loop, as docs/HALIDE14.md's hand schedule does), so the row stays in cache between the
  // reductions and the output, and its update is vectorized by rfactor over an exact
  // split of the row's RVar (no GuardWithIf on any update). Returns false, with nothing
  // scheduled, when the pipeline is not of that form. A symbolic row (or reduction) has
  // no exact split: its updates stay scalar loops over the row.
  bool RowPipeline(const PipelineInfo& info);

  // ---- Reductions and matmuls (safe_default_stages.cc) ----

  // A reduction or ArgMax accumulator: compute_root, parallel over its outermost pure
  // dim; the update is vectorized over dim 0 only when that keeps loads contiguous.
  void Reduction(const Stage& s);
  // A reduction over the innermost input dim with a static extent, outside a row
  // pipeline (a cluster with several outputs or a matmul): the update's RVar split by
  // lanes and rfactored into vector partials computed per output element, folded as a
  // vector reduce. False, with the update unchanged, when it does not apply or Halide
  // cannot prove the operator associative.
  bool InnermostRfactor(const Stage& s, std::ostringstream& line);
  // A reduction with few outputs and static extents: to one element (a loss's Mean
  // over a whole activation), or over outer dims to a few columns (a batch norm's
  // per-channel sums). The update is rfactored into partial sums per chunk of the
  // outermost RVar (in parallel), per vector lane of the innermost RVar (to one
  // element) or with the outputs innermost and vectorized (columns); the accumulator
  // adds them serially. The chunks and lanes follow from the extents alone, never from
  // the thread count: the order of the additions, and so the result, is the same on
  // every machine. False, with the update unchanged, when it does not apply.
  bool SmallOutputRfactor(const Stage& s, std::ostringstream& line);
  // The library GEMM's extern stage and the operands it is handed, stored whole.
  void LibraryMatMul(const Stage& s, const std::set<std::string>& materialized);
  // docs/HALIDE14.md §2f: the register-tiled matmul.
  void MatMul(const Stage& s, const std::set<std::string>& materialized);

  // ---- Convolutions (safe_default_conv.cc) ----

  // A kConv stage: register tiles of whole vectors of dim 0 by a strip of rows,
  // accumulated in registers across the window, the tiles in parallel.
  void Conv(const Stage& s, const std::set<std::string>& materialized);

  // ---- Attention (safe_default_attention.cc) ----

  // A kAttention stage: row tiles in parallel, each pass's accumulator per row tile and
  // every per-tile Func at the pass's tile loop (never a [Tq, Tk] buffer).
  void Attention(const Stage& s);

 private:
  static std::vector<Halide::Func> SharedRowValues(const PipelineInfo& info,
                                                   const std::set<std::string>& accs);
  // f computed at root, bound to e's extents, scheduled as Pointwise; `why` logged.
  void StoreAtRoot(Halide::Func f, const PipelineInfo::ValueExtents& e, const std::string& why);
  static void BoundToExtents(Halide::Func f, const Extents& e, const Symbolic& sym,
                             const std::vector<Halide::Expr>& exprs = {});
  void SymbolicParallelDim0(Halide::Stage update, const Stage& s, std::ostringstream& line);
  static void SymbolicColumnTile(int64_t n, int vw, int* tile_x, int* tile_y, int* strip);
  // A tiled stage's operands (MatMul, Conv): each computed once, at root, unless it is
  // stored anyway or a plain load.
  void TiledOperands(const Stage& s, const std::set<std::string>& materialized);

  const Halide::Target& target_;
  const int threads_;
  const ScheduleParams params_;
  int64_t least_ = kMinSymbolicExtent;  // a symbolic dim's least run-time extent
  std::ostringstream log_;
  std::vector<std::string> streamed_;  // outputs written with streaming stores
  // Pointwise outputs of static extents, not streamed, parallel over their rows: the
  // row loop's Var (FuseSiblingOutputs).
  std::map<std::string, Halide::Var> row_loops_;
  std::set<std::string> scheduled_operands_;
  std::set<std::string> rooted_operands_;  // the operands made compute_root so far
};

}  // namespace safe_default_internal
}  // namespace schedule
}  // namespace braze

#endif  // BRAZE_SCHEDULE_SAFE_SCHEDULER_H_
