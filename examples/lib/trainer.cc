#include "lib/trainer.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <numeric>
#include <optional>
#include <random>
#include <stdexcept>
#include <string>
#include <tuple>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "braze/checkpoint.h"
#include "braze/timeline.h"
#include "lib/run_checkpoints.h"

namespace braze_examples {
namespace {

using braze::HostTensor;
using braze::Shape;
using Clock = std::chrono::steady_clock;

// Steps after Session::Compile that are not timed: the first Runs still allocate the
// reusable buffers and warm the caches, which is not what step_ms is about.
constexpr int64_t kWarmupSteps = 3;

double Seconds(Clock::time_point since) {
  return std::chrono::duration<double>(Clock::now() - since).count();
}

void Usage(FILE* out, const ExampleInfo& info) {
  const TrainFlags& d = info.defaults;
  std::fprintf(
      out,
      "%s: %s\n"
      "usage: %s [--jit=off|scope|auto] [--api=session|function] [--steps=N] [--batch=N] [--lr=X] "
      "[--seed=N]\n"
      "       [--log_every=N] [--data_dir=DIR] [--timeline=FILE] [--timeline_steps=N]\n"
      "       [--reference] [--min_test_accuracy=X] [--eval_rows=N] [--eval_batch=N]\n"
      "       [--dropout=RATE] [--checkpoint_dir=DIR] [--checkpoint_every=N]\n"
      "       [--keep_checkpoints=N] [--print_losses] [--data_parallel]\n"
      "       [--precision=f32|bf16|f16] [--unroll]\n"
      "       [--device=auto|cpu|cuda[:N]|opencl|jit:cpu]\n"
      "  --jit        off: every op runs as its own compiled kernel (no fusion);\n"
      "               scope: the model, loss, gradients and updates are built under\n"
      "               JitScope(g) and fused; auto: session-level auto-clustering\n"
      "               (global_jit_level = kOn1). Default %s\n"
      "  --api        session: a Session runs the graph built once (default); function:\n"
      "               the train step and evaluation are braze::Functions (tf.function)\n"
      "               with input_signature batch -1, jit_compile from --jit (scope: true,\n"
      "               off: false, auto: unset), capturing the model's variables; each\n"
      "               epoch's partial last batch is trained too, by the same trace\n"
      "               (not with --data_parallel: the ranks would get unequal shares)\n"
      "  --steps      train steps in total (default %lld)\n"
      "  --batch      examples per step (default %lld); with --api=session a partial last\n"
      "               batch of an epoch is skipped, so every step has one shape\n"
      "  --lr         learning rate (default %g)\n"
      "  --seed       shuffling and initialization seed (default %llu)\n"
      "  --log_every  steps between progress lines (default %lld)\n"
      "  --data_dir   directory with the Fashion-MNIST IDX files (default %s)\n"
      "  --timeline   write a Chrome trace (chrome://tracing, ui.perfetto.dev) of the\n"
      "               compiles and the first --timeline_steps train steps to FILE\n"
      "  --timeline_steps  train steps to trace (default %lld); 0 traces the whole run.\n"
      "               Traced steps are not timed, except with 0\n"
      "  --reference  run every op on the plain C++ reference kernels (nothing compiled)\n"
      "  --min_test_accuracy  exit with status 1 if the final test accuracy is lower\n"
      "  --eval_rows  evaluate on the first N test images only (default 0: all 10000)\n"
      "  --eval_batch  test images per evaluation run (default %lld)\n"
      "  --dropout    dropout rate after each hidden layer, in training only (mlp; default\n"
      "               0: none); the masks are keyed by a step variable (docs/RANDOM.md)\n"
      "  --precision  f32 (default), or the bf16 / f16 mixed-precision policy: 16-bit\n"
      "               matmuls, convolutions and elementwise chains, f32 master weights,\n"
      "               reductions, softmax and loss; f16 with dynamic loss scaling\n"
      "               (docs/MIXED_PRECISION.md)\n"
      "  --unroll     recurrent models (gru): the recurrence hand-unrolled, a copy of the\n"
      "               cell per step in the graph\n",
      info.program, info.description, info.program, JitModeName(d.jit),
      static_cast<long long>(d.steps), static_cast<long long>(d.batch), d.lr,
      static_cast<unsigned long long>(d.seed), static_cast<long long>(d.log_every),
      d.data_dir.c_str(), static_cast<long long>(d.timeline_steps),
      static_cast<long long>(d.eval_batch));
  std::fputs(CheckpointFlagsUsage(d).c_str(), out);
  std::fputs(
      "The last two lines are test_accuracy=<v> and step_ms=<v> (mean wall time of a\n"
      "train step, compile and warm-up steps excluded).\n",
      out);
}

// The trainer's own flags; then the common ones (lib/common_flags.h).
FlagMatch ParseTrainFlag(const std::string& arg, const std::string& value,
                         const ExampleInfo& info, TrainFlags* flags) {
  if ((arg == "--dropout" && !info.takes_dropout) || (arg == "--unroll" && !info.takes_unroll)) {
    return FlagMatch::kUnused;
  }
  bool ok = true;
  if (arg == "--lr") {
    ok = ParseFiniteDouble(value, &flags->lr) && flags->lr > 0;
  } else if (arg == "--log_every") {
    ok = absl::SimpleAtoi(value, &flags->log_every) && flags->log_every >= 1;
  } else if (arg == "--data_dir") {
    flags->data_dir = value;
  } else if (arg == "--timeline") {
    flags->timeline = value;
    ok = !value.empty();
  } else if (arg == "--timeline_steps") {
    ok = absl::SimpleAtoi(value, &flags->timeline_steps) && flags->timeline_steps >= 0;
  } else if (arg == "--reference") {
    ok = ParseBool(value, &flags->reference);
  } else if (arg == "--eval_rows") {
    ok = absl::SimpleAtoi(value, &flags->eval_rows) && flags->eval_rows >= 0;
  } else if (arg == "--eval_batch") {
    ok = absl::SimpleAtoi(value, &flags->eval_batch) && flags->eval_batch >= 1;
  } else if (arg == "--dropout") {
    ok = ParseFiniteDouble(value, &flags->dropout) && flags->dropout >= 0 && flags->dropout < 1;
  } else if (arg == "--data_parallel") {
    ok = ParseBool(value, &flags->data_parallel);
  } else if (arg == "--unroll") {
    ok = ParseBool(value, &flags->unroll);
  } else if (arg == "--min_test_accuracy") {
    ok = ParseFiniteDouble(value, &flags->min_test_accuracy);
  } else {
    return ParseCommonFlag(arg, value, flags);
  }
  return ok ? FlagMatch::kOk : FlagMatch::kBadValue;
}

// Accepts `--name=value` and `--name value`; `--reference` alone means true.
absl::StatusOr<TrainFlags> ParseFlags(int argc, char** argv, const ExampleInfo& info) {
  TrainFlags flags = info.defaults;
  BRAZE_RETURN_IF_ERROR(ParseCommandLine(
      argc, argv, {"--reference", "--print_losses", "--data_parallel", "--unroll"},
      [&info] { Usage(stdout, info); },
      [&flags, &info](const std::string& arg, const std::string& value) {
        return ParseTrainFlag(arg, value, info, &flags);
      }));
  return flags;
}

// Copies rows `rows[begin, end)` of a row-major [N, ...] tensor into a new [end-begin, ...].
HostTensor GatherRows(const HostTensor& src, const std::vector<int64_t>& rows, size_t begin,
                      size_t end) {
  const int64_t width = src.num_elements() / std::max<int64_t>(src.dim(0), 1);
  Shape shape = src.shape();
  shape[0] = static_cast<int64_t>(end - begin);
  HostTensor out(src.dtype(), shape);
  const size_t row_bytes = width * braze::SizeOf(src.dtype());
  const auto* from = static_cast<const uint8_t*>(src.raw_data());
  auto* to = static_cast<uint8_t*>(out.raw_data());
  for (size_t i = begin; i < end; ++i) {
    std::memcpy(to + (i - begin) * row_bytes, from + rows[i] * row_bytes, row_bytes);
  }
  return out;
}

// Hands out shuffled mini-batches, a fresh permutation every epoch. With `partial`, an
// epoch ends with the remainder as a smaller batch; without, the remainder is skipped.
// Data parallel, rank `rank` of `world` gets its shard: rows [rank b / world, (rank + 1)
// b / world) of each global batch of b rows (every rank shuffles alike, by the seed).
class Batcher {
 public:
  Batcher(const braze::MnistSplit& split, int64_t batch, uint64_t seed, bool partial, int rank = 0,
          int world = 1)
      : split_(split),
        batch_(batch),
        rank_(rank),
        world_(world),
        rng_(seed),
        order_(split.labels.dim(0)) {
    std::iota(order_.begin(), order_.end(), 0);
    const int64_t n = static_cast<int64_t>(order_.size());
    steps_per_epoch_ = partial ? (n + batch - 1) / batch : n / batch;
  }
  int64_t steps_per_epoch() const { return steps_per_epoch_; }

