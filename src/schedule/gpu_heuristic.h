// The GPU heuristic's class (gpu_schedule.h says what it does and why), shared by the
// files that define its steps, one concern each:
//
//   gpu_schedule.cc  ApplyGpuSchedule and Run: the steps in order, and the final check
//   gpu_fusion.cc    what gets storage, which output's kernel hosts each reduction,
//                    which kernels take a warp per row, and each output's own loops
//   gpu_reduce.cc    the reductions: cooperative (rfactor trees, warp shuffles),
//                    two-stage, a thread per output
//   gpu_rows.cc      rows staged in shared memory, online softmax passes (Stage::lanes)
//   gpu_matmul.cc    matmuls and convolutions (conv tiles: gpu_conv_tiles.h)
//
// The sizes and loop building blocks are gpu_tiles.h's. Internal header: Halide.h.
#ifndef BRAZE_SCHEDULE_GPU_HEURISTIC_H_
#define BRAZE_SCHEDULE_GPU_HEURISTIC_H_

#include <cstdint>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "braze/dtype.h"
#include "schedule/gpu_tiles.h"
#include "schedule/pipeline_info.h"
#include "schedule/scheduler.h"
#include "schedule/stored_schedule.h"

namespace braze {
namespace schedule {
namespace gpu {

using Halide::LoopLevel;
using Halide::VarOrRVar;
using Halide::Internal::Function;

enum class Kind {
  kRow,             // block per row, threads cooperate (rfactor over the lanes)
  kRowTwoStage,     // partials over lanes x chunks at root, then a cooperative combine
  kColumn,          // one thread per output, serial over the reduction
  kColumnTwoStage,  // partials over chunks at root, then one thread per output
};

// How an output's kernel hosts reductions fused into it.
enum class Host {
  kNone,
  kRowBlock,      // block per row of dims 1.., threads over dim 0: row reductions at the block
  kElementBlock,  // block per output element: a row reduction per element at the block
  kThread,        // pointwise tiles: column reductions per thread
};

// Stages whose result is a kernel of its own with its own schedule: matmuls,
// convolutions and attention (gpu_attention.h).
inline bool OwnKernel(StageKind kind) { return IsTiled(kind) || kind == StageKind::kAttention; }

class GpuHeuristic {
 public:
  GpuHeuristic(const PipelineInfo& info, Scheduler plan, bool opencl,
               const GpuScheduleParams& params)
      : info_(info), plan_(plan), opencl_(opencl), params_(params) {}

  // The schedule, applied to info's Funcs, as text (gpu_schedule.cc).
  std::string Run();

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

  // What reads whole rows at output j's block: its cooperative row reductions (`rows`),
  // and the online softmax passes placed there (Stage::lanes), by Func name.
  struct RowReader {
    int64_t len = 0;   // of a row
    int64_t rows = 0;  // rows in all
  };

  // gpu_schedule.cc
  void CheckAllPlaced() const;

  // gpu_fusion.cc
  void Analyze();
  std::set<std::string> MaterializedConsumers(const std::string& name) const;
  void ChooseHosts();
  void ChooseWarpRows();
  bool WarpRow(const Stage& s) const;
  void ScheduleOutput(int j);

  // gpu_reduce.cc
  LoopLevel OwnBlock(Func acc);
  LoopLevel OwnThread(Func acc, const Extents& e);
  Func Cooperative(Func acc, RVar lane, int64_t len, const LoopLevel& at, bool split,
                   bool symbolic = false, bool warp = false);
  void PlaceCombine(Func f, const Var& t, const LoopLevel& at, bool lanes, bool registers);
  static bool Shuffles(const Func& acc);
  std::pair<RVar, int64_t> FirstStage(const Stage& s, bool lanes);
  void ScheduleReduction(const Stage& s, const Reduction& r);
  // Threads over a row of `len`: one warp where the kernel is one warp per row.
  int Threads(int64_t len, bool warp) const { return warp ? kWarp : RowThreads(len, params_); }

  // gpu_rows.cc
  std::map<std::string, const Stage*> HostedRows(int j) const;
  std::map<std::string, RowReader> RowReaders(
      int j, const std::map<std::string, const Stage*>& rows) const;
  bool StagesRows(const std::string& name, const Extents& e, const std::string& out,
                  const std::map<std::string, RowReader>& readers) const;
  void StageRows(int j);
  void StageRow(Func f, int64_t len, const LoopLevel& at, bool warp);
  static Func& SplitRow(Func& f, const Var& x, const Var& xo, const Var& xi, int threads,
                        int vector);
  void PlaceLanes(const Stage& s);
  void PlaceLanesAt(Func pass, const Stage& s, const Placement& p);

  // gpu_matmul.cc
  static bool IsConvView(const Stage& s, const std::string& name);
  void Tiled(const Stage& s);
  void MatMul(const Stage& s);

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

}  // namespace gpu
}  // namespace schedule
}  // namespace braze

#endif  // BRAZE_SCHEDULE_GPU_HEURISTIC_H_
