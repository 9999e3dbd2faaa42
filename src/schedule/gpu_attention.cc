// The GPU heuristic's attention schedule; see gpu_attention.h.
#include "schedule/gpu_attention.h"

#include <algorithm>
#include <vector>

#include "schedule/gpu_tiles.h"

namespace braze {
namespace schedule {
namespace gpu {
namespace {

using Halide::VarOrRVar;

std::vector<RVar> UpdateRVars(const Func& f) {
  std::vector<RVar> r;
  for (const auto& rv : f.function().update(0).schedule().rvars()) r.emplace_back(rv.var);
  return r;
}

bool Contains(const std::vector<Func>& fs, const Func& f) {
  for (const Func& g : fs) {
    if (g.name() == f.name()) return true;
  }
  return false;
}

// Threads across `features` (at most kFeatureLanes) and the serial features per thread,
// so that threads x serial covers them with the least waste: 65 -> 13 x 5, 64 -> 16 x 4,
// 17 -> 9 x 2, 3 -> 3 x 1.
struct FeatureSplit {
  int threads;
  int serial;
};
FeatureSplit SplitFeatures(int64_t features) {
  const int64_t n = std::max<int64_t>(features, 1);
  const int serial = static_cast<int>(CeilDiv(n, kFeatureLanes));
  return {static_cast<int>(CeilDiv(n, serial)), serial};
}

// A stage of f(c, x, ...) (c the features, x the block's rows): a thread per (feature
// lane, row), adjacent lanes on adjacent features (coalesced), each serial over its
// features; `inner` loops inside each thread's, `outer` outside the threads' (in order).
void FeatureThreads(Halide::Stage st, const Var& c, const Var& x, FeatureSplit split,
                    const std::vector<VarOrRVar>& inner, const std::vector<VarOrRVar>& outer) {
  Var co(c.name() + "_o"), ci(c.name() + "_i");
  st.split(c, co, ci, split.threads, kGuard);
  std::vector<VarOrRVar> order = inner;
  order.insert(order.end(), {co, ci, x});
  order.insert(order.end(), outer.begin(), outer.end());
  st.reorder(order).gpu_threads(ci, x);
}

// The weighted sum acc(c, x, batch...) += w(u, x, tile) * operand(tile, u, c) over (u,
// tile), at the block: each tile's sum is factored out (rfactor) into `part` (c, x, ...,
// tile), which each thread computes for its kWeightRows rows x `serial` adjacent
// features in registers (unrolled: a weight's load serves `serial` features, an
// operand's kWeightRows rows), then adds into acc once per tile. The features are
// padded to threads x serial (the lowering clamps the operand's column), so every box
// is constant.
void ScheduleWeightedSum(Func acc, const std::vector<RVar>& rv, int64_t features, int rows) {
  const std::vector<Var> args = acc.args();
  const Var c = args[0], x = args[1];
  const FeatureSplit split = SplitFeatures(features);
  acc.bound(c, 0, split.threads * split.serial).bound_extent(x, rows);
  std::vector<VarOrRVar> batch(args.begin() + 2, args.end());
  FeatureThreads(acc, c, x, split, {}, batch);

  Var tile(acc.name() + "_tile");
  Func part = acc.update().rfactor(rv[1], tile);
  Var ct(c.name() + "_t"), cs(c.name() + "_s"), xt(x.name() + "_t"), xr(x.name() + "_r");
  std::vector<VarOrRVar> order = {cs, xr, ct, xt, rv[1]};
  order.insert(order.end(), args.begin() + 2, args.end());
  acc.update()
      .split(c, ct, cs, split.serial, kGuard)
      .split(x, xt, xr, kWeightRows, kGuard)
      .reorder(order)
      .gpu_threads(ct, xt);
  part.compute_at(acc, ct).unroll(c).unroll(x);
  const RVar u = UpdateRVars(part)[0];
  part.update().reorder(c, x, u).unroll(c).unroll(x);
}

}  // namespace

int GpuRowTile(const Stage& s) {
  return s.attention.width <= kGpuWideRow ? kGpuRowTile : kGpuRowTile / 2;
}

void ScheduleAttention(const Stage& s, std::ostream& log, std::set<std::string>& placed) {
  const int rows = GpuRowTile(s);
  Func res = s.result;
  const std::vector<Var> args = res.args();
  const int xdim = s.attention.has_feature_dim ? 1 : 0;
  Var xo(res.name() + "_xo"), xi(res.name() + "_xi");
  res.compute_root().split(args[xdim], xo, xi, rows, kGuard);
  std::vector<Var> outer = {xo};
  outer.insert(outer.end(), args.begin() + xdim + 1, args.end());
  const Var block = FuseAll(res, outer);
  res.gpu_blocks(block);
  if (xdim == 1) {  // a thread per (feature lane, row): the stores coalesce along features
    FeatureThreads(res, args[0], xi, SplitFeatures(s.extents[0]), {}, {block});
  } else {
    res.gpu_threads(xi);
  }
  log << res.name() << ": attention, a block per " << rows << " rows (" << block.name() << ")\n";
  if (s.attention.lse.defined()) {
    Func lse = s.attention.lse;
    lse.compute_at(res, block).bound_extent(lse.args()[0], rows).gpu_threads(lse.args()[0]);
  }
  for (const Stage::AttentionPass& pass : s.attention.passes) {
    Func acc = pass.acc;
    const std::vector<Var> aargs = acc.args();
    const std::vector<RVar> rv = UpdateRVars(acc);
    // The accumulator of the block's rows, in shared memory.
    acc.compute_at(res, block);
    if (rv.size() == 2) {  // a weighted sum (c, x, batch...) over (u, tile)
      ScheduleWeightedSum(acc, rv, s.extents[0] + (s.attention.normalized ? 1 : 0), rows);
    } else {  // the logsumexp's state (x, tile, batch...): a thread per row
      acc.bound_extent(aargs[0], rows).gpu_threads(aargs[0]);
      std::vector<VarOrRVar> order = {aargs[0], rv[0]};
      order.insert(order.end(), aargs.begin() + 1, aargs.end());
      acc.update().reorder(order).gpu_threads(aargs[0]);
    }
    placed.insert(acc.name());
    for (Func f : pass.per_tile) {
      const std::vector<Var> fargs = f.args();
      if (Contains(pass.row_reductions, f)) {  // (x, tile, batch...): a thread per row
        f.compute_at(acc, pass.tile);
        f.bound_extent(fargs[0], rows).gpu_threads(fargs[0]);
        f.update().gpu_threads(fargs[0]);
        placed.insert(f.name());
      } else if (f.has_update_definition()) {
        // A product (u, x, ...) over c: its tile in shared memory (a wrapper Func), a
        // thread per box of kProductTile positions x kProductTile rows, whose dot
        // products it sums in registers (the product computed inside the wrapper's
        // thread loops, unrolled: a feature's load of each operand serves kProductTile
        // products), then stores once.
        Func shared = f.in();
        const Var u = shared.args()[0], x = shared.args()[1];
        Var uo(u.name() + "_o"), ui(u.name() + "_i"), xo(x.name() + "_o"), xi(x.name() + "_i");
        shared.compute_at(acc, pass.tile)
            .bound_extent(x, rows)
            .tile(u, x, uo, xo, ui, xi, kProductTile, kProductTile, kGuard)
            .unroll(ui)
            .unroll(xi)
            .gpu_threads(uo, xo);
        f.compute_at(shared, uo).unroll(fargs[0]).unroll(fargs[1]);
        f.update().reorder(fargs[0], fargs[1], UpdateRVars(f)[0]).unroll(fargs[0]).unroll(fargs[1]);
        placed.insert(f.name());
      } else if (Contains(pass.staged, f)) {  // an operand tile (u, c, t, ...): a thread
        // per (position, feature lane)
        f.compute_at(acc, pass.tile);
        Var co(fargs[1].name() + "_o"), ci(fargs[1].name() + "_i");
        f.split(fargs[1], co, ci, kFeatureLanes, kGuard)
            .reorder(fargs[0], ci, co)
            .gpu_threads(fargs[0], ci);
      } else {  // weights (u, x, t, ...): a thread per (position, pair of rows)
        f.compute_at(acc, pass.tile);
        Var xo(fargs[1].name() + "_o"), xi(fargs[1].name() + "_i");
        f.bound_extent(fargs[1], rows)
            .split(fargs[1], xo, xi, kWeightRows, kGuard)
            .reorder(xi, fargs[0], xo)
            .gpu_threads(fargs[0], xo);
      }
    }
    log << acc.name() << ": at the block; per tile at " << pass.tile.name()
        << ", in shared memory:";
    for (const Func& f : pass.per_tile) log << " " << f.name();
    log << "\n";
  }
}

}  // namespace gpu
}  // namespace schedule
}  // namespace braze
