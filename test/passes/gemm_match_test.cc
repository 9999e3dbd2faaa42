// The GEMM pattern match is graph logic on placements: tested here without a GPU.
#include "passes/gemm_match.h"

#include <gtest/gtest.h>

#include "braze/device.h"
#include "braze/ops.h"

namespace braze {
namespace {

std::vector<bool> All(const Graph& g) { return std::vector<bool>(g.num_nodes(), true); }

// The runtime asks the device's backend (device::FeaturesOf(d).library_gemm) and the
// library (IsCublasGemmDType): CUDA's, for the float dtypes.
bool CudaGemm(const Device& d, DType dtype) {
  return d.kind == Device::Kind::kCuda && IsFloating(dtype);
}

// Ops with no placement on the host, with CUDA's library GEMM.
GemmMatchOptions OnHost() {
  GemmMatchOptions o;
  o.has_library_gemm = CudaGemm;
  return o;
}

GemmMatchOptions OnCuda(bool fold_relu = false) {
  GemmMatchOptions o = OnHost();
  o.default_device = Device{Device::Kind::kCuda, 0};
  o.fold_relu = fold_relu;
  return o;
}

TEST(GemmMatch, MatMulWithBiasAndReluFoldsByOption) {
  Graph g;
  Tensor x = Placeholder(g, DType::kF32, {5, 7}, "x");
  Tensor w = Placeholder(g, DType::kF32, {7, 3}, "w");
  Tensor b = Placeholder(g, DType::kF32, {3}, "b");
  Tensor mm = MatMul(x, w);
  Tensor add = mm + b;
  Tensor relu = Relu(add);
  Tensor out = Exp(relu);
  auto plain = MatchGemms(g, All(g), {{out.node_id(), 0}}, OnCuda());
  ASSERT_EQ(plain.size(), 1u);
  EXPECT_EQ(plain[0].nodes, (std::vector<int>{mm.node_id(), add.node_id()}));
  EXPECT_EQ(plain[0].inputs, (std::vector<Tensor>{x, w, b}));
  EXPECT_EQ(plain[0].output, add);
  EXPECT_TRUE(plain[0].bias());
  EXPECT_FALSE(plain[0].relu());

  auto folded = MatchGemms(g, All(g), {{out.node_id(), 0}}, OnCuda(/*fold_relu=*/true));
  ASSERT_EQ(folded.size(), 1u);
  EXPECT_EQ(folded[0].nodes, (std::vector<int>{mm.node_id(), add.node_id(), relu.node_id()}));
  EXPECT_EQ(folded[0].output, relu);
}

// bf16 and f16 MatMuls (and BatchMatMuls) fold their bias and ReLU like f32's; where
// the library lacks the dtype, nothing is matched.
TEST(GemmMatch, SixteenBitMatMulsFoldTheirBias) {
  for (DType dtype : {DType::kBF16, DType::kF16}) {
    SCOPED_TRACE(DTypeName(dtype));
    Graph g;
    Tensor x = Placeholder(g, dtype, {5, 7}, "x");
    Tensor w = Placeholder(g, dtype, {3, 7}, "w");
    Tensor b = Placeholder(g, dtype, {3}, "b");
    Tensor mm = MatMul(x, w, false, true);
    Tensor add = mm + b;
    Tensor relu = Relu(add);
    Tensor other = BatchMatMul(Reshape(x, {1, 5, 7}), Reshape(w, {1, 3, 7}), false, true);
    auto m = MatchGemms(g, All(g), {{relu.node_id(), 0}, {other.node_id(), 0}}, OnCuda(true));
    ASSERT_EQ(m.size(), 2u);
    EXPECT_EQ(m[0].nodes, (std::vector<int>{mm.node_id(), add.node_id(), relu.node_id()}));
    EXPECT_EQ(m[0].inputs, (std::vector<Tensor>{x, w, b}));
    EXPECT_EQ(m[1].nodes, (std::vector<int>{other.node_id()}));

    GemmMatchOptions f32_only = OnCuda(true);
    f32_only.has_library_gemm = [](const Device& d, DType t) {
      return d.kind == Device::Kind::kCuda && t == DType::kF32;
    };
    EXPECT_TRUE(MatchGemms(g, All(g), {{relu.node_id(), 0}}, f32_only).empty());
  }
}

TEST(GemmMatch, NothingOnTheCpuOrForIntegers) {
  Graph g;
  Tensor x = Placeholder(g, DType::kF32, {4, 4}, "x");
  Tensor i = Placeholder(g, DType::kI32, {4, 4}, "i");
  MatMul(x, x);
  {
    DeviceScope gpu(g, "cuda:1");
    MatMul(i, i);  // i32: no cuBLAS GEMM
  }
  EXPECT_TRUE(MatchGemms(g, All(g), {}, OnHost()).empty());
  GemmMatchOptions none = OnCuda();
  none.has_library_gemm = nullptr;  // no device has a library GEMM
  EXPECT_TRUE(MatchGemms(g, All(g), {}, none).empty());
}

TEST(GemmMatch, PlacementDecidesNotTheDefault) {
  Graph g;
  Tensor x = Placeholder(g, DType::kF64, {2, 3, 4}, "x");
  Tensor y = Placeholder(g, DType::kF64, {2, 4, 5}, "y");
  Tensor bmm;
  {
    DeviceScope gpu(g, "cuda:0");
    bmm = BatchMatMul(x, y);
  }
  auto m = MatchGemms(g, All(g), {{bmm.node_id(), 0}}, OnHost());
  ASSERT_EQ(m.size(), 1u);
  EXPECT_EQ(m[0].nodes, (std::vector<int>{bmm.node_id()}));
  EXPECT_FALSE(m[0].bias());
}

TEST(GemmMatch, BiasNotFoldedWhenTheProductIsReadElsewhere) {
  Graph g;
  Tensor x = Placeholder(g, DType::kF32, {5, 7}, "x");
  Tensor w = Placeholder(g, DType::kF32, {7, 3}, "w");
  Tensor b = Placeholder(g, DType::kF32, {3}, "b");
  Tensor mm = MatMul(x, w);
  Tensor add = mm + b;
  // Fetched: the product itself escapes, so the Add cannot be folded.
  auto fetched = MatchGemms(g, All(g), {{mm.node_id(), 0}, {add.node_id(), 0}}, OnCuda());
  ASSERT_EQ(fetched.size(), 1u);
  EXPECT_EQ(fetched[0].nodes.size(), 1u);
  // A second consumer reads it.
  Tensor other = Exp(mm);
  auto shared = MatchGemms(g, All(g), {{add.node_id(), 0}, {other.node_id(), 0}}, OnCuda());
  ASSERT_EQ(shared.size(), 1u);
  EXPECT_EQ(shared[0].nodes.size(), 1u);
}

TEST(GemmMatch, BiasMustBeAVectorOverColumns) {
  Graph g;
  Tensor x = Placeholder(g, DType::kF32, {5, 7}, "x");
  Tensor w = Placeholder(g, DType::kF32, {7, 3}, "w");
  Tensor full = Placeholder(g, DType::kF32, {5, 3}, "full");
  Tensor add = MatMul(x, w) + full;  // an elementwise Add of a matrix: not a bias
  auto m = MatchGemms(g, All(g), {{add.node_id(), 0}}, OnCuda());
  ASSERT_EQ(m.size(), 1u);
  EXPECT_EQ(m[0].nodes.size(), 1u);
}

TEST(GemmMatch, NodesNotNeededAreSkipped) {
  Graph g;
  Tensor x = Placeholder(g, DType::kF32, {4, 4}, "x");
  Tensor mm = MatMul(x, x);
  std::vector<bool> needed(g.num_nodes(), true);
  needed[mm.node_id()] = false;
  EXPECT_TRUE(MatchGemms(g, needed, {}, OnCuda()).empty());
}

TEST(GemmMatch, DeviceEdgeStopsTheEpilogue) {
  Graph g;
  Tensor x = Placeholder(g, DType::kF32, {5, 7}, "x");
  Tensor w = Placeholder(g, DType::kF32, {7, 3}, "w");
  Tensor b = Placeholder(g, DType::kF32, {3}, "b");
  Tensor mm = MatMul(x, w);  // on cuda:0 (the default)
  Tensor add;
  {
    DeviceScope cpu(g, "cpu");
    add = mm + b;
  }
  auto m = MatchGemms(g, All(g), {{add.node_id(), 0}}, OnCuda());
  ASSERT_EQ(m.size(), 1u);
  EXPECT_EQ(m[0].nodes, (std::vector<int>{mm.node_id()}));
}

}  // namespace
}  // namespace braze
