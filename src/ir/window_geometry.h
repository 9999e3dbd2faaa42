// The geometry of 2-D windows (convolution filters, pooling windows) over the spatial
// dims of a tensor: output sizes and leading padding, defined once for shape inference,
// the reference kernels, the lowering and the gradients.
//
// Output sizes follow TF: with an effective window e = (k - 1) * dilation + 1,
//   VALID:    out = (in - e) / stride + 1, an error when in < e;
//   SAME:     out = ceil(in / stride), padding max((out - 1) * stride + e - in, 0) split
//             with the smaller half before;
//   EXPLICIT: out = (in + before + after - e) / stride + 1.
// Input element i of output o and window tap t is o * stride - pad_before + t * dilation.
#ifndef BRAZE_IR_WINDOW_GEOMETRY_H_
#define BRAZE_IR_WINDOW_GEOMETRY_H_

#include <array>
#include <cstdint>

#include "absl/status/statusor.h"
#include "braze/graph.h"

namespace braze {

// One spatial dim. `in` and `out` are -1 while the input's dim is unknown.
struct SpatialDim {
  int64_t in = 0;
  int64_t window = 1;  // taps (k), not the dilated extent
  int64_t stride = 1;
  int64_t dilation = 1;
  int64_t pad_before = 0;
  int64_t out = 0;
  // The input index that output o's tap t reads (may be outside [0, in): padding).
  int64_t Input(int64_t o, int64_t t) const { return o * stride - pad_before + t * dilation; }
};

// Positions of N, H, W and C in a rank-4 shape of `format`.
struct LayoutAxes {
  int n, h, w, c;
};
LayoutAxes AxesOf(DataFormat format);
// A rank-4 shape of `format` from its N, H, W and C sizes.
Shape MakeShape(DataFormat format, int64_t n, int64_t h, int64_t w, int64_t c);

// A conv's geometry: x is N x H x W x C_in (in `format`), the filter
// [KH, KW, C_in / groups, C_out].
struct Conv2DGeometry {
  DataFormat format = DataFormat::kNHWC;
  int64_t n = 0;
  int64_t c_in = 0;
  int64_t c_out = 0;
  int64_t groups = 1;
  SpatialDim h, w;
  Shape OutputShape() const { return MakeShape(format, n, h.out, w.out, c_out); }
};
// Checks the attributes and shapes (strides, dilations and explicit pads, rank 4, the
// channel split into groups); the error names what is wrong, not the node.
absl::StatusOr<Conv2DGeometry> Conv2DGeometryOf(const Window2D& window, const Shape& x,
                                                const Shape& filter);

// A pool's geometry: x is N x H x W x C (in `format`). Explicit pads must be smaller
// than the window, so that every window holds an element of x.
struct Pool2DGeometry {
  DataFormat format = DataFormat::kNHWC;
  int64_t n = 0;
  int64_t c = 0;
  SpatialDim h, w;
  Shape OutputShape() const { return MakeShape(format, n, h.out, w.out, c); }
};
absl::StatusOr<Pool2DGeometry> Pool2DGeometryOf(const Pool2DAttrs& attrs, const Shape& x);

const char* PaddingName(Padding padding);   // "VALID", "SAME", "EXPLICIT"
const char* FormatName(DataFormat format);  // "NHWC", "NCHW"

}  // namespace braze

#endif  // BRAZE_IR_WINDOW_GEOMETRY_H_
