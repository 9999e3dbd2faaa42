// The public API probed a fourth time as a user writing behaviour tests would (apiaudit4,
// 2026-12-01: the third audit's leftovers, sessions, functions, gradients, files): each
// test failed (a silently wrong result, an input refused that numpy and JAX take, or a
// result that crashed its reader) before the fix it names.
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <new>
#include <stdexcept>
#include <string>
#include <vector>

#include "braze/braze.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace braze {
namespace {

using ::testing::HasSubstr;

std::string Message(const absl::Status& s) { return std::string(s.message()); }

SessionOptions ReferenceOnly() {
  SessionOptions o;
  o.reference_only = true;
  return o;
}

// A SessionOptions::schedule_dirs entry that is not a directory (a typo) was skipped:
// the session never used the tuned schedules it was given, and said nothing. It is now
// every Run's InvalidArgument naming the entry, as a bad device name is.
TEST(ApiAudit4, AScheduleDirThatIsNotADirectoryIsEveryRunsError) {
  Graph g;
  Tensor x = Placeholder(g, DType::kF32, {3}, "x");
  Tensor y = x * 2.0;
  const HostTensor v = HostTensor::Filled(DType::kF32, {3}, 1.0);
  const std::string dir = ::testing::TempDir();
  for (const std::string& bad :
       {std::string("/nonexistent-braze-dir/schedules"), std::string("/dev/null"), std::string()}) {
    SessionOptions o = ReferenceOnly();
    o.schedule_dirs = {dir, bad};
    Session s(g, o);
    for (int run = 0; run < 2; ++run) {
      auto r = s.Run({{x, v}}, {y});
      EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << bad;
      EXPECT_THAT(Message(r.status()), HasSubstr("SessionOptions::schedule_dirs[1] is ")) << bad;
      EXPECT_THAT(Message(r.status()),
                  HasSubstr(bad.empty() ? "an empty directory name" : "'" + bad + "'"));
    }
  }
  // A Function's session options are checked alike.
  FunctionOptions fo;
  fo.session.schedule_dirs = {"/nonexistent-braze-dir"};
  Function f([](Graph&, const std::vector<Tensor>& a) -> std::vector<Tensor> { return {a[0]}; },
             fo);
  EXPECT_THAT(Message(f({v}).status()), HasSubstr("schedule_dirs[0] is '/nonexistent-braze-dir'"));
  // A directory that exists is fine, empty or not.
  SessionOptions o = ReferenceOnly();
  o.schedule_dirs = {dir};
  auto r = Session(g, o).Run({{x, v}}, {y});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->at(0).GetDouble(2), 2);
}

