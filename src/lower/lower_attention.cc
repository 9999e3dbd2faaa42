// Lowering of the attention ops (lower_ops.h; docs/ATTENTION.md): Attention,
// AttentionLogSumExp and the three gradient ops, each a reduction over tiles of the
// other sequence whose [Tq, Tk] scores are only ever defined per tile.
//
// Every op is one or two passes, each a Func `acc` whose update walks the tiles of the
// other sequence (an RVar `tile` of extent ceil(L / tile)); the Funcs a tile needs
// (the other side's rows staged transposed, the products q k^T or dO v^T over the
// feature dim, the weights) take the tile index as a pure var, so a schedule computes
// them at `tile` over one (rows x tile) box: memory O(rows x tile), never O(Tq x Tk).
//
//   logsumexp pass  state(x) = (max, sum) over tiles t, from the tile's max TM(x, t) and
//                   sum TL(x, t) of exp(s - TM): online, one exp per score
//                   lse(x) = max + log(sum)      (-inf for a query that sees no key)
//   weighted sum    acc(c, x) += W(u, x, t) * operand(t * tile + u, c)
//     Attention       W = exp(s - lse)                    operand v
//     AttentionGradQ  W = exp(s - lse) (dP - delta) scale  operand k    (dP = dO v^T)
//     AttentionGradK  the same, transposed (rows are keys)  operand q
//     AttentionGradV  W = exp(s - lse), transposed          operand dO
//
// A tile past the end of the other sequence reads its last row (clamped: every read is
// inside the buffers whatever box a schedule computes) and is masked out, as are the
// keys a causal query does not see.
#include <algorithm>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "braze/random.h"
#include "lower/lower_ops.h"
#include "lower/philox.h"

namespace braze {
namespace lower {
namespace {

using Halide::Expr;
using Halide::Func;
using Halide::RDom;
using Halide::Var;
using AttentionPass = schedule::Stage::AttentionPass;

// The tile of the other sequence: 64 (32 on a GPU, where a block's tiles share its
// shared memory), or the least power of two >= its length (at least a vector of 8) when
// it is shorter, so a short sequence wastes little.
int64_t TileFor(int64_t length, bool gpu) {
  const int64_t most = gpu ? 32 : 64;
  int64_t t = 8;
  while (t < most && t < length) t *= 2;
  return t;
}

class Builder {
 public:
  Builder(LoweringContext& ctx, const std::string& name, const AttentionAttrs& attrs,
          const std::vector<Value>& in, bool rows_are_keys)
      : ctx_(ctx), name_(name), attrs_(attrs), in_(in), keys_(rows_are_keys) {
    const Value& q = in[0];
    const Value& k = in[1];
    rank_ = static_cast<int>(q.shape.size());
    nb_ = rank_ - 2;
    tq_ = ctx.Extent(q, rank_ - 2);
    tk_ = ctx.Extent(k, rank_ - 2);
    for (int d = 0; d < nb_; ++d) lead_.push_back(ctx.Extent(q, d));
    const size_t base = in.size() == 4 ? 3 : 6;  // Attention's step is input 3, a gradient's 6
    if (attrs.dropout != 0 && in.size() > base) step_ = &in[base];
    key_ = RandomKey(attrs.seed, attrs.op_key);
    symbolic_ = SymbolOf(q, rank_ - 2) >= 0 || SymbolOf(k, rank_ - 2) >= 0;
    gpu_ = ctx.gpu;
    d_ = q.shape[rank_ - 1];
    type_ = HalideType(q.dtype);
    other_len_ = keys_ ? tq_ : tk_;
    tile_ = TileFor(keys_ ? q.shape[rank_ - 2] : k.shape[rank_ - 2], ctx.gpu);
    ntiles_ = (other_len_ + static_cast<int>(tile_ - 1)) / static_cast<int>(tile_);
    for (int i = 0; i < nb_; ++i) b_.push_back(Var(absl::StrCat("b", i)));
    lowest_ = Halide::Internal::make_const(type_, -1e30);
    zero_ = Halide::Internal::make_zero(type_);
  }

