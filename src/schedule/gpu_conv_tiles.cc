// Shared-memory tiles for a GPU Conv2D; see gpu_conv_tiles.h.
#include "schedule/gpu_conv_tiles.h"

#include <algorithm>
#include <string>
#include <vector>

#include "braze/dtype.h"
#include "schedule/gpu_tiles.h"

namespace braze {
namespace schedule {
namespace gpu {
namespace {

using Halide::MemoryType;
using Window = Stage::ConvWindow;

// Outputs per thread along dims 0 and 1 where a dim has at least kRegisterMin of them.
inline constexpr int kRegisterTile = 2;
inline constexpr int64_t kRegisterMin = 4;
// Multiply-adds per staged element below which staging is taken not to pay: a guess
// (nothing here was timed on a GPU), meant to keep strided windows over few channels,
// whose elements a thread per output reads about once anyway, on the old schedule.
inline constexpr int64_t kMinReuse = 2;

struct Plan {
  int rx = 1, ry = 1;      // outputs per thread along dims 0 and 1
  int tx = 1, ty = 1;      // threads along dims 0 and 1
  int64_t t0 = 1, t1 = 1;  // the block's tile
  int64_t chunk = 1;       // input channels per chunk
  Extents x_box, f_box;    // the views' boxes per chunk (Halide dims)
};

// Input elements along one spatial dim that `tile` outputs read over every tap.
int64_t Patch(int64_t tile, int64_t stride, int64_t taps, int64_t dilation) {
  return (tile - 1) * stride + (taps - 1) * dilation + 1;
}

// The box of x_view one block reads for a chunk of k channels. NCHW: the tile is (ow,
// oh) at one output channel, so one group's k channels. NHWC: the tile is (co, ow) at
// one oh; t0 consecutive output channels span at most CeilDiv(t0 - 1, og) + 1 groups,
// whose chunks are cg apart.
Extents XBox(const Window& w, int64_t t0, int64_t t1, int64_t k) {
  if (w.nchw) {
    return {Patch(t0, w.stride_w, w.kw, w.dilation_w), Patch(t1, w.stride_h, w.kh, w.dilation_h), k,
            1};
  }
  const int64_t channels = w.groups == 1 ? k : CeilDiv(t0 - 1, w.og) * w.cg + k;
  return {channels, Patch(t1, w.stride_w, w.kw, w.dilation_w), Patch(1, 1, w.kh, w.dilation_h), 1};
}

// The box of f_view (co, ci, kw, kh) one block reads for a chunk of k channels.
Extents FBox(const Window& w, int64_t t0, int64_t k) { return {w.nchw ? 1 : t0, k, w.kw, w.kh}; }

int64_t Aligned(int64_t elements) { return CeilDiv(elements, kSharedAlign) * kSharedAlign; }

// Shared bytes of a plan with chunk k: both boxes and the accumulators.
int64_t Bytes(const Window& w, const Plan& p, int64_t k, int element_bytes) {
  const int64_t elements = Aligned(NumElements(XBox(w, p.t0, p.t1, k))) +
                           Aligned(NumElements(FBox(w, p.t0, k))) + Aligned(p.t0 * p.t1);
  return elements * element_bytes;
}

// The tile, the chunk and the boxes; an empty string, or why there are no tiles.
std::string Choose(const Stage& s, Plan& p) {
  const Window& w = s.conv;
  const Extents& e = s.extents;
  if (e.size() != 4 || s.reduction_symbolic || s.rdom.dimensions() != 3) {
    return "not a Conv2D of static window";
  }
  p.rx = e[0] >= kRegisterMin ? kRegisterTile : 1;
  p.ry = e[1] >= kRegisterMin ? kRegisterTile : 1;
  // Not rounded up to powers of two: a 14-wide output is one tile of 7 x 2, where 8 x 2
  // would stage a wider patch for outputs that do not exist.
  p.tx = static_cast<int>(std::min<int64_t>(CeilDiv(e[0], p.rx), kWarp));
  p.ty = static_cast<int>(std::min<int64_t>(CeilDiv(e[1], p.ry), kMaxThreads / p.tx));
  p.t0 = int64_t{p.tx} * p.rx;
  p.t1 = int64_t{p.ty} * p.ry;
  const int bytes = s.acc.function().output_types()[0].bytes();
  int64_t k = w.cg;
  while (k > 1 && Bytes(w, p, k, bytes) > kSharedBudget) --k;
  if (Bytes(w, p, k, bytes) > kSharedBudget) {
    return "one input channel's patch (" + std::to_string(NumElements(XBox(w, p.t0, p.t1, 1))) +
           " elements) exceeds the shared-memory budget";
  }
  k = CeilDiv(w.cg, CeilDiv(w.cg, k));  // the same chunks, balanced
  p.chunk = k;
  p.x_box = XBox(w, p.t0, p.t1, k);
  p.f_box = FBox(w, p.t0, k);
  // Only the outputs inside the tensor count.
  const int64_t macs = std::min(p.t0, e[0]) * std::min(p.t1, e[1]) * k * w.kw * w.kh;
  const int64_t staged = NumElements(p.x_box) + NumElements(p.f_box);
  if (macs < kMinReuse * staged) {
    return "each staged element would feed fewer than " + std::to_string(kMinReuse) +
           " multiply-adds (" + std::to_string(macs) + " for " + std::to_string(staged) + ")";
  }
  return "";
}

std::string BoxText(const Extents& box) {
  std::string t;
  for (size_t d = 0; d < box.size(); ++d) t += (d > 0 ? "x" : "") + std::to_string(box[d]);
  return t;
}

// `view` computed per chunk into shared memory over `box`, its elements spread over the
// block's tx x ty threads (dim 0 fastest: coalesced loads). The loads use the block's
// two thread dims, not one of tx * ty: Halide sizes each thread dim of a kernel by the
// largest loop any Func gives it, so a 1-D loop of tx * ty threads beside the tiles'
// tx x ty made blocks of tx * ty x ty threads, over CUDA's 1024 (CUDA_ERROR_INVALID_VALUE
// at every launch of the ResNet block's convolutions on an H200).
void StageView(Func view, Func acc, const RVar& chunk, const Extents& box, int tx, int ty,
               std::ostream& log) {
  const std::vector<Var> args = view.args();
  view.compute_at(acc, chunk).store_in(MemoryType::GPUShared);
  for (size_t d = 0; d < args.size(); ++d) view.bound_extent(args[d], static_cast<int>(box[d]));
  const Var all = FuseAll(view, args);
  Var o(view.name() + "_o"), i(view.name() + "_i"), it(view.name() + "_it"),
      jt(view.name() + "_jt");
  view.split(all, o, i, tx * ty, kGuard).split(i, jt, it, tx).gpu_threads(it, jt);
  log << view.name() << ": staged in shared memory per chunk, box " << BoxText(box) << ", " << tx
      << "x" << ty << " threads\n";
}

}  // namespace

bool ConvTiles(const Stage& s, std::ostream& log) {
  Plan p;
  const std::string why = Choose(s, p);
  if (!why.empty()) {
    log << s.result.name() << ": conv, no shared-memory tiles: " << why << "\n";
    return false;
  }
  Func res = s.result, acc = s.acc;
  const std::vector<Var> a = res.args();
  const std::string n = res.name();
  // The result: a block per tile (batch and the other dim fused in), a thread per rx x ry
  // outputs, element xo * t0 + xr * tx + xt: adjacent threads, adjacent outputs.
  Var xo(n + "_xo"), yo(n + "_yo"), xi(n + "_xi"), yi(n + "_yi"), xr(n + "_xr"), yr(n + "_yr"),
      xt(n + "_xt"), yt(n + "_yt"), tile(n + "_t");
  res.compute_root()
      .tile(a[0], a[1], xo, yo, xi, yi, static_cast<int>(p.t0), static_cast<int>(p.t1), kGuard)
      .split(xi, xr, xt, p.tx, kGuard)
      .split(yi, yr, yt, p.ty, kGuard)
      .reorder({xr, yr, xt, yt, xo, yo, a[2], a[3]})
      .fuse(xo, yo, tile);
  const Var block = FuseAll(res, {tile, a[2], a[3]});
  res.gpu_blocks(block).gpu_threads(xt, yt).unroll(xr).unroll(yr);
  // The accumulators: the block's whole tile (a constant box, so the thread loops have
  // constant extents), each thread its own outputs, as in the result.
  const std::vector<Var> v = acc.args();
  const std::string m = acc.name();
  Var ar(m + "_xr"), at(m + "_xt"), br(m + "_yr"), bt(m + "_yt");
  acc.compute_at(res, block)
      .store_in(MemoryType::GPUShared)
      .bound_extent(v[0], static_cast<int>(p.t0))
      .bound_extent(v[1], static_cast<int>(p.t1))
      .split(v[0], ar, at, p.tx, kGuard)
      .split(v[1], br, bt, p.ty, kGuard)
      .reorder({ar, br, at, bt, v[2], v[3]})
      .gpu_threads(at, bt)
      .unroll(ar)
      .unroll(br);
  // The update: chunks of input channels outermost (serial, at the block level), then
  // the threads. Each chunk's sum is rfactored into `part`, computed per thread inside the
  // thread loops (rx x ry values: registers), so a multiply-add reads only the staged
  // operands, and the shared accumulators take one add per chunk.
  RVar rco(m + "_rco"), rci(m + "_rci");
  Var u(m + "_u"), cr(m + "_cr"), ct(m + "_ct"), dr(m + "_dr"), dt(m + "_dt");
  acc.update().split(s.rdom[0], rco, rci, static_cast<int>(p.chunk), kGuard);
  Func part = acc.update().rfactor(rco, u);
  // A thread's outputs are adjacent (ct * rx + cr): part's box is rx x ry.
  acc.update()
      .split(v[0], ct, cr, p.rx, kGuard)
      .split(v[1], dt, dr, p.ry, kGuard)
      .reorder({cr, dr, ct, dt, rco, v[2], v[3]})
      .gpu_threads(ct, dt)
      .unroll(cr)
      .unroll(dr);
  const std::vector<Var> w = part.args();
  part.compute_at(acc, ct).unroll(w[0]).unroll(w[1]);
  part.bound_extent(w[0], p.rx).bound_extent(w[1], p.ry);
  part.update()
      .reorder({w[0], w[1], rci, s.rdom[1], s.rdom[2], w[2], w[3], w[4]})
      .unroll(w[0])
      .unroll(w[1]);
  log << n << ": conv, shared-memory tiles " << p.t0 << "x" << p.t1 << " (" << p.rx << "x" << p.ry
      << " outputs per thread, " << p.tx << "x" << p.ty << " threads), blocks over " << block.name()
      << "\n"
      << m << ": compute_at(" << n << ", " << block.name() << ") in shared memory, "
      << CeilDiv(s.conv.cg, p.chunk) << " chunks of " << p.chunk << " input channels\n"
      << part.name() << ": a chunk's sums, compute_at(" << m << ", " << ct.name()
      << "), registers\n";
  StageView(s.conv.x_view, acc, rco, p.x_box, p.tx, p.ty, log);
  StageView(s.conv.f_view, acc, rco, p.f_box, p.tx, p.ty, log);
  return true;
}

}  // namespace gpu
}  // namespace schedule
}  // namespace braze
