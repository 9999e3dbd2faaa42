// Differential testing: seeded random programs (tools/fuzz/random_program.h: every op
// family, layout ops on every axis, ranks 0-4, odd extents, f64/i32/bool, -1 dims fed
// with several sizes, gradients, several fetches), run fused in strict mode under each
// scheduler and compared with the reference executor. A quick slice of what
// tools/braze-fuzz runs at scale (docs/FUZZING.md); slices of its options too: special
// values, oneDNN's matmuls (at its threshold and with every matmul sent to it), values
// past the last-level cache, thread counts.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "braze/device.h"
#include "braze/logging.h"
#include "device/cpu_gemm.h"
#include "runtime/flags.h"
#include "tools/fuzz/fuzz_coverage.h"
#include "tools/fuzz/fuzz_runner.h"

namespace braze {
namespace fuzz {
namespace {

const Scheduler kSchedulers[] = {Scheduler::kAuto, Scheduler::kAdams2019, Scheduler::kMullapudi2016,
                                 Scheduler::kLi2018, Scheduler::kSafeDefault};

struct Slice {
  GenerateOptions gen;
  std::string flags;  // braze-fuzz's flags for the same programs, for the failure message
  std::string device = "cpu";
  bool jit_scope = true;
  std::string jit_device = "jit:cpu";
  bool vary_threads = false;  // num_threads 1, 2 and 0 (all) by seed, not always 0
  bool function = false;      // RunOptions::function: the programs run as Functions
  // Runs only the programs it accepts, until `count` of them have run (0: every seed).
  std::function<bool(const Program&)> wanted;
  int count = 0;
};

// Runs the slice's programs of seeds [first, last); returns how many ran.
int RunSlice(uint64_t first, uint64_t last, const Slice& slice) {
  int ran = 0, passed = 0;
  int64_t launches = 0;
  for (uint64_t seed = first; seed < last && (slice.count == 0 || ran < slice.count); ++seed) {
    const Program p = GenerateProgram(seed, slice.gen);
    if (slice.wanted && !slice.wanted(p)) continue;
    ++ran;
    RunOptions o;
    o.scheduler = kSchedulers[seed % 5];
    o.device = slice.device;
    o.jit_scope = slice.jit_scope;
    o.jit_device = slice.jit_device;
    o.function = slice.function;
    if (slice.vary_threads) o.num_threads = static_cast<int>(seed % 3 == 2 ? 0 : seed % 3 + 1);
    const Outcome out = RunProgram(p, o);
    // A skip is a program the builders reject (not a Gradients() error: that is an error).
    EXPECT_TRUE(out.kind == Outcome::Kind::kPass || out.kind == Outcome::Kind::kSkip)
        << "seed " << seed << ": " << OutcomeName(out.kind) << ": " << out.detail << "\n"
        << "(run tools/braze-fuzz --seeds=" << seed << " --scheduler=" << SchedulerName(o.scheduler)
        << " --threads=" << o.num_threads << slice.flags << " for a minimized program)\n"
        << ProgramToCpp(p);
    passed += out.kind == Outcome::Kind::kPass;
    launches += out.cluster_launches;
  }
  // Nearly every program is valid and compiles into clusters: the slice tests something.
  EXPECT_GE(passed, ran * 9 / 10);
  EXPECT_GE(launches, ran);
  return ran;
}

void RunSlice(uint64_t first, uint64_t last, const std::string& device, bool jit_scope,
              const std::string& jit_device = "jit:cpu") {
  Slice slice;
  slice.device = device;
  slice.jit_scope = jit_scope;
  slice.jit_device = jit_device;
  RunSlice(first, last, slice);
}

TEST(RandomGraphs, FusedMatchesReferenceUnderEveryScheduler) { RunSlice(1, 151, "cpu", true); }

TEST(RandomGraphs, JitCpuDeviceMatchesReference) { RunSlice(151, 181, "cpu", false); }

// Inputs with infinities, NaN, signed zeros and subnormals (braze-fuzz --specials), dynamic
// dims, and thread counts 1, 2 and all.
TEST(RandomGraphs, SpecialValuesMatchReference) {
  Slice slice;
  slice.gen.specials_probability = 0.6;
  slice.gen.dynamic_probability = 0.3;
  slice.flags = " --specials=0.6 --dynamic=0.3";
  slice.vary_threads = true;
  RunSlice(3000, 3030, slice);
}

// Counts the compiled kernels that call oneDNN (--log_compiles says "matmul by oneDNN";
// `what`: a part of that line to count instead, as the types of bf16 calls).
class LibraryKernels {
 public:
  explicit LibraryKernels(int64_t min_work, std::string what = "; matmul by ") {
    BrazeFlags flags;
    flags.log_compiles = true;
    flags.cpu_gemm_min_work = min_work;
    SetBrazeFlagsForTesting(flags);
    SetLogSink([this, what](LogSeverity, int, std::string_view text) {
      count_ += text.find(what) != std::string_view::npos;
    });
  }
  ~LibraryKernels() {
    SetLogSink(nullptr);
    SetBrazeFlagsForTesting(BrazeFlags{});
  }
  int count() const { return count_; }

