// Random programs, attention (GenerateOptions::attention_probability; docs/ATTENTION.md):
// ScaledDotProductAttention, fused (its Attention op, and in the programs that fetch
// gradients its AttentionLogSumExp and AttentionGradQ/K/V) and sometimes the unfused
// composite, on queries, keys and values of odd, prime and tiny lengths (1, 2, 3, 5, 7,
// 13, 17, 33), Tq != Tk, odd head widths, Dv != D, no, one or two leading dims, causal or
// not, an explicit scale sometimes, dropout on the weights sometimes (with a constant
// step or one computed at run time), f32 and f64. q, k and v come from earlier values
// (self-attention on a value, its keys a slice or a concatenation of it, its values a
// slice, a concatenation or a sine of it; a -1 length stays symbolic) or are constants
// shifted by a scalar of an earlier float value, so the program's inputs reach them and
// their gradients reach the backward ops; the output feeds later ops like any value.
// Sizes stay small (at most 33 x 33 scores per head, 3 x 3 heads): the autoschedulers
// that --scheduler=random forces on an attention cluster take seconds on one.
// random_program.cc's Generator calls DrawAttentionOp through the Drawer interface
// (random_program_internal.h), from a random stream of its own.
#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "braze/ops.h"
#include "tools/fuzz/random_program_internal.h"

