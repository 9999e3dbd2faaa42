// RandomUniform, RandomNormal and Dropout compiled under every CPU scheduler and on the
// GPU schedule (OpenCL on POCL), compared with the reference kernels BIT FOR BIT: odd,
// prime, tiny, rank-0 and symbolic (-1) shapes, fused with elementwise neighbours, one
// kernel for every step (docs/RANDOM.md).
#include <cstring>
#include <vector>

#include "braze/ops.h"
#include "gtest/gtest.h"
#include "lower/lower_test_util.h"

namespace braze {
namespace lowertest {
namespace {

const DType f32 = DType::kF32;
const DType f64 = DType::kF64;
// Not read (the comparisons here are of bits), but OpTestCase has the field.
constexpr Tolerance kBits{0, 0};

// Every output's bytes equal the reference's.
::testing::AssertionResult SameBits(const std::vector<HostTensor>& got,
                                    const std::vector<HostTensor>& want, const std::string& where) {
  if (got.size() != want.size()) return ::testing::AssertionFailure() << where << ": output count";
  for (size_t i = 0; i < got.size(); ++i) {
    if (got[i].type() != want[i].type()) {
      return ::testing::AssertionFailure()
             << where << ": output " << i << " is " << TypeString(got[i].type()) << ", not "
             << TypeString(want[i].type());
    }
    const auto* a = static_cast<const unsigned char*>(got[i].raw_data());
    const auto* b = static_cast<const unsigned char*>(want[i].raw_data());
    const size_t width = SizeOf(got[i].dtype());
    for (int64_t e = 0; e < got[i].num_elements(); ++e) {
      if (std::memcmp(a + e * width, b + e * width, width) != 0) {
        return ::testing::AssertionFailure()
               << where << ": output " << i << " element " << e << " is " << got[i].GetDouble(e)
               << ", the reference's " << want[i].GetDouble(e);
      }
    }
  }
  return ::testing::AssertionSuccess();
}

::testing::AssertionResult CompileRunSameBits(const Case& c, Scheduler scheduler) {
  if (!c.graph->status().ok()) return ::testing::AssertionFailure() << c.graph->status();
  const ClusterSpec spec = SpecOf(c);
  auto expected = ReferenceOutputs(spec, c.values);
  if (!expected.ok()) return ::testing::AssertionFailure() << "reference: " << expected.status();
  CompileOptions options;
  options.scheduler = scheduler;
  auto kernel = CompileCluster(spec, options);
  if (!kernel.ok()) return ::testing::AssertionFailure() << "compile: " << kernel.status();
  if ((*kernel)->scheduler_used() != scheduler) {  // fell through: for a known reason only
    const std::vector<std::string>& failures = (*kernel)->scheduler_failures();
    const std::string first = failures.empty() ? "(no failure recorded)" : failures[0];
    if (ExpectedRefusal(scheduler, first) == nullptr) {
      return ::testing::AssertionFailure()
             << SchedulerName(scheduler) << " did not schedule it: " << first;
    }
  }
  auto got = RunKernel(**kernel, c.values);
  if (!got.ok()) return ::testing::AssertionFailure() << "run: " << got.status();
  return SameBits(*got, *expected, SchedulerName((*kernel)->scheduler_used()));
}

Tensor Step(Case& c, int32_t value) { return c.Input(HostTensor::Scalar<int32_t>(value)); }

std::vector<OpTestCase> Cases() {
  return {
      {"UniformF32",
       [](Case& c, const Shape& s) {
         Tensor x = c.Input(f32, s, 1);
         c.outputs = {RandomUniform(x, Step(c, 3), 42)};
       },
       {{1}, {7, 3}, {13, 5}, {2, 3, 5}},
       {{67, 33}, {17, 33, 65}},
       kBits},
      {"UniformF64",
       [](Case& c, const Shape& s) {
         Tensor x = c.Input(f32, s, 2);
         c.outputs = {RandomUniform(x, Step(c, -7), 43, f64)};
       },
       {{1}, {7, 3}, {13, 5}},
       {{67, 33}},
       kBits},
      {"Normal",
       [](Case& c, const Shape& s) {
         Tensor x = c.Input(f32, s, 3);
         c.outputs = {RandomNormal(x, Step(c, 123456), 44)};
       },
       {{1}, {7, 3}, {13, 5}, {2, 3, 5}},
       {{67, 33}, {17, 33, 65}},
       kBits},
      {"DropoutAndNoiseFused",
       [](Case& c, const Shape& s) {
         // A dropout and an additive noise read by elementwise neighbours, plus a rank-0
         // draw: three random ops in one cluster (their default keys differ).
         Tensor x = c.Input(f32, s, 4);
         Tensor step = Step(c, 9);
         Tensor d = Dropout(x * 3.0, 0.3, step, 5);  // products feeding no add: exact
         Tensor scalar = c.Input(f32, {}, 5);
         c.outputs = {d * 2.0 + 1.0, x + RandomNormal(x, step, 5) * 0.5,
                      RandomUniform(scalar, step, 5)};
       },
       {{1}, {7, 3}, {13, 5}},
       {{67, 33}},
       kBits},
  };
}

class RandomOpsTest : public ::testing::TestWithParam<OpParam> {};

TEST_P(RandomOpsTest, BitIdenticalToTheReference) {
  const OpTestCase& tc = std::get<0>(GetParam());
  const Scheduler kind = std::get<1>(GetParam());
  std::vector<Shape> shapes = tc.small_shapes;
  if (kind == Scheduler::kAdams2019 || kind == Scheduler::kSafeDefault) {
    shapes.insert(shapes.end(), tc.large_shapes.begin(), tc.large_shapes.end());
  }
  for (const Shape& shape : shapes) {
    Case c;
    tc.build(c, shape);
    EXPECT_TRUE(CompileRunSameBits(c, kind)) << tc.name << " at " << ShapeString(shape);
  }
}

INSTANTIATE_TEST_SUITE_P(Ops, RandomOpsTest,
                         ::testing::Combine(::testing::ValuesIn(Cases()),
                                            ::testing::ValuesIn(AllSchedulers())),
                         OpParamName);

// One kernel of a -1 batch serves every batch size and every step, bit for bit: the
// step is read at run time, the flat index from the run's extents.
TEST(RandomOpsSymbolic, OneKernelForEveryBatchAndStep) {
  auto build = [](Case& c, int64_t n, int32_t step) {
    Tensor x = c.Input(f32, {n, 5}, 30 + n);
    Tensor s = Step(c, step);
    c.outputs = {RandomNormal(x, s, 8), Dropout(x, 0.5, s, 8), RandomUniform(x, s, 8, f64)};
  };
  Case c16;
  build(c16, 16, 0);
  ClusterSpec spec = SpecOf(c16);
  spec.input_symbols = {{0, -1}, {}};
  for (Scheduler kind : {Scheduler::kSafeDefault}) {  // the one that compiles symbolic shapes
    CompileOptions options;
    options.scheduler = kind;
    auto kernel = CompileCluster(spec, options);
    ASSERT_TRUE(kernel.ok()) << kernel.status();
    ASSERT_EQ((*kernel)->output_types()[0].shape[0], -1) << "the batch is not symbolic";
    for (int64_t n : {16, 1, 17, 40}) {
      for (int32_t step : {0, 1, -5, 2147483647}) {
        Case c;
        build(c, n, step);
        auto expected = ReferenceOutputs(SpecOf(c), c.values);
        ASSERT_TRUE(expected.ok()) << expected.status();
        auto got = RunKernelLike(**kernel, c.values, *expected);
        ASSERT_TRUE(got.ok()) << "batch " << n << ": " << got.status();
        EXPECT_TRUE(SameBits(*got, *expected, SchedulerName(kind)))
            << "batch " << n << ", step " << step;
      }
    }
  }
}

// Tensors with no elements: nothing drawn, compiled or not, beside a draw that has some.
TEST(RandomOpsEmpty, NoElementsNoBits) {
  for (const Shape& shape : {Shape{0}, Shape{3, 0, 2}}) {
    Case c;
    Tensor empty = c.Input(f32, shape, 40);
    Tensor x = c.Input(f32, {5}, 41);
    Tensor step = Step(c, 1);
    c.outputs = {RandomUniform(empty, step, 1), RandomNormal(empty, step, 1),
                 Dropout(empty, 0.5, step, 1), RandomNormal(x, step, 1)};
    EXPECT_TRUE(CompileRunSameBits(c, Scheduler::kSafeDefault)) << ShapeString(shape);
  }
}

// The GPU schedule on OpenCL (POCL): the same bits as the reference.
class RandomOpsOpenCL : public ::testing::TestWithParam<OpTestCase> {};
TEST_P(RandomOpsOpenCL, BitIdenticalToTheReference) {
  if (absl::Status s = CheckOpenCLAvailable(); !s.ok()) GTEST_SKIP() << s.message();
  const OpTestCase& tc = GetParam();
  std::vector<Shape> shapes = tc.small_shapes;
  shapes.insert(shapes.end(), tc.large_shapes.begin(), tc.large_shapes.end());
  for (const Shape& shape : shapes) {
    Case c;
    tc.build(c, shape);
    // A zero tolerance: equal values (the values are finite and never -0 here).
    EXPECT_TRUE(
        CompileRunCompareOnDevice(c, Tolerance{0, 0}, Device{Device::Kind::kOpenCL, 0}, true))
        << tc.name << " at " << ShapeString(shape);
  }
}
INSTANTIATE_TEST_SUITE_P(Ops, RandomOpsOpenCL, ::testing::ValuesIn(Cases()), CaseName);

// CUDA: compiled and assembled everywhere; run and compared on a GPU.
class RandomOpsCuda : public ::testing::TestWithParam<OpTestCase> {};
TEST_P(RandomOpsCuda, CompilesAndAssembles) { RunOpTestCaseCudaCompile(GetParam()); }
TEST_P(RandomOpsCuda, BitIdenticalOnGpu) {
  if (absl::Status s = CheckCudaAvailable(); !s.ok()) {
    GTEST_SKIP() << "needs a CUDA GPU, nothing run or compared: " << s.message();
  }
  const OpTestCase& tc = GetParam();
  std::vector<Shape> shapes = tc.small_shapes;
  shapes.insert(shapes.end(), tc.large_shapes.begin(), tc.large_shapes.end());
  for (const Shape& shape : shapes) {
    Case c;
    tc.build(c, shape);
    EXPECT_TRUE(CompileRunCompareOnDevice(c, Tolerance{0, 0}, Device{Device::Kind::kCuda, 0}, true))
        << tc.name << " at " << ShapeString(shape);
  }
}
INSTANTIATE_TEST_SUITE_P(Ops, RandomOpsCuda, ::testing::ValuesIn(Cases()), CaseName);

}  // namespace
}  // namespace lowertest
}  // namespace braze
