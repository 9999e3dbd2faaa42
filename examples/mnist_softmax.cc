// Softmax regression on Fashion-MNIST: the tutorial workload.
//
// The model is logits = x W + b trained with plain SGD. Braze has no autodiff yet, so
// the gradients are written out as the ordinary graph ops an autodiff pass would emit:
//   dlogits = (softmax(logits) - y) / batch
//   dW = x^T dlogits,  db = sum_rows(dlogits)
// and one Session::Run per step fetches the loss and runs the two AssignSub updates.
// The learning rate is a fed scalar that decays linearly to zero over the run: the last
// iterate of constant-rate SGD on Fashion-MNIST swings by several points of accuracy
// from step to step, the decayed one settles.
//
//   mnist_softmax [--epochs N] [--batch N] [--lr X] [--steps N] [--seed N]
//                 [--executor reference|compiled|fused] [--data_dir DIR]
//                 [--min_test_accuracy X]
//
// --executor picks how the Session runs the graph: every op on the plain reference
// kernels (the default, and the baseline), every op as its own compiled Halide kernel,
// or auto-clustered and fused (global_jit_level = kOn1).
//
// The last two lines are machine-readable: `test_accuracy=<v>` and `step_ms=<v>`.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "braze/braze.h"

namespace {

using braze::DType;
using braze::HostTensor;
using braze::Shape;
using braze::Tensor;

constexpr int64_t kPixels = 784;
constexpr int64_t kClasses = 10;
// Accuracy is evaluated in chunks so a full-split evaluation never materializes
// 60000-row intermediates in the reference executor.
constexpr int64_t kEvalChunk = 10000;

struct Flags {
  int epochs = 5;
  int64_t batch = 100;
  double lr = 0.5;
  int64_t max_steps = -1;  // -1: no limit
  uint64_t seed = 1;
  std::string data_dir = braze::kFashionMnistDir;
  std::string executor = "reference";
  double min_test_accuracy = 0;  // exit status 1 below this (for ctest)
};

void Usage(FILE* out) {
  std::fprintf(out,
               "usage: mnist_softmax [--epochs N] [--batch N] [--lr X] [--steps N] [--seed N]\n"
               "                     [--executor reference|compiled|fused] [--data_dir DIR]\n"
               "                     [--min_test_accuracy X]\n"
               "  --epochs    passes over the 60000 training images (default 5)\n"
               "  --batch     examples per SGD step (default 100)\n"
               "  --lr        initial learning rate, decayed linearly to 0 (default 0.5)\n"
               "  --steps     stop after this many steps in total (default: no limit)\n"
               "  --seed      shuffling seed (default 1)\n"
               "  --executor  reference (default): plain C++ kernels; compiled: one Halide\n"
               "              kernel per op; fused: auto-clustered Halide kernels\n"
               "  --data_dir  directory with the IDX files (default %s)\n"
               "  --min_test_accuracy  exit with status 1 when the final test accuracy is lower\n",
               braze::kFashionMnistDir);
}

// Accepts `--name value` and `--name=value`.
absl::StatusOr<Flags> ParseFlags(int argc, char** argv) {
  Flags flags;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--help" || arg == "-h") {
      Usage(stdout);
      std::exit(0);
    }
    std::string value;
    const size_t eq = arg.find('=');
    if (eq != std::string::npos) {
      value = arg.substr(eq + 1);
      arg.resize(eq);
    } else if (i + 1 < argc) {
      value = argv[++i];
    } else {
      return absl::InvalidArgumentError(absl::StrCat("flag ", arg, " needs a value"));
    }
    bool ok = true;
    if (arg == "--epochs") {
      ok = absl::SimpleAtoi(value, &flags.epochs) && flags.epochs >= 1;
    } else if (arg == "--batch") {
      ok = absl::SimpleAtoi(value, &flags.batch) && flags.batch >= 1;
    } else if (arg == "--lr") {
      ok = absl::SimpleAtod(value, &flags.lr) && flags.lr > 0;
    } else if (arg == "--steps") {
      ok = absl::SimpleAtoi(value, &flags.max_steps) && flags.max_steps >= 1;
    } else if (arg == "--seed") {
      ok = absl::SimpleAtoi(value, &flags.seed);
    } else if (arg == "--min_test_accuracy") {
      ok = absl::SimpleAtod(value, &flags.min_test_accuracy);
    } else if (arg == "--executor") {
      flags.executor = value;
      ok = value == "reference" || value == "compiled" || value == "fused";
    } else if (arg == "--data_dir") {
      flags.data_dir = value;
    } else {
      return absl::InvalidArgumentError(absl::StrCat("unknown flag ", arg));
    }
    if (!ok) return absl::InvalidArgumentError(absl::StrCat("bad value for ", arg, ": ", value));
  }
  return flags;
}