  // Makes the next call Next(step) (a run resumed from a checkpoint at `step`): replays
  // the shuffles of the steps before it, so the batches are those of a run that never
  // stopped. Call once, before any Next.
  void SkipTo(int64_t step) {
    const int64_t shuffles = (step + steps_per_epoch_ - 1) / steps_per_epoch_;
    for (int64_t i = 0; i < shuffles; ++i) std::shuffle(order_.begin(), order_.end(), rng_);
  }

  // The batch of global step `step` (steps are consecutive from 0).
  std::pair<HostTensor, HostTensor> Next(int64_t step) {
    const int64_t in_epoch = step % steps_per_epoch_;
    if (in_epoch == 0) std::shuffle(order_.begin(), order_.end(), rng_);
    const size_t global_begin = in_epoch * batch_;
    const size_t global_end = std::min(order_.size(), global_begin + batch_);
    const size_t rows = global_end - global_begin;
    const size_t begin = global_begin + rank_ * rows / world_;
    const size_t end = global_begin + (rank_ + 1) * rows / world_;
    return {GatherRows(split_.images, order_, begin, end),
            GatherRows(split_.labels, order_, begin, end)};
  }

 private:
  const braze::MnistSplit& split_;
  int64_t batch_;
  size_t rank_, world_;
  std::mt19937_64 rng_;
  std::vector<int64_t> order_;
  int64_t steps_per_epoch_ = 1;
};

// The evaluation feeds of a split's first `limit` rows (0: all), gathered once, in
// chunks of `chunk` rows (each chunk one evaluation run; the last may be smaller). Data
// parallel, rank `rank` of `world` takes its shard, rows [rank n / world, (rank + 1) n /
// world) of the n, and the counts are summed over the ranks (CountSum).
std::vector<std::pair<HostTensor, HostTensor>> EvalChunks(const braze::MnistSplit& split,
                                                          int64_t limit, int64_t chunk,
                                                          int rank = 0, int world = 1) {
  int64_t n = split.labels.dim(0);
  if (limit > 0) n = std::min(n, limit);
  std::vector<int64_t> rows(n);
  std::iota(rows.begin(), rows.end(), 0);
  const int64_t first = rank * n / world, last = (rank + 1) * n / world;
  std::vector<std::pair<HostTensor, HostTensor>> chunks;
  for (int64_t begin = first; begin < last; begin += chunk) {
    const int64_t end = std::min(last, begin + chunk);
    chunks.emplace_back(GatherRows(split.images, rows, begin, end),
                        GatherRows(split.labels, rows, begin, end));
  }
  return chunks;
}

// Sums counts over the ranks of a data-parallel run: Braze's AllReduce of an f64 vector
// (integers below 2^53 sum exactly, so the totals equal one process's counts), in a
// session of its own on the host. A world of one returns the counts as they are.
class CountSum {
 public:
  CountSum() {
    counts_ = braze::Placeholder(g_, braze::DType::kF64, {2}, "eval_counts");
    total_ = braze::AllReduce(counts_);
    braze::SessionOptions options;
    options.device = "cpu";
    session_ = std::make_unique<braze::Session>(g_, options);
  }
  absl::StatusOr<std::pair<double, double>> Sum(double a, double b) {
    HostTensor in(braze::DType::kF64, {2});
    in.data<double>()[0] = a;
    in.data<double>()[1] = b;
    BRAZE_RETURN_IF_ERROR(session_->RunInto({{counts_, in}}, {total_}, &out_));
    return std::make_pair(out_[0].data<double>()[0], out_[0].data<double>()[1]);
  }

