// Reference kernels: Const, the Assign family, the executor-only sources, HostCall, and
// the dispatcher's argument checks.
#include <cstdint>
#include <vector>

#include "braze/ops.h"
#include "gtest/gtest.h"
#include "reference/eval_graph.h"

namespace braze {
namespace {

using reftest::EvalFails;
using reftest::EvalNear;
using reftest::Evaluate;
using reftest::TensorNear;

HostTensor F32(std::initializer_list<float> v, Shape s) { return HostTensor::From<float>(v, s); }
HostTensor I32(std::initializer_list<int32_t> v, Shape s) {
  return HostTensor::From<int32_t>(v, s);
}

TEST(ConstTest, ReturnsACopyOfTheValue) {
  Graph g;
  Tensor c = Const(g, F32({1, 2, 3}, {3}));
  auto r = RunReferenceKernel(c.node(), {}, {c.type()});
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->size(), 1u);
  EXPECT_TRUE(TensorNear((*r)[0], F32({1, 2, 3}, {3})));
  // Writing to the result must not change the graph's constant.
  (*r)[0].data<float>()[0] = 42;
  EXPECT_TRUE(EvalNear(c, F32({1, 2, 3}, {3})));
  EXPECT_TRUE(EvalNear(ScalarConst(g, 2.5, DType::kF64), HostTensor::Scalar<double>(2.5)));
  EXPECT_TRUE(EvalNear(Const(g, HostTensor(DType::kI32, {0, 2})), HostTensor(DType::kI32, {0, 2})));
}

TEST(AssignTest, NewValues) {
  Graph g;
  Tensor v = Variable(g, F32({1, 2}, {2}));
  Tensor x = Const(g, F32({5, 7}, {2}));
  EXPECT_TRUE(EvalNear(Assign(v, x), F32({5, 7}, {2})));
  EXPECT_TRUE(EvalNear(AssignAdd(v, x), F32({6, 9}, {2})));
  EXPECT_TRUE(EvalNear(AssignSub(v, x), F32({-4, -5}, {2})));
  Tensor vi = Variable(g, I32({10, 20, 30, 40}, {2, 2}));
  Tensor xi = Const(g, I32({1, 2, 3, 4}, {2, 2}));
  EXPECT_TRUE(EvalNear(AssignAdd(vi, xi), I32({11, 22, 33, 44}, {2, 2})));
  EXPECT_TRUE(EvalNear(AssignSub(vi, xi), I32({9, 18, 27, 36}, {2, 2})));
  Tensor vz = Variable(g, HostTensor(DType::kF32, {0}));
  Tensor xz = Const(g, HostTensor(DType::kF32, {0}));
  EXPECT_TRUE(EvalNear(AssignAdd(vz, xz), HostTensor(DType::kF32, {0})));
}

TEST(AssignTest, KernelRequiresEqualShapes) {
  // AssignAdd does not broadcast, even where Add would.
  Graph g;
  Tensor v = Variable(g, F32({1, 2}, {2}));
  Tensor a = AssignAdd(v, Const(g, F32({1, 1}, {2})));
  HostTensor ins[] = {F32({1, 2}, {2}), F32({1}, {1})};
  auto r = RunReferenceKernel(a.node(), ins, {TensorType{DType::kF32, {2}}});
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(SourceTest, PlaceholderAndVariableAreTheExecutorsBusiness) {
  Graph g;
  Tensor p = Placeholder(g, DType::kF32, {2});
  Tensor v = Variable(g, F32({1}, {1}));
  auto rp = RunReferenceKernel(p.node(), {}, {p.type()});
  EXPECT_EQ(rp.status().code(), absl::StatusCode::kInternal);
  auto rv = RunReferenceKernel(v.node(), {}, {v.type()});
  EXPECT_EQ(rv.status().code(), absl::StatusCode::kInternal);
}

TEST(DispatchTest, WrongInputOrOutputCountsAreErrors) {
  Graph g;
  Tensor x = Const(g, F32({1}, {1}));
  Tensor y = Add(x, x);
  HostTensor one[] = {F32({1}, {1})};
  auto r = RunReferenceKernel(y.node(), one, {TensorType{DType::kF32, {1}}});
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  HostTensor two[] = {F32({1}, {1}), F32({1}, {1})};
  r = RunReferenceKernel(y.node(), two, {});
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  // Unknown dims in the output types: the caller forgot to re-infer.
  r = RunReferenceKernel(y.node(), two, {TensorType{DType::kF32, {-1}}});
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
}

// ---- HostCall ----

// Returns (2 * x, sum of x as a scalar).
absl::StatusOr<std::vector<HostTensor>> DoubleAndSum(absl::Span<const HostTensor> in) {
  HostTensor doubled = in[0];
  float sum = 0;
  for (int64_t i = 0; i < doubled.num_elements(); ++i) {
    sum += doubled.data<float>()[i];
    doubled.data<float>()[i] *= 2;
  }
  return std::vector<HostTensor>{doubled, HostTensor::Scalar<float>(sum)};
}

TEST(HostCallTest, CallsTheFunction) {
  Graph g;
  Tensor x = Const(g, F32({1, 2, 3}, {3}));
  std::vector<Tensor> outs =
      HostCall(g, "double_and_sum", {x}, {{DType::kF32, {3}}, {DType::kF32, {}}}, DoubleAndSum);
  ASSERT_EQ(outs.size(), 2u);
  auto r = Evaluate(outs);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(TensorNear((*r)[0], F32({2, 4, 6}, {3})));
  EXPECT_TRUE(TensorNear((*r)[1], HostTensor::Scalar<float>(6)));
  // Downstream ops consume host-call outputs like any other.
  EXPECT_TRUE(EvalNear(Add(outs[0], outs[1]), F32({8, 10, 12}, {3})));
}

TEST(HostCallTest, UnknownDimsInSpecsMatchAnySize) {
  Graph g;
  Tensor p = Placeholder(g, DType::kF32, {-1});
  std::vector<Tensor> outs =
      HostCall(g, "double_and_sum", {p}, {{DType::kF32, {-1}}, {DType::kF32, {}}}, DoubleAndSum);
  EXPECT_TRUE(EvalNear(outs[0], F32({2, 4, 6, 8}, {4}), 0, {{p, F32({1, 2, 3, 4}, {4})}}));
}

TEST(HostCallTest, NoInputsAndNoOutputs) {
  Graph g;
  int calls = 0;
  std::vector<Tensor> outs =
      HostCall(g, "produce", {}, {{DType::kI32, {2}}}, [&](absl::Span<const HostTensor> in) {
        ++calls;
        return absl::StatusOr<std::vector<HostTensor>>(std::vector<HostTensor>{I32({3, 4}, {2})});
      });
  EXPECT_TRUE(EvalNear(outs[0], I32({3, 4}, {2})));
  EXPECT_EQ(calls, 1);
  // A zero-output call still runs (for its side effect) through the kernel.
  HostCall(g, "effect", {}, {}, [&](absl::Span<const HostTensor>) {
    ++calls;
    return absl::StatusOr<std::vector<HostTensor>>(std::vector<HostTensor>{});
  });
  const Node& effect = g.node(g.num_nodes() - 1);
  auto r = RunReferenceKernel(effect, {}, {});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->empty());
  EXPECT_EQ(calls, 2);
}

TEST(HostCallTest, FunctionErrorIsPropagated) {
  Graph g;
  Tensor x = Const(g, F32({1}, {1}));
  std::vector<Tensor> outs =
      HostCall(g, "fails", {x}, {{DType::kF32, {1}}}, [](absl::Span<const HostTensor>) {
        return absl::StatusOr<std::vector<HostTensor>>(absl::UnavailableError("boom"));
      });
  EXPECT_TRUE(EvalFails(outs[0], absl::StatusCode::kUnavailable, "boom"));
}

TEST(HostCallTest, WrongOutputCountIsAnError) {
  Graph g;
  Tensor x = Const(g, F32({1, 2, 3}, {3}));
  std::vector<Tensor> outs = HostCall(g, "one_too_few", {x}, {{DType::kF32, {3}}}, DoubleAndSum);
  EXPECT_TRUE(
      EvalFails(outs[0], absl::StatusCode::kInvalidArgument, "returned 2 tensors, expected 1"));
}

TEST(HostCallTest, WrongDTypeIsAnError) {
  Graph g;
  Tensor x = Const(g, F32({1, 2, 3}, {3}));
  std::vector<Tensor> outs =
      HostCall(g, "bad_dtype", {x}, {{DType::kF64, {3}}, {DType::kF32, {}}}, DoubleAndSum);
  EXPECT_TRUE(EvalFails(outs[0], absl::StatusCode::kInvalidArgument,
                        "output 0 is f32[3], expected f64[3]"));
}

TEST(HostCallTest, WrongShapeIsAnError) {
  Graph g;
  Tensor x = Const(g, F32({1, 2, 3}, {3}));
  std::vector<Tensor> outs =
      HostCall(g, "bad_shape", {x}, {{DType::kF32, {3}}, {DType::kF32, {1}}}, DoubleAndSum);
  EXPECT_TRUE(
      EvalFails(outs[0], absl::StatusCode::kInvalidArgument, "output 1 is f32[], expected f32[1]"));
}

}  // namespace
}  // namespace braze