// Copies rows `rows[begin, end)` of a row-major [N, width] tensor into a new [n, width].
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

// The model, its loss, the hand-written gradients, the updates and the accuracy count.
struct Model {
  Tensor x, labels;  // feeds: f32 [-1,784], i32 [-1]
  Tensor lr;         // feed: f32 scalar
  Tensor W, b;       // variables
  Tensor loss;       // mean cross entropy of the batch
  Tensor train_W, train_b;
  Tensor num_correct;  // f32 scalar: how many argmax(logits) == labels
};

Model BuildModel(braze::Graph& g) {
  Model m;
  m.x = braze::Placeholder(g, DType::kF32, {-1, kPixels}, "x");
  m.labels = braze::Placeholder(g, DType::kI32, {-1}, "labels");
  m.lr = braze::Placeholder(g, DType::kF32, {}, "learning_rate");
  // Zero init is fine for softmax regression: the loss is convex and the gradient
  // already differs per class, so there is no symmetry to break.
  m.W = braze::Variable(g, HostTensor(DType::kF32, {kPixels, kClasses}), "W");
  m.b = braze::Variable(g, HostTensor(DType::kF32, {kClasses}), "b");

  Tensor y = braze::OneHot(m.labels, kClasses);
  Tensor logits = braze::MatMul(m.x, m.W) + m.b;
  m.loss = braze::Mean(braze::SoftmaxCrossEntropyWithLogits(logits, y));

  {
    braze::NameScope scope(g, "gradients");
    // d(mean loss)/dlogits. Each one-hot row sums to 1, so Sum(y) is the batch size in
    // the graph itself and a short final batch needs no extra feed.
    Tensor dlogits = (braze::Softmax(logits) - y) / braze::Sum(y);
    Tensor dW = braze::MatMul(m.x, dlogits, /*transpose_a=*/true);
    Tensor db = braze::Sum(dlogits, {0});
    m.train_W = braze::AssignSub(m.W, dW * m.lr, "train_W");
    m.train_b = braze::AssignSub(m.b, db * m.lr, "train_b");
  }

  {
    braze::NameScope scope(g, "accuracy");
    Tensor correct = braze::Equal(braze::ArgMax(logits, 1), m.labels);
    m.num_correct = braze::Sum(braze::Cast(correct, DType::kF32));
  }
  return m;
}

// Fraction of `split` that the current weights classify correctly.
absl::StatusOr<double> Accuracy(braze::Session& session, const Model& m,
                                const braze::MnistSplit& split) {
  const int64_t n = split.labels.dim(0);
  std::vector<int64_t> rows(n);
  std::iota(rows.begin(), rows.end(), 0);
  double correct = 0;
  for (int64_t begin = 0; begin < n; begin += kEvalChunk) {
    const int64_t end = std::min(n, begin + kEvalChunk);
    braze::Feeds feeds;
    feeds.emplace_back(m.x, GatherRows(split.images, rows, begin, end));
    feeds.emplace_back(m.labels, GatherRows(split.labels, rows, begin, end));
    BRAZE_ASSIGN_OR_RETURN(std::vector<HostTensor> out, session.Run(feeds, {m.num_correct}));
    correct += out[0].GetDouble(0);
  }
  return correct / n;
}

