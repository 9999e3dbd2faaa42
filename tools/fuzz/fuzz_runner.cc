// Differential runs of random programs; see fuzz_runner.h.
#include "tools/fuzz/fuzz_runner.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "absl/strings/str_cat.h"
#include "braze/device.h"
#include "braze/distributed.h"
#include "braze/function.h"
#include "braze/jit_scope.h"

namespace braze {
namespace fuzz {
namespace {

// The elements of `got` that differ from `want` beyond the tolerance.
struct Diff {
  std::vector<int64_t> bad;
  std::string text;  // empty when none differ
};

// The difference between two values: 0 where both are the same NaN-ness or infinity,
// infinite where only one is NaN or infinite.
double Err(double x, double y) {
  if (std::isnan(y) || std::isnan(x)) return std::isnan(x) == std::isnan(y) ? 0 : INFINITY;
  if (std::isinf(y) || std::isinf(x)) return x == y ? 0 : INFINITY;
  return std::fabs(x - y);
}

double Scale(const HostTensor& want) {
  double scale = 1;
  for (int64_t i = 0; i < want.num_elements(); ++i) {
    const double y = want.GetDouble(i);
    if (std::isfinite(y)) scale = std::max(scale, std::fabs(y));
  }
  return scale;
}

// A fetch's tolerance: f64's for an f64 value computed in f64 throughout, else f32's.
struct Tol {
  double rtol = 0, atol = 0;
  const char* name = "f32";
};
Tol TolOf(const Program& p, const BuiltProgram& built, size_t f, const RunOptions& o) {
  const int v = built.fetch_values[f];
  if (v >= static_cast<int>(p.inputs.size()) && p.ops[v - p.inputs.size()].bit_exact) {
    return Tol{0, 0, "bit-exact"};
  }
  if (v >= static_cast<int>(p.inputs.size()) && p.ops[v - p.inputs.size()].half_rounding) {
    return Tol{o.rtol_16, o.atol_16, "16-bit"};
  }
  const bool f64 =
      built.fetches[f].dtype() == DType::kF64 && v >= 0 &&
      (v < static_cast<int>(p.inputs.size()) || !p.ops[v - p.inputs.size()].f32_rounding);
  return f64 ? Tol{o.rtol_f64, o.atol_f64, "f64"} : Tol{o.rtol, o.atol, "f32"};
}

// Where the reference is NaN or infinite, none: Err is 0 for the same special and
// infinite otherwise (a tolerance of rtol * inf, or NaN, let any value through).
double Tolerance(const HostTensor& want, double scale, int64_t i, const Tol& o) {
  const double y = want.GetDouble(i);
  if (!IsFloating(want.dtype()) || !std::isfinite(y)) return 0;
  return o.atol * scale + o.rtol * std::fabs(y);
}

Diff Compare(const HostTensor& got, const HostTensor& want, const Tol& o) {
  Diff d;
  if (got.type() != want.type()) {
    d.text = absl::StrCat("type ", TypeString(got.type()), ", reference ", TypeString(want.type()));
    return d;
  }
  const double scale = Scale(want);
  int64_t worst = -1;
  double worst_err = 0;
  for (int64_t i = 0; i < want.num_elements(); ++i) {
    const double err = Err(got.GetDouble(i), want.GetDouble(i));
    if (err > Tolerance(want, scale, i, o)) {
      d.bad.push_back(i);
      if (worst < 0 || err > worst_err) {
        worst = i;
        worst_err = err;
      }
    }
  }
  if (d.bad.empty()) return d;
  d.text =
      absl::StrCat(d.bad.size(), " of ", want.num_elements(), " elements differ; worst [", worst,
                   "]: got ", got.GetDouble(worst), ", reference ", want.GetDouble(worst));
  return d;
}

// Whether the reference alone explains a disagreement. The program is rebuilt with its
// constants and run on feeds moved by a few ulps (PerturbValues, three draws); where
// that moves each differing element of fetch `f` by at least a quarter of the compiled
// result's distance from the reference, the disagreement is rounding noise the program
// amplifies. A miscompile in a well-conditioned spot moves nothing there and stays a
// mismatch. Floating outputs only.
bool IllConditioned(const Program& p, const std::vector<bool>& keep, size_t f,
                    const std::vector<HostTensor>& values, const HostTensor& got,
                    const HostTensor& want, const std::vector<int64_t>& bad, const Tol& o) {
  if (!IsFloating(want.dtype()) || got.type() != want.type() || bad.empty()) return false;
  std::vector<double> spread(bad.size(), 0);
  for (uint64_t draw = 1; draw <= 3; ++draw) {
    Graph g;
    absl::StatusOr<BuiltProgram> built = BuildProgram(p, g, keep, draw);
    if (!built.ok() || built->fetches.size() <= f) return false;
    Feeds feeds;
    for (size_t i = 0; i < values.size(); ++i) {
      feeds.emplace_back(built->placeholders[i], PerturbValues(values[i], draw, i));
    }
    SessionOptions ref_options;
    ref_options.reference_only = true;
    Session reference(g, ref_options);
    auto again = reference.Run(feeds, {built->fetches[f]});
    if (!again.ok() || (*again)[0].type() != want.type()) return false;  // dtype and shape
    for (size_t k = 0; k < bad.size(); ++k) {
      spread[k] = std::max(spread[k], Err((*again)[0].GetDouble(bad[k]), want.GetDouble(bad[k])));
    }
  }
  // Only finite disagreements with a finite spread: a NaN or infinity on either side, or a
  // reference that turns special when moved, is never excused.
  const double scale = Scale(want);
  for (size_t k = 0; k < bad.size(); ++k) {
    const double err = Err(got.GetDouble(bad[k]), want.GetDouble(bad[k]));
    const double tol = Tolerance(want, scale, bad[k], o);
    if (!std::isfinite(err) || !std::isfinite(spread[k]) || !(err <= tol + 4 * spread[k])) {
      return false;
    }
  }
  return true;
}

// The compiled side of a run: a Session of the graph built under the JitScope (or on the
// jit device), or, with RunOptions::function, a Function (jit_compile, the program's
// input signature with its -1 batch) whose body builds the program's ops in `keep` on
// its arguments, so its values are traced, planned and compiled as a Function's. With
// SessionOptions::reference_only, the Function's oracle: the same trace (its ops named
// in the Function's name scope, so a random op's default key, from its name, is the
// same) run on the reference kernels.
class CompiledSide {
 public:
  CompiledSide(const Program& p, const std::vector<bool>& keep, const Graph& g,
               const BuiltProgram& built, const SessionOptions& options, bool function)
      : built_(built), keep_(keep), session_(g, options) {
    if (!function) return;
    FunctionOptions fo;
    fo.name = "fuzz_program";
    fo.input_signature = InputSpecs(p);
    fo.jit_compile = !options.reference_only;
    fo.session = options;
    function_ = std::make_unique<Function>(
        [&p, this](Graph& fg, const std::vector<Tensor>& args) -> std::vector<Tensor> {
          absl::StatusOr<BuiltProgram> b = BuildProgram(p, fg, keep_, 0, &args);
          if (!b.ok()) traced_ = b.status();
          return b.ok() ? b->fetches : std::vector<Tensor>{};
        },
        fo);
  }

