// First-step latency under each compile policy (SessionOptions::compile_policy): the
// wall time of a new session's first Run of the tutorial's train step (softmax
// regression on a batch of 100: MatMul, softmax cross entropy, gradients, SGD updates,
// all under one JitScope), with the process-wide compile cache emptied before each
// iteration so that every iteration compiles from scratch. eager blocks on the
// compile; lazy and async run the first step op by op on the reference kernels.
#include <benchmark/benchmark.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "braze/braze.h"
#include "compile/compile_cache.h"

namespace braze {
namespace {

// The tutorial's train step (softmax regression, batch 100) under one JitScope.
struct TutorialStep {
  Graph g;
  Tensor x = Placeholder(g, DType::kF32, {100, 784}, "x");
  Tensor labels = Placeholder(g, DType::kI32, {100}, "labels");
  Tensor w = Variable(g, HostTensor::RandomNormal(DType::kF32, {784, 10}, 1, 0, 0.01), "w");
  Tensor b = Variable(g, HostTensor(DType::kF32, {10}), "b");
  Tensor loss;
  std::vector<Tensor> train;
  absl::Status status;
  TutorialStep() {
    JitScope scope(g);
    loss = Mean(SoftmaxCrossEntropyWithLogits(MatMul(x, w) + b, OneHot(labels, 10)));
    auto grads = Gradients({loss}, {w, b});
    auto updates = grads.ok()
                       ? ApplyGradients(Optimizer::Sgd(0.5), {{(*grads)[0], w}, {(*grads)[1], b}})
                       : grads.status();
    if (updates.ok()) {
      train = *updates;
    } else {
      status = updates.status();
    }
  }
  Feeds feeds() const {
    std::vector<int32_t> label_values(100);
    for (int i = 0; i < 100; ++i) label_values[i] = i % 10;
    return {{x, HostTensor::RandomUniform(DType::kF32, {100, 784}, 2, 0, 1)},
            {labels, HostTensor::From(label_values, {100})}};
  }
};

void BM_FirstStep(benchmark::State& state) {
  const auto policy = static_cast<CompilePolicy>(state.range(0));
  int64_t compiled_first = 0, iterations = 0;
  for (auto _ : state) {
    state.PauseTiming();
    CompileCache::Global().Clear();
    TutorialStep m;
    if (!m.status.ok()) {
      state.SkipWithError(m.status.ToString().c_str());
      return;
    }
    SessionOptions options;
    options.compile_policy = policy;
    options.disk_cache = false;  // every iteration compiles (BM_DiskReload loads)
    auto session = std::make_unique<Session>(m.g, options);
    const Feeds feeds = m.feeds();
    state.ResumeTiming();
    auto out = session->Run(feeds, {m.loss}, m.train);
    state.PauseTiming();
    if (!out.ok()) {
      state.SkipWithError(out.status().ToString().c_str());
      return;
    }
    compiled_first += session->stats().cluster_launches > 0;
    ++iterations;
    session.reset();  // waits for an async compile still under way
    state.ResumeTiming();
  }
  // 1 under eager (the first step ran compiled), 0 under lazy and async.
  state.counters["first_step_compiled"] =
      static_cast<double>(compiled_first) / static_cast<double>(std::max<int64_t>(iterations, 1));
}
BENCHMARK(BM_FirstStep)
    ->ArgName("policy")
    ->Arg(static_cast<int>(CompilePolicy::kEager))
    ->Arg(static_cast<int>(CompilePolicy::kLazy))
    ->Arg(static_cast<int>(CompilePolicy::kAsync))
    ->Iterations(3)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

// The same first step in a "second process": the in-memory compile cache emptied, the
// kernels in the disk cache (a directory of this benchmark's own, filled once before).
// Compare BM_FirstStep/policy:0, which compiles them.
void BM_DiskReload(benchmark::State& state) {
  const std::string dir = "/tmp/braze_bench_disk_cache_" + std::to_string(getpid());
  const char* before = std::getenv("BRAZE_CACHE_DIR");
  const std::string saved = before != nullptr ? before : "";
  setenv("BRAZE_CACHE_DIR", dir.c_str(), 1);
  int64_t loaded = 0, iterations = 0;
  {
    // From scratch: kernels another benchmark left in memory would be found there and
    // never stored.
    CompileCache::Global().Clear();
    TutorialStep warm;
    Session fill(warm.g);
    if (!fill.Run(warm.feeds(), {warm.loss}, warm.train).ok()) state.SkipWithError("fill failed");
  }
  for (auto _ : state) {
    state.PauseTiming();
    CompileCache::Global().Clear();
    TutorialStep m;
    auto session = std::make_unique<Session>(m.g);
    const Feeds feeds = m.feeds();
    state.ResumeTiming();
    auto out = session->Run(feeds, {m.loss}, m.train);
    state.PauseTiming();
    if (!out.ok()) {
      state.SkipWithError(out.status().ToString().c_str());
      break;
    }
    loaded += session->stats().disk_cache_hits;
    ++iterations;
    session.reset();
    state.ResumeTiming();
  }
  state.counters["kernels_loaded"] =
      static_cast<double>(loaded) / static_cast<double>(std::max<int64_t>(iterations, 1));
  if (before != nullptr) {
    setenv("BRAZE_CACHE_DIR", saved.c_str(), 1);
  } else {
    unsetenv("BRAZE_CACHE_DIR");
  }
  std::filesystem::remove_all(dir);
}
BENCHMARK(BM_DiskReload)->Iterations(10)->Unit(benchmark::kMillisecond)->UseRealTime();

// Warm dispatch: a Run (and a RunInto, reusing its outputs) of a tiny fused graph whose
// kernel is compiled and planned: what a step costs beyond its kernels (feeds checked,
// plan found, kernel launched, outputs handed back). arg 0: Run, 1: RunInto; also
// through a braze::Function call (arg 2).
void BM_WarmDispatch(benchmark::State& state) {
  const int mode = static_cast<int>(state.range(0));
  Graph g;
  Tensor x = Placeholder(g, DType::kF32, {8}, "x");
  Tensor y;
  {
    JitScope scope(g);
    y = Tanh(x * 2.0 + 1.0);
  }
  FunctionOptions fo;
  fo.jit_compile = true;
  Function f(
      [](Graph&, const std::vector<Tensor>& a) -> std::vector<Tensor> {
        return {Tanh(a[0] * 2.0 + 1.0)};
      },
      fo);
  Session session(g);
  const HostTensor value = HostTensor::RandomUniform(DType::kF32, {8}, 3);
  const Feeds feeds = {{x, value}};
  const std::vector<HostTensor> args = {value};
  std::vector<HostTensor> outputs;
  auto step = [&]() -> absl::Status {
    if (mode == 0) return session.Run(feeds, {y}).status();
    if (mode == 1) return session.RunInto(feeds, {y}, &outputs);
    return f(args).status();
  };
  for (int i = 0; i < 3; ++i) {  // compile, plan, allocate: untimed
    if (absl::Status s = step(); !s.ok()) {
      state.SkipWithError(s.ToString().c_str());
      return;
    }
  }
  for (auto _ : state) {
    absl::Status s = step();
    if (!s.ok()) {
      state.SkipWithError(s.ToString().c_str());
      return;
    }
  }
}
BENCHMARK(BM_WarmDispatch)
    ->ArgName("run_runinto_function")
    ->Arg(0)
    ->Arg(1)
    ->Arg(2)
    ->Unit(benchmark::kMicrosecond)
    ->MinTime(0.5);

// After the recompile guard trips (SessionOptions::max_signatures_per_cluster), what a
// new signature costs: a cluster (elementwise ops on x[-1, 1024], then a flatten, which
// symbolic shapes refuse, so every row count is a signature of its own) fed 64 row
// counts in turn, the guard at 2. Its refused signatures run op by op: on compiled
// single-op kernels (mode 0, symbolic: one kernel per op serves every row count), or on
// the reference kernels (mode 1, SessionOptions::reference_only: the path the guard
// took before single-op kernels, op by op on plain loops). Every output is checked
// against the reference before timing.
void BM_GuardedNewSignatures(benchmark::State& state) {
  const bool reference = state.range(0) == 1;
  Graph g;
  Tensor x = Placeholder(g, DType::kF32, {-1, 1024}, "x");
  Tensor y;
  {
    JitScope scope(g);
    y = Reshape(Tanh(x * 1.5 + 0.25) * x + Exp(x * -0.5), {-1});
  }
  SessionOptions options;
  options.max_signatures_per_cluster = 2;
  options.disk_cache = false;
  options.reference_only = reference;
  Session session(g, options);
  SessionOptions ref_options;
  ref_options.reference_only = true;
  Session oracle(g, ref_options);
  std::vector<Feeds> feeds;
  for (int64_t rows = 200; rows < 264; ++rows) {
    feeds.push_back({{x, HostTensor::RandomUniform(DType::kF32, {rows, 1024}, rows, -2, 2)}});
  }
  // Untimed: trip the guard, compile the single-op kernels, check every size.
  for (int pass = 0; pass < 2; ++pass) {
    for (const Feeds& f : feeds) {
      auto got = session.Run(f, {y});
      auto want = oracle.Run(f, {y});
      if (!got.ok() || !want.ok()) {
        state.SkipWithError((got.ok() ? want.status() : got.status()).ToString().c_str());
        return;
      }
      for (int64_t i = 0; i < want->at(0).num_elements(); ++i) {
        const double a = got->at(0).GetDouble(i), b = want->at(0).GetDouble(i);
        if (std::abs(a - b) > 1e-5 + 1e-5 * std::abs(b)) {
          state.SkipWithError("output differs from the reference kernels");
          return;
        }
      }
    }
  }
  int64_t rows = 0;
  size_t next = 0;
  for (auto _ : state) {
    auto out = session.Run(feeds[next], {y});
    if (!out.ok()) {
      state.SkipWithError(out.status().ToString().c_str());
      return;
    }
    rows += feeds[next][0].second.shape()[0];
    next = (next + 1) % feeds.size();
  }
  state.SetItemsProcessed(rows * 1024);
  const SessionStats s = session.stats();
  state.counters["cluster_launches"] = static_cast<double>(s.cluster_launches);
  state.counters["single_op_launches"] = static_cast<double>(s.single_op_launches);
  state.counters["reference_launches"] = static_cast<double>(s.reference_launches);
}
BENCHMARK(BM_GuardedNewSignatures)
    ->ArgName("reference")
    ->Arg(0)
    ->Arg(1)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

}  // namespace
}  // namespace braze
