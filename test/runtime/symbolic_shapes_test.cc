// Symbolic shapes (SessionOptions::symbolic_shapes): a -1 dim of the program compiles
// once, as a run-time extent, and that one kernel serves every size from
// kMinSymbolicExtent up; every result is checked against the reference kernels.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "braze/device.h"
#include "braze/jit_scope.h"
#include "braze/logging.h"
#include "braze/ops.h"
#include "braze/optimizers.h"
#include "braze/session.h"
#include "runtime/flags.h"

namespace braze {
namespace {

using ::testing::HasSubstr;

void ExpectNear(const HostTensor& want, const HostTensor& got, double tol = 2e-5) {
  ASSERT_EQ(want.type(), got.type());
  for (int64_t i = 0; i < want.num_elements(); ++i) {
    const double w = want.GetDouble(i), v = got.GetDouble(i);
    ASSERT_NEAR(v, w, tol * (1 + std::abs(w))) << "element " << i;
  }
}

SessionOptions Reference() {
  SessionOptions o;
  o.reference_only = true;
  return o;
}

SessionOptions NoDiskCache() {
  SessionOptions o;
  o.disk_cache = false;
  return o;
}

// Two clusters: a softmax over rows (a row reduction) and a mean over the batch (a
// reduction over the symbolic dim). `scale` makes each test's kernels its own (the
// compile cache is process-wide and keyed by structure).
struct RowsModel {
  Graph g;
  Tensor x = Placeholder(g, DType::kF32, {-1, 37}, "x");
  Tensor probs, column_mean;
  explicit RowsModel(double scale) {
    JitScope scope(g);
    probs = Softmax(x * scale + 0.5);
    column_mean = Mean(Tanh(x), {0}) * scale;
  }
  Feeds Feed(int64_t rows) const {
    return {{x, HostTensor::RandomUniform(DType::kF32, {rows, 37}, 1000 + rows)}};
  }
};

TEST(SymbolicShapesTest, OneKernelServesEverySizeFromTheMinimumUp) {
  RowsModel m(2.0);
  Session session(m.g, NoDiskCache());
  Session reference(m.g, Reference());
  const std::vector<int64_t> sizes = {64, 16, 17, 31, 97, 100, 128, 1021, 64};
  for (int64_t rows : sizes) {
    const Feeds feeds = m.Feed(rows);
    auto got = session.Run(feeds, {m.probs, m.column_mean});
    auto want = reference.Run(feeds, {m.probs, m.column_mean});
    ASSERT_TRUE(got.ok()) << got.status();
    ASSERT_TRUE(want.ok()) << want.status();
    EXPECT_EQ((*got)[0].shape(), (Shape{rows, 37}));
    ExpectNear((*want)[0], (*got)[0]);
    ExpectNear((*want)[1], (*got)[1]);
  }
  const SessionStats stats = session.stats();
  EXPECT_EQ(stats.compiles, 2) << "one kernel per cluster for every size >= 16";
  EXPECT_EQ(stats.cache_hits, 2 * static_cast<int64_t>(sizes.size() - 1));
  EXPECT_EQ(stats.cluster_launches, 2 * static_cast<int64_t>(sizes.size()));
  EXPECT_EQ(stats.reference_launches, 0);
}

TEST(SymbolicShapesTest, SizesBelowTheMinimumShareASecondKernel) {
  RowsModel m(3.0);
  Session session(m.g, NoDiskCache());
  Session reference(m.g, Reference());
  for (int64_t rows : {1, 3, 1, 15, 40, 3, 2, 64, 7, 16}) {
    const Feeds feeds = m.Feed(rows);
    auto got = session.Run(feeds, {m.probs, m.column_mean});
    auto want = reference.Run(feeds, {m.probs, m.column_mean});
    ASSERT_TRUE(got.ok()) << got.status();
    EXPECT_EQ((*got)[0].shape(), (Shape{rows, 37}));
    ExpectNear((*want)[0], (*got)[0]);
    ExpectNear((*want)[1], (*got)[1]);
  }
  // Per cluster: one kernel for 1 to 15, one for 16 and up.
  EXPECT_EQ(session.stats().compiles, 2 * 2);
  EXPECT_EQ(session.stats().reference_launches, 0);
}

// BroadcastTo's -1 keeps the batch dim: [n, 1] to [n, 5] in strict mode (the broadcast
// was accepted and then never ran: "f32[?,5] is not fully defined"), sizes 0 to 97.
TEST(SymbolicShapesTest, BroadcastToKeepsADynamicBatchDim) {
  Graph g;
  Tensor x = Placeholder(g, DType::kF32, {-1, 1}, "x");
  Tensor y;
  {
    JitScope scope(g);
    y = Exp(BroadcastTo(x, {-1, 5}) * 0.25) +
        Const(g, HostTensor::RandomUniform(DType::kF32, {5}, 3));
  }
  SessionOptions strict = NoDiskCache();
  strict.strict = true;
  Session session(g, strict);
  Session reference(g, Reference());
  for (int64_t rows : {3, 1, 17, 0, 97}) {
    const Feeds feeds = {{x, HostTensor::RandomUniform(DType::kF32, {rows, 1}, rows)}};
    auto got = session.Run(feeds, {y});
    auto want = reference.Run(feeds, {y});
    ASSERT_TRUE(got.ok()) << got.status();
    ASSERT_TRUE(want.ok()) << want.status();
    EXPECT_EQ((*got)[0].shape(), (Shape{rows, 5}));
    ExpectNear((*want)[0], (*got)[0]);
  }
}

TEST(SymbolicShapesTest, SizeZeroComputesNothingAndMatches) {
  RowsModel m(3.5);
  Session session(m.g, NoDiskCache());
  Session reference(m.g, Reference());
  for (int64_t rows : {0, 20, 0, 5}) {
    const Feeds feeds = m.Feed(rows);
    auto got = session.Run(feeds, {m.probs, m.column_mean});
    auto want = reference.Run(feeds, {m.probs, m.column_mean});
    ASSERT_TRUE(got.ok()) << got.status();
    ASSERT_TRUE(want.ok()) << want.status();
    EXPECT_EQ((*got)[0].shape(), (Shape{rows, 37}));
    ExpectNear((*want)[0], (*got)[0]);
    // The mean over no rows is 0/0: NaN in both.
    for (int64_t i = 0; i < (*want)[1].num_elements(); ++i) {
      const double w = (*want)[1].GetDouble(i), g = (*got)[1].GetDouble(i);
      if (std::isnan(w)) {
        EXPECT_TRUE(std::isnan(g)) << "element " << i;
      } else {
        EXPECT_NEAR(g, w, 2e-5 * (1 + std::abs(w)));
      }
    }
  }
}

TEST(SymbolicShapesTest, OffCompilesEverySize) {
  RowsModel m(4.0);
  SessionOptions options = NoDiskCache();
  options.symbolic_shapes = false;
  Session session(m.g, options);
  for (int64_t rows : {20, 30, 40}) ASSERT_TRUE(session.Run(m.Feed(rows), {m.probs}).ok());
  EXPECT_EQ(session.stats().compiles, 3);
}

// The tutorial's model: softmax regression trained by SGD. The step's clusters hold a
// MatMul over the batch (x^T dy: a reduction whose extent is symbolic).
struct SoftmaxRegression {
  Graph g;
  Tensor x = Placeholder(g, DType::kF32, {-1, 50}, "x");
  Tensor y = Placeholder(g, DType::kF32, {-1, 10}, "y");
  Tensor w = Variable(g, HostTensor::RandomNormal(DType::kF32, {50, 10}, 5, 0.0, 0.1), "w");
  Tensor b = Variable(g, HostTensor::Filled(DType::kF32, {10}, 0.1), "b");
  Tensor loss;
  std::vector<Tensor> step;
  // `lr`: tests use different rates, so that each compiles kernels of its own (the
  // compile cache is process-wide).
  explicit SoftmaxRegression(double lr = 0.5) {
    JitScope scope(g);
    loss = Mean(SoftmaxCrossEntropyWithLogits(MatMul(x, w) + b, y));
    step = *Minimize(Optimizer::Sgd(lr), loss, {w, b});
  }
  Feeds Batch(int64_t rows, uint64_t seed) const {
    HostTensor labels = HostTensor::Filled(DType::kF32, {rows, 10}, 0);
    for (int64_t r = 0; r < rows; ++r) labels.SetDouble(r * 10 + (r * 7 + seed) % 10, 1);
    return {{x, HostTensor::RandomUniform(DType::kF32, {rows, 50}, seed)}, {y, labels}};
  }
};

TEST(SymbolicShapesTest, ATrainingLoopWithASmallerLastBatchCompilesItsStepOnce) {
  SoftmaxRegression m;
  Session session(m.g, NoDiskCache());
  Session reference(m.g, Reference());
  // Two epochs of 300 examples in batches of 128: 128, 128, 44, 128, 128, 44.
  int64_t compiles_after_first_batch = 0;
  for (int epoch = 0; epoch < 2; ++epoch) {
    for (int64_t start = 0; start < 300; start += 128) {
      const int64_t rows = std::min<int64_t>(128, 300 - start);
      const Feeds feeds = m.Batch(rows, 10 * epoch + start);
      auto got = session.Run(feeds, {m.loss}, m.step);
      auto want = reference.Run(feeds, {m.loss}, m.step);
      ASSERT_TRUE(got.ok()) << got.status();
      ASSERT_TRUE(want.ok()) << want.status();
      ExpectNear((*want)[0], (*got)[0], 1e-4);
      if (compiles_after_first_batch == 0) {
        compiles_after_first_batch = session.stats().compiles;
        ASSERT_GT(compiles_after_first_batch, 0);
      }
    }
  }
  EXPECT_EQ(session.stats().compiles, compiles_after_first_batch)
      << "the last batch (44 rows) ran the kernels compiled for 128";
  auto w = session.Run({}, {m.w, m.b});
  auto w_ref = reference.Run({}, {m.w, m.b});
  ASSERT_TRUE(w.ok() && w_ref.ok());
  ExpectNear((*w_ref)[0], (*w)[0], 1e-4);
  ExpectNear((*w_ref)[1], (*w)[1], 1e-4);
}

TEST(SymbolicShapesTest, ALastBatchBelowTheMinimumCompilesOnceMore) {
  SoftmaxRegression m(0.25);
  Session session(m.g, NoDiskCache());
  Session reference(m.g, Reference());
  // Two epochs of 261 examples in batches of 128: 128, 128, 5, 128, 128, 5; then a
  // batch of one.
  int64_t compiles_after_first_batch = 0, compiles_after_first_epoch = 0;
  for (int epoch = 0; epoch < 3; ++epoch) {
    for (int64_t start = 0; start < 261; start += 128) {
      const int64_t rows = epoch == 2 ? 1 : std::min<int64_t>(128, 261 - start);
      const Feeds feeds = m.Batch(rows, 10 * epoch + start);
      auto got = session.Run(feeds, {m.loss}, m.step);
      auto want = reference.Run(feeds, {m.loss}, m.step);
      ASSERT_TRUE(got.ok()) << got.status();
      ASSERT_TRUE(want.ok()) << want.status();
      ExpectNear((*want)[0], (*got)[0], 1e-4);
      if (compiles_after_first_batch == 0) compiles_after_first_batch = session.stats().compiles;
    }
    if (epoch == 0) compiles_after_first_epoch = session.stats().compiles;
  }
  ASSERT_GT(compiles_after_first_batch, 0);
  // The batch of 5 compiled, once, each symbolic cluster's kernel for sizes 1 to 15.
  EXPECT_GT(compiles_after_first_epoch, compiles_after_first_batch);
  EXPECT_LE(compiles_after_first_epoch, 2 * compiles_after_first_batch);
  EXPECT_EQ(session.stats().compiles, compiles_after_first_epoch)
      << "the second epoch and the batches of one compiled nothing";
  EXPECT_EQ(session.stats().reference_launches, 0);
  auto w = session.Run({}, {m.w, m.b});
  auto w_ref = reference.Run({}, {m.w, m.b});
  ASSERT_TRUE(w.ok() && w_ref.ok());
  ExpectNear((*w_ref)[0], (*w)[0], 1e-4);
  ExpectNear((*w_ref)[1], (*w)[1], 1e-4);
}

TEST(SymbolicShapesTest, EachSizedDimGetsItsOwnSymbol) {
  // Two -1 dims that differ (a batch and a sequence length) and a -1 inner dim.
  Graph g;
  Tensor a = Placeholder(g, DType::kF32, {-1, 24}, "a");
  Tensor c = Placeholder(g, DType::kF32, {24, -1}, "c");
  Tensor out, sums;
  {
    JitScope scope(g);
    out = Relu(MatMul(a, c) - 0.375);  // [n, m]
    sums = Sum(Exp(c * 0.5), {0});     // [m]: a symbolic innermost dim
  }
  Session session(g, NoDiskCache());
  Session reference(g, Reference());
  for (auto [n, m] :
       std::vector<std::pair<int64_t, int64_t>>{{32, 40}, {40, 32}, {17, 100}, {33, 33}}) {
    const Feeds feeds = {{a, HostTensor::RandomUniform(DType::kF32, {n, 24}, n)},
                         {c, HostTensor::RandomUniform(DType::kF32, {24, m}, m + 1)}};
    auto got = session.Run(feeds, {out, sums});
    auto want = reference.Run(feeds, {out, sums});
    ASSERT_TRUE(got.ok()) << got.status();
    ExpectNear((*want)[0], (*got)[0]);
    ExpectNear((*want)[1], (*got)[1]);
  }
  // The MatMul's cluster: (32, 40), (40, 32), (17, 100) share one kernel; (33, 33) has
  // one class for both dims, so a kernel of its own. The Sum's: one kernel.
  EXPECT_EQ(session.stats().compiles, 3);
}

TEST(SymbolicShapesTest, AReshapeThatMergesTheSymbolicDimIsCompiledPerSize) {
  Graph g;
  Tensor x = Placeholder(g, DType::kF32, {-1, 6}, "x");
  Tensor y;
  {
    JitScope scope(g);
    y = Reshape(Tanh(x), {-1}) * 2.0;  // [6n]: not a size one kernel can hold
  }
  Session session(g, NoDiskCache());
  Session reference(g, Reference());
  for (int64_t rows : {20, 21}) {
    const Feeds feeds = {{x, HostTensor::RandomUniform(DType::kF32, {rows, 6}, rows)}};
    auto got = session.Run(feeds, {y});
    auto want = reference.Run(feeds, {y});
    ASSERT_TRUE(got.ok()) << got.status();
    ExpectNear((*want)[0], (*got)[0]);
  }
  EXPECT_EQ(session.stats().compiles, 2);
}

TEST(SymbolicShapesTest, ARankOneOutputIsChunkedAboveAChunkAndPlainBelow) {
  // Compiled at 2^16 elements: parallel chunks in a specialization for extents of at
  // least a chunk; below that, one vector loop. Sizes on both sides and at the edge.
  Graph g;
  Tensor x = Placeholder(g, DType::kF32, {-1}, "x");
  Tensor y;
  {
    JitScope scope(g);
    y = Minimum(Maximum(x * 1.5 + 0.25, ScalarConst(g, -0.5)), ScalarConst(g, 0.75)) * x;
  }
  Session session(g, NoDiskCache());
  Session reference(g, Reference());
  for (int64_t n : {65536, 16, 17, 100, 4095, 4096, 4097, 8191, 65535, 65537, 300007}) {
    const Feeds feeds = {{x, HostTensor::RandomUniform(DType::kF32, {n}, n)}};
    auto got = session.Run(feeds, {y});
    auto want = reference.Run(feeds, {y});
    ASSERT_TRUE(got.ok()) << got.status();
    ExpectNear((*want)[0], (*got)[0]);
  }
  EXPECT_EQ(session.stats().compiles, 1);
}

TEST(SymbolicShapesTest, AFewRowsOfAStoredMatMulAreReadInBounds) {
  // The MatMul's result is stored (tiled up to 16 rows) and only 5 rows are read: the
  // tiles stay inside the symbolic extent, so nothing is read before row 0.
  Graph g;
  Tensor a = Placeholder(g, DType::kF32, {-1, 20}, "a");
  Tensor w = Const(g, HostTensor::RandomUniform(DType::kF32, {20, 24}, 3));
  Tensor y;
  {
    JitScope scope(g);
    Tensor h = MatMul(a, w);
    y = Relu(Slice(h, {0, 0}, {5, 24})) * 0.5;
  }
  Session session(g, NoDiskCache());
  Session reference(g, Reference());
  for (int64_t rows : {64, 16, 21}) {
    const Feeds feeds = {{a, HostTensor::RandomUniform(DType::kF32, {rows, 20}, rows)}};
    auto got = session.Run(feeds, {y});
    auto want = reference.Run(feeds, {y});
    ASSERT_TRUE(got.ok()) << got.status();
    ExpectNear((*want)[0], (*got)[0], 1e-4);
  }
  EXPECT_EQ(session.stats().compiles, 1);
  EXPECT_EQ(session.stats().reference_launches, 0) << "no run fell back";
}

TEST(SymbolicShapesTest, ASymbolicSizeOnlyInAnEmptyInputIsCompiledPerSize) {
  // x has no elements, so no buffer gives its batch size; the sum over its empty rows
  // has that many elements.
  Graph g;
  Tensor x = Placeholder(g, DType::kF32, {-1, 0}, "x");
  Tensor y;
  {
    JitScope scope(g);
    y = Exp(Sum(x, {1}) + 0.5);
  }
  Session session(g, NoDiskCache());
  for (int64_t rows : {20, 33}) {
    auto got = session.Run({{x, HostTensor(DType::kF32, {rows, 0})}}, {y});
    ASSERT_TRUE(got.ok()) << got.status();
    ASSERT_EQ((*got)[0].shape(), (Shape{rows}));
    for (int64_t i = 0; i < rows; ++i) ASSERT_NEAR((*got)[0].GetDouble(i), std::exp(0.5), 1e-6);
  }
}

TEST(SymbolicShapesTest, LogCompilesNamesTheSymbolicDims) {
  std::vector<std::string> lines;
  SetLogSink([&](LogSeverity, int, std::string_view text) { lines.emplace_back(text); });
  BrazeFlags flags;
  flags.log_compiles = true;
  SetBrazeFlagsForTesting(flags);
  {
    RowsModel m(5.0);
    Session session(m.g, NoDiskCache());
    ASSERT_TRUE(session.Run(m.Feed(50), {m.probs}).ok());
    ASSERT_TRUE(session.Run(m.Feed(60), {m.probs}).ok());
  }
  SetBrazeFlagsForTesting(BrazeFlags{});
  SetLogSink(nullptr);
  std::string all;
  for (const std::string& l : lines) all += l + "\n";
  EXPECT_THAT(all, HasSubstr("symbolic in input 0 dim 0"));
  EXPECT_THAT(all, HasSubstr("cache hit"));
}

}  // namespace
}  // namespace braze