  int64_t tile() const { return tile_; }

  // Args (front..., batch vars) and the row-major batch index.
  std::vector<Var> Args(std::vector<Var> front) const {
    front.insert(front.end(), b_.begin(), b_.end());
    return front;
  }
  std::vector<Expr> Batch() const {
    std::vector<Expr> b;
    for (int i = nb_ - 1; i >= 0; --i) b.push_back(b_[i]);
    return b;
  }
  // v[batch..., row, col] and, for lse and delta, v[batch..., row].
  Expr Read(const Value& v, const Expr& row, const Expr& col) const {
    std::vector<Expr> index = Batch();
    index.push_back(row);
    index.push_back(col);
    return At(v, index);
  }
  Expr ReadRow(const Value& v, const Expr& row) const {
    std::vector<Expr> index = Batch();
    index.push_back(row);
    return At(v, index);
  }

  // The other sequence's position at tile t, offset u, clamped into it.
  Expr OtherPos(const Expr& t, const Expr& u) const { return t * static_cast<int>(tile_) + u; }
  Expr Clamped(const Expr& pos) const { return Halide::min(pos, other_len_ - 1); }
  // A row clamped into its own sequence: a schedule may compute a tile of rows past the
  // end (a GPU block's guarded tile), or shifted before its start (a CPU tile shifted
  // inwards over a reader's smaller region), whose values are never stored.
  Expr RowClamped(const Expr& x) const { return Halide::clamp(x, 0, (keys_ ? tk_ : tq_) - 1); }

  // exp(x) with x raised to a floor below which exp is 0 in the type anyway (f32: exp(-128)
  // is 2.6e-56, under its least denormal; f64: exp(-1024)): a hidden score's exponent is
  // the -1e30 sentinel, and LLVM 14's loop vectorizer, where a schedule leaves an exp in
  // a scalar loop (Mullapudi2016 inlines the tile's exps into its sum), computes NaN or
  // garbage for exp(-1e30) (docs/ATTENTION.md, "Mullapudi2016"). One max per exp.
  Expr Exp(const Expr& x) const {
    const double floor = type_ == Halide::Float(64) ? -1024.0 : -128.0;
    return Halide::exp(Halide::max(x, Halide::Internal::make_const(type_, floor)));
  }

  // x's bits, and +inf's: tests on them are immune to LLVM's no-NaNs and no-infinities
  // flags, under which Halide compiles.
  Expr Bits(const Expr& x) const {
    return Halide::reinterpret(type_ == Halide::Float(64) ? Halide::UInt(64) : Halide::UInt(32), x);
  }
  Expr InfBits() const {
    return type_ == Halide::Float(64)
               ? Halide::Internal::make_const(Halide::UInt(64), uint64_t{0x7ff0000000000000})
               : Halide::Internal::make_const(Halide::UInt(32), uint64_t{0x7f800000});
  }
  Expr NanOrPosInf(const Expr& x) const { return IsNanBits(x) || Bits(x) == InfBits(); }
  Expr Nan() const {
    return Halide::Internal::make_const(type_, std::numeric_limits<double>::quiet_NaN());
  }

