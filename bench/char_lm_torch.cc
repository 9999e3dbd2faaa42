// char_lm_torch: examples/char_lm's model, data and recipe in libtorch, the peer issue 36
// compares the example's validation loss with (bench/peers_torch_gpt.h states the
// contract both follow).
//
//   build/bench/char_lm_torch [--steps=1000] [--batch=16] [--seed=1] [--eval_windows=64]
//                             [--log_every=50] [--eval_every=250] [--threads=0]
//                             [--data_dir=/usr/share/games/fortunes]
//
// Data: braze::LoadFortunes (the same ids as the example). Batches: std::mt19937_64
// seeded with --seed, one uniform start per row. Initialization and dropout: torch's
// generator, torch::manual_seed(--seed). Threads: torch::set_num_threads(the machine's
// cores), as braze_bench's peers (--threads overrides). Prints progress lines, then
// `step_ms=`, `val_loss=` (nats/char) and `bits_per_char=` as the last lines, as the
// example does. Exit status 1 on a data or torch error, 2 on a bad flag. Process
// settings: braze_bench's (process_settings.h: libgomp's spin, OpenBLAS's core and
// threads, malloc thresholds), so its steps take what BM_CharLmStep_torch measures.
#include <torch/torch.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <thread>

#include "braze/data.h"
#include "peers_torch_gpt.h"
#include "process_settings.h"

