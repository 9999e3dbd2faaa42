// Random programs, built: a drawn Program (random_program.cc) into a graph (with some ops
// left out, for minimizing), its feeds (seeded values, some special), its constants moved
// for the fuzzer's conditioning check, and its C++ text for reports.
#include <algorithm>
#include <cmath>
#include <limits>
#include <random>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "braze/gradients.h"
#include "braze/ops.h"
#include "tools/fuzz/random_program.h"
#include "tools/fuzz/random_program_internal.h"

namespace braze {
namespace fuzz {
namespace internal {

std::string Ints(const std::vector<int64_t>& v) {
  return absl::StrCat("{", absl::StrJoin(v, ", "), "}");
}
std::string Ints(const std::vector<int>& v) {
  return absl::StrCat("{", absl::StrJoin(v, ", "), "}");
}
BuildFn ReductionBuild(ReduceKind r, std::vector<int> axes, bool keep) {
  return [r, axes = std::move(axes), keep](Graph&, const std::vector<Tensor>& v) {
    switch (r) {
      case ReduceKind::kSum:
        return Sum(v[0], axes, keep);
      case ReduceKind::kMax:
        return Max(v[0], axes, keep);
      case ReduceKind::kMin:
        return Min(v[0], axes, keep);
      case ReduceKind::kMean:
        return Mean(v[0], axes, keep);
    }
    return Tensor();
  };
}
std::string ReductionCode(ReduceKind r, const std::vector<int>& axes, bool keep) {
  static const char* const kNames[] = {"Sum", "Max", "Min", "Mean"};
  return absl::StrCat(kNames[static_cast<int>(r)], "($0, ", Ints(axes), ", ",
                      keep ? "true" : "false", ")");
}
std::string DTypeCode(DType d) {
  switch (d) {
    case DType::kF32:
      return "DType::kF32";
    case DType::kF64:
      return "DType::kF64";
    case DType::kI32:
      return "DType::kI32";
    case DType::kBool:
      return "DType::kBool";
    case DType::kBF16:
      return "DType::kBF16";
    case DType::kF16:
      return "DType::kF16";
  }
  return "?";
}

// Ops whose float result both implementations compute bit for bit from equal inputs:
// selections, layout, sign flips. Everything else may round differently in fused code
// (contracted FMAs, reassociated sums, approximate reciprocals), which is within the
// tolerance for continuous ops but flips a Floor, a comparison or an ArgMax near a tie.
// So discontinuous ops read only exact values: their oracle stays sound.
bool ExactOpCode(const std::string& code) {
  for (const char* prefix : {"Const(",
                             "Neg(",
                             "Abs($0)",
                             "Relu(",
                             "Sign(",
                             "Reshape(",
                             "Transpose(",
                             "BroadcastTo(",
                             "Concat(",
                             "Slice(",
                             "Pad(",
                             "Maximum(",
                             "Minimum(",
                             "Max(",
                             "Min(",
                             "Select($0",
                             "Cast($0, DType::kF",
                             "Cast($0, DType::kBF16)",
                             "OneHot(",
                             "MaxPool(",
                             "MaxPoolGradGrad(",  // g's values, at exact x's maxima
                             "Gather(",
                             "Iota(",
                             "RandomUniform(",
                             "RandomNormal("}) {
    if (code.rfind(prefix, 0) == 0) return true;
  }
  return false;
}

}  // namespace internal

namespace {

using internal::DTypeCode;
using internal::Ints;

HostTensor RandomValues(DType dtype, const Shape& shape, uint64_t seed) {
  const double lo = dtype == DType::kI32 ? -3 : -2, hi = dtype == DType::kI32 ? 4 : 2;
  return HostTensor::RandomUniform(dtype, shape, seed, lo, hi);
}

// BuildProgram's `perturb` while it builds, for the constants' build functions.
thread_local uint64_t build_perturbation = 0;

// The values that fast-math folding, reassociation and polynomial ranges get wrong:
// infinities, NaN, both zeros and a subnormal of the type. No huge finite values: their
// sums overflow or not depending on the order, which is not fixed. One body defines
// WithSpecials and kWithSpecialsSource, its text for the C++ that reproduces a program.
// The last value is drawn before its index: the order g++ evaluated the two in as
// arguments (C++ leaves that unspecified), so seeds recorded before keep their feeds.
#define BRAZE_WITH_SPECIALS(...)                         \
  HostTensor WithSpecials(HostTensor t, uint64_t seed)   \
      __VA_ARGS__ constexpr char kWithSpecialsSource[] = \
          "HostTensor WithSpecials(HostTensor t, uint64_t seed) " #__VA_ARGS__ "\n";

// clang-format off
BRAZE_WITH_SPECIALS({
  const int64_t n = t.num_elements();
  if (n == 0 || (t.dtype() != DType::kF32 && t.dtype() != DType::kF64)) return t;
  const double tiny = t.dtype() == DType::kF32 ? 1e-40 : 1e-310;
  const double specials[] = {INFINITY, -INFINITY, NAN, 0.0, -0.0, tiny, -tiny};
  std::mt19937_64 rng(seed ^ 0x9e3779b97f4a7c15ull);
  for (int64_t i = 0; i < n; ++i) {
    if (rng() % 8 == 0) t.SetDouble(i, specials[rng() % 7]);
  }
  const double last = specials[rng() % 7];
  t.SetDouble(static_cast<int64_t>(rng() % n), last);
  return t;
})
// clang-format on
#undef BRAZE_WITH_SPECIALS

}  // namespace

namespace internal {

// OnGrid and its C++ text (kOnGridSource), from one body.
#define BRAZE_ON_GRID(...)                                                 \
  HostTensor OnGrid(HostTensor t) __VA_ARGS__ const char kOnGridSource[] = \
      "HostTensor OnGrid(HostTensor t) " #__VA_ARGS__ "\n";
// clang-format off
BRAZE_ON_GRID({
  if (t.dtype() != DType::kF32 && t.dtype() != DType::kF64) return t;
  for (int64_t i = 0; i < t.num_elements(); ++i) t.SetDouble(i, std::round(t.GetDouble(i) * 8) / 8);
  return t;
})
// clang-format on
#undef BRAZE_ON_GRID

bool Grid::ExactIn(DType dtype) const {
  const int mantissa = dtype == DType::kF64 ? 53 : 24;
  return on && max > 0 && std::log2(max) - lsb < mantissa;
}

// A constant's values, moved where BuildProgram was asked to.
HostTensor ConstValues(DType dtype, const Shape& shape, uint64_t seed, bool grid) {
  HostTensor t = RandomValues(dtype, shape, seed);
  if (grid) t = OnGrid(std::move(t));
  return build_perturbation == 0 ? t : PerturbValues(std::move(t), build_perturbation, seed);
}

}  // namespace internal

HostTensor PerturbValues(HostTensor t, uint64_t draw, uint64_t salt) {
  if (!IsFloating(t.dtype())) return t;
  const double eps = t.dtype() == DType::kF64 ? std::numeric_limits<double>::epsilon()
                                              : std::numeric_limits<float>::epsilon();
  std::seed_seq seeds{draw, salt};
  std::mt19937_64 rng(seeds);
  std::uniform_real_distribution<double> unit(-1, 1);
  for (int64_t i = 0; i < t.num_elements(); ++i) {
    const double u = unit(rng);
    const double x = t.GetDouble(i);
    if (std::isfinite(x)) t.SetDouble(i, x * (1 + u * 4 * eps));
  }
  return t;
}

Shape DeclaredShape(const ProgramInput& in) {
  Shape declared = in.shape;
  if (in.dynamic0) declared[0] = -1;
  for (size_t d = 0; d < in.symbols.size() && d < declared.size(); ++d) {
    if (in.symbols[d] >= 0) declared[d] = -1;
  }
  return declared;
}

std::vector<TensorSpec> InputSpecs(const Program& p) {
  std::vector<TensorSpec> specs;
  for (const ProgramInput& in : p.inputs) specs.push_back({in.dtype, DeclaredShape(in)});
  return specs;
}

namespace {

// Whether some input dim has symbol 0 (the batch, which an empty run feeds 0 rows).
bool HasBatchSymbol(const Program& p) {
  for (const ProgramInput& in : p.inputs) {
    if (std::count(in.symbols.begin(), in.symbols.end(), 0) > 0) return true;
  }
  return false;
}

// Whether symbol k is the batch or follows it: in every run, the batch's size or 1 (so
// it broadcasts with the batch). In an empty run, it is 0 where it was the batch's size
// in the last run.
bool FollowsBatch(const Program& p, int k) {
  for (const std::vector<int64_t>& run : p.symbol_sizes) {
    if (run[k] != run[0] && run[k] != 1) return false;
  }
  return true;
}

// Symbol k's size in run `size0` (FeedRuns; > 0 or kEmptyBatch).
int64_t SymbolSize(const Program& p, int k, int64_t size0) {
  const std::vector<int64_t>& last = p.symbol_sizes.back();
  if (size0 != kEmptyBatch) return p.symbol_sizes[size0 - 1][k];
  return FollowsBatch(p, k) && last[k] == last[0] ? 0 : last[k];
}

}  // namespace

std::vector<int64_t> FeedRuns(const Program& p) {
  if (!p.symbol_sizes.empty()) {
    std::vector<int64_t> runs;
    for (int64_t r = 0; r <= static_cast<int64_t>(p.symbol_sizes.size()); ++r) runs.push_back(r);
    if (p.empty_batch && HasBatchSymbol(p)) runs.push_back(kEmptyBatch);
    return runs;
  }
  for (const ProgramInput& in : p.inputs) {
    if (!in.dynamic0) continue;
    std::vector<int64_t> sizes = {0, in.shape[0] + 2, 1, in.shape[0] + 19, in.shape[0] + 37};
    if (p.empty_batch) sizes.push_back(kEmptyBatch);
    return sizes;
  }
  return {0};
}

std::string FeedRunName(const Program& p, int64_t size0) {
  if (p.symbol_sizes.empty()) {
    return size0 == kEmptyBatch ? "size0 0 (an empty batch)" : absl::StrCat("size0 ", size0);
  }
  if (size0 == 0) return "run 0 (the inputs' first shapes)";
  std::string out =
      size0 == kEmptyBatch ? "run 0 rows (an empty batch;" : absl::StrCat("run ", size0, " (");
  for (size_t k = 0; k < p.symbol_sizes[0].size(); ++k) {
    absl::StrAppend(&out, k == 0 && size0 != kEmptyBatch ? "" : " ", "s", k, "=",
                    SymbolSize(p, static_cast<int>(k), size0));
  }
  return absl::StrCat(out, ")");
}

absl::StatusOr<BuiltProgram> BuildProgram(const Program& p, Graph& g, const std::vector<bool>& keep,
                                          uint64_t perturb, const std::vector<Tensor>* inputs) {
  build_perturbation = perturb;
  absl::Cleanup reset = [] { build_perturbation = 0; };
  BuiltProgram built;
  std::vector<Tensor> values;
  std::vector<bool> present;
  if (inputs != nullptr && inputs->size() != p.inputs.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("the program has ", p.inputs.size(), " inputs, not ", inputs->size()));
  }
  const std::vector<TensorSpec> specs = InputSpecs(p);
  for (size_t i = 0; i < p.inputs.size(); ++i) {
    values.push_back(inputs != nullptr
                         ? (*inputs)[i]
                         : Placeholder(g, specs[i].dtype, specs[i].shape, absl::StrCat("in", i)));
    built.placeholders.push_back(values.back());
    present.push_back(true);
  }
  for (size_t k = 0; k < p.ops.size(); ++k) {
    const ProgramOp& op = p.ops[k];
    bool ok = keep.empty() || keep[k];
    std::vector<Tensor> args;
    for (int i : op.operands) {
      ok = ok && present[i];
      args.push_back(values[i]);
    }
    values.push_back(ok ? op.build(g, args) : Tensor());
    present.push_back(ok);
  }
  if (!g.status().ok()) return g.status();
  std::vector<Tensor> float_fetches;
  for (int f : p.fetches) {
    if (!present[f]) continue;
    built.fetches.push_back(values[f]);
    built.fetch_values.push_back(f);
    if (values[f].dtype() == DType::kF32) float_fetches.push_back(values[f]);
  }
  if (p.gradients && !float_fetches.empty()) {
    std::vector<Tensor> xs;
    for (const Tensor& ph : built.placeholders) {
      if (ph.dtype() == DType::kF32) xs.push_back(ph);
    }
    if (!xs.empty()) {
      absl::StatusOr<std::vector<Tensor>> grads = Gradients(float_fetches, xs);
      if (!grads.ok()) {
        built.gradients_status = grads.status();
        return built;
      }
      for (const Tensor& t : *grads) {
        built.fetches.push_back(t);
        built.fetch_values.push_back(-1);
      }
    }
  }
  if (!g.status().ok()) {
    // The ops were built (checked above): what failed was the gradients' construction.
    built.gradients_status = g.status();
  }
  return built;
}

absl::StatusOr<std::vector<BuiltProgram>> BuildWorldProgram(const Program& p, Graph& g, int world) {
  std::vector<BuiltProgram> ranks(world);
  std::vector<std::vector<Tensor>> values(world);  // per rank, per value
  for (int r = 0; r < world; ++r) {
    for (size_t i = 0; i < p.inputs.size(); ++i) {
      values[r].push_back(Placeholder(g, p.inputs[i].dtype, DeclaredShape(p.inputs[i]),
                                      absl::StrCat("in", i, "_r", r)));
      ranks[r].placeholders.push_back(values[r].back());
    }
  }
  for (const ProgramOp& op : p.ops) {
    std::vector<Tensor> made(world);
    for (int r = 0; r < world; ++r) {
      if (op.simulate) {
        std::vector<Tensor> copies;  // the operand on every rank
        for (int q = 0; q < world; ++q) copies.push_back(values[q][op.operands[0]]);
        made[r] = op.simulate(g, copies, r);
      } else {
        std::vector<Tensor> args;
        for (int i : op.operands) args.push_back(values[r][i]);
        made[r] = op.build(g, args);
      }
    }
    for (int r = 0; r < world; ++r) values[r].push_back(made[r]);
  }
  if (!g.status().ok()) return g.status();
  std::vector<Tensor> float_fetches, xs;
  for (int r = 0; r < world; ++r) {
    for (int f : p.fetches) {
      ranks[r].fetches.push_back(values[r][f]);
      ranks[r].fetch_values.push_back(f);
      if (values[r][f].dtype() == DType::kF32) float_fetches.push_back(values[r][f]);
    }
    for (const Tensor& ph : ranks[r].placeholders) {
      if (ph.dtype() == DType::kF32) xs.push_back(ph);
    }
  }
  if (p.gradients && !float_fetches.empty() && !xs.empty()) {
    absl::StatusOr<std::vector<Tensor>> grads = Gradients(float_fetches, xs);
    if (!grads.ok()) return grads.status();
    const size_t per_rank = xs.size() / world;
    for (int r = 0; r < world; ++r) {
      for (size_t k = 0; k < per_rank; ++k) {
        ranks[r].fetches.push_back((*grads)[r * per_rank + k]);
        ranks[r].fetch_values.push_back(-1);
      }
    }
  }
  if (!g.status().ok()) return g.status();
  return ranks;
}

std::vector<HostTensor> RankFeeds(const Program& p, int rank, int64_t size0) {
  Program q;
  q.seed = p.seed + static_cast<uint64_t>(rank) * 0x9E3779B97F4A7C15ull;
  q.inputs = p.inputs;
  q.symbol_sizes = p.symbol_sizes;
  return MakeFeeds(q, size0);
}

std::vector<HostTensor> MakeFeeds(const Program& p, int64_t size0) {
  std::vector<HostTensor> feeds;
  for (size_t i = 0; i < p.inputs.size(); ++i) {
    const ProgramInput& in = p.inputs[i];
    Shape s = in.shape;
    if (!p.symbol_sizes.empty()) {
      for (size_t d = 0; d < in.symbols.size() && size0 != 0; ++d) {
        if (in.symbols[d] >= 0) s[d] = SymbolSize(p, in.symbols[d], size0);
      }
    } else if (in.dynamic0 && size0 > 0) {
      s[0] = size0;
    } else if (in.dynamic0 && size0 == kEmptyBatch) {
      s[0] = 0;
    }
    const uint64_t seed = p.seed * 131 + i * 17 + size0;
    HostTensor values = RandomValues(p.inputs[i].dtype, s, seed);
    if (p.inputs[i].grid) values = internal::OnGrid(std::move(values));
    feeds.push_back(p.inputs[i].specials ? WithSpecials(std::move(values), seed) : values);
  }
  return feeds;
}

std::string ProgramToCpp(const Program& p, const std::vector<bool>& keep) {
  std::string out =
      absl::StrCat("// braze-fuzz seed ", p.seed, "\n",
                   "HostTensor Random(DType d, Shape s, uint64_t seed) {\n"
                   "  return HostTensor::RandomUniform(d, s, seed, d == DType::kI32 ? -3 : -2,\n"
                   "                                   d == DType::kI32 ? 4 : 2);\n"
                   "}\n",
                   kWithSpecialsSource, internal::kOnGridSource,
                   "\n"
                   "Graph g;\nFeeds feeds;\n");
  std::vector<bool> present;
  for (size_t i = 0; i < p.inputs.size(); ++i) {
    absl::StrAppend(&out, "Tensor v", i, " = Placeholder(g, ", DTypeCode(p.inputs[i].dtype), ", ",
                    Ints(DeclaredShape(p.inputs[i])), ", \"in", i, "\");\n", "feeds.emplace_back(v",
                    i, ", ",
                    p.inputs[i].specials ? "WithSpecials(Random("
                    : p.inputs[i].grid   ? "OnGrid(Random("
                                         : "Random(",
                    DTypeCode(p.inputs[i].dtype), ", ", Ints(p.inputs[i].shape), ", ",
                    p.seed * 131 + i * 17, ")",
                    p.inputs[i].specials ? absl::StrCat(", ", p.seed * 131 + i * 17, ")")
                    : p.inputs[i].grid   ? ")"
                                         : "",
                    ");\n");
    present.push_back(true);
  }
  for (size_t k = 0; k < p.ops.size(); ++k) {
    const ProgramOp& op = p.ops[k];
    bool ok = keep.empty() || keep[k];
    for (int i : op.operands) ok = ok && present[i];
    present.push_back(ok);
    if (!ok) continue;
    std::string code = op.code;
    for (size_t j = op.operands.size(); j-- > 0;) {
      code = absl::StrReplaceAll(code, {{absl::StrCat("$", j), absl::StrCat("v", op.operands[j])}});
    }
    absl::StrAppend(&out, "Tensor v", p.inputs.size() + k, " = ", code, ";\n");
  }
  std::vector<std::string> fetches;
  for (int f : p.fetches) {
    if (present[f]) fetches.push_back(absl::StrCat("v", f));
  }
  absl::StrAppend(&out, "std::vector<Tensor> fetches = {", absl::StrJoin(fetches, ", "), "};\n");
  if (p.gradients) {
    absl::StrAppend(&out,
                    "// and the gradients of the f32 fetches with respect to the f32 inputs:\n"
                    "// Gradients(f32 fetches, f32 placeholders), appended to the fetches\n");
  }
  if (!p.symbol_sizes.empty()) {
    // The -1 dims' symbols and their sizes in each run after the feeds above.
    for (size_t i = 0; i < p.inputs.size(); ++i) {
      if (!p.inputs[i].symbols.empty()) {
        absl::StrAppend(&out, "// v", i,
                        "'s dims' symbols (-1: static): ", Ints(p.inputs[i].symbols), "\n");
      }
    }
    for (int64_t run : FeedRuns(p)) {
      if (run != 0) absl::StrAppend(&out, "// run again with ", FeedRunName(p, run), "\n");
    }
  } else if (p.empty_batch) {
    absl::StrAppend(&out, "// run again with the -1 inputs fed 0 rows (an empty batch)\n");
  }
  return out;
}

}  // namespace fuzz
}  // namespace braze
