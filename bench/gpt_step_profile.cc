// gpt_step_profile: runs one of braze_bench's transformer training steps (gpt_models.h)
// for a number of untimed steps (the compiles), then a number of measured ones, and
// reports the process's CPU time (getrusage: every thread, user + system) per measured
// step. On a machine other people load, the CPU time of a single-threaded run is the
// measure that holds where wall time does not (docs/CHAR_LM.md, "Where the step's time
// goes"):
//
//   HL_NUM_THREADS=1 OMP_NUM_THREADS=1 build/bench/gpt_step_profile --model=block
//       --variant=fused --steps=20
//
// --model=block|charlm (BM_TransformerBlockStep's or BM_CharLmStep's step);
// --variant=fused|unfused|torch (torch: the libtorch peer's step, when built with it);
// --attention=unfused|fused (Braze: the example's composite, or the Attention op);
// --warmup=N untimed steps (default 3); --steps=N measured steps (default 10);
// --remat=0: SessionOptions::rematerialize off (runtime/remat.h);
// --threads=N (Braze's SessionOptions::num_threads, torch's intra-op threads; default 1);
// --timeline=FILE: Braze's timeline of the measured steps only;
// --perf_ctl=FIFO: writes "enable" to FIFO before the measured steps and "disable"
//   after, for `perf record --control=fifo:FIFO -D -1` (a profile of them alone).
#include <sys/resource.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <string>

#include "braze/braze.h"
#include "braze/timeline.h"
#include "gpt_models.h"
#include "lib/gpt.h"

#ifdef BRAZE_PROFILE_TORCH
#include <torch/torch.h>

#include "braze/data.h"
#include "peers_torch_gpt.h"
#endif

namespace braze::bench {
namespace {

struct Flags {
  std::string model = "block", variant = "fused", attention = "unfused", timeline, perf_ctl;
  int warmup = 3, steps = 10, threads = 1;
  bool remat = true;
};

bool ParseFlags(int argc, char** argv, Flags* f) {
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const size_t eq = a.find('=');
    const std::string key = a.substr(0, eq), value = eq == a.npos ? "" : a.substr(eq + 1);
    if (key == "--model") {
      f->model = value;
    } else if (key == "--variant") {
      f->variant = value;
    } else if (key == "--attention") {
      f->attention = value;
    } else if (key == "--remat") {
      f->remat = value != "0" && value != "false";
    } else if (key == "--timeline") {
      f->timeline = value;
    } else if (key == "--perf_ctl") {
      f->perf_ctl = value;
    } else if (key == "--warmup") {
      f->warmup = std::atoi(value.c_str());
    } else if (key == "--steps") {
      f->steps = std::atoi(value.c_str());
    } else if (key == "--threads") {
      f->threads = std::atoi(value.c_str());
    } else {
      fprintf(stderr, "gpt_step_profile: unknown flag %s\n", a.c_str());
      return false;
    }
  }
  return (f->model == "block" || f->model == "charlm") &&
         (f->attention == "fused" || f->attention == "unfused") && f->steps > 0 && f->warmup >= 0;
}

double CpuSeconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  auto s = [](const timeval& t) { return double(t.tv_sec) + 1e-6 * double(t.tv_usec); };
  return s(u.ru_utime) + s(u.ru_stime);
}

void PerfControl(const std::string& fifo, const char* command) {
  if (fifo.empty()) return;
  std::ofstream out(fifo);
  out << command << "\n";
}

// Runs `step` warmup times, then steps times measured; prints the CPU time per step.
int Measure(const Flags& f, const std::function<bool(float*)>& step) {
  float loss = 0;
  for (int i = 0; i < f.warmup; ++i) {
    if (!step(&loss)) return 1;
  }
  if (!f.timeline.empty()) {
    if (absl::Status s = StartTimeline(f.timeline); !s.ok()) {
      fprintf(stderr, "%s\n", s.ToString().c_str());
      return 1;
    }
  }
  PerfControl(f.perf_ctl, "enable");
  const double cpu0 = CpuSeconds();
  for (int i = 0; i < f.steps; ++i) {
    if (!step(&loss)) return 1;
  }
  const double cpu = CpuSeconds() - cpu0;
  PerfControl(f.perf_ctl, "disable");
  if (!f.timeline.empty()) (void)StopTimeline();
  printf(
      "model=%s variant=%s attention=%s remat=%d threads=%d steps=%d last_loss=%.6f "
      "cpu_ms_per_step=%.2f\n",
      f.model.c_str(), f.variant.c_str(), f.attention.c_str(), int(f.remat), f.threads, f.steps,
      loss, 1e3 * cpu / f.steps);
  return 0;
}

