// braze-soak: a long run with resident memory measured. A small MLP trains (fused under
// a JitScope: forward, gradients and SGD updates) on random batches whose size cycles
// through several values; every --churn_every steps the session is destroyed and a new
// one made, and every --rebuild_every steps the model is rebuilt with another hidden
// width, so kernels keep being compiled, found in the cache and evicted from it. The
// resident set (/proc/self/statm), the compile cache and the JIT buffer cache are
// sampled as it goes; after the warm-up (one full cycle of widths), RSS must stay within
// --max_growth_mib of its level then.
//
//   braze-soak --steps=20000
//   braze-soak --steps=1200 --churn_every=100 --rebuild_every=300   (the ctest slice)
//
// Flags: --steps=N, --churn_every=N, --rebuild_every=N, --sample_every=N,
// --cache_capacity=N (the compile cache's, default 32: a model's 20 kernels fit, three models' do
// not),
// --max_growth_mib=M (default 24). Exit status 1 when RSS grew past the limit, a cache
// outgrew its bound or a step failed. The last line reads "braze-soak: PASS ..." or
// "braze-soak: FAIL ...".
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "braze/gradients.h"
#include "braze/jit_scope.h"
#include "braze/ops.h"
#include "braze/session.h"
#include "compile/compile_cache.h"
#include "device/jit_memory.h"

