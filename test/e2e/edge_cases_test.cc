// What an outside differential fuzzer tries that braze-fuzz's generator does not draw
// (2026-11-30, docs/FUZZING_FAMILIES.md "Outside the generator"): ranks above 4, every
// dtype through the layout, select and reduction ops, reductions over an empty axis, i32
// at its limits. Each runs fused in strict mode and on the reference kernels; every one
// passed when written, so these keep the cases in the default test run.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "braze/dtype.h"
#include "braze/gradients.h"
#include "braze/jit_scope.h"
#include "braze/ops.h"
#include "braze/session.h"

namespace braze {
namespace {

// Runs `fetches` fused (strict) under each of `schedulers` and on the reference; equal
// up to `rtol` (NaN to NaN, infinities and integers exactly).
void ExpectFusedMatchesReference(const Graph& g, const Feeds& feeds,
                                 const std::vector<Tensor>& fetches,
                                 std::vector<Scheduler> schedulers, double rtol = 1e-4) {
  ASSERT_TRUE(g.status().ok()) << g.status();
  SessionOptions ref_opts;
  ref_opts.reference_only = true;
  auto want = Session(g, ref_opts).Run(feeds, fetches);
  ASSERT_TRUE(want.ok()) << want.status();
  for (Scheduler sched : schedulers) {
    SessionOptions opts;
    opts.scheduler = sched;
    opts.strict = true;
    Session s(g, opts);
    auto got = s.Run(feeds, fetches);
    ASSERT_TRUE(got.ok()) << SchedulerName(sched) << ": " << got.status();
    for (size_t f = 0; f < fetches.size(); ++f) {
      const HostTensor& a = (*got)[f];
      const HostTensor& b = (*want)[f];
      ASSERT_EQ(a.type(), b.type()) << SchedulerName(sched) << " fetch " << f;
      int64_t bad = 0, first = -1;
      for (int64_t i = 0; i < b.num_elements(); ++i) {
        const double x = a.GetDouble(i), y = b.GetDouble(i);
        const bool ok = std::isnan(y)   ? std::isnan(x)
                        : std::isinf(y) ? x == y
                                        : std::fabs(x - y) <= rtol * (1 + std::fabs(y));
        if (!ok && bad++ == 0) first = i;
      }
      EXPECT_EQ(bad, 0) << SchedulerName(sched) << " fetch " << f << " ('" << fetches[f].name()
                        << "'): first [" << first << "] got "
                        << (first >= 0 ? a.GetDouble(first) : 0) << ", reference "
                        << (first >= 0 ? b.GetDouble(first) : 0);
    }
  }
}

// The generator's inputs are rank 0-4; tensors of rank 6 and 8 (a -1 batch) through
// reductions, transposes, broadcasts, pads, a batched matmul and a gradient.
TEST(EdgeCases, RanksSixAndEight) {
  Graph g;
  Tensor x = Placeholder(g, DType::kF32, {2, 1, 3, 2, 1, 3}, "x");
  Tensor y = Placeholder(g, DType::kF32, {-1, 2, 2, 1, 2, 2, 3, 2}, "y");
  std::vector<Tensor> fetches;
  {
    JitScope scope(g);
    fetches = {Sum(x, {1, 3, 5}),
               Max(x, {0, -1}, true),
               Transpose(x, {5, 4, 3, 2, 1, 0}) + 1.0,
               ArgMax(x, 5),
               BroadcastTo(x, {2, 4, 3, 2, 5, 3}),
               Pad(x, {{0, 1}, {1, 0}, {0, 0}, {0, 0}, {2, 0}, {0, 0}}, 3),
               BatchMatMul(Reshape(x, {2, 1, 3, 2, 3}), Reshape(x, {2, 1, 3, 3, 2})),
               Transpose(y, {7, 1, 2, 3, 4, 5, 6, 0}) * 2.0,
               Mean(y, {2, 4, 6}),
               y + Reshape(Sum(y, {0}), {1, 2, 2, 1, 2, 2, 3, 2})};
    fetches.push_back(Gradients({Sum(Softmax(x, 2) * x)}, {x}).value()[0]);
  }
  ExpectFusedMatchesReference(
      g,
      {{x, HostTensor::RandomUniform(DType::kF32, {2, 1, 3, 2, 1, 3}, 5, -2, 2)},
       {y, HostTensor::RandomUniform(DType::kF32, {3, 2, 2, 1, 2, 2, 3, 2}, 6, -2, 2)}},
      fetches, {Scheduler::kAuto, Scheduler::kSafeDefault});
}

// f64, i32, bool, f16 and bf16 through every op that takes them (bool: no arithmetic,
// no reductions; a build error says so), one cluster per dtype.
TEST(EdgeCases, EveryDtypeThroughLayoutSelectAndReductions) {
  for (DType dt : {DType::kF64, DType::kI32, DType::kBool, DType::kF16, DType::kBF16}) {
    SCOPED_TRACE(DTypeName(dt));
    Graph g;
    Tensor x = Placeholder(g, dt, {2, 3, 5}, "x");
    Tensor c = Placeholder(g, DType::kBool, {2, 3, 5}, "c");
    std::vector<Tensor> fetches;
    {
      JitScope scope(g);
      const Tensor ids = Const(g, HostTensor::From<int32_t>({1, 0, 1, 5, -1}, {5}));
      const Tensor same = Transpose(Transpose(x, {0, 2, 1}), {0, 2, 1});
      fetches = {Transpose(x, {2, 0, 1}),
                 Reshape(x, {-1, 5}),
                 Slice(x, {1, 0, 2}, {1, 3, 3}),
                 Concat({x, x}, 1),
                 Pad(x, {{1, 0}, {0, 2}, {1, 1}}, 1),
                 BroadcastTo(Slice(x, {0, 0, 0}, {1, 3, 5}), {4, 2, 3, 5}),
                 Select(c, x, same),
                 Select(Slice(c, {0, 0, 0}, {1, 1, 5}), x, Slice(x, {1, 1, 0}, {1, 1, 5})),
                 Equal(x, same),
                 Gather(x, ids, 2),
                 Cast(x, DType::kF32),
                 Cast(x, DType::kI32)};
      if (dt != DType::kBool) {
        for (const Tensor& t :
             {Sum(x, {1}), Max(x, {0, 2}), ArgMax(x, 2), Neg(x) + x, Maximum(x, same),
              UnsortedSegmentSum(x, Const(g, HostTensor::From<int32_t>({2, 0, 2, 7, -1}, {5})), 3,
                                 2),
              MatMul(Reshape(x, {6, 5}), Reshape(x, {6, 5}), true, false),
              BatchMatMul(x, x, false, true)}) {
          fetches.push_back(t);
        }
      }
    }
    HostTensor xv(dt, {2, 3, 5}), cv(DType::kBool, {2, 3, 5});
    const HostTensor r = HostTensor::RandomUniform(DType::kF64, {2, 3, 5}, 17, -3, 3);
    for (int64_t i = 0; i < 30; ++i) {
      const double v = r.GetDouble(i);
      xv.SetDouble(i, dt == DType::kBool ? v > 0 : dt == DType::kI32 ? std::floor(v * 1000) : v);
      cv.SetDouble(i, i % 3 == 0);
    }
    const bool half = dt == DType::kF16 || dt == DType::kBF16;
    ExpectFusedMatchesReference(g, {{x, xv}, {c, cv}}, fetches, {Scheduler::kAuto},
                                half ? 2e-2 : 1e-6);
  }
}

// Reductions over an axis of extent 0: Sum 0, Max -inf (i32: its minimum), Min +inf,
// Mean NaN, compiled as the reference has them; an ArgMax over it is the same error.
TEST(EdgeCases, ReductionsOverAnEmptyAxis) {
  Graph g;
  Tensor x = Placeholder(g, DType::kF32, {3, -1}, "x");
  Tensor i = Placeholder(g, DType::kI32, {3, -1}, "i");
  std::vector<Tensor> fetches;
  Tensor argmax;
  {
    JitScope scope(g);
    fetches = {Sum(x, {1}),
               Max(x, {1}),
               Min(x, {1}),
               Mean(x, {1}),
               Max(i, {1}),
               Min(i, {1}),
               Sum(i, {1}),
               Softmax(x, 0),
               Mean(Cast(x, DType::kF64), {1}),
               Sum(x, {1}, true) + 1.0};
    argmax = ArgMax(x, 1);
  }
  const Feeds feeds = {{x, HostTensor(DType::kF32, {3, 0})}, {i, HostTensor(DType::kI32, {3, 0})}};
  ExpectFusedMatchesReference(g, feeds, fetches, {Scheduler::kAuto});
  SessionOptions opts;
  opts.strict = true;
  auto got = Session(g, opts).Run(feeds, {argmax});
  ASSERT_FALSE(got.ok());
  EXPECT_NE(got.status().message().find("ArgMax over an empty axis"), std::string::npos)
      << got.status();
}

// An empty value whose other dims are symbolic: the scores of an empty query batch
// against T keys, [2, 0, T], fetched beside a reduction of them. The lowering gave such
// an empty value the nominal extent it compiles the symbol with (15), so the kernel's
// output type said [2, 0, 15] and every run failed ("output 0 is f32[2,0,3], expected
// f32[2,0,15]"; strict: the Run's error; otherwise one warning and op by op).
TEST(EdgeCases, AnEmptyOutputWithASymbolicDim) {
  Graph g;
  Tensor q = Placeholder(g, DType::kF32, {2, -1, 5}, "q");
  Tensor k = Placeholder(g, DType::kF32, {2, -1, 5}, "k");
  std::vector<Tensor> fetches;
  {
    JitScope scope(g);
    Tensor scores = Softmax(BatchMatMul(q, k, false, true));
    fetches = {scores, Mean(Square(scores)), Sum(scores, {1})};
  }
  for (int64_t tk : {3, 17}) {
    SCOPED_TRACE(tk);
    ExpectFusedMatchesReference(g,
                                {{q, HostTensor(DType::kF32, {2, 0, 5})},
                                 {k, HostTensor::RandomUniform(DType::kF32, {2, tk, 5}, 1)}},
                                fetches, {Scheduler::kAuto});
  }
}

// A filter gradient over a batch of 0 (a data loader's empty last batch) is zeros; it
// was a SIGFPE in the compiler (the filter gradient's partial sums divided the batch by
// a count of 0). The forward convolution and the pools are empty, their input
// gradients too.
TEST(EdgeCases, AFilterGradientOverAnEmptyBatch) {
  for (DataFormat format : {DataFormat::kNHWC, DataFormat::kNCHW}) {
    SCOPED_TRACE(format == DataFormat::kNHWC ? "NHWC" : "NCHW");
    Graph g;
    Tensor x = Placeholder(
        g, DType::kF32, format == DataFormat::kNHWC ? Shape{-1, 5, 7, 3} : Shape{-1, 3, 5, 7}, "x");
    Tensor f = Placeholder(g, DType::kF32, {3, 2, 3, 4}, "f");
    std::vector<Tensor> fetches;
    {
      JitScope scope(g);
      Tensor y = Conv2D(x, f, {2, 1}, Padding::kSame, format);
      Tensor p = MaxPool(Relu(y), {2, 3}, {1, 2}, Padding::kSame, format);
      fetches = {y, p};
      const std::vector<Tensor> d = Gradients({Sum(Square(p))}, {x, f}).value();
      fetches.insert(fetches.end(), d.begin(), d.end());
    }
    ASSERT_TRUE(g.status().ok()) << g.status();
    const Shape xs = format == DataFormat::kNHWC ? Shape{0, 5, 7, 3} : Shape{0, 3, 5, 7};
    ExpectFusedMatchesReference(g,
                                {{x, HostTensor(DType::kF32, xs)},
                                 {f, HostTensor::RandomUniform(DType::kF32, {3, 2, 3, 4}, 1)}},
                                fetches, {Scheduler::kAuto});
  }
}

// i32 at its limits: floor division by negative divisors, by 0 and INT32_MIN / -1;
// Abs, Neg and Square wrapping; reductions, casts and comparisons of the extremes.
TEST(EdgeCases, IntegerOpsAtTheLimits) {
  Graph g;
  Tensor x = Placeholder(g, DType::kI32, {12}, "x");
  Tensor y = Placeholder(g, DType::kI32, {12}, "y");
  std::vector<Tensor> fetches;
  {
    JitScope scope(g);
    fetches = {Div(x, y),
               Abs(x),
               Neg(x),
               Sign(x),
               Relu(x),
               Square(x),
               Maximum(x, y),
               Minimum(x, y),
               Max(x),
               Min(x),
               ArgMax(x, 0),
               Sum(x),
               Cast(x, DType::kF32),
               Cast(x, DType::kBool),
               Greater(x, y),
               Select(Less(x, y), x, y),
               x * y,
               Sum(Reshape(x, {3, 4}), {1}),
               Cast(Cast(x, DType::kF32), DType::kI32)};
  }
  const int32_t hi = std::numeric_limits<int32_t>::max(), lo = std::numeric_limits<int32_t>::min();
  ExpectFusedMatchesReference(
      g,
      {{x, HostTensor::From<int32_t>({lo, hi, -7, 7, -7, 7, 0, lo, -1, 5, -5, 3}, {12})},
       {y, HostTensor::From<int32_t>({-1, -1, 2, -2, -2, 0, 0, 1, lo, 3, 3, hi}, {12})}},
      fetches, {Scheduler::kAuto, Scheduler::kSafeDefault}, 0);
}

}  // namespace
}  // namespace braze
