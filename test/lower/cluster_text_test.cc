// The text form of a ClusterSpec (lower/cluster_text.h): every attribute kind round-trips
// to the same cluster key and the same text, a rebuilt cluster compiles to a kernel that
// computes what the original's does, and every malformed text is an InvalidArgument
// naming the source and line (never a crash: every prefix and many mutations of a text
// are parsed).
#include "lower/cluster_text.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "braze/ops.h"
#include "compile/cluster_key.h"
#include "lower/lower_test_util.h"

namespace braze {
namespace {

using lowertest::Case;
using lowertest::SpecOf;
using ::testing::HasSubstr;
using ::testing::StartsWith;

float FloatFromBits(uint32_t bits) {
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

// A cluster with a node of every attribute kind, constants of odd values, several
// results (one of them an argument passed through), and names that need escaping.
Case EveryAttrKind() {
  Case c;
  Graph& g = *c.graph;
  Tensor x = c.Input(DType::kF32, {6, 8}, 1);
  Tensor idx = c.Input(DType::kI32, {6}, 2, 0, 5);
  Tensor w = c.Input(DType::kF32, {8, 5}, 3);
  Tensor b3 = c.Input(DType::kF32, {2, 3, 4}, 4);
  const std::vector<float> odd = {0.1f,
                                  -0.0f,
                                  FloatFromBits(0x7fc01234u),  // a NaN with a payload
                                  std::numeric_limits<float>::infinity(),
                                  std::numeric_limits<float>::denorm_min(),
                                  std::numeric_limits<float>::max(),
                                  1.0f / 3.0f,
                                  -2.5e-38f};
  Tensor cf = Const(g, HostTensor::From<float>(odd, {8}), "odd \"consts\"\n#1");
  Tensor ci = Const(g, HostTensor::From<int32_t>({INT_MIN, -1, 7, INT_MAX}, {2, 2}), "ints");
  Tensor cb = Const(g, HostTensor::From<bool>({true, false, true}, {3}), "bools");
  Tensor cd = Const(g, HostTensor::Scalar<double>(std::nextafter(0.1, 1.0)), "f64 scalar");
  Tensor ce = Const(g, HostTensor(DType::kF32, {0, 3}), "empty");
  Tensor xs = Add(x, cf);
  Tensor cast = Cast(xs, DType::kI32);
  Tensor sum = Sum(x, {0}, true);
  Tensor mean = Mean(x, {1});
  Tensor mx = Max(b3, {0, 2}, true);
  Tensor mn = Min(b3, {}, false);
  Tensor am = ArgMax(x, 1);
  Tensor mm = MatMul(x, w);
  Tensor mm_tb = MatMul(x, x, false, true);
  Tensor mm_ta = MatMul(x, x, true, false);
  Tensor bmm = BatchMatMul(b3, b3, false, true);
  Tensor reshaped = Reshape(x, {-1, 4});
  Tensor transposed = Transpose(b3, {2, 0, 1});
  Tensor broadcast = BroadcastTo(sum, {6, 8});
  Tensor concat = Concat({x, broadcast, x}, 0);
  Tensor sliced = Slice(x, {1, 2}, {-1, 3});
  Tensor padded = Pad(x, {{1, 2}, {0, 3}}, 0.1);
  Tensor onehot = OneHot(idx, 5, std::nextafter(1.0, 2.0), -0.3, DType::kF64);
  Tensor sel = Select(Greater(x, broadcast), x, Neg(x));
  Tensor ints = Mul(ci, ci);
  Tensor bools = Equal(cb, cb);
  Tensor dbl = Add(cd, cd);
  Tensor empty = Relu(ce);
  c.outputs = {cast,   mean,   mx,     mn,     am,  mm,   mm_tb, mm_ta, bmm,   reshaped, transposed,
               concat, sliced, padded, onehot, sel, ints, bools, dbl,   empty, w};
  return c;
}

std::string Text(const ClusterSpec& spec) {
  absl::StatusOr<std::string> text = ClusterToText(spec);
  EXPECT_TRUE(text.ok()) << text.status();
  return text.ok() ? *text : std::string();
}

RebuiltCluster Rebuild(const std::string& text) {
  absl::StatusOr<RebuiltCluster> rebuilt = ClusterFromText(text, "test.cluster");
  EXPECT_TRUE(rebuilt.ok()) << rebuilt.status() << "\n" << text;
  if (!rebuilt.ok()) return RebuiltCluster{};
  return *std::move(rebuilt);
}

TEST(ClusterText, EveryAttrKindRoundTripsToTheSameKey) {
  Case c = EveryAttrKind();
  ASSERT_TRUE(c.graph->status().ok()) << c.graph->status();
  const ClusterSpec spec = SpecOf(c, "cluster_7");
  const std::string text = Text(spec);
  if (std::getenv("BRAZE_TEST_VERBOSE") != nullptr) std::cerr << text;
  RebuiltCluster rebuilt = Rebuild(text);
  ASSERT_NE(rebuilt.graph, nullptr);
  EXPECT_EQ(rebuilt.spec.graph, rebuilt.graph.get());
  EXPECT_EQ(rebuilt.spec.name, "cluster_7");
  EXPECT_EQ(rebuilt.spec.input_types, spec.input_types);
  EXPECT_TRUE(rebuilt.spec.input_symbols.empty());
  EXPECT_TRUE(rebuilt.spec.node_types.empty());
  ASSERT_EQ(rebuilt.spec.nodes.size(), spec.nodes.size());
  ASSERT_EQ(rebuilt.spec.outputs.size(), spec.outputs.size());
  EXPECT_EQ(ClusterKey(rebuilt.spec, CompileOptions{}), ClusterKey(spec, CompileOptions{}));
  // Lossless: the rebuilt cluster writes the same text (names included).
  EXPECT_EQ(Text(rebuilt.spec), text);
  for (size_t k = 0; k < spec.nodes.size(); ++k) {
    const Node& a = spec.graph->node(spec.nodes[k]);
    const Node& b = rebuilt.graph->node(rebuilt.spec.nodes[k]);
    EXPECT_EQ(a.name(), b.name());
    EXPECT_EQ(a.outputs(), b.outputs()) << a.name();  // concrete inputs: same types
  }
  // The argument passed through is the rebuilt argument itself.
  EXPECT_EQ(rebuilt.spec.outputs.back(), rebuilt.spec.inputs[2]);
  // Readable: the attributes are spelled out.
  EXPECT_THAT(text, StartsWith("braze-cluster 1\n"));
  EXPECT_THAT(text, HasSubstr("input 0 f32 [6,8]\n"));
  EXPECT_THAT(text, HasSubstr(" MatMul transpose_a=0 transpose_b=1 in=a0,a0 "));
  EXPECT_THAT(text, HasSubstr(" Sum axes=[0] keep_dims=1 in=a0 "));
  EXPECT_THAT(text, HasSubstr(" Pad paddings=[1:2,0:3] value=0x1.999999999999ap-4 in=a0 "));
  EXPECT_THAT(text, HasSubstr("value=i32[2,2]:00000080ffffffff07000000ffffff7f"));
  EXPECT_THAT(text, HasSubstr("name=\"odd \\\"consts\\\"\\n#1\""));
  EXPECT_THAT(text, HasSubstr("output 20 a2\nend\n"));
}

TEST(ClusterText, SymbolicInputsRoundTrip) {
  Case c = EveryAttrKind();
  ClusterSpec spec = SpecOf(c);
  // Dim 0 of x and of idx are one class; b3's middle dim another; w concrete.
  spec.input_symbols = {{0, -1}, {0}, {}, {-1, 1, -1}};
  const std::string text = Text(spec);
  EXPECT_THAT(text, HasSubstr("input 0 f32 [6,8] symbols [0,-1]\n"));
  EXPECT_THAT(text, HasSubstr("input 2 f32 [8,5] symbols []\n"));
  RebuiltCluster rebuilt = Rebuild(text);
  ASSERT_NE(rebuilt.graph, nullptr);
  EXPECT_EQ(rebuilt.spec.input_symbols, spec.input_symbols);
  EXPECT_EQ(ClusterKey(rebuilt.spec, CompileOptions{}), ClusterKey(spec, CompileOptions{}));
  EXPECT_NE(ClusterKey(rebuilt.spec, CompileOptions{}), ClusterKey(SpecOf(c), CompileOptions{}));
  // The placeholders are declared as the program's were: symbolic dims unknown.
  EXPECT_EQ(rebuilt.spec.inputs[0].shape(), (Shape{-1, 8}));
  EXPECT_EQ(rebuilt.spec.inputs[3].shape(), (Shape{2, -1, 4}));
  EXPECT_EQ(rebuilt.spec.inputs[2].shape(), (Shape{8, 5}));
  EXPECT_EQ(rebuilt.spec.input_types, spec.input_types);
}

// Compiles the original and the rebuilt cluster and runs both on the same inputs.
void ExpectSameResults(const ClusterSpec& spec, const std::vector<HostTensor>& values,
                       const CompileOptions& options) {
  RebuiltCluster rebuilt = Rebuild(Text(spec));
  ASSERT_NE(rebuilt.graph, nullptr);
  ASSERT_EQ(ClusterKey(rebuilt.spec, options), ClusterKey(spec, options));
  auto original = CompileCluster(spec, options);
  ASSERT_TRUE(original.ok()) << original.status();
  auto again = CompileCluster(rebuilt.spec, options);
  ASSERT_TRUE(again.ok()) << again.status();
  // Outputs of the reference's (concrete) types: a symbolic kernel's own have -1s.
  auto reference = lowertest::ReferenceOutputs(spec, values);
  ASSERT_TRUE(reference.ok()) << reference.status();
  auto run = [&](CompiledKernel& kernel) {
    std::vector<HostTensor> outputs;
    for (const HostTensor& r : *reference) outputs.emplace_back(r.dtype(), r.shape());
    std::vector<const HostTensor*> in;
    for (const HostTensor& t : values) in.push_back(&t);
    std::vector<HostTensor*> out;
    for (HostTensor& t : outputs) out.push_back(&t);
    absl::Status s = kernel.Run(in, out);
    EXPECT_TRUE(s.ok()) << s;
    return outputs;
  };
  const std::vector<HostTensor> want = run(**original);
  const std::vector<HostTensor> got = run(**again);
  for (size_t i = 0; i < want.size(); ++i) {
    std::string why;
    EXPECT_TRUE(AllClose(got[i], want[i], 1e-6, 1e-6, &why)) << "output " << i << ": " << why;
  }
  for (size_t i = 0; i < want.size(); ++i) {
    std::string why;
    EXPECT_TRUE(AllClose(got[i], (*reference)[i], 1e-4, 1e-5, &why))
        << "output " << i << ": " << why;
  }
}

TEST(ClusterText, RebuiltClusterComputesTheSame) {
  Case c;
  Graph& g = *c.graph;
  Tensor x = c.Input(DType::kF32, {9, 12}, 11);
  Tensor w = c.Input(DType::kF32, {7, 12}, 12);
  Tensor labels = c.Input(DType::kI32, {9}, 13, 0, 7);
  Tensor bias = Const(g, HostTensor::From<float>({0.1f, -0.2f, 0.3f, 1e-3f, 5, -7, 0.25f}, {7}));
  Tensor logits = MatMul(x, w, false, true) + bias;  // [9,7]
  Tensor probs = Softmax(logits);
  Tensor loss = Mean(Sum(Neg(OneHot(labels, 7, 0.9, 0.1 / 6) * Log(probs)), {1}));
  Tensor padded = Pad(Slice(probs, {1, 0}, {-1, 5}), {{0, 1}, {2, 0}}, 0.1);
  c.outputs = {probs, loss, padded};
  ASSERT_TRUE(g.status().ok()) << g.status();
  ExpectSameResults(SpecOf(c), c.values, CompileOptions{});
}

TEST(ClusterText, RebuiltSymbolicClusterComputesTheSame) {
  // As the program declares them: the batch dim unknown.
  Case c;
  auto input = [&](uint64_t seed) {
    c.inputs.push_back(Placeholder(*c.graph, DType::kF32, {-1, 16}));
    c.values.push_back(HostTensor::RandomUniform(DType::kF32, {40, 16}, seed));
    return c.inputs.back();
  };
  Tensor x = input(21);
  Tensor y = input(22);
  Tensor z = Sum(Tanh(x) * y + 0.5, {1}, true) / Max(Abs(y) + 1.0, {1}, true);
  c.outputs = {z, Transpose(y * 2.0, {1, 0})};
  ClusterSpec spec = SpecOf(c);
  spec.input_symbols = {{0, -1}, {0, -1}};
  CompileOptions options;
  options.scheduler = Scheduler::kSafeDefault;
  ExpectSameResults(spec, c.values, options);
}

TEST(ClusterText, WriterRefusesWhatItCannotSpell) {
  Graph g;
  Tensor x = Placeholder(g, DType::kF32, {4}, "x");
  std::vector<Tensor> h =
      HostCall(g, "fn", {x}, {TensorSpec{DType::kF32, {4}}},
               [](absl::Span<const HostTensor> in) -> absl::StatusOr<std::vector<HostTensor>> {
                 return std::vector<HostTensor>{in[0]};
               });
  Tensor y = Neg(h[0]);
  ClusterSpec with_host_call{&g, "c", {h[0].node_id(), y.node_id()}, {x}, {x.type()}, {y}, {}, {}};
  absl::StatusOr<std::string> text = ClusterToText(with_host_call);
  ASSERT_FALSE(text.ok());
  EXPECT_TRUE(absl::IsInvalidArgument(text.status()));
  EXPECT_THAT(std::string(text.status().message()), HasSubstr("HostCall"));
  // A node reading a value the cluster does not have.
  ClusterSpec dangling{&g, "c", {y.node_id()}, {x}, {x.type()}, {y}, {}, {}};
  text = ClusterToText(dangling);
  ASSERT_FALSE(text.ok());
  EXPECT_THAT(std::string(text.status().message()), HasSubstr("neither an argument"));
  // Input types must be concrete.
  ClusterSpec unknown{&g, "c", {}, {x}, {{DType::kF32, {-1}}}, {x}, {}, {}};
  EXPECT_FALSE(ClusterToText(unknown).ok());
}

const char* const kValid = R"(braze-cluster 1
# a comment
name "c"
input 0 f32 [4,3]
input 1 f32 [3,2] symbols [-1,-1]

node 0 MatMul transpose_a=0 transpose_b=0 in=a0,a1 name="mm"
node 1 Const value=f32[]:0000803f in= name="one"   # 1
node 2 Add in=n0.0,n1.0 name="add"
output 0 n2.0
end
)";

// The error of parsing `text` (which must fail) as "src.cluster".
std::string ErrorOf(const std::string& text) {
  absl::StatusOr<RebuiltCluster> r = ClusterFromText(text, "src.cluster");
  EXPECT_FALSE(r.ok()) << text;
  if (r.ok()) return "";
  EXPECT_TRUE(absl::IsInvalidArgument(r.status())) << r.status();
  return std::string(r.status().message());
}

std::string Replace(std::string text, const std::string& from, const std::string& to) {
  EXPECT_NE(text.find(from), std::string::npos) << from;
  return absl::StrReplaceAll(text, {{from, to}});
}

TEST(ClusterTextErrors, ValidTextParses) {
  absl::StatusOr<RebuiltCluster> r = ClusterFromText(kValid, "src.cluster");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->spec.nodes.size(), 3u);
  EXPECT_EQ(r->spec.outputs[0].shape(), (Shape{4, 2}));
  EXPECT_EQ(r->spec.input_symbols.size(), 2u);
  // Hex floats and decimals are both numbers.
  const std::string pad =
      "braze-cluster 1\nname \"p\"\ninput 0 f32 [2]\n"
      "node 0 Pad paddings=[1:1] value=VALUE in=a0 name=\"p\"\noutput 0 n0.0\nend\n";
  for (const char* v : {"0.1", "-0x1.8p+1", "-0", "inf", "-inf", "nan", "1e-40"}) {
    r = ClusterFromText(Replace(pad, "VALUE", v), "pad");
    ASSERT_TRUE(r.ok()) << v << ": " << r.status();
  }
  r = ClusterFromText(Replace(pad, "VALUE", "0.1"), "pad");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->graph->node(r->spec.nodes[0]).attrs_as<PadAttrs>().value, 0.1);
}

