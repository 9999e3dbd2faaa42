// Lowering of the pools (MaxPool, AvgPool) and their gradient ops (MaxPoolGrad,
// MaxPoolGradGrad, AvgPoolGrad).
//
// A pool of a small window is a pure Func: its taps unrolled as one expression (a 2x2
// or 3x3 pool is 4 or 9 loads). A window of more than kMaxUnrolledTaps taps (7x7, a
// 56x56 global pool: 3136 expressions would take LLVM minutes) reduces over an RDom
// instead, in a stage of its own. The gradients gather, for each input element, the
// windows that hold it (at most ceil(K / stride) per spatial dim), unrolled or over an
// RDom by the same rule.
//
// Semantics are src/reference/window.cc's:
// - MaxPool is the Max reduction of lower_reduce.cc over the taps inside x: the bits of
//   the values reduced with integer max and min (NaN propagates, -0 < +0), no float
//   comparison for LLVM's no-NaNs flag to fold;
// - AvgPool divides by the number of taps inside x;
// - MaxPoolGrad routes each window's dy to its first NaN, else its first maximum
//   (strict >, taps in row-major order): an argmax stage (a serial loop over the taps
//   per window) that MaxPoolGrad compares each tap with and MaxPoolGradGrad reads at.
// Padding taps are tested, never read as a padding value: their loads are clamped into
// x and their terms selected away. (Not RDom::where: with a predicate on the output's
// vars, Mullapudi2016 and Li2018 failed internal assertions on the RDom forms.)
#include <algorithm>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "braze/status.h"
#include "lower/lower_ops.h"
#include "lower/lower_window.h"

namespace braze {
namespace lower {
namespace {

using Halide::Expr;
using schedule::Stage;

// Taps (or windows per input element) above which a window reduces over an RDom.
constexpr int64_t kMaxUnrolledTaps = 16;

std::vector<Expr> RowMajor(const std::vector<Halide::Var>& vars) {
  return std::vector<Expr>(vars.rbegin(), vars.rend());
}

// One tap of a window: the input element it reads, whether it lies inside x
// (undefined: always), and whether a read there must be clamped into x.
struct Tap {
  Expr ih, iw, inside;
  bool clamp_h = false, clamp_w = false;
};

// Tap (th, tw) of output o. When th and tw are constants, th_c and tw_c are their
// values: only dims whose tap can reach the padding are tested (and clamped).
Tap TapOf(const Pool2DGeometry& g, const Nhwc& o, const Expr& th, const Expr& tw, int64_t th_c = -1,
          int64_t tw_c = -1) {
  Tap t;
  t.ih = InputIndex(g.h, o.h, th);
  t.iw = InputIndex(g.w, o.w, tw);
  t.clamp_h = MayPad(g.h, th_c);
  t.clamp_w = MayPad(g.w, tw_c);
  std::vector<Expr> tests;
  if (t.clamp_h) tests.push_back(Inside(t.ih, g.h.in));
  if (t.clamp_w) tests.push_back(Inside(t.iw, g.w.in));
  t.inside = AllOf(tests);
  return t;
}

// A tap's element of v (x-shaped). Only reads that may fall into the padding are
// clamped: a clamp along NCHW's vectorized W is a vector min and max per tap. (A tap
// read from data, MaxPoolGradGrad's, is always clamped.)
Expr Read(const Value& v, const Pool2DGeometry& g, const Nhwc& o, const Tap& t) {
  const Expr ih = t.clamp_h ? ClampTo(t.ih, g.h.in) : t.ih;
  const Expr iw = t.clamp_w ? ClampTo(t.iw, g.w.in) : t.iw;
  return At(v, Index4(g.format, {o.n, ih, iw, o.c}));
}

Expr OrZero(const Expr& cond, const Expr& v) {
  if (!cond.defined()) return v;
  return Halide::select(cond, v, Halide::Internal::make_zero(v.type()));
}

// The number of taps of output o's window inside x along d (pools have no dilation).
Expr CountInside(const SpatialDim& d, const Expr& o) {
  if (!MayPad(d)) return Expr(static_cast<int>(d.window));
  const Expr first = InputIndex(d, o, 0);
  const Expr lo = Halide::max(first, 0);
  const Expr hi = Halide::min(first + static_cast<int>(d.window - 1), static_cast<int>(d.in - 1));
  return hi - lo + 1;
}

// Whether `e` reads one of `vars`, looking through the pure single-valued Funcs it
// calls: a schedule may inline those, and Halide then drops what their definitions ignore.
// Rather than inlining (a Func read twice by the next, for 40 levels, would be 2^40
// copies), each such Func's definition is visited once: which of its args it reads, and
// a call reads the vars of those args only. Every IR node is visited once (a graph walk),
// so the cost is linear in the DAG of Funcs and expressions.
class VarReader : public Halide::Internal::IRGraphVisitor {
 public:
  // Memo shared by the walks of one question: per Func name, which args its value reads.
  using ArgsRead = std::map<std::string, std::vector<bool>>;
  VarReader(ArgsRead* memo, const std::vector<std::string>& wanted) : memo_(memo) {
    for (const std::string& v : wanted) wanted_[v] = false;
  }
  bool Read(const std::string& var) const { return wanted_.at(var); }
  bool ReadAny() const {
    for (const auto& [v, read] : wanted_) {
      if (read) return true;
    }
    return false;
  }