namespace braze {
namespace fuzz {
namespace internal {
namespace {

constexpr int64_t kMaxLength = 64;  // the most of an earlier value's length used as T
constexpr int64_t kMaxWidth = 33;   // the most of its last dim used as D
constexpr int64_t kMaxElements = 4096;

template <typename T>
T PickOf(Drawer& d, const std::vector<T>& from) {
  return from[d.Uniform(static_cast<int>(from.size()))];
}
int64_t Length(Drawer& d) { return PickOf<int64_t>(d, {1, 2, 3, 5, 7, 13, 17, 33}); }
int64_t Width(Drawer& d) { return PickOf<int64_t>(d, {1, 2, 3, 5, 7, 8, 13, 17}); }

// The options drawn for one attention op; `step` is an operand index (dropout only).
struct Drawn {
  bool causal = false;
  bool has_scale = false;
  double scale = 0;
  double dropout = 0;
  bool fused = true;
  uint64_t seed = 0;
  int step = -1;  // index in the op's operands of an i32 value whose sum is the step
  int32_t step_constant = 0;
};

Drawn DrawOptions(Drawer& d, std::vector<int>* operands) {
  Drawn o;
  o.causal = d.Chance(0.5);
  o.has_scale = d.Chance(0.25);
  o.scale = PickOf<double>(d, {0.125, 1, 0.7, 2.5});
  o.fused = d.Chance(0.8);
  if (d.Chance(0.25)) {
    o.dropout = PickOf<double>(d, {0.1, 0.5, 0.9});
    o.seed = static_cast<uint64_t>(d.Uniform(1000));
    const int i32 =
        d.Chance(0.3) ? d.Pick([](const Tensor& t) { return t.dtype() == DType::kI32; }) : -1;
    if (i32 >= 0) {
      operands->push_back(i32);
      o.step = static_cast<int>(operands->size()) - 1;
    } else {
      o.step_constant = PickOf<int32_t>(d, {0, 1, 7, -3, 2147483647});
    }
  }
  return o;
}

std::string OptionsCode(const Drawn& o) {
  std::string s = "AttentionOptions o; ";
  if (o.causal) absl::StrAppend(&s, "o.causal = true; ");
  if (o.has_scale) absl::StrAppend(&s, "o.scale = ", o.scale, "; ");
  if (!o.fused) absl::StrAppend(&s, "o.fused = false; ");
  if (o.dropout > 0) {
    absl::StrAppend(&s, "o.dropout = ", o.dropout, "; o.seed = ", o.seed, "; o.step = ",
                    o.step >= 0
                        ? absl::StrCat("Sum($", o.step, ")")
                        : absl::StrCat("ScalarConst(g, ", o.step_constant, ", DType::kI32)"),
                    "; ");
  }
  return s;
}

AttentionOptions Build(Graph& g, const Drawn& o, const std::vector<Tensor>& in) {
  AttentionOptions a;
  a.causal = o.causal;
  if (o.has_scale) a.scale = o.scale;
  a.fused = o.fused;
  if (o.dropout > 0) {
    a.dropout = o.dropout;
    a.seed = o.seed;
    a.step = o.step >= 0 ? Sum(in[o.step]) : ScalarConst(g, o.step_constant, DType::kI32);
  }
  return a;
}

// Pushes ScaledDotProductAttention(q, k, v) with drawn options.
bool PushAttention(Drawer& d, int q, int k, int v) {
  std::vector<int> operands = {q, k, v};
  const Drawn o = DrawOptions(d, &operands);
  const std::string code = absl::StrCat("[&] { ", OptionsCode(o),
                                        "return ScaledDotProductAttention($0, $1, $2, o); }()");
  d.Push(
      operands,
      [o](Graph& g, const std::vector<Tensor>& in) {
        return ScaledDotProductAttention(in[0], in[1], in[2], Build(g, o, in));
      },
      code);
  return true;
}

// A layout op on the length axis (-2) or the width axis (-1) of x: a slice of its first
// `n` rows or columns or x concatenated with itself (n known), else (or `sine`) Sin(x).
int SliceOrConcat(Drawer& d, int x, int axis_from_end, bool sine) {
  const Tensor t = d.value(x);
  const int axis = t.rank() - axis_from_end;
  const int64_t n = t.shape()[axis];
  // Concat's gradient needs the axis known in all but the last input (else Unimplemented).
  if (sine || n < 0)
    return d.Push(
        {x}, [](Graph&, const std::vector<Tensor>& in) { return Sin(in[0]); }, "Sin($0)");
  if (n > 1 && d.Chance(0.5)) {
    std::vector<int64_t> begin(t.rank(), 0), size(t.rank(), -1);
    size[axis] = 1 + d.Uniform(static_cast<int>(n - 1));
    return d.Push(
        {x},
        [begin, size](Graph&, const std::vector<Tensor>& in) { return Slice(in[0], begin, size); },
        absl::StrCat("Slice($0, ", Ints(begin), ", ", Ints(size), ")"));
  }
  return d.Push(
      {x},
      [axis](Graph&, const std::vector<Tensor>& in) {
        return Concat({in[0], in[0]}, axis);
      },
      absl::StrCat("Concat({$0, $0}, ", axis, ")"));
}

// Attention on an earlier float value x [..., T, D] (at most two leading dims): q is x;
// k is x or a slice or concatenation of it along T; v is k or a slice, concatenation
// (along D) or sine of it. A -1 T (often a -1 dim 0 reshaped to be T) stays symbolic in
// all three.
// A float value with dim 0 declared -1 reshaped to [-1, D] (D its last dim, or 1): a
// symbolic length T. -1 when there is none.
int SymbolicLength(Drawer& d) {
  const int x = d.Pick([](const Tensor& t) {
    if (!IsFloating(t.dtype()) || t.rank() < 1 || t.shape()[0] >= 0) return false;
    int64_t n = 1;
    for (int64_t s : t.shape()) n *= s < 0 ? 40 : s;
    // A known width (or none: rank 1): [-1, -1] is no shape (a -1 last dim came from a
    // transpose of a -1 batch, say; seed 62001656 with --all_families).
    return (t.rank() == 1 || t.shape().back() >= 0) && t.shape().back() <= kMaxWidth &&
           n <= kMaxElements;
  });
  if (x < 0) return -1;
  const Shape to = {-1, d.value(x).rank() == 1 ? 1 : d.value(x).shape().back()};
  return d.Push(
      {x}, [to](Graph&, const std::vector<Tensor>& in) { return Reshape(in[0], to); },
      absl::StrCat("Reshape($0, ", Ints(to), ")"));
}

bool DrawOnValue(Drawer& d) {
  int x = d.Chance(0.5) ? SymbolicLength(d) : -1;
  if (x < 0)
    x = d.Pick([](const Tensor& t) {
      if (!IsFloating(t.dtype()) || t.rank() < 2 || t.rank() > 4) return false;
      const int64_t len = t.shape()[t.rank() - 2], width = t.shape()[t.rank() - 1];
      int64_t n = 1;
      for (int64_t s : t.shape()) n *= s < 0 ? 40 : s;
      return len <= kMaxLength && width >= 1 && width <= kMaxWidth && n <= kMaxElements;
    });
  if (x < 0) return false;
  const int k = d.Chance(0.5) ? x : SliceOrConcat(d, x, 2, false);
  const int v = d.Chance(0.4) ? k : SliceOrConcat(d, k, 1, d.Chance(0.4));
  return PushAttention(d, x, k, v);
}

// Attention on constants of drawn shapes (f32 or f64) shifted by Tanh(Mean()) of an
// earlier float value cast to their dtype, so the inputs reach them (and their gradients flow
// back).
bool DrawOnConstants(Drawer& d) {
  const DType dtype = d.Chance(0.7) ? DType::kF32 : DType::kF64;
  Shape lead;
  for (int i = d.Uniform(3); i > 0; --i) lead.push_back(1 + d.Uniform(3));
  const int64_t tq = Length(d), tk = d.Chance(0.3) ? tq : Length(d), dq = Width(d);
  const int64_t dv = d.Chance(0.5) ? dq : Width(d);
  auto shape = [&](int64_t t, int64_t w) {
    Shape s = lead;
    s.push_back(t);
    s.push_back(w);
    return s;
  };
  const int shift = d.Pick([](const Tensor& t) { return IsFloating(t.dtype()); });
  int qkv[3] = {d.AddConst(dtype, shape(tq, dq)), d.AddConst(dtype, shape(tk, dq)),
                d.AddConst(dtype, shape(tk, dv))};
  if (shift >= 0) {
    // Cast first: Tanh(Mean()) of an f32 value cast to f64 carried the f32 rounding of
    // both ops, which the generator cannot see inside one op (it judged the f64 result at
    // f64's tolerance, and only the conditioning check kept those programs from being
    // mismatches: the "ill-conditioned" f64 attentions of earlier campaigns).
    const int s = d.Push(
        {shift},
        [dtype](Graph&, const std::vector<Tensor>& in) { return Tanh(Mean(Cast(in[0], dtype))); },
        absl::StrCat("Tanh(Mean(Cast($0, ", DTypeCode(dtype), ")))"));
    for (int& c : qkv) {
      if (!d.Chance(0.6)) continue;
      c = d.Push(
          {c, s}, [](Graph&, const std::vector<Tensor>& in) { return in[0] + in[1]; },
          "Add($0, $1)");
    }
  }
  return PushAttention(d, qkv[0], qkv[1], qkv[2]);
}

}  // namespace

bool DrawAttentionOp(Drawer& d) { return d.Chance(0.5) ? DrawOnValue(d) : DrawOnConstants(d); }

}  // namespace internal
}  // namespace fuzz
}  // namespace braze
