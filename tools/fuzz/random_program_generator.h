// The random-program generator's class (random_program.cc draws a program with it):
// the program so far, the values an op may take as operands, and the seeded streams.
// Its generic ops (elementwise, comparisons, reductions, matmuls, layout ops and
// composites) are drawn in random_program_ops.cc; the op families in their own files
// through internal::Drawer (random_program_internal.h).
//
// Internal to tools/fuzz.
#ifndef BRAZE_TOOLS_FUZZ_RANDOM_PROGRAM_GENERATOR_H_
#define BRAZE_TOOLS_FUZZ_RANDOM_PROGRAM_GENERATOR_H_

#include <algorithm>
#include <cmath>
#include <functional>
#include <memory>
#include <numeric>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "braze/ops.h"
#include "tools/fuzz/random_program.h"
#include "tools/fuzz/random_program_internal.h"

namespace braze {
namespace fuzz {
namespace internal {

// Odd, prime, tiny and vector-width-adjacent extents.
inline constexpr int64_t kDims[] = {1, 2, 3, 4, 5, 7, 8, 9, 13, 16, 17, 31};

// GenerateOptions::dram_probability: first inputs past the last-level cache (16 to 34 MiB
// of f32). Those of 32 MiB and more stream where their rows cut into tiles of whole
// vectors (rank 1; rows of 16, 8 and 2 KiB); the others (rows of odd length, a tail)
// take the plain stores and the parallel splits of large loops.
inline const Shape kDramShapes[] = {{8388608}, {2048, 4096},    {4099, 2048}, {2, 64, 128, 512},
                                    {5000001}, {3, 1031, 2731}, {1024, 4097}, {67, 65537}};
// GenerateOptions::gemm_probability: first inputs for matmuls oneDNN takes (with a width
// drawn by Width): [m, k] matrices and batches of them, odd sizes too.
inline const Shape kGemmShapes[] = {{128, 384},   {200, 257},    {64, 1024}, {257, 129},
                                    {4, 96, 160}, {2, 128, 127}, {513, 65},  {31, 1031}};
// The most multiply-adds of one drawn matmul: 2^26, about 0.1 s for the reference's plain
// loops (a [2048, 4096] value times a [4096, 31] weight would be 2.6e8).
inline constexpr int64_t kMaxMatMulWork = int64_t{1} << 26;
// Matmul-sized: past compile.h's kLibraryGemmMinWork (2^18) and its former 2^21, where
// oneDNN takes every such matmul, as before the threshold came down.
inline constexpr int64_t kLibraryWork = int64_t{1} << 21;

inline std::string Num(double v) { return absl::StrCat(v); }

// Whether b broadcasts with a to at most as many elements as a has, or 50,000 (the
// generator's cap for a BroadcastTo). A [40005, 1] value paired with a [40005] one would
// be a 1.6e9-element outer product: seed 11201698's reference run was killed by the
// kernel's out-of-memory killer at 23 GiB.
inline bool SmallBroadcast(const Shape& a, const Shape& b) {
  const absl::StatusOr<Shape> out = BroadcastShapes(a, b);
  return out.ok() && NumElements(*out) <= std::max<int64_t>(NumElements(a), 50000);
}

class Generator : public internal::Drawer {
 public:
  Generator(uint64_t seed, const GenerateOptions& options)
      : rng_(seed),
        window_rng_(seed ^ 0x57696e646f77ull),
        sequence_rng_(seed ^ 0x53657175656e6365ull),
        random_rng_(seed ^ 0x52616e646f6dull),
        attention_rng_(seed ^ 0x4174746e6e6eull),
        float16_rng_(seed ^ 0x466c6f617431ull),
        collective_rng_(seed ^ 0x436f6c6c6563ull),
        control_flow_rng_(seed ^ 0x436f6e74726c46ull),
        edges_rng_(seed ^ 0x4564676573ull),
        dims_rng_(seed ^ 0x44796e44696d73ull),
        options_(options) {
    program_.seed = seed;
  }