TEST(ClusterTextErrors, NameTheSourceLineAndWhat) {
  EXPECT_EQ(ErrorOf(Replace(kValid, "braze-cluster 1", "braze-cluster 2")),
            "src.cluster:1: format version 2 is not supported (this build reads version 1)");
  EXPECT_THAT(ErrorOf(Replace(kValid, "braze-cluster 1", "digraph {")),
              StartsWith("src.cluster:1: not a cluster text"));
  EXPECT_EQ(ErrorOf(Replace(kValid, "Add in=", "Frobnicate in=")),
            "src.cluster:9: unknown op 'Frobnicate'");
  EXPECT_EQ(ErrorOf(Replace(kValid, "in=n0.0,n1.0", "in=n0.0,n3.0")),
            "src.cluster:9: 'n3.0' refers to node 3, not defined yet (2 node(s) before it)");
  EXPECT_THAT(ErrorOf(Replace(kValid, "in=n0.0,n1.0", "in=n0.0,n1.1")),
              StartsWith("src.cluster:9: 'n1.1' refers to output 1 of node 1"));
  EXPECT_THAT(ErrorOf(Replace(kValid, "in=a0,a1", "in=a0,a2")),
              StartsWith("src.cluster:7: 'a2' refers to argument 2 of 2"));
  EXPECT_THAT(ErrorOf(Replace(kValid, "in=a0,a1", "in=a0,x1")),
              StartsWith("src.cluster:7: bad reference 'x1'"));
  // A line cut short: a missing key, an unclosed quote, a cut hex value.
  EXPECT_EQ(ErrorOf(Replace(kValid, " transpose_b=0 in=a0,a1 name=\"mm\"", " transpose_b=0")),
            "src.cluster:7: missing in=");
  EXPECT_EQ(ErrorOf(Replace(kValid, "name=\"mm\"", "name=\"m")),
            "src.cluster:7: a quoted string is not closed");
  EXPECT_THAT(ErrorOf(Replace(kValid, ":0000803f", ":0000803")),
              StartsWith("src.cluster:8: node 1 (Const): value: an odd number"));
  EXPECT_EQ(ErrorOf(Replace(kValid, ":0000803f", ":000080")),
            "src.cluster:8: node 1 (Const): value: f32[] holds 4 bytes, the hex gives 3");
  EXPECT_THAT(ErrorOf(Replace(kValid, "transpose_b=0", "transpose_b=")),
              StartsWith("src.cluster:7: node 0 (MatMul): transpose_b: '' is not 0 or 1"));
  // The file cut short.
  EXPECT_EQ(ErrorOf(Replace(kValid, "end\n", "")),
            "src.cluster:11: the text ends before its 'end' line (cut short?)");
  EXPECT_EQ(ErrorOf(""), "src.cluster:1: empty: no 'braze-cluster 1' header");
  // Bad numbers.
  EXPECT_THAT(ErrorOf(Replace(kValid, "[4,3]", "[4,x]")),
              StartsWith("src.cluster:4: input shape: 'x' is not an integer"));
  EXPECT_THAT(ErrorOf(Replace(kValid, "[4,3]", "[4,-3]")),
              StartsWith("src.cluster:4: input shape: -3 is out of range"));
  EXPECT_THAT(ErrorOf(Replace(kValid, "[4,3]", "[4,99999999999999999999]")),
              StartsWith("src.cluster:4: input shape:"));
  EXPECT_THAT(ErrorOf(Replace(kValid, "symbols [-1,-1]", "symbols [-1]")),
              StartsWith("src.cluster:5: symbols [-1] for an input of rank 2"));
  // A graph error: shape inference refuses the node.
  EXPECT_THAT(ErrorOf(Replace(kValid, "input 1 f32 [3,2]", "input 1 f32 [5,2]")),
              testing::AllOf(StartsWith("src.cluster:7: "), HasSubstr("inner dimensions differ")));
  EXPECT_THAT(ErrorOf(Replace(kValid, "Add in=n0.0,n1.0", "Add in=n0.0")),
              testing::AllOf(StartsWith("src.cluster:9: "), HasSubstr("expects 2 inputs, got 1")));
  // Keys the op does not have, or given twice.
  EXPECT_EQ(ErrorOf(Replace(kValid, "Add in=", "Add axis=1 in=")),
            "src.cluster:9: unknown key 'axis' for Add");
  EXPECT_EQ(ErrorOf(Replace(kValid, "Add in=", "Add in=a0 in=")),
            "src.cluster:9: key 'in' given twice");
  // Order: indices in sequence, sections in order, nothing after the end.
  EXPECT_EQ(ErrorOf(Replace(kValid, "node 2 Add", "node 3 Add")),
            "src.cluster:9: node 3 where node 2 is next");
  EXPECT_EQ(ErrorOf(Replace(kValid, "output 0 n2.0\n", "output 0 n2.0\ninput 2 f32 [1]\n")),
            "src.cluster:11: an input after the first node or output");
  EXPECT_EQ(ErrorOf(absl::StrCat(kValid, "node 3 Neg in=a0 name=\"late\"\n")),
            "src.cluster:12: text after 'end': 'node'");
  EXPECT_THAT(ErrorOf(Replace(kValid, "name=\"one\"", "name=\"o\\qne\"")),
              StartsWith("src.cluster:8: name: unknown escape \\q"));
  // A HostCall has no text form.
  EXPECT_THAT(ErrorOf(Replace(kValid, "Add in=n0.0,n1.0", "HostCall in=n0.0,n1.0")),
              StartsWith("src.cluster:9: node 2 (HostCall): a HostCall"));
}

