// Differential runs of random programs; see fuzz_runner.h.
#include "tools/fuzz/fuzz_runner.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "braze/device.h"
#include "braze/jit_scope.h"

namespace braze {
namespace fuzz {
namespace {

// The feed sizes of dim 0 of dynamic inputs: the first shape's, then others, 1 included,
// and two of at least kMinSymbolicExtent after them, so a symbolic kernel compiled for
// one size serves another (docs/SYMBOLIC_SHAPES.md).
std::vector<int64_t> Sizes(const Program& p) {
  for (const ProgramInput& in : p.inputs) {
    if (in.dynamic0) return {0, in.shape[0] + 2, 1, in.shape[0] + 19, in.shape[0] + 37};
  }
  return {0};
}

std::string Compare(const HostTensor& got, const HostTensor& want, const RunOptions& o) {
  if (got.type() != want.type()) {
    return absl::StrCat("type ", TypeString(got.type()), ", reference ", TypeString(want.type()));
  }
  double scale = 1;
  for (int64_t i = 0; i < want.num_elements(); ++i) {
    const double y = want.GetDouble(i);
    if (std::isfinite(y)) scale = std::max(scale, std::fabs(y));
  }
  const bool exact = !IsFloating(want.dtype());
  int64_t bad = 0, worst = -1;
  double worst_err = 0;
  for (int64_t i = 0; i < want.num_elements(); ++i) {
    const double x = got.GetDouble(i), y = want.GetDouble(i);
    double err = 0;
    if (std::isnan(y) || std::isnan(x)) {
      err = std::isnan(x) == std::isnan(y) ? 0 : INFINITY;
    } else if (std::isinf(y) || std::isinf(x)) {
      err = x == y ? 0 : INFINITY;
    } else {
      err = std::fabs(x - y);
    }
    const double tol = exact ? 0 : o.atol * scale + o.rtol * std::fabs(y);
    if (err > tol) {
      if (bad++ == 0 || err > worst_err) {
        worst = i;
        worst_err = err;
      }
    }
  }
  if (bad == 0) return "";
  return absl::StrCat(bad, " of ", want.num_elements(), " elements differ; worst [", worst,
                      "]: got ", got.GetDouble(worst), ", reference ", want.GetDouble(worst));
}

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
  SessionOptions ref_options;
  ref_options.reference_only = true;
  Session reference(g, ref_options);
  SessionOptions options;
  options.scheduler = o.scheduler;
  options.strict = o.strict;
  options.device = o.device;
  options.inject_compile_failure = o.inject_compile_failure;
  Session compiled(g, options);
  for (int64_t size0 : Sizes(p)) {
    const std::vector<HostTensor> values = MakeFeeds(p, size0);
    Feeds feeds;
    for (size_t i = 0; i < values.size(); ++i)
      feeds.emplace_back(built->placeholders[i], values[i]);
    auto want = reference.Run(feeds, built->fetches);
    if (!want.ok()) continue;  // these sizes are invalid for the graph: the user's error
    auto got = compiled.Run(feeds, built->fetches);
    ++out.runs;
    if (!got.ok()) {
      out.kind = Outcome::Kind::kError;
      out.detail = absl::StrCat("size0 ", size0, ": ", got.status().ToString());
      return out;
    }
    for (size_t f = 0; f < built->fetches.size(); ++f) {
      const std::string diff = Compare((*got)[f], (*want)[f], o);
      if (!diff.empty()) {
        out.kind = Outcome::Kind::kMismatch;
        out.detail = absl::StrCat("size0 ", size0, ", fetch ", f, " ('", built->fetches[f].name(),
                                  "', cluster ",
                                  compiled.ClusterOf(built->fetches[f]).value_or("-"), "): ", diff);
        return out;
      }
    }
  }
  out.cluster_launches = compiled.stats().cluster_launches;
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