  // Builds the program; false when the scratch graph rejected an op (try another seed).
  bool Generate() {
    MakeInputs();
    const int num_ops = options_.min_ops + Uniform(options_.max_ops - options_.min_ops + 1);
    for (int i = 0; i < num_ops; ++i) {
      for (int attempt = 0; attempt < 20 && !AddBoundedOp(); ++attempt) {
      }
      if (!g_.status().ok()) return false;
    }
    PickFetches();
    program_.gradients = Chance(options_.gradients_probability);
    // An attention program fetches its gradients (the backward ops) half the time.
    if (attention_ == 1 && !program_.gradients) program_.gradients = attention_rng_() % 7 < 2;
    program_.image = window_.image;
    if (edges_ == 1) {  // the edges' stream: other programs draw what they drew
      std::swap(rng_, edges_rng_);
      program_.empty_batch = Chance(0.5);
      std::swap(rng_, edges_rng_);
    }
    for (const Tensor& t : values_) {
      program_.max_elements = std::max(program_.max_elements, NumElements(Concrete(t.shape())));
    }
    for (const Probe& probe : probes_) {  // every run's sizes of the -1 dims
      for (const Tensor& t : probe.values) {
        if (t.valid())
          program_.max_elements = std::max(program_.max_elements, NumElements(t.shape()));
      }
    }
    for (int64_t w : work_) program_.max_matmul_work = std::max(program_.max_matmul_work, w);
    return g_.status().ok() && !program_.fetches.empty();
  }
  Program Take() { return std::move(program_); }

 private:
  // internal::Drawer, for the window ops (random_program_window.cc).
  int Uniform(int n) override {
    return n <= 1 ? 0 : static_cast<int>(rng_() % static_cast<uint64_t>(n));
  }
  bool Chance(double p) override { return std::uniform_real_distribution<double>(0, 1)(rng_) < p; }
  Tensor value(int i) const override { return values_[i]; }
  bool exact(int i) const override { return exact_[i]; }
  Grid grid(int i) const override { return grid_[i]; }
  void MarkBitExact(int i) override {
    exact_[i] = true;
    rounding_[i] = false;
    half_[i] = false;
    program_.ops[i - program_.inputs.size()].bit_exact = true;
  }
  int Pick(const std::function<bool(const Tensor&)>& ok, bool exact_only) override {
    const bool was = need_exact_;
    need_exact_ = exact_only;
    const int picked = Pick(ok);
    need_exact_ = was;
    return picked;
  }
  void SetSimulate(
      int i, std::function<Tensor(Graph&, const std::vector<Tensor>&, int)> simulate) override {
    program_.ops[i - program_.inputs.size()].simulate = std::move(simulate);
  }
  int Push(std::vector<int> operands, internal::BuildFn build, std::string code,
           Grid grid) override {
    PushOp(std::move(operands), std::move(build), std::move(code), grid);
    return static_cast<int>(values_.size()) - 1;
  }
  int AddConst(DType dtype, const Shape& shape, bool grid) override {
    const uint64_t seed = rng_() % 100000;
    PushOp(
        {},
        [dtype, shape, seed, grid](Graph& g, const std::vector<Tensor>&) {
          return Const(g, ConstValues(dtype, shape, seed, grid));
        },
        absl::StrCat("Const(g, ", grid ? "OnGrid(" : "", "Random(", DTypeCode(dtype), ", ",
                     Ints(shape), ", ", seed, ")", grid ? ")" : "", ")"),
        grid && IsFloating(dtype) ? Grid{true, -3, 2} : Grid{});
    return static_cast<int>(values_.size()) - 1;
  }

  // The window ops draw from a stream of their own (window_rng_), so a program without
  // them is the one its seed drew before they existed.
  class WindowStream {
   public:
    explicit WindowStream(Generator* g) : g_(g) { std::swap(g_->rng_, g_->window_rng_); }
    ~WindowStream() { std::swap(g_->rng_, g_->window_rng_); }