// ---- The window ops: every field of Window2D, Conv2DAttrs and Pool2DAttrs ----

Window2D OddWindow() {
  Window2D w;
  w.stride_h = 2;
  w.stride_w = 3;
  w.dilation_h = 3;
  w.dilation_w = 2;
  w.padding = Padding::kExplicit;
  w.pad_top = 1;
  w.pad_bottom = 4;
  w.pad_left = 2;
  w.pad_right = 0;
  w.format = DataFormat::kNCHW;
  return w;
}

Pool2DAttrs OddPool() {
  Pool2DAttrs a;
  a.size_h = 3;
  a.size_w = 2;
  a.window.stride_h = 2;
  a.window.stride_w = 1;
  a.window.padding = Padding::kExplicit;
  a.window.pad_top = 2;
  a.window.pad_bottom = 1;
  a.window.pad_left = 0;
  a.window.pad_right = 1;
  return a;
}

// One node of each window op, with no field at its default somewhere.
Case EveryWindowOp() {
  Case c;
  Tensor x = c.Input(DType::kF32, {2, 3, 11, 9}, 31);  // NCHW
  Tensor f = c.Input(DType::kF32, {3, 2, 1, 6}, 32);   // 3 groups (depthwise x2)
  Tensor conv = Conv2D(x, f, OddWindow());             // [2, 6, 5, 3]
  Tensor dx = Conv2DBackpropInput({-1, 3, 11, 9}, f, conv, OddWindow());
  Tensor df = Conv2DBackpropFilter(x, {3, 2, 1, 6}, conv, OddWindow());
  Tensor xh = c.Input(DType::kF64, {2, 7, 5, 3}, 33);  // NHWC
  Tensor fh = c.Input(DType::kF64, {2, 2, 3, 4}, 34);
  Tensor same = Conv2D(xh, fh, {1, 2}, Padding::kSame, DataFormat::kNHWC, {2, 1});
  Tensor mp = MaxPool(xh, OddPool());
  Tensor mpg = MaxPoolGrad(xh, mp, OddPool());
  Tensor mpgg = MaxPoolGradGrad(xh, xh, OddPool());
  Tensor ap = AvgPool(x, {2, 3}, {3, 2}, Padding::kSame, DataFormat::kNCHW);
  Pool2DAttrs ap_attrs = ap.node().attrs_as<Pool2DAttrs>();
  Tensor apg = AvgPoolGrad({-1, 3, 11, 9}, ap, ap_attrs);
  c.outputs = {conv, dx, df, same, mp, mpg, mpgg, ap, apg};
  return c;
}

