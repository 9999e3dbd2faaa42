// Every shipped stored schedule (schedules/*.schedule, docs/SCHEDULES.md) at its own
// shapes, on signed inputs, against the reference kernels.
//
// An entry is keyed by a hash of its cluster's key (compile/cluster_key.h), which holds
// the cluster's ops, constants (their bytes), input types and the Halide target; it
// carries no cluster text. So each entry is reached by rebuilding the program braze-tune
// was run on (docs/SCHEDULES.md, bench/RESULTS.md): the benchmark workloads of
// bench/fusion_bench.cc (Softmax 16384, LayerNorm 4096) and bench/train_models.cc (the
// softmax regression and MLP train steps), and the train steps of examples/mnist_softmax
// and examples/mlp (placeholders of batch -1 under a JitScope, as lib/trainer.cc builds
// them). The builders below copy those programs op for op: a change to either that
// changes a cluster's key makes its entry unused here, and this test fails naming it.
//
// The target is part of the key and the runtime reads it once per process, so each
// target the entries were tuned for runs in a child process of this binary with
// HL_JIT_TARGET set to it (where this CPU can run it). A GPU entry's target names its
// device ("x86-64-linux-cuda-cuda_capability_86 device=sm_90": device::
// ScheduleTargetString), which is no Halide target: its child runs without
// HL_JIT_TARGET, on the device the target names (cuda:0 or opencl:0), where that device
// is present and is the architecture named; elsewhere its entries are reported as
// skipped, with the reason. The child runs each workload in a compiled session on the
// entry's device (the host for a CPU entry; with --log_compiles) and in a
// reference_only session from the same state: every variable (weights, Adam's slots
// and step) set to signed random values (Adam's second moments positive, its step 4:
// the domains of sqrt and 1 - beta^t), images uniform in [-2, 2] (the row workloads'
// in [-4, 4]), random labels. It checks
//   (a) each compile line that names a stored schedule names a shipped file, used (not
//       refused), and no stored schedule was refused with a warning;
//   (b) every fetch and every variable after the step matches the reference
//       (atol * max(1, max|ref|) + rtol * |ref|, braze-tune's 2e-4 and 2e-3), and each
//       variable's update (after - before) matches the reference's update within 1e-3
//       of its largest element plus 2e-3 of itself: the update is what the tuned
//       kernels compute, and it is small beside the variable it changes.
// The parent checks that every file in schedules/ was used by some child: an entry no
// workload reaches (a new entry, or a program that changed) fails here.
//
// BRAZE_SHIPPED_SCHEDULES_DIR (parent and children read it) checks another directory
// than the source tree's schedules/, and BRAZE_SHIPPED_SCHEDULES_WORKLOADS
// ("<key hash>=<workload>,...") adds its entries' workloads to the table below: how a
// GPU entry tuned on a device is checked before it is committed (docs/CUDA.md, "GPU
// schedule tuning").
#include <dirent.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "braze/braze.h"
#include "braze/jit_scope.h"
#include "braze/logging.h"
#include "common/run_command.h"
#include "common/temp_files.h"
#include "compile/compile.h"
#include "device/features.h"
#include "runtime/flags.h"
#include "schedule/stored_schedule.h"

