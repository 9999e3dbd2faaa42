// The fuzzer's program generator (tools/fuzz/random_program.h): programs stay small
// enough to run, broadcasts included; the large and matmul-sized modes reach what they
// are for and stay bounded; matmul weights are constants, inputs and computed values;
// every program's gradients build; f64 values computed in f64 are told apart.
#include "tools/fuzz/random_program.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <string>

#include "braze/graph.h"
#include "braze/session.h"

namespace braze {
namespace fuzz {
namespace {

// Seed 11201698 (--max_ops=32 --dynamic=0.3 --specials=0.5) once paired a [40005, 1]
// value with a [40005] one in a Select: a 1.6e9-element outer product whose reference
// run the kernel's out-of-memory killer ended at 23 GiB. No value of these seeds, or of
// their neighbours, may exceed the generator's cap (50,000 elements, or the largest
// input: a broadcast partner never grows a value past that).
TEST(RandomProgram, BroadcastsStaySmall) {
  GenerateOptions options;
  options.max_ops = 32;
  options.dynamic_probability = 0.3;
  options.specials_probability = 0.5;
  for (uint64_t seed = 11201690; seed < 11201710; ++seed) {
    SCOPED_TRACE(seed);
    const Program program = GenerateProgram(seed, options);
    Graph g;
    auto built = BuildProgram(program, g);
    ASSERT_TRUE(built.ok()) << built.status();
    int64_t largest_input = 50000;
    for (const Tensor& p : built->placeholders) {
      Shape s = p.shape();
      for (auto& d : s) d = std::max<int64_t>(d, 1);
      largest_input = std::max(largest_input, NumElements(s));
    }
    for (const Tensor& t : built->fetches) {
      Shape s = t.shape();
      for (auto& d : s) d = std::max<int64_t>(d, 1);
      EXPECT_LE(NumElements(s), 4 * largest_input) << t.name();
    }
  }
}

// Gradients() of a generated program never fails: braze-fuzz counts a failure as an
// error (it was a skip, tolerated up to 10% in the e2e slices). Every option that
// changes the ops drawn, at their highest.
TEST(RandomProgram, GradientsOfEveryProgramBuild) {
  GenerateOptions options;
  options.max_ops = 32;
  options.gradients_probability = 1;
  options.specials_probability = 0.5;
  options.dynamic_probability = 0.3;
  options.gemm_probability = 0.3;
  for (uint64_t seed = 1; seed < 400; ++seed) {
    const Program program = GenerateProgram(seed, options);
    Graph g;
    auto built = BuildProgram(program, g);
    ASSERT_TRUE(built.ok()) << "seed " << seed << ": " << built.status();
    EXPECT_TRUE(built->gradients_status.ok()) << "seed " << seed << ": " << built->gradients_status;
    EXPECT_EQ(built->fetch_values.size(), built->fetches.size());
  }
}

// --large: every program has a value past the last-level cache (4M elements and more,
// 16 MiB of f32), none more than twice its largest input, no matmul past 2^26
// multiply-adds; some reach 32 MiB (where outputs stream).
TEST(RandomProgram, LargeProgramsArePastTheCacheAndBounded) {
  GenerateOptions options;
  options.dram_probability = 1;
  int streaming = 0;
  for (uint64_t seed = 1; seed < 13; ++seed) {
    SCOPED_TRACE(seed);
    const Program program = GenerateProgram(seed, options);
    int64_t largest_input = 0;
    for (const ProgramInput& in : program.inputs) {
      largest_input = std::max(largest_input, NumElements(in.shape));
    }
    EXPECT_GE(largest_input, 4 << 20);
    EXPECT_LE(program.max_elements, 2 * largest_input);
    EXPECT_LE(program.max_matmul_work, int64_t{1} << 26);
    streaming += program.max_elements >= (8 << 20);
  }
  EXPECT_GE(streaming, 3);
}

// --gemm: most programs have a matmul of at least 2^21 multiply-adds (oneDNN's
// threshold), none of more than 2^26; without it, few do.
TEST(RandomProgram, MatMulSizedProgramsReachTheLibraryThreshold) {
  GenerateOptions options;
  options.gemm_probability = 1;
  int library = 0, plain = 0;
  for (uint64_t seed = 1; seed < 201; ++seed) {
    const Program program = GenerateProgram(seed, options);
    library += program.max_matmul_work >= (1 << 21);
    EXPECT_LE(program.max_matmul_work, int64_t{1} << 26) << seed;
    plain += GenerateProgram(seed).max_matmul_work >= (1 << 21);
  }
  EXPECT_GE(library, 100);
  EXPECT_LE(plain, 10);
}

// A MatMul's weight (operand 1) is a fresh constant (the packed-weight path), an input,
// or a computed value (an op: a x a^T, Tanh or Relu of a constant, a constant plus an
// input).
TEST(RandomProgram, MatMulWeightsAreConstantsInputsAndComputedValues) {
  std::set<std::string> kinds;
  for (uint64_t seed = 1; seed < 400 && kinds.size() < 3; ++seed) {
    const Program p = GenerateProgram(seed);
    const int inputs = static_cast<int>(p.inputs.size());
    for (const ProgramOp& op : p.ops) {
      if (op.code.find("MatMul($0, $1") == std::string::npos) continue;
      const int w = op.operands[1];
      kinds.insert(w < inputs                                       ? "input"
                   : p.ops[w - inputs].code.rfind("Const(", 0) == 0 ? "constant"
                                                                    : "computed");
    }
  }
  EXPECT_EQ(kinds, (std::set<std::string>{"constant", "input", "computed"}));
}

// ProgramOp::f32_rounding: f64 values computed from f64 inputs alone are judged at f64's
// tolerance; a Cast of a rounded f32 value to f64 is not.
TEST(RandomProgram, F64ValuesComputedInF64AreToldFromRoundedOnes) {
  int precise = 0, rounded = 0;
  for (uint64_t seed = 1; seed < 300; ++seed) {
    const Program p = GenerateProgram(seed);
    Graph g;
    auto built = BuildProgram(p, g);
    ASSERT_TRUE(built.ok()) << built.status();
    for (size_t k = 0; k < p.ops.size(); ++k) {
      const ProgramOp& op = p.ops[k];
      bool from_rounded = false;
      for (int i : op.operands) {
        from_rounded = from_rounded || (i >= static_cast<int>(p.inputs.size()) &&
                                        p.ops[i - p.inputs.size()].f32_rounding);
      }
      // Rounding flows to every value computed from a rounded one.
      if (from_rounded) {
        EXPECT_TRUE(op.f32_rounding) << seed << ": " << op.code;
      }
    }
    for (size_t f = 0; f < built->fetches.size(); ++f) {
      const int v = built->fetch_values[f];
      if (built->fetches[f].dtype() != DType::kF64 || v < static_cast<int>(p.inputs.size())) {
        continue;
      }
      (p.ops[v - p.inputs.size()].f32_rounding ? rounded : precise) += 1;
    }
  }
  EXPECT_GE(precise, 5);
  EXPECT_GE(rounded, 1);
}

// --window: image-shaped programs draw every window op, the gradient ops included (from
// the programs' gradients and as ops of their own), with every padding, both formats,
// strides, dilations, grouped and depthwise filters; their gradients build and the
// reference runs them.
TEST(RandomProgram, ImageProgramsDrawEveryWindowOpAndAttribute) {
  GenerateOptions options;
  options.window_probability = 1;
  options.gradients_probability = 1;
  std::set<std::string> seen;
  for (uint64_t seed = 1; seed < 120; ++seed) {
    SCOPED_TRACE(seed);
    const Program program = GenerateProgram(seed, options);
    EXPECT_TRUE(program.image);
    Graph g;
    auto built = BuildProgram(program, g);
    ASSERT_TRUE(built.ok()) << built.status();
    ASSERT_TRUE(built->gradients_status.ok()) << built->gradients_status;
    for (int id = 0; id < g.num_nodes(); ++id) {
      const Node& node = g.node(id);
      if (OpCategoryOf(node.op()) != OpCategory::kWindow) continue;
      seen.insert(OpName(node.op()));
      const Window2D& w = node.op() == OpKind::kConv2D ||
                                  node.op() == OpKind::kConv2DBackpropInput ||
                                  node.op() == OpKind::kConv2DBackpropFilter
                              ? node.attrs_as<Conv2DAttrs>().window
                              : node.attrs_as<Pool2DAttrs>().window;
      seen.insert(w.padding == Padding::kValid  ? "VALID"
                  : w.padding == Padding::kSame ? "SAME"
                                                : "EXPLICIT");
      seen.insert(w.format == DataFormat::kNHWC ? "NHWC" : "NCHW");
      if (w.stride_h > 1 || w.stride_w > 1) seen.insert("strided");
      if (w.dilation_h > 1 || w.dilation_w > 1) seen.insert("dilated");
      if (node.op() == OpKind::kConv2D) {
        const int c_axis = w.format == DataFormat::kNHWC ? 3 : 1;
        const int64_t c = node.input(0).shape()[c_axis];
        const int64_t per_group = node.input(1).shape()[2];
        if (per_group != c) seen.insert(per_group == 1 ? "depthwise" : "grouped");
      }
    }
    if (seed < 40) {  // the reference runs them (shapes, attributes, feeds)
      SessionOptions reference;
      reference.reference_only = true;
      Session session(g, reference);
      const std::vector<HostTensor> values = MakeFeeds(program);
      Feeds feeds;
      for (size_t i = 0; i < values.size(); ++i)
        feeds.emplace_back(built->placeholders[i], values[i]);
      auto out = session.Run(feeds, built->fetches);
      EXPECT_TRUE(out.ok()) << out.status();
    }
  }
  for (const char* want :
       {"Conv2D", "Conv2DBackpropInput", "Conv2DBackpropFilter", "MaxPool", "MaxPoolGrad",
        "MaxPoolGradGrad", "AvgPool", "AvgPoolGrad", "VALID", "SAME", "EXPLICIT", "NHWC", "NCHW",
        "strided", "dilated", "depthwise", "grouped"}) {
    EXPECT_EQ(seen.count(want), 1u) << want;
  }
}

// The window ops draw from a stream of their own: a program that is not image-shaped and
// drew no window op is the one its seed drew without them (the records before them keep
// their programs), and other programs draw window ops on their rank-4 values too.
TEST(RandomProgram, ProgramsWithoutWindowOpsAreUnchanged) {
  GenerateOptions none;
  none.window_probability = 0;
  int unchanged = 0, with_window_ops = 0;
  for (uint64_t seed = 1; seed < 400; ++seed) {
    const std::string with = ProgramToCpp(GenerateProgram(seed));
    const bool window_ops =
        with.find("Pool") != std::string::npos || with.find("Conv2D") != std::string::npos;
    if (GenerateProgram(seed).image || window_ops) {
      with_window_ops += !GenerateProgram(seed).image;
      continue;
    }
    EXPECT_EQ(with, ProgramToCpp(GenerateProgram(seed, none))) << seed;
    ++unchanged;
  }
  EXPECT_GE(unchanged, 300);
  EXPECT_GE(with_window_ops, 5);
}

// -1 dims past the batch (GenerateOptions::dynamic_dims_probability): inputs declare -1
// on any dims, several at once, and every feed run of every program is valid, which the
// reference kernels check (each op was built at each run's shapes while it was drawn):
// no run is a silent skip of the fuzzer's. The runs feed the -1 dims of one input
// different sizes, 1 beside larger ones, sizes >= 16, and symbols that are another's
// size or 1 (numpy broadcasting of a 1 against a -1 of another input).
TEST(RandomProgram, DynamicDimsFeedValidSizesToEveryRun) {
  GenerateOptions options;
  options.dynamic_dims_probability = 0.7;
  int past_dim0 = 0, several = 0, followers = 0, runs = 0, binary_of_two = 0;
  for (uint64_t seed = 1; seed < 200; ++seed) {
    SCOPED_TRACE(seed);
    const Program program = GenerateProgram(seed, options);
    if (program.symbol_sizes.empty()) continue;
    for (const ProgramInput& in : program.inputs) {
      const int n = static_cast<int>(
          std::count_if(in.symbols.begin(), in.symbols.end(), [](int k) { return k >= 0; }));
      several += n >= 2;
      past_dim0 += n > 0 && std::any_of(in.symbols.begin() + 1, in.symbols.end(),
                                        [](int k) { return k >= 0; });
    }
    const std::vector<std::vector<int64_t>>& sizes = program.symbol_sizes;
    for (size_t k = 1; k < sizes[0].size(); ++k) {
      bool one = false, other = false;
      for (const std::vector<int64_t>& run : sizes) {
        one = one || (run[k] == 1 && run[0] > 1);
        other = other || run[k] != run[0];
      }
      followers += one && other;
    }
    Graph g;
    auto built = BuildProgram(program, g);
    ASSERT_TRUE(built.ok()) << built.status();
    for (int id = 0; id < g.num_nodes(); ++id) {  // two values with -1 dims combined
      const Node& n = g.node(id);
      binary_of_two += OpCategoryOf(n.op()) == OpCategory::kBinary &&
                       !IsFullyDefined(n.input(0).shape()) && !IsFullyDefined(n.input(1).shape());
    }
    SessionOptions reference;
    reference.reference_only = true;
    Session session(g, reference);
    for (int64_t run : FeedRuns(program)) {
      const std::vector<HostTensor> values = MakeFeeds(program, run);
      Feeds feeds;
      for (size_t i = 0; i < values.size(); ++i)
        feeds.emplace_back(built->placeholders[i], values[i]);
      auto got = session.Run(feeds, built->fetches);
      // An empty batch may meet a Reshape that cannot infer its -1 from no elements: the
      // runner skips that run, as for --dynamic.
      if (run != kEmptyBatch) {
        EXPECT_TRUE(got.ok()) << FeedRunName(program, run) << ": " << got.status() << "\n"
                              << ProgramToCpp(program);
      }
      ++runs;
    }
  }
  EXPECT_GE(past_dim0, 40);
  EXPECT_GE(several, 20);
  EXPECT_GE(followers, 5);
  EXPECT_GE(runs, 300);
  EXPECT_GE(binary_of_two, 20);
}

// With dynamic_dims_probability, a program none of whose inputs drew -1 dims is the one
// its seed drew before (the dims draw from a stream of their own).
TEST(RandomProgram, ProgramsWithoutDynamicDimsAreUnchanged) {
  GenerateOptions dims;
  dims.dynamic_dims_probability = 0.2;
  int unchanged = 0, changed = 0;
  for (uint64_t seed = 1; seed < 300; ++seed) {
    const Program p = GenerateProgram(seed, dims);
    if (!p.symbol_sizes.empty()) {
      ++changed;
      continue;
    }
    EXPECT_EQ(ProgramToCpp(p), ProgramToCpp(GenerateProgram(seed))) << seed;
    ++unchanged;
  }
  EXPECT_GE(unchanged, 100);
  EXPECT_GE(changed, 50);
}

// Sequence programs (GenerateOptions::sequence_probability) draw every sequence op, ids
// out of range, positions of a -1 dim, and build with their gradients; with the default
// (0) no program draws one.
TEST(RandomProgram, SequenceProgramsDrawEverySequenceOp) {
  GenerateOptions options;
  options.sequence_probability = 1;
  options.dynamic_probability = 0.3;
  std::string all;
  for (uint64_t seed = 1; seed < 120; ++seed) {
    const Program program = GenerateProgram(seed, options);
    const std::string code = ProgramToCpp(program);
    all += code;
    Graph g;
    auto built = BuildProgram(program, g);
    ASSERT_TRUE(built.ok()) << "seed " << seed << ": " << built.status();
    EXPECT_TRUE(built->gradients_status.ok()) << "seed " << seed << ": " << built->gradients_status;
    EXPECT_EQ(ProgramToCpp(GenerateProgram(seed)).find("Gather("), std::string::npos) << seed;
  }
  for (const char* want : {"Gather(", "UnsortedSegmentSum(", "Iota(", "Sin(", "Cos(",
                           "Less(Reshape(Iota", " + Sin(Iota(", " * 1000.0)"}) {
    EXPECT_NE(all.find(want), std::string::npos) << want;
  }
}

// Random-op programs (GenerateOptions::random_probability) draw every random op, by
// constant and run-time steps, and fetch every raw draw to compare it bit for bit; with
// the default (0) no program draws one.
TEST(RandomProgram, RandomOpProgramsDrawEveryRandomOpAndFetchItsBits) {
  GenerateOptions options;
  options.random_probability = 1;
  options.dynamic_probability = 0.3;
  std::string all;
  int bit_exact = 0;
  for (uint64_t seed = 1; seed < 120; ++seed) {
    const Program program = GenerateProgram(seed, options);
    all += ProgramToCpp(program);
    for (size_t i = 0; i < program.ops.size(); ++i) {
      if (!program.ops[i].bit_exact) continue;
      ++bit_exact;
      const int value = static_cast<int>(program.inputs.size() + i);
      EXPECT_NE(std::find(program.fetches.begin(), program.fetches.end(), value),
                program.fetches.end())
          << "seed " << seed << ": a random draw is not fetched";
    }
    Graph g;
    auto built = BuildProgram(program, g);
    ASSERT_TRUE(built.ok()) << "seed " << seed << ": " << built.status();
    for (const ProgramOp& op : GenerateProgram(seed).ops) {
      EXPECT_EQ(op.code.find("RandomUniform("), std::string::npos) << seed << ": " << op.code;
      EXPECT_EQ(op.code.find("RandomNormal("), std::string::npos) << seed << ": " << op.code;
      EXPECT_EQ(op.code.find("Dropout("), std::string::npos) << seed << ": " << op.code;
    }
  }
  EXPECT_GE(bit_exact, 20);
  for (const char* want : {"RandomUniform(", "DType::kF64", "RandomNormal(", "Dropout(", "Sum(v",
                           "ScalarConst(g, 2147483647"}) {
    EXPECT_NE(all.find(want), std::string::npos) << want;
  }
}

// bf16 and f16 programs (GenerateOptions::float16_probability) draw casts to and from
// both 16-bit types and every op on them; values computed from an inexact 16-bit
// rounding are marked (ProgramOp::half_rounding) and values of exact casts are not; the
// programs build. With the default (0) no program draws a 16-bit value.
TEST(RandomProgram, Float16ProgramsDrawCastsAndOpsAndMarkTheirRounding) {
  GenerateOptions options;
  options.float16_probability = 1;
  std::string all;
  int half = 0;
  for (uint64_t seed = 1; seed < 120; ++seed) {
    const Program program = GenerateProgram(seed, options);
    for (const ProgramOp& op : program.ops) {
      all += op.code + "\n";
      half += op.half_rounding;
    }
    Graph g;
    auto built = BuildProgram(program, g);
    ASSERT_TRUE(built.ok()) << "seed " << seed << ": " << built.status();
    for (const ProgramOp& op : GenerateProgram(seed).ops) {
      EXPECT_EQ(op.code.find("DType::kBF16"), std::string::npos) << seed << ": " << op.code;
      EXPECT_EQ(op.code.find("DType::kF16"), std::string::npos) << seed << ": " << op.code;
      EXPECT_FALSE(op.half_rounding) << seed << ": " << op.code;
    }
  }
  EXPECT_GE(half, 20);
  for (const char* want : {"Cast($0, DType::kBF16)", "Cast($0, DType::kF16)", "MatMul($0, $1)",
                           "Softmax($0)", "LayerNorm(", "Sum($0, {-1}", "Mean($0, {-1}",
                           "Maximum($0, $1)", "Tanh($0)", "Sqrt(Abs($0))"}) {
    EXPECT_NE(all.find(want), std::string::npos) << want;
  }
}

// Control-flow programs (GenerateOptions::control_flow_probability; cf, issue 40) draw
// Scans (reversed too), Conds (on an exact value's Max, or a constant) and bounded
// Whiles; the programs build, gradients included. With the default (0) none does.
TEST(RandomProgram, ControlFlowProgramsDrawEachOpAndTheDefaultNone) {
  GenerateOptions options;
  options.control_flow_probability = 1;
  options.dynamic_probability = 0.3;
  std::string all;
  for (uint64_t seed = 1; seed < 80; ++seed) {
    const Program program = GenerateProgram(seed, options);
    for (const ProgramOp& op : program.ops) all += op.code + "\n";
    Graph g;
    auto built = BuildProgram(program, g);
    ASSERT_TRUE(built.ok()) << "seed " << seed << ": " << built.status();
    EXPECT_TRUE(built->gradients_status.ok()) << "seed " << seed << ": " << built->gradients_status;
    for (const ProgramOp& op : GenerateProgram(seed).ops) {
      EXPECT_EQ(op.code.find("Scan("), std::string::npos) << seed << ": " << op.code;
      EXPECT_EQ(op.code.find("Cond("), std::string::npos) << seed << ": " << op.code;
      EXPECT_EQ(op.code.find("While("), std::string::npos) << seed << ": " << op.code;
    }
  }
  for (const char* want : {"Scan(", "ScanOptions{true}", "Cond(Greater(Cast(Max($1)",
                           "Cond(Const(g, HostTensor::Scalar<bool>", "While(", "Square(h)"}) {
    EXPECT_NE(all.find(want), std::string::npos) << want;
  }
}

// Attention programs (GenerateOptions::attention_probability) draw
// ScaledDotProductAttention fused and unfused, causal, with dropout (constant and run-time
// steps), an explicit scale, f64, Tq != Tk, a -1 length, and fetch gradients in about
// half of them; they build, gradients included. With the default (0) no program draws it.
TEST(RandomProgram, AttentionProgramsDrawEveryVariantAndTheDefaultNone) {
  GenerateOptions options;
  options.attention_probability = 1;
  options.dynamic_probability = 0.3;
  std::string all;
  int attention = 0, gradients = 0, symbolic = 0, uneven = 0, grad_ops = 0;
  const int kSeeds = 120;
  for (uint64_t seed = 1; seed <= kSeeds; ++seed) {
    const Program program = GenerateProgram(seed, options);
    all += ProgramToCpp(program);
    Graph g;
    auto built = BuildProgram(program, g);
    ASSERT_TRUE(built.ok()) << "seed " << seed << ": " << built.status();
    EXPECT_TRUE(built->gradients_status.ok()) << "seed " << seed << ": " << built->gradients_status;
    bool drew = false, backward = false;
    for (int id = 0; id < g.num_nodes(); ++id) {
      const Node& n = g.node(id);
      if (n.op() != OpKind::kAttention) continue;
      drew = true;
      const Shape& q = n.input(0).shape();
      const Shape& k = n.input(1).shape();
      symbolic += q[q.size() - 2] < 0;
      uneven += q[q.size() - 2] != k[k.size() - 2];
      backward = backward || program.gradients;
    }
    for (int id = 0; id < g.num_nodes(); ++id) {
      grad_ops += g.node(id).op() == OpKind::kAttentionGradQ;
    }
    attention += drew;
    gradients += backward;
    for (const ProgramOp& op : GenerateProgram(seed).ops) {
      EXPECT_EQ(op.code.find("Attention"), std::string::npos) << seed << ": " << op.code;
    }
  }
  EXPECT_GE(attention, kSeeds * 2 / 3);
  EXPECT_GE(gradients, attention / 4);
  EXPECT_GE(grad_ops, 10);  // the backward ops are in the graphs the fuzzer runs
  EXPECT_GE(symbolic, 3);
  EXPECT_GE(uneven, 10);
  for (const char* want :
       {"ScaledDotProductAttention(", "o.causal = true", "o.fused = false",
        "o.dropout = ", "o.step = Sum(v", "o.step = ScalarConst(", "o.scale = ", "DType::kF64",
        "Concat({v", "Slice(v", "Sin(v", "Tanh(Mean(Cast(v", "Reshape(v"}) {
    EXPECT_NE(all.find(want), std::string::npos) << want;
  }
}

}  // namespace
}  // namespace fuzz
}  // namespace braze