  // The weight exp(d) of a score d = s - lse as the reference's double weight has it,
  // 0 where the key is hidden: NaN where d is (a NaN score or lse, inf - inf, -inf -
  // -inf); 0 exactly where double's exp is 0 (d < -745.13, -inf included), where the
  // reference drops the term; inf where the type's exp overflows. Where the type's exp
  // underflows but double's does not (f32: d in [-745, -87]) it is the type's least
  // normal: not 0, so times an inf it is inf as in the reference, and negligible in a
  // sum. (An inf where d is finite but past the type's exp, which double's exp is not,
  // needs an lse below the row's scores: the forward never gives one.) The value is
  // chosen on bits by an integer select, which no fast-math flag can fold; the exp's
  // argument is clamped into the type's range, and its result used only where d is in it.
  Expr Weight(const Expr& visible, const Expr& d) const {
    const bool f64 = type_ == Halide::Float(64);
    const Halide::Type bits_type = f64 ? Halide::UInt(64) : Halide::UInt(32);
    auto bits_of = [&](double v) {
      return Halide::reinterpret(bits_type, Halide::Internal::make_const(type_, v));
    };
    const double hi = f64 ? 709.782712893384 : 88.72283935546875;  // log of the largest
    const Expr least = Halide::Internal::make_const(
        type_, f64 ? std::numeric_limits<double>::min() : std::numeric_limits<float>::min());
    const Expr sign = bits_of(-0.0);
    const Expr b = Bits(d);
    const Expr e =
        Bits(Halide::max(Exp(Halide::min(d, Halide::Internal::make_const(type_, hi))), least));
    const Expr zero = Halide::Internal::make_zero(bits_type);
    // Negative floats order by their bits above the sign bit; positive ones below it.
    return Halide::reinterpret(
        type_, Halide::select(!visible, zero, IsNanBits(d), b, b > bits_of(-745.1332191019412),
                              zero, b > bits_of(hi) && b < sign, InfBits(), e));
  }
  // Whether a weight (or its product with dropout's factor) is 0, on bits.
  Expr IsZero(const Expr& w) const { return AbsBits(Bits(w)) == Bits(zero_); }

  // Whether key j is visible to query i (both unclamped; j, i may run past the end).
  Expr Visible(const Expr& i, const Expr& j) const {
    Expr v = j < tk_ && i < tq_;
    if (attrs_.causal) v = v && j <= i + (tk_ - tq_);
    return v;
  }
  // The (query, key) of row x at the other sequence's position pos.
  Expr VisibleAt(const Expr& x, const Expr& pos) const {
    return keys_ ? Visible(pos, x) : Visible(x, pos);
  }
  // `value` at query row x, or NaN where the row sees keys but its logsumexp is not
  // finite (a NaN or +inf score, or every score -inf): the reference's weights exp(s -
  // lse) are all NaN there, and so is each feature. Tested on bits, once per output.
  Expr NanWhereLseIsNotFinite(const Expr& lse, const Expr& x, const Expr& value) const {
    const Expr finite = AbsBits(Bits(lse)) < InfBits();
    return Halide::strict_float(Halide::select(!NoKey(x) && !finite, Nan(), value));
  }

  // A query that sees no key (causal with Tq > Tk, or no keys at all).
  Expr NoKey(const Expr& i) const {
    Expr none = tk_ <= 0;
    if (attrs_.causal) none = none || i + (tk_ - tq_) < 0;
    return none;
  }

  // S(u, x, t) = sum_c a[x, c] * b[t * tile + u, c] (b's rows clamped): the tile of
  // products of rows x of `a` with the other sequence's tile t of `b`, dim 0 contiguous.
  // The tile of b is staged transposed, (u, c, t), so the update vectorizes over u.
  Func Product(const std::string& what, const Value& a, const Value& b, int64_t width,
               AttentionPass& pass) {
    Var u("u"), c("c"), x("x"), t("t");
    Func staged(ctx_.UniqueName(name_ + "_" + what + "_tile"));
    staged(Args({u, c, t})) = Halide::cast(type_, Read(b, Clamped(OtherPos(t, u)), c));
    Func s(ctx_.UniqueName(name_ + "_" + what));
    s(Args({u, x, t})) = zero_;
    if (width > 0) {
      RDom rc(0, static_cast<int>(width), ctx_.UniqueName(name_ + "_" + what + "_c"));
      std::vector<Expr> at = {u, rc.x, t};
      for (const Var& v : b_) at.push_back(v);
      s(Args({u, x, t})) += Halide::cast(type_, Read(a, RowClamped(x), rc.x)) * staged(at);
    }
    pass.per_tile.push_back(staged);
    pass.per_tile.push_back(s);
    pass.staged.push_back(staged);
    return s;
  }