namespace braze {
namespace {

// Symbolic shapes on a GPU device: the heuristic's guarded splits hold for every size,
// so one kernel per cluster serves every batch >= 16 and one more every batch below
// (schedule/gpu_schedule.h). jit:opencl runs the GPU schedules on POCL here; cuda:0
// runs where there is a GPU. Each model is its own (the compile cache is process-wide).
class SymbolicShapesOnDevice : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    const absl::Status s =
        GetParam() == "jit:opencl" ? CheckOpenCLAvailable() : CheckCudaAvailable();
    if (!s.ok()) GTEST_SKIP() << s.message();
  }
};

TEST_P(SymbolicShapesOnDevice, OneKernelPerClusterServesEveryBatch) {
  Graph g;
  Tensor x = Placeholder(g, DType::kF32, {-1, 37}, "x");
  Tensor probs, column_mean, chain;
  {
    DeviceScope on(g, GetParam());
    JitScope scope(g);
    probs = Softmax(x * 7.0 + 0.5);          // a row reduction per batch row
    column_mean = Mean(Tanh(x), {0}) * 7.0;  // a reduction over the batch
    chain = Sigmoid(x * x - 0.25) * 3.0;     // pointwise over [batch, 37]
  }
  SessionOptions opts;
  opts.device = "cpu";  // ops outside the scope: none here but the feed's
  opts.disk_cache = false;
  opts.strict = true;  // a kernel that fails to run is an error, not an op-by-op fallback
  Session session(g, opts);
  Session reference(g, Reference());
  const std::vector<int64_t> sizes = {64, 16, 17, 97, 1021, 64, 1, 3, 15, 2, 40};
  for (int64_t rows : sizes) {
    SCOPED_TRACE(::testing::Message() << rows << " rows");
    const Feeds feeds = {{x, HostTensor::RandomUniform(DType::kF32, {rows, 37}, 7000 + rows)}};
    auto got = session.Run(feeds, {probs, column_mean, chain});
    auto want = reference.Run(feeds, {probs, column_mean, chain});
    ASSERT_TRUE(got.ok()) << got.status();
    ASSERT_TRUE(want.ok()) << want.status();
    EXPECT_EQ((*got)[0].shape(), (Shape{rows, 37}));
    for (int o = 0; o < 3; ++o) ExpectNear((*want)[o], (*got)[o]);
  }
  // Every cluster: one kernel for 16 rows and up, one for 1 to 15.
  const SessionStats stats = session.stats();
  EXPECT_GT(stats.cluster_launches, 0);
  EXPECT_EQ(stats.compiles * static_cast<int64_t>(sizes.size()), 2 * stats.cluster_launches)
      << "compiles " << stats.compiles << ", launches " << stats.cluster_launches;
}

