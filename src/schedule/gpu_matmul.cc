// The GPU heuristic's matmuls and convolutions (gpu_heuristic.h): shared-memory conv
// tiles where they apply (gpu_conv_tiles.h), else a result tile per block with each
// thread's output accumulated in registers.
#include <string>
#include <vector>

#include "schedule/gpu_conv_tiles.h"
#include "schedule/gpu_heuristic.h"

namespace braze {
namespace schedule {
namespace gpu {

// A convolution's clamping views of its input and filter (Stage::conv), which the
// matmul operands' analysis looks through (gpu_fusion.cc).
bool GpuHeuristic::IsConvView(const Stage& s, const std::string& name) {
  return s.conv.x_view.defined() && (name == s.conv.x_view.name() || name == s.conv.f_view.name());
}

// A GPU Conv2D gets shared-memory tiles where its geometry allows (gpu_conv_tiles.h),
// except in the serial plan, the last resort, which keeps the thread-per-output
// schedule below in case Halide rejects the tiled one.
void GpuHeuristic::Tiled(const Stage& s) {
  if (s.kind == StageKind::kConv && s.conv.x_view.defined()) {
    if (plan_ == Scheduler::kGpuSerial) {
      log_ << s.result.name() << ": conv, no shared-memory tiles in the serial plan\n";
    } else if (ConvTiles(s, log_)) {
      placed_.insert(s.acc.name());
      return;
    }
  }
  MatMul(s);
}

// The result tiled 16x16 (params_.matmul_tile) over (n, m), batch dims fused into the
// block index; each thread accumulates its output over k in registers. A convolution
// (kConv) likewise: 16x16 of its dims 0 and 1, its window reduced serially per thread.
void GpuHeuristic::MatMul(const Stage& s) {
  const int tile = params_.matmul_tile;
  Func res = s.result;
  Func acc = s.acc;
  std::vector<Var> args = res.args();
  Var xo(res.name() + "_xo"), yo(res.name() + "_yo"), xi(res.name() + "_xi"),
      yi(res.name() + "_yi"), t(res.name() + "_t");
  res.compute_root().tile(args[0], args[1], xo, yo, xi, yi, tile, tile, kGuard).fuse(xo, yo, t);
  std::vector<Var> blocks = {t};  // and the batch dims
  blocks.insert(blocks.end(), args.begin() + 2, args.end());
  t = FuseAll(res, blocks);
  res.gpu_blocks(t).gpu_threads(xi, yi);
  acc.compute_at(res, xi);
  placed_.insert(acc.name());
  log_ << res.name() << (s.kind == StageKind::kConv ? ": conv" : ": matmul") << ", compute_root, "
       << tile << "x" << tile << " tiles, blocks over " << t.name() << "\n"
       << acc.name() << ": compute_at(" << res.name() << ", " << xi.name()
       << "), k serial per thread\n";
}

}  // namespace gpu
}  // namespace schedule
}  // namespace braze
