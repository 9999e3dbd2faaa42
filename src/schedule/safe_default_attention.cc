// The safe default schedule of an attention op (StageKind::kAttention; lowering in
// lower/lower_attention.cc, design in docs/ATTENTION.md). safe_scheduler.h maps the
// other files of the safe default.
//
// The result is cut into tiles of rows (32, or fewer for a short or symbolic sequence),
// and the tiles of every batch entry fuse into one loop run in parallel. Each pass's
// accumulator is computed per row tile; its update walks the other sequence's tiles
// outermost, and every Func a tile needs (the staged operand tile, the products, the
// weights, the per-row tile reductions) is computed at that loop over one (rows x tile)
// box: the working set is a few tiles of 32 x 64 elements, in L1, and nothing of size
// Tq x Tk is ever allocated. Products vectorize over the tile's positions (their dim 0,
// contiguous after the transposed staging), the weighted sums over the feature dim.
#include <string>
#include <vector>

#include "schedule/safe_scheduler.h"

namespace braze {
namespace schedule {
namespace safe_default_internal {

using Halide::Func;
using Halide::RVar;
using Halide::Var;
using Halide::VarOrRVar;

namespace {

// Rows per tile: enough to reuse each staged tile of the other sequence, few enough
// that the tiles stay in L1.
constexpr int64_t kRowTile = 32;

// The vectors of a tile's row (64 positions, 4 vectors of 16 on AVX-512) and of an
// accumulator's row (D = 64: 4) are unrolled, not left to LLVM: a cluster that also
// holds a loop LLVM 14 miscompiles compiles with LLVM's loop optimizations off
// (docs/HALIDE14.md, the strided read-modify-write; the backward's delta = Sum(dO * O)
// is one), and the serial loop of 4 vectors then reloaded and stored each partial sum
// per step of the reduction: dq's cluster at T = 512 took 2.6x as long as unrolled
// (docs/ATTENTION.md). Unrolled, the partial sums stay in registers either way.
constexpr int64_t kMostUnrolled = 8;

// f's update `u` RVars, by name (the lowering's RDoms).
std::vector<RVar> UpdateRVars(const Func& f, int u) {
  std::vector<RVar> r;
  for (const auto& rv : f.function().update(u).schedule().rvars()) r.emplace_back(rv.var);
  return r;
}

}  // namespace

void SafeScheduler::Attention(const Stage& s) {
  Func res = s.result;
  const std::vector<Var> args = res.args();
  const Extents& e = s.extents;
  const int xdim = s.attention.has_feature_dim ? 1 : 0;
  const Halide::Type type = res.output_types()[0];
  std::ostringstream line;
  const int64_t rows = std::max<int64_t>(1, std::min(kRowTile, Bound(e, s.symbolic, xdim)));
  Var xo(res.name() + "_xo"), xi(res.name() + "_xi");
  res.compute_root();
  // Computed over all of its rows, not just the region its readers need: the row split
  // is sized for the full extent, and over fewer rows (a Pad's gradient reading rows 1
  // to 4 of 7) a tile of 7 shifted inwards below 0 and read the delta Sum's accumulator
  // at row -2 (braze-fuzz seed 14500136: "explicit bounds too small").
  BoundToExtents(res, e, s.symbolic, s.symbolic_extents);
  res.split(args[xdim], xo, xi, static_cast<int>(rows), kShift);
  std::vector<Var> outer = {xo};
  outer.insert(outer.end(), args.begin() + xdim + 1, args.end());
  const Var task = FuseAll(res, outer);
  res.parallel(task);
  // The features are static; an update cannot shift a split inwards (it would add
  // twice), so the accumulators take the widest vector that divides them exactly (D =
  // 64, 128: whole vectors; an odd D: scalar).
  int w = 1;
  if (xdim == 1) {
    w = VectorWidth(type, e[0]);
    while (w > 1 && e[0] % w != 0) w /= 2;
    if (w > 1) res.vectorize(args[0], w);
  }
  line << res.name() << ": rows in tiles of " << rows << ", parallel over " << task.name()
       << (w > 1 ? ", vectorized over the features" : "") << "\n";
  const int wu = VectorWidth(type, s.attention.key_tile);
  if (s.attention.lse.defined()) {
    Func lse = s.attention.lse;
    lse.compute_at(res, task);
    line << lse.name() << ": compute_at(" << res.name() << ", " << task.name() << ")\n";
  }
  for (const Stage::AttentionPass& pass : s.attention.passes) {
    Func acc = pass.acc;
    acc.compute_at(res, task);
    const std::vector<Var> aargs = acc.args();
    std::vector<VarOrRVar> order;
    const std::vector<RVar> rv = UpdateRVars(acc, 0);
    if (rv.size() == 2) {  // a weighted sum: (c, u, x, tile, batch...)
      // A normalized sum's extra feature (the sum of its weights) rounds the features
      // up to whole vectors: one more vector per (row, key), D / w + 1.
      int64_t features = e[0];
      if (s.attention.normalized) {
        features = (e[0] + w) / w * w;
        acc.bound(aargs[0], 0, static_cast<int>(features));
      }
      if (w > 1) acc.vectorize(aargs[0], w);
      order = {aargs[0], rv[0], aargs[1], rv[1]};
      order.insert(order.end(), aargs.begin() + 2, aargs.end());
      acc.update().reorder(order);
      if (w > 1) {
        acc.update().vectorize(aargs[0], w);
        // The sum's extra vector does not count against the unrolling (AVX2 at D = 64:
        // 8 + 1 vectors unrolled, as 8 were).
        if (e[0] / w <= kMostUnrolled) acc.update().unroll(aargs[0]);
      }
    } else {  // the logsumexp's state: (x, tile, batch...)
      order = {aargs[0], rv[0]};
      order.insert(order.end(), aargs.begin() + 1, aargs.end());
      acc.update().reorder(order);
    }
    line << acc.name() << ": compute_at(" << res.name() << ", " << task.name()
         << "), tiles outermost\n";
    for (Func f : pass.per_tile) {
      f.compute_at(acc, pass.tile);
      const std::vector<Var> fargs = f.args();
      bool reduction = false;
      for (const Func& r : pass.row_reductions) reduction |= r.name() == f.name();
      if (reduction) {
        // (x, tile, batch...) over the tile's positions: a short serial loop per row.
        continue;
      }
      f.vectorize(fargs[0], wu);
      const bool unroll = s.attention.key_tile / wu <= kMostUnrolled;
      if (unroll) f.unroll(fargs[0]);
      if (f.has_update_definition()) {  // a product: (u, x, t, batch...) over c
        const std::vector<RVar> rc = UpdateRVars(f, 0);
        std::vector<VarOrRVar> forder = {fargs[0], rc[0]};
        forder.insert(forder.end(), fargs.begin() + 1, fargs.end());
        f.update().reorder(forder).vectorize(fargs[0], wu);
        if (unroll) f.update().unroll(fargs[0]);
      }
    }
    line << "  per tile at " << pass.tile.name() << ":";
    for (const Func& f : pass.per_tile) line << " " << f.name();
    if (s.attention.key_tile / wu <= kMostUnrolled) line << " (vectors unrolled)";
    line << "\n";
  }
  Log(line.str());
}

}  // namespace safe_default_internal
}  // namespace schedule
}  // namespace braze
