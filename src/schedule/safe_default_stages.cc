// The safe default schedule of the pipeline's stages: reductions and ArgMax computed at
// root (parallel over an outer dim, vectorized where loads stay contiguous), MatMul's
// register-tiled schedule, and the CPU GEMM library's extern stage with its operands
// stored whole. safe_scheduler.h maps the other files of the safe default;
// safe_default.h has the rules and why.
#include <algorithm>
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
using Halide::TailStrategy;
using Halide::Var;
using Halide::VarOrRVar;

namespace {

// The least work (elements reduced) worth a parallel task of its own: a Halide 14
// worker takes each loop iteration under the thread pool's lock. Row sums, one task a
// row, on 2 AVX2 cores: rows of 1024 ran slower than serial, rows of 4096 1.6x faster.
constexpr int64_t kMinTaskWork = 4096;

// The most outputs a column reduction may have to take SmallOutputRfactor's partial
// sums per chunk (a batch norm's channels: 64 to 2048).
constexpr int64_t kMaxColumnOutputs = 8192;

// A Halide element type as Braze spells dtypes ("f32", "bf16").
std::string TypeName(const Halide::Type& t) {
  if (t.is_bfloat()) return "bf16";
  if (t.is_float()) return "f" + std::to_string(t.bits());
  return (t.is_int() ? "i" : "u") + std::to_string(t.bits());
}

// A GEMM call's operand and product types, "bf16 x bf16 -> bf16": the schedule text and
// --log_compiles say which path a matmul took (docs/CPU_GEMM.md).
std::string GemmTypes(const Func& gemm) {
  std::vector<std::string> names;
  const std::vector<Halide::ExternFuncArgument>& args = gemm.function().extern_arguments();
  for (size_t i = 0; i < 2 && i < args.size(); ++i) {
    const Halide::ExternFuncArgument& arg = args[i];
    if (arg.is_func()) {
      names.push_back(TypeName(Halide::Internal::Function(arg.func).output_types()[0]));
    } else if (arg.is_buffer()) {
      names.push_back(TypeName(arg.buffer.type()));
    } else if (arg.is_image_param()) {
      names.push_back(TypeName(arg.image_param.type()));
    } else {
      names.push_back("?");
    }
  }
  names.resize(2, "?");
  return names[0] + " x " + names[1] + " -> " + TypeName(gemm.output_types()[0]);
}

}  // namespace

