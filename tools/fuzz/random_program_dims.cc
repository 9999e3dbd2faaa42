// The random-program generator's -1 dims past the batch (GenerateOptions::
// dynamic_dims_probability, braze-fuzz --dynamic_dims): an input declares -1 on dims of
// its choice, several at once, each with a symbol whose size changes from one feed run
// to the next independently of the others (1, small primes, sizes >= 16), or follows
// another symbol (its size or 1 in each run: numpy broadcasting of a size-1 dim against
// a -1 dim of another input).
//
// The scratch graph sees every such dim as -1, and its shape inference takes any two -1
// as equal, so it cannot tell whether an op stays valid when the runs feed them
// different sizes (a matmul's inner dims, a Concat's other dims, a Reshape's product, a
// window op's channels, two values added). So each op is also built in one graph per
// feed run, at that run's concrete shapes (a probe): an op that any run rejects, or that
// a run makes too large, is drawn again. The feeds of every run are then valid for the
// whole program by construction.
#include <algorithm>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "braze/ops.h"
#include "tools/fuzz/random_program_generator.h"

namespace braze {
namespace fuzz {
namespace internal {
namespace {

// The feed runs after the first (whose shapes are the inputs' as drawn).
constexpr int kRuns = 4;
// The most symbols (symbol 0, the batch, included).
constexpr int kMaxSymbols = 5;
// The most elements of one value at any run: a probe whose op makes more draws it again
// (two symbols of 37 broadcast against each other stay well inside it).
constexpr int64_t kMaxProbeElements = int64_t{1} << 18;
// An input's elements at any run stay under its first shape's or this, whichever is more.
constexpr int64_t kMaxInputElements = 20000;

// An input's elements in the run whose symbols' sizes are `run`.
int64_t Elements(const ProgramInput& in, const std::vector<int64_t>& run) {
  int64_t n = 1;
  for (size_t d = 0; d < in.shape.size(); ++d) {
    n *= in.symbols.empty() || in.symbols[d] < 0 ? in.shape[d] : run[in.symbols[d]];
  }
  return n;
}

}  // namespace

void Generator::DrawSymbols(ProgramInput& in) {
  if (options_.dynamic_dims_probability <= 0 || in.shape.empty()) return;
  DimsStream stream(this);
  if (!Chance(options_.dynamic_dims_probability)) return;
  if (first_sizes_.empty()) {  // symbol 0: the batch, whatever its first sizes
    first_sizes_.push_back(-1);
    followed_.push_back(-1);
  }
  // A dim's symbol: the batch's (dim 0, half the time), one of the same first size (so
  // ops that need the two equal can join them), or a new one.
  auto symbol_for = [&](size_t d) {
    if (d == 0 && Chance(0.5)) return 0;
    std::vector<int> same;
    for (size_t k = 1; k < first_sizes_.size(); ++k) {
      if (first_sizes_[k] == in.shape[d]) same.push_back(static_cast<int>(k));
    }
    if (!same.empty() && Chance(0.6)) return same[Uniform(static_cast<int>(same.size()))];
    if (static_cast<int>(first_sizes_.size()) >= kMaxSymbols) {
      return 1 + Uniform(static_cast<int>(first_sizes_.size()) - 1);
    }
    first_sizes_.push_back(in.shape[d]);
    followed_.push_back(-1);
    return static_cast<int>(first_sizes_.size()) - 1;
  };
  const int rank = static_cast<int>(in.shape.size());
  in.symbols.assign(rank, -1);
  bool any = false;
  for (int d = 0; d < rank; ++d) {
    if (Chance(0.5)) {
      in.symbols[d] = symbol_for(d);
      any = true;
    }
  }
  if (!any) {
    const int d = Uniform(rank);
    in.symbols[d] = symbol_for(d);
  }
  if (in.dynamic0) in.symbols[0] = 0;  // --dynamic's batch stays the batch
}

void Generator::DrawSymbolSizes() {
  DimsStream stream(this);
  for (ProgramInput& in : program_.inputs) {
    if (in.symbols.empty()) in.symbols.assign(in.shape.size(), -1);
    if (in.dynamic0) in.symbols[0] = 0;
  }
  const int n = static_cast<int>(first_sizes_.size());
  std::vector<std::vector<int64_t>> sizes(kRuns, std::vector<int64_t>(n, 1));
  // The batch takes the sizes a -1 dim 0 always had (s + 2, 1, s + 19, s + 37).
  int64_t batch = -1;
  for (const ProgramInput& in : program_.inputs) {
    if (in.dynamic0) {
      batch = in.shape[0];
      break;
    }
  }
  static const int64_t kSmall[] = {2, 3, 5, 7, 11, 13};
  static const int64_t kLarge[] = {16, 17, 19, 23, 29, 31, 37};
  for (int k = 0; k < n; ++k) {
    if (k == 0 && batch >= 0) {
      const int64_t b[kRuns] = {batch + 2, 1, batch + 19, batch + 37};
      for (int r = 0; r < kRuns; ++r) sizes[r][k] = b[r];
      continue;
    }
    if (k > 0 && Chance(0.3)) {
      followed_[k] = Uniform(k);  // its sizes once the others' are bounded
      continue;
    }
    // 1, a small prime, two of at least 16 (the symbolic kernels for sizes 1 to 15 and
    // for >= 16 each serve two runs), in an order of its own.
    std::vector<int64_t> v = {1, kSmall[Uniform(6)], kLarge[Uniform(7)], kLarge[Uniform(7)]};
    for (int r = kRuns - 1; r > 0; --r) std::swap(v[r], v[Uniform(r + 1)]);
    for (int r = 0; r < kRuns; ++r) sizes[r][k] = v[r];
  }
  // Each input within its bound: its largest symbol shrinks until it fits (a follower's
  // to 1, which keeps it a follower).
  auto bound = [&](bool followers_only) {
    for (int r = 0; r < kRuns; ++r) {
      for (const ProgramInput& in : program_.inputs) {
        const int64_t cap = std::max(NumElements(in.shape), kMaxInputElements);
        while (Elements(in, sizes[r]) > cap) {
          int worst = -1;
          for (int k : in.symbols) {
            if (k < 0 || sizes[r][k] <= 1 || (followers_only && followed_[k] < 0)) continue;
            if (worst < 0 || sizes[r][k] > sizes[r][worst]) worst = k;
          }
          if (worst < 0) break;
          sizes[r][worst] = followed_[worst] >= 0 || sizes[r][worst] <= 3 ? 1 : 3;
        }
      }
    }
  };
  bound(false);
  for (int k = 1; k < n; ++k) {
    const int leader = followed_[k];
    if (leader < 0) continue;
    // The leader's size or 1 in each run, each at least once.
    for (int r = 0; r < kRuns; ++r) sizes[r][k] = Chance(0.5) ? sizes[r][leader] : 1;
    const int one = Uniform(kRuns), same = (one + 1 + Uniform(kRuns - 1)) % kRuns;
    sizes[one][k] = 1;
    sizes[same][k] = sizes[same][leader];
  }
  bound(true);
  program_.symbol_sizes = sizes;
  // The probes: the inputs at each run's shapes (run 0: as drawn).
  for (int r = 0; r <= kRuns; ++r) {
    Probe probe;
    probe.graph = std::make_unique<Graph>();
    for (size_t i = 0; i < program_.inputs.size(); ++i) {
      const ProgramInput& in = program_.inputs[i];
      Shape shape = in.shape;
      for (size_t d = 0; d < shape.size() && r > 0; ++d) {
        if (in.symbols[d] >= 0) shape[d] = sizes[r - 1][in.symbols[d]];
      }
      probe.values.push_back(Placeholder(*probe.graph, in.dtype, shape, absl::StrCat("in", i)));
    }
    probes_.push_back(std::move(probe));
  }
}

void Generator::ProbeOp(const std::vector<int>& operands, const BuildFn& build,
                        const Tensor& declared) {
  for (size_t r = 0; r < probes_.size(); ++r) {
    Probe& probe = probes_[r];
    Graph& g = *probe.graph;
    const int nodes = g.num_nodes();
    std::vector<Tensor> args;
    for (int i : operands) args.push_back(probe.values[i]);
    Tensor t = build(g, args);
    std::string why;
    if (!g.status().ok()) {
      why = std::string(g.status().message());
    } else if (!g_.status().ok()) {
      why = "the scratch graph rejected it";
    } else if (t.dtype() != declared.dtype() || t.rank() != declared.rank()) {
      why = absl::StrCat("its type is ", TypeString(t.type()), ", declared ",
                         TypeString(declared.type()));
    } else if (NumElements(t.shape()) > kMaxProbeElements) {
      why = absl::StrCat("its value has ", NumElements(t.shape()), " elements");
    } else {
      for (int d = 0; d < t.rank(); ++d) {
        // A static dim of the scratch graph's is the same in every run.
        if (declared.shape()[d] >= 0 && declared.shape()[d] != t.shape()[d]) {
          why = absl::StrCat("dim ", d, " is ", t.shape()[d], ", declared ", declared.shape()[d]);
        }
      }
    }
    if (!why.empty()) {
      g.Truncate(nodes, absl::OkStatus());
      g_.RecordError(absl::InvalidArgumentError(
          absl::StrCat("not valid at feed run ", r, "'s shapes: ", why)));
      t = Tensor();
    }
    probe.values.push_back(t);
  }
}

}  // namespace internal
}  // namespace fuzz
}  // namespace braze