  // The logsumexp pass: per tile its max TM and sum TL of exp(s - TM), combined online
  // over the tiles into state (max, sum); lse = max + log(sum). Returns lse(x, batch...).
  Func LogSumExp(AttentionPass& pass) {
    Var u("u"), x("x"), t("t");
    const Value& q = in_[0];
    const Value& k = in_[1];
    Func s = Product("s", q, k, d_, pass);
    auto at = [&](const Func& f, std::vector<Expr> front) {
      for (const Var& v : b_) front.push_back(v);
      return f(front);
    };
    const int tile = static_cast<int>(tile_);
    RDom ru(0, tile, ctx_.UniqueName(name_ + "_u"));
    const Expr scale = Halide::Internal::make_const(type_, attrs_.scale);
    Func tm(ctx_.UniqueName(name_ + "_tile_max"));
    tm(Args({x, t})) = lowest_;
    // NaN-propagating (a max under LLVM's no-NaNs flag may drop a NaN operand): a tile
    // with a NaN score has the max NaN, one with +inf the max +inf (the state's test).
    tm(Args({x, t})) = NanMax(
        tm(Args({x, t})),
        Halide::select(VisibleAt(x, OtherPos(t, ru.x)), at(s, {ru.x, x, t}) * scale, lowest_));
    Func e(ctx_.UniqueName(name_ + "_tile_exp"));
    // The select inside the exp: a hidden score's exponent (its tile's max may be the
    // sentinel) never computes an inf, even in a lane that is selected away.
    e(Args({u, x, t})) = Exp(Halide::select(VisibleAt(x, OtherPos(t, u)),
                                            at(s, {u, x, t}) * scale - at(tm, {x, t}), lowest_));
    RDom ru2(0, tile, ctx_.UniqueName(name_ + "_u"));
    Func tl(ctx_.UniqueName(name_ + "_tile_sum"));
    tl(Args({x, t})) = zero_;
    tl(Args({x, t})) += at(e, {ru2.x, x, t});
    pass.per_tile.insert(pass.per_tile.end(), {tm, e, tl});
    pass.row_reductions = {tm, tl};

    RDom rt(0, ntiles_, ctx_.UniqueName(name_ + "_t"));
    SkipHiddenTiles(rt, rt.x, x);
    Func state(ctx_.UniqueName(name_ + "_lse_state"));
    state(Args({x})) = Halide::Tuple(lowest_, zero_);
    const Expr m = state(Args({x}))[0];
    const Expr l = state(Args({x}))[1];
    const Expr mt = at(tm, {x, rt.x});
    const Expr mn = Halide::max(m, mt);
    // A NaN or +inf score makes the row's logsumexp NaN (the reference's exp(inf - inf)),
    // whatever the other tiles hold: the state sticks at NaN, tested on bits per tile.
    const Expr bad = IsNanBits(m) || NanOrPosInf(mt);
    state(Args({x})) =
        Halide::Tuple(Halide::strict_float(Halide::select(bad, Nan(), mn)),
                      Halide::strict_float(Halide::select(
                          bad, Nan(), l * Exp(m - mn) + at(tl, {x, rt.x}) * Exp(mt - mn))));
    pass.acc = state;
    pass.tile = rt.x;
    Func lse(ctx_.UniqueName(name_ + "_lse"));
    const Expr inf = Halide::Internal::make_const(type_, -std::numeric_limits<double>::infinity());
    // A query that sees no key has sum 0: its log is never taken (log(1) stands in).
    const Expr sum =
        Halide::select(NoKey(x), Halide::Internal::make_one(type_), state(Args({x}))[1]);
    // A NaN state is NaN (Halide's log of NaN is not); a sum of 0 over visible keys (every
    // score -inf) is log(0) = -inf.
    const Expr m_end = state(Args({x}))[0];
    lse(Args({x})) = Halide::strict_float(Halide::select(
        NoKey(x), inf, IsNanBits(m_end), m_end, sum == zero_, inf, m_end + Halide::log(sum)));
    return lse;
  }

