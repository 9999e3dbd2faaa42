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

// Unimplemented, naming `what`, when a dim of `v` other than N is symbolic (its class
// follows the batch; H, W and C are geometry, which one kernel cannot hold for every size).
absl::Status CheckSymbolicBatchOnly(const Value& v, DataFormat format, const std::string& what);

// The conjunction of `conds`, or an undefined Expr when empty.
Halide::Expr AllOf(const std::vector<Halide::Expr>& conds);

}  // namespace lower
}  // namespace braze

#endif  // BRAZE_LOWER_LOWER_WINDOW_H_
