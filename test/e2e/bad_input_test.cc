// Bad input at every public entry point gives a clear Status naming the node (or the
// argument), never a crash, and a failed Run changes no variable. Each case here is a
// row of docs/BAD_INPUT.md.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "braze/function.h"
#include "braze/jit_scope.h"
#include "braze/ops.h"
#include "braze/session.h"

namespace braze {
namespace {

using ::testing::HasSubstr;

std::string Message(const absl::Status& s) { return std::string(s.message()); }

// Compiled (a JitScope, strict or not) and reference sessions alike.
std::vector<SessionOptions> AllModes() {
  SessionOptions reference, fused, strict;
  reference.reference_only = true;
  strict.strict = true;
  return {reference, fused, strict};
}

TEST(BadInput, FeedOfTheWrongShapeDtypeOrRankNamesThePlaceholder) {
  Graph g;
  Tensor x = Placeholder(g, DType::kF32, {-1, 3}, "x");
  Tensor y;
  {
    JitScope scope(g);
    y = Exp(x) * 2.0;
  }
  for (const SessionOptions& o : AllModes()) {
    Session s(g, o);
    for (const HostTensor& bad :
         {HostTensor(DType::kF32, {4, 2}), HostTensor(DType::kF64, {4, 3}),
          HostTensor(DType::kF32, {12}), HostTensor(DType::kF32, {2, 2, 3})}) {
      auto r = s.Run({{x, bad}}, {y});
      ASSERT_FALSE(r.ok());
      EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
      EXPECT_THAT(Message(r.status()), HasSubstr("node 'x'"));
    }
  }
}

TEST(BadInput, MinusOneDimsThatDisagreeAtRunTimeNameTheNode) {
  Graph g;
  Tensor a = Placeholder(g, DType::kF32, {-1, 3}, "a");
  Tensor b = Placeholder(g, DType::kF32, {-1, 3}, "b");
  Tensor y;
  {
    JitScope scope(g);
    y = Add(a, b);
  }
  for (const SessionOptions& o : AllModes()) {
    Session s(g, o);
    auto r =
        s.Run({{a, HostTensor(DType::kF32, {4, 3})}, {b, HostTensor(DType::kF32, {5, 3})}}, {y});
    ASSERT_FALSE(r.ok());
    EXPECT_THAT(Message(r.status()), HasSubstr("node 'Add'"));
  }
}

TEST(BadInput, NanAndInfFlowAsTheReferenceSays) {
  Graph g;
  Tensor x = Placeholder(g, DType::kF32, {2, 5}, "x");
  std::vector<Tensor> ys;
  {
    JitScope scope(g);
    ys = {Softmax(x), Max(x, {1}), Relu(x),    Exp(x),        Sum(x, {1}), Log(x),
          Sqrt(x),    Tanh(x),     Sigmoid(x), Reciprocal(x), Rsqrt(x),    Erf(x),
          Floor(x),   Sign(x),     Square(x),  Abs(x),        Neg(x),      Exp(-x)};
  }
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  HostTensor in = HostTensor::From<float>({nan, 1, -2, 0, 4, inf, -inf, 0, 100, -100}, {2, 5});
  SessionOptions reference;
  reference.reference_only = true;
  auto want = Session(g, reference).Run({{x, in}}, ys);
  ASSERT_TRUE(want.ok()) << want.status();
  auto got = Session(g).Run({{x, in}}, ys);
  ASSERT_TRUE(got.ok()) << got.status();
  for (size_t f = 0; f < ys.size(); ++f) {
    for (int64_t i = 0; i < (*want)[f].num_elements(); ++i) {
      const double w = (*want)[f].GetDouble(i), v = (*got)[f].GetDouble(i);
      if (std::isnan(w)) {
        EXPECT_TRUE(std::isnan(v)) << ys[f].name() << "[" << i << "] = " << v;
      } else if (std::isinf(w)) {
        EXPECT_EQ(v, w) << ys[f].name() << "[" << i << "] of " << in.GetDouble(i);
      } else {
        EXPECT_NEAR(v, w, 1e-5 + 1e-4 * std::fabs(w))
            << ys[f].name() << "[" << i << "] of " << in.GetDouble(i);
      }
    }
  }
}

TEST(BadInput, ZeroSizeTensorsRunEverywhere) {
  Graph g;
  Tensor x = Placeholder(g, DType::kF32, {-1, 7}, "x");
  std::vector<Tensor> ys;
  {
    JitScope scope(g);
    ys = {Softmax(x), Sum(x, {0}), Max(x, {1}), Concat({x, x}, 0)};
  }
  for (const SessionOptions& o : AllModes()) {
    auto r = Session(g, o).Run({{x, HostTensor(DType::kF32, {0, 7})}}, ys);
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ((*r)[0].shape(), (Shape{0, 7}));
    EXPECT_EQ((*r)[1].GetDouble(3), 0.0);  // a sum over nothing
  }
}

TEST(BadInput, ShapesWhoseSizeOverflowsAreBuildErrorsNamingTheNode) {
  Graph g;
  Tensor x = Placeholder(g, DType::kF32, {int64_t{1} << 40, int64_t{1} << 40}, "huge");
  Tensor y = Exp(x);
  ASSERT_FALSE(g.status().ok());
  EXPECT_THAT(Message(g.status()), HasSubstr("huge"));
  EXPECT_THAT(Message(g.status()), HasSubstr("too large"));
  auto r = Session(g).Run({}, {y});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);