// A row reduction over a symbolic dim: the kernel for sizes >= 16 is compiled at the
// first size (20), and must still split the row across a bounded number of threads at
// 4099 or 100003 (unsplit, each element would be a thread of one block).
TEST_P(SymbolicShapesOnDevice, ARowOfSymbolicLengthIsSplitWhateverItsLength) {
  Graph g;
  Tensor x = Placeholder(g, DType::kF32, {-1}, "x");
  Tensor mean, max;
  {
    DeviceScope on(g, GetParam());
    JitScope scope(g);
    mean = Mean(Exp(x * 0.5)) + 1.0;
    max = Max(x * 3.0 - 1.0);
  }
  SessionOptions opts;
  opts.device = "cpu";
  opts.disk_cache = false;
  opts.strict = true;
  Session session(g, opts);
  Session reference(g, Reference());
  for (int64_t n : {20, 4099, 100003, 17, 3, 1, 20}) {
    SCOPED_TRACE(::testing::Message() << n << " elements");
    const Feeds feeds = {{x, HostTensor::RandomUniform(DType::kF32, {n}, 9000 + n)}};
    auto got = session.Run(feeds, {mean, max});
    auto want = reference.Run(feeds, {mean, max});
    ASSERT_TRUE(got.ok()) << got.status();
    ASSERT_TRUE(want.ok()) << want.status();
    for (int o = 0; o < 2; ++o) ExpectNear((*want)[o], (*got)[o]);
  }
}

INSTANTIATE_TEST_SUITE_P(Devices, SymbolicShapesOnDevice, ::testing::Values("jit:opencl", "cuda:0"),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           return std::string(info.param == "jit:opencl" ? "OpenCL" : "Cuda");
                         });

}  // namespace
}  // namespace braze
