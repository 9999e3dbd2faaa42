// Reference kernels of the window ops: convolutions, pools and their gradient ops. Plain
// loops over the geometry of ir/window_geometry.h, accumulating in double.
//
// Semantics every compiled form must match:
// - Padding taps contribute nothing to a convolution (not 0 * w: an inf in the filter
//   does not turn a padded window NaN), nor to AvgPool, which divides by the number of
//   taps inside x; MaxPool's padding is -inf.
// - MaxPool is the Max reduction over the window: NaN propagates, -0 < +0.
// - MaxPoolGrad routes each window's dy to its first NaN, else to its first maximum in
//   row-major (h, then w) order, as ArgMax picks; MaxPoolGradGrad reads g there.
#include <cmath>
#include <limits>

#include "absl/strings/str_cat.h"
#include "braze/status.h"
#include "ir/window_geometry.h"
#include "reference/kernel_util.h"

namespace braze {
namespace reference_internal {
namespace {

// Flat offsets of a rank-4 tensor of `format` with sizes N x H x W x C.
struct Index4 {
  Index4(DataFormat format, int64_t h, int64_t w, int64_t c) : nhwc(format == DataFormat::kNHWC) {
    hs = nhwc ? w * c : w;
    ws = nhwc ? c : 1;
    cs = nhwc ? 1 : h * w;
    ns = h * w * c;
  }
  int64_t operator()(int64_t n, int64_t h, int64_t w, int64_t c) const {
    return n * ns + h * hs + w * ws + c * cs;
  }
  bool nhwc;
  int64_t ns, hs, ws, cs;
};

bool Inside(int64_t i, const SpatialDim& d) { return i >= 0 && i < d.in; }

absl::Status CheckOut(const char* op, const TensorType& want, const TensorType& out) {
  if (want != out) {
    return absl::InvalidArgumentError(
        absl::StrCat(op, " computes ", TypeString(want), ", but its output is ", TypeString(out)));
  }
  return absl::OkStatus();
}

// Calls fn(n, oh, ow, ih, iw) for every tap of every window that lies inside x.
template <typename Fn>
void ForEachTap(int64_t n_size, const SpatialDim& h, const SpatialDim& w, Fn&& fn) {
  for (int64_t n = 0; n < n_size; ++n) {
    for (int64_t oh = 0; oh < h.out; ++oh) {
      for (int64_t ow = 0; ow < w.out; ++ow) {
        for (int64_t th = 0; th < h.window; ++th) {
          const int64_t ih = h.Input(oh, th);
          if (!Inside(ih, h)) continue;
          for (int64_t tw = 0; tw < w.window; ++tw) {
            const int64_t iw = w.Input(ow, tw);
            if (Inside(iw, w)) fn(n, oh, ow, th, tw, ih, iw);
          }
        }
      }
    }
  }
}

template <typename T>
HostTensor FromDouble(const std::vector<double>& acc, const TensorType& out) {
  HostTensor result(out.dtype, out.shape);
  T* o = result.data<T>();
  for (size_t i = 0; i < acc.size(); ++i) o[i] = static_cast<T>(acc[i]);
  return result;
}

// x [N,H,W,C] (format), filter [KH,KW,C/groups,Cout], y [N,OH,OW,Cout]: one of the three
// is computed from the other two.
template <typename T>
Kernel Conv(OpKind op, const Conv2DGeometry& g, const HostTensor* x, const HostTensor* f,
            const HostTensor* dy, const TensorType& out) {
  const Index4 xi(g.format, g.h.in, g.w.in, g.c_in);
  const Index4 yi(g.format, g.h.out, g.w.out, g.c_out);
  const int64_t cg = g.c_in / g.groups;   // input channels per group
  const int64_t og = g.c_out / g.groups;  // output channels per group
  auto fi = [&](int64_t th, int64_t tw, int64_t ci, int64_t co) {
    return ((th * g.w.window + tw) * cg + ci) * g.c_out + co;
  };
  std::vector<double> acc(NumElements(out.shape), 0.0);
  const T* px = x ? x->data<T>() : nullptr;
  const T* pf = f ? f->data<T>() : nullptr;
  const T* pd = dy ? dy->data<T>() : nullptr;
  ForEachTap(
      g.n, g.h, g.w,
      [&](int64_t n, int64_t oh, int64_t ow, int64_t th, int64_t tw, int64_t ih, int64_t iw) {
        for (int64_t co = 0; co < g.c_out; ++co) {
          const int64_t c0 = (co / og) * cg;  // the group's first input channel
          for (int64_t ci = 0; ci < cg; ++ci) {
            const int64_t xo = xi(n, ih, iw, c0 + ci);
            const int64_t fo = fi(th, tw, ci, co);
            const int64_t yo = yi(n, oh, ow, co);
            if (op == OpKind::kConv2D) {
              acc[yo] += static_cast<double>(px[xo]) * static_cast<double>(pf[fo]);
            } else if (op == OpKind::kConv2DBackpropInput) {
              acc[xo] += static_cast<double>(pd[yo]) * static_cast<double>(pf[fo]);
            } else {
              acc[fo] += static_cast<double>(px[xo]) * static_cast<double>(pd[yo]);
            }
          }
        }
      });
  return std::vector<HostTensor>{FromDouble<T>(acc, out)};
}

// Each window's first NaN, else its first maximum (an offset into x), or -1 when the
// window holds no element of x (never, by Pool2DGeometryOf's checks).
template <typename T>
std::vector<int64_t> WindowArgMax(const Pool2DGeometry& g, const T* px) {
  const Index4 xi(g.format, g.h.in, g.w.in, g.c);
  const Index4 yi(g.format, g.h.out, g.w.out, g.c);
  std::vector<int64_t> best(static_cast<size_t>(g.n * g.h.out * g.w.out * g.c), -1);
  ForEachTap(g.n, g.h, g.w,
             [&](int64_t n, int64_t oh, int64_t ow, int64_t, int64_t, int64_t ih, int64_t iw) {
               for (int64_t c = 0; c < g.c; ++c) {
                 int64_t& b = best[yi(n, oh, ow, c)];
                 const int64_t at = xi(n, ih, iw, c);
                 if (b < 0) {
                   b = at;
                 } else if (!std::isnan(px[b]) && (std::isnan(px[at]) || px[at] > px[b])) {
                   b = at;
                 }
               }
             });
  return best;
}

template <typename T>
Kernel Pool(OpKind op, const Pool2DGeometry& g, absl::Span<const HostTensor> in,
            const TensorType& out) {
  const Index4 xi(g.format, g.h.in, g.w.in, g.c);
  const Index4 yi(g.format, g.h.out, g.w.out, g.c);
  std::vector<double> acc(NumElements(out.shape), 0.0);
  switch (op) {
    case OpKind::kMaxPool: {
      const T* px = in[0].data<T>();
      std::fill(acc.begin(), acc.end(), -std::numeric_limits<double>::infinity());
      ForEachTap(g.n, g.h, g.w,
                 [&](int64_t n, int64_t oh, int64_t ow, int64_t, int64_t, int64_t ih, int64_t iw) {
                   for (int64_t c = 0; c < g.c; ++c) {
                     double& a = acc[yi(n, oh, ow, c)];
                     const double v = px[xi(n, ih, iw, c)];
                     if (std::isnan(a)) continue;
                     if (std::isnan(v) || v > a || (v == 0 && a == 0 && !std::signbit(v))) a = v;
                   }
                 });
      break;
    }
    case OpKind::kMaxPoolGrad:
    case OpKind::kMaxPoolGradGrad: {
      const std::vector<int64_t> best = WindowArgMax<T>(g, in[0].data<T>());
      const T* pv = in[1].data<T>();
      for (size_t o = 0; o < best.size(); ++o) {
        if (best[o] < 0) continue;
        if (op == OpKind::kMaxPoolGrad) {
          acc[best[o]] += static_cast<double>(pv[o]);
        } else {
          acc[o] = static_cast<double>(pv[best[o]]);
        }
      }
      break;
    }
    case OpKind::kAvgPool:
    case OpKind::kAvgPoolGrad: {
      std::vector<int64_t> count(static_cast<size_t>(g.n * g.h.out * g.w.out * g.c), 0);
      ForEachTap(g.n, g.h, g.w,
                 [&](int64_t n, int64_t oh, int64_t ow, int64_t, int64_t, int64_t, int64_t) {
                   for (int64_t c = 0; c < g.c; ++c) ++count[yi(n, oh, ow, c)];
                 });
      const T* pv = in[0].data<T>();
      ForEachTap(g.n, g.h, g.w,
                 [&](int64_t n, int64_t oh, int64_t ow, int64_t, int64_t, int64_t ih, int64_t iw) {
                   for (int64_t c = 0; c < g.c; ++c) {
                     const int64_t o = yi(n, oh, ow, c);
                     const int64_t i = xi(n, ih, iw, c);
                     if (op == OpKind::kAvgPool) {
                       acc[o] += static_cast<double>(pv[i]);
                     } else {
                       acc[i] += static_cast<double>(pv[o]) / static_cast<double>(count[o]);
                     }
                   }
                 });
      // AvgPool divides the window's sum once: a sum of the rounded quotients x / count
      // is not 0 where the window sums to exactly 0 (+-2^-56 for multiples of 1/8 over
      // 9 taps), and a Relu or Sign after the pool took its sign from the rounding.
      if (op == OpKind::kAvgPool) {
        for (size_t o = 0; o < acc.size(); ++o) acc[o] /= static_cast<double>(count[o]);
      }
      break;
    }
    default:
      return absl::InternalError(absl::StrCat(OpName(op), " is not a pool"));
  }
  return std::vector<HostTensor>{FromDouble<T>(acc, out)};
}

}  // namespace

Kernel RunConv(OpKind op, const Conv2DAttrs& attrs, absl::Span<const HostTensor> in,
               const TensorType& out) {
  if (in.size() != 2)
    return absl::InvalidArgumentError(absl::StrCat(OpName(op), " takes 2 inputs"));
  if (in[0].dtype() != in[1].dtype() || !IsFloating(in[0].dtype())) {
    return absl::InvalidArgumentError(absl::StrCat(OpName(op), " needs two f32 or f64 inputs, got ",
                                                   TypeString(in[0].type()), " and ",
                                                   TypeString(in[1].type())));
  }
  const HostTensor* x = nullptr;
  const HostTensor* f = nullptr;
  const HostTensor* dy = nullptr;
  Shape x_shape, f_shape;
  switch (op) {
    case OpKind::kConv2D:
      x = &in[0], f = &in[1], x_shape = in[0].shape(), f_shape = in[1].shape();
      break;
    case OpKind::kConv2DBackpropInput:
      f = &in[0], dy = &in[1], x_shape = out.shape, f_shape = in[0].shape();
      break;
    default:
      x = &in[0], dy = &in[1], x_shape = in[0].shape(), f_shape = out.shape;
      break;
  }
  absl::StatusOr<Conv2DGeometry> g = Conv2DGeometryOf(attrs.window, x_shape, f_shape);
  if (!g.ok())
    return absl::InvalidArgumentError(absl::StrCat(OpName(op), ": ", g.status().message()));
  const DType dt = in[0].dtype();
  const Shape want = op == OpKind::kConv2D                ? g->OutputShape()
                     : op == OpKind::kConv2DBackpropInput ? x_shape
                                                          : f_shape;
  BRAZE_RETURN_IF_ERROR(CheckOut(OpName(op), {dt, want}, out));
  if (dy != nullptr && dy->shape() != g->OutputShape()) {
    return absl::InvalidArgumentError(absl::StrCat(OpName(op), ": dy is ", ShapeString(dy->shape()),
                                                   ", expected ", ShapeString(g->OutputShape())));
  }
  if (dt == DType::kF32) return Conv<float>(op, *g, x, f, dy, out);
  return Conv<double>(op, *g, x, f, dy, out);
}

Kernel RunPool(OpKind op, const Pool2DAttrs& attrs, absl::Span<const HostTensor> in,
               const TensorType& out) {
  if (in.empty() || !IsFloating(in[0].dtype())) {
    return absl::InvalidArgumentError(absl::StrCat(OpName(op), " needs f32 or f64 inputs"));
  }
  for (const HostTensor& t : in) {
    if (t.dtype() != in[0].dtype()) {
      return absl::InvalidArgumentError(absl::StrCat(OpName(op), " operand dtypes differ"));
    }
  }
  const Shape x_shape = op == OpKind::kAvgPoolGrad ? out.shape : in[0].shape();
  absl::StatusOr<Pool2DGeometry> g = Pool2DGeometryOf(attrs, x_shape);
  if (!g.ok())
    return absl::InvalidArgumentError(absl::StrCat(OpName(op), ": ", g.status().message()));
  const Shape y_shape = g->OutputShape();
  Shape want = y_shape;
  const Shape* second = nullptr;  // the shape in[1] (or AvgPoolGrad's in[0]) must have
  switch (op) {
    case OpKind::kMaxPoolGrad:
      want = x_shape, second = &y_shape;
      break;
    case OpKind::kMaxPoolGradGrad:
      second = &x_shape;
      break;
    case OpKind::kAvgPoolGrad:
      want = x_shape;
      break;
    default:
      break;
  }
  BRAZE_RETURN_IF_ERROR(CheckOut(OpName(op), {in[0].dtype(), want}, out));
  const size_t expected_inputs =
      (op == OpKind::kMaxPoolGrad || op == OpKind::kMaxPoolGradGrad) ? 2 : 1;
  if (in.size() != expected_inputs) {
    return absl::InvalidArgumentError(
        absl::StrCat(OpName(op), " takes ", expected_inputs, " inputs"));
  }
  if (second != nullptr && in[1].shape() != *second) {
    return absl::InvalidArgumentError(absl::StrCat(OpName(op), ": input 1 is ",
                                                   ShapeString(in[1].shape()), ", expected ",
                                                   ShapeString(*second)));
  }
  if (op == OpKind::kAvgPoolGrad && in[0].shape() != y_shape) {
    return absl::InvalidArgumentError(absl::StrCat(
        "AvgPoolGrad: dy is ", ShapeString(in[0].shape()), ", expected ", ShapeString(y_shape)));
  }
  if (in[0].dtype() == DType::kF32) return Pool<float>(op, *g, in, out);
  return Pool<double>(op, *g, in, out);
}

}  // namespace reference_internal
}  // namespace braze
