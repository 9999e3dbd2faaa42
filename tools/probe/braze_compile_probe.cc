// braze-compile-probe: compile time of a large program by its size (docs/FUZZING_FAMILIES.md,
// "Large clusters"). The program is built under one JitScope, run once in a strict
// session (every kernel must compile; no disk cache) and once on the reference kernels,
// op by op; the tool prints its ops, the kernels compiled (clusters of at most
// --max_cluster_size ops), their compile time (SessionStats::compile_ms) and the worst
// relative error.
//
//   braze-compile-probe --program=chain_grad --n=60 [--shape=37x29]
//                       [--scheduler=SafeDefault] [--max_cluster_size=N]
//
// Programs (tools/probe/large_programs.h): chain (n elementwise ops, each read by the
// next two), wide (a pairwise sum of n Tanh terms and its row sums), chain_grad (the
// chain's sum and its gradient: the backward pass reads the forward values).
// BRAZE_FLAGS=--log_compiles prints each kernel's line (ops, compile ms, values stored);
// HL_DEBUG_CODEGEN=1 prints Halide's lowering steps (timestamp the lines to find the slow
// one). Exit status 0 when the results match the reference (relative error under 1e-4),
// 1 otherwise, 2 on a bad argument.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <limits>
#include <new>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "braze/jit_scope.h"
#include "braze/ops.h"
#include "braze/scheduler.h"
#include "braze/session.h"
#include "tools/probe/large_programs.h"

namespace braze {
namespace {

struct Flags {
  std::string program = "chain_grad";
  int n = 60;
  std::vector<int64_t> shape = {37, 29};
  Scheduler scheduler = Scheduler::kSafeDefault;
  int max_cluster_size = SessionOptions().max_cluster_size;
};

bool ParseFlags(int argc, char** argv, Flags* flags) {
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    const size_t eq = arg.find('=');
    const std::string name = arg.substr(0, eq),
                      value = eq == std::string::npos ? "" : arg.substr(eq + 1);
    bool ok = false;
    if (name == "--program") {
      flags->program = value;
      ok = value == "chain" || value == "wide" || value == "chain_grad";
    } else if (name == "--n") {
      ok = absl::SimpleAtoi(value, &flags->n) && flags->n > 0;
    } else if (name == "--shape") {
      flags->shape.clear();
      ok = !value.empty();
      // Each dim positive, and the f32 tensor's bytes within an int64 (a shape whose
      // element count wraps would be some other shape).
      int64_t elements = 1;
      for (absl::string_view d : absl::StrSplit(value, 'x')) {
        int64_t v = 0;
        ok &= absl::SimpleAtoi(d, &v) && v > 0 &&
              elements <= std::numeric_limits<int64_t>::max() / 4 / v;
        if (ok) elements *= v;
        flags->shape.push_back(v);
      }
    } else if (name == "--max_cluster_size") {
      ok = absl::SimpleAtoi(value, &flags->max_cluster_size) && flags->max_cluster_size > 0;
    } else if (name == "--scheduler") {
      const auto s = ParseScheduler(value);
      ok = s.has_value();
      if (ok) flags->scheduler = *s;
    }
    if (!ok) {
      std::fprintf(stderr,
                   "usage: braze-compile-probe [--program=chain|wide|chain_grad] [--n=N] "
                   "[--shape=AxB] [--scheduler=NAME] [--max_cluster_size=N]\nbad argument: %s\n",
                   arg.c_str());
      return false;
    }
  }
  return true;
}

// The program's fetches, built from `x` in the current scope.
std::vector<Tensor> Build(const Flags& flags, Tensor x) {
  if (flags.program == "chain") return {probe::ElementwiseChain(x, flags.n)};
  if (flags.program == "wide") return probe::WideSum(x, flags.n);
  auto fetches = probe::ChainAndGradient(x, flags.n);
  if (!fetches.ok()) {
    std::fprintf(stderr, "braze-compile-probe: %s\n", fetches.status().ToString().c_str());
    std::exit(2);
  }
  return *fetches;
}

// The input, or nullopt when this machine has no memory for it (said, naming --shape).
std::optional<HostTensor> MakeInput(const Flags& flags) {
  try {
    return HostTensor::RandomUniform(DType::kF32, flags.shape, 7, -1, 1);
  } catch (const std::bad_alloc&) {
    std::fprintf(stderr, "braze-compile-probe: --shape: no memory for an f32 input of %s\n",
                 ShapeString(flags.shape).c_str());
    return std::nullopt;
  }
}

int Run(const Flags& flags) {
  const std::optional<HostTensor> made = MakeInput(flags);
  if (!made) return 2;
  const HostTensor& input = *made;
  Graph compiled;
  std::vector<Tensor> fetches;
  Tensor x = Placeholder(compiled, DType::kF32, flags.shape, "x");
  {
    JitScope scope(compiled);
    fetches = Build(flags, x);
  }
  SessionOptions options;
  options.strict = true;
  options.scheduler = flags.scheduler;
  options.max_cluster_size = flags.max_cluster_size;
  options.device = "cpu";
  options.disk_cache = false;  // compiled here, never loaded
  Session session(compiled, options);
  const auto start = std::chrono::steady_clock::now();
  auto got = session.Run({{x, input}}, fetches);
  const double run_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (!got.ok()) {
    std::printf("braze-compile-probe: FAIL: %s\n", got.status().ToString().c_str());
    return 1;
  }
  SessionOptions reference_options;
  reference_options.device = "cpu";
  reference_options.reference_only = true;
  // The same graph, every op run by the reference kernels (reference_only ignores scopes).
  Session reference_session(compiled, reference_options);
  auto want = reference_session.Run({{x, input}}, fetches);
  if (!want.ok()) {
    std::printf("braze-compile-probe: FAIL: reference: %s\n", want.status().ToString().c_str());
    return 1;
  }
  double worst = 0;
  for (size_t f = 0; f < fetches.size(); ++f) {
    for (int64_t i = 0; i < (*want)[f].num_elements(); ++i) {
      const double w = (*want)[f].GetDouble(i), g = (*got)[f].GetDouble(i);
      worst = std::max(worst, std::abs(g - w) / std::max(1.0, std::abs(w)));
    }
  }
  const SessionStats stats = session.stats();
  const bool ok = worst < 1e-4 && stats.cluster_launches > 0;
  std::printf(
      "braze-compile-probe: %s: program=%s n=%d ops=%d scheduler=%s: %lld kernels compiled in "
      "%.1f s (first Run %.1f s), %lld cluster launches, %lld op launches; worst relative "
      "error %.2g\n",
      ok ? "PASS" : "FAIL", flags.program.c_str(), flags.n, compiled.num_nodes(),
      SchedulerName(flags.scheduler), static_cast<long long>(stats.compiles),
      stats.compile_ms / 1000, run_s, static_cast<long long>(stats.cluster_launches),
      static_cast<long long>(stats.single_op_launches + stats.reference_launches), worst);
  return ok ? 0 : 1;
}

}  // namespace
}  // namespace braze

int main(int argc, char** argv) {
  braze::Flags flags;
  if (!braze::ParseFlags(argc, argv, &flags)) return 2;
  return braze::Run(flags);
}
