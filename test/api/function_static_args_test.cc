// braze::Function's static (non-tensor) arguments: one trace per value, reuse, the
// retracing warning naming the argument, input_signature over the tensors only, bad
// input naming the argument, eager calls and threads.
#include <atomic>
#include <cmath>
#include <string>
#include <thread>
#include <vector>

#include "braze/braze.h"
#include "braze/function.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace braze {
namespace {

using ::testing::HasSubstr;

HostTensor Random(Shape shape, uint64_t seed) {
  return HostTensor::RandomUniform(DType::kF32, std::move(shape), seed, -1.0, 1.0);
}

// y = x * scale + (tanh(x) when `squash`), built per trace from the static values
// (args: x, int scale, bool squash); `traces` counts body runs.
TracedArgsBody ScaleBody(std::atomic<int>* traces) {
  return [traces](Graph&, const std::vector<TracedArg>& args) -> std::vector<Tensor> {
    ++*traces;
    Tensor y = args[0].tensor() * static_cast<double>(args[1].Int());
    if (args[2].Bool()) y = y + Tanh(args[0].tensor());
    return {y};
  };
}

void ExpectScaled(const HostTensor& x, int64_t scale, bool squash, const HostTensor& y) {
  ASSERT_EQ(y.shape(), x.shape());
  for (int64_t i = 0; i < x.num_elements(); ++i) {
    const double v = x.GetDouble(i);
    EXPECT_NEAR(y.GetDouble(i), v * scale + (squash ? std::tanh(v) : 0.0), 1e-5) << "element " << i;
  }
}

class Warnings {
 public:
  Warnings() {
    SetLogSink([this](LogSeverity severity, int, std::string_view text) {
      if (severity == LogSeverity::kWarning) messages.emplace_back(text);
    });
  }
  ~Warnings() { SetLogSink(nullptr); }
  std::vector<std::string> messages;
};

TEST(FunctionStaticArgsTest, TracesOncePerValueAndReusesTheTraceForAValueSeenBefore) {
  std::atomic<int> traces{0};
  FunctionOptions o;
  o.name = "scale";
  o.jit_compile = true;
  Function f(ScaleBody(&traces), o);
  const HostTensor x = Random({3, 7}, 1);  // odd and prime extents
  for (auto [scale, squash] : {std::pair<int, bool>{2, false}, {3, false}, {2, true}}) {
    auto y = f.Call({x, scale, squash});
    ASSERT_TRUE(y.ok()) << y.status();
    ExpectScaled(x, scale, squash, (*y)[0]);
  }
  EXPECT_EQ(f.tracing_count(), 3);
  const int64_t compiles = f.stats().compiles;
  for (int repeat = 0; repeat < 2; ++repeat) {  // values seen before: no trace, no compile
    const HostTensor x2 = Random({3, 7}, 10 + repeat);
    auto y = f.Call({x2, int64_t{3}, false});
    ASSERT_TRUE(y.ok()) << y.status();
    ExpectScaled(x2, 3, false, (*y)[0]);
  }
  EXPECT_EQ(f.tracing_count(), 3);
  EXPECT_EQ(traces.load(), 3);
  EXPECT_EQ(f.stats().compiles, compiles);
  // A new tensor signature with a known value traces once more.
  const HostTensor x3 = Random({1, 2}, 4);
  auto y = f.Call({x3, 2, true});
  ASSERT_TRUE(y.ok()) << y.status();
  ExpectScaled(x3, 2, true, (*y)[0]);
  EXPECT_EQ(f.tracing_count(), 4);
}

TEST(FunctionStaticArgsTest, StringsAndDoublesSelectWhatIsTracedAndTypesAreDistinct) {
  std::atomic<int> traces{0};
  Function f([&](Graph&, const std::vector<TracedArg>& a) -> std::vector<Tensor> {
    ++traces;
    const Tensor x = a[0].tensor();
    const Tensor act = a[1].String() == "relu" ? Relu(x) : Tanh(x);
    return {act * a[2].Double()};  // an int is converted; a different key from a double
  });
  const HostTensor x = Random({5}, 2);
  auto relu = f.Call({x, "relu", 0.5});
  auto tanh = f.Call({x, std::string("tanh"), 0.5});
  auto relu_int = f.Call({x, "relu", 2});
  ASSERT_TRUE(relu.ok() && tanh.ok() && relu_int.ok());
  for (int64_t i = 0; i < 5; ++i) {
    const double v = x.GetDouble(i);
    EXPECT_NEAR((*relu)[0].GetDouble(i), std::max(v, 0.0) * 0.5, 1e-6);
    EXPECT_NEAR((*tanh)[0].GetDouble(i), std::tanh(v) * 0.5, 1e-6);
    EXPECT_NEAR((*relu_int)[0].GetDouble(i), std::max(v, 0.0) * 2, 1e-6);
  }
  EXPECT_EQ(f.tracing_count(), 3);
  ASSERT_TRUE(f.Call({x, "relu", 2.0}).ok());  // double 2 is not int 2
  EXPECT_EQ(f.tracing_count(), 4);
  ASSERT_TRUE(f.Call({x, "relu", 0.5}).ok());
  EXPECT_EQ(f.tracing_count(), 4);
  // Any integer type is an int, any floating type a double: the traces above serve them.
  ASSERT_TRUE(f.Call({x, "relu", size_t{2}}).ok());
  ASSERT_TRUE(f.Call({x, "relu", 0.5f}).ok());
  EXPECT_EQ(f.tracing_count(), 4);
}

// A double is its trace key by its bits: a NaN seen before reuses its trace (== never
// held, so every call with it traced and compiled again), and -0.0 is not 0.0 (a body's
// 1 / x is -inf there; -0.0 got the trace of 0.0 and its inf).
TEST(FunctionStaticArgsTest, DoublesAreKeyedByTheirBitsNaNOnceAndNegativeZeroApart) {
  Function f([](Graph&, const std::vector<TracedArg>& a) -> std::vector<Tensor> {
    return {a[0].tensor() * (1.0 / a[1].Double())};
  });
  const HostTensor x = HostTensor::From<float>({1, -2, 3}, {3});
  for (int call = 0; call < 4; ++call) {
    auto y = f.Call({x, std::nan("")});
    ASSERT_TRUE(y.ok()) << y.status();
    EXPECT_TRUE(std::isnan((*y)[0].GetDouble(0)));
  }
  EXPECT_EQ(f.tracing_count(), 1);
  auto pos = f.Call({x, 0.0});
  auto neg = f.Call({x, -0.0});
  ASSERT_TRUE(pos.ok() && neg.ok());
  EXPECT_EQ(f.tracing_count(), 3);
  EXPECT_EQ((*pos)[0].ToVector<float>(), (std::vector<float>{INFINITY, -INFINITY, INFINITY}));
  EXPECT_EQ((*neg)[0].ToVector<float>(), (std::vector<float>{-INFINITY, INFINITY, -INFINITY}));
  ASSERT_TRUE(f.Call({x, -0.0}).ok());
  ASSERT_TRUE(f.Call({x, 0.0}).ok());
  EXPECT_EQ(f.tracing_count(), 3);
}

TEST(FunctionStaticArgsTest, ReduceRetracingGeneralizesAmongTracesOfTheSameValues) {
  std::atomic<int> traces{0};
  FunctionOptions o;
  o.reduce_retracing = true;
  Function f(ScaleBody(&traces), o);
  auto call = [&](int64_t rows, int scale) {
    const HostTensor x = Random({rows, 3}, rows);
    auto y = f.Call({x, scale, false});
    ASSERT_TRUE(y.ok()) << y.status();
    ExpectScaled(x, scale, false, (*y)[0]);
  };
  call(2, 1);
  call(4, 1);  // generalized to [?, 3] for scale 1
  call(5, 1);
  EXPECT_EQ(f.tracing_count(), 2);
  call(6, 2);  // a new value: nothing of its own to generalize against yet
  EXPECT_EQ(f.tracing_count(), 3);
  call(7, 2);  // generalized for scale 2
  call(9, 2);
  call(8, 1);
  EXPECT_EQ(f.tracing_count(), 4);
}

TEST(FunctionStaticArgsTest, RetracingWarningNamesTheStaticArgument) {
  Warnings warnings;
  std::atomic<int> traces{0};
  FunctionOptions o;
  o.name = "stepper";
  Function f(ScaleBody(&traces), o);
  const HostTensor x = Random({4}, 3);
  for (int scale = 1; scale <= 4; ++scale) ASSERT_TRUE(f.Call({x, scale, false}).ok());
  EXPECT_TRUE(warnings.messages.empty());
  ASSERT_TRUE(f.Call({x, 5, false}).ok());  // the 5th trace in 5 calls
  ASSERT_EQ(warnings.messages.size(), 1u);
  EXPECT_THAT(warnings.messages[0], HasSubstr("function 'stepper' has traced 5 times"));
  EXPECT_THAT(warnings.messages[0], HasSubstr("argument 1 (int 1, int 2, int 3, int 4, int 5)"));
  EXPECT_THAT(warnings.messages[0], HasSubstr("pass a value that varies as a tensor"));
  EXPECT_THAT(warnings.messages[0], ::testing::Not(HasSubstr("argument 0 dim")));
  for (int scale = 6; scale <= 12; ++scale) ASSERT_TRUE(f.Call({x, scale, false}).ok());
  EXPECT_EQ(warnings.messages.size(), 1u);  // once
}

TEST(FunctionStaticArgsTest, ReusedValuesAmongManyCallsDoNotWarn) {
  Warnings warnings;
  std::atomic<int> traces{0};
  Function f(ScaleBody(&traces));
  const HostTensor x = Random({4}, 3);
  for (int call = 0; call < 30; ++call) {
    ASSERT_TRUE(f.Call({x, call % 2, (call / 2) % 2 == 0}).ok());
  }
  EXPECT_EQ(f.tracing_count(), 4);  // 2 scales x 2 flags, then 26 calls reusing them
  EXPECT_TRUE(warnings.messages.empty());
}

TEST(FunctionStaticArgsTest, InputSignatureCoversTheTensorArgumentsOnly) {
  std::atomic<int> traces{0};
  FunctionOptions o;
  o.name = "sig";
  o.input_signature = std::vector<TensorSpec>{{DType::kF32, {-1, 5}}};
  Function f(ScaleBody(&traces), o);
  for (int64_t batch : {1, 3, 13}) {
    const HostTensor x = Random({batch, 5}, batch);
    auto y = f.Call({x, 3, true});
    ASSERT_TRUE(y.ok()) << y.status();
    ExpectScaled(x, 3, true, (*y)[0]);
  }
  EXPECT_EQ(f.tracing_count(), 1);
  auto bad_dim = f.Call({Random({2, 4}, 1), 3, true});
  EXPECT_EQ(bad_dim.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(bad_dim.status().message(), HasSubstr("function 'sig': argument 0 dim 1 differs"));
  // Moved: a static value where the function's first trace took a tensor.
  auto moved = f.Call({3, Random({2, 5}, 1), true});
  EXPECT_EQ(moved.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(moved.status().message(),
              HasSubstr("argument 0 is a static value (int 3), but the function's first trace "
                        "took a tensor there"));
  auto swapped = f.Call({Random({2, 5}, 1), Random({2, 5}, 2), true});
  EXPECT_THAT(swapped.status().message(), HasSubstr("function 'sig' takes 1 tensor arguments"));
  auto count = f.Call({Random({2, 5}, 1), 3});
  EXPECT_THAT(count.status().message(), HasSubstr("takes 3 arguments (as traced first), got 2"));
  EXPECT_EQ(f.tracing_count(), 1);
}

TEST(FunctionStaticArgsTest, AStaticValueWhereTheSignatureExpectsATensorNamesTheArgument) {
  std::atomic<int> traces{0};
  FunctionOptions o;
  o.name = "pair";
  o.input_signature = std::vector<TensorSpec>{{DType::kF32, {-1}}, {DType::kF32, {-1}}};
  Function f(
      [&](Graph&, const std::vector<TracedArg>& a) -> std::vector<Tensor> {
        ++traces;
        return {a[0].tensor() + a[1].tensor()};
      },
      o);
  auto bad = f.Call({Random({3}, 1), 7});
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(bad.status().message(),
              HasSubstr("function 'pair': argument 1 is a static value (int 7), but "
                        "input_signature expects a tensor there (f32[?])"));
  // The tensor after a static value is named by its position in the call.
  auto bad_dtype = f.Call({true, Random({3}, 1), HostTensor::From<int32_t>({1, 2, 3}, {3})});
  EXPECT_THAT(bad_dtype.status().message(), HasSubstr("argument 2 has the wrong dtype"));
  EXPECT_EQ(traces.load(), 0);
  EXPECT_EQ(f.tracing_count(), 0);
}

TEST(FunctionStaticArgsTest, ABodyAskingForTheWrongKindIsAStatusNamingTheArgument) {
  Function f(
      [](Graph&, const std::vector<TracedArg>& a) -> std::vector<Tensor> {
        return {a[0].tensor() * static_cast<double>(a[1].Int())};
      },
      FunctionOptions{.name = "kinds"});
  const HostTensor x = Random({3}, 1);
  auto as_string = f.Call({x, "three"});
  EXPECT_EQ(as_string.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(as_string.status().message(),
              HasSubstr("function 'kinds': argument 1 is string \"three\", but the body asked "
                        "for an int"));
  auto no_tensor = f.Call({1.5, 2});
  EXPECT_EQ(no_tensor.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(no_tensor.status().message(), HasSubstr("argument 0 is double 1.5"));
  auto as_value = f.Call({x, x});
  EXPECT_THAT(as_value.status().message(),
              HasSubstr("argument 1 is a tensor, but the body asked for a static value"));
  EXPECT_EQ(f.tracing_count(), 0);  // failed traces are not kept
  auto ok = f.Call({x, 4});
  ASSERT_TRUE(ok.ok()) << ok.status();
  ExpectScaled(x, 4, false, (*ok)[0]);
}

TEST(FunctionStaticArgsTest, ATensorOnlyBodyTakesNoStaticValues) {
  Function f(
      [](Graph&, const std::vector<Tensor>& a) -> std::vector<Tensor> { return {a[0] * 2.0}; },
      FunctionOptions{.name = "plain"});
  const HostTensor x = Random({7}, 5);
  auto bad = f.Call({x, 3});
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(bad.status().message(),
              HasSubstr("'plain': argument 1 is a static value (int 3), but the body takes "
                        "tensors only"));
  auto call = f.Call({x});  // tensors through Call as through operator()
  auto op = f({x});
  ASSERT_TRUE(call.ok() && op.ok());
  ExpectScaled(x, 2, false, (*call)[0]);
  ExpectScaled(x, 2, false, (*op)[0]);
  EXPECT_EQ(f.tracing_count(), 1);
}

TEST(FunctionStaticArgsTest, EagerCallsRunTheBodyWithTheValues) {
  RunFunctionsEagerly(true);
  std::atomic<int> traces{0};
  Function f(ScaleBody(&traces));
  const HostTensor x = Random({2, 3}, 6);
  auto a = f.Call({x, 5, true});
  auto b = f.Call({x, 5, true});
  RunFunctionsEagerly(false);
  ASSERT_TRUE(a.ok() && b.ok());
  ExpectScaled(x, 5, true, (*a)[0]);
  ExpectScaled(x, 5, true, (*b)[0]);
  EXPECT_EQ(traces.load(), 2);  // the body runs on each eager call
  EXPECT_EQ(f.tracing_count(), 0);
}

TEST(FunctionStaticArgsTest, ConcurrentCallsTraceEachValueOnce) {
  std::atomic<int> traces{0};
  FunctionOptions o;
  o.jit_compile = true;
  Function f(ScaleBody(&traces), o);
  std::vector<std::thread> threads;
  std::atomic<int> wrong{0};
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 6; ++i) {
        const HostTensor x = Random({9, 2}, t * 100 + i);
        const int scale = 1 + (t + i) % 3;
        auto y = f.Call({x, scale, false});
        if (!y.ok() || std::abs((*y)[0].GetDouble(17) - x.GetDouble(17) * scale) > 1e-5) ++wrong;
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(wrong.load(), 0);
  EXPECT_EQ(traces.load(), 3);
  EXPECT_EQ(f.tracing_count(), 3);
}

}  // namespace
}  // namespace braze
