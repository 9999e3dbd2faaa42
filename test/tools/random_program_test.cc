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

}  // namespace
}  // namespace fuzz
}  // namespace braze
