// PrecisionScope (braze/precision.h): sets the graph's compute dtype, which AddNode's
// autocast rule (ir/autocast.h) reads.
#include "braze/precision.h"

#include "absl/strings/str_cat.h"

namespace braze {

PrecisionScope::PrecisionScope(Graph& g, DType compute) : g_(g), previous_(g.compute_dtype()) {
  if (compute != DType::kF32 && !Is16BitFloat(compute)) {
    g.RecordError(absl::InvalidArgumentError(absl::StrCat(
        "PrecisionScope: compute dtype ", DTypeName(compute), " is not f32, bf16 or f16")));
    return;
  }
  g.set_compute_dtype(compute);
}

PrecisionScope::~PrecisionScope() { g_.set_compute_dtype(previous_); }

}  // namespace braze