bool SameWindow(const Window2D& a, const Window2D& b) {
  return a.stride_h == b.stride_h && a.stride_w == b.stride_w && a.dilation_h == b.dilation_h &&
         a.dilation_w == b.dilation_w && a.padding == b.padding && a.pad_top == b.pad_top &&
         a.pad_bottom == b.pad_bottom && a.pad_left == b.pad_left && a.pad_right == b.pad_right &&
         a.format == b.format;
}

TEST(ClusterText, WindowAttrsRoundTripExactly) {
  Case c = EveryWindowOp();
  ASSERT_TRUE(c.graph->status().ok()) << c.graph->status();
  const ClusterSpec spec = SpecOf(c, "windows");
  const std::string text = Text(spec);
  if (std::getenv("BRAZE_TEST_VERBOSE") != nullptr) std::cerr << text;
  RebuiltCluster rebuilt = Rebuild(text);
  ASSERT_NE(rebuilt.graph, nullptr);
  ASSERT_EQ(rebuilt.spec.nodes.size(), spec.nodes.size());
  EXPECT_EQ(Text(rebuilt.spec), text);
  EXPECT_EQ(ClusterKey(rebuilt.spec, CompileOptions{}), ClusterKey(spec, CompileOptions{}));
  int windows = 0;
  for (size_t k = 0; k < spec.nodes.size(); ++k) {
    const Node& a = spec.graph->node(spec.nodes[k]);
    const Node& b = rebuilt.graph->node(rebuilt.spec.nodes[k]);
    ASSERT_EQ(a.op(), b.op());
    EXPECT_EQ(a.outputs(), b.outputs()) << a.name();
    if (const auto* ca = std::get_if<Conv2DAttrs>(&a.attrs())) {
      const auto* cb = std::get_if<Conv2DAttrs>(&b.attrs());
      ASSERT_NE(cb, nullptr) << a.name();
      EXPECT_TRUE(SameWindow(ca->window, cb->window)) << a.name();
      EXPECT_EQ(ca->shape, cb->shape) << a.name();
      ++windows;
    } else if (const auto* pa = std::get_if<Pool2DAttrs>(&a.attrs())) {
      const auto* pb = std::get_if<Pool2DAttrs>(&b.attrs());
      ASSERT_NE(pb, nullptr) << a.name();
      EXPECT_EQ(pa->size_h, pb->size_h) << a.name();
      EXPECT_EQ(pa->size_w, pb->size_w) << a.name();
      EXPECT_TRUE(SameWindow(pa->window, pb->window)) << a.name();
      EXPECT_EQ(pa->shape, pb->shape) << a.name();
      ++windows;
    }
  }
  EXPECT_EQ(windows, 9);
  // Readable, every field spelled out (the -1 batch of a gradient op's shape too).
  EXPECT_THAT(text, HasSubstr(" Conv2D strides=[2,3] dilations=[3,2] padding=EXPLICIT "
                              "pads=[1,4,2,0] format=NCHW shape=[] in=a0,a1 "));
  EXPECT_THAT(text, HasSubstr(" Conv2DBackpropInput strides=[2,3] dilations=[3,2] "
                              "padding=EXPLICIT pads=[1,4,2,0] format=NCHW shape=[-1,3,11,9] "));
  EXPECT_THAT(text, HasSubstr(" Conv2DBackpropFilter strides=[2,3] dilations=[3,2] "
                              "padding=EXPLICIT pads=[1,4,2,0] format=NCHW shape=[3,2,1,6] "));
  EXPECT_THAT(text, HasSubstr(" Conv2D strides=[1,2] dilations=[2,1] padding=SAME "
                              "pads=[0,0,0,0] format=NHWC shape=[] in=a2,a3 "));
  EXPECT_THAT(text, HasSubstr(" MaxPool size=[3,2] strides=[2,1] dilations=[1,1] "
                              "padding=EXPLICIT pads=[2,1,0,1] format=NHWC shape=[] in=a2 "));
  EXPECT_THAT(text, HasSubstr(" AvgPoolGrad size=[2,3] strides=[3,2] dilations=[1,1] "
                              "padding=SAME pads=[0,0,0,0] format=NCHW shape=[-1,3,11,9] "));
  EXPECT_THAT(text, HasSubstr(" MaxPoolGradGrad size=[3,2] "));
}

