// The GPU heuristic's tiling building blocks; see gpu_tiles.h.
#include "schedule/gpu_tiles.h"

#include <algorithm>
#include <string>

#include "braze/dtype.h"

namespace braze {
namespace schedule {
namespace gpu {

using Halide::VarOrRVar;
using Halide::Internal::Function;

// A default GpuScheduleParams schedules exactly as the constants did.
static_assert(GpuScheduleParams{}.block_threads == kMaxThreads);
static_assert(GpuScheduleParams{}.tile_x == kWarp);
static_assert(GpuScheduleParams{}.row_elements == kRowElementsPerThread);
static_assert(GpuScheduleParams{}.warp_row == kWarpRow);
static_assert(GpuScheduleParams{}.vector == kCudaVector);
static_assert(GpuScheduleParams{}.matmul_tile == kMatMulTile);

int64_t CeilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

int Pow2AtLeast(int64_t n, int cap) {
  int p = 1;
  while (p < n && p < cap) p *= 2;
  return p;
}

int RowThreads(int64_t len, const GpuScheduleParams& p) {
  return std::max(kWarp, Pow2AtLeast(CeilDiv(len, p.row_elements), p.block_threads));
}

int RowVector(int64_t len, int threads) {
  return len % (int64_t{threads} * kCudaVector) == 0 ? kCudaVector : 1;
}

Extents WithoutUnitDims(const Extents& e) {
  Extents out;
  for (int64_t v : e) {
    if (v != 1) out.push_back(v);
  }
  return out;
}

Var PointwiseTile(Func f, const std::vector<Var>& vars, const Extents& e, int vector,
                  const GpuScheduleParams& p) {
  const int max_threads = p.block_threads;
  const int width = std::min(p.tile_x, max_threads);
  if (vars.size() > 1) {
    std::vector<VarOrRVar> order(vars.begin(), vars.end());
    f.reorder(order);
  }
  const bool known = !e.empty();
  int64_t e0 = known ? e[0] : 0;
  if (vector > 1) {
    Var lanes(f.name() + "_lanes");
    f.split(vars[0], vars[0], lanes, vector, Halide::TailStrategy::RoundUp).vectorize(lanes);
    e0 /= vector;
  }
  const int64_t outer = known ? NumElements(Extents(e.begin() + 1, e.end())) : 0;
  Var xo(f.name() + "_xo"), xi(f.name() + "_xi");
  if (vars.size() == 1) {
    f.split(vars[0], xo, xi, known ? Pow2AtLeast(e0, max_threads) : max_threads, kGuard)
        .gpu_blocks(xo)
        .gpu_threads(xi);
    return xi;
  }
  int tx = width, ty = max_threads / width;
  if (known && outer == 1) {
    tx = Pow2AtLeast(e0, max_threads);
    ty = 1;
  } else if (known) {
    tx = Pow2AtLeast(e0, width);
    ty = Pow2AtLeast(outer, max_threads / tx);
  }
  const Var rest = FuseAll(f, std::vector<Var>(vars.begin() + 1, vars.end()));
  Var yo(f.name() + "_yo"), yi(f.name() + "_yi"), b(f.name() + "_b");
  f.tile(vars[0], rest, xo, yo, xi, yi, tx, ty, kGuard)
      .fuse(xo, yo, b)
      .gpu_blocks(b)
      .gpu_threads(xi, yi);
  return xi;
}

RVar FuseRVars(Func acc, const Halide::RDom& r) {
  RVar fused = r[0];
  for (int d = 1; d < r.dimensions(); ++d) {
    RVar next(acc.name() + "_rf" + std::to_string(d));
    acc.update().fuse(fused, r[d], next);
    fused = next;
  }
  return fused;
}

int64_t CooperativeBytes(const Stage& s, int row_threads) {
  int64_t acc_bytes = 0;
  for (const Halide::Type& t : s.acc.function().output_types()) acc_bytes += t.bytes();
  int64_t threads = std::min<int64_t>(s.reduction_extent, row_threads);
  int64_t elements = 0;
  for (;; threads = CeilDiv(threads, kFanIn)) {
    elements += CeilDiv(threads, kSharedAlign) * kSharedAlign;
    if (threads <= 1) break;
  }
  return (elements + kSharedAlign) * acc_bytes;  // and acc itself
}

Extents LoadExtents(const Function& fn) {
  const auto* call = fn.values()[0].as<Halide::Internal::Call>();
  Extents e;
  for (size_t d = 0; d < call->args.size(); ++d) {
    if (call->image.defined()) {
      e.push_back(call->image.dim(static_cast<int>(d)).extent());
      continue;
    }
    const int64_t* v = Halide::Internal::as_const_int(call->param.extent_constraint(d));
    if (v == nullptr) return {};
    e.push_back(*v);
  }
  return e;
}

}  // namespace gpu
}  // namespace schedule
}  // namespace braze
