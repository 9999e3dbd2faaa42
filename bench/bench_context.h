// The context every braze_bench run records in its JSON ("context", through
// benchmark::AddCustomContext): what ran (library versions, the CPU, the cores each
// library picked) and how (thread counts, waiting policies), so a number can be judged
// without the machine at hand.
//
// main.cc adds the process's own keys (CPU, Braze's pool, OpenMP's wait policy); each
// peer file registers a function for its library's keys with a static BRAZE_BENCH_CONTEXT
// (so its headers stay in that file), and main.cc calls them once, after its settings.
#ifndef BRAZE_BENCH_BENCH_CONTEXT_H_
#define BRAZE_BENCH_BENCH_CONTEXT_H_

#include <functional>
#include <string>

namespace braze::bench {

// Adds key: value to the run's context (a key added twice keeps its first value).
void AddContext(const std::string& key, const std::string& value);

// Registers a function that adds a library's keys; returns true (for a static).
bool RegisterContext(std::function<void()> add);

// Runs the registered functions, in registration order.
void AddRegisteredContext();

}  // namespace braze::bench

#define BRAZE_BENCH_CONTEXT_CAT2(a, b) a##b
#define BRAZE_BENCH_CONTEXT_CAT(a, b) BRAZE_BENCH_CONTEXT_CAT2(a, b)
// BRAZE_BENCH_CONTEXT([] { AddContext("lib_version", ...); });  at namespace scope.
#define BRAZE_BENCH_CONTEXT(fn)                                                                \
  static const bool BRAZE_BENCH_CONTEXT_CAT(braze_bench_context_, __LINE__) [[maybe_unused]] = \
      ::braze::bench::RegisterContext(fn)

#endif  // BRAZE_BENCH_BENCH_CONTEXT_H_