namespace braze {
namespace {

struct Flags {
  int64_t steps = 20000;
  int64_t churn_every = 500;
  int64_t rebuild_every = 2000;
  int64_t sample_every = 1000;
  int64_t cache_capacity = 32;
  double max_growth_mib = 24;
};

bool ParseFlags(int argc, char** argv, Flags* flags) {
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    const size_t eq = arg.find('=');
    const std::string name = arg.substr(0, eq),
                      value = eq == std::string::npos ? "" : arg.substr(eq + 1);
    int64_t* target = name == "--steps"            ? &flags->steps
                      : name == "--churn_every"    ? &flags->churn_every
                      : name == "--rebuild_every"  ? &flags->rebuild_every
                      : name == "--sample_every"   ? &flags->sample_every
                      : name == "--cache_capacity" ? &flags->cache_capacity
                                                   : nullptr;
    bool ok = false;
    if (target != nullptr) {
      ok = absl::SimpleAtoi(value, target) && *target > 0;
    } else if (name == "--max_growth_mib") {
      ok = absl::SimpleAtod(value, &flags->max_growth_mib) &&
           std::isfinite(flags->max_growth_mib) && flags->max_growth_mib > 0;
    }
    if (!ok) {
      std::fprintf(stderr,
                   "usage: braze-soak [--steps=N] [--churn_every=N] [--rebuild_every=N] "
                   "[--sample_every=N] [--cache_capacity=N] [--max_growth_mib=M]\n"
                   "bad argument: %s\n",
                   arg.c_str());
      return false;
    }
  }
  return true;
}

double RssMib() {
  long pages = 0, resident = 0;
  FILE* f = std::fopen("/proc/self/statm", "r");
  if (f == nullptr) return 0;
  if (std::fscanf(f, "%ld %ld", &pages, &resident) != 2) resident = 0;
  std::fclose(f);
  return static_cast<double>(resident) * static_cast<double>(sysconf(_SC_PAGESIZE)) / (1 << 20);
}

constexpr int kInputs = 48, kClasses = 10;
constexpr int kWidths[] = {32, 24, 40};
constexpr int kBatches[] = {16, 7, 33, 1};

// A two-layer MLP with softmax cross entropy and its SGD step, all under one scope.
struct Model {
  Graph g;
  Tensor x, labels, loss;
  std::vector<Tensor> updates;
  explicit Model(int width) {
    x = Placeholder(g, DType::kF32, {-1, kInputs}, "x");
    labels = Placeholder(g, DType::kF32, {-1, kClasses}, "labels");
    Tensor w1 =
        Variable(g, HostTensor::RandomUniform(DType::kF32, {kInputs, width}, 1, -0.2, 0.2), "w1");
    Tensor b1 = Variable(g, HostTensor::RandomUniform(DType::kF32, {width}, 2, -0.1, 0.1), "b1");
    Tensor w2 =
        Variable(g, HostTensor::RandomUniform(DType::kF32, {width, kClasses}, 3, -0.2, 0.2), "w2");
    Tensor b2 = Variable(g, HostTensor::RandomUniform(DType::kF32, {kClasses}, 4, -0.1, 0.1), "b2");
    JitScope scope(g);
    Tensor hidden = Dense(x, w1, b1, Activation::kRelu);
    loss = Mean(SoftmaxCrossEntropyWithLogits(Dense(hidden, w2, b2), labels));
    const std::vector<Tensor> params = {w1, b1, w2, b2};
    auto grads = Gradients({loss}, params);
    if (!grads.ok()) {
      std::fprintf(stderr, "braze-soak: %s\n", grads.status().ToString().c_str());
      std::exit(2);
    }
    for (size_t i = 0; i < params.size(); ++i)
      updates.push_back(AssignSub(params[i], (*grads)[i] * 0.05));
  }
};

Feeds Batch(const Model& m, int rows, uint64_t seed) {
  HostTensor x = HostTensor::RandomUniform(DType::kF32, {rows, kInputs}, seed, -1, 1);
  HostTensor labels(DType::kF32, {rows, kClasses});
  for (int r = 0; r < rows; ++r)
    labels.SetDouble(r * kClasses + static_cast<int>((seed + r) % kClasses), 1);
  return {{m.x, std::move(x)}, {m.labels, std::move(labels)}};
}

int Run(const Flags& flags) {
  CompileCache::Global().set_capacity(static_cast<size_t>(flags.cache_capacity));
  const int64_t warmup = std::min(flags.steps / 2, flags.rebuild_every * 3);
  std::unique_ptr<Model> model;
  std::unique_ptr<Session> session;
  double rss_at_warmup = 0, rss_max = 0;
  size_t cache_max = 0;
  int64_t sessions = 0, models = 0;
  const auto start = std::chrono::steady_clock::now();
  std::printf("%8s %10s %9s %12s %13s %8s\n", "step", "RSS MiB", "kernels", "buffers MiB",
              "sessions", "s");
  for (int64_t step = 0; step < flags.steps; ++step) {
    if (step % flags.rebuild_every == 0) {
      session.reset();
      model = std::make_unique<Model>(kWidths[models++ % 3]);
    }
    if (step % flags.churn_every == 0) {
      session.reset();
      session = std::make_unique<Session>(model->g);
      ++sessions;
    }
    const int rows = kBatches[step % 4];
    auto out = session->Run(Batch(*model, rows, static_cast<uint64_t>(step)), {model->loss},
                            model->updates);
    if (!out.ok()) {
      std::printf("braze-soak: FAIL: step %lld: %s\n", static_cast<long long>(step),
                  out.status().ToString().c_str());
      return 1;
    }
    const size_t kernels = CompileCache::Global().size();
    cache_max = std::max(cache_max, kernels);
    const double rss = RssMib();
    if (step == warmup) rss_at_warmup = rss;
    if (step >= warmup) rss_max = std::max(rss_max, rss);
    if (step % flags.sample_every == 0 || step + 1 == flags.steps) {
      const double secs =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      std::printf("%8lld %10.1f %9zu %12.1f %13lld %8.1f\n", static_cast<long long>(step), rss,
                  kernels, device::GetJitMemoryStats().cached_bytes / double(1 << 20),
                  static_cast<long long>(sessions), secs);
      std::fflush(stdout);
    }
  }
  const double growth = rss_max - rss_at_warmup;
  const bool cache_ok = cache_max <= static_cast<size_t>(flags.cache_capacity);
  const bool ok = growth <= flags.max_growth_mib && cache_ok;
  std::printf(
      "braze-soak: %s: %lld steps, %lld sessions, %lld models; RSS %.1f MiB after warm-up "
      "(step %lld), at most %.1f MiB after it (+%.1f MiB, limit %.0f); compile cache at most "
      "%zu kernels (capacity %lld)\n",
      ok ? "PASS" : "FAIL", static_cast<long long>(flags.steps), static_cast<long long>(sessions),
      static_cast<long long>(models), rss_at_warmup, static_cast<long long>(warmup), rss_max,
      growth, flags.max_growth_mib, cache_max, static_cast<long long>(flags.cache_capacity));
  return ok ? 0 : 1;
}

}  // namespace
}  // namespace braze

int main(int argc, char** argv) {
  braze::Flags flags;
  if (!braze::ParseFlags(argc, argv, &flags)) return 2;
  return braze::Run(flags);
}
