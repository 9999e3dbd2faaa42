// The public API probed a second time as a user writing behaviour tests would (apiaudit2,
// 2026-11-30: Function, control flow, symbolic shapes, failed Runs, gradients and
// optimizers, tensors and files, random ops): each test failed (a crash, an exception,
// a lost update or a silent no-op) before the fix it names.
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "braze/braze.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace braze {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

std::string Message(const absl::Status& s) { return std::string(s.message()); }

// The gradient of a bounded While replays max_iterations steps, and it built a Const of
// max_iterations zeros to give the replay its length: a bound of 2^40 threw
// std::bad_alloc out of Gradients (10^9 built a 4 GB graph). The length is now a
// broadcast scalar; the gradient of a small bound is unchanged.
TEST(ApiAudit2, TheGradientOfAWhileBuildsNothingOfItsBoundsSize) {
  Graph g;
  Tensor x = Placeholder(g, DType::kF32, {2}, "x");
  const auto cond = [](Graph& b, const std::vector<Tensor>& v) {
    return Less(Sum(v[0]), ScalarConst(b, 100.0));
  };
  const auto body = [](Graph&, const std::vector<Tensor>& v) {
    return std::vector<Tensor>{v[0] * 3.0};
  };
  std::vector<Tensor> huge = While(cond, body, {x}, int64_t{1} << 40, "huge");
  auto dhuge = Gradients({huge[0]}, {x});
  ASSERT_TRUE(dhuge.ok()) << dhuge.status();
  for (int id = 0; id < g.num_nodes(); ++id) {
    const Node& n = g.node(id);
    if (n.op() != OpKind::kConst) continue;
    EXPECT_LT(n.attrs_as<ConstAttrs>().value->num_elements(), 16) << n.name();
  }
  // Four iterations of v * 3 (the sum goes 3, 9, 27, 81, 243) under a bound of 5: 3^4.
  std::vector<Tensor> small = While(cond, body, {x}, 5, "small");
  auto dsmall = Gradients({small[0]}, {x});
  ASSERT_TRUE(dsmall.ok()) << dsmall.status();
  auto r = Session(g).Run({{x, HostTensor::From<float>({1, 2}, {2})}}, {small[0], (*dsmall)[0]});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->at(0).GetDouble(1), 162);
  EXPECT_EQ(r->at(1).GetDouble(0), 81);
}

