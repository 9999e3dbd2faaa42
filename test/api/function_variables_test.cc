// braze::Function and the Variables its body creates (tf.function's rule): the first
// trace may create them and they live on; a later trace that would create one fails,
// naming it, instead of silently starting it (an optimizer's slots) again. Captured
// variables, variables kept from the first call, input_signature and eager calls.
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "braze/braze.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace braze {
namespace {

using ::testing::HasSubstr;

// Restores graph execution however a test ends.
struct EagerFunctions {
  EagerFunctions() { RunFunctionsEagerly(true); }
  ~EagerFunctions() { RunFunctionsEagerly(false); }
};

HostTensor Ones(int64_t n) { return HostTensor::Filled(DType::kF32, {n}, 1.0); }

// A body that creates a scalar variable "total" and adds the sum of its argument to it
// on every call, returning the new total; `created` is the variable of the last trace.
FunctionBody Accumulate(Tensor* created) {
  return [created](Graph& g, const std::vector<Tensor>& a) -> std::vector<Tensor> {
    *created = Variable(g, HostTensor::Scalar<float>(0), "total");
    return {AssignAdd(*created, Sum(a[0]))};
  };
}

double Value(const absl::StatusOr<std::vector<HostTensor>>& out) {
  EXPECT_TRUE(out.ok()) << out.status();
  return out.ok() ? (*out)[0].GetDouble(0) : -1;
}

TEST(FunctionVariablesTest, AVariableTheBodyCreatesLivesOnAcrossCallsOfItsTrace) {
  Tensor total;
  FunctionOptions o;
  o.name = "accumulate";
  Function f(Accumulate(&total), o);
  for (int i = 1; i <= 20; ++i) EXPECT_EQ(Value(f({Ones(3)})), 3.0 * i) << "call " << i;
  EXPECT_EQ(f.tracing_count(), 1);
  // The variable is the function's: ReadVariable and AssignVariable reach it.
  auto read = ReadVariable(total);
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(read->GetDouble(0), 60.0);
  ASSERT_TRUE(AssignVariable(total, HostTensor::Scalar<float>(100)).ok());
  EXPECT_EQ(Value(f({Ones(3)})), 103.0);
}

TEST(FunctionVariablesTest, ARetraceThatWouldCreateAVariableFailsNamingItAndChangesNothing) {
  Graph g;
  Tensor total;
  FunctionOptions o;
  o.name = "accumulate";
  o.graph = &g;
  Function f(Accumulate(&total), o);
  for (int i = 0; i < 3; ++i) ASSERT_EQ(Value(f({Ones(2)})), 2.0 * (i + 1));
  const Tensor first = total;
  const int nodes = g.num_nodes();

  auto retrace = f({Ones(5)});  // a new signature: a second trace
  ASSERT_FALSE(retrace.ok());
  const absl::Status& error = retrace.status();
  EXPECT_EQ(error.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(error.message(), HasSubstr("function 'accumulate': its trace for (f32[5]) creates "
                                         "variable 'total', but only a function's first trace "
                                         "may create variables"));
  EXPECT_THAT(error.message(), HasSubstr("here the one for (f32[2])"));
  EXPECT_THAT(error.message(), HasSubstr("would start again from its initial value"));
  EXPECT_THAT(error.message(), HasSubstr("Create the variables outside the body (in "
                                         "FunctionOptions::graph"));
  EXPECT_THAT(error.message(), HasSubstr("create them on the first call only"));
  EXPECT_THAT(error.message(), HasSubstr("FunctionOptions::input_signature with -1"));
  // Nothing kept, nothing run: the graph, the trace count and the variable as they were.
  EXPECT_EQ(g.num_nodes(), nodes);
  EXPECT_TRUE(g.status().ok());
  EXPECT_EQ(f.tracing_count(), 1);
  EXPECT_EQ(ReadVariable(first)->GetDouble(0), 6.0);
  // GetConcreteFunction traces as a call does.
  auto concrete = f.GetConcreteFunction({{DType::kF32, {7}}});
  EXPECT_EQ(concrete.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(concrete.status().message(), HasSubstr("creates variable 'total'"));
  // The first trace goes on from where it was.
  EXPECT_EQ(Value(f({Ones(2)})), 8.0);
  EXPECT_EQ(ReadVariable(first)->GetDouble(0), 8.0);
}

// The first trace is the first one kept: one that failed left no variable behind.
TEST(FunctionVariablesTest, AFailedFirstTraceLeavesTheNextOneFirst) {
  Tensor total;
  FunctionBody accumulate = Accumulate(&total);
  Function f([&](Graph& g, const std::vector<Tensor>& a) -> std::vector<Tensor> {
    std::vector<Tensor> out = accumulate(g, a);
    if (a[0].type().shape[0] == 3) throw std::runtime_error("no threes");
    return out;
  });
  EXPECT_EQ(f({Ones(3)}).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Value(f({Ones(2)})), 2.0);
  EXPECT_EQ(Value(f({Ones(2)})), 4.0);
  EXPECT_EQ(f.tracing_count(), 1);
  EXPECT_EQ(f({Ones(3)}).status().code(), absl::StatusCode::kInvalidArgument);  // thrown first
  EXPECT_EQ(f({Ones(4)}).status().code(), absl::StatusCode::kFailedPrecondition);
}

// ... and leaves the names as they were: a failed trace's scope ("step"), its variables'
// and its ops' names are given out again, so the next trace's variables have the names a
// run without the failure gives them (what checkpoints are keyed by) and its random ops
// the same default keys (made from their names).
TEST(FunctionVariablesTest, AFailedTraceLeavesTheNamesOfTheNextOnesAsTheyWere) {
  auto names = [](bool fail_first) {
    Graph g;
    FunctionOptions options;
    options.graph = &g;
    options.name = "step";
    Function f(
        [](Graph& body, const std::vector<Tensor>& a) -> std::vector<Tensor> {
          Tensor w = Variable(body, HostTensor::Scalar<float>(1), "w");
          Tensor noise = RandomUniform(a[0], ScalarConst(body, 0, DType::kI32), 3);
          std::vector<Tensor> out = {AssignAdd(w, Sum(a[0] * noise))};
          if (a[0].type().shape[0] == 3) throw std::runtime_error("no threes");
          return out;
        },
        options);
    if (fail_first) {
      EXPECT_FALSE(f({Ones(3)}).ok());
    }
    EXPECT_TRUE(f({Ones(2)}).ok());
    std::vector<std::string> out;
    for (int id = 0; id < g.num_nodes(); ++id) out.push_back(g.node(id).name());
    return out;
  };
  EXPECT_EQ(names(true), names(false));
  EXPECT_THAT(names(true), ::testing::Contains("step/w"));
}

TEST(FunctionVariablesTest, SeveralVariablesCreatedByARetraceAreCounted) {
  Function f([](Graph& g, const std::vector<Tensor>& a) -> std::vector<Tensor> {
    Tensor u = Variable(g, HostTensor::Scalar<float>(0), "u");
    Tensor v = Variable(g, HostTensor::Scalar<float>(0), "v");
    return {AssignAdd(u, Sum(a[0])) + AssignAdd(v, Sum(a[0]))};
  });
  ASSERT_TRUE(f({Ones(2)}).ok());
  auto retrace = f({Ones(4)});
  EXPECT_THAT(retrace.status().message(), HasSubstr("creates variable 'u' (and 1 more)"));
}

TEST(FunctionVariablesTest, CapturedVariablesRetraceFreely) {
  Graph g;
  Tensor total = Variable(g, HostTensor::Scalar<float>(0), "total");
  FunctionOptions o;
  o.graph = &g;
  Function f(
      [&](Graph&, const std::vector<Tensor>& a) -> std::vector<Tensor> {
        return {AssignAdd(total, Sum(a[0]))};
      },
      o);
  double expected = 0;
  for (int64_t n = 1; n <= 4; ++n) {
    expected += static_cast<double>(n);
    EXPECT_EQ(Value(f({Ones(n)})), expected) << "size " << n;
  }
  EXPECT_EQ(f.tracing_count(), 4);
  EXPECT_EQ(ReadVariable(total)->GetDouble(0), 10.0);
}

// TF's `if self.v is None: self.v = tf.Variable(...)`: the first trace creates it, later
// traces use it; every trace shares it.
TEST(FunctionVariablesTest, AVariableKeptFromTheFirstCallIsSharedByLaterTraces) {
  std::optional<Tensor> total;
  Function f([&](Graph& g, const std::vector<Tensor>& a) -> std::vector<Tensor> {
    if (!total) total = Variable(g, HostTensor::Scalar<float>(0), "total");
    return {AssignAdd(*total, Sum(a[0]))};
  });
  EXPECT_EQ(Value(f({Ones(2)})), 2.0);
  EXPECT_EQ(Value(f({Ones(3)})), 5.0);
  EXPECT_EQ(Value(f({Ones(2)})), 7.0);
  EXPECT_EQ(Value(f({Ones(4)})), 11.0);
  EXPECT_EQ(f.tracing_count(), 3);
  EXPECT_EQ(ReadVariable(*total)->GetDouble(0), 11.0);
}

// Adam built in the body: its slots and step are created by the first trace and persist
// over its calls; a retrace would restart them, so it fails and moves nothing.
TEST(FunctionVariablesTest, AnOptimizerBuiltInTheBodyKeepsItsStateAndARetraceFails) {
  Graph g;
  Tensor w = Variable(g, HostTensor::From<float>({5, -3}, {2}), "w");
  FunctionOptions o;
  o.name = "adam_step";
  o.graph = &g;
  Function step(
      [&](Graph&, const std::vector<Tensor>& a) -> std::vector<Tensor> {
        // a[1]'s size does not change the loss; it changes the signature.
        Tensor loss = Sum(Square(w - a[0])) * Mean(a[1]);
        auto updates = Minimize(Optimizer::Adam(0.1), loss, {w});
        if (!updates.ok()) throw std::runtime_error(std::string(updates.status().message()));
        return {loss};
      },
      o);
  const HostTensor target = HostTensor::From<float>({1, 2}, {2});
  for (int i = 0; i < 50; ++i) ASSERT_TRUE(step({target, Ones(4)}).ok()) << i;
  std::optional<Tensor> adam_step = g.FindTensor("adam_step/Adam/step");
  ASSERT_TRUE(adam_step.has_value());
  EXPECT_EQ(ReadVariable(*adam_step)->GetDouble(0), 50.0);  // one Adam, never restarted
  const HostTensor w_before = *ReadVariable(w);

  auto retrace = step({target, Ones(8)});
  ASSERT_FALSE(retrace.ok());
  EXPECT_EQ(retrace.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(retrace.status().message(),
              HasSubstr("function 'adam_step': its trace for (f32[2], f32[8]) creates variable "
                        "'Adam/step' (and 2 more)"));
  EXPECT_EQ(ReadVariable(w)->GetDouble(0), w_before.GetDouble(0));
  EXPECT_EQ(ReadVariable(w)->GetDouble(1), w_before.GetDouble(1));
  EXPECT_EQ(ReadVariable(*adam_step)->GetDouble(0), 50.0);

  for (int i = 50; i < 300; ++i) ASSERT_TRUE(step({target, Ones(4)}).ok()) << i;
  EXPECT_EQ(ReadVariable(*adam_step)->GetDouble(0), 300.0);
  EXPECT_NEAR(ReadVariable(w)->GetDouble(0), 1.0, 0.05);
  EXPECT_NEAR(ReadVariable(w)->GetDouble(1), 2.0, 0.05);
  EXPECT_EQ(step.tracing_count(), 1);
}

// One trace serves every size of a -1 dim: no retrace, so no error, and one total.
TEST(FunctionVariablesTest, AnInputSignatureWithAnUnknownDimServesEverySizeWithOneTrace) {
  Tensor total;
  FunctionOptions o;
  o.input_signature = std::vector<TensorSpec>{{DType::kF32, {-1}}};
  o.jit_compile = true;
  Function f(Accumulate(&total), o);
  double expected = 0;
  for (int64_t n : {1, 7, 3, 64, 2, 7}) {
    expected += static_cast<double>(n);
    EXPECT_EQ(Value(f({Ones(n)})), expected) << "size " << n;
  }
  EXPECT_EQ(f.tracing_count(), 1);
}

// reduce_retracing traces the first call as it is and a later size generalized: that
// second trace is a retrace, and fails as any other.
TEST(FunctionVariablesTest, ReduceRetracingStillRetracesOnceAndThatFails) {
  Tensor total;
  FunctionOptions o;
  o.reduce_retracing = true;
  Function f(Accumulate(&total), o);
  EXPECT_EQ(Value(f({Ones(2)})), 2.0);
  auto retrace = f({Ones(3)});
  EXPECT_EQ(retrace.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(retrace.status().message(), HasSubstr("its trace for (f32[?]) creates variable"));
  EXPECT_EQ(Value(f({Ones(2)})), 4.0);
}

// Eager calls run the body anew, so it creates its variables again each time: they stand
// for those of the first call and go on from their values; a call that would retrace
// when not running eagerly fails as the retrace would.
TEST(FunctionVariablesTest, EagerCallsGoOnWithTheVariablesOfTheFirstCall) {
  for (bool own_graph : {true, false}) {
    SCOPED_TRACE(own_graph ? "a graph of its own" : "FunctionOptions::graph");
    Graph g;
    Tensor total;
    FunctionOptions o;
    o.name = "accumulate";
    if (!own_graph) o.graph = &g;
    Function f(Accumulate(&total), o);
    {
      EagerFunctions eager;
      EXPECT_EQ(Value(f({Ones(2)})), 2.0);
      EXPECT_EQ(Value(f({Ones(2)})), 4.0);
      auto other = f({Ones(3)});
      EXPECT_EQ(other.status().code(), absl::StatusCode::kFailedPrecondition);
      EXPECT_THAT(other.status().message(),
                  HasSubstr("function 'accumulate': its eager call with (f32[3]) creates "
                            "variable 'total', but only a function's first trace may create "
                            "variables (as in tf.function), here the one for (f32[2])"));
      EXPECT_EQ(Value(f({Ones(2)})), 6.0);
      EXPECT_EQ(f.tracing_count(), 0);
    }
    // Graph execution goes on from the eager calls' value, and eager from the graph's.
    EXPECT_EQ(Value(f({Ones(2)})), 8.0);
    EXPECT_EQ(Value(f({Ones(2)})), 10.0);
    EXPECT_EQ(f.tracing_count(), 1);
    {
      EagerFunctions eager;
      EXPECT_EQ(Value(f({Ones(2)})), 12.0);
    }
    EXPECT_EQ(Value(f({Ones(2)})), 14.0);
    EXPECT_FALSE(f({Ones(3)}).ok());  // the retrace
  }
}

TEST(FunctionVariablesTest, EagerCallsAfterATraceGoOnFromIt) {
  Graph g;
  Tensor w = Variable(g, HostTensor::From<float>({5, -3}, {2}), "w");
  Function step([&](Graph&, const std::vector<Tensor>& a) -> std::vector<Tensor> {
    Tensor loss = Sum(Square(w - a[0]));
    auto updates = Minimize(Optimizer::Adam(0.1), loss, {w});
    if (!updates.ok()) throw std::runtime_error(std::string(updates.status().message()));
    return {loss};
  });
  const HostTensor target = HostTensor::From<float>({1, 2}, {2});
  // Graph and eager calls alternate as one run of Adam: the same as 300 graph calls.
  for (int i = 0; i < 300; ++i) {
    std::optional<EagerFunctions> eager;
    if (i % 3 == 1) eager.emplace();
    ASSERT_TRUE(step({target}).ok()) << i;
  }
  EXPECT_NEAR(ReadVariable(w)->GetDouble(0), 1.0, 0.05);
  EXPECT_NEAR(ReadVariable(w)->GetDouble(1), 2.0, 0.05);
  EXPECT_EQ(step.tracing_count(), 1);
}

TEST(FunctionVariablesTest, AnEagerCallCreatingANewVariableFailsNamingIt) {
  EagerFunctions eager;
  int calls = 0;
  Function f([&](Graph& g, const std::vector<Tensor>& a) -> std::vector<Tensor> {
    Tensor out = Sum(a[0]);
    if (++calls > 1) out = AssignAdd(Variable(g, HostTensor::Scalar<float>(0), "late"), out);
    return {out};
  });
  ASSERT_TRUE(f({Ones(2)}).ok());
  auto late = f({Ones(2)});
  EXPECT_EQ(late.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(late.status().message(),
              HasSubstr("its eager call with (f32[2]) creates variable 'late', but the "
                        "function's first call created no such variable"));
}

}  // namespace
}  // namespace braze
