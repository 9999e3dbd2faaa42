// Bad input at the public API, found by probing it as a user would (apiaudit, 2026-11-30):
// each test failed (a crash, an exception, a silent wrong shape or a silent fallback)
// before the fix it names.
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "braze/braze.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace braze {
namespace {

using ::testing::HasSubstr;

constexpr int64_t kMax64 = std::numeric_limits<int64_t>::max();

std::string Message(const absl::Status& s) { return std::string(s.message()); }

SessionOptions ReferenceOnly() {
  SessionOptions o;
  o.reference_only = true;
  return o;
}

// Tensor(&g, 999) and Tensor(&g, id, -1) name nothing; Session::Run indexed its per-node
// tables with them (SIGSEGV), builders read outputs_[-1] (std::bad_array_new_length).
TEST(ApiAudit, HandlesNamingNoOutputAreErrorsNamingThem) {
  Graph g;
  Tensor x = Placeholder(g, DType::kF32, {3}, "x");
  Tensor y = Exp(x);
  const HostTensor v = HostTensor::RandomUniform(DType::kF32, {3}, 1);
  auto no_outputs =
      HostCall(g, "sink", {x}, {},
               [](absl::Span<const HostTensor>) -> absl::StatusOr<std::vector<HostTensor>> {
                 return std::vector<HostTensor>{};
               });
  EXPECT_TRUE(no_outputs.empty());
  const Tensor sink = *g.FindTensor("sink");
  for (const SessionOptions& o : {ReferenceOnly(), SessionOptions{}}) {
    Session s(g, o);
    struct Case {
      const char* what;
      absl::Status status;
      const char* want;
    };
    const Case cases[] = {
        {"fetch of a node id past the graph", s.Run({{x, v}}, {Tensor(&g, 999)}).status(),
         "fetch 0 names no output of the graph (node id 999, output 0)"},
        {"fetch of a negative node id", s.Run({{x, v}}, {y, Tensor(&g, -3)}).status(),
         "fetch 1 names no output of the graph (node id -3"},
        {"fetch of an output past the node's",
         s.Run({{x, v}}, {Tensor(&g, y.node_id(), 5)}).status(), "output 5)"},
        {"fetch of output -1", s.Run({{x, v}}, {Tensor(&g, y.node_id(), -1)}).status(),
         "output -1)"},
        {"fetch of a node with no outputs", s.Run({{x, v}}, {sink}).status(),
         "fetch 0 names no output"},
        {"feed of a node id past the graph", s.Run({{Tensor(&g, 999), v}}, {y}).status(),
         "feed 0 names no output"},
        {"target of a node id past the graph", s.Run({{x, v}}, {y}, {Tensor(&g, 999)}).status(),
         "target 0 names no output"},
        {"VariableValue", s.VariableValue(Tensor(&g, 999)).status(), "needs a Variable"},
        {"AssignVariable", s.AssignVariable(Tensor(&g, 999), v), "needs a Variable"},
    };
    for (const Case& c : cases) {
      EXPECT_EQ(c.status.code(), absl::StatusCode::kInvalidArgument) << c.what;
      EXPECT_THAT(Message(c.status), HasSubstr(c.want)) << c.what;
    }
    // A node with no outputs is a target (its handle's index 0), and the session works on.
    ASSERT_TRUE(s.Run({{x, v}}, {}, {sink}).ok());
    auto r = s.Run({{x, v}}, {y});
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_FLOAT_EQ(r->at(0).GetDouble(2), std::exp(static_cast<float>(v.GetDouble(2))));
    // After a Run planned clusters: a handle naming nothing still belongs to none.
    EXPECT_FALSE(s.ClusterOf(Tensor(&g, 999)).has_value());
    // Graph::Outputs of a handle naming no output is empty (it indexed past the nodes).
    EXPECT_TRUE(g.Outputs(Tensor(&g, 999)).empty());
    EXPECT_TRUE(g.Outputs(Tensor(&g, -1)).empty());
    EXPECT_TRUE(g.Outputs(Tensor(&g, y.node_id(), 5)).empty());
    EXPECT_EQ(g.Outputs(y).size(), 1u);
  }
}

TEST(ApiAudit, BuildersAndBodiesGivenHandlesNamingNoOutputRecordAnError) {
  {
    Graph g;
    Tensor x = Placeholder(g, DType::kF32, {3}, "x");
    Tensor sum = x + Tensor(&g, x.node_id(), -1);
    EXPECT_THAT(Message(g.status()), HasSubstr("node 'Add' (Add): input 1 names no output of the "
                                               "graph (node id 0, output -1)"));
    EXPECT_EQ(g.node(sum.node_id()).num_inputs(), 1);
    // Its error node keeps only real inputs: planning a Run never follows the bad one.
    auto r = Session(g).Run({{x, HostTensor(DType::kF32, {3})}}, {sum});
    EXPECT_THAT(Message(r.status()), HasSubstr("names no output"));
  }
  {
    Graph g;
    Softmax(Tensor(&g, 999));  // a composite reads the handle's rank before any node
    EXPECT_THAT(Message(g.status()), HasSubstr("input 0 names no output of the graph"));
  }
  {
    Function f([](Graph&, const std::vector<Tensor>& args) -> std::vector<Tensor> {
      return {Tensor(args[0].graph(), 999)};
    });
    auto r = f({HostTensor(DType::kF32, {3})});
    EXPECT_THAT(Message(r.status()), HasSubstr("output 0 names no output of the graph"));
  }
  {
    Graph g;
    Tensor p = ScalarConst(g, 1.0, DType::kBool);
    Tensor x = Placeholder(g, DType::kF32, {3}, "x");
    Cond(
        p,
        [](Graph& b, const std::vector<Tensor>&) { return std::vector<Tensor>{Tensor(&b, 999)}; },
        [](Graph&, const std::vector<Tensor>& ops) { return std::vector<Tensor>{ops[0]}; }, {x});
    EXPECT_THAT(Message(g.status()), HasSubstr("then result 0 names no output of its graph"));
  }
}

// Shape arithmetic in shape inference wrapped: Pad of x[3] by 2^63 - 1 on both sides was
// a dim of 1 and ran (OK, garbage); a bool Slice from 1 of size 2^63 - 1 passed its
// bounds check (1 + size wrapped negative); a Concat of four [0, 2^62] was [0, 0].
TEST(ApiAudit, ShapeArithmeticThatOverflowsIsABuildErrorNamingTheNode) {
  struct Case {
    const char* what;
    std::function<void(Graph&)> build;
    const char* want;
  };
  const Case cases[] = {
      {"Pad",
       [](Graph& g) {
         Pad(Placeholder(g, DType::kF32, {3}), {{kMax64, kMax64}});
       },
       "node 'Pad' (Pad): padding 9223372036854775807 + 9223372036854775807 of dim 0 (3) "
       "overflows"},
      {"Pad of an empty dim",
       [](Graph& g) {
         Pad(Placeholder(g, DType::kF32, {0, 2}), {{0, 0}, {kMax64 - 1, 2}});
       },
       "node 'Pad' (Pad): padding"},
      {"Slice", [](Graph& g) { Slice(Placeholder(g, DType::kBool, {5}), {1}, {kMax64}); },
       "node 'Slice' (Slice): slice [1, +9223372036854775807) out of bounds"},
      {"Concat",
       [](Graph& g) {
         Tensor x = Placeholder(g, DType::kBool, {int64_t{1} << 62, 0});
         Concat({x, x, x, x}, 0);
       },
       "node 'Concat' (Concat): concat axis 0: the sum of the inputs' dims overflows"},
  };
  for (const Case& c : cases) {
    Graph g;
    c.build(g);
    EXPECT_EQ(g.status().code(), absl::StatusCode::kInvalidArgument) << c.what;
    EXPECT_THAT(Message(g.status()), HasSubstr(c.want)) << c.what;
  }
  // At run time too, where the dims were -1 when the graph was built.
  Graph g;
  Tensor x = Placeholder(g, DType::kBool, {-1}, "x");
  Tensor s = Slice(x, {1}, {kMax64});
  ASSERT_TRUE(g.status().ok()) << g.status();
  auto r = Session(g, ReferenceOnly()).Run({{x, HostTensor(DType::kBool, {5})}}, {s});
  EXPECT_THAT(Message(r.status()), HasSubstr("node 'Slice' (Slice): slice [1, "));
}

// A value outside the DType enum: Cast and Placeholder accepted it (SizeOf 0), and a
// HostTensor of it divided by that 0 (SIGFPE).
TEST(ApiAudit, DTypeValuesOutsideTheEnumAreErrors) {
  const DType bad = static_cast<DType>(42);
  Graph g;
  Cast(Placeholder(g, DType::kF32, {3}, "x"), bad);
  EXPECT_THAT(Message(g.status()), HasSubstr("node 'Cast' (Cast): unknown dtype 42"));
  Graph g2;
  Placeholder(g2, bad, {2}, "p");
  EXPECT_THAT(Message(g2.status()), HasSubstr("node 'p' (Placeholder): unknown dtype 42"));
  HostTensor t(bad, {2});
  EXPECT_EQ(t.num_elements(), -1);
  EXPECT_EQ(t.num_bytes(), 0u);
  Graph g3;
  Const(g3, t, "c");
  EXPECT_THAT(Message(g3.status()), HasSubstr("'c'"));
}

// SessionOptions out of range were not checked: num_threads < 0 failed every compile
// (one warning per op, then the reference kernels: a silent fallback), a NaN verify
// tolerance passed every kernel, a lazy threshold of 0 or an unknown enum value did
// whatever the comparisons made of it.
TEST(ApiAudit, SessionOptionsOutOfRangeAreEveryRunsErrorNamingTheField) {
  Graph g;
  Tensor x = Placeholder(g, DType::kF32, {7}, "x");
  Tensor y = Tanh(Exp(x) * 2.0) - x;
  const HostTensor v = HostTensor::RandomUniform(DType::kF32, {7}, 1);
  struct Case {
    std::function<void(SessionOptions&)> set;
    const char* want;
  };
  const Case cases[] = {
      {[](SessionOptions& o) { o.num_threads = -3; }, "SessionOptions::num_threads is -3"},
      {[](SessionOptions& o) { o.min_cluster_size = 0; }, "min_cluster_size is 0"},
      {[](SessionOptions& o) { o.max_cluster_size = -1; }, "max_cluster_size is -1"},
      {[](SessionOptions& o) { o.max_matmuls_per_cluster = -1; }, "max_matmuls_per_cluster"},
      {[](SessionOptions& o) { o.verify_rtol = std::nan(""); }, "verify_rtol is nan"},
      {[](SessionOptions& o) { o.verify_atol = -1; }, "verify_atol is -1"},
      {[](SessionOptions& o) { o.verify_atol = -HUGE_VAL; }, "verify_atol is -inf"},
      {[](SessionOptions& o) { o.scheduler = static_cast<Scheduler>(99); }, "scheduler is 99"},
      {[](SessionOptions& o) { o.compile_policy = static_cast<CompilePolicy>(7); },
       "compile_policy is 7"},
      {[](SessionOptions& o) { o.global_jit_level = static_cast<JitLevel>(-1); },
       "global_jit_level is -1"},
      {[](SessionOptions& o) { o.cpu_matmul = static_cast<SessionOptions::CpuMatMul>(5); },
       "cpu_matmul is 5"},
  };
  for (const Case& c : cases) {
    SessionOptions o;
    o.device = "jit:cpu";
    c.set(o);
    Session s(g, o);
    for (int run = 0; run < 2; ++run) {
      auto r = s.Run({{x, v}}, {y});
      EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << c.want;
      EXPECT_THAT(Message(r.status()), HasSubstr(c.want));
    }
  }
  // The limits themselves are accepted, and values that always worked: a guard <= 0 (none),
  // a lazy threshold of 0 (as 1: compiled at the first run), infinite tolerances.
  SessionOptions o;
  o.device = "jit:cpu";
  o.num_threads = 0;
  o.max_matmuls_per_cluster = 0;
  o.max_signatures_per_cluster = -1;
  o.compile_policy = CompilePolicy::kLazy;
  o.lazy_compile_threshold = 0;
  o.verify_rtol = HUGE_VAL;
  o.verify_atol = HUGE_VAL;
  Session s(g, o);
  auto r = s.Run({{x, v}}, {y});
  ASSERT_TRUE(r.ok()) << r.status();
  // Compiled kernels ran at the first run: a silent fallback to the reference fails here.
  EXPECT_GT(s.stats().cluster_launches + s.stats().single_op_launches, 0);
  EXPECT_EQ(s.stats().reference_launches, 0);
  const HostTensor& out = r->at(0);
  for (int64_t i = 0; i < 7; ++i) {
    const float xi = static_cast<float>(v.GetDouble(i));
    EXPECT_NEAR(out.GetDouble(i), std::tanh(std::exp(xi) * 2.0f) - xi, 1e-5) << i;
  }
}

// BatchNorm with a channel axis out of range normalized over every axis (one mean for
// the batch); Dropout of an i32 x scaled it by 1 / (1 - rate) cast to i32 (1 below 0.5).
TEST(ApiAudit, BatchNormAxisOutOfRangeAndDropoutOfIntegersAreErrorsNamingX) {
  {
    Graph g;
    Tensor x = Placeholder(g, DType::kF32, {3, 4}, "x");
    Tensor c = Placeholder(g, DType::kF32, {4}, "c");
    Tensor mean = Variable(g, HostTensor(DType::kF32, {4}), "mean");
    Tensor var = Variable(g, HostTensor(DType::kF32, {4}), "var");
    for (int axis : {2, 5, -3}) {
      BatchNormOutput out = BatchNorm(x, c, c, mean, var, /*training=*/true, 0.9, 1e-3, axis);
      EXPECT_FALSE(out.y.valid());
      EXPECT_TRUE(out.updates.empty());
    }
    EXPECT_THAT(Message(g.status()),
                HasSubstr("BatchNorm of 'x': channel axis 2 is out of range for f32[3,4]"));
  }
  {
    Graph g;
    Tensor x = Placeholder(g, DType::kI32, {5}, "ids");
    EXPECT_FALSE(Dropout(x, 0.3, ScalarConst(g, 0, DType::kI32), 1).valid());
    EXPECT_THAT(Message(g.status()), HasSubstr("Dropout of 'ids': x is i32[5], not floating"));
  }
}

// An input_signature dim of -2 was reported as the call's dim differing from "?".
TEST(ApiAudit, FunctionInputSignatureOfABadDimNamesIt) {
  auto body = [](Graph&, const std::vector<Tensor>& args) -> std::vector<Tensor> {
    return {Exp(args[0])};
  };
  FunctionOptions o;
  o.input_signature = std::vector<TensorSpec>{{DType::kF32, {3, -2}}};
  Function f(body, o);
  auto r = f({HostTensor(DType::kF32, {3, 2})});
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(Message(r.status()),
              HasSubstr("input_signature argument 0 has dim 1 = -2 (a dim is >= 0, or -1"));
  EXPECT_THAT(Message(f.GetConcreteFunction({{DType::kF32, {3, 2}}}).status()),
              HasSubstr("has dim 1 = -2"));
  o.input_signature = std::vector<TensorSpec>{{static_cast<DType>(42), {3}}};
  Function g(body, o);
  EXPECT_THAT(Message(g({HostTensor(DType::kF32, {3})}).status()),
              HasSubstr("input_signature argument 0 has unknown dtype 42"));
  // With a static argument before it, the bad entry is still named by its index in the
  // signature (per-tensor checks named every entry "argument 0").
  o.input_signature = std::vector<TensorSpec>{{DType::kF32, {-1}}, {DType::kF32, {3, -2}}};
  Function h(
      [](Graph&, const std::vector<TracedArg>& a) -> std::vector<Tensor> {
        return {a[0].tensor(), a[2].tensor()};
      },
      o);
  auto static_call = h.Call({HostTensor(DType::kF32, {2}), 7, HostTensor(DType::kF32, {3, 2})});
  EXPECT_EQ(static_call.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(Message(static_call.status()),
              HasSubstr("input_signature argument 1 has dim 1 = -2 (a dim is >= 0, or -1"));
  EXPECT_EQ(f.tracing_count() + g.tracing_count() + h.tracing_count(), 0);
}

// A directory that cannot be made was Internal (which says Braze is wrong): now the
// errno's code, naming the directory.
TEST(ApiAudit, ACheckpointDirectoryThatCannotBeMadeIsNotInternal) {
  Graph g;
  Variable(g, HostTensor::Filled(DType::kF32, {2}, 1.0), "w");
  Session s(g);
  auto empty = CheckpointManager("").Save(s, 1);
  EXPECT_EQ(empty.status().code(), absl::StatusCode::kInvalidArgument) << empty.status();
  auto under_file = CheckpointManager("/dev/null/ckpt").Save(s, 1);
  EXPECT_FALSE(under_file.ok());
  EXPECT_NE(under_file.status().code(), absl::StatusCode::kInternal) << under_file.status();
  EXPECT_THAT(Message(under_file.status()), HasSubstr("cannot create /dev/null/ckpt"));
}

// An i32 ScalarConst outside i32's range saturated silently (1e10 became 2147483647).
TEST(ApiAudit, AnI32ScalarConstThatDoesNotFitIsAnError) {
  for (double bad : {1e10, -2147483649.0, 2147483648.0, std::nan("")}) {
    Graph g;
    Tensor c = ScalarConst(g, bad, DType::kI32, "big");
    EXPECT_FALSE(c.valid()) << bad;
    EXPECT_EQ(g.status().code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_THAT(Message(g.status()), HasSubstr("ScalarConst 'big': ")) << bad;
    EXPECT_THAT(Message(g.status()), HasSubstr("does not fit i32")) << bad;
  }
  // The extremes fit; a fraction truncates toward zero, as a C++ conversion does.
  Graph g;
  Tensor lo = ScalarConst(g, -2147483648.0, DType::kI32);
  Tensor hi = ScalarConst(g, 2147483647.9, DType::kI32);
  Tensor frac = ScalarConst(g, -2.7, DType::kI32);
  ASSERT_TRUE(g.status().ok()) << g.status();
  Session s(g, ReferenceOnly());
  auto out = s.Run({}, {lo, hi, frac});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)[0].data<int32_t>()[0], std::numeric_limits<int32_t>::min());
  EXPECT_EQ((*out)[1].data<int32_t>()[0], std::numeric_limits<int32_t>::max());
  EXPECT_EQ((*out)[2].data<int32_t>()[0], -2);
}

// Repeated reduction axes were taken as a set: Sum(x, {1, 1}) of a matrix gave its row
// sums, where TensorFlow, NumPy and JAX refuse them.
TEST(ApiAudit, RepeatedReductionAxesAreAnErrorNamingThem) {
  auto status_of = [](const std::function<Tensor(Tensor)>& reduce) {
    Graph g;
    reduce(Placeholder(g, DType::kF32, {2, 3}, "x"));
    return g.status();
  };
  const std::vector<std::function<Tensor(Tensor)>> repeated = {
      [](Tensor x) {
        return Sum(x, {1, 1});
      },
      [](Tensor x) {
        return Mean(x, {-1, 1});
      },
      [](Tensor x) {
        return Max(x, {0, 1, -2}, /*keep_dims=*/true);
      },
  };
  for (const auto& reduce : repeated) {
    absl::Status s = status_of(reduce);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
    EXPECT_THAT(Message(s), HasSubstr("reduction axes must be unique"));
  }
  Graph g;
  Tensor all = Sum(Placeholder(g, DType::kF32, {2, 3}, "x"), {0, -1});
  ASSERT_TRUE(g.status().ok()) << g.status();
  EXPECT_EQ(all.shape(), Shape{});
}

// keep_last < 0 kept every checkpoint, as 0 does, without a word.
TEST(ApiAudit, ANegativeKeepLastIsAnErrorAndWritesNothing) {
  Graph g;
  Variable(g, HostTensor::Filled(DType::kF32, {2}, 1.0), "w");
  Session s(g);
  const std::string dir = ::testing::TempDir() + "/api_audit_keep_last";
  std::filesystem::remove_all(dir);
  CheckpointOptions options;
  options.keep_last = -1;
  auto saved = CheckpointManager(dir, options).Save(s, 1);
  EXPECT_EQ(saved.status().code(), absl::StatusCode::kInvalidArgument) << saved.status();
  EXPECT_THAT(Message(saved.status()), HasSubstr("CheckpointOptions.keep_last is -1"));
  EXPECT_TRUE(!std::filesystem::exists(dir) || std::filesystem::is_empty(dir));
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace braze