 private:
  braze::Graph g_;
  braze::Tensor counts_, total_;
  std::unique_ptr<braze::Session> session_;
  std::vector<HostTensor> out_;
};

braze::SessionStats Minus(const braze::SessionStats& a, const braze::SessionStats& b) {
  braze::SessionStats d;
  d.runs = a.runs - b.runs;
  d.compiles = a.compiles - b.compiles;
  d.cache_hits = a.cache_hits - b.cache_hits;
  d.cluster_launches = a.cluster_launches - b.cluster_launches;
  d.single_op_launches = a.single_op_launches - b.single_op_launches;
  d.reference_launches = a.reference_launches - b.reference_launches;
  d.gemm_launches = a.gemm_launches - b.gemm_launches;
  d.host_to_device_copies = a.host_to_device_copies - b.host_to_device_copies;
  d.device_to_host_copies = a.device_to_host_copies - b.device_to_host_copies;
  d.copied_bytes = a.copied_bytes - b.copied_bytes;
  d.compile_ms = a.compile_ms - b.compile_ms;
  d.disk_cache_hits = a.disk_cache_hits - b.disk_cache_hits;
  return d;
}

void Accumulate(const braze::SessionStats& d, braze::SessionStats* total) {
  total->runs += d.runs;
  total->compiles += d.compiles;
  total->cache_hits += d.cache_hits;
  total->cluster_launches += d.cluster_launches;
  total->single_op_launches += d.single_op_launches;
  total->reference_launches += d.reference_launches;
  total->gemm_launches += d.gemm_launches;
  total->host_to_device_copies += d.host_to_device_copies;
  total->device_to_host_copies += d.device_to_host_copies;
  total->copied_bytes += d.copied_bytes;
  total->compile_ms += d.compile_ms;
  total->disk_cache_hits += d.disk_cache_hits;
}

// The graph's variables so far (the model's, before its step is built).
std::vector<braze::Tensor> Variables(braze::Graph& g) {
  std::vector<braze::Tensor> vars;
  for (int id = 0; id < g.num_nodes(); ++id) {
    if (g.node(id).op() == braze::OpKind::kVariable) vars.emplace_back(&g, id, 0);
  }
  return vars;
}

// One way of running the model (--api): a train step, the evaluation of a chunk, the
// counters, and an up-front compile of the train step.
struct Runner {
  std::function<absl::Status(HostTensor x, HostTensor labels, float lr_scale,
                             std::vector<HostTensor>* out)>
      train;  // out: loss, num_correct
  std::function<absl::StatusOr<double>(const HostTensor& x, const HostTensor& labels)> correct;
  std::function<braze::SessionStats()> stats;
  std::function<absl::Status(HostTensor x, HostTensor labels)> compile;
  std::function<std::string()> summary;  // the last report line
  std::function<int()> traces;           // train-step traces (1 under --api=session)
};

// --api=session: placeholders, the step built once (under JitScope with --jit=scope),
// one Session.
absl::StatusOr<Runner> SessionRunner(const TrainFlags& flags, const Model& model, braze::Graph& g,
                                     std::unique_ptr<braze::Session>* session) {
  StepInputs in;
  in.x = braze::Placeholder(g, braze::DType::kF32, {-1, 784}, "x");
  in.labels = braze::Placeholder(g, braze::DType::kI32, {-1}, "labels");
  if (model.uses_lr_scale) in.lr_scale = braze::Placeholder(g, braze::DType::kF32, {}, "lr_scale");
  TrainGraph m;
  braze::Tensor eval_correct;
  {
    // Everything built while `scope` is alive may be compiled and fused, as under the
    // seeds' `with jit_scope():`. The placeholders and variables stay outside: they are
    // sources, not computation.
    std::optional<braze::JitScope> scope;
    if (flags.jit == JitMode::kScope) scope.emplace(g);
    // --precision: the mixed-precision policy (braze/precision.h); f32: none.
    braze::PrecisionScope policy(g, flags.precision);
    BRAZE_ASSIGN_OR_RETURN(m, model.step(in, /*train=*/true));
    eval_correct = m.num_correct;
    if (model.eval_step) {
      StepInputs eval{in.x, in.labels, braze::Tensor()};
      BRAZE_ASSIGN_OR_RETURN(TrainGraph e, model.step(eval, /*train=*/false));
      eval_correct = e.num_correct;
    }
  }
  BRAZE_RETURN_IF_ERROR(g.status());
  braze::SessionOptions options = SessionOptionsFor(flags.jit, flags.device);
  options.reference_only = flags.reference;
  *session = std::make_unique<braze::Session>(g, options);
  braze::Session* s = session->get();
  auto feeds = [in](HostTensor x, HostTensor labels, float lr_scale) {
    braze::Feeds f = {{in.x, std::move(x)}, {in.labels, std::move(labels)}};
    if (in.lr_scale.valid()) f.emplace_back(in.lr_scale, HostTensor::Scalar(lr_scale));
    return f;
  };
  const std::vector<braze::Tensor> fetches = {m.loss, m.num_correct};
  Runner r;
  r.train = [=](HostTensor x, HostTensor labels, float lr_scale, std::vector<HostTensor>* out) {
    return s->RunInto(feeds(std::move(x), std::move(labels), lr_scale), fetches, out, m.train_ops);
  };
  r.correct = [=](const HostTensor& x, const HostTensor& labels) -> absl::StatusOr<double> {
    std::vector<HostTensor> out;
    BRAZE_RETURN_IF_ERROR(s->RunInto({{in.x, x}, {in.labels, labels}}, {eval_correct}, &out));
    return out[0].GetDouble(0);
  };
  if (flags.data_parallel) {  // rank 0's initial weights (and optimizer slots) everywhere
    BRAZE_ASSIGN_OR_RETURN(std::vector<braze::Tensor> sync,
                           braze::BroadcastVariables(Variables(g)));
    BRAZE_RETURN_IF_ERROR(s->Run({}, {}, sync).status());
  }
  r.stats = [s] { return s->stats(); };
  r.compile = [=](HostTensor x, HostTensor labels) {
    return s->Compile(feeds(std::move(x), std::move(labels), 1.0f), fetches, m.train_ops);
  };
  r.traces = [] { return 1; };
  r.summary = [s, &g] {
    const braze::SessionStats total = s->stats();
    return absl::StrFormat("session: %d graph nodes, %lld runs, %lld compiles (%.0f ms)",
                           g.num_nodes(), static_cast<long long>(total.runs),
                           static_cast<long long>(total.compiles), total.compile_ms);
  };
  return r;
}

// --api=function: the train step and the evaluation as braze::Functions over the
// model's graph (they capture its variables), batch -1 in their input_signature.
absl::StatusOr<Runner> FunctionRunner(const TrainFlags& flags, const Model& model, braze::Graph& g,
                                      std::vector<std::unique_ptr<braze::Function>>* functions) {
  braze::FunctionOptions options;
  options.graph = &g;
  SetFunctionOptions(flags.jit, flags.device, &options);
  options.session.reference_only = flags.reference;
  options.precision = flags.precision;  // the mixed-precision policy (braze/precision.h)
  if (flags.data_parallel) {            // rank 0's initial weights everywhere, before any trace
    const std::vector<braze::Tensor> vars = Variables(g);
    braze::FunctionOptions o = options;
    o.name = "broadcast_variables";
    // Kept beside the train step's, as the Functions sharing the variables.
    functions->push_back(std::make_unique<braze::Function>(
        [vars](braze::Graph&, const std::vector<braze::Tensor>&) {
          absl::StatusOr<std::vector<braze::Tensor>> sync = braze::BroadcastVariables(vars);
          if (!sync.ok()) throw std::runtime_error(std::string(sync.status().message()));
          return std::vector<braze::Tensor>{sync->front()};
        },
        o));
    BRAZE_RETURN_IF_ERROR((*functions->back())({}).status());
  }
  const braze::TensorSpec images{braze::DType::kF32, {-1, 784}};
  const braze::TensorSpec labels{braze::DType::kI32, {-1}};
  // A C++ body cannot return a Status: a failed build is thrown, and the Function
  // reports it as its call's Status.
  auto body = [model](bool train) {
    return [model, train](braze::Graph&, const std::vector<braze::Tensor>& args) {
      StepInputs in{args[0], args[1], train && model.uses_lr_scale ? args[2] : braze::Tensor()};
      absl::StatusOr<TrainGraph> m = model.step(in, train);
      if (!m.ok()) throw std::runtime_error(std::string(m.status().message()));
      return train ? std::vector<braze::Tensor>{m->loss, m->num_correct}
                   : std::vector<braze::Tensor>{m->num_correct};
    };
  };
  options.name = "train_step";
  options.input_signature = std::vector<braze::TensorSpec>{images, labels};
  if (model.uses_lr_scale) options.input_signature->push_back({braze::DType::kF32, {}});
  functions->push_back(std::make_unique<braze::Function>(body(true), options));
  braze::Function* train = functions->back().get();
  options.name = "evaluate";
  options.input_signature = std::vector<braze::TensorSpec>{images, labels};
  functions->push_back(std::make_unique<braze::Function>(body(false), options));
  braze::Function* evaluate = functions->back().get();
  const bool lr_scale = model.uses_lr_scale;
  auto args = [lr_scale](HostTensor x, HostTensor labels, float scale) {
    std::vector<HostTensor> a = {std::move(x), std::move(labels)};
    if (lr_scale) a.push_back(HostTensor::Scalar(scale));
    return a;
  };
  Runner r;
  r.train = [=](HostTensor x, HostTensor labels, float scale, std::vector<HostTensor>* out) {
    BRAZE_ASSIGN_OR_RETURN(*out, (*train)(args(std::move(x), std::move(labels), scale)));
    return absl::OkStatus();
  };
  r.correct = [=](const HostTensor& x, const HostTensor& labels) -> absl::StatusOr<double> {
    BRAZE_ASSIGN_OR_RETURN(std::vector<HostTensor> out, (*evaluate)({x, labels}));
    return out[0].GetDouble(0);
  };
  r.stats = [train] { return train->stats(); };
  r.compile = [=](HostTensor x, HostTensor labels) {
    // Traces the step; its first call compiles it (a Function compiles on first use).
    return train->GetConcreteFunction(*train->options().input_signature).status();
  };
  r.traces = [train] { return train->tracing_count(); };
  r.summary = [train, evaluate, &g] {
    const braze::SessionStats total = train->stats();
    return absl::StrFormat(
        "functions: train_step traced %d time(s), evaluate %d; %d graph nodes; train_step: "
        "%lld runs, %lld compiles (%.0f ms)",
        train->tracing_count(), evaluate->tracing_count(), g.num_nodes(),
        static_cast<long long>(total.runs), static_cast<long long>(total.compiles),
        total.compile_ms);
  };
  return r;
}

// The fraction of the test images classified correctly: this rank's chunks, then (data
// parallel) the counts of every rank's shard summed.
absl::StatusOr<double> Accuracy(const Runner& runner,
                                const std::vector<std::pair<HostTensor, HostTensor>>& chunks,
                                CountSum* over_ranks) {
  double correct = 0, n = 0;
  for (const auto& [images, labels] : chunks) {
    BRAZE_ASSIGN_OR_RETURN(double c, runner.correct(images, labels));
    correct += c;
    n += static_cast<double>(labels.dim(0));
  }
  if (over_ranks != nullptr) {
    BRAZE_ASSIGN_OR_RETURN(std::tie(correct, n), over_ranks->Sum(correct, n));
  }
  return correct / std::max(n, 1.0);
}

// What a checkpoint records of the run: a resumed run must have the same. The
// checkpoint's step is the data position (the next batch is that step's); a model whose
// learning rate decays over --steps (Model::uses_lr_scale) records them too, since
// another --steps would change the rate of every remaining step.
braze::StringMap RunMetadata(const TrainFlags& flags, const ExampleInfo& info,
                             const Model& model) {
  braze::StringMap metadata = {
      {"example", info.program},
      {"data.seed", absl::StrCat(flags.seed)},
      {"data.batch", absl::StrCat(flags.batch)},
      {"data.partial_batches", flags.api == Api::kFunction && flags.world == 1 ? "true" : "false"}};
  if (model.uses_lr_scale) metadata["train.steps"] = absl::StrCat(flags.steps);
  return metadata;
}

absl::Status Train(const TrainFlags& flags, const ExampleInfo& info, const ModelBuilder& build) {
  const auto t0 = Clock::now();
  BRAZE_ASSIGN_OR_RETURN(braze::MnistSplit train, braze::LoadFashionMnist("train", flags.data_dir));
  BRAZE_ASSIGN_OR_RETURN(braze::MnistSplit test, braze::LoadFashionMnist("t10k", flags.data_dir));
  if (train.labels.dim(0) < flags.batch) {
    return absl::InvalidArgumentError(absl::StrCat("--batch ", flags.batch, " exceeds the ",
                                                   train.labels.dim(0), " training images"));
  }
  std::printf("%s: loaded %lld train and %lld test images from %s in %.2f s\n", info.program,
              static_cast<long long>(train.labels.dim(0)),
              static_cast<long long>(test.labels.dim(0)), flags.data_dir.c_str(), Seconds(t0));

  braze::Graph g;
  BRAZE_ASSIGN_OR_RETURN(Model model, build(g, flags));
  std::unique_ptr<braze::Session> session;
  std::vector<std::unique_ptr<braze::Function>> functions;
  const bool function_api = flags.api == Api::kFunction;
  BRAZE_ASSIGN_OR_RETURN(Runner runner, function_api ? FunctionRunner(flags, model, g, &functions)
                                                     : SessionRunner(flags, model, g, &session));

  if (flags.batch % flags.world != 0) {
    return absl::InvalidArgumentError(absl::StrCat("--batch ", flags.batch,
                                                   " is not a multiple of the ", flags.world,
                                                   " ranks (--data_parallel)"));
  }
  // An epoch's remainder as a smaller batch only in one process: shared by the ranks it
  // gave each a different number of rows (none at all to some: a NaN mean loss spread to
  // every rank by the all-reduce), each rank's mean still weighted 1/world.
  Batcher batcher(train, flags.batch, flags.seed, /*partial=*/function_api && flags.world == 1,
                  flags.rank, flags.world);
  const std::vector<std::pair<HostTensor, HostTensor>> test_chunks =
      EvalChunks(test, flags.eval_rows, flags.eval_batch, flags.rank, flags.world);
  std::optional<CountSum> count_sum;  // data parallel: every rank evaluates its shard
  if (flags.world > 1) {
    count_sum.emplace();
    int64_t mine = 0;
    for (const auto& chunk : test_chunks) mine += chunk.second.dim(0);
    const int64_t all =
        flags.eval_rows > 0 ? std::min(flags.eval_rows, test.labels.dim(0)) : test.labels.dim(0);
    std::printf(
        "%s: evaluation sharded over %d ranks, rank 0 evaluating %lld of the %lld "
        "test images\n",
        info.program, flags.world, static_cast<long long>(mine), static_cast<long long>(all));
  }
  CountSum* over_ranks = count_sum ? &*count_sum : nullptr;
  auto lr_scale = [&](int64_t step) {
    return static_cast<float>(1.0 - static_cast<double>(step) / flags.steps);
  };

  const bool tracing = !flags.timeline.empty();
  if (tracing) BRAZE_RETURN_IF_ERROR(braze::StartTimeline(flags.timeline));
  // Untimed: the warm-up steps, and the traced ones (tracing costs time per kernel)
  // unless the whole run is traced.
  int64_t untimed = kWarmupSteps;
  if (tracing && flags.timeline_steps > 0) untimed = std::max(untimed, flags.timeline_steps);
  untimed = std::min(untimed, flags.steps - 1);

  // Plans and JIT-compiles (or traces) the train step up front, so that this time is
  // reported on its own and never lands in a timed step.
  {
    const auto start = Clock::now();
    // Compile only needs the feeds' shapes: any batch of the right size will do.
    std::vector<int64_t> first(flags.batch / flags.world);
    std::iota(first.begin(), first.end(), 0);
    BRAZE_RETURN_IF_ERROR(runner.compile(GatherRows(train.images, first, 0, first.size()),
                                         GatherRows(train.labels, first, 0, first.size())));
    const braze::SessionStats s = runner.stats();
    std::printf(
        "%s --api=%s --jit=%s%s --device=%s: %d graph nodes; %s the train step in %.2f s "
        "(%lld kernels compiled in %.0f ms, %lld loaded from the disk cache)\n",
        info.program, function_api ? "function" : "session", JitModeName(flags.jit),
        flags.reference ? " --reference" : "", flags.device.c_str(), g.num_nodes(),
        function_api ? "traced" : "prepared", Seconds(start), static_cast<long long>(s.compiles),
        s.compile_ms, static_cast<long long>(s.disk_cache_hits));
    std::fflush(stdout);
  }

  // Checkpoints: restored after the compile (a Function's first trace makes the
  // optimizer's slot variables), before the first step.
  RunCheckpoints ckpt(flags, info.program, RunMetadata(flags, info, model), flags.rank);
  int64_t first_step = 0;
  if (ckpt.enabled()) {
    BRAZE_ASSIGN_OR_RETURN(first_step,
                           ckpt.Resume(function_api ? braze::FunctionVariables(g)
                                                    : braze::SessionVariables(*session)));
    batcher.SkipTo(first_step);
  }
  untimed = std::min(first_step + untimed, flags.steps - 1);

  braze::SessionStats timed_stats;
  double timed_seconds = 0;
  int64_t timed_steps = 0;
  double loss_sum = 0, correct_sum = 0;
  int64_t logged_steps = 0, logged_examples = 0, partial_batches = 0;
  double test_accuracy = 0;
  std::vector<HostTensor> out;
  for (int64_t step = first_step; step < flags.steps; ++step) {
    auto [x, labels] = batcher.Next(step);
    const int64_t batch = labels.dim(0);
    partial_batches += batch != flags.batch / flags.world;
    const bool timed = step >= untimed && batch == flags.batch / flags.world;
    const braze::SessionStats before = runner.stats();
    const auto start = Clock::now();
    BRAZE_RETURN_IF_ERROR(runner.train(std::move(x), std::move(labels), lr_scale(step), &out));
    if (timed) {
      timed_seconds += Seconds(start);
      Accumulate(Minus(runner.stats(), before), &timed_stats);
      ++timed_steps;
    }
    if (flags.print_losses) {
      std::printf("step_loss %lld %a\n", static_cast<long long>(step + 1), out[0].GetDouble(0));
      std::fflush(stdout);
    }
    // Data parallel: every rank holds the same variables; rank 0 writes, every rank
    // restored from the same directory above.
    BRAZE_RETURN_IF_ERROR(ckpt.AfterStep(step + 1));
    loss_sum += out[0].GetDouble(0);
    correct_sum += out[1].GetDouble(0);
    ++logged_steps;
    logged_examples += batch;
    if (tracing && flags.timeline_steps > 0 && step + 1 - first_step == flags.timeline_steps) {
      BRAZE_RETURN_IF_ERROR(braze::StopTimeline());
      std::printf("wrote the timeline of the compiles and steps 1-%lld to %s\n",
                  static_cast<long long>(flags.timeline_steps), flags.timeline.c_str());
    }
    if ((step + 1) % flags.log_every == 0 || step + 1 == flags.steps) {
      BRAZE_ASSIGN_OR_RETURN(test_accuracy, Accuracy(runner, test_chunks, over_ranks));
      std::printf(
          "step %lld (epoch %.2f): loss %.4f train_batch_accuracy %.4f test_accuracy %.4f "
          "(%.1f s)\n",
          static_cast<long long>(step + 1),
          static_cast<double>(step + 1) / batcher.steps_per_epoch(), loss_sum / logged_steps,
          correct_sum / std::max<int64_t>(logged_examples, 1), test_accuracy, Seconds(t0));
      std::fflush(stdout);
      loss_sum = correct_sum = 0;
      logged_steps = logged_examples = 0;
    }
  }
  if (first_step >= flags.steps) {
    // Resumed from the last step's checkpoint: nothing left to train, only the report.
    BRAZE_ASSIGN_OR_RETURN(test_accuracy, Accuracy(runner, test_chunks, over_ranks));
  }
  if (tracing && (flags.timeline_steps == 0 || flags.timeline_steps > flags.steps - first_step)) {
    BRAZE_RETURN_IF_ERROR(braze::StopTimeline());
    std::printf("wrote the timeline of the whole run to %s\n", flags.timeline.c_str());
  }

  const double per_step = 1.0 / std::max<int64_t>(timed_steps, 1);
  std::printf(
      "one train step (mean of %lld timed steps): %g cluster launches, %g single-op kernels, "
      "%g reference kernels, %g cuBLAS GEMMs, %g copies onto and %g off the device; %lld "
      "compiles and %lld cache hits in them\n",
      static_cast<long long>(timed_steps), timed_stats.cluster_launches * per_step,
      timed_stats.single_op_launches * per_step, timed_stats.reference_launches * per_step,
      timed_stats.gemm_launches * per_step, timed_stats.host_to_device_copies * per_step,
      timed_stats.device_to_host_copies * per_step, static_cast<long long>(timed_stats.compiles),
      static_cast<long long>(timed_stats.cache_hits));
  if (function_api && flags.world == 1) {
    std::printf("trained %lld partial last batches (of %lld examples) with the same trace\n",
                static_cast<long long>(partial_batches),
                static_cast<long long>(train.labels.dim(0) % flags.batch));
  }
  std::printf("%s; total %.1f s\n", runner.summary().c_str(), Seconds(t0));
  std::printf("test_accuracy=%.4f\n", test_accuracy);
  std::printf("step_ms=%.3f\n", 1e3 * timed_seconds * per_step);
  if (runner.traces() != 1) {
    // input_signature has batch -1: full and partial batches must share one trace.
    return absl::InternalError(
        absl::StrCat("the train step was traced ", runner.traces(), " times, not once"));
  }
  if (test_accuracy < flags.min_test_accuracy) {
    return absl::FailedPreconditionError(
        absl::StrFormat("test accuracy %.4f is below --min_test_accuracy %.4f", test_accuracy,
                        flags.min_test_accuracy));
  }
  return absl::OkStatus();
}

}  // namespace

braze::Optimizer ForFlags(const TrainFlags& flags, braze::Optimizer optimizer) {
  // Dynamic loss scaling builds something under the f16 policy only.
  if (flags.precision == braze::DType::kF16) optimizer = optimizer.WithLossScaling();
  return flags.data_parallel ? optimizer.WithDataParallel() : optimizer;
}

braze::Tensor NumCorrect(const braze::Tensor& logits, const braze::Tensor& labels) {
  braze::NameScope name_scope(*logits.graph(), "accuracy");
  const braze::Tensor correct = braze::Equal(braze::ArgMax(logits, 1), labels);
  return braze::Sum(braze::Cast(correct, braze::DType::kF32));
}

int TrainMain(int argc, char** argv, const ExampleInfo& info, const ModelBuilder& build) {
  absl::StatusOr<TrainFlags> flags = ParseFlags(argc, argv, info);
  if (!flags.ok()) {
    std::fprintf(stderr, "%s: %s\n", info.program, std::string(flags.status().message()).c_str());
    Usage(stderr, info);
    return 2;
  }
  if (flags->data_parallel) {
    if (absl::Status s = braze::InitDistributed(); !s.ok()) {
      std::fprintf(stderr, "%s: %s\n", info.program, s.ToString().c_str());
      return 1;
    }
    flags->rank = braze::WorldRank();
    flags->world = braze::WorldSize();
    // Rank 0 reports; the others' output would only repeat it.
    if (flags->rank != 0 && std::freopen("/dev/null", "w", stdout) == nullptr) return 1;
    std::printf("%s: data parallel over %d rank(s) (%s), %lld examples per rank per step\n",
                info.program, flags->world, braze::DistributedEngine(),
                static_cast<long long>(flags->batch / flags->world));
  }
  absl::Status status = Train(*flags, info, build);
  if (!status.ok()) {
    std::fprintf(stderr, "%s: rank %d: %s\n", info.program, flags->rank, status.ToString().c_str());
  }
  // After a lost rank this aborts the job (braze/distributed.h) rather than wait for it.
  if (flags->data_parallel) (void)braze::FinalizeDistributed();
  return status.ok() ? 0 : 1;
}

}  // namespace braze_examples
