// Braze's GPU schedule heuristic; see gpu_schedule.h for the rules and why.
#include "schedule/gpu_schedule.h"

#include <algorithm>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "braze/dtype.h"
#include "schedule/extremum_operands.h"
#include "schedule/gpu_attention.h"
#include "schedule/gpu_conv_tiles.h"
#include "schedule/gpu_tiles.h"
#include "schedule/inline_budget.h"

namespace braze {
namespace schedule {
namespace gpu {  // with the sizes and building blocks of gpu_tiles.h
namespace {

using Halide::Func;
using Halide::LoopLevel;
using Halide::RVar;
using Halide::TailStrategy;
using Halide::Var;
using Halide::VarOrRVar;
using Halide::Internal::Function;

enum class Kind {
  kRow,             // block per row, threads cooperate (rfactor over the lanes)
  kRowTwoStage,     // partials over lanes x chunks at root, then a cooperative combine
  kColumn,          // one thread per output, serial over the reduction
  kColumnTwoStage,  // partials over chunks at root, then one thread per output
};

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

// Stages whose result is a kernel of its own with its own schedule: matmuls,
// convolutions and attention (gpu_attention.h).
bool OwnKernel(StageKind kind) { return IsTiled(kind) || kind == StageKind::kAttention; }

Kind Classify(const Stage& s) {
  const int64_t rows = NumElements(s.extents);
  const int64_t len = s.reduction_extent;
  if (s.reduces_innermost) {
    // Many short rows: a block of >= 32 threads per row would idle most of them, while
    // a thread per row still reads whole cache lines (the row's neighbours are the
    // next thread's).
    if (len <= kShortRowLen && rows >= kManyShortRows) return Kind::kColumn;
    return rows >= kManyRows || len <= kLongRow ? Kind::kRow : Kind::kRowTwoStage;
  }
  return rows >= kManyOutputs || len <= kShortColumn ? Kind::kColumn : Kind::kColumnTwoStage;
}

// How an output's kernel hosts reductions fused into it.
enum class Host {
  kNone,
  kRowBlock,      // block per row of dims 1.., threads over dim 0: row reductions at the block
  kElementBlock,  // block per output element: a row reduction per element at the block
  kThread,        // pointwise tiles: column reductions per thread
};

class GpuHeuristic {
 public:
  GpuHeuristic(const PipelineInfo& info, Scheduler plan, bool opencl,
               const GpuScheduleParams& params)
      : info_(info), plan_(plan), opencl_(opencl), params_(params) {}

  std::string Run() {
    Analyze();
    if (plan_ == Scheduler::kGpuFused) ChooseHosts();
    ChooseWarpRows();
    for (size_t j = 0; j < info_.outputs.size(); ++j) ScheduleOutput(static_cast<int>(j));
    for (size_t i = 0; i < info_.stages.size(); ++i) {
      const Stage& s = info_.stages[i];
      if (s.kind == StageKind::kAttention) {
        ScheduleAttention(s, log_, placed_);
      } else if (s.lanes) {
        continue;  // placed with the combines that read it (PlaceLanes)
      } else if (IsTiled(s.kind)) {
        Tiled(s);
      } else {
        ScheduleReduction(s, reductions_[i]);
      }
    }
    for (const Stage& s : info_.stages) {
      if (s.lanes) PlaceLanes(s);
    }
    if (plan_ == Scheduler::kGpuFused) {
      for (size_t j = 0; j < info_.outputs.size(); ++j) StageRows(static_cast<int>(j));
    }
    for (auto& [f, why] : operands_) {
      f.compute_root();
      const Var xi = PointwiseTile(f, f.args(), {}, 1, params_);
      log_ << f.name() << ": " << why << ", compute_root, tile -> " << xi.name() << "\n";
    }
    CheckAllPlaced();
    return log_.str();
  }

 private:
  struct Reduction {
    Kind kind = Kind::kRow;
    int host = -1;  // output index whose kernel computes it, -1: its own kernel(s)
  };

  // Where a reduction's accumulator (and its partials) is computed: at a block level,
  // cooperatively, or at a thread level.
  struct Placement {
    int host = -1;
    bool block = false;
    LoopLevel at;
    Func reader;  // what reads the reduction's input there: acc, or its first partials
  };

