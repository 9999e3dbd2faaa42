// The safe default schedule of a convolution (StageKind::kConv): the matmul's register
// tiles (safe_default_stages.cc) fitted to a conv's shapes. safe_scheduler.h maps the
// other files of the safe default; safe_default.h has the rules and why.
//
// The result is cut into tiles of `vectors` whole vectors of dim 0 by a strip of rows
// (dim 1, or dim 2 when dim 1 is shorter than a strip: a filter gradient's one input
// channel), both unrolled; the accumulator is computed per tile, its update reordered
// so the tile is innermost and the window outside it: the tile's accumulators stay in
// registers across the whole window (about 12 vectors, as the matmul's 3 x 4). The
// vectors per tile are chosen to waste the least on dim 0 (32 output channels: 4
// vectors of 8, not 3 vectors with a shifted half-empty tile). Tiles and every outer
// dim fuse into one loop, run in parallel in a few tasks per thread. Every split is
// ShiftInwards on the pure result, whose factors never exceed their extents: the
// accumulator's tile is then exact, with constant extents (no GuardWithIf anywhere).
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
using Halide::Var;
using Halide::VarOrRVar;

namespace {

// Accumulator vectors a tile keeps in flight: AVX2 has 16 registers (12 accumulators,
// the loaded vectors and a broadcast, as the matmul's 3 x 4), AVX-512 32. On the 2-vCPU
// Zen 5 VM (AVX-512), the CNN example's 3x3 convs of 32 -> 64 channels at 14x14, batch
// 128: 12 accumulators 20-21 ms forward, 17-34 input gradient, 7-15 filter gradient;
// 28 (4 vectors x 7 rows): 7-11, 4-5, 5-9 (best of 10, two runs each, a loaded machine).
int TileAccumulators(const Halide::Target& t) {
  return t.has_feature(Halide::Target::AVX512) ? 28 : 12;
}
// Parallel tasks per thread for the tiles: more than Pointwise's, since a conv's tiles
// differ in work at the padded edges.
constexpr int kTasksPerThread = 8;

// The number of vectors of w (1 to 4) per tile of an extent n that recomputes the
// least (ShiftInwards overlap), the most vectors among equals.
int TileVectors(int64_t n, int w) {
  int best = 1;
  int64_t best_cost = -1;
  for (int k = 1; k <= 4 && k * w <= std::max<int64_t>(n, w); ++k) {
    const int64_t tile = int64_t{k} * w;
    const int64_t cost = (n + tile - 1) / tile * tile;
    if (best_cost < 0 || cost <= best_cost) best = k, best_cost = cost;
  }
  return best;
}

// The strip of rows, at most `most`, that covers m rows with the least recomputation
// (the last strip shifts inwards over the one before), the longest among equals, from
// half of `most` up: 14 rows by at most 6 take strips of 5 (15 rows computed), not 6 (18).
int64_t Strip(int64_t m, int64_t most) {
  most = std::clamp<int64_t>(most, 1, std::max<int64_t>(m, 1));
  int64_t best = most, best_cost = (m + most - 1) / most * most;
  for (int64_t s = most - 1; s >= (most + 1) / 2; --s) {
    const int64_t cost = (m + s - 1) / s * s;
    if (cost < best_cost) best = s, best_cost = cost;
  }
  return best;
}

}  // namespace

void SafeScheduler::Conv(const Stage& s, const std::set<std::string>& materialized) {
  TiledOperands(s, materialized);
  Func res = s.result;
  Func acc = s.acc;
  const std::vector<Var> args = res.args();
  const int rank = static_cast<int>(args.size());
  const Extents& e = s.extents;
  const Symbolic& sym = s.symbolic;
  int row = 1;
  if (rank > 2 && Bound(e, sym, 1) < 4 && Bound(e, sym, 2) > Bound(e, sym, 1)) row = 2;
  const int64_t n = Bound(e, sym, 0);
  const int64_t m = Bound(e, sym, row);
  int vw = target_.natural_vector_size(res.output_types()[0]);
  while (vw > 1 && vw > n) vw /= 2;
  const int vectors = TileVectors(n, vw);
  const int tile_x = static_cast<int>(std::min<int64_t>(int64_t{vectors} * vw, n));
  const int64_t inner_rows = row == 2 ? Bound(e, sym, 1) : 1;  // dim 1 inside the tile
  const int strip = static_cast<int>(Strip(m, TileAccumulators(target_) / vectors / inner_rows));

  const Var x = args[0], y = args[row];
  Var xo("cv_xo"), xi("cv_xi"), yo("cv_yo"), yi("cv_yi");
  res.compute_root();
  BoundToExtents(res, e, sym, s.symbolic_extents);
  res.split(x, xo, xi, tile_x).split(y, yo, yi, strip);
  std::vector<VarOrRVar> order = {xi, yi};
  std::vector<Var> outer = {xo, yo};
  if (row == 2) order.push_back(args[1]);
  for (int d = row + 1; d < rank; ++d) outer.push_back(args[d]);
  order.insert(order.end(), outer.begin(), outer.end());
  res.reorder(order);
  Var level = FuseAll(res, outer);
  // The fused loop's least extent, for a ShiftInwards split of it into tasks.
  int64_t tiles = (n + tile_x - 1) / tile_x * ((m + strip - 1) / strip);
  for (int d = row + 1; d < rank; ++d) tiles *= Bound(e, sym, d);
  std::ostringstream line;
  line << res.name() << ": compute_root tile(" << tile_x << " of dim 0, " << strip << " of dim "
       << row << ")";
  if (threads_ > 1 && NumElements(e) * s.reduction_extent >= params_.min_parallel_work) {
    const int64_t task = std::max<int64_t>(1, tiles / (threads_ * kTasksPerThread));
    if (task > 1) {
      Var t("cv_task");
      res.split(level, level, t, static_cast<int>(task)).parallel(level);
      line << " parallel(" << level.name() << ", task " << task << ")";
      level = t;
    } else {
      res.parallel(level);
      line << " parallel(" << level.name() << ")";
    }
  }
  res.vectorize(xi, vw).unroll(xi).unroll(yi);
  line << " vectorize(" << vw << ") unroll";
  log_ << line.str() << "\n";

  const std::vector<Var> acc_args = acc.args();
  acc.compute_at(res, level).vectorize(acc_args[0], vw);
  std::vector<VarOrRVar> acc_order = {acc_args[0], acc_args[1]};
  if (row == 2) acc_order.push_back(acc_args[2]);
  for (int i = 0; i < s.rdom.dimensions(); ++i) acc_order.emplace_back(s.rdom[i]);
  acc.update(0).reorder(acc_order).vectorize(acc_args[0], vw);
  log_ << acc.name() << ": compute_at(" << res.name() << ", " << level.name()
       << ") update reorder(tile, rdom) vectorize(" << vw << ")\n";
}

}  // namespace safe_default_internal
}  // namespace schedule
}  // namespace braze