int RunBraze(const Flags& f) {
  const bool fused = f.variant == "fused", attention = f.attention == "fused";
  absl::StatusOr<TrainStep> step = f.model == "block" ? MakeTransformerBlockStep(fused, attention)
                                                      : MakeCharLmStep(fused, attention);
  if (!step.ok()) {
    fprintf(stderr, "%s\n", step.status().ToString().c_str());
    return 1;
  }
  SessionOptions options;
  options.max_cluster_size = braze_examples::kGptMaxClusterSize;
  options.num_threads = f.threads;
  options.rematerialize = f.remat;
  Session session(*step->graph, options);
  std::vector<HostTensor> outputs;
  return Measure(f, [&](float* loss) {
    if (absl::Status s = session.RunInto(step->feeds, {step->loss}, &outputs, step->train);
        !s.ok()) {
      fprintf(stderr, "%s\n", s.ToString().c_str());
      return false;
    }
    *loss = outputs[0].data<float>()[0];
    return true;
  });
}

#ifdef BRAZE_PROFILE_TORCH
// The peers' steps as peers_gpt.cc builds them (same model, init and optimizer).
int RunTorch(const Flags& f) {
  torch::set_num_threads(f.threads);
  gpt::Config config;
  gpt::Recipe recipe;
  const int64_t batch = 16, t = config.context, d = config.d_model;
  torch::manual_seed(1);
  if (f.model == "block") {
    gpt::Block block(config);
    block->train();
    const torch::Tensor x = torch::randn({batch, t, d});
    const torch::Tensor target = torch::randn({batch, t, d});
    std::unique_ptr<torch::optim::AdamW> opt = gpt::MakeAdamW(block->parameters(), recipe);
    return Measure(f, [&](float* loss) {
      opt->zero_grad();
      torch::Tensor l = torch::mse_loss(block->forward(x), target);
      l.backward();
      opt->step();
      *loss = l.item<float>();
      return true;
    });
  }
  absl::StatusOr<TextCorpus> corpus = LoadFortunes();
  if (!corpus.ok()) return 1;
  config.vocab = static_cast<int64_t>(corpus->vocab.size());
  gpt::Gpt model(config);
  model->Initialize();
  model->train();
  std::unique_ptr<torch::optim::AdamW> opt = gpt::MakeAdamW(model->parameters(), recipe);
  std::mt19937_64 rng(1);
  torch::Tensor inputs = torch::empty({batch, t}, torch::kInt64);
  torch::Tensor targets = torch::empty({batch, t}, torch::kInt64);
  gpt::SampleBatch(corpus->train, t, rng, &inputs, &targets);
  int64_t s = 0;
  return Measure(f, [&](float* loss) {
    *loss = gpt::TrainStep(model, *opt, recipe, ++s, inputs, targets);
    return true;
  });
}
#endif

}  // namespace
}  // namespace braze::bench

int main(int argc, char** argv) {
  braze::bench::Flags flags;
  if (!braze::bench::ParseFlags(argc, argv, &flags)) {
    fprintf(stderr,
            "usage: gpt_step_profile [--model=block|charlm] [--variant=fused|unfused|torch]"
            " [--attention=unfused|fused] [--remat=0|1] [--warmup=N] [--steps=N] [--threads=N] "
            "[--timeline=FILE] "
            "[--perf_ctl=FIFO]\n");
    return 2;
  }
  if (flags.variant == "torch") {
#ifdef BRAZE_PROFILE_TORCH
    return braze::bench::RunTorch(flags);
#else
    fprintf(stderr, "gpt_step_profile: built without libtorch\n");
    return 2;
#endif
  }
  return braze::bench::RunBraze(flags);
}