  // The weighted-sum pass of `op` (lse: the forward's Func, or the lse input's reads).
  // Returns acc(c, x, batch...).
  Func WeightedSum(OpKind op, const std::function<Expr(const Expr&)>& lse, AttentionPass& pass) {
    Var u("u"), x("x"), t("t"), c("c");
    const Value& q = in_[0];
    const Value& k = in_[1];
    const Value& v = in_[2];
    const int64_t dv = v.shape[rank_ - 1];
    auto at = [&](const Func& f, std::vector<Expr> front) {
      for (const Var& bv : b_) front.push_back(bv);
      return f(front);
    };
    const Expr scale = Halide::Internal::make_const(type_, attrs_.scale);
    // Scores with rows x: q k^T for query rows, k q^T for key rows.
    Func s = keys_ ? Product("s", k, q, d_, pass) : Product("s", q, k, d_, pass);
    // The row's query (x, or the other sequence's position) for lse and delta.
    auto query = [&](const Expr& pos) { return keys_ ? Clamped(pos) : RowClamped(x); };
    const Expr pos = OtherPos(t, u);
    // p = exp(s - lse), 0 at a hidden key (Weight: the reference's zeros, NaN and inf).
    // A query that sees no key has lse -inf; its keys are all hidden.
    const Expr p = Weight(VisibleAt(x, pos), at(s, {u, x, t}) * scale - lse(query(pos)));
    // Dropout's factor of weight (query, key): the forward and dv drop p, dq and dk
    // drop dP (dS = P (dP keep - delta): delta = rowsum(dO O) already has the mask).
    const Expr keep = keys_ ? Keep(pos, x) : Keep(x, pos);
    const bool gradient_qk = op == OpKind::kAttentionGradQ || op == OpKind::kAttentionGradK;
    Func dp;
    if (gradient_qk) {
      const Value& dout = in_[3];
      dp = keys_ ? Product("dp", v, dout, dv, pass) : Product("dp", dout, v, dv, pass);
    }
    // p is a Func of its own where the weights are not p (dropout's factors, dq's and
    // dk's dS): the weights read it, the normalizing column sums it, and the gradients'
    // terms test it for 0.
    const bool separate = gradient_qk || keep.defined();
    Func pw(ctx_.UniqueName(name_ + (separate ? "_p" : "_w")));
    pw(Args({u, x, t})) = p;
    pass.per_tile.push_back(pw);
    const Expr pv = at(pw, {u, x, t});
    Func w = pw;
    if (separate) {
      Expr weight = keep.defined() ? pv * keep : pv;
      if (gradient_qk) {
        const Expr delta = Halide::cast(type_, ReadRow(in_[5], query(pos)));
        const Expr dpv = keep.defined() ? at(dp, {u, x, t}) * keep : at(dp, {u, x, t});
        // A term whose p is 0 adds nothing, as in the reference: not 0 times an inf or
        // NaN dP - delta.
        weight = Halide::select(IsZero(pv), zero_, pv * (dpv - delta) * scale);
      }
      w = Func(ctx_.UniqueName(name_ + "_w"));
      // Strict: under fast math, p times a keep of 0 may fold to 0 where p is NaN.
      w(Args({u, x, t})) = Halide::strict_float(weight);
      pass.per_tile.push_back(w);
    }

    // What the weights multiply: v (forward), k (dq), q (dk), dO (dv), at the other
    // sequence's clamped position.
    const Value& operand = Operand(op);
    const int64_t features = operand.shape[rank_ - 1];
    RDom r({{0, static_cast<int>(tile_)}, {0, ntiles_}}, ctx_.UniqueName(name_ + "_r"));
    SkipHiddenTiles(r, r.y, x);
    const Expr opos = Clamped(OtherPos(r.y, r.x));
    // The operand is 0 where the reference adds nothing: where the forward's weight (p,
    // dropout's factor in it) is 0, and the gradients' hidden weights. 0 times an inf or
    // NaN there (a key a causal query does not see, the clamped row past the end, a
    // self-attention's key whose inf made its score -inf) is NaN (seed 15100141).
    const Expr wr = at(w, {r.x, x, r.y});
    const Expr pr = at(pw, {r.x, x, r.y});
    const Expr skip = op == OpKind::kAttention ? IsZero(wr) : IsZero(pr);
    auto operand_at = [&](const Expr& col) {
      return Halide::strict_float(
          Halide::select(skip, zero_, Halide::cast(type_, Read(operand, opos, col))));
    };
    Func acc(ctx_.UniqueName(name_ + "_acc"));
    acc(Args({c, x})) = zero_;
    if (!Normalized(op)) {
      // On a GPU the schedule pads the features to its threads' (gpu_attention.cc): the
      // column is clamped there (a padded feature is computed, never read).
      acc(Args({c, x})) +=
          wr * operand_at(gpu_ ? Halide::min(c, static_cast<int>(features - 1)) : Expr(c));
    } else {
      // Feature `features` is the sum of p over the row's keys, the result's divisor
      // (LowerAttention): the weights' common rounding (lse's) cancels in the ratio.
      const int last = static_cast<int>(features - 1);
      const Expr value = operand_at(Halide::min(c, last));
      acc(Args({c, x})) +=
          !separate ? wr * Halide::select(c <= last, value, Halide::Internal::make_one(type_))
                    : Halide::select(c <= last, wr * value, pr);
    }
    pass.acc = acc;
    pass.tile = r.y;
    return acc;
  }

