// The GPU heuristic's kernel plan (gpu_heuristic.h): which Funcs get storage, which
// output's kernel computes each reduction, which kernels take a warp per row, and each
// output's own loops.
#include <map>
#include <set>
#include <string>
#include <vector>

#include "schedule/extremum_operands.h"
#include "schedule/gpu_heuristic.h"
#include "schedule/inline_budget.h"

namespace braze {
namespace schedule {
namespace gpu {

namespace {

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

}  // namespace

// Callers of every Func, and the Funcs that get their own storage ("materialized":
// outputs, accumulators, matmul results and operands); all other pure Funcs are
// inlined into their callers.
void GpuHeuristic::Analyze() {
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
std::set<std::string> GpuHeuristic::MaterializedConsumers(const std::string& name) const {
  std::set<std::string> result, seen;
  std::vector<std::string> pending{name};
  while (!pending.empty()) {
    const std::string n = pending.back();
    pending.pop_back();
    auto it = callers_.find(n);
    if (it == callers_.end()) continue;
    for (const std::string& c : it->second) {
      if (!seen.insert(c).second) continue;
      if (materialized_.count(c) > 0) {
        result.insert(c);
      } else {
        pending.push_back(c);
      }
    }
  }
  return result;
}

// Fuses each reduction into the kernel of the one output that (directly, or through
// reductions already fused there) consumes it, when the output's rows match the
// reduction's. Consumers come after producers in `stages`, so walking backwards
// decides every consumer before its producers.
void GpuHeuristic::ChooseHosts() {
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
        } else if (e.size() >= 2 &&
                   WithoutUnitDims(s.extents) == WithoutUnitDims(Extents(e.begin() + 1, e.end()))) {
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

// The kernels that take one warp per row, on CUDA: those whose block reductions are all
// row reductions (Kind::kRow) of static rows up to kWarpRow long, and whose output
// rows (a block per row) are that short too. As PyTorch's eager softmax: each warp
// reads its row in coalesced passes, its combines need no barrier between warps, and
// 32-bit ones no shared memory (warp shuffles, see Cooperative). Not on OpenCL:
// Halide 14's OpenCL back end does not lower gpu_lanes. A kernel of its own for a
// row reduction (host -1) is decided per reduction (WarpRow).
void GpuHeuristic::ChooseWarpRows() {
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
    const bool row_ok = hosts_[j] != Host::kRowBlock || (!e.empty() && e[0] <= params_.warp_row &&
                                                         !IsSymbolic(info_.output_symbolic[j], 0));
    if (warp && row_ok) warp_hosts_.insert(j);
  }
}

bool GpuHeuristic::WarpRow(const Stage& s) const {
  return !opencl_ && !s.reduction_symbolic && s.reduction_extent <= params_.warp_row;
}

void GpuHeuristic::ScheduleOutput(int j) {
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

}  // namespace gpu
}  // namespace schedule
}  // namespace braze