// Every field of a window op enters the cache key: two clusters that differ in one field
// must not share a kernel.
TEST(ClusterText, EveryWindowFieldChangesTheKey) {
  auto conv_key = [](const Window2D& w) {
    Case c;
    Tensor x = c.Input(DType::kF32, {1, 6, 12, 6}, 1);
    Tensor f = c.Input(DType::kF32, {2, 2, 6, 2}, 2);
    c.outputs = {Conv2D(x, f, w)};
    EXPECT_TRUE(c.graph->status().ok()) << c.graph->status();
    return ClusterKey(SpecOf(c), CompileOptions{});
  };
  Window2D base = OddWindow();
  const std::string k0 = conv_key(base);
  std::vector<Window2D> variants(11, base);
  variants[0].stride_h = 1;
  variants[1].stride_w = 1;
  variants[2].dilation_h = 1;
  variants[3].dilation_w = 1;
  variants[4].padding = Padding::kSame;
  variants[5].pad_top = 0;
  variants[6].pad_bottom = 3;
  variants[7].pad_left = 1;
  variants[8].pad_right = 1;
  variants[9].format = DataFormat::kNHWC;
  variants[10].padding = Padding::kValid;
  for (int i : {4, 10}) {  // pads go with EXPLICIT only
    variants[i].pad_top = variants[i].pad_bottom = variants[i].pad_left = variants[i].pad_right = 0;
  }
  std::vector<std::string> keys = {k0};
  for (const Window2D& w : variants) keys.push_back(conv_key(w));
  for (size_t i = 0; i < keys.size(); ++i) {
    for (size_t j = i + 1; j < keys.size(); ++j) EXPECT_NE(keys[i], keys[j]) << i << " " << j;
  }
  auto pool_key = [](const Pool2DAttrs& a, bool max) {
    Case c;
    Tensor x = c.Input(DType::kF32, {1, 9, 9, 2}, 1);
    c.outputs = {max ? MaxPool(x, a) : AvgPool(x, a)};
    EXPECT_TRUE(c.graph->status().ok()) << c.graph->status();
    return ClusterKey(SpecOf(c), CompileOptions{});
  };
  Pool2DAttrs p = OddPool();
  Pool2DAttrs taller = p, wider = p;
  taller.size_h = 4;
  wider.size_w = 3;
  EXPECT_NE(pool_key(p, true), pool_key(taller, true));
  EXPECT_NE(pool_key(p, true), pool_key(wider, true));
  EXPECT_NE(pool_key(p, true), pool_key(p, false));
  EXPECT_EQ(pool_key(p, true), pool_key(OddPool(), true));
}