   private:
    Generator* g_;
  };
  // A window op; one that does not fit (or that the scratch graph rejects) withdraws what
  // it pushed (its constants), from the graph too.
  bool WindowOp() {
    WindowStream stream(this);
    const size_t ops = program_.ops.size(), values = values_.size();
    const int nodes = g_.num_nodes();
    if (internal::DrawWindowOp(*this, window_) && g_.status().ok()) return true;
    Withdraw(ops, values);
    g_.Truncate(nodes, absl::OkStatus());
    return false;
  }
  // Whether to draw a window op in place of the next op: often in an image-shaped
  // program, now and then where there is a rank-4 float value.
  bool DrawsWindowOp() {
    if (options_.window_probability <= 0) return false;
    WindowStream stream(this);
    if (window_.image) return Chance(0.4);
    for (const Tensor& t : values_) {
      if (IsFloating(t.dtype()) && t.rank() == 4) return Chance(0.08);
    }
    return false;
  }
  // The sequence ops likewise (sequence_rng_, GenerateOptions::sequence_probability).
  class SequenceStream {
   public:
    explicit SequenceStream(Generator* g) : g_(g) { std::swap(g_->rng_, g_->sequence_rng_); }
    ~SequenceStream() { std::swap(g_->rng_, g_->sequence_rng_); }

   private:
    Generator* g_;
  };
  bool SequenceOp() {
    if (options_.sequence_probability <= 0) return false;
    SequenceStream stream(this);
    if (sequence_ < 0) sequence_ = Chance(options_.sequence_probability) ? 1 : 0;
    if (sequence_ == 0 || !Chance(0.35 * options_.family_share)) return false;
    const size_t ops = program_.ops.size(), values = values_.size();
    const int nodes = g_.num_nodes();
    if (internal::DrawSequenceOp(*this) && g_.status().ok()) return true;
    Withdraw(ops, values);
    g_.Truncate(nodes, absl::OkStatus());
    return false;
  }
  // The random ops likewise (random_rng_, GenerateOptions::random_probability: 30% of the
  // ops), and attention (attention_rng_, GenerateOptions::attention_probability: 25%).
  bool RandomOp() {
    return FamilyOp(random_rng_, random_, options_.random_probability, 0.3, internal::DrawRandomOp);
  }
  bool AttentionOp() {
    return FamilyOp(attention_rng_, attention_, options_.attention_probability, 0.25,
                    internal::DrawAttentionOp);
  }
  bool CollectiveOp() {
    return FamilyOp(collective_rng_, collective_, options_.collective_probability, 0.3,
                    internal::DrawCollectiveOp);
  }
  bool Float16Op() {
    return FamilyOp(float16_rng_, float16_, options_.float16_probability, 0.3,
                    internal::DrawFloat16Op);
  }
  bool ControlFlowOp() {  // cf (issue 40)
    return FamilyOp(control_flow_rng_, control_flow_, options_.control_flow_probability, 0.25,
                    internal::DrawControlFlowOp);
  }
  bool EdgeOp() {
    return FamilyOp(edges_rng_, edges_, options_.edges_probability, 0.3, internal::DrawEdgeOp);
  }
  bool FamilyOp(std::mt19937_64& stream, int& on, double p, double share,
                bool (*draw)(internal::Drawer&)) {
    if (p <= 0) return false;
    share *= options_.family_share;
    std::swap(rng_, stream);
    if (on < 0) on = Chance(p) ? 1 : 0;
    const size_t ops = program_.ops.size(), values = values_.size();
    const int nodes = g_.num_nodes();
    bool drawn = on == 1 && Chance(share) && draw(*this) && g_.status().ok();
    if (!drawn && program_.ops.size() > ops) {
      Withdraw(ops, values);
      g_.Truncate(nodes, absl::OkStatus());
    }
    std::swap(rng_, stream);
    return drawn;
  }
  int64_t Dim() { return kDims[Uniform(sizeof(kDims) / sizeof(kDims[0]))]; }
  double Value() {
    return std::round(std::uniform_real_distribution<double>(-2, 2)(rng_) * 1000) / 1000;
  }

  // A random op, withdrawn (false) when a value it made exceeds value_cap_.
  bool AddBoundedOp() {
    const size_t ops = program_.ops.size(), values = values_.size();
    const int nodes = g_.num_nodes();
    const bool added = AddRandomOp();
    if (!probes_.empty() && !g_.status().ok()) {
      // An op invalid at some feed run's shapes (PushOp's probes): drawn again.
      Withdraw(ops, values);
      g_.Truncate(nodes, absl::OkStatus());
      return false;
    }
    if (!added) return false;
    if (value_cap_ == 0) return true;
    for (size_t i = values; i < values_.size(); ++i) {
      if (NumElements(Concrete(values_[i].shape())) <= value_cap_) continue;
      Withdraw(ops, values);
      return false;
    }
    return true;
  }

