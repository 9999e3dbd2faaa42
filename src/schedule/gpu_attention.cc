// The GPU heuristic's attention schedule; see gpu_attention.h.
#include "schedule/gpu_attention.h"

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

}  // namespace

void ScheduleAttention(const Stage& s, std::ostream& log, std::set<std::string>& placed) {
  Func res = s.result;
  const std::vector<Var> args = res.args();
  const int xdim = s.attention.has_feature_dim ? 1 : 0;
  Var xo(res.name() + "_xo"), xi(res.name() + "_xi");
  res.compute_root().split(args[xdim], xo, xi, kGpuRowTile, kGuard);
  std::vector<Var> outer = {xo};
  outer.insert(outer.end(), args.begin() + xdim + 1, args.end());
  const Var block = FuseAll(res, outer);
  if (xdim == 1) res.reorder(args[0], xi, block);
  res.gpu_blocks(block).gpu_threads(xi);
  log << res.name() << ": attention, a block per " << kGpuRowTile << " rows (" << block.name()
      << "), a thread per row\n";
  if (s.attention.lse.defined()) {
    Func lse = s.attention.lse;
    lse.compute_at(res, block).bound_extent(lse.args()[0], kGpuRowTile).gpu_threads(lse.args()[0]);
  }
  for (const Stage::AttentionPass& pass : s.attention.passes) {
    Func acc = pass.acc;
    const std::vector<Var> aargs = acc.args();
    const std::vector<RVar> rv = UpdateRVars(acc);
    // The accumulator of the block's rows, in shared memory; a thread per row.
    acc.compute_at(res, block);
    if (rv.size() == 2) {  // a weighted sum: (c, u, x, tile, batch...)
      acc.bound_extent(aargs[1], kGpuRowTile).gpu_threads(aargs[1]);
      std::vector<VarOrRVar> order = {aargs[0], rv[0], aargs[1], rv[1]};
      order.insert(order.end(), aargs.begin() + 2, aargs.end());
      acc.update().reorder(order).gpu_threads(aargs[1]);
    } else {  // the logsumexp's state: (x, tile, batch...)
      acc.bound_extent(aargs[0], kGpuRowTile).gpu_threads(aargs[0]);
      std::vector<VarOrRVar> order = {aargs[0], rv[0]};
      order.insert(order.end(), aargs.begin() + 1, aargs.end());
      acc.update().reorder(order).gpu_threads(aargs[0]);
    }
    placed.insert(acc.name());
    for (Func f : pass.per_tile) {
      f.compute_at(acc, pass.tile);
      const std::vector<Var> fargs = f.args();
      if (Contains(pass.row_reductions, f)) {  // (x, tile, batch...): a thread per row
        f.bound_extent(fargs[0], kGpuRowTile).gpu_threads(fargs[0]);
        f.update().gpu_threads(fargs[0]);
        placed.insert(f.name());
      } else if (f.has_update_definition()) {  // a product (u, x, ...) over c
        f.bound_extent(fargs[1], kGpuRowTile).gpu_threads(fargs[1]);
        const std::vector<RVar> rc = UpdateRVars(f);
        std::vector<VarOrRVar> order = {fargs[0], rc[0], fargs[1]};
        order.insert(order.end(), fargs.begin() + 2, fargs.end());
        f.update().reorder(order).gpu_threads(fargs[1]);
        placed.insert(f.name());
      } else if (Contains(pass.staged, f)) {  // an operand tile (u, c, t, ...)
        f.gpu_threads(fargs[0]);
      } else {  // weights (u, x, t, ...): a thread per row
        f.bound_extent(fargs[1], kGpuRowTile).gpu_threads(fargs[1]);
      }
    }
    log << acc.name() << ": at the block, a thread per row; per tile at " << pass.tile.name()
        << ", in shared memory:";
    for (const Func& f : pass.per_tile) log << " " << f.name();
    log << "\n";
  }
}

}  // namespace gpu
}  // namespace schedule
}  // namespace braze