  // The fetches for the program's feeds `values`.
  absl::StatusOr<std::vector<HostTensor>> Run(const std::vector<HostTensor>& values) {
    if (function_ == nullptr) {
      Feeds feeds;
      for (size_t i = 0; i < values.size(); ++i) {
        feeds.emplace_back(built_.placeholders[i], values[i]);
      }
      return session_.Run(feeds, built_.fetches);
    }
    absl::StatusOr<std::vector<HostTensor>> got = (*function_)(values);
    if (!traced_.ok()) return absl::InternalError(absl::StrCat("tracing: ", traced_.ToString()));
    if (got.ok() && got->size() != built_.fetches.size()) {
      return absl::InternalError(absl::StrCat("the Function returned ", got->size(), " values for ",
                                              built_.fetches.size(), " fetches"));
    }
    return got;
  }

  // The cluster that computes fetch `f`, for a mismatch's line.
  std::string ClusterOf(size_t f) const {
    if (function_ != nullptr) return "- (Function)";
    return session_.ClusterOf(built_.fetches[f]).value_or("-");
  }

  int64_t cluster_launches() const {
    return function_ != nullptr ? function_->stats().cluster_launches
                                : session_.stats().cluster_launches;
  }

 private:
  const BuiltProgram& built_;
  const std::vector<bool> keep_;
  Session session_;
  std::unique_ptr<Function> function_;
  absl::Status traced_;  // the Function body's BuildProgram
};

}  // namespace

const char* OutcomeName(Outcome::Kind kind) {
  switch (kind) {
    case Outcome::Kind::kPass:
      return "pass";
    case Outcome::Kind::kSkip:
      return "skip";
    case Outcome::Kind::kMismatch:
      return "MISMATCH";
    case Outcome::Kind::kError:
      return "ERROR";
    case Outcome::Kind::kIllConditioned:
      return "ill-conditioned";
  }
  return "?";
}

Outcome RunProgram(const Program& p, const RunOptions& o, const std::vector<bool>& keep) {
  Outcome out;
  Graph g;
  absl::StatusOr<BuiltProgram> built;
  if (o.jit_scope) {
    JitScope scope(g);
    built = BuildProgram(p, g, keep);
  } else {
    DeviceScope device(g, o.jit_device);
    built = BuildProgram(p, g, keep);
  }
  if (!built.ok() || built->fetches.empty()) {
    out.kind = Outcome::Kind::kSkip;  // the builders rejected it: not a compiler question
    out.detail = built.ok() ? "nothing to fetch" : std::string(built.status().message());
    return out;
  }
  if (!built->gradients_status.ok()) {
    // The program is valid (its ops were built): Gradients() must handle it.
    out.kind = Outcome::Kind::kError;
    out.detail = absl::StrCat("Gradients(): ", built->gradients_status.ToString());
    return out;
  }
  SessionOptions ref_options;
  ref_options.reference_only = true;
  Session reference(g, ref_options);
  SessionOptions options;
  options.scheduler = o.scheduler;
  options.strict = o.strict;
  options.device = o.device;
  options.inject_compile_failure = o.inject_compile_failure;
  options.num_threads = o.num_threads;
  CompiledSide compiled(p, keep, g, *built, options, o.function);
  std::optional<CompiledSide> reference_function;
  if (o.function) reference_function.emplace(p, keep, g, *built, ref_options, true);
  std::string ill_conditioned;  // the first such fetch's detail
  absl::Status rejected;        // the reference's first refusal, for a skip's detail
  for (int64_t size0 : FeedRuns(p)) {
    const std::vector<HostTensor> values = MakeFeeds(p, size0);
    Feeds feeds;
    for (size_t i = 0; i < values.size(); ++i)
      feeds.emplace_back(built->placeholders[i], values[i]);
    auto want = reference_function.has_value() ? reference_function->Run(values)
                                               : reference.Run(feeds, built->fetches);
    if (!want.ok()) {  // these sizes are invalid for the graph: the user's error
      if (rejected.ok()) rejected = want.status();
      continue;
    }
    auto got = compiled.Run(values);
    ++out.runs;
    if (!got.ok()) {
      out.kind = Outcome::Kind::kError;
      out.detail = absl::StrCat(FeedRunName(p, size0), ": ", got.status().ToString());
      return out;
    }
    // Every fetch and size is compared: an ill-conditioned one is remembered and the rest
    // still checked, so it hides no mismatch after it.
    for (size_t f = 0; f < built->fetches.size(); ++f) {
      if (o.corrupt_result) o.corrupt_result(f, &(*got)[f]);
      const Tol tol = TolOf(p, *built, f, o);
      const Diff diff = Compare((*got)[f], (*want)[f], tol);
      if (diff.text.empty()) continue;
      const bool noise = IllConditioned(p, keep, f, values, (*got)[f], (*want)[f], diff.bad, tol);
      const std::string detail = absl::StrCat(
          FeedRunName(p, size0), ", fetch ", f, " ('", built->fetches[f].name(), "', cluster ",
          compiled.ClusterOf(f), ", ", tol.name, " tolerance): ", diff.text,
          noise ? " (the reference moves as much when the inputs move by a few ulps)" : "");
      if (noise) {
        if (ill_conditioned.empty()) ill_conditioned = detail;
        continue;
      }
      out.kind = Outcome::Kind::kMismatch;
      out.detail = detail;
      return out;
    }
  }
  out.cluster_launches = compiled.cluster_launches();
  if (!ill_conditioned.empty()) {
    out.kind = Outcome::Kind::kIllConditioned;
    out.detail = ill_conditioned;
  }
  if (out.runs == 0) {
    out.kind = Outcome::Kind::kSkip;
    out.detail = absl::StrCat("the reference rejected every feed size: ", rejected.ToString());
  }
  return out;
}

Outcome RunWorldProgram(const Program& p, const RunOptions& o) {
  const int world = WorldSize(), me = WorldRank();
  if (p.gradients) {
    // The world's copies may have no gradient where a program on one rank has one: an
    // AllGather of a -1 batch is a Concat of -1 batches, whose gradient Braze refuses
    // unless the unknown size is the last input's. Then the values alone are compared.
    Graph h;
    if (!BuildWorldProgram(p, h, world).ok()) {
      Program values_only = p;
      values_only.gradients = false;
      return RunWorldProgram(values_only, o);
    }
  }
  Outcome out;
  Graph g;
  absl::StatusOr<BuiltProgram> built;
  if (o.jit_scope) {
    JitScope scope(g);
    built = BuildProgram(p, g);
  } else {
    DeviceScope device(g, o.jit_device);
    built = BuildProgram(p, g);
  }
  Graph h;
  absl::StatusOr<std::vector<BuiltProgram>> ranks = BuildWorldProgram(p, h, world);
  if (!built.ok() || built->fetches.empty() || !ranks.ok()) {
    out.kind = Outcome::Kind::kSkip;  // the builders rejected it: not a compiler question
    out.detail = !built.ok()   ? std::string(built.status().message())
                 : !ranks.ok() ? absl::StrCat("the world's copies: ", ranks.status().message())
                               : "nothing to fetch";
    return out;
  }
  if (!built->gradients_status.ok()) {
    out.kind = Outcome::Kind::kError;
    out.detail = absl::StrCat("Gradients(): ", built->gradients_status.ToString());
    return out;
  }
  const BuiltProgram& mine = (*ranks)[me];
  if (mine.fetches.size() != built->fetches.size()) {
    out.kind = Outcome::Kind::kError;
    out.detail = absl::StrCat(built->fetches.size(), " fetches compiled, ", mine.fetches.size(),
                              " in the world's copies");
    return out;
  }
  SessionOptions ref_options;
  ref_options.reference_only = true;
  Session reference(h, ref_options);
  SessionOptions options;
  options.scheduler = o.scheduler;
  options.strict = o.strict;
  options.device = o.device;
  options.num_threads = o.num_threads;
  CompiledSide compiled(p, {}, g, *built, options, o.function);
  for (int64_t size0 : FeedRuns(p)) {
    Feeds world_feeds;
    for (int r = 0; r < world; ++r) {
      const std::vector<HostTensor> values = RankFeeds(p, r, size0);
      for (size_t i = 0; i < values.size(); ++i) {
        world_feeds.emplace_back((*ranks)[r].placeholders[i], values[i]);
      }
    }
    auto want = reference.Run(world_feeds, mine.fetches);
    if (!want.ok()) continue;  // these sizes are invalid for the graph (on every rank)
    auto got = compiled.Run(RankFeeds(p, me, size0));
    ++out.runs;
    if (!got.ok()) {
      out.kind = Outcome::Kind::kError;
      out.detail =
          absl::StrCat("rank ", me, ", ", FeedRunName(p, size0), ": ", got.status().ToString());
      return out;
    }
    // A mismatch is remembered and the other sizes still run: the other ranks run them
    // (their collectives need this rank).
    for (size_t f = 0; f < built->fetches.size() && out.kind == Outcome::Kind::kPass; ++f) {
      if (o.corrupt_result) o.corrupt_result(f, &(*got)[f]);
      const Diff diff = Compare((*got)[f], (*want)[f], TolOf(p, *built, f, o));
      if (diff.text.empty()) continue;
      out.kind = Outcome::Kind::kMismatch;
      out.detail = absl::StrCat("rank ", me, " of ", world, ", ", FeedRunName(p, size0), ", fetch ",
                                f, " ('", built->fetches[f].name(), "', cluster ",
                                compiled.ClusterOf(f), "): ", diff.text);
    }
  }
  out.cluster_launches = compiled.cluster_launches();
  if (out.runs == 0) {
    out.kind = Outcome::Kind::kSkip;
    out.detail = "the reference rejected every feed size";
  }
  return out;
}

std::vector<bool> Minimize(Program& p, const RunOptions& o, Outcome::Kind kind) {
  std::vector<bool> keep(p.ops.size(), true);
  auto fails = [&](const Program& q, const std::vector<bool>& k) {
    return RunProgram(q, o, k).kind == kind;
  };
  if (p.gradients) {
    Program q = p;
    q.gradients = false;
    if (fails(q, keep)) p = q;
  }
  for (size_t f = 0; p.fetches.size() > 1 && f < p.fetches.size();) {
    Program q = p;
    q.fetches.erase(q.fetches.begin() + f);
    if (fails(q, keep)) {
      p = q;
    } else {
      ++f;
    }
  }
  for (bool changed = true; changed;) {
    changed = false;
    for (size_t k = keep.size(); k-- > 0;) {
      if (!keep[k]) continue;
      keep[k] = false;
      if (fails(p, keep)) {
        changed = true;
      } else {
        keep[k] = true;
      }
    }
  }
  return keep;
}

}  // namespace fuzz
}  // namespace braze