  // Withdraws the ops after the first `ops` (and the values after the first `values`).
  void Withdraw(size_t ops, size_t values) {
    program_.ops.resize(ops);  // the scratch graph keeps the nodes: nothing reads them
    values_.resize(values);
    exact_.resize(values);
    rounding_.resize(values);
    half_.resize(values);
    grid_.resize(values);
    work_.resize(ops);
    for (Probe& probe : probes_) probe.values.resize(values);
  }

  Shape RandomShape(bool large) {
    if (large) {
      static const Shape kLarge[] = {{67, 521}, {3, 129, 101}, {40000}, {257, 131}, {2, 5, 61, 67}};
      return kLarge[Uniform(5)];
    }
    Shape s(Uniform(5));  // rank 0-4
    int64_t total = 1;
    for (auto& d : s) {
      d = Dim();
      if (total * d > 4096) d = 1;
      total *= d;
    }
    return s;
  }

  void MakeInputs() {
    const int n = 1 + Uniform(3);
    const bool large = Chance(options_.large_probability);
    // Drawn only when asked for: without them, a seed's program is what it always was.
    const bool dram = options_.dram_probability > 0 && Chance(options_.dram_probability);
    gemm_ = !dram && options_.gemm_probability > 0 && Chance(options_.gemm_probability);
    Shape base = dram    ? kDramShapes[Uniform(sizeof(kDramShapes) / sizeof(kDramShapes[0]))]
                 : gemm_ ? kGemmShapes[Uniform(sizeof(kGemmShapes) / sizeof(kGemmShapes[0]))]
                         : RandomShape(large);
    // An image-shaped program (its own stream, as every window draw).
    std::vector<bool> on_grid(n, false);
    Shape filter;
    if (!dram && !gemm_ && options_.window_probability > 0) {
      WindowStream stream(this);
      window_.image = Chance(options_.window_probability);
      if (window_.image) {
        window_.format = Chance(0.6) ? DataFormat::kNHWC : DataFormat::kNCHW;
        base = internal::DrawImageShape(*this, window_.format);
        for (int i = 0; i < n; ++i) on_grid[i] = Chance(0.7);
        // An input shaped as a filter: the filter's gradient reaches an input.
        if (n > 1 && Chance(0.5)) {
          filter =
              internal::DrawFilterShape(*this, base[window_.format == DataFormat::kNHWC ? 3 : 1]);
        }
      }
    }
    for (int i = 0; i < n; ++i) {
      ProgramInput in;
      in.dtype = Chance(0.85) ? DType::kF32 : (Chance(0.5) ? DType::kF64 : DType::kI32);
      if ((gemm_ || window_.image) && i == 0) in.dtype = DType::kF32;  // oneDNN's matmuls are f32
      if (i == 0) {
        in.shape = base;
      } else if (Chance(0.5)) {
        in.shape = Partner(base);
      } else {
        in.shape = RandomShape(false);
      }
      in.dynamic0 = !in.shape.empty() && Chance(options_.dynamic_probability);
      if (i == 1 && !filter.empty()) {
        in.shape = filter;
        in.dtype = DType::kF32;
        in.dynamic0 = false;
      }
      in.grid = on_grid[i] && IsFloating(in.dtype);
      DrawSymbols(in);
      Tensor t = Placeholder(g_, in.dtype, DeclaredShape(in), absl::StrCat("in", i));
      program_.inputs.push_back(in);
      values_.push_back(t);
      exact_.push_back(true);
      rounding_.push_back(false);
      half_.push_back(false);
      grid_.push_back(in.grid ? Grid{true, -3, 2} : Grid{});
      if (dram) value_cap_ = std::max(value_cap_, 2 * NumElements(Concrete(in.shape)));
    }
    if (!first_sizes_.empty()) DrawSymbolSizes();
  }

