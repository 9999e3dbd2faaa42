// What the lowering tells the schedulers about a cluster's Halide pipeline: the output
// Funcs with their exact extents, and every Func that has an update definition.
//
// Internal header: it includes Halide.h, so only src/lower and src/schedule .cc files
// may include it. The autoschedulers need only the outputs (estimates); the safe default
// schedule needs the stages, because docs/HALIDE14.md rule 2 says every Func with an update
// definition must be compute_root or compute_at (an unscheduled softmax took 106 s).
#ifndef BRAZE_SCHEDULE_PIPELINE_INFO_H_
#define BRAZE_SCHEDULE_PIPELINE_INFO_H_

#include <cstdint>
#include <vector>

#include "Halide.h"

namespace braze {
namespace schedule {

// Extents in Halide dim order (dim 0 innermost). Rank-0 values are 1-D of extent 1.
using Extents = std::vector<int64_t>;

enum class StageKind {
  kReduction,  // Sum/Mean/Max/Min: `acc` reduces over an RDom (float Max/Min: a Tuple)
  kArgMax,     // `acc` is the smallest index holding the maximum
  kMatMul,     // `acc` (+= over k) is read only by `result`, a pure copy of it
};

struct Stage {
  StageKind kind = StageKind::kReduction;
  Halide::Func acc;     // the Func with the update definition
  Halide::Func result;  // kMatMul only: the pure Func that reads `acc`
  // kMatMul only: operand Funcs the k loop reads (computed operands, a repacked b^T),
  // worth computing once rather than inlining; cluster inputs are read in place.
  struct Operand {
    Halide::Func func;
    Extents extents;
    bool transpose = false;  // b^T repacked: a transpose of its source
  };
  std::vector<Operand> operands;
  Halide::RDom rdom;             // the update's reduction domain
  Extents extents;               // of acc (and result)
  int64_t reduction_extent = 1;  // product of the RDom extents
  // True when the RDom walks the input's innermost (contiguous) dim, so vectorizing the
  // update over acc's dim 0 would turn contiguous loads into gathers.
  bool reduces_innermost = false;
};

// f(x, y, ...) = buffer(x, y, ...): the wrapper Func Halide gives every ImageParam, or
// a constant's. Storing one is a copy; schedules inline it.
inline bool IsPlainLoad(const Halide::Internal::Function& fn) {
  if (fn.has_update_definition() || fn.values().size() != 1) return false;
  const auto* call = fn.values()[0].as<Halide::Internal::Call>();
  if (call == nullptr || call->call_type != Halide::Internal::Call::Image) return false;
  if (call->args.size() != fn.args().size()) return false;
  for (size_t i = 0; i < call->args.size(); ++i) {
    const auto* v = call->args[i].as<Halide::Internal::Variable>();
    if (v == nullptr || v->name != fn.args()[i]) return false;
  }
  return true;
}

struct PipelineInfo {
  // Pure Funcs, one per pipeline output. An output may also be read by other Funcs,
  // and may be a kMatMul stage's `result`.
  std::vector<Halide::Func> outputs;
  std::vector<Extents> output_extents;
  std::vector<Stage> stages;
};

}  // namespace schedule
}  // namespace braze

#endif  // BRAZE_SCHEDULE_PIPELINE_INFO_H_