  // Callers of every Func, and the Funcs that get their own storage ("materialized":
  // outputs, accumulators, matmul results and operands); all other pure Funcs are
  // inlined into their callers.
  void Analyze() {
    std::vector<Function> outputs;
    for (const Func& f : info_.outputs) outputs.push_back(f.function());
    env_ = Halide::Internal::build_environment(outputs);
    for (const auto& [name, fn] : env_) {
      for (const auto& [callee, unused] : Halide::Internal::find_direct_calls(fn)) {
        if (callee != name) callers_[callee].insert(name);
      }
    }
    for (size_t j = 0; j < info_.outputs.size(); ++j) {
      output_index_[info_.outputs[j].name()] = static_cast<int>(j);
      materialized_.insert(info_.outputs[j].name());
    }
    reductions_.resize(info_.stages.size());
    for (size_t i = 0; i < info_.stages.size(); ++i) {
      const Stage& s = info_.stages[i];
      materialized_.insert(s.acc.name());
      if (OwnKernel(s.kind)) {
        materialized_.insert(s.result.name());
        matmul_results_.insert(s.result.name());
        continue;
      }
      stage_index_[s.acc.name()] = static_cast<int>(i);
      // The serial plan never rfactors: the fallback when Halide cannot prove an
      // update associative.
      reductions_[i].kind = plan_ == Scheduler::kGpuSerial ? Kind::kColumn : Classify(s);
    }
    // A matmul reads each operand element m (or n) times: an operand that computes
    // something is materialized once instead of being inlined into the k loop. Operands
    // that only reindex inputs (transpose, reshape) or constants stay inlined.
    // A convolution's clamping views (Stage::ConvWindow) are looked through: the operand
    // is what they read, and they stay inlined unless ConvTiles stages them.
    for (const Stage& s : info_.stages) {
      if (!IsTiled(s.kind)) continue;  // not attention: its operand tiles are staged
      std::map<std::string, Function> reads;
      for (const auto& [name, fn] : Halide::Internal::find_direct_calls(s.acc.function())) {
        if (!IsConvView(s, name)) {
          reads.emplace(name, fn);
          continue;
        }
        for (const auto& [callee, callee_fn] : Halide::Internal::find_direct_calls(fn)) {
          if (callee != name) reads.emplace(callee, callee_fn);
        }
      }
      for (const auto& [name, fn] : reads) {
        if (name == s.acc.name() || materialized_.count(name) > 0) continue;
        bool computes = false;
        for (const auto& [callee, callee_fn] : Halide::Internal::find_direct_calls(fn)) {
          computes |= callee != name && !IsPlainLoad(callee_fn);
        }
        if (!computes) continue;
        materialized_.insert(name);
        operands_.push_back({Func(fn), "matmul operand"});
      }
    }
    // A value that a reduction and a comparison both read is stored once, so both see
    // the same bits (extremum_operands.h). Inlined, a Max's kernel and its gradient's
    // x == max(x) each simplified x / c their own way on OpenCL (x * (1/c) in one), no
    // element equalled the max, and the gradient was 0 / 0 (braze-fuzz seed 1130088).
    for (Func f : ComparedReductionOperands(info_)) {
      if (!materialized_.insert(f.name()).second) continue;
      operands_.push_back({f, "read by a reduction and a comparison"});
    }
    // Inlining bounded (inline_budget.h): a value whose inlined expression outgrows the
    // budget gets a kernel of its own, as the CPU safe default stores it at root.
    for (const InlineBreak& b : InlineBudgetBreaks(info_, materialized_)) {
      materialized_.insert(b.func.name());
      operands_.push_back({b.func, std::string(kInlineBudgetStored) + " (inlined: at least " +
                                       std::to_string(b.nodes) + " nodes)"});
    }
  }

