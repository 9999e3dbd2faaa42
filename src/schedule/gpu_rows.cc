// The GPU heuristic's rows (gpu_heuristic.h): rows that a kernel's reductions read more
// than once staged in shared memory, and online softmax passes placed with their combines.
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "schedule/gpu_heuristic.h"

namespace braze {
namespace schedule {
namespace gpu {

// The cooperative row reductions output j's kernel hosts, by accumulator name; empty
// unless there are some and all reduce rows of one length over the innermost dim.
std::map<std::string, const Stage*> GpuHeuristic::HostedRows(int j) const {
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

std::map<std::string, GpuHeuristic::RowReader> GpuHeuristic::RowReaders(
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
bool GpuHeuristic::StagesRows(const std::string& name, const Extents& e, const std::string& out,
                              const std::map<std::string, RowReader>& readers) const {
  if (e.empty()) return false;
  int reductions = 0, n = 0;
  for (const std::string& c : MaterializedConsumers(name)) {
    ++n;
    if (c == out) continue;
    auto it = readers.find(c);
    if (it == readers.end() || e[0] != it->second.len || NumElements(e) != e[0] * it->second.rows) {
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
void GpuHeuristic::StageRows(int j) {
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
void GpuHeuristic::StageRow(Func f, int64_t len, const LoopLevel& at, bool warp) {
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
Func& GpuHeuristic::SplitRow(Func& f, const Var& x, const Var& xo, const Var& xi, int threads,
                             int vector) {
  if (vector == 1) return f.split(x, xo, xi, threads, kGuard).reorder(xo, xi).gpu_threads(xi);
  Var xv(x.name() + "_v");
  return f.split(x, xo, xi, threads * vector, kGuard)
      .split(xi, xi, xv, vector, kGuard)
      .reorder(xv, xo, xi)
      .vectorize(xv)
      .gpu_threads(xi);
}

// An online softmax's pass (Stage::lanes): where the combines reading it compute their
// partials; a thread per lane (dim 0) at a block level, or serially at a thread level.
// Combines in kernels of their own (a softmax a matmul reads) each compute a copy of
// the pass (clone_in) rather than read it from one more kernel.
void GpuHeuristic::PlaceLanes(const Stage& s) {
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
void GpuHeuristic::PlaceLanesAt(Func pass, const Stage& s, const Placement& p) {
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

}  // namespace gpu
}  // namespace schedule
}  // namespace braze