  // GenerateOptions::dynamic_dims_probability (random_program_dims.cc), from a stream of
  // its own (dims_rng_): which dims of `in` are declared -1, each with a symbol.
  void DrawSymbols(ProgramInput& in);
  // Each symbol's sizes per feed run (Program::symbol_sizes), every input's symbols
  // filled in, and the probe graphs built: the inputs at each run's shapes.
  void DrawSymbolSizes();
  // Builds op `build` of `operands` at each run's shapes (Probe); false, with the reason
  // recorded in g_, when it is invalid at one of them or too large there.
  void ProbeOp(const std::vector<int>& operands, const internal::BuildFn& build,
               const Tensor& declared);
  // The dims' stream, as the window ops' (WindowStream).
  class DimsStream {
   public:
    explicit DimsStream(Generator* g) : g_(g) { std::swap(g_->rng_, g_->dims_rng_); }
    ~DimsStream() { std::swap(g_->rng_, g_->dims_rng_); }

   private:
    Generator* g_;
  };
  // The program at one feed run's concrete shapes, built op by op beside g_ (whose -1
  // dims hide whether two of them agree): an op is kept only when every run builds it.
  struct Probe {
    std::unique_ptr<Graph> graph;
    std::vector<Tensor> values;  // per value, as values_
  };

  // A shape that broadcasts against `s`: a suffix of it with some dims set to 1.
  Shape Partner(const Shape& s) {
    Shape p(s.begin() + Uniform(static_cast<int>(s.size()) + 1), s.end());
    for (auto& d : p) {
      if (Chance(0.3)) d = 1;
    }
    return p;
  }

  // A random earlier value satisfying `ok`, or -1.
  int Pick(const std::function<bool(const Tensor&)>& ok) {
    std::vector<int> candidates;
    for (size_t i = 0; i < values_.size(); ++i) {
      if (ok(values_[i]) && (!need_exact_ || exact_[i])) candidates.push_back(static_cast<int>(i));
    }
    if (candidates.empty()) return -1;
    // Prefer recent values: longer chains, more fusion.
    if (Chance(0.5)) return candidates.back();
    return candidates[Uniform(static_cast<int>(candidates.size()))];
  }
  int PickDType(std::vector<DType> dtypes, int min_rank = 0) {
    return Pick([&](const Tensor& t) {
      return std::count(dtypes.begin(), dtypes.end(), t.dtype()) > 0 && t.rank() >= min_rank &&
             NumElements(t.shape()) != 0;
    });
  }

  // Records an op and builds it in the scratch graph; its value joins the pool. `grid`:
  // what is known of its binary form where GridOf's rules by the code know nothing.
  void Push(std::vector<int> operands,
            std::function<Tensor(Graph&, const std::vector<Tensor>&)> build, std::string code) {
    PushOp(std::move(operands), std::move(build), std::move(code), Grid{});
  }
  void PushOp(std::vector<int> operands,
              std::function<Tensor(Graph&, const std::vector<Tensor>&)> build, std::string code,
              Grid grid) {
    std::vector<Tensor> args;
    for (int i : operands) args.push_back(values_[i]);
    Tensor t = build(g_, args);
    if (!probes_.empty()) ProbeOp(operands, build, t);
    bool exact = !IsFloating(t.dtype()) || ExactOp(code);
    bool rounding = t.dtype() == DType::kF32 && !ExactOp(code);
    bool half = false;
    for (int i : operands) {
      exact = exact && exact_[i];
      rounding = rounding || rounding_[i];
      half = half || half_[i];
    }
    // A 16-bit value rounds once what may differ by an f32 ulp (a cast of an inexact f32
    // value too): an ulp of its type apart.
    half = half || (Is16BitFloat(t.dtype()) && !exact);
    if (!grid.on) grid = GridOf(code, operands);
    if (!IsFloating(t.dtype())) grid = Grid{};
    if (grid.on && grid.ExactIn(t.dtype())) {
      exact = true;
      rounding = false;
      half = false;  // exact in f32, so rounded once the same way by both
    }
    program_.ops.push_back({std::move(operands), std::move(build), std::move(code), rounding});
    program_.ops.back().half_rounding = half;
    half_.push_back(half);
    values_.push_back(t);
    exact_.push_back(exact);
    rounding_.push_back(rounding);
    grid_.push_back(grid);
    work_.push_back(next_work_);
    next_work_ = 0;
  }