  // The materialized Funcs that read `name`, looking through inlined pure Funcs.
  std::set<std::string> MaterializedConsumers(const std::string& name) const {
    std::set<std::string> result, seen;
    std::vector<std::string> todo{name};
    while (!todo.empty()) {
      const std::string n = todo.back();
      todo.pop_back();
      auto it = callers_.find(n);
      if (it == callers_.end()) continue;
      for (const std::string& c : it->second) {
        if (!seen.insert(c).second) continue;
        if (materialized_.count(c) > 0) {
          result.insert(c);
        } else {
          todo.push_back(c);
        }
      }
    }
    return result;
  }

  // Fuses each reduction into the kernel of the one output that (directly, or through
  // reductions already fused there) consumes it, when the output's rows match the
  // reduction's. Consumers come after producers in `stages`, so walking backwards
  // decides every consumer before its producers.
  void ChooseHosts() {
    hosts_.assign(info_.outputs.size(), Host::kNone);
    for (int i = static_cast<int>(info_.stages.size()) - 1; i >= 0; --i) {
      const Stage& s = info_.stages[i];
      if (OwnKernel(s.kind) || s.lanes) continue;
      Reduction& r = reductions_[i];
      int host = -1;
      bool ok = true;
      for (const std::string& c : MaterializedConsumers(s.acc.name())) {
        int h = -1;
        if (output_index_.count(c) > 0 && matmul_results_.count(c) == 0) {
          h = output_index_.at(c);
        } else if (stage_index_.count(c) > 0) {
          // The consumer must read us inside the host's kernel: a two-stage reduction
          // reads its inputs in a first-stage kernel of its own.
          const Reduction& b = reductions_[stage_index_.at(c)];
          if (b.kind == Kind::kRow || b.kind == Kind::kColumn) h = b.host;
        }
        if (h < 0 || (host >= 0 && h != host)) ok = false;
        host = h;
      }
      if (!ok || host < 0) continue;
      const Extents& e = info_.output_extents[host];
      Host want = Host::kNone;
      // Unit dims aside (keep_dims), the output has the reduction's shape: it reads one
      // reduction value per element.
      const bool same = WithoutUnitDims(s.extents) == WithoutUnitDims(e);
      switch (r.kind) {
        case Kind::kRow:
          if (same) {
            want = Host::kElementBlock;
          } else if (e.size() >= 2 && WithoutUnitDims(s.extents) ==
                                          WithoutUnitDims(Extents(e.begin() + 1, e.end()))) {
            want = Host::kRowBlock;
          }
          break;
        case Kind::kRowTwoStage:
          // Few long rows: a block per row of the output would be too few blocks.
          if (same) want = Host::kElementBlock;
          break;
        case Kind::kColumn:
        case Kind::kColumnTwoStage:
          if (same) want = Host::kThread;
          break;
      }
      if (want == Host::kNone || (hosts_[host] != Host::kNone && hosts_[host] != want)) continue;
      // A block reduction synchronizes its threads with barriers, which Halide puts
      // inside the `if` of a stage a select may skip. POCL's work-group compiler copies
      // the code after each such barrier: five in one kernel compiled for over 30
      // minutes, four 33 s, three 2.6 s (pocl issue 205). On OpenCL a kernel hosts at
      // most kMaxOpenCLHostedBlockReductions; the rest get kernels of their own.
      const bool block = want != Host::kThread;
      if (opencl_ && block && block_reductions_[host] >= kMaxOpenCLHostedBlockReductions) continue;
      block_reductions_[host] += block ? 1 : 0;
      hosts_[host] = want;
      r.host = host;
    }
  }