// A stored Func is computed over all of its extents, not just the region its readers
// need: the splits here are sized for the full extents, and over a smaller region (a
// Slice of a reduction or a matmul) they reached past the inputs (braze-fuzz seeds
// 2204 and 2909: a Const read at index 5 of 4, and at -1). A symbolic dim has no
// constant extent (its value is only an estimate): it is bounded to its run-time
// extent when the lowering gave it (`exprs`), so a tile of up to 16 never shifts
// below 0 when a reader needs only a few rows; else it is left free.
void SafeScheduler::BoundToExtents(Func f, const Extents& e, const Symbolic& sym,
                                   const std::vector<Halide::Expr>& exprs) {
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
void SafeScheduler::SymbolicParallelDim0(Halide::Stage update, const Stage& s,
                                         std::ostringstream& line) {
  const Var x = s.acc.args()[0];
  if (s.reduces_innermost && s.reduction_extent >= kMinTaskWork) {
    update.parallel(x);
    line << " parallel(" << x.name() << ") (symbolic: a task per element)";
  } else {
    if (s.reduces_innermost) update.unscheduled();  // a loop per row, as defined
    line << " serial (symbolic dim 0)";
  }
}

void SafeScheduler::Reduction(const Stage& s) {
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
  log_ << f.name() << ": compute_root vectorize(" << w << ")";
  // The init is a fill of the whole accumulator: as large as the output, which for a
  // MaxPoolGrad's argmax (lower_pool.cc: a value and an index per pooled element) is an
  // activation, 6.4 MB a step in the CNN example, that one thread wrote.
  if (threads_ > 1 && rank >= 2 && NumElements(s.extents) >= params_.min_parallel_work &&
      s.extents[rank - 1] >= threads_) {
    f.parallel(args[rank - 1]);
    log_ << " parallel(" << args[rank - 1].name() << ")";
  }
  log_ << "\n";
  Halide::Stage update = f.update(0);
  std::ostringstream line;
  line << f.name() << ".update(0):";
  if (SmallOutputRfactor(s, line)) {
    log_ << line.str() << "\n";
    return;
  }
  const bool parallel =
      threads_ > 1 && NumElements(s.extents) * s.reduction_extent >= params_.min_parallel_work;
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
  } else if (s.reduces_innermost && !sym0 && x.name() == args[0].name() &&
             InnermostRfactor(s, line)) {
    // Vectorized across the row (below).
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

// A softmax's or layer norm's row sums in a cluster that is no row pipeline (several
// outputs, a matmul beside them) were scalar loops over each row, the row's elementwise
// producers (an exp) inlined into them scalar too: in a GPT block's attention cluster
// the softmax's f64 sum of exp was a third of the kernel. The split and rfactor are the
// row pipeline's (safe_default_rows.cc): lanes partial sums per element, vectorized,
// then folded as one vector reduce. The split divides the reduction exactly.
bool SafeScheduler::InnermostRfactor(const Stage& s, std::ostringstream& line) {
  if (s.reduction_symbolic || s.rdom.dimensions() != 1) return false;
  // An ArgMax's (value, index) tuple stays a scalar loop, so that which of several tied
  // maxima it picks never depends on how lanes fold. A float Max or Min is a tuple too
  // (lower_reduce.cc: a max, a min and a max of the values' bits), each element exact
  // and independent of order, so its lanes fold to the same bits: the softmax's row max
  // beside the attention's scores was a scalar loop of three integer ops per element.
  if (s.kind == StageKind::kArgMax || s.acc.num_update_definitions() != 1) return false;
  const int64_t* extent = Halide::Internal::as_const_int(s.rdom[0].extent());
  if (extent == nullptr) return false;
  const int64_t n = *extent;
  int lanes = params_.row_lanes * target_.natural_vector_size(Halide::Float(32));
  while (lanes > 1 && (n % lanes != 0 || n < 2 * lanes)) lanes /= 2;
  if (lanes < 4) return false;
  Func f = s.acc;
  const Halide::RVar r = s.rdom[0];
  Halide::RVar ro(r.name() + "_o"), ri(r.name() + "_i");
  Var u(f.name() + "_lane");
  Halide::Stage update = f.update(0);
  update.split(r, ro, ri, lanes);  // exact: lanes divides the extent
  try {
    Func intm = update.rfactor(ri, u);
    intm.compute_at(f, f.args()[0]).vectorize(u);
    intm.update(0).reorder({VarOrRVar(u), VarOrRVar(ro)}).vectorize(u);
  } catch (const Halide::Error&) {
    line << " split(" << r.name() << ", " << lanes << ") (no rfactor)";
    return true;  // the split update stays scalar, and exact
  }
  // Outside the try, as in the row pipeline: a throw here would leave a half-made
  // schedule; it fails the scheduler instead (the compile falls through).
  update.atomic().vectorize(ri);
  line << " split(" << r.name() << ", " << lanes << ").rfactor vectorize tree";
  return true;
}

// A loss's Mean over a [32, 56, 56, 64] activation was one serial scalar loop of 6.4M
// f64 adds, and a batch norm's per-channel sums (64 outputs, over N, H and W) swept
// the whole activation once per vector of channels, each task reading 32 of every 256
// bytes (the ResNet block step's clusters, docs/CONVOLUTIONS.md). Both are now partial
// sums per chunk of the outermost RVar (an image of the batch; a 1-D RDom's exact
// chunks), the chunks in parallel, each one pass over its part of the input: a scalar
// one summed into vector lanes along the innermost RVar, a column one with the
// outputs innermost (vectorized, contiguous loads). The accumulator then adds the
// chunks' partials in a fixed order. Every split divides its extent (no GuardWithIf
// update), and the chunks and lanes follow from the extents alone, so the order of the
// additions, and the result, is the same at every thread count.
bool SafeScheduler::SmallOutputRfactor(const Stage& s, std::ostringstream& line) {
  if (s.kind != StageKind::kReduction || s.reduction_symbolic || AnySymbolic(s.symbolic)) {
    return false;
  }
  const int64_t outputs = NumElements(s.extents);
  const bool scalar = outputs == 1;
  // Column reductions whose partials stay small (a chunk's are at most 64 KiB of f64).
  const bool column = !scalar && !s.reduces_innermost && outputs <= kMaxColumnOutputs;
  if ((!scalar && !column) || s.reduction_extent < kMinTaskWork) return false;
  if (s.acc.num_update_definitions() != 1) return false;
  if (scalar && s.acc.outputs() != 1) return false;
  const int dims = s.rdom.dimensions();
  std::vector<int64_t> extent(dims);
  for (int i = 0; i < dims; ++i) {
    const int64_t* e = Halide::Internal::as_const_int(s.rdom[i].extent());
    if (e == nullptr) return false;
    extent[i] = *e;
  }
  int lanes = 1;
  if (scalar) {
    lanes = params_.row_lanes * target_.natural_vector_size(Halide::Float(32));
    while (lanes > 1 && (extent[0] % lanes != 0 || extent[0] < lanes)) lanes /= 2;
    if (lanes < 4) lanes = 1;
  }
  // The chunks: the outermost RVar (after the lanes' split, for a 1-D RDom), whole when
  // it has at most 64 iterations (an image of the batch), else split exactly into at
  // most 64; a 1-D RDom keeps at least 16 vectors a chunk.
  const int64_t outer_extent = dims >= 2 ? extent[dims - 1] : extent[0] / lanes;
  const int64_t min_per_chunk = dims >= 2 ? 1 : 16;
  int64_t chunks = 1;
  if (dims >= 2 && outer_extent <= 64) {
    chunks = outer_extent;
  } else {
    for (int64_t c = 64; c >= 2 && chunks == 1; --c) {
      if (outer_extent % c == 0 && outer_extent / c >= min_per_chunk) chunks = c;
    }
  }
  if (chunks < 2 && (column || lanes == 1)) return false;

  Func f = s.acc;
  Halide::Stage update = f.update(0);
  const Var u(f.name() + "_chunk"), lane(f.name() + "_lane");
  std::vector<std::pair<Halide::RVar, Var>> preserved;
  Halide::RVar inner = s.rdom[0];
  if (lanes > 1) {
    Halide::RVar body(inner.name() + "_body"), lane_r(inner.name() + "_lane");
    update.split(inner, body, lane_r, lanes);  // exact
    inner = body;
    preserved.emplace_back(lane_r, lane);
  }
  Halide::RVar chunk_rest;  // the outermost RVar's part inside a chunk, when split
  bool split_outer = false;
  if (chunks >= 2) {
    Halide::RVar outer = dims >= 2 ? s.rdom[dims - 1] : inner;
    if (chunks < outer_extent) {
      Halide::RVar o(outer.name() + "_chunk"), rest(outer.name() + "_rest");
      update.split(outer, o, rest, static_cast<int>(outer_extent / chunks));  // exact
      if (dims == 1) inner = rest;
      chunk_rest = rest;
      split_outer = dims >= 2;
      outer = o;
    }
    preserved.emplace_back(outer, u);
  }
  // The partial sums' loops, innermost first: the lanes (scalar) or the outputs
  // (column), the innermost RVar, the middle ones, what is left of the outermost, the
  // chunk.
  std::vector<VarOrRVar> order;
  if (lanes > 1) order.emplace_back(lane);
  if (column) {
    for (const Var& v : f.args()) order.emplace_back(v);
  }
  order.emplace_back(inner);
  for (int i = 1; i < dims - 1; ++i) order.emplace_back(s.rdom[i]);
  if (dims >= 2 && chunks < 2) order.emplace_back(s.rdom[dims - 1]);
  if (split_outer) order.emplace_back(chunk_rest);
  if (chunks >= 2) order.emplace_back(u);
  Func intm;
  try {
    intm = update.rfactor(preserved);
  } catch (const Halide::Error&) {
    line << " (no rfactor)";
    return true;  // the exact splits alone, serial
  }
  // Outside the try: a throw here would leave a half-made schedule; it fails the
  // scheduler instead (the compile falls through).
  intm.compute_root();
  Halide::Stage partial = intm.update(0);
  partial.reorder(order);
  if (lanes > 1) {
    partial.vectorize(lane);
    intm.vectorize(lane);
  }
  int w = 1;
  if (column) {
    // The outputs' dim 0 in whole vectors (exact), contiguous in the input.
    w = VectorWidth(f.output_types()[0], s.extents[0]);
    while (w > 1 && s.extents[0] % w != 0) w /= 2;
    if (w > 1) {
      partial.vectorize(f.args()[0], w);
      intm.vectorize(f.args()[0], w);
    }
  }
  if (chunks >= 2 && threads_ > 1) partial.parallel(u);
  line << " rfactor(" << chunks << " chunks, " << (column ? "outputs vectorized " : "")
       << (column ? w : lanes) << (column ? ")" : " lanes)")
       << (chunks >= 2 && threads_ > 1 ? " parallel" : "");
  return true;
}

// The register tile of a MatMul whose columns (dim 0) are symbolic: at most
// kMinSymbolicExtent columns (n, a SplitBound), so as many whole vectors as fit in 16
// (AVX2 f32: 2, AVX-512: 1), and strips of 12 / vectors rows, to keep about 12
// accumulators in flight like the 3 x 4 tile (AVX2 f32: 16 x 6, BLIS's sgemm kernel:
// 97-140 GFLOP/s at 512^3 and 1024^3 on 2 AVX2 cores, as fast as the static 3 x 4
// tile; 16 x 4 gave 64-101). The row tile is a multiple of the strip, so the
// accumulator's strips stay exact. (AVX-512's 16 x 12 is unmeasured.)
void SafeScheduler::SymbolicColumnTile(int64_t n, int vw, int* tile_x, int* tile_y, int* strip) {
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
void SafeScheduler::LibraryMatMul(const Stage& s, const std::set<std::string>& materialized) {
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
       << " (the CPU GEMM library: " << GemmTypes(gemm) << "), compute_root bound to its extents\n";
}

// docs/HALIDE14.md §2f: the result is tiled (3 vectors) x 32 rows in 4-row strips, and the
// accumulator is computed per strip so its 3x4 vectors stay in registers across the
// k loop. Shapes are exact, so the tiles shrink to fit small extents (a vector, 1 row)
// and every split is ShiftInwards on the pure result or exact on the accumulator: no
// GuardWithIf (see Reduction for why), and constant extents that unroll.
void SafeScheduler::TiledOperands(const Stage& s, const std::set<std::string>& materialized) {
  for (const Stage::Operand& o : s.operands) {
    Func f = o.func;
    if (materialized.count(f.name()) > 0 || !scheduled_operands_.insert(f.name()).second) {
      continue;
    }
    if (!o.transpose && IsPlainLoad(f.function())) continue;  // a copy would gain nothing
    f.compute_root();
    rooted_operands_.insert(f.name());
    log_ << f.name() << ": matmul operand, compute_root\n";
    // Stored whole: a convolution may read only part of an operand (a strided window
    // reads one column of three), and a vectorized loop over a region narrower than
    // its vector shifts inwards past the operand's start, into reads before its input's
    // (braze-fuzz seed 13100574).
    BoundToExtents(f, o.extents, o.symbolic, o.extent_exprs);
    if (o.transpose) {
      Transpose(f, o.extents, o.symbolic);
    } else {
      Pointwise(f, o.extents, o.symbolic);
    }
  }
}

void SafeScheduler::MatMul(const Stage& s, const std::set<std::string>& materialized) {
  TiledOperands(s, materialized);  // first: computed once, at root
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
  std::vector<Var> tiles = {xy};  // and the batch dims
  tiles.insert(tiles.end(), args.begin() + 2, args.end());
  const Var outer = FuseAll(res, tiles);
  if (threads_ > 1 && NumElements(s.extents) * s.reduction_extent >= params_.min_parallel_work) {
    res.parallel(outer);
  }
  res.split(yi, yi, yii, strip).vectorize(xi, vw).unroll(xi).unroll(yii);
  acc.compute_at(res, yi).vectorize(acc.args()[0], vw);
  acc.update(0)
      .reorder({VarOrRVar(acc.args()[0]), VarOrRVar(acc.args()[1]), VarOrRVar(s.rdom.x)})
      .vectorize(acc.args()[0], vw);
  log_ << res.name() << ": compute_root tile(" << tile_x << ", " << tile_y
       << ") parallel split(yi, " << strip << ") vectorize(" << vw << ")\n"
       << acc.name() << ": compute_at(" << res.name() << ", yi) update reorder(x, y, k) vectorize("
       << vw << ")\n";
}

}  // namespace safe_default_internal
}  // namespace schedule
}  // namespace braze
