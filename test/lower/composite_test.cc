// The composites from ops.h (Softmax, LogSoftmax, SoftmaxCrossEntropyWithLogits, Dense
// with every activation, LayerNorm, Gelu), each fused into one cluster and compiled under
// every scheduler, compared with the reference kernels run node by node.
#include <vector>

#include "braze/ops.h"
#include "gtest/gtest.h"
#include "lower/lower_test_util.h"

namespace braze {
namespace lowertest {
namespace {

const std::vector<Shape> kSmall = {{1, 1}, {7, 3}, {0, 3}};
const std::vector<Shape> kLarge = {{17, 33, 65}};

OpTestCase Rows(std::string name, std::function<Tensor(Case&, Tensor, const Shape&)> fn,
                double lo = -2, double hi = 2) {
  return {name,
          [=](Case& c, const Shape& s) {
            c.outputs = {fn(c, c.Input(DType::kF32, s, 101, lo, hi), s)};
          },
          kSmall,
          kLarge,
          {}};
}

// Dense on {M, K, N}: x [M, K] @ w [K, N] + b [N], then the activation.
OpTestCase DenseCase(std::string name, Activation activation) {
  return {name,
          [=](Case& c, const Shape& s) {
            Tensor x = c.Input(DType::kF32, {s[0], s[1]}, 111);
            Tensor w = c.Input(DType::kF32, {s[1], s[2]}, 112);
            Tensor b = c.Input(DType::kF32, {s[2]}, 113);
            c.outputs = {Dense(x, w, b, activation)};
          },
          {{1, 1, 1}, {7, 3, 5}, {0, 3, 4}, {3, 0, 4}},
          {{17, 33, 65}},
          {}};
}

std::vector<OpTestCase> Cases() {
  return {
      Rows("Softmax", [](Case&, Tensor x, const Shape&) { return Softmax(x); }),
      Rows("SoftmaxAxis0", [](Case&, Tensor x, const Shape&) { return Softmax(x, 0); }),
      Rows("LogSoftmax", [](Case&, Tensor x, const Shape&) { return LogSoftmax(x); }),
      Rows("SoftmaxCrossEntropy",
           [](Case& c, Tensor x, const Shape& s) {
             Tensor labels = Softmax(c.Input(DType::kF32, s, 102));
             return SoftmaxCrossEntropyWithLogits(x, labels);
           }),
      Rows("LayerNorm",
           [](Case& c, Tensor x, const Shape& s) {
             Tensor gamma = c.Input(DType::kF32, {s.back()}, 103, 0.5, 1.5);
             Tensor beta = c.Input(DType::kF32, {s.back()}, 104);
             return LayerNorm(x, gamma, beta);
           }),
      Rows(
          "Gelu", [](Case&, Tensor x, const Shape&) { return Gelu(x); }, -4, 4),
      DenseCase("Dense", Activation::kNone),
      DenseCase("DenseRelu", Activation::kRelu),
      DenseCase("DenseGelu", Activation::kGelu),
      DenseCase("DenseSigmoid", Activation::kSigmoid),
      DenseCase("DenseTanh", Activation::kTanh),
  };
}

class CompositeTest : public ::testing::TestWithParam<OpParam> {};

TEST_P(CompositeTest, MatchesReference) {
  RunOpTestCase(std::get<0>(GetParam()), std::get<1>(GetParam()));
}

INSTANTIATE_TEST_SUITE_P(Ops, CompositeTest,
                         ::testing::Combine(::testing::ValuesIn(Cases()),
                                            ::testing::ValuesIn(AllSchedulers())),
                         OpParamName);

// The same ops as CUDA kernels: compiled for CUDA and assembled with ptxas everywhere;
// run and compared with the reference only on a GPU (skipped without one).
class CompositeTestCuda : public ::testing::TestWithParam<OpTestCase> {};

TEST_P(CompositeTestCuda, CompilesAndAssembles) { RunOpTestCaseCudaCompile(GetParam()); }

TEST_P(CompositeTestCuda, MatchesReferenceOnGpu) { RunOpTestCaseCudaOnGpu(GetParam()); }

INSTANTIATE_TEST_SUITE_P(Ops, CompositeTestCuda, ::testing::ValuesIn(Cases()), CaseName);

// The same GPU schedules on opencl:0 (POCL on this machine), compared with the reference.
class CompositeTestOpenCL : public ::testing::TestWithParam<OpTestCase> {};

TEST_P(CompositeTestOpenCL, MatchesReference) { RunOpTestCaseOpenCL(GetParam()); }

INSTANTIATE_TEST_SUITE_P(Ops, CompositeTestOpenCL, ::testing::ValuesIn(Cases()), CaseName);

// The row composites at tiny, odd and prime row lengths, on OpenCL and for CUDA (the
// softmaxes' Max and sum of exps as one pass, lower/online_softmax.h, up to 16384): the GPU
// heuristic stages each row in shared memory (up to its shared budget, 32 KiB with the
// partials) and reads it there with guarded tails; rows of 8192 f32 no longer fit and
// keep reading global memory. Rows of 384 and 1024 are staged 4 adjacent elements per
// thread at a time (RowVector: whole passes of them).
std::vector<OpTestCase> RowLengthCases() {
  const std::vector<Shape> lengths = {{5, 1},    {4, 3},    {3, 17},   {3, 127},  {3, 384},
                                      {4, 1000}, {2, 1024}, {3, 1031}, {2, 4099}, {2, 8192}};
  std::vector<OpTestCase> cases;
  for (const OpTestCase& tc : Cases()) {
    if (tc.name != "Softmax" && tc.name != "LogSoftmax" && tc.name != "SoftmaxCrossEntropy" &&
        tc.name != "LayerNorm") {
      continue;
    }
    OpTestCase rows = tc;
    rows.name += "RowLengths";
    rows.small_shapes = lengths;
    rows.large_shapes = {};
    cases.push_back(rows);
  }
  return cases;
}

INSTANTIATE_TEST_SUITE_P(RowLengths, CompositeTestOpenCL, ::testing::ValuesIn(RowLengthCases()),
                         CaseName);
INSTANTIATE_TEST_SUITE_P(RowLengths, CompositeTestCuda, ::testing::ValuesIn(RowLengthCases()),
                         CaseName);

}  // namespace
}  // namespace lowertest
}  // namespace braze
