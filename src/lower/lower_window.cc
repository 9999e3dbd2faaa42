// Helpers of the window lowerings; see lower_window.h.
#include "lower/lower_window.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace braze {
namespace lower {

using Halide::Expr;

std::vector<Expr> Index4(DataFormat format, const Nhwc& at) {
  if (format == DataFormat::kNHWC) return {at.n, at.h, at.w, at.c};
  return {at.n, at.c, at.h, at.w};
}

Nhwc Split4(DataFormat format, const std::vector<Expr>& index) {
  const LayoutAxes a = AxesOf(format);
  return {index[a.n], index[a.h], index[a.w], index[a.c]};
}

Expr InputIndex(const SpatialDim& d, const Expr& o, const Expr& t) {
  Expr i = o * static_cast<int>(d.stride) - static_cast<int>(d.pad_before);
  return i + t * static_cast<int>(d.dilation);
}

bool MayPad(const SpatialDim& d, int64_t tap) {
  const int64_t first = tap >= 0 ? tap : 0;
  const int64_t last = tap >= 0 ? tap : d.window - 1;
  return d.Input(0, first) < 0 || d.Input(d.out - 1, last) >= d.in;
}

Expr Inside(const Expr& i, int64_t in) { return i >= 0 && i < static_cast<int>(in); }

Expr ClampTo(const Expr& i, int64_t in) { return Halide::clamp(i, 0, static_cast<int>(in) - 1); }

Expr InsideForWhere(const Expr& i, int64_t end) {
  return Halide::cast(Halide::UInt(32), i) < Halide::cast(Halide::UInt(32), Expr(end));
}

absl::Status CheckSymbolicBatchOnly(const Value& v, DataFormat format, const std::string& what) {
  const LayoutAxes a = AxesOf(format);
  for (size_t d = 0; d < v.shape.size(); ++d) {
    if (static_cast<int>(d) != a.n && SymbolOf(v, d) >= 0) {
      return absl::UnimplementedError(absl::StrCat(
          what, " has a symbolic dim ", d, " (only the batch dim of a window op may be symbolic)"));
    }
  }
  return absl::OkStatus();
}

Expr AllOf(const std::vector<Expr>& conds) {
  Expr all;
  for (const Expr& c : conds) all = all.defined() ? (all && c) : c;
  return all;
}

}  // namespace lower
}  // namespace braze