namespace {

using Clock = std::chrono::steady_clock;
namespace gpt = braze::bench::gpt;

constexpr int64_t kUntimedSteps = 3;  // first steps allocate; the example skips 3 too

struct Flags {
  int64_t steps = 1000;
  int64_t batch = 16;
  uint64_t seed = 1;
  int64_t eval_windows = 64;
  int64_t log_every = 50;
  int64_t eval_every = 250;
  int64_t threads = 0;
  std::string data_dir = braze::kFortunesDir;
};

double Seconds(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

void Usage() {
  const Flags d;
  std::fprintf(
      stderr,
      "usage: char_lm_torch [--steps=N] [--batch=N] [--seed=N] [--eval_windows=N]\n"
      "                     [--log_every=N] [--eval_every=N] [--threads=N] "
      "[--data_dir=DIR]\n"
      "  --steps        train steps (default %lld); the learning-rate schedule spans them\n"
      "  --batch        windows per step (default %lld)\n"
      "  --seed         batches, initialization and dropout (default %llu)\n"
      "  --eval_windows validation windows evaluated, at most (default %lld)\n"
      "  --log_every    steps between progress lines (default %lld)\n"
      "  --eval_every   steps between validation evaluations, 0: at the end only "
      "(default %lld)\n"
      "  --threads      torch's intra-op threads, 0: the machine's cores (default)\n"
      "  --data_dir     the fortunes directory (default %s)\n",
      static_cast<long long>(d.steps), static_cast<long long>(d.batch),
      static_cast<unsigned long long>(d.seed), static_cast<long long>(d.eval_windows),
      static_cast<long long>(d.log_every), static_cast<long long>(d.eval_every),
      d.data_dir.c_str());
}

// Parses a whole decimal integer >= min_value.
bool ParseInt(const std::string& text, int64_t min_value, int64_t* out) {
  if (text.empty()) return false;
  char* end = nullptr;
  errno = 0;
  const long long v = std::strtoll(text.c_str(), &end, 10);
  if (errno != 0 || *end != '\0' || v < min_value) return false;
  *out = v;
  return true;
}

bool ParseFlags(int argc, char** argv, Flags* f) {
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    const size_t eq = arg.find('=');
    const std::string name = arg.substr(0, eq);
    const std::string value = eq == std::string::npos ? "" : arg.substr(eq + 1);
    int64_t seed = 0;
    bool ok = eq != std::string::npos;
    if (!ok) {
    } else if (name == "--steps") {
      ok = ParseInt(value, 1, &f->steps);
    } else if (name == "--batch") {
      ok = ParseInt(value, 1, &f->batch);
    } else if (name == "--seed") {
      ok = ParseInt(value, 0, &seed);
      f->seed = static_cast<uint64_t>(seed);
    } else if (name == "--eval_windows") {
      ok = ParseInt(value, 1, &f->eval_windows);
    } else if (name == "--log_every") {
      ok = ParseInt(value, 1, &f->log_every);
    } else if (name == "--eval_every") {
      ok = ParseInt(value, 0, &f->eval_every);
    } else if (name == "--threads") {
      ok = ParseInt(value, 0, &f->threads);
    } else if (name == "--data_dir") {
      ok = !value.empty();
      f->data_dir = value;
    } else {
      ok = false;
    }
    if (!ok) {
      std::fprintf(stderr, "char_lm_torch: bad flag '%s'\n", arg.c_str());
      return false;
    }
  }
  return true;
}

int Run(const Flags& flags) {
  const auto t0 = Clock::now();
  absl::StatusOr<braze::TextCorpus> corpus = braze::LoadFortunes(flags.data_dir);
  if (!corpus.ok()) {
    std::fprintf(stderr, "char_lm_torch: %s\n", std::string(corpus.status().message()).c_str());
    return 1;
  }
  gpt::Config config;
  config.vocab = static_cast<int64_t>(corpus->vocab.size());
  const int64_t t = config.context;
  if (static_cast<int64_t>(corpus->train.size()) < t + 1 ||
      static_cast<int64_t>(corpus->validation.size()) < t + 1) {
    std::fprintf(stderr, "char_lm_torch: the corpus in %s is shorter than one window\n",
                 flags.data_dir.c_str());
    return 1;
  }
  const int threads = flags.threads > 0
                          ? static_cast<int>(flags.threads)
                          : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  torch::set_num_threads(threads);
  torch::manual_seed(flags.seed);
  gpt::Gpt model(config);
  model->Initialize();
  model->train();
  gpt::Recipe recipe;
  recipe.total_steps = flags.steps;
  std::unique_ptr<torch::optim::AdamW> opt = gpt::MakeAdamW(model->parameters(), recipe);
  int64_t num_params = 0;
  for (const torch::Tensor& p : model->parameters()) num_params += p.numel();
  std::printf(
      "char_lm_torch: %zu train and %zu validation characters, vocabulary %lld, from %s\n"
      "char_lm_torch: libtorch %s, %d intra-op threads, %lld parameters, %lld steps of batch "
      "%lld\n",
      corpus->train.size(), corpus->validation.size(), static_cast<long long>(config.vocab),
      flags.data_dir.c_str(), TORCH_VERSION, torch::get_num_threads(),
      static_cast<long long>(num_params), static_cast<long long>(flags.steps),
      static_cast<long long>(flags.batch));
  std::fflush(stdout);

  std::mt19937_64 rng(flags.seed);
  torch::Tensor inputs = torch::empty({flags.batch, t}, torch::kInt64);
  torch::Tensor targets = torch::empty({flags.batch, t}, torch::kInt64);
  double timed_seconds = 0, loss_sum = 0, val_loss = NAN;
  int64_t timed_steps = 0, logged = 0;
  const int64_t untimed = std::min(kUntimedSteps, flags.steps - 1);
  for (int64_t step = 1; step <= flags.steps; ++step) {
    gpt::SampleBatch(corpus->train, t, rng, &inputs, &targets);
    const auto start = Clock::now();
    loss_sum += gpt::TrainStep(model, *opt, recipe, step, inputs, targets);
    if (step > untimed) {
      timed_seconds += Seconds(start);
      ++timed_steps;
    }
    ++logged;
    const bool eval = step == flags.steps || (flags.eval_every > 0 && step % flags.eval_every == 0);
    if (eval) val_loss = gpt::Evaluate(model, corpus->validation, flags.eval_windows);
    if (eval || step % flags.log_every == 0) {
      std::printf("step %lld: lr %.3g, train loss %.4f", static_cast<long long>(step),
                  gpt::LearningRate(recipe, step), loss_sum / logged);
      if (eval) std::printf(", val loss %.4f (%.3f bits/char)", val_loss, val_loss / std::log(2.0));
      std::printf(", %.1f ms/step (%.1f s)\n",
                  1e3 * timed_seconds / std::max<int64_t>(timed_steps, 1), Seconds(t0));
      std::fflush(stdout);
      loss_sum = 0;
      logged = 0;
    }
  }
  std::printf("char_lm_torch: total %.1f s\n", Seconds(t0));
  std::printf("step_ms=%.3f\n", 1e3 * timed_seconds / std::max<int64_t>(timed_steps, 1));
  std::printf("val_loss=%.4f\n", val_loss);
  std::printf("bits_per_char=%.4f\n", val_loss / std::log(2.0));
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  braze::bench::SettleProcess(argv);
  braze::bench::PinMallocThresholds();
  braze::bench::SetOpenBlasThreads();
  Flags flags;
  if (!ParseFlags(argc, argv, &flags)) {
    Usage();
    return 2;
  }
  try {
    return Run(flags);
  } catch (const c10::Error& e) {
    std::fprintf(stderr, "char_lm_torch: libtorch: %s\n", e.what_without_backtrace());
    return 1;
  }
}
