// The compile-cache key is exact for everything that reaches code: attribute values to
// the last bit, constants byte for byte.
#include "compile/cluster_key.h"

#include <gtest/gtest.h>

#include <cmath>
#include <functional>

#include "braze/ops.h"

namespace braze {
namespace {

// The key of a one-op cluster y = op(x) for x: f32[5].
std::string KeyOf(const std::function<Tensor(Tensor)>& op, DType in = DType::kF32) {
  Graph g;
  Tensor x = Placeholder(g, in, {5}, "x");
  Tensor y = op(x);
  ClusterSpec spec{&g, "c", {y.node_id()}, {x}, {x.type()}, {y}};
  return ClusterKey(spec, CompileOptions{});
}

// The CPU GEMM library settings change the code, so they change the key; their
// defaults add nothing (stored schedules are keyed under the default options).
TEST(ClusterKey, GemmLibrarySettingsWhenNotTheDefaults) {
  Graph g;
  Tensor x = Placeholder(g, DType::kF32, {5, 5}, "x");
  Tensor y = MatMul(x, x);
  ClusterSpec spec{&g, "c", {y.node_id()}, {x}, {x.type()}, {y}};
  CompileOptions off, one;
  off.cpu_gemm_library = false;
  one.cpu_gemm_min_work = 1;
  const std::string base = ClusterKey(spec, CompileOptions{});
  EXPECT_EQ(base.find("gemm"), std::string::npos) << base;
  EXPECT_NE(ClusterKey(spec, off), base);
  EXPECT_NE(ClusterKey(spec, one), base);
  EXPECT_NE(ClusterKey(spec, one), ClusterKey(spec, off));
}

TEST(ClusterKey, PadValueToTheLastBit) {
  auto pad = [](double v) { return [v](Tensor x) { return Pad(x, {{1, 2}}, v); }; };
  EXPECT_EQ(KeyOf(pad(1.000001)), KeyOf(pad(1.000001)));
  EXPECT_NE(KeyOf(pad(1.000001)), KeyOf(pad(1.000004)));
  EXPECT_NE(KeyOf(pad(1.0)), KeyOf(pad(std::nextafter(1.0, 2.0))));
}

TEST(ClusterKey, OneHotValuesToTheLastBit) {
  auto onehot = [](double on, double off) {
    return [on, off](Tensor x) { return OneHot(x, 4, on, off); };
  };
  EXPECT_EQ(KeyOf(onehot(1.000001, 0), DType::kI32), KeyOf(onehot(1.000001, 0), DType::kI32));
  EXPECT_NE(KeyOf(onehot(1.000001, 0), DType::kI32), KeyOf(onehot(1.000004, 0), DType::kI32));
  EXPECT_NE(KeyOf(onehot(1, 1e-7), DType::kI32), KeyOf(onehot(1, 1.0000001e-7), DType::kI32));
}

TEST(ClusterKey, ConstantsByteForByte) {
  // The constant is a node of the cluster.
  auto key = [](float c) {
    Graph g;
    Tensor x = Placeholder(g, DType::kF32, {5}, "x");
    Tensor k = Const(g, HostTensor::Scalar<float>(c));
    Tensor y = Add(x, k);
    ClusterSpec spec{&g, "c", {k.node_id(), y.node_id()}, {x}, {x.type()}, {y}};
    return ClusterKey(spec, CompileOptions{});
  };
  EXPECT_EQ(key(0.5f), key(0.5f));
  EXPECT_NE(key(0.5f), key(std::nextafter(0.5f, 1.0f)));
}

}  // namespace
}  // namespace braze
