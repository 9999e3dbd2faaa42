// Window geometry; see window_geometry.h.
#include "ir/window_geometry.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "braze/status.h"

namespace braze {
namespace {

absl::Status Invalid(std::string msg) { return absl::InvalidArgumentError(std::move(msg)); }

// Sizes this large overflow the index arithmetic of the kernels (int32 in Halide).
constexpr int64_t kMaxWindowParam = 1 << 20;

absl::StatusOr<SpatialDim> SpatialDimOf(const char* dim, int64_t in, int64_t window, int stride,
                                        int dilation, Padding padding, int64_t before,
                                        int64_t after) {
  if (stride < 1 || stride > kMaxWindowParam) {
    return Invalid(absl::StrCat("stride along ", dim, " must be in [1, 2^20], got ", stride));
  }
  if (dilation < 1 || dilation > kMaxWindowParam) {
    return Invalid(absl::StrCat("dilation along ", dim, " must be in [1, 2^20], got ", dilation));
  }
  if (window < 1 || window > kMaxWindowParam) {
    return Invalid(absl::StrCat("window along ", dim, " must be in [1, 2^20], got ", window));
  }
  SpatialDim d;
  d.in = in;
  d.window = window;
  d.stride = stride;
  d.dilation = dilation;
  const int64_t extent = (window - 1) * dilation + 1;
  if (padding == Padding::kExplicit) {
    if (before < 0 || after < 0 || before > kMaxWindowParam || after > kMaxWindowParam) {
      return Invalid(absl::StrCat("explicit padding along ", dim, " must be in [0, 2^20], got ",
                                  before, " and ", after));
    }
    d.pad_before = before;
  } else if (before != 0 || after != 0) {
    // As TF's explicit_paddings: set only with EXPLICIT (they would be ignored, yet keep
    // two equal ops apart in the cache key and could be too large for the dump text).
    return Invalid(absl::StrCat("pads along ", dim, " are for EXPLICIT padding; ",
                                PaddingName(padding), " takes none, got ", before, " and ", after));
  }
  if (in < 0) {  // unknown until run time
    d.out = -1;
    return d;
  }
  switch (padding) {
    case Padding::kValid:
    case Padding::kExplicit: {
      const int64_t padded = padding == Padding::kValid ? in : in + before + after;
      if (padded < extent) {
        return Invalid(absl::StrCat(dim, " is ", in,
                                    padding == Padding::kValid ? "" : " padded to ",
                                    padding == Padding::kValid ? "" : absl::StrCat(padded),
                                    ", smaller than the window's extent ", extent));
      }
      d.out = (padded - extent) / stride + 1;
      break;
    }
    case Padding::kSame: {
      d.out = (in + stride - 1) / stride;
      const int64_t total = std::max<int64_t>((d.out - 1) * stride + extent - in, 0);
      d.pad_before = total / 2;
      break;
    }
  }
  return d;
}

// A Padding or DataFormat outside its enum (an int cast to one): the padding's switch
// matched no case and left every output dim 0, and any format but NHWC read as NCHW.
absl::Status CheckEnums(const Window2D& w) {
  if (w.padding != Padding::kValid && w.padding != Padding::kSame &&
      w.padding != Padding::kExplicit) {
    return Invalid(absl::StrCat("unknown padding ", static_cast<int>(w.padding),
                                " (not a braze::Padding: VALID, SAME or EXPLICIT)"));
  }
  if (w.format != DataFormat::kNHWC && w.format != DataFormat::kNCHW) {
    return Invalid(absl::StrCat("unknown data format ", static_cast<int>(w.format),
                                " (not a braze::DataFormat: NHWC or NCHW)"));
  }
  return absl::OkStatus();
}

absl::Status CheckRank4(const char* what, const Shape& s) {
  if (s.size() != 4) {
    return Invalid(absl::StrCat(what, " must have rank 4, got ", ShapeString(s)));
  }
  return absl::OkStatus();
}

}  // namespace

LayoutAxes AxesOf(DataFormat format) {
  return format == DataFormat::kNHWC ? LayoutAxes{0, 1, 2, 3} : LayoutAxes{0, 2, 3, 1};
}

Shape MakeShape(DataFormat format, int64_t n, int64_t h, int64_t w, int64_t c) {
  return format == DataFormat::kNHWC ? Shape{n, h, w, c} : Shape{n, c, h, w};
}

absl::StatusOr<Conv2DGeometry> Conv2DGeometryOf(const Window2D& window, const Shape& x,
                                                const Shape& filter) {
  BRAZE_RETURN_IF_ERROR(CheckEnums(window));
  BRAZE_RETURN_IF_ERROR(CheckRank4("the input", x));
  BRAZE_RETURN_IF_ERROR(CheckRank4("the filter [KH, KW, C_in / groups, C_out]", filter));
  const LayoutAxes a = AxesOf(window.format);
  Conv2DGeometry g;
  g.format = window.format;
  g.n = x[a.n];
  g.c_in = x[a.c];
  g.c_out = filter[3];
  for (int d = 0; d < 4; ++d) {
    if (filter[d] == 0 || filter[d] < -1) {
      return Invalid(absl::StrCat("filter shape ", ShapeString(filter), " has an empty dim"));
    }
  }
  if (g.c_in == 0) return Invalid(absl::StrCat("input ", ShapeString(x), " has no channels"));
  if (g.c_in > 0 && filter[2] > 0) {
    if (g.c_in % filter[2] != 0) {
      return Invalid(absl::StrCat("input channels ", g.c_in, " are not a multiple of the filter's ",
                                  filter[2], " (C_in / groups)"));
    }
    g.groups = g.c_in / filter[2];
    if (g.c_out > 0 && g.c_out % g.groups != 0) {
      return Invalid(absl::StrCat("output channels ", g.c_out, " are not a multiple of the ",
                                  g.groups, " groups"));
    }
  }
  if (filter[0] < 0 || filter[1] < 0) {
    return Invalid(
        absl::StrCat("filter shape ", ShapeString(filter), " must have known spatial dims"));
  }
  BRAZE_ASSIGN_OR_RETURN(
      g.h, SpatialDimOf("H", x[a.h], filter[0], window.stride_h, window.dilation_h, window.padding,
                        window.pad_top, window.pad_bottom));
  BRAZE_ASSIGN_OR_RETURN(
      g.w, SpatialDimOf("W", x[a.w], filter[1], window.stride_w, window.dilation_w, window.padding,
                        window.pad_left, window.pad_right));
  return g;
}

absl::StatusOr<Pool2DGeometry> Pool2DGeometryOf(const Pool2DAttrs& attrs, const Shape& x) {
  const Window2D& window = attrs.window;
  BRAZE_RETURN_IF_ERROR(CheckEnums(window));
  BRAZE_RETURN_IF_ERROR(CheckRank4("the input", x));
  if (window.dilation_h != 1 || window.dilation_w != 1) {
    return Invalid("pooling windows take no dilation");
  }
  const LayoutAxes a = AxesOf(window.format);
  Pool2DGeometry g;
  g.format = window.format;
  g.n = x[a.n];
  g.c = x[a.c];
  BRAZE_ASSIGN_OR_RETURN(g.h, SpatialDimOf("H", x[a.h], attrs.size_h, window.stride_h, 1,
                                           window.padding, window.pad_top, window.pad_bottom));
  BRAZE_ASSIGN_OR_RETURN(g.w, SpatialDimOf("W", x[a.w], attrs.size_w, window.stride_w, 1,
                                           window.padding, window.pad_left, window.pad_right));
  // After the window sizes are checked (a 0 window is that error, not this one).
  if (window.padding == Padding::kExplicit &&
      (window.pad_top >= attrs.size_h || window.pad_bottom >= attrs.size_h ||
       window.pad_left >= attrs.size_w || window.pad_right >= attrs.size_w)) {
    return Invalid(absl::StrCat("explicit pooling pads must be smaller than the ", attrs.size_h,
                                "x", attrs.size_w, " window, got top ", window.pad_top, ", bottom ",
                                window.pad_bottom, ", left ", window.pad_left, ", right ",
                                window.pad_right));
  }
  // Pads smaller than the window keep an element of x in every window, unless x has none
  // along the dim (a max of nothing, a mean of nothing).
  if (window.padding == Padding::kExplicit && (g.h.in == 0 || g.w.in == 0) &&
      (g.h.out != 0 && g.w.out != 0)) {
    return Invalid(absl::StrCat(g.h.in == 0 ? "H" : "W",
                                " is 0: explicit padding would make windows of padding only"));
  }
  return g;
}

const char* PaddingName(Padding padding) {
  switch (padding) {
    case Padding::kValid:
      return "VALID";
    case Padding::kSame:
      return "SAME";
    case Padding::kExplicit:
      return "EXPLICIT";
  }
  return "?";
}

const char* FormatName(DataFormat format) { return format == DataFormat::kNHWC ? "NHWC" : "NCHW"; }

}  // namespace braze