  void ScheduleOutput(int j) {
    Func f = info_.outputs[j];
    if (matmul_results_.count(f.name()) > 0) return;  // tiled by MatMul()
    const Extents& e = info_.output_extents[j];
    const Host host = hosts_.empty() ? Host::kNone : hosts_[j];
    std::vector<Var> args = f.args();
    switch (host) {
      case Host::kRowBlock: {
        // Threads over dim 0 each handle x = xi, xi + T, ...: coalesced, and the row
        // reductions at the block level are computed once per row. (Not in vectors, as
        // staged rows are: 4 lanes of the output's math per thread took a layer norm
        // kernel from 32 to 40 registers, below full occupancy at 64-thread blocks.)
        const Var row = FuseAll(f, std::vector<Var>(args.begin() + 1, args.end()));
        const int threads = Threads(e[0], warp_hosts_.count(j) > 0);
        Var xo(f.name() + "_xo"), xi(f.name() + "_xi");
        SplitRow(f, args[0], xo, xi, threads, 1).reorder(xi, row).gpu_blocks(row);
        block_level_[j] = LoopLevel(f, row);
        log_ << f.name() << ": block per row (" << row.name() << "), " << threads
             << " threads over dim 0\n";
        return;
      }
      case Host::kElementBlock: {
        const Var row = FuseAll(f, args);
        f.gpu_blocks(row);
        block_level_[j] = LoopLevel(f, row);
        log_ << f.name() << ": block per element (" << row.name() << ")\n";
        return;
      }
      case Host::kNone:
      case Host::kThread: {
        // A plain pointwise output on CUDA whose rows split into whole vectors: each
        // thread takes kCudaVector adjacent elements, one 16-byte load and store per
        // operand of 4 bytes instead of four, and a quarter of the index arithmetic
        // (Chain8: 175 -> 161 PTX instructions per element; GpuPtxCodegen). Not along a
        // symbolic dim 0: its run-time extent need not divide by the vector.
        const int want = params_.vector;  // kCudaVector unless a stored entry says otherwise
        const bool whole_vectors =
            !e.empty() && e[0] % want == 0 && !IsSymbolic(info_.output_symbolic[j], 0);
        const int vector = !opencl_ && host == Host::kNone && whole_vectors ? want : 1;
        const Var xi = PointwiseTile(f, args, e, vector, params_);
        thread_level_[j] = LoopLevel(f, xi);
        log_ << f.name() << ": pointwise"
             << (vector > 1 ? ", vectors of " + std::to_string(vector) : "") << ", tile -> "
             << xi.name() << "\n";
        return;
      }
    }
  }

  // A kernel of its own for `acc`: a wrapper Func replacing every read of it, a block per
  // wrapper element. Returns the block level.
  LoopLevel OwnBlock(Func acc) {
    Func w = acc.in();
    w.compute_root();
    const Var b = FuseAll(w, w.args());
    w.gpu_blocks(b);
    log_ << w.name() << ": wrapper of " << acc.name() << ", block per element\n";
    return LoopLevel(w, b);
  }