  // What is known of a value's binary form from its operands' (internal::Grid): kept by
  // selections and layout, widened by sums and products.
  Grid GridOf(const std::string& code, const std::vector<int>& operands) const {
    Grid g{true, 0, 0};
    bool first = true;
    for (int i : operands) {
      if (!IsFloating(values_[i].dtype())) continue;  // a Select's condition
      if (!grid_[i].on) return Grid{};
      g.lsb = first ? grid_[i].lsb : std::min(g.lsb, grid_[i].lsb);
      g.max = std::max(g.max, grid_[i].max);
      first = false;
    }
    if (first) return Grid{};
    for (const char* prefix :
         {"Neg(", "Abs($0)", "Relu(", "Reshape(", "Transpose(", "BroadcastTo(", "Concat(", "Slice(",
          "Maximum(", "Minimum(", "Max(", "Min(", "Select($0, $1, $2)", "MaxPool("}) {
      if (code.rfind(prefix, 0) == 0) return g;
    }
    if (operands.size() == 2 && (code == "Add($0, $1)" || code == "Sub($0, $1)")) {
      g.max = grid_[operands[0]].max + grid_[operands[1]].max;
      return g;
    }
    if (operands.size() == 2 && code == "Mul($0, $1)") {
      g.lsb = grid_[operands[0]].lsb + grid_[operands[1]].lsb;
      g.max = grid_[operands[0]].max * grid_[operands[1]].max;
      return g;
    }
    return Grid{};
  }

  // Ops whose float result both implementations compute bit for bit from equal inputs
  // (internal::ExactOpCode, random_program_build.cc).
  static bool ExactOp(const std::string& code) { return internal::ExactOpCode(code); }
  bool Exact(int value) const { return exact_[value]; }

  // A constant operand as an op of its own: value index.
  int AddConst(DType dtype, const Shape& shape) { return AddConst(dtype, shape, false); }

  // A second operand broadcasting with value `a`: an earlier value or a new constant.
  int BroadcastOperand(int a) {
    const Tensor x = values_[a];  // a copy: Push and AddConst grow values_
    int b = Pick([&](const Tensor& t) {
      if (!probes_.empty()) {
        // -1 dims of two values too: the probes keep the pair only where every run's
        // sizes agree or one of them is 1 (numpy broadcasting).
        return t.dtype() == x.dtype() && BroadcastShapes(x.shape(), t.shape()).ok() &&
               SmallBroadcast(Concrete(x.shape()), Concrete(t.shape()));
      }
      return t.dtype() == x.dtype() && IsFullyDefined(t.shape()) && IsFullyDefined(x.shape()) &&
             SmallBroadcast(x.shape(), t.shape());
    });
    if (b < 0 || Chance(0.3)) b = AddConst(x.dtype(), Partner(Concrete(x.shape())));
    return b;
  }
  static Shape Concrete(Shape s) {
    for (auto& d : s) d = std::max<int64_t>(d, 1);
    return s;
  }

  bool AddRandomOp() {
    // A matmul-sized program draws matmuls more often (they are what it is for).
    if (gemm_ && Chance(0.2) && MatMulOp()) return true;
    if (DrawsWindowOp() && WindowOp()) return true;
    if (SequenceOp()) return true;
    if (RandomOp() || AttentionOp() || Float16Op() || CollectiveOp() || ControlFlowOp() || EdgeOp())
      return true;
    switch (Uniform(20)) {
      case 0:
      case 1:
      case 2:
        return Unary();
      case 3:
      case 4:
      case 5:
        return Binary();
      case 6:
        return Compare();
      case 7:
        return SelectOp();
      case 8:
      case 9:
        return Reduce();
      case 10:
        return MatMulOp();
      case 11:
        return ReshapeOp();
      case 12:
        return TransposeOp();
      case 13:
        return BroadcastToOp();
      case 14:
        return ConcatOp();
      case 15:
        return SliceOp();
      case 16:
        return PadOp();
      case 17:
        return CastOrOneHot();
      case 18:
      case 19:
        return Composite();
    }
    return false;
  }

