// Helpers shared by the window lowerings (lower_conv.cc, lower_pool.cc): rank-4 indices
// in either data format, the taps of a window that may fall into the padding, and the
// refusal of symbolic dims other than the batch.
//
// Internal header: includes Halide.h (via lower_util.h).
#ifndef BRAZE_LOWER_LOWER_WINDOW_H_
#define BRAZE_LOWER_LOWER_WINDOW_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "ir/window_geometry.h"
#include "lower/lower_util.h"

namespace braze {
namespace lower {

// The N, H, W and C of a rank-4 index.
struct Nhwc {
  Halide::Expr n, h, w, c;
};

// The row-major index of element (n, h, w, c) of a tensor in `format`.
std::vector<Halide::Expr> Index4(DataFormat format, const Nhwc& at);

// The N, H, W and C of a row-major index of a tensor in `format`.
Nhwc Split4(DataFormat format, const std::vector<Halide::Expr>& index);

// The input index that output `o` (an Expr) reads at tap `t`: o * stride - pad + t * dilation.
Halide::Expr InputIndex(const SpatialDim& d, const Halide::Expr& o, const Halide::Expr& t);

// Whether some output of `d` reads outside [0, in) at some tap (at tap `tap` only, when
// it is >= 0): only then does a window need a test for its padding.
bool MayPad(const SpatialDim& d, int64_t tap = -1);

// i in [0, in), and i clamped into it (a padding tap still reads inside the buffer:
// Halide checks every access against the input's bounds).
Halide::Expr Inside(const Halide::Expr& i, int64_t in);
Halide::Expr ClampTo(const Halide::Expr& i, int64_t in);

// i in [0, end) as one unsigned comparison, for an RDom::where predicate guarding reads
// at ClampTo(i, ...). Halide 14's simplifier learns a variable's bounds from an `if`
// of the form v >= c or v < c (i >= 0 && i < in with a 1-tap window, where i is a pure
// var plus a constant) and drops the clamp inside it as redundant; the required region
// is then taken from the unclamped index, and where that var is a let of a fused loop
// (the GPU heuristic's block index, (t % 11) - 1) Halide cannot bound it by the `if`:
// the input was required at the padding row -1, and every GPU schedule failed
// (braze-fuzz seed 48). From uint32(i) < end it learns nothing, and the clamp stays.
Halide::Expr InsideForWhere(const Halide::Expr& i, int64_t end);

// Unimplemented, naming `what`, when a dim of `v` other than N is symbolic (its class
// follows the batch; H, W and C are geometry, which one kernel cannot hold for every size).
absl::Status CheckSymbolicBatchOnly(const Value& v, DataFormat format, const std::string& what);

// The conjunction of `conds`, or an undefined Expr when empty.
Halide::Expr AllOf(const std::vector<Halide::Expr>& conds);

}  // namespace lower
}  // namespace braze

#endif  // BRAZE_LOWER_LOWER_WINDOW_H_