// A Scan with nothing to scan (no elems, or a scalar one) called its fn anyway, with no
// slices or a slice of a scalar: a body reading slices[0] (every Scan body does) crashed
// the program (SIGSEGV) before the node's error was recorded. Now fn is not called.
TEST(ApiAudit2, AScanWithNothingToScanIsAnErrorAndNeverCallsItsBody) {
  int calls = 0;
  const ScanFn fn = [&calls](Graph&, const std::vector<Tensor>& h, const std::vector<Tensor>& x) {
    ++calls;
    return ScanStep{{h[0]}, {h[0]}};
  };
  {
    Graph g;
    ScanResult r = Scan(fn, {Placeholder(g, DType::kF32, {3}, "h")}, {});
    EXPECT_EQ(g.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(Message(g.status()), HasSubstr("node 'Scan' (Scan): Scan needs at least one "
                                               "sequence to scan (elems)"));
    ASSERT_EQ(r.carry.size(), 1u);  // handles to the node, whose error every use reports
  }
  {
    Graph g;
    Tensor h = Placeholder(g, DType::kF32, {}, "h");
    Scan(fn, {h}, {Placeholder(g, DType::kF32, {4}, "xs"), Placeholder(g, DType::kF32, {}, "s")});
    EXPECT_THAT(Message(g.status()), HasSubstr("Scan's elems 1 is a scalar (f32[])"));
  }
  EXPECT_EQ(calls, 0);
  // A Scan with a sequence still calls it once, and runs.
  Graph g;
  Tensor h = Placeholder(g, DType::kF32, {}, "h");
  Tensor xs = Placeholder(g, DType::kF32, {4}, "xs");
  ScanResult r = Scan(
      [&calls](Graph&, const std::vector<Tensor>& c, const std::vector<Tensor>& x) {
        ++calls;
        return ScanStep{{c[0] + x[0]}, {c[0]}};
      },
      {h}, {xs});
  EXPECT_EQ(calls, 1);
  auto out = Session(g).Run(
      {{h, HostTensor::Scalar<float>(1)}, {xs, HostTensor::From<float>({1, 2, 3, 4}, {4})}},
      {r.carry[0]});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(out->at(0).GetDouble(0), 11);
}

// WithDataParallel(0) stored 0, the field's "off": Minimize built a step without the
// gradients' average, and under mpirun every rank trained alone, silently.
// AverageGradients calls a bucket size < 1 an error; so does WithDataParallel now.
TEST(ApiAudit2, DataParallelWithABucketSizeBelowOneIsAnError) {
  Graph g;
  Tensor w = Variable(g, HostTensor::Filled(DType::kF32, {2}, 1.0), "w");
  Tensor loss = Sum(Square(w));
  for (int64_t bucket_bytes : {0, -5}) {
    auto train = Minimize(Optimizer::Sgd(0.1).WithDataParallel(bucket_bytes), loss, {w});
    EXPECT_EQ(train.status().code(), absl::StatusCode::kInvalidArgument) << bucket_bytes;
    EXPECT_THAT(Message(train.status()),
                HasSubstr("bad data_parallel_bucket_bytes " + std::to_string(bucket_bytes)));
  }
  // The field left at 0 without WithDataParallel is still "off".
  EXPECT_TRUE(Minimize(Optimizer::Sgd(0.1), loss, {w}).ok());
}

// A failed compile is remembered under its cluster key, which holds no names, so a later
// cluster of the same ops and shapes (another step, another graph) got the first one's
// message as its own: a strict Run on a graph whose node is 'second/BroadcastTo' failed
// with "node 'BroadcastTo' is f32[...]", a node of another graph. It now says the message
// is an earlier compile's.
TEST(ApiAudit2, ARememberedCompileFailureSaysItIsAnotherClusters) {
  const int64_t huge = (int64_t{1} << 40) + 4099;  // over Halide's 2 GiB; unique to this test
  SessionOptions strict;
  strict.device = "cpu";
  strict.strict = true;
  Graph first;
  Tensor a;
  {
    JitScope scope(first);
    a = BroadcastTo(ScalarConst(first, 1.0), {huge});
  }
  auto r1 = Session(first, strict).Run({}, {a});
  EXPECT_EQ(r1.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(Message(r1.status()), HasSubstr("node 'BroadcastTo' is f32[1099511631875]"));
  EXPECT_THAT(Message(r1.status()), Not(HasSubstr("earlier")));
  Graph second;
  Tensor b;
  {
    NameScope names(second, "second");  // its node is 'second/BroadcastTo'
    JitScope scope(second);
    b = BroadcastTo(ScalarConst(second, 1.0), {huge});
  }
  auto r2 = Session(second, strict).Run({}, {b});
  EXPECT_EQ(r2.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(Message(r2.status()), HasSubstr("a cluster of the same ops, shapes and options "
                                              "failed to compile earlier (its node names are in "
                                              "the message): "));
}

// File errors of safetensors were all Internal (which says Braze is wrong): writing into a
// directory that does not exist, and reading a directory, which an ifstream read as a
// file of 0 bytes ("DATA_LOSS: truncated"). Now each has its errno's code and says why.
TEST(ApiAudit2, SafetensorsFileErrorsHaveTheirErrnosCode) {
  TensorMap tensors;
  tensors["w"] = HostTensor::Scalar<float>(1);
  const absl::Status missing_dir =
      WriteSafetensors("/nonexistent-braze-dir/w.safetensors", tensors);
  EXPECT_EQ(missing_dir.code(), absl::StatusCode::kNotFound) << missing_dir;
  EXPECT_THAT(Message(missing_dir), HasSubstr("/nonexistent-braze-dir/w.safetensors"));
  EXPECT_THAT(Message(missing_dir), HasSubstr("No such file or directory"));
  auto directory = ReadSafetensors("/tmp");
  EXPECT_EQ(directory.status().code(), absl::StatusCode::kFailedPrecondition) << directory.status();
  EXPECT_THAT(Message(directory.status()), HasSubstr("cannot read /tmp: Is a directory"));
  auto absent = ReadSafetensors("/nonexistent-braze-dir/w.safetensors");
  EXPECT_EQ(absent.status().code(), absl::StatusCode::kNotFound);  // as the header promises
}

// A value's bad dims were shown as unknowns: a fed {-3, 2} was "the value's shape [?,2]
// has a negative dim", a Function argument {-1, 3} "[?,3]" (a -1 in a value is no
// "unknown"), and a Reshape to {-3, -2} "bad reshape target [?,?]".
TEST(ApiAudit2, BadDimsAreShownAsGiven) {
  Graph g;
  Tensor x = Placeholder(g, DType::kF32, {-1, 2}, "x");
  auto fed = Session(g).Run({{x, HostTensor(DType::kF32, {-3, 2})}}, {x * 2.0});
  EXPECT_THAT(Message(fed.status()), HasSubstr("the value's shape [-3,2] has a negative dim"));
  Function f(
      [](Graph&, const std::vector<Tensor>& a) -> std::vector<Tensor> { return {a[0] * 2.0}; });
  EXPECT_THAT(Message(f({HostTensor(DType::kF32, {-1, 3})}).status()),
              HasSubstr("argument 0's shape [-1,3] has a negative dim"));
  Reshape(Placeholder(g, DType::kF32, {6}, "y"), {-3, -2});
  EXPECT_THAT(Message(g.status()), HasSubstr("bad reshape target [-3,-2]"));
  EXPECT_EQ(ShapeString({2, -1, 3}), "[2,?,3]");  // -1 in a graph's shape is unknown
}

}  // namespace
}  // namespace braze