namespace braze {
namespace {

using testing_util::FilesIn;
using testing_util::ReadFile;
using testing_util::RunCommandRetryingLeakTracerCrash;

constexpr char kChildEnv[] = "BRAZE_SHIPPED_SCHEDULES_CHILD";
constexpr char kUsedTag[] = "shipped-schedule-used: ";
constexpr char kUnavailableTag[] = "shipped-schedule-target-unavailable: ";
constexpr char kChildTest[] = "EveryEntryThisCpuCanRunIsUsedAndMatchesTheReferenceOnSignedInputs";
constexpr char kDirEnv[] = "BRAZE_SHIPPED_SCHEDULES_DIR";
constexpr char kWorkloadsEnv[] = "BRAZE_SHIPPED_SCHEDULES_WORKLOADS";

// Which program's clusters each shipped entry was tuned on (its `cluster:`, `ops:` and
// `inputs:` lines say the same). A new entry needs a line here (and, for a new program,
// a builder below).
const std::map<std::string, std::string>& WorkloadOfEntry() {
  static const auto* table = new std::map<std::string, std::string>{
      {"b4faa359ab77ebad", "softmax_16384"},     // fusion_bench Softmax, 16384 rows
      {"e6d887490df92be2", "layernorm_4096"},    // fusion_bench LayerNorm, 4096 rows
      {"e6e439f2a8da6a88", "softmax_step_128"},  // train_models softmax step, batch 128
      {"dae7cd0a77bb494b", "softmax_step_128"},
      {"16b487bbda32743c", "softmax_step_128"},
      {"39a7eee732dd4037", "softmax_step_128"},
      {"f87587face8885f3", "softmax_step_1024"},      // the same at batch 1024
      {"c7a07182f4bbdba2", "mnist_softmax_example"},  // examples/mnist_softmax, batch -1
      {"c7b72f74f891609b", "mlp_example_eval"},       // examples/mlp's test-set accuracy
      // mlp_step_128 (train_models' MLP step, Adam, batch 128) and mlp_example's train
      // step (batch -1) have no entries: braze-tune kept the default for each of their
      // clusters it finished (2026-11-30; docs/SCHEDULES.md, "Shipped entries").
  };
  return *table;
}

// The workload of the entry keyed `key_hash`: the table's, or for another directory's
// entries (kDirEnv) kWorkloadsEnv's ("<key hash>=<workload>,...").
std::optional<std::string> WorkloadOf(const std::string& key_hash) {
  if (const char* extra = std::getenv(kWorkloadsEnv)) {
    for (absl::string_view pair : absl::StrSplit(extra, ',', absl::SkipEmpty())) {
      std::pair<std::string, std::string> kv = absl::StrSplit(pair, absl::MaxSplits('=', 1));
      if (kv.first == key_hash) return kv.second;
    }
  }
  auto it = WorkloadOfEntry().find(key_hash);
  if (it == WorkloadOfEntry().end()) return std::nullopt;
  return it->second;
}

// The directory checked: kDirEnv, else the source tree's schedules/ (empty: none).
std::string ScheduleDir() {
  if (const char* dir = std::getenv(kDirEnv)) return dir;
  return DefaultScheduleDirs().empty() ? "" : DefaultScheduleDirs()[0];
}

// A GPU entry's target ends in its device's architecture (" device=sm_90"); a CPU
// entry's is a Halide target.
bool IsDeviceTarget(const std::string& target) {
  return target.find(" device=") != std::string::npos;
}

// The device a GPU entry's workloads run on: the first of the kind its Halide part
// names (an entry's key holds no device index; braze-tune tunes jit:cuda's device 0).
std::optional<std::string> DeviceOfTarget(const std::string& target) {
  const std::string halide = target.substr(0, target.find(" device="));
  for (absl::string_view token : absl::StrSplit(halide, '-')) {
    if (token == "cuda") return "cuda:0";
    if (token == "opencl") return "opencl:0";
  }
  return std::nullopt;
}

// ---- The programs ----

struct Workload {
  std::unique_ptr<Graph> graph = std::make_unique<Graph>();
  Feeds feeds;
  std::vector<Tensor> fetches;
  std::vector<Tensor> targets;  // train ops
};

constexpr int64_t kPixels = 784, kHidden = 1024, kClasses = 10;

HostTensor Images(int64_t batch, uint64_t seed) {
  return HostTensor::RandomUniform(DType::kF32, {batch, kPixels}, seed, -2, 2);
}

HostTensor Labels(int64_t batch, uint64_t seed) {
  HostTensor u = HostTensor::RandomUniform(DType::kF64, {batch}, seed, 0, kClasses);
  HostTensor ys(DType::kI32, {batch});
  for (int64_t i = 0; i < batch; ++i) {
    ys.SetDouble(i, std::min<double>(kClasses - 1, std::floor(u.GetDouble(i))));
  }
  return ys;
}

// bench/fusion_bench.cc MakeRowOp, fused.
Workload RowOp(int64_t rows, bool layernorm) {
  Workload w;
  Graph& g = *w.graph;
  Tensor x = Placeholder(g, DType::kF32, {rows, 1024}, "x");
  {
    JitScope scope(g);
    if (!layernorm) {
      w.fetches = {Softmax(x)};
    } else {
      Tensor gamma = Const(g, HostTensor::RandomUniform(DType::kF32, {1024}, 2));
      Tensor beta = Const(g, HostTensor::RandomUniform(DType::kF32, {1024}, 3));
      w.fetches = {LayerNorm(x, gamma, beta)};
    }
  }
  w.feeds = {{x, HostTensor::RandomUniform(DType::kF32, {rows, 1024}, 4, -4, 4)}};
  return w;
}

// bench/train_models.cc MakeSoftmaxTrainStep(batch, fused = true).
Workload SoftmaxStep(int64_t batch) {
  Workload w;
  Graph& g = *w.graph;
  Tensor x = Placeholder(g, DType::kF32, {batch, kPixels}, "x");
  Tensor labels = Placeholder(g, DType::kI32, {batch}, "labels");
  const std::vector<Tensor> v = {Variable(g, HostTensor(DType::kF32, {kPixels, kClasses}), "W"),
                                 Variable(g, HostTensor(DType::kF32, {kClasses}), "b")};
  {
    JitScope scope(g);
    Tensor loss =
        Mean(SoftmaxCrossEntropyWithLogits(MatMul(x, v[0]) + v[1], OneHot(labels, kClasses)));
    auto train = Minimize(Optimizer::Sgd(0.5), loss, v);
    EXPECT_TRUE(train.ok()) << train.status();
    if (train.ok()) w.targets = *train;
    w.fetches = {loss};
  }
  w.feeds = {{x, Images(batch, 11)}, {labels, Labels(batch, 12)}};
  return w;
}

// bench/train_models.cc MakeMlpTrainStep(128, fused = true).
Workload MlpStep(int64_t batch) {
  Workload w;
  Graph& g = *w.graph;
  Tensor x = Placeholder(g, DType::kF32, {batch, kPixels}, "x");
  Tensor labels = Placeholder(g, DType::kI32, {batch}, "labels");
  std::vector<Tensor> v;  // w1, b1, w2, b2, w3, b3
  for (int layer = 0; layer < 3; ++layer) {
    const int64_t in = layer == 0 ? kPixels : kHidden;
    const int64_t out = layer == 2 ? kClasses : kHidden;
    v.push_back(Variable(
        g, HostTensor::RandomNormal(DType::kF32, {in, out}, layer + 1, 0, std::sqrt(2.0 / in))));
    v.push_back(Variable(g, HostTensor(DType::kF32, {out})));
  }
  {
    JitScope scope(g);
    Tensor h1 = Dense(x, v[0], v[1], Activation::kRelu);
    Tensor h2 = Dense(h1, v[2], v[3], Activation::kRelu);
    Tensor loss =
        Mean(SoftmaxCrossEntropyWithLogits(Dense(h2, v[4], v[5]), OneHot(labels, kClasses)));
    auto train = Minimize(Optimizer::Adam(1e-3), loss, v);
    EXPECT_TRUE(train.ok()) << train.status();
    if (train.ok()) w.targets = *train;
    w.fetches = {loss};
  }
  w.feeds = {{x, Images(batch, 21)}, {labels, Labels(batch, 22)}};
  return w;
}

// examples/mnist_softmax.cc under lib/trainer.cc's SessionRunner (--jit=scope): the
// variables, then placeholders of batch -1 and the lr scale, then the step in a scope.
Workload MnistSoftmaxExample(int64_t batch) {
  Workload w;
  Graph& g = *w.graph;
  Tensor W = Variable(g, HostTensor(DType::kF32, {kPixels, kClasses}), "W");
  Tensor b = Variable(g, HostTensor(DType::kF32, {kClasses}), "b");
  Tensor x = Placeholder(g, DType::kF32, {-1, kPixels}, "x");
  Tensor labels = Placeholder(g, DType::kI32, {-1}, "labels");
  Tensor lr_scale = Placeholder(g, DType::kF32, {}, "lr_scale");
  {
    JitScope scope(g);
    Tensor logits = MatMul(x, W) + b;
    Tensor loss = Mean(SoftmaxCrossEntropyWithLogits(logits, OneHot(labels, kClasses)));
    auto grads = Gradients({loss}, {W, b});
    EXPECT_TRUE(grads.ok()) << grads.status();
    if (grads.ok()) {
      auto train = ApplyGradients(Optimizer::Sgd(0.5),
                                  {{(*grads)[0] * lr_scale, W}, {(*grads)[1] * lr_scale, b}});
      EXPECT_TRUE(train.ok()) << train.status();
      if (train.ok()) w.targets = *train;
    }
    NameScope name_scope(g, "accuracy");
    Tensor correct = Equal(ArgMax(logits, 1), labels);
    w.fetches = {loss, Sum(Cast(correct, DType::kF32))};
  }
  w.feeds = {
      {x, Images(batch, 31)}, {labels, Labels(batch, 32)}, {lr_scale, HostTensor::Scalar(-0.75f)}};
  return w;
}

// examples/mlp.cc under lib/trainer.cc's SessionRunner (--jit=scope): the train step,
// or (eval) the test-set accuracy alone, as the trainer fetches it between epochs.
Workload MlpExample(int64_t batch, bool eval) {
  Workload w;
  Graph& g = *w.graph;
  struct Layer {
    Tensor w, b;
  };
  auto make_layer = [&](int64_t fan_in, int64_t fan_out, double gain, uint64_t seed,
                        const std::string& name) {
    Layer layer;
    layer.w = Variable(
        g,
        HostTensor::RandomNormal(DType::kF32, {fan_in, fan_out}, seed, 0, std::sqrt(gain / fan_in)),
        name + "/w");
    layer.b = Variable(g, HostTensor(DType::kF32, {fan_out}), name + "/b");
    return layer;
  };
  const Layer l1 = make_layer(kPixels, kHidden, 2.0, 1001, "layer1");
  const Layer l2 = make_layer(kHidden, kHidden, 2.0, 1002, "layer2");
  const Layer l3 = make_layer(kHidden, kClasses, 1.0, 1003, "logits");
  Tensor x = Placeholder(g, DType::kF32, {-1, kPixels}, "x");
  Tensor labels = Placeholder(g, DType::kI32, {-1}, "labels");
  {
    JitScope scope(g);
    Tensor h1 = Dense(x, l1.w, l1.b, Activation::kRelu);
    Tensor h2 = Dense(h1, l2.w, l2.b, Activation::kRelu);
    Tensor logits = Dense(h2, l3.w, l3.b);
    Tensor loss = Mean(SoftmaxCrossEntropyWithLogits(logits, OneHot(labels, kClasses)));
    auto train = Minimize(Optimizer::Adam(1e-3), loss, {l1.w, l1.b, l2.w, l2.b, l3.w, l3.b});
    EXPECT_TRUE(train.ok()) << train.status();
    if (train.ok() && !eval) w.targets = *train;
    NameScope name_scope(g, "accuracy");
    Tensor correct = Equal(ArgMax(logits, 1), labels);
    Tensor correct_sum = Sum(Cast(correct, DType::kF32));
    w.fetches = eval ? std::vector<Tensor>{correct_sum} : std::vector<Tensor>{loss, correct_sum};
  }
  w.feeds = {{x, Images(batch, 41)}, {labels, Labels(batch, 42)}};
  return w;
}

std::optional<Workload> Build(const std::string& name) {
  if (name == "softmax_16384") return RowOp(16384, false);
  if (name == "layernorm_4096") return RowOp(4096, true);
  if (name == "softmax_step_128") return SoftmaxStep(128);
  if (name == "softmax_step_1024") return SoftmaxStep(1024);
  if (name == "mlp_step_128") return MlpStep(128);
  if (name == "mnist_softmax_example") return MnistSoftmaxExample(128);
  if (name == "mlp_example") return MlpExample(128, /*eval=*/false);
  // Any batch of 16 or more has the same symbolic key as the trainer's 10000 rows.
  if (name == "mlp_example_eval") return MlpExample(160, /*eval=*/true);
  return std::nullopt;
}

// ---- The child: one target's workloads ----

// Captures log lines while alive, with --log_compiles on.
class Logs {
 public:
  Logs() {
    SetLogSink([this](LogSeverity severity, int, std::string_view text) {
      std::lock_guard<std::mutex> lock(mu_);
      (severity == LogSeverity::kWarning ? warnings_ : info_).emplace_back(text);
    });
    // BRAZE_FLAGS' own (a --dump_to, to tune a workload's clusters) and the log.
    BrazeFlags flags = previous_;
    flags.log_compiles = true;
    SetBrazeFlagsForTesting(flags);
  }
  ~Logs() {
    SetBrazeFlagsForTesting(previous_);
    SetLogSink(nullptr);
  }
  std::vector<std::string> info() const {
    std::lock_guard<std::mutex> lock(mu_);
    return info_;
  }
  std::vector<std::string> warnings() const {
    std::lock_guard<std::mutex> lock(mu_);
    return warnings_;
  }