  // Whether op's weighted sum is normalized by the sum of its own weights p (a column
  // past its features). The forward's output must be: the backward's delta = rowsum(dO
  // O) cancels against dP, so a common rounding of O's weights (the f32 logsumexp's, ulp
  // 6e-5 at scores near 800) came out as percents in dq and dk. dq's rows are queries,
  // so dq sums its own p in the same pass; dk's and dv's rows are keys, and a query's
  // sum runs over all keys, which a key row's pass does not see (docs/ATTENTION.md).
  static bool Normalized(OpKind op) {
    return op == OpKind::kAttention || op == OpKind::kAttentionGradQ;
  }

  // What op's weights multiply: v (forward), k (dq), q (dk), dO (dv).
  const Value& Operand(OpKind op) const {
    return op == OpKind::kAttention        ? in_[2]
           : op == OpKind::kAttentionGradQ ? in_[1]
           : op == OpKind::kAttentionGradK ? in_[0]
                                           : in_[3];
  }

  const std::vector<Var>& batch_vars() const { return b_; }

  // Dropout's factor of the weight of query i and key j (unclamped: a position past the
  // end is masked anyway), undefined without dropout: 0 where RandomUniform's uniform of
  // the weight's row-major index in [..., Tq, Tk] is below the rate, else 1 / (1 - rate)
  // (Dropout's rule, bit for bit the unfused composite's and the reference's mask).
  Expr Keep(const Expr& i, const Expr& j) const {
    if (attrs_.dropout == 0 || step_ == nullptr) return Expr();
    Expr flat = 0;
    const std::vector<Expr> b = Batch();
    for (int d = 0; d < nb_; ++d) flat = flat * lead_[d] + b[d];
    flat = (flat * tq_ + i) * tk_ + j;
    const PhiloxWords block =
        PhiloxBlock(key_, Halide::cast(Halide::UInt(32), flat), At(*step_, {}));
    const bool f64 = type_ == Halide::Float(64);
    const Expr u = f64 ? PhiloxToUniformF64(block) : PhiloxToUniformF32(block);
    const Expr rate = Halide::Internal::make_const(u.type(), attrs_.dropout);
    return Halide::select(u < rate, zero_,
                          Halide::Internal::make_const(type_, 1.0 / (1.0 - attrs_.dropout)));
  }

