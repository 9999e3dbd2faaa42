// Random programs, bf16 and f16 (GenerateOptions::float16_probability;
// docs/MIXED_PRECISION.md): a float value cast to a 16-bit type, 16-bit values through
// elementwise ops, broadcasting binaries, reductions, matmuls, softmax and layer norm,
// casts between the 16-bit types and back to f32 or f64. A value computed from a 16-bit
// rounding is judged at RunOptions::rtol_16 (ProgramOp::half_rounding); a cast of exact
// values to a 16-bit type is exact (both sides round to nearest even, tested bit for bit
// over every pattern), so the discontinuous ops may still read it.
// random_program.cc's Generator calls DrawFloat16Op through the Drawer interface
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

constexpr int64_t kMaxElements = 50000;  // a dynamic dim counted as 40

int64_t Elements(const Shape& s) {
  int64_t n = 1;
  for (int64_t d : s) n *= d < 0 ? 40 : d;
  return n;
}

bool Small(const Tensor& t) { return Elements(t.shape()) <= kMaxElements; }

DType Draw16(Drawer& d) { return d.Chance(0.5) ? DType::kBF16 : DType::kF16; }

// A 32- or 64-bit float value cast to bf16 or f16.
bool DrawNarrowing(Drawer& d) {
  const int x = d.Pick([](const Tensor& t) {
    return (t.dtype() == DType::kF32 || t.dtype() == DType::kF64) && Small(t);
  });
  if (x < 0) return false;
  const DType to = Draw16(d);
  d.Push(
      {x}, [to](Graph&, const std::vector<Tensor>& v) { return Cast(v[0], to); },
      absl::StrCat("Cast($0, ", DTypeCode(to), ")"));
  return true;
}

// An op on a 16-bit value.
bool DrawOn16(Drawer& d) {
  const int x = d.Pick([](const Tensor& t) { return Is16BitFloat(t.dtype()) && Small(t); });
  if (x < 0) return false;
  const Tensor t = d.value(x);
  const int rank = t.rank();
  switch (d.Uniform(9)) {
    case 0: {
      static const char* kNames[] = {"Exp", "Tanh", "Sigmoid", "Relu", "Square", "Neg", "Sqrt"};
      static Tensor (*const kFns[])(Tensor) = {Exp, Tanh, Sigmoid, Relu, Square, Neg, Sqrt};
      const int k = d.Uniform(7);
      const std::string code = absl::StrCat(kNames[k], k == 6 ? "(Abs($0))" : "($0)");
      d.Push(
          {x},
          [k](Graph&, const std::vector<Tensor>& v) { return kFns[k](k == 6 ? Abs(v[0]) : v[0]); },
          code);
      return true;
    }
    case 1: {  // a binary with a value of the same dtype and shape, or a scalar
      const int y = d.Pick([&](const Tensor& u) { return u.type() == t.type(); });
      if (y >= 0 && d.Chance(0.7)) {
        const int op = d.Uniform(4);
        static const char* kOps[] = {"Add", "Sub", "Mul", "Maximum"};
        static Tensor (*const kFns[])(Tensor, Tensor) = {Add, Sub, Mul, Maximum};
        d.Push(
            {x, y}, [op](Graph&, const std::vector<Tensor>& v) { return kFns[op](v[0], v[1]); },
            absl::StrCat(kOps[op], "($0, $1)"));
        return true;
      }
      d.Push(
          {x}, [](Graph&, const std::vector<Tensor>& v) { return v[0] * 1.5 + 0.25; },
          "$0 * 1.5 + 0.25");
      return true;
    }
    case 2:
    case 3: {  // a reduction
      if (rank < 1) return false;
      const bool mean = d.Chance(0.5);
      const bool keep = d.Chance(0.5);
      d.Push(
          {x},
          [mean, keep](Graph&, const std::vector<Tensor>& v) {
            return mean ? Mean(v[0], {-1}, keep) : Sum(v[0], {-1}, keep);
          },
          absl::StrCat(mean ? "Mean" : "Sum", "($0, {-1}, ", keep ? "true" : "false", ")"));
      return true;
    }
    case 4: {  // a matmul with a constant of the same dtype
      if (rank != 2 || t.shape()[1] < 0) return false;
      const int64_t n = 1 + d.Uniform(9);
      const int w = d.AddConst(t.dtype(), {t.shape()[1], n});
      d.Push(
          {x, w}, [](Graph&, const std::vector<Tensor>& v) { return MatMul(v[0], v[1]); },
          "MatMul($0, $1)");
      return true;
    }
    case 5: {  // softmax or layer norm (statistics in f32)
      if (rank < 1) return false;
      if (d.Chance(0.5)) {
        d.Push(
            {x}, [](Graph&, const std::vector<Tensor>& v) { return Softmax(v[0]); }, "Softmax($0)");
        return true;
      }
      if (t.shape().back() < 0) return false;
      const int g = d.AddConst(t.dtype(), {t.shape().back()});
      const int b = d.AddConst(t.dtype(), {t.shape().back()});
      d.Push(
          {x, g, b},
          [](Graph&, const std::vector<Tensor>& v) { return LayerNorm(v[0], v[1], v[2]); },
          "LayerNorm($0, $1, $2)");
      return true;
    }
    case 6: {  // to the other 16-bit type
      const DType to = t.dtype() == DType::kBF16 ? DType::kF16 : DType::kBF16;
      d.Push(
          {x}, [to](Graph&, const std::vector<Tensor>& v) { return Cast(v[0], to); },
          absl::StrCat("Cast($0, ", DTypeCode(to), ")"));
      return true;
    }
    default: {  // back to f32 or f64
      const DType to = d.Chance(0.7) ? DType::kF32 : DType::kF64;
      d.Push(
          {x}, [to](Graph&, const std::vector<Tensor>& v) { return Cast(v[0], to); },
          absl::StrCat("Cast($0, ", DTypeCode(to), ")"));
      return true;
    }
  }
}

}  // namespace

bool DrawFloat16Op(Drawer& d) {
  const bool any16 = d.Pick([](const Tensor& t) { return Is16BitFloat(t.dtype()); }) >= 0;
  if (!any16 || d.Chance(0.25)) return DrawNarrowing(d);
  return DrawOn16(d);
}

}  // namespace internal
}  // namespace fuzz
}  // namespace braze