// ParseDevice read the index with absl::SimpleAtoi, which skips whitespace and reads a
// sign: "cuda: 1", "cuda:+1" and "cuda:1 " were cuda:1. TensorFlow's device names (and
// torch.device) take digits only.
TEST(ApiAudit4, ADeviceIndexIsDigitsOnly) {
  for (const char* bad : {"cuda: 1", "cuda:+1", "cuda:1 ", "cuda:\t1", "opencl:+0", "jit:cuda: 0",
                          "cuda:-0", "cuda:0x1", "cuda:99999999999"}) {
    auto d = ParseDevice(bad);
    EXPECT_EQ(d.status().code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_THAT(Message(d.status()), HasSubstr(std::string("bad device \"") + bad + "\"")) << bad;
  }
  EXPECT_EQ(ParseDevice("cuda:12")->ToString(), "cuda:12");
  EXPECT_EQ(ParseDevice("jit:opencl:007")->ToString(), "jit:opencl:7");
  // Where a device enters: a DeviceScope records the error on the graph.
  Graph g;
  { DeviceScope scope(g, "cuda:+1"); }
  EXPECT_THAT(Message(g.status()), HasSubstr("bad device \"cuda:+1\""));
}

// An i32 Pad or OneHot value that is NaN or out of i32's range was converted by C++'s
// undefined cast (the compiled value differed from the reference's): a build error
// naming the node. A fraction converts as Cast does (toward zero, JAX's and torch's
// rule for a pad value), a bool value is value != 0.
TEST(ApiAudit4, AnI32ValueAttributeOutOfRangeIsAnErrorAndAFractionTruncates) {
  for (double value : {3e9, -2147483649.0, std::nan("")}) {
    Graph g;
    Pad(Placeholder(g, DType::kI32, {2}, "x"), {{1, 1}}, value);
    EXPECT_EQ(g.status().code(), absl::StatusCode::kInvalidArgument) << value;
    EXPECT_THAT(Message(g.status()), HasSubstr("node 'Pad' (Pad): pad value ")) << value;
    EXPECT_THAT(Message(g.status()), HasSubstr("has no i32 value")) << value;
  }
  {
    Graph g;
    OneHot(Placeholder(g, DType::kI32, {2}, "ids"), 3, 5e9, 0, DType::kI32);
    EXPECT_THAT(Message(g.status()),
                HasSubstr("node 'OneHot' (OneHot): OneHot on_value 5e+09 has no i32 value"));
  }
  Graph g;
  Tensor i = Placeholder(g, DType::kI32, {2}, "i");
  Tensor b = Placeholder(g, DType::kBool, {1}, "b");
  Tensor f = Placeholder(g, DType::kF32, {1}, "f");
  Tensor pi = Pad(i, {{1, 0}}, -2147483648.0);
  Tensor pt = Pad(i, {{1, 1}}, -2.7);
  Tensor pb = Pad(b, {{0, 1}}, 0.5);
  Tensor pf = Pad(f, {{1, 0}}, 2.7);
  Tensor oh = OneHot(i, 2, -3.9, 7.5, DType::kI32);
  ASSERT_TRUE(g.status().ok()) << g.status();
  const Feeds feeds = {{i, HostTensor::From<int32_t>({1, 0}, {2})},
                       {b, HostTensor(DType::kBool, {1})},
                       {f, HostTensor::Filled(DType::kF32, {1}, 1.0)}};
  for (bool reference : {true, false}) {
    SessionOptions options;
    options.reference_only = reference;
    auto r = Session(g, options).Run(feeds, {pi, pt, pb, pf, oh});
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(r->at(0).ToVector<int64_t>(), (std::vector<int64_t>{-2147483648LL, 1, 0}));
    EXPECT_EQ(r->at(1).ToVector<int>(), (std::vector<int>{-2, 1, 0, -2})) << reference;
    EXPECT_EQ(r->at(2).ToVector<int>(), (std::vector<int>{0, 1})) << reference;
    EXPECT_FLOAT_EQ(r->at(3).GetDouble(0), 2.7f);
    EXPECT_EQ(r->at(4).ToVector<int>(), (std::vector<int>{7, -3, -3, 7})) << reference;
  }
}

// An int cast to DataFormat or Activation (as a window op's Padding in the third audit):
// GlobalAvgPool read any format but NHWC as NCHW, and averaged an x of rank 3 over two of
// its axes as if it had rank 4; Dense gave x @ w + b without its activation. Each is now
// an error on the graph naming x, and the result invalid.
TEST(ApiAudit4, GlobalAvgPoolAndDenseCheckTheirEnumsNamingX) {
  {
    Graph g;
    Tensor x = Placeholder(g, DType::kF32, {2, 3, 3, 4}, "x");
    EXPECT_FALSE(GlobalAvgPool(x, static_cast<DataFormat>(5)).valid());
    EXPECT_EQ(g.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(Message(g.status()), HasSubstr("GlobalAvgPool of 'x': unknown data format 5 (not "
                                               "a braze::DataFormat: NHWC or NCHW)"));
  }
  {
    Graph g;
    Tensor x = Placeholder(g, DType::kF32, {2, 3, 4}, "x");
    EXPECT_FALSE(GlobalAvgPool(x).valid());
    EXPECT_THAT(Message(g.status()),
                HasSubstr("GlobalAvgPool of 'x': x is f32[2,3,4], not of rank 4 ([N, H, W, C])"));
  }
  {
    Graph g;
    Tensor x = Placeholder(g, DType::kF32, {3, 4}, "x");
    Tensor w = Placeholder(g, DType::kF32, {4, 2}, "w");
    Tensor b = Placeholder(g, DType::kF32, {2}, "b");
    EXPECT_FALSE(Dense(x, w, b, static_cast<Activation>(9)).valid());
    EXPECT_EQ(g.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(Message(g.status()), HasSubstr("Dense of 'x': unknown activation 9 (not a "
                                               "braze::Activation"));
    EXPECT_EQ(g.num_nodes(), 3);  // nothing was built
  }
  // The enums' own values still work: both formats, every activation.
  Graph g;
  Tensor x = Placeholder(g, DType::kF32, {1, 2, 2, 1}, "x");
  Tensor nhwc = GlobalAvgPool(x);
  Tensor nchw = GlobalAvgPool(x, DataFormat::kNCHW);
  Tensor d = Dense(Reshape(x, {1, 4}), ScalarConst(g, 1.0) * Placeholder(g, DType::kF32, {4, 1}),
                   ScalarConst(g, -1.0), Activation::kRelu);
  ASSERT_TRUE(g.status().ok()) << g.status();
  EXPECT_EQ(nhwc.shape(), (Shape{1, 1}));
  EXPECT_EQ(nchw.shape(), (Shape{1, 2}));
  EXPECT_EQ(d.shape(), (Shape{1, 1}));
}

// Transpose refused a negative perm entry, which numpy, JAX (jnp.transpose) and torch
// (permute) count from the end, as Braze's reductions, Gather and Concat count axes.
TEST(ApiAudit4, TransposeTakesNegativePermEntries) {
  Graph g;
  Tensor x = Placeholder(g, DType::kF32, {2, 3, 4}, "x");
  Tensor t = Transpose(x, {-1, 0, -2});
  ASSERT_TRUE(g.status().ok()) << g.status();
  EXPECT_EQ(t.shape(), (Shape{4, 2, 3}));
  auto dx = Gradients({Sum(t * Placeholder(g, DType::kF32, {4, 2, 3}, "w"))}, {x});
  ASSERT_TRUE(dx.ok()) << dx.status();
  const HostTensor xv = HostTensor::RandomUniform(DType::kF32, {2, 3, 4}, 1);
  const HostTensor wv = HostTensor::RandomUniform(DType::kF32, {4, 2, 3}, 2);
  for (const SessionOptions& o : {ReferenceOnly(), SessionOptions{}}) {
    auto r = Session(g, o).Run({{x, xv}, {*g.FindTensor("w"), wv}}, {t, (*dx)[0]});
    ASSERT_TRUE(r.ok()) << r.status();
    // t[k, i, j] = x[i, j, k], and dx[i, j, k] = w[k, i, j].
    for (int i = 0; i < 2; ++i) {
      for (int j = 0; j < 3; ++j) {
        for (int k = 0; k < 4; ++k) {
          EXPECT_EQ(r->at(0).GetDouble(k * 6 + i * 3 + j), xv.GetDouble(i * 12 + j * 4 + k));
          EXPECT_EQ(r->at(1).GetDouble(i * 12 + j * 4 + k), wv.GetDouble(k * 6 + i * 3 + j));
        }
      }
    }
  }
  // A perm that is no permutation is named as written, not as normalized.
  Graph bad;
  Transpose(Placeholder(bad, DType::kF32, {2, 3}, "x"), {-1, 1});
  EXPECT_THAT(Message(bad.status()), HasSubstr("invalid perm [-1,1] for rank 2"));
  Graph far;
  Transpose(Placeholder(far, DType::kF32, {2, 3}, "x"), {-3, 0});
  EXPECT_THAT(Message(far.status()), HasSubstr("invalid perm [-3,0] for rank 2"));
}

// While with no loop variable that is a tensor (none at all, or only invalid ones) has no
// graph to record its error on, and returned an empty vector: no error, and a caller's
// result[0] read past its end. It now returns an invalid Tensor per loop variable (one
// for none), which every use reports.
TEST(ApiAudit4, AWhileWithNoLoopVariablesReturnsHandlesEveryUseRefuses) {
  const WhileCondFn cond = [](Graph& b, const std::vector<Tensor>&) {
    return ScalarConst(b, 0, DType::kBool);
  };
  const WhileBodyFn body = [](Graph&, const std::vector<Tensor>& v) { return v; };
  std::vector<Tensor> none = While(cond, body, {});
  ASSERT_EQ(none.size(), 1u);
  EXPECT_FALSE(none[0].valid());
  std::vector<Tensor> invalid = While(cond, body, {Tensor(), Tensor()});
  ASSERT_EQ(invalid.size(), 2u);
  EXPECT_FALSE(invalid[1].valid());
  Graph g;
  Tensor x = Placeholder(g, DType::kF32, {}, "x");
  x + none[0];
  EXPECT_THAT(Message(g.status()), HasSubstr("node 'Add' (Add): input 1 is not a tensor"));
  Graph h;
  auto fetched = Session(h, ReferenceOnly()).Run({}, {none[0]});
  EXPECT_EQ(fetched.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(Message(fetched.status()), HasSubstr("fetch 0 is not a tensor"));
}

// Cond and Scan with no tensor among their inputs (an invalid pred, no operands or init)
// returned empty results, so result[0] read past them: now invalid Tensors, at least
// one, as While's, that every use reports. Found by the fourth audit, fixed after it.
TEST(ApiAudit4, ACondOrScanWithNoTensorReturnsHandlesEveryUseRefuses) {
  const BranchFn same = [](Graph&, const std::vector<Tensor>& v) { return v; };
  std::vector<Tensor> cond = Cond(Tensor(), same, same, {});
  ASSERT_EQ(cond.size(), 1u);
  EXPECT_FALSE(cond[0].valid());
  ASSERT_EQ(Cond(Tensor(), same, same, {Tensor(), Tensor()}).size(), 2u);
  const ScanFn step = [](Graph&, const std::vector<Tensor>& carry, const std::vector<Tensor>&) {
    return ScanStep{carry, {}};
  };
  ScanResult scan = Scan(step, {Tensor(), Tensor()}, {});
  ASSERT_EQ(scan.carry.size(), 2u);
  EXPECT_FALSE(scan.carry[1].valid());
  ASSERT_EQ(scan.stacked.size(), 1u);
  EXPECT_FALSE(scan.stacked[0].valid());
  Graph g;
  Tensor x = Placeholder(g, DType::kF32, {}, "x");
  x + cond[0];
  EXPECT_THAT(Message(g.status()), HasSubstr("input 1 is not a tensor"));
}

// A VariableSet built by hand was used unchecked: without its read or assign function,
// Save and RestoreLatest threw std::bad_function_call (the program died); two variables
// of one name (a 'w' in each of two graphs) were saved as the first's value alone, and
// restore wrote that value into both, silently. Each is now InvalidArgument, and nothing
// is written or assigned.
TEST(ApiAudit4, AVariableSetIsCheckedBeforeSaveOrRestoreUseIt) {
  Graph ga, gb;
  Tensor wa = Variable(ga, HostTensor::Filled(DType::kF32, {2}, 1.0), "w");
  Tensor wb = Variable(gb, HostTensor::Filled(DType::kF32, {2}, 2.0), "w");
  Session sa(ga), sb(gb);
  auto session_of = [&](const Tensor& v) -> Session& { return v.graph() == &ga ? sa : sb; };
  VariableSet both;
  both.variables = {wa, wb};
  both.read = [&](const Tensor& v) { return session_of(v).VariableValue(v); };
  both.assign = [&](const Tensor& v, const HostTensor& value) {
    return session_of(v).AssignVariable(v, value);
  };
  const std::string dir = ::testing::TempDir() + "/api_audit4_variable_set";
  std::filesystem::remove_all(dir);
  CheckpointManager manager(dir);
  auto saved = manager.Save(both, 1);
  EXPECT_EQ(saved.status().code(), absl::StatusCode::kInvalidArgument) << saved.status();
  EXPECT_THAT(Message(saved.status()),
              HasSubstr("the VariableSet's variables 0 and 1 are both named 'w'"));
  EXPECT_TRUE(!std::filesystem::exists(dir) || std::filesystem::is_empty(dir));
  // A checkpoint of wa alone, restored through the set of both, assigns neither.
  VariableSet only_a = both;
  only_a.variables = {wa};
  ASSERT_TRUE(manager.Save(only_a, 2).ok());
  ASSERT_TRUE(sa.AssignVariable(wa, HostTensor::Filled(DType::kF32, {2}, 5.0)).ok());
  auto restored = manager.RestoreLatest(both);
  EXPECT_EQ(restored.status().code(), absl::StatusCode::kInvalidArgument) << restored.status();
  EXPECT_THAT(Message(restored.status()), HasSubstr("both named 'w'"));
  EXPECT_EQ(sa.VariableValue(wa)->GetDouble(0), 5);
  EXPECT_EQ(sb.VariableValue(wb)->GetDouble(0), 2);
  EXPECT_THAT(Message(LoadVariables(both, {{"w", HostTensor(DType::kF32, {2})}}).status()),
              HasSubstr("both named 'w'"));
  // No functions, or an invalid tensor in the list: errors, not exceptions.
  VariableSet no_read;
  no_read.variables = {wa};
  EXPECT_THAT(Message(manager.Save(no_read, 3).status()),
              HasSubstr("the VariableSet has no read function"));
  VariableSet no_assign = only_a;
  no_assign.assign = nullptr;
  auto no_assign_restored = manager.RestoreLatest(no_assign);
  EXPECT_EQ(no_assign_restored.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(Message(no_assign_restored.status()),
              HasSubstr("the VariableSet has no assign function"));
  EXPECT_THAT(Message(ReadVariables(no_read).status()), HasSubstr("has no read function"));
  VariableSet with_invalid = only_a;
  with_invalid.variables.push_back(Tensor());
  EXPECT_THAT(Message(ReadVariables(with_invalid).status()),
              HasSubstr("the VariableSet's variable 1 is not a tensor"));
  // The set of wa alone restores as before.
  auto good = manager.RestoreLatest(only_a);
  ASSERT_TRUE(good.ok()) << good.status();
  EXPECT_EQ(good->step, 2);
  EXPECT_EQ(sa.VariableValue(wa)->GetDouble(0), 1);
  std::filesystem::remove_all(dir);
}

// A Function body that throws failed the call with Internal, the code that says Braze
// is wrong; a control-flow body or a JitScope predicate that throws is InvalidArgument,
// the user's error. So is a Function body's now (an allocation that fails is
// ResourceExhausted, as in Session::Run).
TEST(ApiAudit4, AFunctionBodyThatThrowsIsTheCallersError) {
  Function throws([](Graph&, const std::vector<Tensor>&) -> std::vector<Tensor> {
    throw std::runtime_error("boom");
  });
  auto r = throws({HostTensor(DType::kF32, {2})});
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << r.status();
  EXPECT_THAT(Message(r.status()), HasSubstr("function 'function': the body threw: boom"));
  Function throws_int([](Graph&, const std::vector<Tensor>&) -> std::vector<Tensor> { throw 7; });
  EXPECT_EQ(throws_int({HostTensor(DType::kF32, {2})}).status().code(),
            absl::StatusCode::kInvalidArgument);
  Function no_memory(
      [](Graph&, const std::vector<Tensor>&) -> std::vector<Tensor> { throw std::bad_alloc(); });
  EXPECT_EQ(no_memory({HostTensor(DType::kF32, {2})}).status().code(),
            absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(throws.tracing_count() + throws_int.tracing_count() + no_memory.tracing_count(), 0);
}

// The data loaders' file errors had codes that said something else: ReadIdxFile of a
// directory was DataLoss ("read error"), which says the file is damaged, and
// LoadFortunes of a file, or of an unreadable directory, was NotFound. Each now has its
// errno's code, as ReadSafetensors' errors have since the second audit.
TEST(ApiAudit4, DataFileErrorsHaveTheirErrnosCode) {
  const std::string dir = ::testing::TempDir() + "/api_audit4_data";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir + "/t10k-images-idx3-ubyte.gz");
  auto idx = ReadIdxFile(dir);
  EXPECT_EQ(idx.status().code(), absl::StatusCode::kFailedPrecondition) << idx.status();
  EXPECT_THAT(Message(idx.status()), HasSubstr("cannot read " + dir + ": Is a directory"));
  auto mnist = LoadFashionMnist("t10k", dir);
  EXPECT_EQ(mnist.status().code(), absl::StatusCode::kFailedPrecondition) << mnist.status();
  EXPECT_THAT(Message(mnist.status()), HasSubstr("t10k-images-idx3-ubyte.gz: Is a directory"));
  const std::string file = dir + "/a-file";
  std::ofstream(file) << "not a directory";
  auto fortunes = LoadFortunes(file);
  EXPECT_EQ(fortunes.status().code(), absl::StatusCode::kFailedPrecondition) << fortunes.status();
  EXPECT_THAT(Message(fortunes.status()), HasSubstr("cannot read directory '" + file + "'"));
  // A missing one is still NotFound.
  EXPECT_EQ(LoadFortunes(dir + "/missing").status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(ReadIdxFile(dir + "/missing").status().code(), absl::StatusCode::kNotFound);
  std::filesystem::remove_all(dir);
}

// A Variable fed in the Run that updates it (found by this audit, fixed after it): the
// fed value stood for the variable in the update's base too, and the update committed
// (w fed 5, AssignAdd(w, 1): w became 6; TF2 would give 2, TF1 refuses). Now the Run is
// InvalidArgument naming both nodes and w keeps its value; feeding w without an update,
// or updating it without a feed, still works.
TEST(ApiAudit4, AVariableFedInTheRunThatUpdatesItIsAnError) {
  for (const bool reference : {true, false}) {
    Graph g;
    Tensor w = Variable(g, HostTensor::Filled(DType::kF32, {2}, 1.0), "w");
    Tensor one = Const(g, HostTensor::Filled(DType::kF32, {2}, 1.0));
    Tensor update = AssignAdd(w, one);
    Tensor doubled = w * 2.0;
    Session s(g, reference ? ReferenceOnly() : SessionOptions{});
    const HostTensor five = HostTensor::Filled(DType::kF32, {2}, 5.0);
    auto r = s.Run({{w, five}}, {doubled}, {update});
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(Message(r.status()), HasSubstr("'w'"));
    EXPECT_THAT(Message(r.status()), HasSubstr("AssignAdd"));
    auto value = s.VariableValue(w);
    ASSERT_TRUE(value.ok()) << value.status();
    EXPECT_EQ(value->data<float>()[0], 1.0f);
    auto fed_only = s.Run({{w, five}}, {doubled});
    ASSERT_TRUE(fed_only.ok()) << fed_only.status();
    EXPECT_EQ(fed_only->at(0).data<float>()[1], 10.0f);
    ASSERT_TRUE(s.Run({}, {}, {update}).ok());
    value = s.VariableValue(w);
    ASSERT_TRUE(value.ok()) << value.status();
    EXPECT_EQ(value->data<float>()[1], 2.0f);
  }
}

}  // namespace
}  // namespace braze