absl::Status Train(const Flags& flags) {
  const auto t0 = std::chrono::steady_clock::now();
  BRAZE_ASSIGN_OR_RETURN(braze::MnistSplit train, braze::LoadFashionMnist("train", flags.data_dir));
  BRAZE_ASSIGN_OR_RETURN(braze::MnistSplit test, braze::LoadFashionMnist("t10k", flags.data_dir));
  const int64_t n = train.labels.dim(0);
  std::printf("loaded %lld train and %lld test images from %s in %.2f s\n",
              static_cast<long long>(n), static_cast<long long>(test.labels.dim(0)),
              flags.data_dir.c_str(),
              std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());

  braze::Graph g;
  Model m = BuildModel(g);
  BRAZE_RETURN_IF_ERROR(g.status());
  braze::SessionOptions options;
  options.reference_only = flags.executor == "reference";
  if (flags.executor == "fused") options.global_jit_level = braze::JitLevel::kOn1;
  braze::Session session(g, options);

  std::mt19937_64 rng(flags.seed);
  std::vector<int64_t> order(n);
  std::iota(order.begin(), order.end(), 0);
  const int64_t steps_per_epoch = (n + flags.batch - 1) / flags.batch;
  int64_t total_steps = flags.epochs * steps_per_epoch;
  if (flags.max_steps >= 0) total_steps = std::min(total_steps, flags.max_steps);
  int64_t steps = 0;

  // One untimed step with learning rate 0 (it leaves W and b unchanged) plans and, for
  // the compiled executors, JIT-compiles the training step, so that step_ms measures
  // steady-state steps rather than one-time compilation.
  {
    const auto start = std::chrono::steady_clock::now();
    const int64_t end = std::min(n, flags.batch);
    braze::Feeds feeds;
    feeds.emplace_back(m.x, GatherRows(train.images, order, 0, end));
    feeds.emplace_back(m.labels, GatherRows(train.labels, order, 0, end));
    feeds.emplace_back(m.lr, HostTensor::Scalar(0.0f));
    BRAZE_RETURN_IF_ERROR(session.Run(feeds, {m.loss}, {m.train_W, m.train_b}).status());
    std::printf("executor %s: first step (planning, compilation) took %.2f s\n",
                flags.executor.c_str(),
                std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  double run_seconds = 0;
  double test_accuracy = 0;
  for (int epoch = 1; epoch <= flags.epochs; ++epoch) {
    std::shuffle(order.begin(), order.end(), rng);
    double loss_sum = 0;
    int64_t epoch_steps = 0;
    for (int64_t begin = 0; begin < n; begin += flags.batch) {
      if (flags.max_steps >= 0 && steps >= flags.max_steps) break;
      const int64_t end = std::min(n, begin + flags.batch);
      braze::Feeds feeds;
      feeds.emplace_back(m.x, GatherRows(train.images, order, begin, end));
      feeds.emplace_back(m.labels, GatherRows(train.labels, order, begin, end));
      const double lr = flags.lr * (1.0 - static_cast<double>(steps) / total_steps);
      feeds.emplace_back(m.lr, HostTensor::Scalar(static_cast<float>(lr)));
      const auto start = std::chrono::steady_clock::now();
      BRAZE_ASSIGN_OR_RETURN(std::vector<HostTensor> out,
                             session.Run(feeds, {m.loss}, {m.train_W, m.train_b}));
      run_seconds +=
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      loss_sum += out[0].GetDouble(0);
      ++epoch_steps;
      ++steps;
    }
    if (epoch_steps == 0) break;
    BRAZE_ASSIGN_OR_RETURN(double train_accuracy, Accuracy(session, m, train));
    BRAZE_ASSIGN_OR_RETURN(test_accuracy, Accuracy(session, m, test));
    std::printf("epoch %d: steps %lld loss %.4f train_accuracy %.4f test_accuracy %.4f (%.1f s)\n",
                epoch, static_cast<long long>(epoch_steps), loss_sum / epoch_steps, train_accuracy,
                test_accuracy,
                std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    std::fflush(stdout);
  }
  if (steps == 0) return absl::InvalidArgumentError("no training steps ran");
  const braze::SessionStats stats = session.stats();
  std::printf(
      "session: %lld runs, %lld compiles (%.0f ms), %lld cache hits, %lld cluster launches, "
      "%lld single-op launches, %lld reference launches\n",
      static_cast<long long>(stats.runs), static_cast<long long>(stats.compiles), stats.compile_ms,
      static_cast<long long>(stats.cache_hits), static_cast<long long>(stats.cluster_launches),
      static_cast<long long>(stats.single_op_launches),
      static_cast<long long>(stats.reference_launches));
  std::printf("test_accuracy=%.4f\n", test_accuracy);
  std::printf("step_ms=%.3f\n", 1e3 * run_seconds / steps);
  if (test_accuracy < flags.min_test_accuracy) {
    return absl::FailedPreconditionError(
        absl::StrFormat("test accuracy %.4f is below --min_test_accuracy %.4f", test_accuracy,
                        flags.min_test_accuracy));
  }
  return absl::OkStatus();
}

}  // namespace

int main(int argc, char** argv) {
  absl::StatusOr<Flags> flags = ParseFlags(argc, argv);
  if (!flags.ok()) {
    std::fprintf(stderr, "mnist_softmax: %s\n", std::string(flags.status().message()).c_str());
    Usage(stderr);
    return 2;
  }
  absl::Status status = Train(*flags);
  if (!status.ok()) {
    std::fprintf(stderr, "mnist_softmax: %s\n", status.ToString().c_str());
    return 1;
  }
  return 0;
}