 private:
  using IRGraphVisitor::visit;
  void visit(const Halide::Internal::Variable* op) override {
    auto it = wanted_.find(op->name);
    if (it != wanted_.end()) it->second = true;
  }
  void visit(const Halide::Internal::Call* op) override {
    if (op->call_type != Halide::Internal::Call::Halide || !op->func.defined()) {
      IRGraphVisitor::visit(op);
      return;
    }
    const Halide::Internal::Function f(op->func);
    if (f.has_update_definition() || f.has_extern_definition() || f.outputs() != 1) {
      IRGraphVisitor::visit(op);  // not inlined: every arg is read
      return;
    }
    const std::vector<bool>& read = ArgsReadBy(f);
    for (size_t i = 0; i < op->args.size(); ++i) {
      if (i >= read.size() || read[i]) include(op->args[i]);
    }
  }
  const std::vector<bool>& ArgsReadBy(const Halide::Internal::Function& f) {
    auto it = memo_->find(f.name());
    if (it != memo_->end()) return it->second;
    VarReader body(memo_, f.args());
    f.values()[0].accept(&body);
    std::vector<bool> read;
    for (const std::string& a : f.args()) read.push_back(body.Read(a));
    return (*memo_)[f.name()] = std::move(read);
  }

  ArgsRead* memo_;
  std::map<std::string, bool> wanted_;
};

bool ReadsThroughPureFuncs(const Expr& e, const std::vector<std::string>& vars) {
  VarReader::ArgsRead memo;
  VarReader reader(&memo, vars);
  e.accept(&reader);
  return reader.ReadAny();
}

Stage ReductionStage(const Halide::Func& acc, const Halide::RDom& r, const Shape& shape,
                     int64_t taps) {
  Stage stage;
  stage.kind = schedule::StageKind::kReduction;
  stage.acc = acc;
  stage.rdom = r;
  stage.extents = HalideExtents(shape);
  stage.reduction_extent = taps;
  // Dim 0 (C in NHWC, W in NCHW) is a good vector either way: contiguous or strided
  // loads, and no gathers across rows.
  stage.reduces_innermost = false;
  return stage;
}

// The float Max of lower_reduce.cc as bits: hi (signed max), lo and top (unsigned min
// and max). `Bits` holds the identities and decodes.
struct Bits {
  explicit Bits(DType dtype)
      : fbits(dtype == DType::kF64 ? 64 : 32),
        st(Halide::Int(fbits)),
        ut(Halide::UInt(fbits)),
        type(HalideType(dtype)) {}
  Expr U(uint64_t v) const { return Halide::Internal::make_const(ut, v); }
  uint64_t SignBit() const { return uint64_t{1} << (fbits - 1); }
  // Any negative value serves: hi is decoded only when non-negative. Not the sign bit
  // alone: Halide 14's simplifier, given an unrolled f64 window's max(INT64_MIN, ...),
  // took the max as always negative and dropped it (seed 13100320).
  Expr HiEmpty() const { return Halide::Internal::make_const(st, -1); }
  // -inf's bits: no value lo must keep is above it.
  Expr LoEmpty() const { return U((fbits == 64 ? 0x7ff0000000000000 : 0x7f800000) | SignBit()); }
  // As lower_reduce.cc's decode: hi when non-negative, else lo; a NaN shows as hi above
  // +inf's bits or top above -inf's.
  Expr Decode(const Expr& hi_signed, const Expr& lo, const Expr& top) const {
    const Expr hi = Halide::reinterpret(ut, hi_signed);
    const Expr shift = U(fbits - 1);
    const Expr man = U((uint64_t{1} << (fbits == 64 ? 52 : 23)) - 1);
    const Expr neg = U(0) - (hi >> shift);
    const Expr bits = (hi & ~neg) | (lo & neg);
    const Expr positive_nan = (~hi & (hi + man)) >> shift;
    const Expr negative_nan = (top & ~(top + man)) >> shift;
    const Expr qnan = U(fbits == 64 ? 0x7ff8000000000000 : 0x7fc00000);
    return Halide::reinterpret(type, bits | ((positive_nan | negative_nan) * qnan));
  }
  int fbits;
  Halide::Type st, ut, type;
};

Value MaxPool(LoweringContext& ctx, const std::string& name, const Pool2DGeometry& g,
              const Value& x, const TensorType& out) {
  const Bits b(x.dtype);
  const int64_t taps = g.h.window * g.w.window;
  if (taps <= kMaxUnrolledTaps) {
    return Define(ctx, name, out.dtype, out.shape, [&](const std::vector<Expr>& index) {
      const Nhwc o = Split4(g.format, index);
      Expr hi = b.HiEmpty(), lo = b.LoEmpty(), top = b.U(0);
      for (int th = 0; th < g.h.window; ++th) {
        for (int tw = 0; tw < g.w.window; ++tw) {
          const Tap t = TapOf(g, o, th, tw, th, tw);
          const Expr v = Read(x, g, o, t);
          Expr s = Halide::reinterpret(b.st, v), u = Halide::reinterpret(b.ut, v), u_top = u;
          if (t.inside.defined()) {
            s = Halide::select(t.inside, s, b.HiEmpty());
            u = Halide::select(t.inside, u, b.LoEmpty());
            u_top = Halide::select(t.inside, u_top, b.U(0));
          }
          hi = Halide::max(hi, s), lo = Halide::min(lo, u), top = Halide::max(top, u_top);
        }
      }
      return b.Decode(hi, lo, top);
    });
  }
  std::vector<Halide::Var> vars = HalideVars(4);
  const Nhwc o = Split4(g.format, RowMajor(vars));
  Halide::RDom r({{0, static_cast<int>(g.w.window)}, {0, static_cast<int>(g.h.window)}},
                 ctx.UniqueName(name + "_r"));
  const Tap t = TapOf(g, o, r.y, r.x);
  const Expr v = Read(x, g, o, t);
  Expr s = Halide::reinterpret(b.st, v), u = Halide::reinterpret(b.ut, v), u_top = u;
  if (t.inside.defined()) {
    s = Halide::select(t.inside, s, b.HiEmpty());
    u = Halide::select(t.inside, u, b.LoEmpty());
    u_top = Halide::select(t.inside, u_top, b.U(0));
  }
  Halide::Func acc(ctx.UniqueName(name + "_acc"));
  acc(vars) = Halide::Tuple(b.HiEmpty(), b.LoEmpty(), b.U(0));
  acc(vars) = Halide::Tuple(Halide::max(acc(vars)[0], s), Halide::min(acc(vars)[1], u),
                            Halide::max(acc(vars)[2], u_top));
  ctx.stages().push_back(ReductionStage(acc, r, out.shape, taps));
  return Inline(out.dtype, out.shape, [acc, b](const std::vector<Expr>& index) mutable {
    const std::vector<Expr> args(index.rbegin(), index.rend());
    return b.Decode(acc(args)[0], acc(args)[1], acc(args)[2]);
  });
}

// Sums in f64 when the sum is a loop (as the Sum reduction), in the element type when
// it is a few unrolled terms.
Value AvgPool(LoweringContext& ctx, const std::string& name, const Pool2DGeometry& g,
              const Value& x, const TensorType& out) {
  const Halide::Type type = HalideType(out.dtype);
  // By value: the RDom form's Inline body runs after this returns.
  auto count = [h = g.h, w = g.w](const Nhwc& o, const Halide::Type& t) {
    return Halide::cast(t, CountInside(h, o.h) * CountInside(w, o.w));
  };
  const int64_t taps = g.h.window * g.w.window;
  if (taps <= kMaxUnrolledTaps) {
    return Define(ctx, name, out.dtype, out.shape, [&](const std::vector<Expr>& index) {
      const Nhwc o = Split4(g.format, index);
      Expr sum;
      for (int th = 0; th < g.h.window; ++th) {
        for (int tw = 0; tw < g.w.window; ++tw) {
          const Tap t = TapOf(g, o, th, tw, th, tw);
          const Expr v = OrZero(t.inside, Read(x, g, o, t));
          sum = sum.defined() ? sum + v : v;
        }
      }
      return Halide::strict_float(sum / count(o, type));
    });
  }
  std::vector<Halide::Var> vars = HalideVars(4);
  const Nhwc o = Split4(g.format, RowMajor(vars));
  Halide::RDom r({{0, static_cast<int>(g.w.window)}, {0, static_cast<int>(g.h.window)}},
                 ctx.UniqueName(name + "_r"));
  const Tap t = TapOf(g, o, r.y, r.x);
  Halide::Func acc(ctx.UniqueName(name + "_acc"));
  acc(vars) = Halide::Internal::make_zero(Halide::Float(64));
  // The opaque zero keeps loop trimming from taking an x - x term as 0 (lower_reduce.cc).
  const Expr v = Halide::cast(Halide::Float(64), Read(x, g, o, t));
  acc(vars) = acc(vars) + (OrZero(t.inside, v) + ctx.OpaqueZero(Halide::Float(64)));
  ctx.stages().push_back(ReductionStage(acc, r, out.shape, taps));
  const DataFormat format = g.format;
  return Inline(out.dtype, out.shape, [=](const std::vector<Expr>& index) mutable {
    const std::vector<Expr> args(index.rbegin(), index.rend());
    return Halide::strict_float(acc(args) / count(Split4(format, index), Halide::Float(64)));
  });
}

// Each window's first NaN, else its first maximum, as a tap index th * KW + tw: a
// serial loop over the taps in row-major order (the RDom's w innermost).
Value WindowArgMax(LoweringContext& ctx, const std::string& name, const Pool2DGeometry& g,
                   const Value& x, const Shape& y_shape) {
  std::vector<Halide::Var> vars = HalideVars(4);
  const Nhwc o = Split4(g.format, RowMajor(vars));
  Halide::RDom r({{0, static_cast<int>(g.w.window)}, {0, static_cast<int>(g.h.window)}},
                 ctx.UniqueName(name + "_argmax_r"));
  const Tap t = TapOf(g, o, r.y, r.x);
  const Expr v = Read(x, g, o, t);
  Halide::Func acc(ctx.UniqueName(name + "_argmax"));
  acc(vars) = Halide::Tuple(Expr(-1), Halide::Internal::make_zero(v.type()));
  const Expr best = acc(vars)[1];
  Expr take =
      acc(vars)[0] < 0 || (!IsNanBits(best) && (IsNanBits(v) || Halide::strict_float(v > best)));
  if (t.inside.defined()) take = t.inside && take;
  const Expr tap = r.y * static_cast<int>(g.w.window) + r.x;
  acc(vars) = Halide::Tuple(Halide::select(take, tap, acc(vars)[0]), Halide::select(take, v, best));
  ctx.stages().push_back(ReductionStage(acc, r, y_shape, g.h.window * g.w.window));
  return Inline(DType::kI32, y_shape, [acc](const std::vector<Expr>& index) mutable {
    const std::vector<Expr> args(index.rbegin(), index.rend());
    return acc(args)[0];
  });
}

// The windows holding input element i along d are consecutive outputs, at most
// Candidates(d) of them, the last min((i + pad) / stride, out - 1): the j-th candidate
// is that minus j, at tap (i + pad) - its start, valid when it exists and the tap is
// inside the window.
int64_t Candidates(const SpatialDim& d) {
  return std::min((d.window + d.stride - 1) / d.stride, d.out);
}
struct Window {
  Expr o, t, valid;
};
Window WindowOf(const SpatialDim& d, const Expr& i, const Expr& j) {
  const Expr shifted = i + static_cast<int>(d.pad_before);
  const Expr last = Halide::min(shifted / static_cast<int>(d.stride), static_cast<int>(d.out - 1));
  const Expr o = last - j;
  const Expr t = shifted - o * static_cast<int>(d.stride);
  return {Halide::max(o, 0), t, o >= 0 && t < static_cast<int>(d.window)};
}

// dx[i] = sum over the windows o holding i (and, when `pick` is given, whose pick(o, th, tw)
// holds) of term(o): unrolled, or over an RDom of the candidates in f64.
using WindowTerm = std::function<Expr(const Nhwc& o, const Expr& th, const Expr& tw)>;
Value Gather(LoweringContext& ctx, const std::string& name, const Pool2DGeometry& g,
             const TensorType& out, const WindowTerm& term, const WindowTerm& pick) {
  const int64_t ch = Candidates(g.h), cw = Candidates(g.w);
  auto window_term = [&](const Nhwc& i, const Expr& jh, const Expr& jw, Expr* valid) {
    const Window wh = WindowOf(g.h, i.h, jh), ww = WindowOf(g.w, i.w, jw);
    const Nhwc o{i.n, wh.o, ww.o, i.c};
    *valid = wh.valid && ww.valid;
    if (pick) *valid = *valid && pick(o, wh.t, ww.t);
    return term(o, wh.t, ww.t);
  };
  if (ch * cw <= kMaxUnrolledTaps) {
    return Define(ctx, name, out.dtype, out.shape, [&](const std::vector<Expr>& index) {
      const Nhwc i = Split4(g.format, index);
      Expr sum;
      for (int jh = 0; jh < ch; ++jh) {
        for (int jw = 0; jw < cw; ++jw) {
          Expr valid;
          const Expr term_v = window_term(i, jh, jw, &valid);
          const Expr v = OrZero(valid, term_v);
          sum = sum.defined() ? sum + v : v;
        }
      }
      return Halide::strict_float(sum);
    });
  }
  std::vector<Halide::Var> vars = HalideVars(4);
  const Nhwc i = Split4(g.format, RowMajor(vars));
  Halide::RDom r({{0, static_cast<int>(cw)}, {0, static_cast<int>(ch)}},
                 ctx.UniqueName(name + "_r"));
  Expr valid;
  const Expr v = window_term(i, r.y, r.x, &valid);
  const Halide::Type acc_type = IsFloating(out.dtype) ? Halide::Float(64) : HalideType(out.dtype);
  Halide::Func acc(ctx.UniqueName(name + "_acc"));
  acc(vars) = Halide::Internal::make_zero(acc_type);
  acc(vars) = acc(vars) + (OrZero(valid, Halide::cast(acc_type, v)) + ctx.OpaqueZero(acc_type));
  ctx.stages().push_back(ReductionStage(acc, r, out.shape, ch * cw));
  return Inline(out.dtype, out.shape, [acc](const std::vector<Expr>& index) mutable {
    return acc(std::vector<Expr>(index.rbegin(), index.rend()));
  });
}

}  // namespace

absl::StatusOr<Value> LowerPool(LoweringContext& ctx, const std::string& name, OpKind op,
                                const Pool2DAttrs& attrs, const std::vector<Value>& in,
                                const TensorType& out) {
  const DataFormat format = attrs.window.format;
  for (size_t k = 0; k < in.size(); ++k) {
    BRAZE_RETURN_IF_ERROR(CheckSymbolicBatchOnly(in[k], format, absl::StrCat("input ", k)));
  }
  const Shape x_shape = op == OpKind::kAvgPoolGrad ? out.shape : in[0].shape;
  absl::StatusOr<Pool2DGeometry> geometry = Pool2DGeometryOf(attrs, x_shape);
  if (!geometry.ok()) return geometry.status();
  const Pool2DGeometry& g = *geometry;
  const Shape y_shape = g.OutputShape();
  switch (op) {
    case OpKind::kMaxPool:
      return MaxPool(ctx, name, g, in[0], out);
    case OpKind::kAvgPool:
      return AvgPool(ctx, name, g, in[0], out);
    case OpKind::kAvgPoolGrad: {
      const Value dy = in[0];
      const Halide::Type type = HalideType(out.dtype);
      return Gather(
          ctx, name, g, out,
          [&g, dy, type](const Nhwc& o, const Expr&, const Expr&) {
            const Expr count = CountInside(g.h, o.h) * CountInside(g.w, o.w);
            return Halide::strict_float(At(dy, Index4(g.format, o)) / Halide::cast(type, count));
          },
          nullptr);
    }
    case OpKind::kMaxPoolGrad: {
      const Value arg = WindowArgMax(ctx, name, g, in[0], y_shape);
      const Value dy = in[1];
      const int kw = static_cast<int>(g.w.window);
      return Gather(
          ctx, name, g, out,
          [&g, dy](const Nhwc& o, const Expr&, const Expr&) { return At(dy, Index4(g.format, o)); },
          [&g, arg, kw](const Nhwc& o, const Expr& th, const Expr& tw) {
            return At(arg, Index4(g.format, o)) == th * kw + tw;
          });
    }
    case OpKind::kMaxPoolGradGrad: {
      const Value grad = in[1];
      const int kw = static_cast<int>(g.w.window);
      return Define(ctx, name, out.dtype, out.shape, [&](const std::vector<Expr>& index) {
        const Nhwc o = Split4(g.format, index);
        // A grad that does not vary over H and W (the ones of a gradient's seed, a
        // broadcast) is the same at every tap: no argmax. With one, Halide would drop every
        // read of it once grad is inlined, and still realize it (and a GPU schedule's
        // wrapper of it) with no consumer to bound it: "Symbol not found:
        // ..._argmax_global_wrapper$0.s0.dim0.max" (braze-fuzz seed 510 on CUDA).
        const Halide::Var ph(ctx.UniqueName(name + "_probe_h")),
            pw(ctx.UniqueName(name + "_probe_w"));
        const Expr probe = At(grad, Index4(g.format, {o.n, ph, pw, o.c}));
        if (!ReadsThroughPureFuncs(probe, {ph.name(), pw.name()})) {
          return At(grad, Index4(g.format, {o.n, Expr(0), Expr(0), o.c}));
        }
        const Value arg = WindowArgMax(ctx, name, g, in[0], y_shape);
        const Expr tap = Halide::max(At(arg, index), 0);
        // A tap read from data: Halide cannot bound it, so the read is always clamped.
        Tap t = TapOf(g, o, tap / kw, tap % kw);
        t.clamp_h = t.clamp_w = true;
        return Read(grad, g, o, t);
      });
    }
    default:
      return absl::InternalError(absl::StrCat(OpName(op), " is not a pool"));
  }
}

}  // namespace lower
}  // namespace braze
