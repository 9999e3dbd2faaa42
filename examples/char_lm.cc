// A character-level GPT (lib/gpt.h: 4 layers, 4 heads, width 256, context 128, dropout
// 0.1) trained on the text of Debian's fortunes package (braze::LoadFortunes: a fixed
// 90/10 split by fortune), as docs/CHAR_LM.md's recipe says, so that the libtorch peer
// (bench/) trains the same model on the same ids.
//
//   train: batch 16 windows of T + 1 ids at uniform random starts (std::mt19937_64 of
//     --seed), inputs ids [0, T), targets [1, T]; loss = mean softmax cross entropy
//   evaluate (dropout off): the validation stream cut into consecutive windows of T + 1
//     ids starting at w * T (at most 64), mean cross entropy in nats and bits per char
//   generate: --sample_chars characters after --prompt, sampled at --temperature from
//     a graph whose token placeholder is [1, -1]: one compiled kernel set serves every
//     length from the prompt's to T (symbolic shapes), the window sliding after that
//
// Flags (`--help`): --jit=off|scope|auto, --api=session|function, --device=...,
// --attention=fused|unfused, --steps, --batch, --seed, --eval_every, --max_val_loss, ...
// --checkpoint_dir (with --checkpoint_every, --keep_checkpoints) saves checkpoints and
// resumes from the newest: bit-identical losses to a run that never stopped (CPU).
// The last lines printed are `step_ms=<v>`, `val_loss=<nats>` and `bits_per_char=<v>`.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <optional>
#include <random>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "braze/braze.h"
#include "lib/char_lm_runner.h"
#include "lib/common_flags.h"
#include "lib/gpt.h"
#include "lib/run_checkpoints.h"

namespace braze_examples {
namespace {

using braze::HostTensor;
using Clock = std::chrono::steady_clock;

constexpr int64_t kWarmupSteps = 3;  // untimed steps after the up-front compile

double Seconds(Clock::time_point since) {
  return std::chrono::duration<double>(Clock::now() - since).count();
}

// The common flags (lib/common_flags.h: --jit, --api, --device, --steps, --batch, --seed,
// checkpoints) and char_lm's own.
struct Flags : CommonFlags {
  Flags() {
    steps = 1000;
    batch = 16;
    checkpoint_every = 250;
  }
  AttentionImpl attention = AttentionImpl::kUnfused;
  int64_t eval_every = 250;
  int64_t eval_windows = 64;
  double max_val_loss = 0;  // 0: no ceiling
  std::string prompt = "Q:\tWhat do you call ";
  int64_t sample_chars = 200;
  double temperature = 0.8;
  std::string data_dir = braze::kFortunesDir;