 private:
  std::atomic<int> count_{0};  // kernels may be compiled on other threads
};

// oneDNN's matmuls inside fused kernels (docs/CPU_GEMM.md), which ctest ran only in
// test/runtime's hand-written cases: matmul-sized programs (braze-fuzz --gemm) whose
// matmuls do 2^21 multiply-adds or more, at the default threshold; then, with
// BRAZE_FLAGS=--cpu_gemm_min_work=1 (what the library campaigns run under), programs whose
// matmuls are tiny, odd, transposed, batched, with weights that are constants, inputs and
// computed values.
TEST(RandomGraphs, OneDnnMatMulsMatchReference) {
  if (!CpuGemmAvailable().ok()) GTEST_SKIP() << CpuGemmAvailable().message();
  {
    LibraryKernels library(0);  // the default threshold, 2^21
    Slice slice;
    slice.gen.gemm_probability = 1;
    slice.flags = " --gemm";
    slice.vary_threads = true;
    slice.wanted = [](const Program& p) { return p.max_matmul_work >= (1 << 21); };
    slice.count = 12;
    EXPECT_EQ(RunSlice(4000, 4100, slice), 12);
    // Not one per program: a large matmul may be f64, which stays on Halide's loops.
    EXPECT_GE(library.count(), 5) << "kernels calling oneDNN";
  }
  {
    LibraryKernels library(1);
    Slice slice;
    slice.flags = ", with BRAZE_FLAGS=--cpu_gemm_min_work=1,";
    slice.vary_threads = true;
    slice.wanted = [](const Program& p) { return p.max_matmul_work > 0; };
    slice.count = 16;
    EXPECT_EQ(RunSlice(4100, 4400, slice), 16);
    EXPECT_GE(library.count(), 4) << "kernels calling oneDNN";
  }
}

// Values past the last-level cache (braze-fuzz --large): 4M to 8M elements, outputs of
// 32 MiB and more streamed, large loops split into parallel chunks, one thread and all.
TEST(RandomGraphs, ValuesPastTheCacheMatchReference) {
  Slice slice;
  slice.gen.dram_probability = 1;
  slice.flags = " --large";
  slice.vary_threads = true;
  RunSlice(5000, 5004, slice);
}

// Image-shaped programs (braze-fuzz --window): convolutions with every padding, strides,
// dilations, groups and depthwise filters in both formats, fused with a bias, BatchNorm,
// ReLU, residual adds, pools and reductions, the gradient ops (as ops of their own, and
// in the 30% of programs that fetch their gradients), batch dims declared -1, thread
// counts 1, 2 and all.
TEST(RandomGraphs, WindowOpsMatchReference) {
  Slice slice;
  slice.gen.window_probability = 1;
  slice.gen.dynamic_probability = 0.3;
  slice.flags = " --window --dynamic=0.3";
  slice.vary_threads = true;
  RunSlice(6000, 6012, slice);
}

// The sequence ops (braze-fuzz --sequence): embedding lookups of odd vocabularies by ids
// with repeats and out-of-range values, segment sums, positions (a causal mask and an
// encoding, -1 batches included), Sin and Cos; their gradients in the programs that
// fetch them; thread counts 1, 2 and all.
TEST(RandomGraphs, SequenceOpsMatchReference) {
  Slice slice;
  slice.gen.sequence_probability = 1;
  slice.gen.dynamic_probability = 0.3;
  slice.flags = " --sequence --dynamic=0.3";
  slice.vary_threads = true;
  RunSlice(7000, 7016, slice);
}

// The random ops (docs/RANDOM.md): every random op's bits fetched and compared exactly.
TEST(RandomGraphs, RandomOpsMatchReferenceBitForBit) {
  Slice slice;
  slice.gen.random_probability = 1;
  slice.gen.dynamic_probability = 0.3;
  slice.flags = " --random --dynamic=0.3";
  slice.vary_threads = true;
  RunSlice(7100, 7116, slice);
}

// Attention (braze-fuzz --attention; docs/ATTENTION.md): ScaledDotProductAttention fused
// and unfused on odd, prime and tiny lengths, Tq != Tk, odd widths, causal or not,
// dropout, -1 lengths, f32 and f64, fed by and feeding other ops; the backward ops in
// the programs that fetch gradients; every CPU scheduler, thread counts 1, 2 and all.
TEST(RandomGraphs, AttentionMatchesReference) {
  Slice slice;
  slice.gen.attention_probability = 1;
  slice.gen.dynamic_probability = 0.3;
  slice.flags = " --attention --dynamic=0.3";
  slice.vary_threads = true;
  EXPECT_EQ(RunSlice(7200, 7210, slice), 10);
}

// Seed 15600134 (braze-fuzz --function --attention --specials=0.5 --dynamic=0.3, under
// Mullapudi2016 at 2 threads): the gradient of Sin of a causal self-attention of an input
// holding NaN and infinities was NaN where the reference is finite: dq and dk multiplied
// a weight of 0 by an infinite dP or key (docs/ATTENTION.md, "Infinities and NaN"). Run
// as the campaign ran it, and in a JitScope under the safe default and Adams2019.
TEST(RandomGraphs, AttentionGradientWithSpecialsSeed15600134) {
  GenerateOptions gen;
  gen.specials_probability = 0.5;
  gen.dynamic_probability = 0.3;
  gen.attention_probability = 1;
  const Program p = GenerateProgram(15600134, gen);
  struct Run {
    Scheduler scheduler;
    bool function;
    int threads;
  };
  for (const Run& r : {Run{Scheduler::kMullapudi2016, true, 2}, Run{Scheduler::kAuto, false, 1},
                       Run{Scheduler::kAdams2019, false, 2}}) {
    RunOptions o;
    o.scheduler = r.scheduler;
    o.function = r.function;
    o.num_threads = r.threads;
    const Outcome out = RunProgram(p, o);
    EXPECT_EQ(out.kind, Outcome::Kind::kPass)
        << SchedulerName(r.scheduler) << (r.function ? ", Function" : ", JitScope") << ": "
        << OutcomeName(out.kind) << ": " << out.detail;
  }
}

// Seeds 14530436 (braze-fuzz --attention --dynamic=0.3, Adams2019, 1 thread) and
// 52000038 (the same with --specials=0.3, 3 threads): an f64 attention of constants
// shifted by Cast(Tanh(Mean(x)), f64) of an f32 input came out "ill-conditioned": the
// generator judged the f64 value at f64's tolerance, but Tanh and Mean ran in f32 and the
// two sides rounded them differently (inside one op, where ProgramOp::f32_rounding could
// not see it). The shift is Tanh(Mean(Cast(x, f64))) now, f64 throughout, and the
// programs pass at f64's tolerance (docs/FUZZING_FAMILIES.md, 2026-11-30).
TEST(RandomGraphs, F64AttentionOfConstantsMatchesAtF64ToleranceSeeds14530436And52000038) {
  struct Case {
    uint64_t seed;
    double specials;
    int threads;
  };
  for (const Case& c : {Case{14530436, 0, 1}, Case{52000038, 0.3, 3}}) {
    GenerateOptions gen;
    gen.attention_probability = 1;
    gen.dynamic_probability = 0.3;
    gen.specials_probability = c.specials;
    const Program p = GenerateProgram(c.seed, gen);
    bool f64_shift = false;
    for (const ProgramOp& op : p.ops) {
      if (op.code.find("Tanh(Mean(Cast($0, DType::kF64)))") == std::string::npos) continue;
      f64_shift = true;
      EXPECT_FALSE(op.f32_rounding) << c.seed << ": " << op.code;
    }
    EXPECT_TRUE(f64_shift) << c.seed;
    RunOptions o;
    o.scheduler = Scheduler::kAdams2019;
    o.num_threads = c.threads;
    const Outcome out = RunProgram(p, o);
    EXPECT_EQ(out.kind, Outcome::Kind::kPass)
        << c.seed << ": " << OutcomeName(out.kind) << ": " << out.detail;
  }
}

// bf16 and f16 (braze-fuzz --float16; docs/MIXED_PRECISION.md): casts of float values
// to both 16-bit types, elementwise ops, reductions, matmuls, softmax and layer norm on
// them, casts back; 16-bit results judged at RunOptions::rtol_16.
TEST(RandomGraphs, Float16ProgramsMatchReference) {
  Slice slice;
  slice.gen.float16_probability = 1;
  slice.gen.dynamic_probability = 0.3;
  slice.flags = " --float16 --dynamic=0.3";
  slice.vary_threads = true;
  RunSlice(7300, 7316, slice);
}

// bgemm (issue 38): bf16 matmuls on oneDNN's bf16 matmul (docs/CPU_GEMM.md, "bf16 and
// f16"): 16-bit programs with matmuls, every matmul on the library however small
// (--cpu_gemm_min_work=1), under the schedulers by seed (the safe default and Auto call
// it); kernels must call it on bf16 operands (on widened f32 copies where oneDNN runs no
// bf16 matmul: an AVX2 CPU), each result within rtol_16.
TEST(RandomGraphs, BF16MatMulsOnOneDnnMatchReference) {
  if (!CpuGemmAvailable().ok()) GTEST_SKIP() << CpuGemmAvailable().message();
  LibraryKernels library(1, CpuGemmTakesBF16() ? "bf16 x bf16 -> bf16" : "f32 x f32 -> f32");
  Slice slice;
  slice.gen.float16_probability = 1;
  slice.gen.gemm_probability = 0.5;
  slice.flags = ", with BRAZE_FLAGS=--cpu_gemm_min_work=1, --float16 --gemm=0.5";
  slice.vary_threads = true;
  slice.wanted = [](const Program& p) {  // a matmul of (or computed from) 16-bit values
    for (const ProgramOp& op : p.ops) {
      if (op.half_rounding && op.code.rfind("MatMul(", 0) == 0) return true;
    }
    return false;
  };
  slice.count = 20;
  EXPECT_EQ(RunSlice(7400, 7900, slice), 20);
  // 3 with these seeds: two schedulers in five (by seed) call the library.
  EXPECT_GE(library.count(), 3) << "kernels calling oneDNN's matmul on bf16 values";
}

// Control flow (braze-fuzz --control_flow; docs/CONTROL_FLOW.md; cf, issue 40): Scans
// (reversed too, over -1 lengths), Conds on predicates both sides agree on, bounded
// Whiles (data-dependent trip counts among them: two in these seeds), each around a random body
// with a captured constant; their gradients in the programs that fetch them.
TEST(RandomGraphs, ControlFlowMatchesReference) {
  Slice slice;
  slice.gen.control_flow_probability = 1;
  slice.gen.dynamic_probability = 0.3;
  slice.flags = " --control_flow --dynamic=0.3";
  slice.vary_threads = true;
  RunSlice(7400, 7412, slice);
}

// A random draw is compared with no tolerance: one ulp off in one element is a mismatch
// (an f32 draw has no rounding to forgive), where an ordinary f32 fetch would pass.
TEST(RandomGraphs, ARandomDrawOneUlpOffIsAMismatch) {
  GenerateOptions gen;
  gen.random_probability = 1;
  int checked = 0;
  for (uint64_t seed = 1; seed < 40 && checked < 2; ++seed) {
    const Program p = GenerateProgram(seed, gen);
    size_t fetch = p.fetches.size();
    for (size_t f = 0; f < p.fetches.size() && fetch == p.fetches.size(); ++f) {
      const int v = p.fetches[f] - static_cast<int>(p.inputs.size());
      if (v >= 0 && p.ops[v].bit_exact) fetch = f;
    }
    if (fetch == p.fetches.size() || RunProgram(p, RunOptions()).kind != Outcome::Kind::kPass) {
      continue;
    }
    RunOptions o;
    o.corrupt_result = [&](size_t f, HostTensor* t) {
      if (f != fetch || t->num_elements() == 0) return;
      const int64_t i = t->num_elements() / 2;
      const double x = t->GetDouble(i);
      t->SetDouble(i, t->dtype() == DType::kF32 ? std::nextafter(static_cast<float>(x), 2.0f)
                                                : std::nextafter(x, 2.0));
    };
    const Outcome out = RunProgram(p, o);
    EXPECT_EQ(out.kind, Outcome::Kind::kMismatch) << "seed " << seed << ": " << out.detail;
    EXPECT_THAT(out.detail, ::testing::HasSubstr("bit-exact tolerance")) << seed;
    ++checked;
  }
  EXPECT_EQ(checked, 2) << "too few programs with a random draw fetched";
}

// The GPU schedules on jit:opencl (POCL here): device buffers, copies, GPU kernels.
TEST(RandomGraphs, JitOpenCLDeviceMatchesReference) {
  if (!CheckOpenCLAvailable().ok()) GTEST_SKIP() << CheckOpenCLAvailable().message();
  RunSlice(1, 61, "cpu", false, "jit:opencl");
}

// On a GPU, in three tests so that tools/gpu-check.sh's shards run them side by side (one
// was 150 programs, over two minutes on an H200 machine, each compile on one core).
void RunCudaSlice(uint64_t first, uint64_t last) {
  if (!CheckCudaAvailable().ok()) GTEST_SKIP() << CheckCudaAvailable().message();
  RunSlice(first, last, "cuda:0", true);
}
TEST(RandomGraphs, CudaFusedMatchesReference1) { RunCudaSlice(1, 51); }
TEST(RandomGraphs, CudaFusedMatchesReference2) { RunCudaSlice(51, 101); }
TEST(RandomGraphs, CudaFusedMatchesReference3) { RunCudaSlice(101, 151); }

TEST(RandomGraphs, GeneratorCoversTheOpFamilies) {
  std::string all;
  for (uint64_t seed = 1; seed < 151; ++seed) all += ProgramToCpp(GenerateProgram(seed));
  for (const char* op :
       {"Placeholder",  "Select(",     "Sum(",       "Max(",         "ArgMax(",    "MatMul(",
        "BatchMatMul(", "Reshape(",    "Transpose(", "BroadcastTo(", "Concat(",    "Slice(",
        "Pad(",         "OneHot(",     "Cast(",      "Softmax(",     "LayerNorm(", "Dense(",
        "DType::kF64",  "DType::kI32", "{-1",        "Conv2D(",      "MaxPool(",   "AvgPool("}) {
    EXPECT_THAT(all, ::testing::HasSubstr(op));
  }
}

// braze-fuzz seed 10402097 (--max_ops=32): fetch 3 is a gradient through a LayerNorm of
// rows clamped to one value by a Minimum; element 329 sums 31 terms of 316 * (g - mean(g))
// whose exact sum is 0, so both sides return rounding noise of about 3e-4, above the
// 2e-4 tolerance. The reference moves as much when the constants and inputs move by a
// few ulps (by 7.5e-4 there with a4716c1's draws): ill-conditioned, not a mismatch. The hook moves
// the compiled element by 1e-3, past the tolerance but within that reach, whatever the kernel
// returned. Moved by 0.5, far beyond the noise, or an element of a well-conditioned fetch moved
// past the tolerance: a mismatch.
TEST(RandomGraphs, RoundingNoiseTheProgramAmplifiesIsIllConditionedNotAMismatch) {
  GenerateOptions gen;
  gen.max_ops = 32;
  const Program p = GenerateProgram(10402097, gen);
  auto moved = [&](size_t fetch, int64_t element, double by) {
    RunOptions o;
    o.corrupt_result = [=](size_t f, HostTensor* t) {
      if (f == fetch) t->SetDouble(element, t->GetDouble(element) + by);
    };
    return RunProgram(p, o);
  };
  const Outcome noise = moved(3, 329, -1e-3);
  EXPECT_EQ(noise.kind, Outcome::Kind::kIllConditioned) << noise.detail;
  EXPECT_THAT(noise.detail, ::testing::HasSubstr("worst [329]"));
  const Outcome wrong = moved(3, 329, 0.5);
  EXPECT_EQ(wrong.kind, Outcome::Kind::kMismatch) << wrong.detail;
  const Outcome elsewhere = moved(0, 0, 0.01);
  EXPECT_EQ(elsewhere.kind, Outcome::Kind::kMismatch) << elsewhere.detail;
}

// Where the reference is NaN or infinite, the compiled result must be the same special:
// a finite value there is a mismatch (a tolerance of rtol * |ref| was infinite or NaN
// there, and let any value through). Programs with specials in every float input.
TEST(RandomGraphs, AFiniteValueWhereTheReferenceIsNanOrInfiniteIsAMismatch) {
  GenerateOptions gen;
  gen.specials_probability = 1;
  int checked = 0;
  for (uint64_t seed = 1; seed < 60 && checked < 3; ++seed) {
    const Program p = GenerateProgram(seed, gen);
    if (RunProgram(p, RunOptions()).kind != Outcome::Kind::kPass) continue;
    int64_t replaced = 0;
    RunOptions o;
    o.corrupt_result = [&](size_t, HostTensor* t) {
      if (!IsFloating(t->dtype())) return;
      for (int64_t i = 0; i < t->num_elements(); ++i) {
        if (!std::isfinite(t->GetDouble(i))) {
          t->SetDouble(i, 0.5);
          ++replaced;
        }
      }
    };
    const Outcome out = RunProgram(p, o);
    if (replaced == 0) continue;  // no special reached an output
    EXPECT_EQ(out.kind, Outcome::Kind::kMismatch) << "seed " << seed << ": " << out.detail;
    ++checked;
  }
  EXPECT_EQ(checked, 3) << "too few programs with a NaN or infinity in an output";
}

TEST(RandomGraphs, MinimizerShrinksAFailureToAFewOps) {
  // Every cluster fails to compile (strict): the smallest failing program keeps one op
  // that clusters, and what it reads.
  RunOptions o;
  o.inject_compile_failure = [](const std::string& step) { return step.rfind("cluster", 0) == 0; };
  for (uint64_t seed = 1; seed < 40; ++seed) {
    Program p = GenerateProgram(seed);
    if (RunProgram(p, o).kind != Outcome::Kind::kError) continue;
    const size_t before = p.ops.size();
    std::vector<bool> keep = Minimize(p, o, Outcome::Kind::kError);
    EXPECT_EQ(RunProgram(p, o, keep).kind, Outcome::Kind::kError);
    const int kept = static_cast<int>(std::count(keep.begin(), keep.end(), true));
    // One op that clusters, with the constants it reads (a LayerNorm's gamma and beta,
    // a Dense's weights and bias): a handful at most, and fewer than the original.
    EXPECT_LE(kept, 5) << "seed " << seed << ": " << before << " ops\n" << ProgramToCpp(p, keep);
    EXPECT_LT(kept, static_cast<int>(before)) << "seed " << seed;
    return;
  }
  FAIL() << "no program in seeds 1..39 formed a cluster";
}

// The edges of the op set (braze-fuzz --edges, tools/fuzz/random_program_edges.cc):
// casts between every pair of dtypes, comparisons and selects of every dtype, negative
// axes, values with no elements and ops on them, ranks 5 and 6.
TEST(RandomGraphs, EdgeOpsMatchReference) {
  Slice slice;
  slice.gen.edges_probability = 1;
  slice.gen.dynamic_probability = 0.3;
  slice.gen.specials_probability = 0.3;
  slice.flags = " --edges --dynamic=0.3 --specials=0.3";
  slice.vary_threads = true;
  EXPECT_EQ(RunSlice(7400, 7412, slice), 12);
}

// A program of --edges with a -1 batch is also fed 0 rows (Program::empty_batch), after
// its other sizes: six runs compared, the last an empty batch.
TEST(RandomGraphs, EdgeProgramsRunAnEmptyBatchToo) {
  GenerateOptions gen;
  gen.edges_probability = 1;
  gen.dynamic_probability = 0.6;
  int checked = 0;
  for (uint64_t seed = 7420; seed < 7460 && checked < 2; ++seed) {
    const Program p = GenerateProgram(seed, gen);
    const bool dynamic = std::any_of(p.inputs.begin(), p.inputs.end(),
                                     [](const ProgramInput& in) { return in.dynamic0; });
    if (!p.empty_batch || !dynamic || p.max_elements > 2000) continue;
    ++checked;
    RunOptions o;
    o.scheduler = kSchedulers[seed % 5];
    const Outcome out = RunProgram(p, o);
    EXPECT_EQ(out.kind, Outcome::Kind::kPass) << "seed " << seed << ": " << out.detail << "\n"
                                              << ProgramToCpp(p);
    EXPECT_EQ(out.runs, 6) << "seed " << seed;
  }
  EXPECT_EQ(checked, 2);
}

// Every family in one program (braze-fuzz --all_families), as an outside generator
// mixes them; the quick ones (few elements, no matmul past the reference's plain loops'
// second).
TEST(RandomGraphs, AllFamiliesInOneProgramMatchReference) {
  Slice slice;
  slice.gen = AllFamilies();
  slice.gen.dynamic_probability = 0.3;
  slice.gen.specials_probability = 0.3;
  slice.flags = " --all_families --dynamic=0.3 --specials=0.3";
  slice.vary_threads = true;
  slice.wanted = [](const Program& p) { return p.max_elements <= 2000; };
  slice.count = 4;
  EXPECT_EQ(RunSlice(7500, 7600, slice), 4);
}

// braze-fuzz --coverage over the mixed programs: every op of op_list.def that a
// single-process program can hold (not the collectives, state updates but BatchNorm's,
// host calls), every cast between two dtypes, reductions over an empty axis, ranks 5
// and 6 and negative axes are drawn in 2,000 programs (1,000 lost bf16 Less once the
// edges family drew StopGradient too).
TEST(RandomGraphs, AllFamiliesCoverEveryOpCastAndEdge) {
  Coverage coverage;
  GenerateOptions gen = AllFamilies();
  gen.dynamic_probability = 0.3;
  for (uint64_t seed = 1; seed < 2001; ++seed) coverage.Add(GenerateProgram(seed, gen));
  EXPECT_EQ(coverage.nodes("program/does not build"), 0);
  for (int k = 0; k < kNumOps; ++k) {
    const OpKind op = static_cast<OpKind>(k);
    const OpCategory category = OpCategoryOf(op);
    if (category == OpCategory::kCollective || category == OpCategory::kHostCall ||
        op == OpKind::kAssign || op == OpKind::kAssignAdd) {
      continue;
    }
    EXPECT_GT(coverage.nodes(absl::StrCat("op/", OpName(op))), 0) << OpName(op);
  }
  const char* kDTypes[] = {"f32", "f64", "i32", "bool", "bf16", "f16"};
  for (const char* from : kDTypes) {
    for (const char* to : kDTypes) {
      if (from == to) continue;
      EXPECT_GT(coverage.nodes(absl::StrCat("cast/", from, " -> ", to)), 0) << from << " " << to;
    }
  }
  for (const char* feature : {"reduce/Sum over an empty axis",
                              "reduce/Max over an empty axis",
                              "reduce/Min over an empty axis",
                              "reduce/Mean over an empty axis",
                              "matmul/MatMul of an operand with no elements",
                              "shape/rank >4",
                              "axes/negative axis: ArgMax",
                              "axes/negative axis: Concat",
                              "axes/negative axis: LogSoftmax",
                              "axes/negative axis: Gather",
                              "op.dtype/Select bool",
                              "op.dtype/Select bf16",
                              "op.dtype/Equal f16",
                              "op.dtype/Less bf16",
                              "op.dtype/Max bf16",
                              "op.dtype/ArgMax i32",
                              "layout/OneHot to bool",
                              "layout/OneHot to f16",
                              "window/Conv2D padding explicit",
                              "window/MaxPool padding SAME",
                              "window/AvgPool stride h != w"}) {
    EXPECT_GT(coverage.nodes(feature), 0) << feature;
  }
}

// -1 dims past the batch (braze-fuzz --dynamic_dims): placeholders such as [4, -1, 7] and
// [-1, -1], each -1 fed sizes of its own per run (1, small primes, >= 16; a 1 against
// another input's -1), every run on one Session, so kernels of several patterns of
// symbol classes serve each program.
TEST(RandomGraphs, DynamicDimsMatchReference) {
  Slice slice;
  slice.gen.dynamic_dims_probability = 1;
  slice.flags = " --dynamic_dims";
  slice.vary_threads = true;
  slice.wanted = [](const Program& p) { return !p.symbol_sizes.empty() && p.max_elements <= 2000; };
  slice.count = 12;
  EXPECT_EQ(RunSlice(7700, 7800, slice), 12);
}

// --coverage of --dynamic_dims and of --all_families (which draws them for 30% of the
// inputs): -1 dims past dim 0, several per input, fed different sizes in one run, a 1
// beside a larger size, a symbol that is another's size or 1, two operands of a binary
// op with a -1 at the same place.
TEST(RandomGraphs, DynamicDimsAreDrawn) {
  for (const GenerateOptions& gen : {GenerateOptions{}, AllFamilies()}) {
    GenerateOptions options = gen;
    if (options.dynamic_dims_probability == 0) options.dynamic_dims_probability = 0.5;
    Coverage coverage;
    for (uint64_t seed = 1; seed < 301; ++seed) coverage.Add(GenerateProgram(seed, options));
    EXPECT_EQ(coverage.nodes("program/does not build"), 0);
    for (const char* feature :
         {"input/a -1 past dim 0", "input/several -1 dims",
          "feed/-1 dims of one input fed different sizes",
          "feed/a -1 dim fed 1 beside a larger one", "feed/a -1 dim fed 16 or more",
          "feed/a -1 dim that is 1 or another's size", "broadcast/-1 against -1",
          "shape/-1 past dim 0"}) {
      EXPECT_GT(coverage.nodes(feature), 0)
          << feature << " (dynamic_dims " << options.dynamic_dims_probability << ")";
    }
  }
}

// Functions (braze-fuzz --function): each program traced as a jit_compile Function with
// its -1 batch, against the same Function on the reference kernels; random ops among
// the ops (their default keys come from the names in the Function's scope) and the
// sequence ops.
TEST(RandomGraphs, FunctionsMatchReference) {
  Slice slice;
  slice.gen.random_probability = 0.5;
  slice.gen.sequence_probability = 0.3;
  slice.gen.dynamic_probability = 0.3;
  slice.flags = " --function --random=0.5 --sequence=0.3 --dynamic=0.3";
  slice.function = true;
  slice.vary_threads = true;
  EXPECT_EQ(RunSlice(8000, 8008, slice), 8);
}

}  // namespace
}  // namespace fuzz
}  // namespace braze