 private:
  const BrazeFlags previous_ = GetBrazeFlags();
  mutable std::mutex mu_;
  std::vector<std::string> info_, warnings_;
};

// Signed random values for every variable; Adam's second moments positive and its step
// 4. Fan-in scaled weights keep the MLP's activations of order 1.
std::vector<std::pair<Tensor, HostTensor>> RandomState(Graph& g, uint64_t seed) {
  std::vector<std::pair<Tensor, HostTensor>> state;
  for (int id = 0; id < g.num_nodes(); ++id) {
    if (g.node(id).op() != OpKind::kVariable) continue;
    Tensor t(&g, id);
    const std::string& name = t.name();
    const Shape shape = t.shape();
    const uint64_t s = seed * 1000 + id;
    auto ends_with = [&](const char* suffix) {
      const std::string x(suffix);
      return name.size() >= x.size() && name.compare(name.size() - x.size(), x.size(), x) == 0;
    };
    HostTensor value;
    if (shape.empty()) {
      value = HostTensor::Filled(t.dtype(), shape, 4.0);  // Adam's step t
    } else if (ends_with("/v")) {
      value = HostTensor::RandomUniform(t.dtype(), shape, s, 0.5e-4, 1.5e-4);
    } else if (ends_with("/m")) {
      value = HostTensor::RandomUniform(t.dtype(), shape, s, -1e-2, 1e-2);
    } else {
      const double bound = shape.size() == 2 ? std::sqrt(3.0 / shape[0]) : 0.5;
      value = HostTensor::RandomUniform(t.dtype(), shape, s, -bound, bound);
    }
    state.emplace_back(t, std::move(value));
  }
  return state;
}

// The largest error / tolerance of the workload being checked, and how many values.
double worst_ratio = 0;
int64_t values_checked = 0;

// How many elements of `got` are outside the tolerance of `want`, with the worst one
// described in `*worst`. `scale`: the atol's scale (max(1, max|want|) when 0).
int64_t Mismatches(const HostTensor& got, const HostTensor& want, double atol, double rtol,
                   double scale, std::string* worst) {
  if (got.num_elements() != want.num_elements()) {
    *worst = absl::StrCat(got.num_elements(), " elements, want ", want.num_elements());
    return std::max<int64_t>(1, want.num_elements());
  }
  if (scale == 0) {
    scale = 1;
    for (int64_t i = 0; i < want.num_elements(); ++i) {
      scale = std::max(scale, std::abs(want.GetDouble(i)));
    }
  }
  const bool integer = !IsFloating(want.dtype());
  int64_t bad = 0;
  double worst_excess = -1;
  for (int64_t i = 0; i < want.num_elements(); ++i) {
    const double g = got.GetDouble(i), w = want.GetDouble(i);
    const double tol = integer ? 0 : atol * scale + rtol * std::abs(w);
    const double err = std::abs(g - w);
    ++values_checked;
    if (tol > 0) worst_ratio = std::max(worst_ratio, err / tol);
    if (!(err <= tol)) {
      ++bad;
      const double excess = std::isfinite(err) ? err / std::max(tol, 1e-300) : 1e300;
      if (excess > worst_excess) {
        worst_excess = excess;
        *worst = absl::StrCat("element ", i, ": ", g, ", want ", w, " (tolerance ", tol, ")");
      }
    }
  }
  return bad;
}

HostTensor Minus(const HostTensor& a, const HostTensor& b) {
  HostTensor d(DType::kF64, a.shape());
  for (int64_t i = 0; i < a.num_elements(); ++i) d.SetDouble(i, a.GetDouble(i) - b.GetDouble(i));
  return d;
}

// Runs `name` compiled on `device` (stored schedules from `dir`) and on the reference
// kernels from the same state; records the entries used in `*used`.
void RunWorkload(const std::string& name, const std::string& device, const std::string& dir,
                 std::set<std::string>* used) {
  SCOPED_TRACE(name);
  worst_ratio = 0;
  values_checked = 0;
  const auto t0 = std::chrono::steady_clock::now();
  std::optional<Workload> w = Build(name);
  ASSERT_TRUE(w.has_value()) << "no builder for workload '" << name << "'";
  ASSERT_TRUE(w->graph->status().ok()) << w->graph->status();
  const auto state = RandomState(*w->graph, 7);

  SessionOptions compiled_options;
  compiled_options.disk_cache = false;
  compiled_options.schedule_dirs = {dir};
  // Not "auto": on a GPU machine that would put a CPU entry's workload on the GPU.
  compiled_options.device = device;
  SessionOptions reference_options;
  reference_options.reference_only = true;
  Session compiled(*w->graph, compiled_options);
  Session reference(*w->graph, reference_options);
  for (const auto& [var, value] : state) {
    ASSERT_TRUE(compiled.AssignVariable(var, value).ok());
    ASSERT_TRUE(reference.AssignVariable(var, value).ok());
  }

  std::vector<HostTensor> got;
  {
    Logs logs;
    auto out = compiled.Run(w->feeds, w->fetches, w->targets);
    ASSERT_TRUE(out.ok()) << out.status();
    got = *std::move(out);
    // (a) The entries the compile log names as used.
    static const std::regex stored("stored schedule (\\S+\\.schedule)(:| refused)");
    for (const std::string& line : logs.info()) {
      for (std::sregex_iterator it(line.begin(), line.end(), stored), end; it != end; ++it) {
        const std::string path = (*it)[1];
        EXPECT_EQ((*it)[2], ":") << "refused: " << line;
        EXPECT_EQ(path.rfind(dir + "/", 0), 0u) << "an entry from outside " << dir << ": " << line;
        if ((*it)[2] == ":") {
          used->insert(path.substr(path.rfind('/') + 1));
          std::printf("%s%s %s\n", kUsedTag, path.substr(path.rfind('/') + 1).c_str(),
                      name.c_str());
        }
      }
    }
    for (const std::string& warning : logs.warnings()) {
      EXPECT_THAT(warning, ::testing::Not(::testing::HasSubstr("schedule"))) << warning;
    }
  }
  auto want = reference.Run(w->feeds, w->fetches, w->targets);
  ASSERT_TRUE(want.ok()) << want.status();

  // (b) The fetches, the variables and their updates.
  std::string worst;
  for (size_t i = 0; i < w->fetches.size(); ++i) {
    const int64_t bad = Mismatches(got[i], (*want)[i], 2e-4, 2e-3, 0, &worst);
    EXPECT_EQ(bad, 0) << "fetch " << i << " (" << w->fetches[i].name() << "): " << bad
                      << " elements outside the tolerance; worst " << worst;
  }
  for (const auto& [var, before] : state) {
    auto after_got = compiled.VariableValue(var);
    auto after_want = reference.VariableValue(var);
    ASSERT_TRUE(after_got.ok() && after_want.ok());
    int64_t bad = Mismatches(*after_got, *after_want, 2e-4, 2e-3, 0, &worst);
    EXPECT_EQ(bad, 0) << "variable " << var.name() << ": " << bad
                      << " elements outside the tolerance; worst " << worst;
    const HostTensor d_got = Minus(*after_got, before), d_want = Minus(*after_want, before);
    double scale = 0;
    for (int64_t i = 0; i < d_want.num_elements(); ++i) {
      scale = std::max(scale, std::abs(d_want.GetDouble(i)));
    }
    if (scale == 0) continue;  // not updated by this step
    bad = Mismatches(d_got, d_want, 1e-3, 2e-3, scale, &worst);
    EXPECT_EQ(bad, 0) << "update of " << var.name() << ": " << bad
                      << " elements outside the tolerance; worst " << worst;
  }
  // The entries are kernels' schedules: the step ran compiled kernels, not a fallback.
  const SessionStats stats = compiled.stats();
  EXPECT_GT(stats.cluster_launches, 0) << "no compiled cluster ran on " << device;
  std::printf(
      "workload %s on %s: %lld cluster launches, %lld ops on the reference kernels; %lld values "
      "checked, worst error %.3g of its tolerance, %.1f s\n",
      name.c_str(), device.c_str(), static_cast<long long>(stats.cluster_launches),
      static_cast<long long>(stats.reference_launches), static_cast<long long>(values_checked),
      worst_ratio, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
}

// Why this machine cannot run `target`'s entries on `device`: "" when it can. An error
// is one of the test's own, not a reason to skip.
absl::StatusOr<std::string> WhyUnavailable(const std::string& target, const std::string& device) {
  if (device == "cpu") {
    absl::StatusOr<std::string> here = JitTargetString();
    if (!here.ok()) return here.status();
    if (*here == target) return std::string();
    return absl::StrCat("this CPU's JIT target under HL_JIT_TARGET is ", *here);
  }
  absl::StatusOr<Device> d = ParseDevice(device);
  if (!d.ok()) return d.status();
  if (absl::Status s = device::CheckAvailable(*d); !s.ok()) {
    return absl::StrCat("no ", device, " on this machine: ", s.message());
  }
  absl::StatusOr<std::string> here = device::ScheduleTargetString(*d);
  if (!here.ok()) return here.status();
  if (*here == target) return std::string();
  return absl::StrCat("this machine's ", device, " is ", *here);
}

void RunChild(const std::string& spec) {
  // "<target>;<workload>,<workload>..."
  const std::vector<std::string> parts = absl::StrSplit(spec, ';');
  ASSERT_EQ(parts.size(), 2u) << spec;
  const std::string& target = parts[0];
  std::string device = "cpu";
  if (IsDeviceTarget(target)) {
    const std::optional<std::string> name = DeviceOfTarget(target);
    ASSERT_TRUE(name.has_value()) << "a device target of no CUDA or OpenCL: " << target;
    device = *name;
  }
  absl::StatusOr<std::string> why = WhyUnavailable(target, device);
  ASSERT_TRUE(why.ok()) << why.status();
  if (!why->empty()) {
    std::printf("%s%s (%s)\n", kUnavailableTag, target.c_str(), why->c_str());
    return;
  }
  const std::string dir = ScheduleDir();
  std::set<std::string> used;
  for (const std::string& name : std::vector<std::string>(absl::StrSplit(parts[1], ',')))
    RunWorkload(name, device, dir, &used);
}

// ---- The parent ----

std::string Shell(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

// What the children did, run once per process (both tests read it).
struct ShippedRun {
  std::string dir;
  std::vector<std::string> files;
  std::map<std::string, std::string> target_of;  // file -> target, for files with a workload
  std::vector<std::string> unknown;              // files no workload runs
  std::vector<std::string> child_failures;       // a child's output, when it failed
  std::set<std::string> used;
  // target -> "<target> (why this machine cannot run it)", the child's line.
  std::map<std::string, std::string> unavailable;
};

const ShippedRun& RunChildren() {
  static const ShippedRun* run = [] {
    auto* r = new ShippedRun;
    r->dir = ScheduleDir();
    if (r->dir.empty()) return r;
    r->files = FilesIn(r->dir, ".schedule");
    std::map<std::string, std::set<std::string>> workloads;  // target -> workloads
    for (const std::string& file : r->files) {
      const std::string path = r->dir + "/" + file;
      auto entry = ParseStoredSchedule(ReadFile(path), path);
      if (!entry.ok()) {
        r->unknown.push_back(absl::StrCat(file, " (", entry.status().ToString(), ")"));
        continue;
      }
      const std::optional<std::string> workload = WorkloadOf(entry->key_hash);
      if (!workload) {
        r->unknown.push_back(
            absl::StrCat(file, " (cluster ", entry->cluster, ": ", entry->inputs, ")"));
        continue;
      }
      workloads[entry->target].insert(*workload);
      r->target_of[file] = entry->target;
    }
    // The host's own target (ctest sets no HL_JIT_TARGET): a CPU target with a feature it
    // lacks is not run. Its child, under HL_JIT_TARGET, took the target for its own and
    // died of SIGILL (an AVX-512 entry on an AVX2 machine).
    const absl::StatusOr<std::string> host = JitTargetString();
    const std::vector<std::string> host_tokens =
        host.ok() ? absl::StrSplit(*host, '-') : std::vector<std::string>();
    for (const auto& [target, names] : workloads) {
      if (!IsDeviceTarget(target) && host.ok() && std::getenv("HL_JIT_TARGET") == nullptr) {
        std::vector<std::string> missing;
        for (const std::string& token : std::vector<std::string>(absl::StrSplit(target, '-'))) {
          if (std::find(host_tokens.begin(), host_tokens.end(), token) == host_tokens.end()) {
            missing.push_back(token);
          }
        }
        if (!missing.empty()) {
          r->unavailable[target] = absl::StrCat(target, " (this CPU's target ", *host, " lacks ",
                                                absl::StrJoin(missing, ", "), ")");
          continue;
        }
      }
      const std::string spec = absl::StrCat(target, ";", absl::StrJoin(names, ","));
      // A GPU entry's target is no Halide target: its child keeps the host's.
      const std::string jit_target =
          IsDeviceTarget(target) ? "" : absl::StrCat(" HL_JIT_TARGET=", Shell(target));
      // The child runs without LeakSanitizer's check: on CI's machine its stop-the-world
      // tracer crashed in the child of the Sapphire Rapids entries at every try (twice in
      // one run, three times in the next; never on this project's machine), which no
      // rerun cures. Leaks on these paths (stored schedules, the workloads' sessions) stay
      // checked by the other tests of this binary, in the parent process. The child is no
      // shard: with ctest's GTEST_TOTAL_SHARDS and GTEST_SHARD_INDEX inherited, a parent in
      // shard 2 of 2 ran a child whose one test fell in shard 1, i.e. no test at all, and
      // every entry read as unused.
      const std::string command = absl::StrCat(
          "env -u GTEST_TOTAL_SHARDS -u GTEST_SHARD_INDEX ", kChildEnv, "=", Shell(spec),
          jit_target, " ASAN_OPTIONS=\"${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0\"",
          " BRAZE_CACHE_DIR=off /proc/", getpid(), "/exe --gtest_brief=1 ",
          "--gtest_filter=ShippedSchedulesTest.", kChildTest);
      std::string output;
      const auto t0 = std::chrono::steady_clock::now();
      const int rc = RunCommandRetryingLeakTracerCrash(command, &output);
      std::printf("target %s: %s: %.1f s\n", target.c_str(), absl::StrJoin(names, ", ").c_str(),
                  std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
      if (rc != 0) {
        r->child_failures.push_back(
            absl::StrCat("the child for target ", target, " exited ", rc, ":\n", output));
      }
      if (const size_t at = output.find(kUnavailableTag); at != std::string::npos) {
        const size_t start = at + sizeof(kUnavailableTag) - 1;
        r->unavailable[target] = output.substr(start, output.find('\n', start) - start);
        continue;
      }
      for (const std::string& line : std::vector<std::string>(absl::StrSplit(output, '\n'))) {
        if (line.rfind("workload ", 0) == 0) std::printf("  %s\n", line.c_str());
        if (line.rfind(kUsedTag, 0) != 0) continue;
        const size_t start = sizeof(kUsedTag) - 1;
        r->used.insert(line.substr(start, line.find(' ', start) - start));
      }
    }
    return r;
  }();
  return *run;
}

TEST(ShippedSchedulesTest, EveryEntryThisCpuCanRunIsUsedAndMatchesTheReferenceOnSignedInputs) {
  if (const char* child = std::getenv(kChildEnv)) {
    RunChild(child);
    return;
  }
  const ShippedRun& r = RunChildren();
  ASSERT_FALSE(r.dir.empty()) << "no source schedules/ directory in this build (nor " << kDirEnv
                              << ")";
  ASSERT_FALSE(r.files.empty()) << "no entries in " << r.dir;
  for (const std::string& file : r.unknown) {
    ADD_FAILURE() << r.dir << "/" << file << " is not run by any workload of this test: add "
                  << "it to WorkloadOfEntry() in " << __FILE__;
  }
  for (const std::string& failure : r.child_failures) ADD_FAILURE() << failure;
  int checked = 0;
  for (const auto& [file, target] : r.target_of) {
    if (r.unavailable.count(target)) continue;
    ++checked;
    EXPECT_TRUE(r.used.count(file))
        << r.dir << "/" << file << " was not used by its workload '"
        << WorkloadOf(file.substr(0, file.find('.'))).value_or("?")
        << "': the program no longer makes its cluster, or the runtime skipped the entry";
  }
  std::printf("%zu of the %d entries this machine can run (of %zu shipped) used and checked\n",
              r.used.size(), checked, r.files.size());
  if (checked == 0 && !HasFailure()) {
    GTEST_SKIP() << "this machine can run none of the shipped entries' targets";
  }
}

// The entries tuned for a target this machine cannot run (the Sapphire Rapids entries on
// an AMD CPU without AVX512-FP16: device/halide_util.cc drops the feature; a GPU entry
// where its device is absent or of another architecture) are a skip that names them and
// says why; where the machine can run every target, this passes.
TEST(ShippedSchedulesTest, EntriesForATargetThisCpuCannotRunAreReportedAsSkipped) {
  if (std::getenv(kChildEnv)) return;
  const ShippedRun& r = RunChildren();
  std::vector<std::string> not_run;
  for (const auto& [file, target] : r.target_of) {
    if (r.unavailable.count(target)) not_run.push_back(file);
  }
  if (!not_run.empty()) {
    GTEST_SKIP() << not_run.size() << " shipped entries not run, this machine cannot run "
                 << "their targets: "
                 << absl::StrJoin(r.unavailable, "; ",
                                  [](std::string* out, const auto& kv) { out->append(kv.second); })
                 << "; the entries: " << absl::StrJoin(not_run, ", ");
  }
}

}  // namespace
}  // namespace braze
