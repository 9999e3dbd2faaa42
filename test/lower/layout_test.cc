// Const and the layout ops (Reshape, Transpose, BroadcastTo, Concat, Slice, Pad, OneHot)
// compiled under every scheduler and compared with the reference kernels.
#include <vector>

#include "braze/ops.h"
#include "gtest/gtest.h"
#include "lower/lower_test_util.h"

namespace braze {
namespace lowertest {
namespace {

constexpr Tolerance kExact{0, 0};
const std::vector<Shape> kSmall = {{1, 1}, {7, 3}, {0, 3}};
const std::vector<Shape> kLarge = {{17, 33, 65}};

OpTestCase Layout(std::string name, std::function<std::vector<Tensor>(Tensor, const Shape&)> fn,
                  DType dtype = DType::kF32) {
  return {name, [=](Case& c, const Shape& s) { c.outputs = fn(c.Input(dtype, s, 91), s); }, kSmall,
          kLarge, kExact};
}

std::vector<OpTestCase> Cases() {
  return {
      Layout("Reshape",
             [](Tensor x, const Shape& s) {
               // Flatten, reversed dims (regrouped runs), and added unit dims.
               const int64_t n = NumElements(s);
               Shape unit = s;
               unit.insert(unit.begin() + 1, 1);
               unit.push_back(1);
               return std::vector<Tensor>{Reshape(x, {n}), Reshape(x, Shape(s.rbegin(), s.rend())),
                                          Reshape(x, unit)};
             }),
      Layout(
          "ReshapeI32",
          [](Tensor x, const Shape& s) {
            return std::vector<Tensor>{Reshape(x, {NumElements(s)})};
          },
          DType::kI32),
      Layout("Transpose",
             [](Tensor x, const Shape& s) {
               if (s.size() == 2) return std::vector<Tensor>{Transpose(x, {1, 0})};
               return std::vector<Tensor>{Transpose(x, {2, 0, 1}), Transpose(x, {1, 0, 2})};
             }),
      Layout("BroadcastTo",
             [](Tensor x, const Shape& s) {
               // x's last dim broadcast over a new leading dim and a unit dim.
               Shape to = s;
               to.insert(to.begin(), 2);
               Tensor row = Slice(x, std::vector<int64_t>(s.size(), 0), [&] {
                 std::vector<int64_t> size(s.begin(), s.end());
                 size[0] = s[0] > 0 ? 1 : 0;
                 return size;
               }());
               Shape row_to = s;
               return std::vector<Tensor>{BroadcastTo(x, to), BroadcastTo(row, row_to)};
             }),
      {"Concat",
       [](Case& c, const Shape& s) {
         Tensor a = c.Input(DType::kF32, s, 92);
         Tensor b = c.Input(DType::kF32, s, 93);
         Shape empty_last = s;
         empty_last.back() = 0;
         Tensor e = c.Input(DType::kF32, empty_last, 94);
         c.outputs = {Concat({a, b}, 0), Concat({a, e, b, a}, -1)};
       },
       kSmall, kLarge, kExact},
      {"ConcatBool",
       [](Case& c, const Shape& s) {
         Tensor a = c.Input(DType::kBool, s, 95);
         Tensor b = c.Input(DType::kBool, s, 96);
         c.outputs = {Concat({a, b}, 1)};
       },
       kSmall, kLarge, kExact},
      Layout("Slice",
             [](Tensor x, const Shape& s) {
               std::vector<int64_t> begin, size, to_end;
               for (int64_t d : s) {
                 begin.push_back(d > 1 ? 1 : 0);
                 size.push_back(d > 2 ? d - 2 : d - (d > 1 ? 1 : 0));
                 to_end.push_back(-1);
               }
               return std::vector<Tensor>{Slice(x, begin, size), Slice(x, begin, to_end)};
             }),
      Layout("Pad",
             [](Tensor x, const Shape& s) {
               std::vector<std::pair<int64_t, int64_t>> pads(s.size(), {0, 0});
               pads.front() = {1, 2};
               pads.back() = {0, 3};
               return std::vector<Tensor>{Pad(x, pads, 1.5)};
             }),
      Layout(
          "PadI32",
          [](Tensor x, const Shape& s) {
            std::vector<std::pair<int64_t, int64_t>> pads(s.size(), {2, 1});
            return std::vector<Tensor>{Pad(x, pads, -7)};
          },
          DType::kI32),
      {"OneHot",
       [](Case& c, const Shape& s) {
         // Indices in [-1, 6) against depth 5: -1 and 5 are out of range (all off).
         Tensor idx = c.Input(DType::kI32, s, 97, -1, 6);
         c.outputs = {OneHot(idx, 5, 2.0, -1.0), OneHot(idx, 5, 1, 0, DType::kI32),
                      OneHot(idx, 5, 1, 0, DType::kBool)};
       },
       kSmall, kLarge, kExact},
      {"Const",
       [](Case& c, const Shape& s) {
         Tensor x = c.Input(DType::kF32, s, 98);
         Tensor k = Const(*c.graph, HostTensor::RandomUniform(DType::kF32, s, 99));
         Tensor ki = Const(*c.graph, HostTensor::RandomUniform(DType::kI32, s, 100, -5, 5));
         c.outputs = {x * k + 2.0, Cast(ki, DType::kF32) - x, k};
       },
       kSmall,
       kLarge,
       {}},
  };
}

class LayoutTest : public ::testing::TestWithParam<OpParam> {};

TEST_P(LayoutTest, MatchesReference) {
  RunOpTestCase(std::get<0>(GetParam()), std::get<1>(GetParam()));
}

INSTANTIATE_TEST_SUITE_P(Ops, LayoutTest,
                         ::testing::Combine(::testing::ValuesIn(Cases()),
                                            ::testing::ValuesIn(AllSchedulers())),
                         OpParamName);

// The same ops as CUDA kernels: compiled for CUDA and assembled with ptxas everywhere;
// run and compared with the reference only on a GPU (skipped without one).
class LayoutTestCuda : public ::testing::TestWithParam<OpTestCase> {};

TEST_P(LayoutTestCuda, CompilesAndAssembles) { RunOpTestCaseCudaCompile(GetParam()); }

TEST_P(LayoutTestCuda, MatchesReferenceOnGpu) { RunOpTestCaseCudaOnGpu(GetParam()); }

INSTANTIATE_TEST_SUITE_P(Ops, LayoutTestCuda, ::testing::ValuesIn(Cases()), CaseName);

// The same GPU schedules on opencl:0 (POCL on this machine), compared with the reference.
class LayoutTestOpenCL : public ::testing::TestWithParam<OpTestCase> {};

TEST_P(LayoutTestOpenCL, MatchesReference) { RunOpTestCaseOpenCL(GetParam()); }

INSTANTIATE_TEST_SUITE_P(Ops, LayoutTestOpenCL, ::testing::ValuesIn(Cases()), CaseName);

}  // namespace
}  // namespace lowertest
}  // namespace braze
