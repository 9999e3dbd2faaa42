// The GPU heuristic's reductions (gpu_heuristic.h): cooperative at a block (rfactor
// trees, warp shuffles), two-stage, or a thread per output.
#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "schedule/gpu_heuristic.h"

namespace braze {
namespace schedule {
namespace gpu {

namespace {

const char* KindName(Kind kind) {
  switch (kind) {
    case Kind::kRow:
      return "row";
    case Kind::kRowTwoStage:
      return "row two-stage";
    case Kind::kColumn:
      return "column";
    case Kind::kColumnTwoStage:
      return "column two-stage";
  }
  return "unknown";
}

}  // namespace

// A kernel of its own for `acc`: a wrapper Func replacing every read of it, a block per
// wrapper element. Returns the block level.
LoopLevel GpuHeuristic::OwnBlock(Func acc) {
  Func w = acc.in();
  w.compute_root();
  const Var b = FuseAll(w, w.args());
  w.gpu_blocks(b);
  log_ << w.name() << ": wrapper of " << acc.name() << ", block per element\n";
  return LoopLevel(w, b);
}

// A kernel of its own for `acc`, one thread per element (pointwise tiles).
LoopLevel GpuHeuristic::OwnThread(Func acc, const Extents& e) {
  Func w = acc.in();
  w.compute_root();
  const Var xi = PointwiseTile(w, w.args(), e, 1, params_);
  log_ << w.name() << ": wrapper of " << acc.name() << ", pointwise tile\n";
  return LoopLevel(w, xi);
}

// The cooperative reduction of `acc` over `lane` (extent `len`) at a block level (returns
// the per-thread partials, which read acc's input): the
// update is rfactored into T per-thread partials (thread u reads u, u+T, ...: coalesced)
// held in shared memory, then combined in a tree of fan-in kFanIn (64 -> 8 -> 1) whose
// last level is one thread's loop inside its thread loop, so `acc` itself takes one
// value. A block-level serial loop runs on one thread with barriers inside it, one
// per iteration and Tuple element: when the tree stopped at 8 partials, a float Max's
// three bit accumulators cost 24 barriers there, and the softmax kernel had 39 in all
// (21 now).
//
// Every Func here lives in shared memory, and each allocation's extent is aligned to
// kSharedAlign elements. Halide 14 packs a kernel's shared allocations into one buffer,
// padding each group to the widest type but sizing the buffer by the unpadded sum
// (FuseGPUThreadLoops.cpp), so two groups of odd byte sizes (u8 NaN flags, as a Max once
// kept, next to f64 sums) overflow it. Seen as a 7x3 cross entropy kernel lowered to nothing.
// `symbolic`: len is only the estimate of a run-time extent, so the row is split
// whatever it is (unsplit, a block would take one thread per element of the row at
// run time: CL_INVALID_WORK_GROUP_SIZE at 4099 for a kernel compiled at 20).
// `warp`: the kernel is one warp per row (ChooseWarpRows); a combine of 32-bit values
// then runs in registers across the warp's lanes, read by Halide's warp shuffles
// (`gpu_lanes`: shfl.sync, no shared memory), 32 -> 4 -> 1. The last level, one
// value, is kept in shared memory: in registers, Halide 14 reads lane 0's own value
// through a shuffle (it sees lane 0, not "this lane") inside that level's
// `if (lane < 1)`, a full-mask shfl.sync one lane runs alone: undefined behaviour.
// (Stopping at 4 and letting `acc` read them costs a barrier per value and Tuple
// element: 29 barriers in the softmax kernel instead of 23.)
Func GpuHeuristic::Cooperative(Func acc, RVar lane, int64_t len, const LoopLevel& at, bool split,
                               bool symbolic, bool warp) {
  acc.compute_at(at);
  placed_.insert(acc.name());
  int64_t threads = len;
  if (split && (len > Threads(len, warp) || symbolic)) {
    threads = Threads(len, warp);
    RVar ro(acc.name() + "_ro"), ri(acc.name() + "_ri");
    acc.update().split(lane, ro, ri, static_cast<int>(threads), kGuard);
    lane = ri;
  }
  // Shuffles only across a whole warp: a row shorter than a warp has guarded lanes,
  // and a full-mask shfl.sync under such a guard is undefined behaviour.
  const bool lanes = warp && Shuffles(acc) && threads == kWarp;
  Var u(acc.name() + "_u");
  Func partial = acc.update().rfactor(lane, u);
  PlaceCombine(partial, u, at, lanes, threads > 1);
  log_ << acc.name() << ": cooperative, " << threads << " threads, combined "
       << (lanes ? "by warp shuffles" : "in shared memory") << " by";
  for (int level = 1; threads > 1; ++level) {
    const int64_t next = CeilDiv(threads, kFanIn);
    const std::string suffix = "_" + std::to_string(level);
    RVar lo(acc.name() + "_lo" + suffix), li(acc.name() + "_li" + suffix);
    Var w(acc.name() + "_w" + suffix);
    acc.update().split(lane, lo, li, static_cast<int>(next), kGuard);
    PlaceCombine(acc.update().rfactor(li, w), w, at, lanes, next > 1);
    log_ << " " << next;
    lane = li;
    threads = next;
  }
  // After the rfactors: they copy acc's storage directives to the partials.
  acc.align_storage(acc.args()[0], kSharedAlign);
  if (warp) {
    // acc's one value per row on a thread loop of extent 1: each of its definitions is
    // then one `if (lane < 1)` with a barrier after it, not one per Tuple element (a
    // float Max's three: 6 barriers -> 2).
    if (lanes) {
      acc.gpu_lanes(acc.args()[0]);
      acc.update().gpu_lanes(acc.args()[0]);
    } else {
      acc.gpu_threads(acc.args()[0]);
      acc.update().gpu_threads(acc.args()[0]);
    }
  }
  log_ << " then 1\n";
  return partial;
}

// A level of a cooperative combine (the partials, or a combine of them) at the block
// level `at`, one value per thread `t`, in shared memory; with `lanes` on the warp's
// lanes, and with `registers` too in registers striped across them, where other
// lanes' values are read by shuffles.
void GpuHeuristic::PlaceCombine(Func f, const Var& t, const LoopLevel& at, bool lanes,
                                bool registers) {
  f.compute_at(at);
  if (lanes && registers) {
    f.store_in(Halide::MemoryType::Register);
  } else {
    f.align_storage(t, kSharedAlign);
  }
  if (lanes) {
    f.gpu_lanes(t);
    f.update().gpu_lanes(t);
  } else {
    f.gpu_threads(t);
    f.update().gpu_threads(t);
  }
  placed_.insert(f.name());
}

// Whether Halide 14 can shuffle every value of `acc`'s Tuple between lanes: 32 bits or
// fewer (LowerWarpShuffles rejects 64-bit types, as f64 sums and moments are).
bool GpuHeuristic::Shuffles(const Func& acc) {
  for (const Halide::Type& t : acc.function().output_types()) {
    if (t.bits() > 32) return false;
  }
  return true;
}

// The first stage of a two-stage reduction: the (fused) reduction domain split into
// chunks (and, over the innermost dim, lanes), rfactored into partials computed at
// root in a kernel of their own. Returns the lane RVar left in acc's update and its
// extent (0 without lanes).
std::pair<RVar, int64_t> GpuHeuristic::FirstStage(const Stage& s, bool lanes) {
  Func acc = s.acc;
  const RVar rf = FuseRVars(acc, s.rdom);
  const int64_t len = s.reduction_extent;
  const int64_t rows = NumElements(s.extents);
  RVar rfo(acc.name() + "_rfo"), rfi(acc.name() + "_rfi");
  Var u(acc.name() + "_u"), v(acc.name() + "_v");
  Func partial;
  Extents extents = s.extents;
  int64_t threads = 0;
  if (lanes) {
    threads = Pow2AtLeast(len, params_.block_threads);
    const int64_t steps = CeilDiv(len, threads);
    const int64_t chunks =
        std::clamp<int64_t>(CeilDiv(len, threads * kMinPerThread), 1,
                            std::max<int64_t>(1, kTargetThreads / (threads * rows)));
    const int64_t per_chunk = CeilDiv(steps, chunks);
    RVar rfoo(acc.name() + "_rfoo"), rfoi(acc.name() + "_rfoi");
    acc.update()
        .split(rf, rfo, rfi, static_cast<int>(threads), kGuard)
        .split(rfo, rfoo, rfoi, static_cast<int>(per_chunk), kGuard);
    partial = acc.update().rfactor({{rfi, u}, {rfoo, v}});
    extents.push_back(threads);
    extents.push_back(CeilDiv(steps, per_chunk));
    log_ << acc.name() << ": " << KindName(Kind::kRowTwoStage) << ", " << threads << " lanes x "
         << extents.back() << " chunks of " << per_chunk << " steps\n";
  } else {
    const int64_t chunks = std::clamp<int64_t>(CeilDiv(len, kMinPerThread), 1,
                                               std::max<int64_t>(1, kTargetThreads / rows));
    const int64_t per_chunk = CeilDiv(len, chunks);
    acc.update().split(rf, rfo, rfi, static_cast<int>(per_chunk), kGuard);
    partial = acc.update().rfactor(rfo, v);
    extents.push_back(CeilDiv(len, per_chunk));
    log_ << acc.name() << ": " << KindName(Kind::kColumnTwoStage) << ", " << extents.back()
         << " chunks of " << per_chunk << "\n";
  }
  // The partials' args are acc's then (u,) v. Lanes go innermost, on threadIdx.x.
  std::vector<Var> args = partial.args();
  Func w = partial.in();
  w.compute_root();
  std::vector<Var> wargs = w.args();
  std::vector<Var> order;
  Extents order_extents;
  const size_t n = s.extents.size();
  if (lanes) {
    order.push_back(wargs[n]);
    order_extents.push_back(extents[n]);
  }
  for (size_t d = 0; d < n; ++d) {
    order.push_back(wargs[d]);
    order_extents.push_back(extents[d]);
  }
  order.push_back(wargs.back());
  order_extents.push_back(extents.back());
  const Var xi = PointwiseTile(w, order, order_extents, 1, params_);
  partial.compute_at(w, xi);
  placed_.insert(partial.name());
  log_ << w.name() << ": partials of " << acc.name() << ", compute_root, tile -> " << xi.name()
       << "\n";
  return {rfi, threads};
}

void GpuHeuristic::ScheduleReduction(const Stage& s, const Reduction& r) {
  Func acc = s.acc;
  const auto block_at = [&] { return r.host >= 0 ? block_level_.at(r.host) : OwnBlock(acc); };
  const auto thread_at = [&] {
    return r.host >= 0 ? thread_level_.at(r.host) : OwnThread(acc, s.extents);
  };
  const std::string where =
      r.host >= 0 ? "in " + info_.outputs[r.host].name() + "'s kernel" : "own kernel";
  switch (r.kind) {
    case Kind::kRow: {
      const RVar rf = FuseRVars(acc, s.rdom);
      const bool warp = r.host >= 0 ? warp_hosts_.count(r.host) > 0 : WarpRow(s);
      const LoopLevel at = block_at();
      const Func partial =
          Cooperative(acc, rf, s.reduction_extent, at, true, s.reduction_symbolic, warp);
      placements_[acc.name()] = {r.host, true, at, partial};
      log_ << acc.name() << ": row, " << where << "\n";
      return;
    }
    case Kind::kRowTwoStage: {
      const auto [lane, threads] = FirstStage(s, true);
      Cooperative(acc, lane, threads, block_at(), false);
      log_ << acc.name() << ": combine " << where << "\n";
      return;
    }
    case Kind::kColumn: {
      const LoopLevel at = thread_at();
      acc.compute_at(at);
      placements_[acc.name()] = {r.host, false, at, acc};
      placed_.insert(acc.name());
      log_ << acc.name() << ": "
           << (plan_ == Scheduler::kGpuSerial ? "serial"
               : s.reduces_innermost          ? "short rows"
                                              : "column")
           << ", a thread per output, " << where << "\n";
      return;
    }
    case Kind::kColumnTwoStage:
      FirstStage(s, false);
      acc.compute_at(thread_at());
      placed_.insert(acc.name());
      log_ << acc.name() << ": combine per thread, " << where << "\n";
      return;
  }
}

}  // namespace gpu
}  // namespace schedule
}  // namespace braze