  // Causal: row x skips the tiles it sees none of (a query's tiles wholly after it, a
  // key's wholly before it). The predicate depends on the tile and the row only, so
  // Halide places it outside the tile's inner loops, and bounds inference trims the
  // rows each tile's Funcs are computed for to the rows that read them: a row tile's
  // wholly hidden tiles compute nothing (about half the work at Tq = Tk). Static
  // lengths only: with a symbolic one the trimmed boxes corrupted the heap (Halide 14;
  // test/lower/attention_test.cc ASymbolicSequenceRunsAtEveryLength), so a symbolic
  // kernel masks every hidden score instead. Not on a GPU either: a block's shared
  // tiles need constant boxes (gpu_attention.h), which a trimmed box is not.
  void SkipHiddenTiles(RDom& r, const Halide::RVar& tile, const Var& x) const {
    if (!attrs_.causal || symbolic_ || gpu_) return;
    const Expr off = tk_ - tq_;
    if (keys_) {
      r.where(x <= OtherPos(tile, static_cast<int>(tile_ - 1)) + off);
    } else {
      r.where(OtherPos(tile, 0) <= x + off);
    }
  }

 private:
  LoweringContext& ctx_;
  const std::string& name_;
  const AttentionAttrs& attrs_;
  const std::vector<Value>& in_;
  const bool keys_;              // rows are keys (dk, dv); else queries
  bool symbolic_ = false;        // Tq or Tk is symbolic
  std::vector<Expr> lead_;       // the leading dims' extents (row-major)
  const Value* step_ = nullptr;  // the dropout's step, or null
  PhiloxKey key_ = {0, 0};
  bool gpu_ = false;  // lowered for a GPU schedule
  int rank_ = 0;
  int nb_ = 0;
  Expr tq_, tk_, other_len_, ntiles_;
  int64_t d_ = 0;
  int64_t tile_ = 64;
  Halide::Type type_;
  std::vector<Var> b_;
  Expr lowest_, zero_;
};

// acc(c, x, batch...) / acc(features, x, batch...): a normalized weighted sum (the
// Builder's Normalized) divided by its sum of weights where that is finite and positive;
// else acc itself: 0 for a query that sees no key (sum 0, and so is every feature), NaN
// where a weight is NaN, and where a weight is inf (an lse below a score, which the
// forward never gives) the reference's sum of infinite terms, not inf / inf. Tested on
// bits (the sum is never negative).
Expr Normalize(const Func& acc, const std::vector<Var>& vars, int64_t features) {
  std::vector<Expr> at(vars.begin(), vars.end());
  std::vector<Expr> sum_at = at;
  sum_at[0] = static_cast<int>(features);
  const Expr sum = acc(sum_at);
  const bool f64 = sum.type() == Halide::Float(64);
  const Expr bits = Halide::reinterpret(f64 ? Halide::UInt(64) : Halide::UInt(32), sum);
  const Expr inf = Halide::reinterpret(
      bits.type(),
      Halide::Internal::make_const(sum.type(), std::numeric_limits<double>::infinity()));
  const Expr usable =
      AbsBits(bits) != Halide::Internal::make_zero(bits.type()) && AbsBits(bits) < inf;
  return acc(at) / Halide::select(usable, sum, Halide::Internal::make_one(sum.type()));
}

}  // namespace

absl::StatusOr<Value> LowerAttention(LoweringContext& ctx, const std::string& name, OpKind op,
                                     const AttentionAttrs& attrs, const std::vector<Value>& in,
                                     const TensorType& out) {
  const int rank = static_cast<int>(in[0].shape.size());
  for (size_t i = 0; i < in.size(); ++i) {
    if (in[i].shape.empty()) continue;  // the dropout's step
    const size_t last = in[i].shape.size() - 1;
    if (i != 4 && i != 5 && SymbolOf(in[i], last) >= 0) {
      return absl::UnimplementedError("attention needs its feature widths known at build time");
    }
  }
  // No keys (or no queries for a key gradient): nothing to sum.
  const int64_t other = (op == OpKind::kAttentionGradK || op == OpKind::kAttentionGradV)
                            ? in[0].shape[rank - 2]
                            : in[1].shape[rank - 2];
  if (other == 0) {
    const double fill =
        op == OpKind::kAttentionLogSumExp ? -std::numeric_limits<double>::infinity() : 0.0;
    return Fill(out.dtype, out.shape, fill);
  }
  std::vector<Value> ops;
  for (size_t i = 0; i < in.size(); ++i) {
    ops.push_back(Materialize(ctx, absl::StrCat(name, "_in", i), in[i]));
  }
  const bool rows_are_keys = op == OpKind::kAttentionGradK || op == OpKind::kAttentionGradV;
  Builder b(ctx, name, attrs, ops, rows_are_keys);

  schedule::Stage stage;
  stage.kind = schedule::StageKind::kAttention;
  stage.extents = HalideExtents(out.shape);
  stage.attention.key_tile = b.tile();
  stage.attention.width = in[0].shape[rank - 1];  // q's (k's) width; v's, where it is an input
  if (op != OpKind::kAttentionLogSumExp) {
    stage.attention.width = std::max(stage.attention.width, in[2].shape[rank - 1]);
  }
  stage.attention.rows = out.shape[rank - 2];
  stage.attention.has_feature_dim = op != OpKind::kAttentionLogSumExp;
  Func result(ctx.UniqueName(name));
  std::vector<Var> vars = HalideVars(static_cast<int>(out.shape.size()));
  if (op == OpKind::kAttentionLogSumExp || op == OpKind::kAttention) {
    AttentionPass lse_pass;
    Func lse = b.LogSumExp(lse_pass);
    stage.attention.passes.push_back(lse_pass);
    if (op == OpKind::kAttentionLogSumExp) {
      result(vars) = lse(vars);
      stage.acc = lse_pass.acc;
      stage.result = result;
    } else {
      stage.attention.lse = lse;
      auto lse_at = [&](const Expr& row) {
        std::vector<Expr> args = {row};
        for (const Var& v : b.batch_vars()) args.push_back(v);
        return lse(args);
      };
      AttentionPass sum_pass;
      Func acc = b.WeightedSum(op, lse_at, sum_pass);
      stage.attention.passes.push_back(sum_pass);
      std::vector<Expr> row(vars.begin() + 1, vars.end());
      result(vars) =
          b.NanWhereLseIsNotFinite(lse(row), vars[1], Normalize(acc, vars, in[2].shape[rank - 1]));
      stage.attention.normalized = true;
      stage.acc = acc;
      stage.result = result;
    }
  } else {
    auto lse_at = [&](const Expr& row) {
      return Halide::cast(HalideType(out.dtype), b.ReadRow(ops[4], row));
    };
    AttentionPass sum_pass;
    Func acc = b.WeightedSum(op, lse_at, sum_pass);
    stage.attention.passes.push_back(sum_pass);
    if (op == OpKind::kAttentionGradQ) {
      result(vars) = Normalize(acc, vars, in[1].shape[rank - 1]);
      stage.attention.normalized = true;
    } else {
      std::vector<Expr> args(vars.begin(), vars.end());
      result(vars) = acc(args);
    }
    stage.acc = acc;
    stage.result = result;
  }
  ctx.stages().push_back(stage);
  Value value;
  value.func = result;
  value.dtype = out.dtype;
  value.shape = out.shape;
  return value;
}

}  // namespace lower
}  // namespace braze