TEST(ClusterTextErrors, WindowAttrsNameTheLineAndWhat) {
  Case c = EveryWindowOp();
  const std::string text = Text(SpecOf(c, "windows"));
  auto line_of = [&](const std::string& what) {
    const size_t at = text.find(what);
    EXPECT_NE(at, std::string::npos) << what;
    return 1 + std::count(text.begin(), text.begin() + at, '\n');
  };
  const std::string conv = " Conv2D strides=[2,3]";
  const std::string prefix = absl::StrCat("src.cluster:", line_of(conv), ": ");
  EXPECT_THAT(ErrorOf(Replace(text, "padding=EXPLICIT pads=[1,4,2,0] format=NCHW shape=[] in=a0",
                              "padding=FULL pads=[1,4,2,0] format=NCHW shape=[] in=a0")),
              testing::AllOf(StartsWith(prefix),
                             HasSubstr("padding: expected VALID, SAME or EXPLICIT, got 'FULL'")));
  EXPECT_THAT(
      ErrorOf(Replace(text, "format=NCHW shape=[] in=a0", "format=CHWN shape=[] in=a0")),
      testing::AllOf(StartsWith(prefix), HasSubstr("format: expected NHWC or NCHW, got 'CHWN'")));
  EXPECT_THAT(ErrorOf(Replace(text, conv, " Conv2D strides=[2]")),
              testing::AllOf(StartsWith(prefix), HasSubstr("strides and dilations need 2")));
  EXPECT_THAT(ErrorOf(Replace(text, conv, " Conv2D strides=[0,3]")),
              testing::AllOf(StartsWith(prefix), HasSubstr("stride along H must be in")));
  EXPECT_THAT(ErrorOf(Replace(text, " MaxPool size=[3,2]", " MaxPool size=[3]")),
              HasSubstr("size: expected 2 values"));
  EXPECT_THAT(ErrorOf(Replace(text, " MaxPool size=[3,2]", " MaxPool size=[1,2]")),
              HasSubstr("explicit pooling pads must be smaller than the 1x2 window"));
}