  // A kernel of its own for `acc`, one thread per element (pointwise tiles).
  LoopLevel OwnThread(Func acc, const Extents& e) {
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
  Func Cooperative(Func acc, RVar lane, int64_t len, const LoopLevel& at, bool split,
                   bool symbolic = false, bool warp = false) {
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
  void PlaceCombine(Func f, const Var& t, const LoopLevel& at, bool lanes, bool registers) {
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
  static bool Shuffles(const Func& acc) {
    for (const Halide::Type& t : acc.function().output_types()) {
      if (t.bits() > 32) return false;
    }
    return true;
  }

  // Threads over a row of `len`: one warp where the kernel is one warp per row.
  int Threads(int64_t len, bool warp) const { return warp ? kWarp : RowThreads(len, params_); }

  // The kernels that take one warp per row, on CUDA: those whose block reductions are all
  // row reductions (Kind::kRow) of static rows up to kWarpRow long, and whose output
  // rows (a block per row) are that short too. As PyTorch's eager softmax: each warp
  // reads its row in coalesced passes, its combines need no barrier between warps, and
  // 32-bit ones no shared memory (warp shuffles, see Cooperative). Not on OpenCL:
  // Halide 14's OpenCL back end does not lower gpu_lanes. A kernel of its own for a
  // row reduction (host -1) is decided per reduction (WarpRow).
  void ChooseWarpRows() {
    if (opencl_ || hosts_.empty()) return;
    std::map<int, bool> ok;
    for (size_t i = 0; i < info_.stages.size(); ++i) {
      const Reduction& r = reductions_[i];
      if (OwnKernel(info_.stages[i].kind) || r.host < 0 || hosts_[r.host] == Host::kThread) {
        continue;
      }
      const bool warp = r.kind == Kind::kRow && WarpRow(info_.stages[i]);
      ok.emplace(r.host, true).first->second &= warp;
    }
    for (const auto& [j, warp] : ok) {
      const Extents& e = info_.output_extents[j];
      const bool row_ok =
          hosts_[j] != Host::kRowBlock ||
          (!e.empty() && e[0] <= params_.warp_row && !IsSymbolic(info_.output_symbolic[j], 0));
      if (warp && row_ok) warp_hosts_.insert(j);
    }
  }

  bool WarpRow(const Stage& s) const {
    return !opencl_ && !s.reduction_symbolic && s.reduction_extent <= params_.warp_row;
  }

  // The cooperative row reductions output j's kernel hosts, by accumulator name; empty
  // unless there are some and all reduce rows of one length over the innermost dim.
  std::map<std::string, const Stage*> HostedRows(int j) const {
    std::map<std::string, const Stage*> rows;
    for (size_t i = 0; i < info_.stages.size(); ++i) {
      const Stage& s = info_.stages[i];
      if (OwnKernel(s.kind) || reductions_[i].host != j) continue;
      if (reductions_[i].kind != Kind::kRow || !s.reduces_innermost ||
          (!rows.empty() && s.reduction_extent != rows.begin()->second->reduction_extent)) {
        return {};
      }
      rows[s.acc.name()] = &s;
    }
    return rows;
  }

  // What reads whole rows at output j's block: its cooperative row reductions (`rows`),
  // and the online softmax passes placed there (Stage::lanes), by Func name.
  struct RowReader {
    int64_t len = 0;   // of a row
    int64_t rows = 0;  // rows in all
  };
  std::map<std::string, RowReader> RowReaders(
      int j, const std::map<std::string, const Stage*>& rows) const {
    std::map<std::string, RowReader> readers;
    for (const auto& [name, s] : rows) {
      readers[name] = {s->reduction_extent, NumElements(s->extents)};
    }
    for (const auto& [name, lanes] : lane_rows_) {
      if (lanes.first == j) readers[name] = lanes.second;
    }
    return readers;
  }

  // Whether the plain load `name` (extents `e`) holds the rows of `readers`, and only they
  // and output `out` read it: then its region at the row's block is exactly one row.
  // And whether it is read more than once: a lone reduction (a row Sum) reads each
  // element once anyway, and staging would only add a pass through shared memory.
  bool StagesRows(const std::string& name, const Extents& e, const std::string& out,
                  const std::map<std::string, RowReader>& readers) const {
    if (e.empty()) return false;
    int reductions = 0, n = 0;
    for (const std::string& c : MaterializedConsumers(name)) {
      ++n;
      if (c == out) continue;
      auto it = readers.find(c);
      if (it == readers.end() || e[0] != it->second.len ||
          NumElements(e) != e[0] * it->second.rows) {
        return false;
      }
      ++reductions;
    }
    return reductions > 0 && n > 1;
  }

  // Stages each row that output j's cooperative row reductions read into shared memory,
  // once per block: without it every reduction, and the output, read the row from global
  // memory again (a softmax three times: max, sum of exps, output; LLVM reuses the loads
  // only where it unrolls the passes completely and their types agree). The staged Func
  // is a cluster input (a plain load) holding those rows, which nothing outside this
  // kernel reads. Rows that do not fit kSharedBudget, next to the partials, stay in
  // global memory.
  void StageRows(int j) {
    if (hosts_[j] != Host::kRowBlock && hosts_[j] != Host::kElementBlock) return;
    const std::map<std::string, const Stage*> rows = HostedRows(j);
    const std::map<std::string, RowReader> readers = RowReaders(j, rows);
    if (readers.empty()) return;
    int64_t bytes = 0;
    for (const auto& [unused, s] : rows) {
      bytes += CooperativeBytes(*s, Threads(s->reduction_extent, warp_hosts_.count(j) > 0));
    }
    for (const auto& [unused, lanes] : lane_rows_) {
      if (lanes.first == j) bytes += kWarp * kOnlineStateBytes;
    }
    for (const auto& [name, fn] : env_) {
      if (!IsPlainLoad(fn) || materialized_.count(name) > 0) continue;
      const Extents e = LoadExtents(fn);
      if (!StagesRows(name, e, info_.outputs[j].name(), readers)) continue;
      const int64_t row_bytes =
          CeilDiv(e[0], kSharedAlign) * kSharedAlign * fn.output_types()[0].bytes();
      if (bytes + row_bytes > kSharedBudget) continue;
      bytes += row_bytes;
      StageRow(Func(fn), e[0], block_level_.at(j), warp_hosts_.count(j) > 0);
    }
  }

  // `f` (a plain load of rows of `len`) computed at a block into shared memory, thread u
  // loading elements u, u + T, ...
  void StageRow(Func f, int64_t len, const LoopLevel& at, bool warp) {
    const std::vector<Var> args = f.args();
    const int threads = Threads(len, warp);
    const int vector = RowVector(len, threads);
    Var xo(f.name() + "_so"), xi(f.name() + "_si");
    f.compute_at(at).store_in(Halide::MemoryType::GPUShared).align_storage(args[0], kSharedAlign);
    SplitRow(f, args[0], xo, xi, threads, vector);
    placed_.insert(f.name());
    log_ << f.name() << ": row staged in shared memory, " << threads << " threads"
         << (vector > 1 ? ", vectors of 4" : "") << "\n";
  }

  // Splits dim `x` of a row over `threads` threads `xi`, each walking the row in steps of
  // threads * vector (`xo`, inside the thread loop), `vector` adjacent elements at a time
  // (vectorized). Returns f for the caller's block directives.
  static Func& SplitRow(Func& f, const Var& x, const Var& xo, const Var& xi, int threads,
                        int vector) {
    if (vector == 1) return f.split(x, xo, xi, threads, kGuard).reorder(xo, xi).gpu_threads(xi);
    Var xv(x.name() + "_v");
    return f.split(x, xo, xi, threads * vector, kGuard)
        .split(xi, xi, xv, vector, kGuard)
        .reorder(xv, xo, xi)
        .vectorize(xv)
        .gpu_threads(xi);
  }

  // The first stage of a two-stage reduction: the (fused) reduction domain split into
  // chunks (and, over the innermost dim, lanes), rfactored into partials computed at
  // root in a kernel of their own. Returns the lane RVar left in acc's update and its
  // extent (0 without lanes).
  std::pair<RVar, int64_t> FirstStage(const Stage& s, bool lanes) {
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

  void ScheduleReduction(const Stage& s, const Reduction& r) {
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

  // An online softmax's pass (Stage::lanes): where the combines reading it compute their
  // partials; a thread per lane (dim 0) at a block level, or serially at a thread level.
  // Combines in kernels of their own (a softmax a matmul reads) each compute a copy of
  // the pass (clone_in) rather than read it from one more kernel.
  void PlaceLanes(const Stage& s) {
    Func pass = s.acc;
    placed_.insert(pass.name());
    std::vector<std::pair<std::string, const Placement*>> readers;
    bool one_place = true;
    for (const std::string& c : MaterializedConsumers(pass.name())) {
      auto it = placements_.find(c);
      if (it == placements_.end()) {
        pass.compute_at(OwnThread(pass, s.extents));     // not expected: the combines are
        log_ << pass.name() << ": lanes, own kernel\n";  // reductions, placed before
        return;
      }
      const Placement* p = &it->second;
      if (!readers.empty()) {
        const Placement* q = readers[0].second;
        one_place &= p->host == q->host && p->block == q->block && p->host >= 0;
      }
      readers.push_back({c, p});
    }
    if (readers.empty()) return;
    std::vector<Func> copies = {pass};
    for (size_t i = 1; !one_place && i < readers.size(); ++i) {
      copies.push_back(pass.clone_in(readers[i].second->reader));
    }
    for (size_t i = 0; i < copies.size(); ++i) PlaceLanesAt(copies[i], s, *readers[i].second);
  }

  // A thread per lane at a block: each lane's state in its thread's registers while it
  // walks the row (one value: no shared-memory load and store per element), then copied
  // once into shared memory, where the combines read it across the lanes.
  void PlaceLanesAt(Func pass, const Stage& s, const Placement& p) {
    placed_.insert(pass.name());
    if (!p.block) {
      pass.compute_at(p.at);
      log_ << pass.name() << ": lanes, serial at its combines' thread\n";
      return;
    }
    Func w = pass.in();
    const Var wu = w.args()[0];
    w.compute_at(p.at).align_storage(wu, kSharedAlign).gpu_threads(wu);
    pass.compute_at(w, wu);
    placed_.insert(w.name());
    if (p.host >= 0) {
      lane_rows_[pass.name()] = {p.host, {s.row_length, NumElements(s.extents) / s.extents[0]}};
    }
    log_ << pass.name() << ": lanes, " << s.extents[0]
         << " threads at its combines' block, in registers, then shared memory (" << w.name()
         << ")\n";
  }

  static bool IsConvView(const Stage& s, const std::string& name) {
    return s.conv.x_view.defined() &&
           (name == s.conv.x_view.name() || name == s.conv.f_view.name());
  }

  // A GPU Conv2D gets shared-memory tiles where its geometry allows (gpu_conv_tiles.h),
  // except in the serial plan, the last resort, which keeps the thread-per-output
  // schedule below in case Halide rejects the tiled one.
  void Tiled(const Stage& s) {
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
  void MatMul(const Stage& s) {
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

  // docs/HALIDE14.md rule 2, enforced: an unscheduled reduction is recomputed at every use.
  void CheckAllPlaced() const {
    for (const auto& [name, fn] : env_) {
      if (fn.has_update_definition() && placed_.count(name) == 0) {
        throw Halide::CompileError("GPU schedule left the reduction " + name + " unscheduled");
      }
    }
  }

  const PipelineInfo& info_;
  const Scheduler plan_;
  const bool opencl_;
  const GpuScheduleParams params_;  // stored_schedule.h: the sizes braze-tune may vary
  std::ostringstream log_;
  std::map<std::string, Function> env_;
  std::map<std::string, std::set<std::string>> callers_;
  std::set<std::string> materialized_;
  std::set<std::string> matmul_results_;
  std::map<std::string, int> output_index_;
  std::map<std::string, int> stage_index_;
  std::vector<Reduction> reductions_;                   // per stage (unused for matmul stages)
  std::vector<std::pair<Func, std::string>> operands_;  // stored once, and why
  std::vector<Host> hosts_;                             // per output; empty unless fusing
  std::map<int, int> block_reductions_;  // per output: block reductions its kernel hosts
  std::set<int> warp_hosts_;             // outputs whose kernels are a warp per row
  std::map<int, LoopLevel> block_level_, thread_level_;
  std::map<std::string, Placement> placements_;  // by accumulator name
  // Online softmax passes at a block: output index and the rows they read, by name.
  std::map<std::string, std::pair<int, RowReader>> lane_rows_;
  std::set<std::string> placed_;
};

}  // namespace
}  // namespace gpu

std::string ApplyGpuSchedule(const PipelineInfo& info, const Halide::Target& target, Scheduler plan,
                             const GpuScheduleParams& params) {
  if (!IsGpuHeuristic(plan)) {
    throw Halide::CompileError(std::string("ApplyGpuSchedule: ") + SchedulerName(plan) +
                               " is not a plan of the GPU heuristic");
  }
  // The same plan serves CUDA and OpenCL: at most kMaxThreads (256) threads per block
  // and a few KiB of shared (local) memory per kernel, within what OpenCL GPUs and POCL
  // report (CL_DEVICE_MAX_WORK_GROUP_SIZE >= 256, CL_DEVICE_LOCAL_MEM_SIZE >= 32 KiB;
  // device/opencl_driver.cc refuses a device that reports less, naming it). A stored
  // entry's params.block_threads may ask for more: tuned on that device, where a block
  // it cannot launch failed braze-tune's check run and never became an entry.
  if (!target.has_feature(Halide::Target::CUDA) && !target.has_feature(Halide::Target::OpenCL)) {
    throw Halide::CompileError("ApplyGpuSchedule: target " + target.to_string() +
                               " has no GPU feature (CUDA or OpenCL)");
  }
  return gpu::GpuHeuristic(info, plan, target.has_feature(Halide::Target::OpenCL), params).Run();
}

}  // namespace schedule
}  // namespace braze