  CharLmOptions run() const { return {jit, api, device, attention, precision}; }
};

void Usage(FILE* out, const Flags& d) {
  std::fprintf(
      out,
      "char_lm: a character-level GPT on the fortunes text (docs/CHAR_LM.md)\n"
      "usage: char_lm [--jit=off|scope|auto] [--api=session|function] [--device=NAME]\n"
      "       [--attention=fused|unfused] [--steps=N] [--batch=N] [--seed=N] [--eval_every=N]\n"
      "       [--eval_windows=N] [--max_val_loss=X] [--prompt=TEXT] [--sample_chars=N]\n"
      "       [--temperature=X] [--data_dir=DIR] [--checkpoint_dir=DIR]\n"
      "       [--checkpoint_every=N] [--keep_checkpoints=N] [--print_losses]\n"
      "       [--precision=f32|bf16|f16]\n"
      "  --jit          off: every op its own compiled kernel; scope: the model, loss,\n"
      "                 gradients and updates under JitScope (fused; default); auto:\n"
      "                 session-level auto-clustering\n"
      "  --api          session (default) or function: the train step, evaluation and\n"
      "                 generation as braze::Functions capturing the model's variables\n"
      "  --device       auto (default), cpu, cuda[:N], opencl, jit:cpu\n"
      "  --attention    unfused (default): BatchMatMul, causal mask, softmax, dropout,\n"
      "                 BatchMatMul as ops; fused: one Attention op (and its gradient ops)\n"
      "                 whose kernels never hold the [T, T] scores\n"
      "  --steps        train steps (default %lld); the learning-rate schedule spans them\n"
      "  --batch        sequences per step (default %lld)\n"
      "  --seed         batch sampling, initialization, dropout and sampling (default %llu)\n"
      "  --eval_every   steps between validation evaluations (default %lld)\n"
      "  --eval_windows validation windows evaluated, at most (default %lld)\n"
      "  --max_val_loss exit with status 1 if the final validation loss is higher\n"
      "  --prompt       the text generation starts from (its characters must occur in the\n"
      "                 corpus)\n"
      "  --sample_chars characters generated (default %lld); --temperature (default %g)\n"
      "  --precision    f32 (default), or the bf16 / f16 mixed-precision policy (16-bit\n"
      "                 matmuls, f32 masters, softmax, LayerNorm statistics and loss; f16\n"
      "                 with dynamic loss scaling; docs/MIXED_PRECISION.md)\n",
      static_cast<long long>(d.steps), static_cast<long long>(d.batch),
      static_cast<unsigned long long>(d.seed), static_cast<long long>(d.eval_every),
      static_cast<long long>(d.eval_windows), static_cast<long long>(d.sample_chars),
      d.temperature);
  std::fputs(CheckpointFlagsUsage(d).c_str(), out);
  std::fputs("The last lines are step_ms=<v>, val_loss=<nats> and bits_per_char=<v>.\n", out);
}

// char_lm's own flags; then the common ones.
FlagMatch ParseCharLmFlag(const std::string& arg, const std::string& value, Flags* f) {
  bool ok = true;
  if (arg == "--attention") {
    ok = value == "fused" || value == "unfused";
    f->attention = value == "fused" ? AttentionImpl::kFused : AttentionImpl::kUnfused;
  } else if (arg == "--eval_every") {
    ok = absl::SimpleAtoi(value, &f->eval_every) && f->eval_every >= 1;
  } else if (arg == "--eval_windows") {
    ok = absl::SimpleAtoi(value, &f->eval_windows) && f->eval_windows >= 1;
  } else if (arg == "--max_val_loss") {
    ok = ParseFiniteDouble(value, &f->max_val_loss) && f->max_val_loss >= 0;
  } else if (arg == "--prompt") {
    f->prompt = value;
    ok = !value.empty();
  } else if (arg == "--sample_chars") {
    ok = absl::SimpleAtoi(value, &f->sample_chars) && f->sample_chars >= 0;
  } else if (arg == "--temperature") {
    ok = ParseFiniteDouble(value, &f->temperature) && f->temperature > 0;
  } else if (arg == "--data_dir") {
    f->data_dir = value;
  } else {
    return ParseCommonFlag(arg, value, f);
  }
  return ok ? FlagMatch::kOk : FlagMatch::kBadValue;
}

absl::StatusOr<Flags> ParseFlags(int argc, char** argv) {
  Flags f;
  BRAZE_RETURN_IF_ERROR(ParseCommandLine(
      argc, argv, {"--print_losses"}, [&f] { Usage(stdout, f); },
      [&f](const std::string& arg, const std::string& value) {
        return ParseCharLmFlag(arg, value, &f);
      }));
  return f;
}

// What a checkpoint records of the data (RunCheckpoints): its step is the data position
// (the batches sampled so far), and the learning-rate schedule spans --steps.
braze::StringMap DataMetadata(const Flags& flags) {
  return {{"example", "char_lm"},
          {"data.seed", absl::StrCat(flags.seed)},
          {"data.batch", absl::StrCat(flags.batch)},
          {"train.steps", absl::StrCat(flags.steps)}};
}

// Samples `count` characters after `prompt` (ids), at `temperature`, from the model's
// last-position logits; the context is the last T ids.
absl::StatusOr<std::vector<int32_t>> Generate(CharLmRunner& runner, std::vector<int32_t> ids,
                                              int64_t count, int64_t context, double temperature,
                                              uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> uniform(0.0, 1.0);
  const size_t prompt = ids.size();
  for (int64_t i = 0; i < count; ++i) {
    const int64_t len = std::min<int64_t>(context, static_cast<int64_t>(ids.size()));
    HostTensor tokens(braze::DType::kI32, {1, len});
    std::copy(ids.end() - len, ids.end(), tokens.data<int32_t>());
    BRAZE_ASSIGN_OR_RETURN(HostTensor logits, runner.Logits(tokens));  // [len, V]
    const int64_t vocab = logits.dim(1);
    const float* last = logits.data<float>() + (len - 1) * vocab;
    const float top = *std::max_element(last, last + vocab);
    std::vector<double> p(vocab);
    double total = 0;
    for (int64_t v = 0; v < vocab; ++v) total += p[v] = std::exp((last[v] - top) / temperature);
    double r = uniform(rng) * total;
    int32_t pick = static_cast<int32_t>(vocab - 1);
    for (int64_t v = 0; v < vocab; ++v) {
      if ((r -= p[v]) < 0) {
        pick = static_cast<int32_t>(v);
        break;
      }
    }
    ids.push_back(pick);
  }
  return std::vector<int32_t>(ids.begin() + prompt, ids.end());
}

absl::Status Run(const Flags& flags) {
  const auto t0 = Clock::now();
  BRAZE_ASSIGN_OR_RETURN(braze::TextCorpus corpus, braze::LoadFortunes(flags.data_dir));
  GptConfig config;
  config.vocab = static_cast<int64_t>(corpus.vocab.size());
  config.seed = flags.seed;
  const int64_t T = config.context;
  if (static_cast<int64_t>(corpus.train.size()) < T + 1 ||
      static_cast<int64_t>(corpus.validation.size()) < T + 1) {
    return absl::FailedPreconditionError(absl::StrCat(
        "the corpus in ", flags.data_dir, " is shorter than one window of ", T + 1, " ids"));
  }
  // A step's sequences are windows of the training text: a batch of more than it has is
  // a mistyped flag (and, large enough, more memory than the machine has).
  const int64_t windows = static_cast<int64_t>(corpus.train.size()) - T;
  if (flags.batch > windows) {
    return absl::InvalidArgumentError(absl::StrCat("--batch ", flags.batch, " exceeds the ",
                                                   windows, " windows of ", T + 1,
                                                   " characters in the training text"));
  }
  std::vector<int32_t> prompt;
  for (char ch : flags.prompt) {
    const size_t id = corpus.vocab.find(ch);
    if (id == std::string::npos) {
      return absl::InvalidArgumentError(
          absl::StrFormat("--prompt: character %d ('%c') does not occur in the corpus",
                          static_cast<unsigned char>(ch), ch));
    }
    prompt.push_back(static_cast<int32_t>(id));
  }
  std::printf("char_lm: %zu train and %zu validation characters, vocabulary %lld, from %s\n",
              corpus.train.size(), corpus.validation.size(), static_cast<long long>(config.vocab),
              flags.data_dir.c_str());

  GptTrainConfig train;
  train.total_steps = flags.steps;
  BRAZE_ASSIGN_OR_RETURN(std::unique_ptr<CharLmRunner> runner,
                         MakeCharLmRunner(flags.run(), config, train, flags.batch));
  auto [val_inputs, val_targets] = ValidationWindows(corpus.validation, T, flags.eval_windows);

  std::mt19937_64 rng(flags.seed);
  HostTensor inputs(braze::DType::kI32, {flags.batch, T});
  HostTensor targets(braze::DType::kI32, {flags.batch, T});
  {
    const auto start = Clock::now();
    BRAZE_RETURN_IF_ERROR(runner->Compile(inputs, targets));
    const braze::SessionStats s = runner->TrainStats();
    std::printf(
        "char_lm %s: %lld parameters; prepared the train step in %.2f s (%lld kernels "
        "compiled in %.0f ms, %lld loaded from the disk cache)\n",
        runner->Describe().c_str(), static_cast<long long>(runner->num_parameters()),
        Seconds(start), static_cast<long long>(s.compiles), s.compile_ms,
        static_cast<long long>(s.disk_cache_hits));
    std::fflush(stdout);
  }

  // Checkpoints: the variables (weights, AdamW's slots, the step counter that keys
  // dropout and the schedule) restored after the compile (a Function's trace makes the
  // slots); the data position is the step: the batches before it are sampled again.
  RunCheckpoints ckpt(flags, "char_lm", DataMetadata(flags), /*rank=*/0);
  int64_t first_step = 0;
  if (ckpt.enabled()) {
    BRAZE_ASSIGN_OR_RETURN(first_step, ckpt.Resume(runner->Variables()));
    for (int64_t step = 0; step < first_step; ++step) {
      SampleBatch(corpus.train, T, rng, &inputs, &targets);
    }
  }

  double timed_seconds = 0, loss_sum = 0, val_loss = 0;
  int64_t timed_steps = 0, logged = 0;
  const int64_t untimed = std::min(first_step + kWarmupSteps, flags.steps - 1);
  for (int64_t step = first_step; step < flags.steps; ++step) {
    SampleBatch(corpus.train, T, rng, &inputs, &targets);
    const auto start = Clock::now();
    BRAZE_ASSIGN_OR_RETURN(double loss, runner->TrainStep(inputs, targets));
    if (step >= untimed) {
      timed_seconds += Seconds(start);
      ++timed_steps;
    }
    if (flags.print_losses) {
      std::printf("step_loss %lld %a\n", static_cast<long long>(step + 1), loss);
      std::fflush(stdout);
    }
    BRAZE_RETURN_IF_ERROR(ckpt.AfterStep(step + 1));
    loss_sum += loss;
    ++logged;
    if ((step + 1) % flags.eval_every == 0 || step + 1 == flags.steps) {
      BRAZE_ASSIGN_OR_RETURN(val_loss, runner->Evaluate(val_inputs, val_targets));
      std::printf(
          "step %lld: train loss %.4f, val loss %.4f (%.3f bits/char), %.0f ms/step "
          "(%.1f s)\n",
          static_cast<long long>(step + 1), loss_sum / logged, val_loss, val_loss / std::log(2.0),
          1e3 * timed_seconds / std::max<int64_t>(timed_steps, 1), Seconds(t0));
      std::fflush(stdout);
      loss_sum = 0;
      logged = 0;
    }
  }
  if (first_step >= flags.steps) {
    // Resumed from the last step's checkpoint: nothing left to train, only the report.
    BRAZE_ASSIGN_OR_RETURN(val_loss, runner->Evaluate(val_inputs, val_targets));
  }
  std::printf("%s; total %.1f s\n", runner->Summary().c_str(), Seconds(t0));

  if (flags.sample_chars > 0) {
    const auto start = Clock::now();
    BRAZE_ASSIGN_OR_RETURN(
        std::vector<int32_t> sample,
        Generate(*runner, prompt, flags.sample_chars, T, flags.temperature, flags.seed));
    std::printf("sample (%lld characters at temperature %g in %.2f s, %s):\n%s%s\n",
                static_cast<long long>(flags.sample_chars), flags.temperature, Seconds(start),
                runner->GenerateSummary().c_str(), flags.prompt.c_str(),
                braze::DecodeText(corpus.vocab, sample).c_str());
  }
  std::printf("step_ms=%.3f\n", 1e3 * timed_seconds / std::max<int64_t>(timed_steps, 1));
  std::printf("val_loss=%.4f\n", val_loss);
  std::printf("bits_per_char=%.4f\n", val_loss / std::log(2.0));
  if (flags.max_val_loss > 0 && !(val_loss <= flags.max_val_loss)) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "validation loss %.4f is above --max_val_loss %.4f", val_loss, flags.max_val_loss));
  }
  return absl::OkStatus();
}

}  // namespace
}  // namespace braze_examples

int main(int argc, char** argv) {
  absl::StatusOr<braze_examples::Flags> flags = braze_examples::ParseFlags(argc, argv);
  if (!flags.ok()) {
    std::fprintf(stderr, "char_lm: %s\n", std::string(flags.status().message()).c_str());
    braze_examples::Usage(stderr, braze_examples::Flags());
    return 2;
  }
  absl::Status status = braze_examples::Run(*flags);
  if (!status.ok()) {
    std::fprintf(stderr, "char_lm: %s\n", status.ToString().c_str());
    return 1;
  }
  return 0;
}