  bool Unary();
  bool Binary();
  bool Compare();
  bool SelectOp();
  std::vector<int> RandomAxes(int rank);
  bool Reduce();
  // The width n of a matmul with `mk` = batch * m * k and a drawn weight: a small extent,
  // or in a matmul-sized program one that makes the work 2^21 to 2^22 multiply-adds (where
  // oneDNN takes over). 0 when even n = 1 is past kMaxMatMulWork.
  int64_t Width(int64_t mk);
  bool MatMulOp();
  // A weight computed from a fresh constant c of `shape`: c plus an earlier value that
  // broadcasts to it (an input, often), else Tanh(c) or Relu(c). Its value index.
  int ComputedWeight(DType dtype, const Shape& shape);
  bool ReshapeOp();
  bool TransposeOp();
  bool BroadcastToOp();
  bool ConcatOp();
  bool SliceOp();
  bool PadOp();
  bool CastOrOneHot();
  bool Composite();

  void PickFetches() {
    const int first_op = static_cast<int>(program_.inputs.size());
    const int n = program_.num_values();
    if (n == first_op) return;
    std::vector<int> fetches = {n - 1};
    for (int k = Uniform(3); k > 0; --k) fetches.push_back(first_op + Uniform(n - first_op));
    for (int v = first_op; v < n; ++v) {  // every random op's bits are checked
      if (program_.ops[v - first_op].bit_exact) fetches.push_back(v);
    }
    std::sort(fetches.begin(), fetches.end());
    fetches.erase(std::unique(fetches.begin(), fetches.end()), fetches.end());
    program_.fetches = fetches;
  }

  std::mt19937_64 rng_;
  std::mt19937_64 window_rng_;        // the window ops' stream (WindowStream)
  std::mt19937_64 sequence_rng_;      // the sequence ops' stream (SequenceStream)
  int sequence_ = -1;                 // whether this program draws sequence ops; -1: not drawn yet
  std::mt19937_64 random_rng_;        // the random ops' stream (RandomOp)
  int random_ = -1;                   // whether this program draws random ops; -1: not drawn yet
  std::mt19937_64 attention_rng_;     // attention's stream (AttentionOp)
  int attention_ = -1;                // whether this program draws attention; -1: not drawn yet
  std::mt19937_64 float16_rng_;       // bf16 and f16's stream (Float16Op)
  int float16_ = -1;                  // whether this program draws 16-bit ops; -1: not drawn yet
  std::mt19937_64 collective_rng_;    // the collectives' stream (CollectiveOp)
  int collective_ = -1;               // whether this program draws collectives; -1: not drawn yet
  std::mt19937_64 control_flow_rng_;  // control flow's stream (ControlFlowOp; cf, issue 40)
  int control_flow_ = -1;             // whether this program draws control flow; -1: not yet
  std::mt19937_64 edges_rng_;         // the edges' stream (EdgeOp)
  int edges_ = -1;                    // whether this program draws the edges; -1: not yet
  std::mt19937_64 dims_rng_;          // the -1 dims' stream (DimsStream)
  std::vector<int64_t> first_sizes_;  // per symbol: its size in the first feeds
  std::vector<int> followed_;         // per symbol: the symbol it follows, or -1
  std::vector<Probe> probes_;         // one per feed run of a program with symbols
  GenerateOptions options_;
  Program program_;
  Graph g_;
  std::vector<Tensor> values_;
  std::vector<bool> exact_;         // per value: see ExactOp
  std::vector<bool> rounding_;      // per value: ProgramOp::f32_rounding
  std::vector<bool> half_;          // per value: ProgramOp::half_rounding
  std::vector<Grid> grid_;          // per value: what is known of its binary form
  std::vector<int64_t> work_;       // per op: a matmul's multiply-adds, else 0
  int64_t next_work_ = 0;           // the next Push's work_
  bool need_exact_ = false;         // Pick returns exact values only
  bool gemm_ = false;               // GenerateOptions::gemm_probability drew this program
  internal::WindowContext window_;  // GenerateOptions::window_probability drew an image
  int64_t value_cap_ = 0;           // the most elements of a value (0: no cap; --large only)
};

}  // namespace internal
}  // namespace fuzz
}  // namespace braze

#endif  // BRAZE_TOOLS_FUZZ_RANDOM_PROGRAM_GENERATOR_H_
