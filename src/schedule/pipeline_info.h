// What the lowering tells the schedulers about a cluster's Halide pipeline: the output
// Funcs with their exact extents, and every Func that has an update definition.
//
// Internal header: it includes Halide.h, so only src/lower and src/schedule .cc files
// may include it. The autoschedulers need only the outputs (estimates); the safe default
// schedule needs the stages, because docs/HALIDE14.md rule 2 says every Func with an update
// definition must be compute_root or compute_at (an unscheduled softmax took 106 s).
#ifndef BRAZE_SCHEDULE_PIPELINE_INFO_H_
#define BRAZE_SCHEDULE_PIPELINE_INFO_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "Halide.h"
#include "schedule/scheduler.h"

namespace braze {
namespace schedule {

// Extents in Halide dim order (dim 0 innermost). Rank-0 values are 1-D of extent 1.
// In a symbolic pipeline an extent may be symbolic (see Symbolic): then it holds the
// estimate, the size the kernel was first compiled for, not a fact.
using Extents = std::vector<int64_t>;

// Which extents of an Extents are symbolic (parallel to it; empty: none is). A symbolic
// extent comes from a -1 dim of the program (a placeholder's, an input_signature's) and
// is only known at run time: one kernel serves every size >= kMinSymbolicExtent, so a
// schedule must not assume its value. It may split such a dim by a constant factor of
// at most kMinSymbolicExtent with ShiftInwards (valid for every extent >= the factor),
// but never bound() it, never round it up, and never rely on a factor dividing it.
using Symbolic = std::vector<bool>;
using braze::kMinSymbolicExtent;  // schedule/scheduler.h

// True when dim d of `s` is symbolic.
inline bool IsSymbolic(const Symbolic& s, size_t d) { return d < s.size() && s[d]; }
inline bool AnySymbolic(const Symbolic& s) {
  for (bool b : s) {
    if (b) return true;
  }
  return false;
}

enum class StageKind {
  kReduction,  // Sum/Mean/Max/Min: `acc` reduces over an RDom (float Max/Min: a Tuple)
  kArgMax,     // `acc` is the smallest index holding the maximum
  kMatMul,     // `acc` (+= over k) is read only by `result`, a pure copy of it
  // An extern stage calling oneDNN: its GEMM (device/cpu_gemm.h) or, despite the name,
  // its convolutions (device/cpu_conv.h), which schedule alike: `acc` and
  // `result` are the extern Func, which must be stored (compute_root), as must the
  // `operands` it is handed (a cluster input is handed over in place, not listed).
  kLibraryMatMul,
  // A direct convolution or one of its gradients (lower/lower_conv.cc): as kMatMul,
  // `acc` (+= over `rdom`: a window and channels, or the batch and image for a filter
  // gradient) is read only by `result`, its pure copy, and `operands` are worth storing.
  // Dim 0 is the dim to vectorize (the operands vary contiguously along it); the rows
  // of a register tile are dim 1, or dim 2 when dim 1 is too short (a filter's one
  // input channel). The update may have a predicate (RDom::where: padding taps).
  kConv,
  // An attention op (lower/lower_attention.cc): `result` (pure, dims (c, row, batch...),
  // or (row, batch...) for a logsumexp) reads `acc`, whose update walks tiles of the
  // other sequence; `attention` says which Funcs are computed per tile. The schedule
  // must compute those inside the tile loop: at root they would be [Tq, Tk].
  kAttention,
};

// Stages tiled like a matmul: an accumulator per register tile of `result`.
inline bool IsTiled(StageKind kind) {
  return kind == StageKind::kMatMul || kind == StageKind::kConv;
}

struct Stage {
  StageKind kind = StageKind::kReduction;
  Halide::Func acc;     // the Func with the update definition
  Halide::Func result;  // kMatMul and kConv only: the pure Func that reads `acc`
  // kMatMul and kConv only: operand Funcs the k loop reads (computed operands, a repacked b^T),
  // worth computing once rather than inlining; cluster inputs are read in place.
  struct Operand {
    Halide::Func func;
    Extents extents;
    bool transpose = false;  // b^T repacked: a transpose of its source
    Symbolic symbolic;       // of extents
    // kLibraryMatMul: each dim's run-time extent (Halide order), which bounds the
    // stored operand: Halide cannot see through the extern stage's bounds query.
    std::vector<Halide::Expr> extent_exprs;
  };
  std::vector<Operand> operands;
  Halide::RDom rdom;  // the update's reduction domain
  Extents extents;    // of acc (and result)
  Symbolic symbolic;  // of extents
  // The run-time extent of each symbolic dim of acc (Halide order; undefined for a
  // constant dim; empty when none is symbolic): what bound() may use for them.
  std::vector<Halide::Expr> symbolic_extents;
  int64_t reduction_extent = 1;     // product of the RDom extents (an estimate when symbolic)
  bool reduction_symbolic = false;  // some RDom extent is symbolic
  // True when the RDom walks the input's innermost (contiguous) dim, so vectorizing the
  // update over acc's dim 0 would turn contiguous loads into gathers.
  bool reduces_innermost = false;
  // A GPU online softmax's pass (lower/online_softmax.h): dim 0 of acc is lanes, each a
  // serial walk over its part of a row (an update no rfactor takes), which the row's
  // combines (the stages reading acc) read across the lanes. The GPU heuristic computes it
  // where they compute their partials, a thread per lane.
  bool lanes = false;
  int64_t row_length = 0;  // lanes: the length of the rows the lanes walk
  // A Conv2D, or a Conv2DBackpropInput at stride 1 (a Conv2D of dy over the flipped
  // filter), lowered for a GPU (lower/lower_conv.cc): what the GPU heuristic needs to
  // stage its operands in shared-memory tiles (gpu_conv_tiles.h). The update reads its
  // image (x, or dy) and filter only through two pure views that clamp every index but
  // the batch into the tensor, so the views may be computed over any box (a
  // constant-size tile past an edge) without reading outside a buffer; inlined, they are
  // the clamped reads every convolution makes. x_view undefined: not such a stage.
  struct ConvWindow {
    Halide::Func x_view;  // the image's Halide dims: NHWC (c, w, h, n), NCHW (w, h, c, n)
    // The filter's Halide dims (out channel, rdom channel, kw, kh): HWIO's (co, ci, kw,
    // kh), or the backprop's repacked (c, j, kw, kh).
    Halide::Func f_view;
    bool nchw = false;
    int64_t kh = 1, kw = 1, stride_h = 1, stride_w = 1, dilation_h = 1, dilation_w = 1;
    int64_t cg = 1;  // image channels per group: rdom.x's extent
    int64_t og = 1;  // output channels per group
    int64_t groups = 1;
  };
  ConvWindow conv;
  // A kAttention stage's passes, each one reduction over tiles of the other sequence:
  // a logsumexp pass (the forward's, whose acc is a (max, sum) Tuple over tiles and
  // whose `lse` is the pure logsumexp the next pass reads), then the weighted sum into
  // `acc`. A gradient op or the forward has a weighted-sum pass (its acc is the stage's
  // acc); the forward has a logsumexp pass before it; AttentionLogSumExp only that.
  struct AttentionPass {
    Halide::Func acc;   // the accumulator: the stage's acc, or the logsumexp's state
    Halide::RVar tile;  // acc's update RVar over tiles (its outermost loop)
    // Computed at `tile`, in order: operand tiles (pure, dim 0 the tile's position),
    // products (an update over the feature dim, dim 0 vectorizable), weights (pure) and
    // per-row tile reductions (an update over dim 0 of a product).
    std::vector<Halide::Func> per_tile;
    std::vector<Halide::Func> row_reductions;  // the per-row tile reductions among them
    std::vector<Halide::Func> staged;          // the operand tiles among them
  };
  struct Attention {
    std::vector<AttentionPass> passes;
    Halide::Func lse;             // the forward's logsumexp (pure, (row, batch...)); or undefined
    bool has_feature_dim = true;  // result's dim 0 is the feature dim (not a logsumexp)
    int64_t key_tile = 64;        // the tile of the other sequence the Funcs were built with
    int64_t width = 1;            // the widest of q's, k's and v's rows (D, Dv)
    int64_t rows = 1;             // the extent of result's row dim (an estimate when symbolic)
    // The weighted sum's acc has one feature more than the result, at index D: the sum
    // of the weights it used, which the result divides by (lower_attention.cc).
    bool normalized = false;
  };
  Attention attention;
};

// f(x, y, ...) = buffer(x, y, ...): the wrapper Func Halide gives every ImageParam, or
// a constant's. Storing one is a copy; schedules inline it.
inline bool IsPlainLoad(const Halide::Internal::Function& fn) {
  if (fn.has_update_definition() || fn.values().size() != 1) return false;
  const auto* call = fn.values()[0].as<Halide::Internal::Call>();
  if (call == nullptr || call->call_type != Halide::Internal::Call::Image) return false;
  if (call->args.size() != fn.args().size()) return false;
  for (size_t i = 0; i < call->args.size(); ++i) {
    const auto* v = call->args[i].as<Halide::Internal::Variable>();
    if (v == nullptr || v->name != fn.args()[i]) return false;
  }
  return true;
}

// Every expression of a Func: its pure values, then each update's values and arguments.
inline std::vector<Halide::Expr> AllValues(const Halide::Internal::Function& f) {
  std::vector<Halide::Expr> values = f.values();
  for (const auto& update : f.updates()) {
    for (const Halide::Expr& v : update.values()) values.push_back(v);
    for (const Halide::Expr& a : update.args()) values.push_back(a);
  }
  return values;
}

// Fuses `vars` (innermost first, consecutive in f's loop order) into one Var, named
// after them ("y_z_w"), and returns it: the loop a schedule then parallelizes or puts
// on GPU blocks. One var is returned as it is.
inline Halide::Var FuseAll(Halide::Func f, const std::vector<Halide::Var>& vars) {
  Halide::Var fused = vars[0];
  for (size_t d = 1; d < vars.size(); ++d) {
    Halide::Var next(fused.name() + "_" + vars[d].name());
    f.fuse(fused, vars[d], next);
    fused = next;
  }
  return fused;
}

struct PipelineInfo {
  // Pure Funcs, one per pipeline output. An output may also be read by other Funcs,
  // and may be a kMatMul stage's `result`.
  std::vector<Halide::Func> outputs;
  std::vector<Extents> output_extents;
  std::vector<Symbolic> output_symbolic;  // parallel to output_extents
  std::vector<Stage> stages;
  // True when some extent of the pipeline is symbolic: only the CPU safe default and the
  // GPU heuristic schedule it (their splits are chosen to hold for every size, see
  // Symbolic and gpu_schedule.h).
  bool symbolic = false;
  // The least run-time extent of a symbolic dim: kMinSymbolicExtent, or 1 for the kernel
  // that serves sizes below it (lowering: a class's estimate below kMinSymbolicExtent).
  int64_t symbolic_min_extent = kMinSymbolicExtent;
  // Every graph value the lowering defined as a Func, by the Func's name: its extents,
  // for a schedule that stores a value the pipeline would inline (shared_values.h).
  struct ValueExtents {
    Extents extents;
    Symbolic symbolic;
    std::vector<Halide::Expr> extent_exprs;  // a symbolic dim's run-time extent, else undefined
  };
  std::map<std::string, ValueExtents> values;
};

}  // namespace schedule
}  // namespace braze

#endif  // BRAZE_SCHEDULE_PIPELINE_INFO_H_
