// Random programs, the sequence ops (GenerateOptions::sequence_probability): embedding
// lookups (Gather) of odd vocabularies by ids with repeats and out-of-range values at
// both ends, UnsortedSegmentSum (an embedding's gradient, drawn as an op of its own),
// positions from Iota (plain, as a positional encoding's Sin, and as a causal mask) on
// any axis of any value, a -1 batch included, and Sin and Cos (of large arguments too).
// random_program.cc's Generator calls DrawSequenceOp through the Drawer interface
// (random_program_internal.h), from a random stream of its own.
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "braze/ops.h"
#include "tools/fuzz/random_program_internal.h"

namespace braze {
namespace fuzz {
namespace internal {
namespace {

// The most elements a drawn value may have (a dynamic dim counted as 40: fuzz_runner.cc
// feeds a dynamic input up to its first size + 37).
constexpr int64_t kMaxElements = 50000;

int64_t Elements(const Shape& s) {
  int64_t n = 1;
  for (int64_t d : s) n *= d < 0 ? 40 : d;
  return n;
}

int Pick(Drawer& d, const std::vector<int>& from) {
  return from[d.Uniform(static_cast<int>(from.size()))];
}

// Ids (i32) of `shape` spread over about [-k, n + k): a constant of [-3, 3] scaled and
// shifted, or an earlier i32 value of that shape. Repeats and out-of-range ids at both
// ends are common.
int DrawIds(Drawer& d, const Shape& shape, int64_t n, int* scale, int* offset) {
  *scale = Pick(d, {1, 1, 2, 3, 5});
  *offset = d.Uniform(static_cast<int>(n) + 1);
  if (d.Chance(0.3)) {
    const int v = d.Pick([&](const Tensor& t) {
      return t.dtype() == DType::kI32 && t.shape() == shape && NumElements(t.shape()) > 0;
    });
    if (v >= 0) return v;
  }
  return d.AddConst(DType::kI32, shape);
}

bool DrawGather(Drawer& d) {
  int table = -1;
  if (d.Chance(0.6)) {
    table = d.Pick([](const Tensor& t) {
      if (!IsFloating(t.dtype()) || t.rank() < 1 || NumElements(t.shape()) == 0) return false;
      for (int64_t x : t.shape()) {
        if (x > 0) return true;
      }
      return false;
    });
  }
  if (table < 0) {  // an embedding table of an odd vocabulary
    const int64_t vocab = Pick(d, {1, 3, 5, 7, 13, 17, 31, 67});
    const int64_t width = Pick(d, {1, 2, 5, 8, 16, 33});
    table = d.AddConst(d.Chance(0.2) ? DType::kF64 : DType::kF32, {vocab, width});
  }
  const Tensor tv = d.value(table);
  std::vector<int> axes;
  for (int a = 0; a < tv.rank(); ++a) {
    if (tv.shape()[a] > 0) axes.push_back(a);  // a known vocabulary: it has a gradient
  }
  if (axes.empty()) return false;
  const int axis = Pick(d, axes);
  const int64_t vocab = tv.shape()[axis];
  Shape ids_shape;
  const int ids_rank = Pick(d, {0, 1, 1, 2, 2, 3});
  for (int i = 0; i < ids_rank; ++i) ids_shape.push_back(Pick(d, {1, 2, 3, 5, 7, 9, 16}));
  if (Elements(tv.shape()) / vocab * Elements(ids_shape) > kMaxElements) return false;
  int scale = 1, offset = 0;
  const int ids = DrawIds(d, ids_shape, vocab, &scale, &offset);
  d.Push(
      {table, ids},
      [=](Graph&, const std::vector<Tensor>& v) {
        return Gather(v[0], v[1] * static_cast<double>(scale) + static_cast<double>(offset), axis);
      },
      absl::StrCat("Gather($0, $1 * ", scale, ".0 + ", offset, ".0, ", axis, ")"));
  return true;
}

bool DrawSegmentSum(Drawer& d) {
  const int data = d.Pick([](const Tensor& t) {
    if (!IsFloating(t.dtype()) || t.rank() < 1 || NumElements(t.shape()) == 0) return false;
    for (int64_t x : t.shape()) {
      if (x > 0) return true;
    }
    return false;
  });
  if (data < 0) return false;
  const Tensor dv = d.value(data);
  std::vector<int> axes;
  for (int a = 0; a < dv.rank(); ++a) {
    if (dv.shape()[a] > 0) axes.push_back(a);  // the ids' shape is a constant's
  }
  const int axis = Pick(d, axes);
  int ids_rank = 1;
  if (axis + 1 < dv.rank() && dv.shape()[axis + 1] > 0 && d.Chance(0.3)) ids_rank = 2;
  const Shape ids_shape(dv.shape().begin() + axis, dv.shape().begin() + axis + ids_rank);
  const int64_t segments = Pick(d, {1, 2, 3, 5, 7, 11, 13});
  // Each output element walks every id: bound that work too.
  const int64_t out = Elements(dv.shape()) / Elements(ids_shape) * segments;
  if (out > kMaxElements || out * Elements(ids_shape) > (int64_t{1} << 22)) return false;
  int scale = 1, offset = 0;
  const int ids = DrawIds(d, ids_shape, segments, &scale, &offset);
  d.Push(
      {data, ids},
      [=](Graph&, const std::vector<Tensor>& v) {
        return UnsortedSegmentSum(
            v[0], v[1] * static_cast<double>(scale) + static_cast<double>(offset), segments, axis);
      },
      absl::StrCat("UnsortedSegmentSum($0, $1 * ", scale, ".0 + ", offset, ".0, ", segments, ", ",
                   axis, ")"));
  return true;
}

const char* DTypeName3(DType t) {
  return t == DType::kF32 ? "DType::kF32" : t == DType::kF64 ? "DType::kF64" : "DType::kI32";
}

// Positions along an axis of any value (a -1 dim preferred: the symbolic case), alone,
// as a positional encoding added to a float value, or as a causal mask.
bool DrawIota(Drawer& d) {
  const bool dynamic_first = d.Chance(0.5);
  int like = -1;
  if (dynamic_first) {
    like = d.Pick([](const Tensor& t) { return t.rank() >= 1 && t.shape()[0] < 0; });
  }
  if (like < 0) like = d.Pick([](const Tensor& t) { return t.rank() >= 1; });
  if (like < 0) return false;
  const Tensor lv = d.value(like);
  const int axis = lv.shape()[0] < 0 && d.Chance(0.6) ? 0 : d.Uniform(lv.rank());
  const int64_t n = lv.shape()[axis] < 0 ? 40 : lv.shape()[axis];
  const int kind = d.Uniform(3);
  if (kind == 0) {
    const int k = d.Uniform(3);
    const DType t = k == 0 ? DType::kI32 : k == 1 ? DType::kF32 : DType::kF64;
    d.Push(
        {like}, [=](Graph&, const std::vector<Tensor>& v) { return Iota(v[0], axis, t); },
        absl::StrCat("Iota($0, ", axis, ", ", DTypeName3(t), ")"));
    return true;
  }
  if (kind == 1) {
    if (n * n > kMaxElements) return false;
    d.Push(
        {like},
        [=](Graph&, const std::vector<Tensor>& v) {
          const Tensor p = Iota(v[0], axis);
          return Cast(Less(Reshape(p, {-1, 1}), Reshape(p, {1, -1})), DType::kF32);
        },
        absl::StrCat("Cast(Less(Reshape(Iota($0, ", axis, "), {-1, 1}), Reshape(Iota($0, ", axis,
                     "), {1, -1})), DType::kF32)"));
    return true;
  }
  // x + Sin(positions * w) along x's last axis: a sinusoidal encoding.
  if (!IsFloating(lv.dtype())) return false;
  const int last = lv.rank() - 1;
  const double w = Pick(d, {1, 3, 7}) * 0.37;
  const std::string dt = DTypeName3(lv.dtype());
  d.Push(
      {like},
      [=](Graph&, const std::vector<Tensor>& v) {
        return v[0] + Sin(Iota(v[0], last, v[0].dtype()) * w);
      },
      absl::StrCat("$0 + Sin(Iota($0, ", last, ", ", dt, ") * ", w, ")"));
  return true;
}

bool DrawSinCos(Drawer& d) {
  const int x = d.Pick([](const Tensor& t) { return IsFloating(t.dtype()); });
  if (x < 0) return false;
  const bool sin = d.Chance(0.5);
  // Large arguments now and then: the range reduction must match the reference's.
  const double scale = d.Chance(0.3) ? Pick(d, {25, 1000}) : 1;
  d.Push(
      {x},
      [=](Graph&, const std::vector<Tensor>& v) {
        const Tensor a = scale == 1 ? v[0] : v[0] * scale;
        return sin ? Sin(a) : Cos(a);
      },
      scale == 1 ? absl::StrCat(sin ? "Sin" : "Cos", "($0)")
                 : absl::StrCat(sin ? "Sin" : "Cos", "($0 * ", scale, ".0)"));
  return true;
}

}  // namespace

bool DrawSequenceOp(Drawer& d) {
  const int r = d.Uniform(20);
  if (r < 8) return DrawGather(d);
  if (r < 12) return DrawSegmentSum(d);
  if (r < 16) return DrawIota(d);
  return DrawSinCos(d);
}

}  // namespace internal
}  // namespace fuzz
}  // namespace braze