// Every prefix of a text and many random single-byte edits parse to a result or an
// InvalidArgument naming the source; none crashes.
void ExpectNoInputCrashes(const std::string& text) {
  const size_t end = text.rfind("end\n");
  for (size_t n = 0; n < text.size(); ++n) {
    absl::StatusOr<RebuiltCluster> r = ClusterFromText(text.substr(0, n), "cut");
    if (n >= end + 3) {
      EXPECT_TRUE(r.ok()) << n << ": " << r.status();
    } else {
      ASSERT_FALSE(r.ok()) << n;
      EXPECT_TRUE(absl::IsInvalidArgument(r.status()));
      EXPECT_THAT(std::string(r.status().message()), StartsWith("cut:")) << n;
    }
  }
  std::mt19937 rng(7);
  const std::string alphabet = "0123456789-x.,:=[]\"\\#anpe \nfi";
  int failures = 0;
  for (int i = 0; i < 3000; ++i) {
    std::string edited = text;
    const size_t at = rng() % edited.size();
    if (rng() % 4 == 0) {
      edited.erase(at, 1);
    } else {
      edited[at] = alphabet[rng() % alphabet.size()];
    }
    absl::StatusOr<RebuiltCluster> r = ClusterFromText(edited, "edit");
    if (r.ok()) {
      EXPECT_EQ(r->spec.graph, r->graph.get());
      EXPECT_TRUE(r->graph->status().ok());
      continue;
    }
    ++failures;
    EXPECT_TRUE(absl::IsInvalidArgument(r.status())) << r.status();
    EXPECT_THAT(std::string(r.status().message()), StartsWith("edit:"));
  }
  EXPECT_GT(failures, 1000);
}

TEST(ClusterTextErrors, NoInputCrashes) {
  Case c = EveryAttrKind();
  ClusterSpec spec = SpecOf(c);
  spec.input_symbols = {{0, -1}, {0}, {}, {-1, 1, -1}};
  ExpectNoInputCrashes(Text(spec));
}

TEST(ClusterTextErrors, NoWindowInputCrashes) {
  ExpectNoInputCrashes(Text(SpecOf(EveryWindowOp())));
}

}  // namespace
}  // namespace braze