  Graph g2;
  Tensor negative = Placeholder(g2, DType::kF32, {3, -5}, "negative");
  EXPECT_THAT(Message(g2.status()), HasSubstr("negative"));
}

// A HostTensor whose shape has a negative dim or whose byte size overflows holds no
// values (num_elements -1): {2^32, 2^32} wrapped to 0 elements and a compiled Slice read
// past its end; {-1, 3} corrupted the heap. Fed, it is an error naming the placeholder.
TEST(BadInput, HostTensorsOfImpossibleShapesAreRejectedNamingTheNode) {
  const int64_t big = int64_t{1} << 32;
  for (const Shape& shape : {Shape{big, big}, Shape{-1, 3}, Shape{big * 16, big / 4}}) {
    const HostTensor bad(DType::kF32, shape);
    EXPECT_EQ(bad.num_elements(), -1) << ShapeString(shape);
    EXPECT_EQ(bad.num_bytes(), 0u);
    Graph g;
    Tensor x = Placeholder(g, DType::kF32, {-1, -1}, "x");
    Tensor y;
    {
      JitScope scope(g);
      y = Slice(x, {0, 0}, {2, 2}) * 2.0;
    }
    for (const SessionOptions& o : AllModes()) {
      auto r = Session(g, o).Run({{x, bad}}, {y});
      ASSERT_FALSE(r.ok()) << ShapeString(shape);
      EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
      EXPECT_THAT(Message(r.status()), HasSubstr("node 'x'"));
    }
    Graph g2;
    Tensor c = Const(g2, bad, "c");
    EXPECT_THAT(Message(g2.status()), HasSubstr("node 'c'"));
    EXPECT_FALSE(Session(g2).Run({}, {c}).ok());
  }
}

// Shapes inferred at run time from fed shapes are checked as built ones are: a Sum of a
// {0, 2^32, 2^32} feed (no elements) is {2^32, 2^32}, whose count wrapped.
TEST(BadInput, ARunTimeShapeWhoseSizeOverflowsNamesTheNode) {
  const int64_t big = int64_t{1} << 32;
  Graph g;
  Tensor x = Placeholder(g, DType::kF32, {-1, -1, -1}, "x");
  Tensor y = Sum(x, {0});
  for (const SessionOptions& o : AllModes()) {
    auto r = Session(g, o).Run({{x, HostTensor(DType::kF32, {0, big, big})}}, {y});
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << r.status();
    EXPECT_THAT(Message(r.status()), HasSubstr("too large"));
  }
}

// The helpers never touch memory past an impossible shape's (empty) buffer.
TEST(BadInput, HostTensorHelpersStayInsideTheirBuffers) {
  const HostTensor v = HostTensor::From<float>({1, 2, 3, 4, 5, 6, 7, 8}, {8});
  EXPECT_EQ(v.Reshaped({-1, 8}).num_elements(), -1);
  EXPECT_EQ(v.Reshaped({2, 2}).ToVector<float>(), (std::vector<float>{1, 2, 3, 4}));
  EXPECT_TRUE(HostTensor(DType::kF32, {-1}).ToVector<float>().empty());
  EXPECT_EQ(HostTensor::From<float>({1, 2}, {-1}).num_elements(), -1);
  Function f([](Graph&, const std::vector<Tensor>& a) { return std::vector<Tensor>{a[0] * 2.0}; },
             {});
  auto r = f({HostTensor(DType::kF32, {-1, 3})});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(Message(r.status()), HasSubstr("argument 0"));
}

// A moved-from HostTensor (moved by construction or by assignment) holds no values:
// copied, printed, read, made a Const or fed, it crashed (its element count was left
// behind a null buffer); now each is safe and Const and the feed name the node. Assigned
// again, it is a tensor like any other.
TEST(BadInput, AMovedFromHostTensorHoldsNoValuesAndIsRejectedNamingTheNode) {
  HostTensor a = HostTensor::From<float>({1, 2, 3, 4}, {4});
  HostTensor b = std::move(a);
  HostTensor c;
  c = std::move(b);
  EXPECT_EQ(c.ToVector<float>(), (std::vector<float>{1, 2, 3, 4}));
  for (HostTensor* moved : {&a, &b}) {
    EXPECT_EQ(moved->num_elements(), -1);
    EXPECT_EQ(moved->num_bytes(), 0u);
    EXPECT_TRUE(moved->ToVector<float>().empty());
    const HostTensor copy = *moved;
    EXPECT_EQ(copy.num_elements(), -1);
    EXPECT_FALSE(moved->DebugString().empty());
    EXPECT_EQ(moved->Reshaped({2, 2}).ToVector<float>(), (std::vector<float>{0, 0, 0, 0}));
    Graph g;
    Tensor k = Const(g, *moved, "k");
    EXPECT_THAT(Message(g.status()), HasSubstr("node 'k'"));
    Graph g2;
    Tensor x = Placeholder(g2, DType::kF32, {-1}, "x");
    Tensor y;
    {
      JitScope scope(g2);
      y = x * 2.0;
    }
    for (const SessionOptions& o : AllModes()) {
      auto r = Session(g2, o).Run({{x, *moved}}, {y});
      ASSERT_FALSE(r.ok());
      EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
      EXPECT_THAT(Message(r.status()), HasSubstr("node 'x'"));
    }
  }
  a = HostTensor::From<float>({5}, {1});
  EXPECT_EQ(a.ToVector<float>(), (std::vector<float>{5}));
}

// A tensor that fits the index types but not in memory (4 TiB) is ResourceExhausted from
// Run: the allocation's failure was not checked, and memset wrote through null.
TEST(BadInput, ATensorTooLargeForMemoryIsResourceExhausted) {
  Graph g;
  Tensor big = BroadcastTo(ScalarConst(g, 1.0), {int64_t{1} << 20, int64_t{1} << 20});
  Tensor sum = Sum(big, {0, 1});
  ASSERT_TRUE(g.status().ok()) << g.status();
  for (const SessionOptions& o : AllModes()) {
    for (const Tensor& fetch : {big, sum}) {
      auto r = Session(g, o).Run({}, {fetch});
      ASSERT_FALSE(r.ok());
      if (o.strict) {  // strict mode refuses the cluster Halide cannot hold before that
        EXPECT_THAT(Message(r.status()), HasSubstr("node 'BroadcastTo'"));
      } else {
        EXPECT_EQ(r.status().code(), absl::StatusCode::kResourceExhausted) << r.status();
      }
    }
  }
}

TEST(BadInput, ATensorFedTwiceIsAnError) {
  Graph g;
  Tensor x = Placeholder(g, DType::kF32, {2}, "x");
  Tensor y = x * 2.0;
  auto r =
      Session(g).Run({{x, HostTensor(DType::kF32, {2})}, {x, HostTensor(DType::kF32, {2})}}, {y});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(Message(r.status()), HasSubstr("node 'x'"));
  EXPECT_THAT(Message(r.status()), HasSubstr("fed twice"));
}

// A node of several outputs still runs for the outputs not fed, and its step would write
// over the fed one: a partial feed is refused naming the node; fed whole, it does not run.
TEST(BadInput, OneOutputOfANodeOfSeveralIsNotFedAlone) {
  Graph g;
  Tensor x = Placeholder(g, DType::kF32, {2}, "x");
  int calls = 0;
  auto h =
      HostCall(g, "pair", {x}, {{DType::kF32, {2}}, {DType::kF32, {2}}},
               [&](absl::Span<const HostTensor> in) -> absl::StatusOr<std::vector<HostTensor>> {
                 ++calls;
                 return std::vector<HostTensor>{in[0], in[0]};
               });
  Tensor y = -h[1];
  const HostTensor five = HostTensor::Filled(DType::kF32, {2}, 5.0);
  const HostTensor xv = HostTensor::RandomUniform(DType::kF32, {2}, 1);
  auto r = Session(g).Run({{x, xv}, {h[1], five}}, {y});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(Message(r.status()), HasSubstr("feed for output 1 of node 'pair' (HostCall)"));
  EXPECT_THAT(Message(r.status()), HasSubstr("2 outputs and 1 of them are fed"));
  EXPECT_EQ(calls, 0);
  // Both outputs fed: the feeds stand in for the node, which does not run.
  auto whole = Session(g).Run({{h[0], xv}, {h[1], five}}, {y, h[0]});
  ASSERT_TRUE(whole.ok()) << whole.status();
  EXPECT_EQ((*whole)[0].GetDouble(0), -5.0);
  EXPECT_EQ((*whole)[1].GetDouble(1), xv.GetDouble(1));
  EXPECT_EQ(calls, 0);
}

// An update asked for as a target whose output is also fed would not run (its feed stands
// in for it): refused, and the variable keeps its value.
TEST(BadInput, AFedTargetIsAnErrorNotASkippedUpdate) {
  Graph g;
  Tensor w = Variable(g, HostTensor::Filled(DType::kF32, {2}, 1.0), "w");
  Tensor u = AssignAdd(w, Const(g, HostTensor::Filled(DType::kF32, {2}, 1.0)));
  Session s(g);
  auto r = s.Run({{u, HostTensor::Filled(DType::kF32, {2}, 7.0)}}, {}, {u});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(Message(r.status()), HasSubstr("target 0"));
  EXPECT_THAT(Message(r.status()), HasSubstr("is fed, and a fed node is not run"));
  auto value = s.Run({}, {w});
  ASSERT_TRUE(value.ok()) << value.status();
  EXPECT_EQ((*value)[0].GetDouble(0), 1.0);
}

// Concat of nothing has no graph to record its error on: it returns an invalid Tensor,
// and the error where it is used says where such a Tensor comes from.
TEST(BadInput, AnInvalidTensorSaysWhereItComesFrom) {
  Graph g;
  Tensor x = Placeholder(g, DType::kF32, {2}, "x");
  Tensor nothing = Concat({}, 0);
  EXPECT_FALSE(nothing.valid());
  Tensor y = x + nothing;
  EXPECT_THAT(Message(g.status()), HasSubstr("input 1 is not a tensor"));
  EXPECT_THAT(Message(g.status()), HasSubstr("Concat of an empty list"));
  auto r = Session(g).Run({{x, HostTensor(DType::kF32, {2})}}, {nothing});
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(Message(r.status()), HasSubstr("Concat of an empty list"));
}

TEST(BadInput, HostCallThatThrowsIsAStatusNamingTheNode) {
  Graph g;
  Tensor x = Placeholder(g, DType::kF32, {3}, "x");
  auto out = HostCall(g, "thrower", {x}, {{DType::kF32, {3}}},
                      [](absl::Span<const HostTensor>) -> absl::StatusOr<std::vector<HostTensor>> {
                        throw std::runtime_error("disk on fire");
                      });
  Tensor y = out[0] * 2.0;
  for (const SessionOptions& o : AllModes()) {
    if (o.strict) continue;  // HostCall outside a scope: strict has nothing to say
    auto r = Session(g, o).Run({{x, HostTensor(DType::kF32, {3})}}, {y});
    ASSERT_FALSE(r.ok());
    EXPECT_THAT(Message(r.status()), HasSubstr("node 'thrower' (HostCall)"));
    EXPECT_THAT(Message(r.status()), HasSubstr("disk on fire"));
  }
}

TEST(BadInput, AFailedRunChangesNoVariable) {
  Graph g;
  Tensor v = Variable(g, HostTensor::From<float>({1, 2, 3}, {3}), "v");
  Tensor x = Placeholder(g, DType::kF32, {3}, "x");
  Tensor update;
  {
    JitScope scope(g);
    update = Assign(v, v * 2.0);
  }
  auto fail = HostCall(g, "fails", {x}, {{DType::kF32, {3}}},
                       [](absl::Span<const HostTensor>) -> absl::StatusOr<std::vector<HostTensor>> {
                         return absl::UnavailableError("no");
                       });
  for (const SessionOptions& o : AllModes()) {
    if (o.strict) continue;
    Session s(g, o);
    auto r = s.Run({{x, HostTensor(DType::kF32, {3})}}, {fail[0]}, {update});
    ASSERT_FALSE(r.ok());
    auto value = s.VariableValue(v);
    ASSERT_TRUE(value.ok());
    EXPECT_EQ(value->ToVector<float>(), (std::vector<float>{1, 2, 3}));
  }
}

TEST(BadInput, TensorsFromAnotherGraphAndMissingFeedsNameThem) {
  Graph g, other;
  Tensor x = Placeholder(g, DType::kF32, {3}, "x");
  Tensor alien = Placeholder(other, DType::kF32, {3}, "alien");
  Tensor y = Exp(x);
  Session s(g);
  auto r = s.Run({}, {y});
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(Message(r.status()), HasSubstr("missing feed for node 'x'"));
  r = s.Run({{x, HostTensor(DType::kF32, {3})}}, {alien});
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(Message(r.status()), HasSubstr("another graph"));
}

// A negative axis past the rank is named as the caller wrote it: ArgMax(x, -4) of a
// rank-3 x said "axis -1 out of range" (-4 + 3), an axis that is in range.
TEST(BadInput, ANegativeAxisOutOfRangeIsNamedAsGiven) {
  using Build = Tensor (*)(Tensor);
  const std::vector<std::pair<Build, std::string>> cases = {
      {[](Tensor t) { return ArgMax(t, -4); }, "axis -4"},
      {[](Tensor t) {
         return Concat({t, t}, -4);
       },
       "axis -4"},
      {[](Tensor t) { return Gather(t, ScalarConst(*t.graph(), 0, DType::kI32), -5); }, "axis -5"},
      {[](Tensor t) { return Iota(t, -4); }, "axis -4"},
      {[](Tensor t) { return Sum(t, {-4}); }, "axis -4"},
  };
  for (const auto& [build, want] : cases) {
    Graph g;
    build(Placeholder(g, DType::kF32, {3, 1, 7}, "t"));
    EXPECT_THAT(std::string(g.status().message()), HasSubstr(want)) << g.status();
  }
}

}  // namespace
}  // namespace braze
