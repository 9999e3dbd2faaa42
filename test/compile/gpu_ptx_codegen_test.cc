// The CUDA path checked without a GPU, beyond the per-op cases of gpu_ptx_test.cc:
// seeded random clusters the fused plan must schedule entirely on the GPU, ptxas's
// error path, and static checks of the generated code (instructions per element, one
// read of each input element by row reductions, no vectors over symbolic innermost
// dims, host forms of kernel math computed on the host).

#include <unistd.h>

#include <functional>
#include <iostream>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "braze/gradients.h"
#include "braze/ops.h"
#include "compile/cuda_codegen.h"
#include "compile/ptx_registers.h"
#include "gtest/gtest.h"
#include "lower/lower_test_util.h"
#include "passes/mark_for_compilation.h"
#include "schedule/lowered_check.h"

namespace braze {
namespace lowertest {
namespace {

// Seeded random clusters (elementwise, broadcasts, reductions over random axis sets,
// softmax over any axis, layernorm, matmul, transpose, concat, argmax) in odd shapes:
// the fused plan must schedule every one, entirely on the GPU, and ptxas must accept it.
class RandomCluster {
 public:
  explicit RandomCluster(uint64_t seed) : rng_(seed) {}

  void Build(Case& c, int num_ops) {
    const Shape base = RandomShape();
    pool_.push_back(c.Input(DType::kF32, base, rng_()));
    if (Uniform(2) == 1) pool_.push_back(c.Input(DType::kF32, Partner(base), rng_()));
    for (int i = 0; i < num_ops; ++i) pool_.push_back(AddOp(c));
    c.outputs = {pool_.back()};
    const Tensor other = pool_[Uniform(static_cast<int>(pool_.size()))];
    if (other.node_id() != pool_.back().node_id()) c.outputs.push_back(other);
  }

 private:
  int Uniform(int n) { return static_cast<int>(rng_() % n); }
  Shape RandomShape() {
    static const int64_t kDims[] = {1, 2, 3, 7, 16, 33, 64, 300};
    Shape s(1 + Uniform(3));
    for (int64_t& d : s) d = kDims[Uniform(8)];
    return s;
  }
  // A shape that broadcasts against `s`: a suffix of it with some dims set to 1.
  Shape Partner(const Shape& s) {
    Shape p(s.begin() + Uniform(static_cast<int>(s.size())), s.end());
    for (int64_t& d : p) {
      if (Uniform(3) == 0) d = 1;
    }
    return p;
  }
  Tensor AddOp(Case& c) {
    Tensor x = pool_[Uniform(static_cast<int>(pool_.size()))];
    if (x.rank() == 0) x = Reshape(x, {1});
    const Shape& s = x.shape();
    switch (Uniform(11)) {
      case 0:
        return Tanh(x) * Sigmoid(x);
      case 1:
        return Exp(x) - Log(Square(x) + 1.0);
      case 2:
        return x + c.Input(DType::kF32, Partner(s), rng_());
      case 3:
      case 4: {
        std::vector<int> axes;
        for (int d = 0; d < x.rank(); ++d) {
          if (Uniform(2) == 1) axes.push_back(d);
        }
        if (axes.empty()) axes.push_back(x.rank() - 1);
        const bool keep = Uniform(2) == 1;
        switch (Uniform(4)) {
          case 0:
            return Sum(x, axes, keep);
          case 1:
            return Mean(x, axes, keep);
          case 2:
            return Max(x, axes, keep);
          default:
            return Min(x, axes, keep);
        }
      }
      case 5:
        return Softmax(x, -1 - Uniform(x.rank()));
      case 6: {
        Tensor m = x.rank() == 2 ? x : Reshape(x, {-1, s.back()});
        return MatMul(m, c.Input(DType::kF32, {m.shape()[1], 1 + Uniform(40)}, rng_()));
      }
      case 7: {
        std::vector<int> perm;
        for (int d = x.rank() - 1; d >= 0; --d) perm.push_back(d);
        return Transpose(x, perm);
      }
      case 8:
        return Cast(ArgMax(x, Uniform(x.rank())), DType::kF32);
      case 9:
        return LayerNorm(x, c.Input(DType::kF32, {s.back()}, rng_()),
                         c.Input(DType::kF32, {s.back()}, rng_()));
      default:
        return Concat({x, Relu(x)}, Uniform(x.rank()));
    }
  }

  std::mt19937_64 rng_;
  std::vector<Tensor> pool_;
};

TEST(GpuPtxRandom, FusedPlanSchedulesRandomClusters) {
  const bool ptxas = HavePtxas();
  for (uint64_t seed = 0; seed < 24; ++seed) {
    Case c;
    RandomCluster(seed).Build(c, 3 + static_cast<int>(seed % 5));
    ASSERT_TRUE(c.graph->status().ok()) << "seed " << seed << ": " << c.graph->status();
    auto code = GenerateCudaCode(SpecOf(c, "random"), Scheduler::kGpuFused);
    ASSERT_TRUE(code.ok()) << "seed " << seed << ": " << code.status();
    EXPECT_EQ(code->scheduler_used, Scheduler::kGpuFused)
        << "seed " << seed << ": " << absl::StrJoin(code->scheduler_failures, "; ");
    EXPECT_EQ(code->host_loops, 0) << "seed " << seed << ":\n" << code->schedule;
    EXPECT_FALSE(code->kernels.empty()) << "seed " << seed;
    if (!ptxas) continue;
    auto report = AssemblePtx(code->ptx, "sm_90");
    ASSERT_TRUE(report.ok()) << "seed " << seed << ": " << report.status();
    EXPECT_EQ(CheckRegistersPerBlock(*code, *report), "") << report->log;
    EXPECT_EQ(report->kernels.size(), code->kernels.size()) << "seed " << seed;
  }
}

TEST(GpuPtxCodegen, BadClusterIsAStatus) {
  ClusterSpec spec;
  spec.name = "no_graph";
  auto code = GenerateCudaCode(spec, Scheduler::kGpuFused);
  ASSERT_FALSE(code.ok());
  EXPECT_EQ(code.status().code(), absl::StatusCode::kInvalidArgument) << code.status();
  EXPECT_NE(code.status().message().find("no_graph"), std::string::npos) << code.status();
}

// The error path of AssemblePtx: ptxas' complaint comes back in the Status.
TEST(GpuPtxAssemble, ReportsPtxasErrors) {
  if (!HavePtxas()) {
    GTEST_SKIP() << "ptxas not found at " << PtxasPath();
  }
  auto report = AssemblePtx("this is not PTX", "sm_90");
  ASSERT_FALSE(report.ok());
  EXPECT_EQ(report.status().code(), absl::StatusCode::kInternal);
  EXPECT_NE(report.status().message().find("ptxas"), std::string::npos) << report.status();
}

// PTX instruction lines: a lower-case opcode after the indent, ending in ';' (labels,
// directives and comments start otherwise).
int PtxInstructions(const std::string& ptx) {
  int n = 0;
  for (absl::string_view line : absl::StrSplit(ptx, '\n')) {
    const size_t start = line.find_first_not_of(" \t");
    n += start != absl::string_view::npos && line[start] >= 'a' && line[start] <= 'z' &&
         line.back() == ';';
  }
  return n;
}

int Occurrences(const std::string& text, const std::string& needle) {
  int n = 0;
  for (size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) {
    ++n;
  }
  return n;
}

// Chain8 (4 Tanh, 4 Sigmoid) is compute-bound on GPUs, so its PTX instructions per
// element are CI's proxy for its speed (issue 39): each f32 Tanh and Sigmoid takes one
// ex2.approx and one div.approx (the arithmetic's two MUFU operations, as in Triton's
// code) and NaN and the infinities come from IEEE arithmetic under strict_float, not bit
// tests (lower_elementwise.cc); Tanh's two are the flush-to-zero forms, which ptxas
// needs no subnormal fix-ups around. The kernel takes 4 elements per thread (one 16-byte
// load). History, per element: 371 with IEEE divisions; 227 with PTX's approximate exp2
// and division (2026-11-26; 0.544 ms on an H100); 175 with the special values from IEEE
// arithmetic; 161 with 4 elements per thread (2026-11-28).
TEST(GpuPtxCodegen, Chain8InstructionsPerElement) {
  Case c;
  Tensor y = c.Input(DType::kF32, {64, 256}, 1, -4, 4);  // whole tiles: one loop body
  for (int i = 0; i < 8; ++i) y = (i % 2 == 0) ? Tanh(y * 0.9 + 0.1) : Sigmoid(y) - y * 0.5;
  c.outputs = {y};
  auto code = GenerateCudaCode(SpecOf(c, "chain8"), Scheduler::kGpuFused);
  ASSERT_TRUE(code.ok()) << code.status();
  ASSERT_EQ(code->kernels.size(), 1u);
  EXPECT_EQ(code->ptx.find("div.rn.f32"), std::string::npos);
  EXPECT_EQ(Occurrences(code->ptx, "ld.global.nc.v4.f32"), 1) << "not one 16-byte load";
  const int elements = 4;  // per thread
  // Tanh's flush subnormals (where that changes no result); Sigmoid's keep them.
  EXPECT_EQ(Occurrences(code->ptx, "ex2.approx.ftz.f32"), 4 * elements);
  EXPECT_EQ(Occurrences(code->ptx, "div.approx.ftz.f32"), 4 * elements);
  EXPECT_EQ(Occurrences(code->ptx, "ex2.approx.f32"), 4 * elements);
  EXPECT_EQ(Occurrences(code->ptx, "div.approx.f32"), 4 * elements);
  EXPECT_EQ(Occurrences(code->ptx, ".ftz"), 8 * elements);
  // Bit tests of special values would be and/or/setp on integers: the sign's and/or
  // pair in each Tanh, the |x| masks, and the vector's index arithmetic are all there is.
  EXPECT_LE(Occurrences(code->ptx, "setp."), 8 * elements + 2);
  const double per_element = PtxInstructions(code->ptx) / static_cast<double>(elements);
  std::cout << "Chain8 PTX instructions per element: " << per_element << "\n";
  EXPECT_LT(per_element, 170);
}

// Softmax and LayerNorm read each input element from global memory once: the row is
// staged in shared memory at the row's block, and the reductions (max and sum of exps;
// mean and variance) and the output read it there. Global load instructions in the
// kernel, with 256 threads per row of 1024 (4 elements each, unrolled by LLVM) before
// staging -> staged -> staged with 64 threads per row (16 elements each) -> staged 4
// adjacent elements per thread at a time (RowVector; rows of 1024 only) -> a warp per
// row (32 elements each; ChooseWarpRows):
//   softmax   16384x1024: 12 -> 4 -> 16 -> 8 -> 16 (max, sum and output each loaded x;
//                                              then x once per element, the 16
//                                              unrolled; then x as 8-byte pairs,
//                                              ld.global.nc.u64; then 16 pairs)
//   layernorm 16384x1024: 12 -> 12 -> 48 -> 40 -> 24 (x, gamma and beta once per
//                                              element each; then x's 8 pairs, gamma
//                                              and beta 16 each; then x's 16 pairs,
//                                              gamma and beta in 16-byte vectors)
//   softmax   16384x1000:  3 -> 1 -> 5   (a loop, unrolled by 4 with a remainder)
//   layernorm 16384x1000:  5 -> 3 -> 15  (x, gamma, beta: 5 each)
TEST(GpuPtxCodegen, RowReductionsReadEachInputElementOnce) {
  struct Row {
    std::string name;
    int64_t len;
    bool layer_norm;
    int global_loads;
  };
  const std::vector<Row> rows = {{"softmax_1024", 1024, false, 16},
                                 {"layernorm_1024", 1024, true, 24},
                                 {"softmax_1000", 1000, false, 5},
                                 {"layernorm_1000", 1000, true, 15}};
  for (const Row& row : rows) {
    Case c;
    Tensor x = c.Input(DType::kF32, {16384, row.len}, 1, -2, 2);
    c.outputs = {row.layer_norm ? LayerNorm(x, c.Input(DType::kF32, {row.len}, 2, 0.5, 1.5),
                                            c.Input(DType::kF32, {row.len}, 3))
                                : Softmax(x)};
    auto code = GenerateCudaCode(SpecOf(c, row.name), Scheduler::kGpuFused);
    ASSERT_TRUE(code.ok()) << code.status();
    SCOPED_TRACE(row.name + ":\n" + code->schedule);
    EXPECT_EQ(code->kernels.size(), 1u);
    EXPECT_NE(code->schedule.find("staged in shared memory"), std::string::npos);
    EXPECT_NE(code->schedule.find("32 threads over dim 0"), std::string::npos);
    EXPECT_EQ(Occurrences(code->ptx, "\tld.global."), row.global_loads);
    std::cout << row.name << " PTX: " << PtxInstructions(code->ptx) << " instructions\n";
    if (!HavePtxas()) continue;
    auto report = AssemblePtx(code->ptx, "sm_90");
    ASSERT_TRUE(report.ok()) << report.status();
    EXPECT_EQ(CheckRegistersPerBlock(*code, *report), "") << report->log;
    for (const PtxasKernel& k : report->kernels) {
      std::cout << row.name << " ptxas: " << k.registers << " registers\n";
      EXPECT_EQ(k.spill_store_bytes + k.spill_load_bytes, 0) << k.name;
    }
  }
}

// Rows up to kWarpRow long take a warp each on CUDA, and a combine of 32-bit values runs
// in registers across the lanes by warp shuffles (softmax's Max: three i32/u32
// accumulators; its f64 sum of exps and layer norm's f64 moments cannot be shuffled by
// Halide 14 and combine in shared memory, within the one warp). Against the 64-thread
// blocks before (kWarpRow 0), 16384 rows:
//   softmax   x1024: 587 -> 448 PTX instructions, 21 -> 17 bar.sync, 0 -> 36 shfl.sync,
//                    135 -> 48 ld.shared, 109 -> 55 st.shared (static counts)
//   softmax   x1000: 531 -> 467, 21 -> 17 bar.sync
//   layernorm x1024: 528 -> 409, 17 bar.sync as before (f64: no shuffles)
// With the online softmax (SoftmaxIsOnePassWithOneExpPerElementPerPass) the shuffled
// combine is the lanes' maxima, and the softmax kernels have 18 bar.sync (the lanes'
// states are copied from registers into shared memory once: one more stage).
// No shuffle may sit in a branch only some lanes take: a full-mask shfl.sync run by one
// lane is undefined (Cooperative keeps the one-value level in shared memory for this).
TEST(GpuPtxCodegen, RowReductionsCombineByWarpShuffles) {
  struct Row {
    std::string name;
    int64_t len;
    bool layer_norm;
    int max_instructions;
    int max_barriers;
  };
  const std::vector<Row> rows = {{"softmax_1024", 1024, false, 500, 18},
                                 {"softmax_1000", 1000, false, 500, 18},
                                 {"layernorm_1024", 1024, true, 450, 17}};
  for (const Row& row : rows) {
    Case c;
    Tensor x = c.Input(DType::kF32, {16384, row.len}, 1, -2, 2);
    c.outputs = {row.layer_norm ? LayerNorm(x, c.Input(DType::kF32, {row.len}, 2, 0.5, 1.5),
                                            c.Input(DType::kF32, {row.len}, 3))
                                : Softmax(x)};
    auto code = GenerateCudaCode(SpecOf(c, row.name), Scheduler::kGpuFused);
    ASSERT_TRUE(code.ok()) << code.status();
    SCOPED_TRACE(row.name + ":\n" + code->schedule);
    EXPECT_EQ(code->kernels.size(), 1u);
    EXPECT_NE(code->schedule.find("32 threads over dim 0"), std::string::npos);
    const int shuffles = Occurrences(code->ptx, "shfl.sync");
    if (row.layer_norm) {
      EXPECT_EQ(shuffles, 0);
    } else {
      EXPECT_NE(code->schedule.find("combined by warp shuffles"), std::string::npos);
      EXPECT_GT(shuffles, 0);
    }
    EXPECT_EQ(ShuffleInConditional(code->ptx), "");
    const int barriers = Occurrences(code->ptx, "bar.sync");
    std::cout << row.name << " PTX: " << PtxInstructions(code->ptx) << " instructions, " << barriers
              << " bar.sync, " << shuffles << " shfl.sync\n";
    EXPECT_LE(PtxInstructions(code->ptx), row.max_instructions);
    EXPECT_LE(barriers, row.max_barriers);
    if (!HavePtxas()) continue;
    auto report = AssemblePtx(code->ptx, "sm_90");
    ASSERT_TRUE(report.ok()) << report.status();
    EXPECT_EQ(CheckRegistersPerBlock(*code, *report), "") << report->log;
    for (const PtxasKernel& k : report->kernels) {
      EXPECT_EQ(k.spill_store_bytes + k.spill_load_bytes, 0) << k.name;
      EXPECT_EQ(k.stack_bytes, 0) << k.name;
    }
  }
}

// The inner loops of a PTX kernel as LLVM prints them: a label whose next line says
// "=>This Inner Loop Header", up to the branch back to it; `name` is the label's comment
// (Halide's loop name).
struct PtxLoop {
  std::string name;
  std::vector<std::string> body;  // instruction lines
};

std::vector<PtxLoop> InnerLoops(const std::string& ptx) {
  const std::vector<std::string> lines = absl::StrSplit(ptx, '\n');
  std::vector<PtxLoop> loops;
  for (size_t i = 1; i < lines.size(); ++i) {
    if (lines[i].find("Inner Loop Header") == std::string::npos) continue;
    const std::string& head = lines[i - 1];
    const std::string label = head.substr(0, head.find(':'));
    PtxLoop loop;
    loop.name = head.substr(head.find("//") == std::string::npos ? 0 : head.find("//"));
    for (++i; i < lines.size(); ++i) {
      loop.body.push_back(lines[i]);
      if (absl::StrContains(lines[i], "bra") && absl::EndsWith(lines[i], "\t" + label + ";")) break;
    }
    loops.push_back(std::move(loop));
  }
  return loops;
}

int Count(const std::vector<std::string>& lines, const std::string& needle) {
  int n = 0;
  for (const std::string& line : lines) n += absl::StrContains(line, needle) ? 1 : 0;
  return n;
}

// A softmax on CUDA computes its row's max and sum of exps in one pass over the row
// (lower/online_softmax.h: each lane's running max, its sum rescaled as the max grows),
// then the output in a second: two loops read the row (the loops that only stage it in
// shared memory aside), each with one exp per element it reads: PTX's ex2.approx in the
// pass, Halide's exp in a Softmax's output (its floor, cvt.rmi; a LogSoftmax's has none). Two
// reductions before: three loops (the max's with no exp, then the sum's and the output's), and the
// max decoded from its bits again at every element of the sum. Per element and lane, 16384x1024
// (instructions in a loop's body over the elements it reads): 5.25 (max) + 57 (sum) +
// 41 (output) = 103 -> 25.5 (pass) + 41 (output) = 66.5. Static PTX instructions:
//   softmax    x1024: 464 -> 461    x1000: 494 -> 468
//   logsoftmax x1024: 488 -> 484    cross entropy x1024: 977 -> 879
TEST(GpuPtxCodegen, SoftmaxIsOnePassWithOneExpPerElementPerPass) {
  struct Row {
    std::string name;
    int64_t len;
    bool log;
  };
  for (const Row& row : std::vector<Row>{{"softmax_1024", 1024, false},
                                         {"logsoftmax_1024", 1024, true},
                                         {"softmax_1000", 1000, false}}) {
    Case c;
    Tensor x = c.Input(DType::kF32, {16384, row.len}, 1, -2, 2);
    c.outputs = {row.log ? LogSoftmax(x) : Softmax(x)};
    auto code = GenerateCudaCode(SpecOf(c, row.name), Scheduler::kGpuFused);
    ASSERT_TRUE(code.ok()) << code.status();
    SCOPED_TRACE(row.name + ":\n" + code->schedule);
    ASSERT_EQ(code->kernels.size(), 1u);
    EXPECT_NE(code->schedule.find("lanes, 32 threads at its combines' block"), std::string::npos);
    EXPECT_NE(code->schedule.find("staged in shared memory"), std::string::npos);
    int passes = 0;
    for (const PtxLoop& loop : InnerLoops(code->ptx)) {
      const int reads = Count(loop.body, "ld.shared.f32") + Count(loop.body, "ld.global.nc.f32");
      if (reads == 0 || Count(loop.body, "st.shared") > 0) continue;  // staging
      ++passes;
      const int exps = Count(loop.body, "ex2.approx") + Count(loop.body, "cvt.rmi");
      // LogSoftmax's output, x - max - log(sum), takes no exp.
      const bool output = !absl::StrContains(loop.name, "_online");
      EXPECT_EQ(exps, output && row.log ? 0 : reads) << loop.name;
      std::cout << row.name << " " << loop.name << ": " << reads << " elements, " << exps
                << " exps, " << loop.body.size() << " lines\n";
    }
    EXPECT_EQ(passes, 2);
    std::cout << row.name << " PTX: " << PtxInstructions(code->ptx) << " instructions\n";
    if (!HavePtxas()) continue;
    auto report = AssemblePtx(code->ptx, "sm_90");
    ASSERT_TRUE(report.ok()) << report.status();
    EXPECT_EQ(CheckRegistersPerBlock(*code, *report), "") << report->log;
    for (const PtxasKernel& k : report->kernels) {
      std::cout << row.name << " ptxas: " << k.registers << " registers\n";
      EXPECT_EQ(k.spill_store_bytes + k.spill_load_bytes, 0) << k.name;
      EXPECT_EQ(k.stack_bytes, 0) << k.name;
    }
  }
}

// A symbolic innermost dim is not split into vectors: its run-time extent need not
// divide by 4 (RoundUp would write past the row). The same cluster with static shapes
// is, and both assemble.
TEST(GpuPtxCodegen, SymbolicInnermostDimsAreNotVectorized) {
  for (bool symbolic : {false, true}) {
    Case c;
    Tensor x = c.Input(DType::kF32, {8, 64}, 1, -2, 2);
    c.outputs = {Sigmoid(x) * 3.0 + x};
    ClusterSpec spec = SpecOf(c, symbolic ? "symbolic_rows" : "static_rows");
    if (symbolic) spec.input_symbols = {{-1, 0}};  // row-major: the last dim is class 0
    auto code = GenerateCudaCode(spec, Scheduler::kGpuFused);
    ASSERT_TRUE(code.ok()) << code.status();
    SCOPED_TRACE(code->schedule);
    EXPECT_EQ(code->schedule.find("vectors of 4") == std::string::npos, symbolic);
    if (!HavePtxas()) continue;
    auto report = AssemblePtx(code->ptx, "sm_90");
    EXPECT_TRUE(report.ok()) << report.status();
  }
}

// A Tanh of a scalar constant, read by a kernel: Halide computes the scalar on the host,
// where its PTX exp2 and division get host forms (braze-fuzz seed 6000280 on an H100
// failed every schedule with "Cannot select: intrinsic %llvm.nvvm.div.approx.f").
TEST(GpuPtxCodegen, KernelMathComputedOnTheHostGetsHostForms) {
  Case c;
  Tensor x = c.Input(DType::kF32, {17, 9}, 1, -2, 2);
  Tensor k = Const(*c.graph, HostTensor::RandomUniform(DType::kF32, {}, 2, -2, 2));
  c.outputs = {Pow(Abs(x) + 0.5, Tanh(k)) + Sigmoid(k)};
  auto code = GenerateCudaCode(SpecOf(c, "host_scalar"), Scheduler::kGpuFused);
  ASSERT_TRUE(code.ok()) << code.status();
  EXPECT_TRUE(code->scheduler_failures.empty()) << absl::StrJoin(code->scheduler_failures, "; ");
}

// libdevice calls of a constant computed on the host get libm's functions: f64 Erf and
// Pow are __nv_erf and __nv_pow on CUDA, which only the PTX links (braze-fuzz seed
// 13000051 on an H200: "HalideJITMemoryManager: unable to find address for __nv_erf").
// GenerateCudaCode rejects a schedule that leaves one on the host, so without the host
// forms every schedule fails here.
TEST(GpuPtxCodegen, LibdeviceCallsComputedOnTheHostGetLibmForms) {
  Case c;
  Tensor x = c.Input(DType::kF64, {5, 2}, 1, -2, 2);
  Tensor k = Const(*c.graph, HostTensor::RandomUniform(DType::kF64, {}, 2, 0.5, 2));
  c.outputs = {x * Erf(k) + Pow(k, k)};
  auto code = GenerateCudaCode(SpecOf(c, "host_libdevice"), Scheduler::kGpuFused);
  ASSERT_TRUE(code.ok()) << code.status();
  EXPECT_TRUE(code->scheduler_failures.empty()) << absl::StrJoin(code->scheduler_failures, "; ");
}

// The workloads of the other issues as clusters for CUDA (issue 39; bench/cuda_bench.cc
// runs them at full size on a GPU, test/runtime/gpu_workloads_test.cc on OpenCL): the
// ResNet basic block (convolutions, BN with the batch's statistics, the residual) with
// its filters' gradients, and a transformer block forward (LayerNorm, Dense, the fused
// causal attention, GELU), each one cluster. Every Func must be on the GPU (the fused
// plan, no fallback), and every kernel must assemble for sm_90 without spills.
TEST(GpuPtxCodegen, WorkloadClustersAssembleWithoutSpills) {
  struct Workload {
    std::string name;
    std::function<void(Case&)> build;
  };
  const std::vector<Workload> workloads = {
      {"resnet_block_grads",
       [](Case& c) {
         const int64_t ch = 16;
         Tensor x = c.Input(DType::kF32, {2, 14, 13, ch}, 1);
         Tensor h = x;
         std::vector<Tensor> filters;
         for (int i = 0; i < 2; ++i) {
           filters.push_back(c.Input(DType::kF32, {3, 3, ch, ch}, 2 + i, -0.2, 0.2));
           Tensor gamma = c.Input(DType::kF32, {ch}, 4 + i, 0.5, 1.5);
           Tensor beta = c.Input(DType::kF32, {ch}, 6 + i);
           Tensor y = Conv2D(h, filters.back(), {1, 1}, Padding::kSame);
           Tensor mean = Mean(y, {0, 1, 2});
           Tensor centered = y - mean;
           Tensor var = Mean(Square(centered), {0, 1, 2});
           y = centered * Rsqrt(var + 1e-3) * gamma + beta;
           h = i == 0 ? Relu(y) : y;
         }
         Tensor loss = Mean(Square(Relu(h + x)));
         auto grads = Gradients({loss}, filters);
         ASSERT_TRUE(grads.ok()) << grads.status();
         c.outputs = {loss, (*grads)[0], (*grads)[1]};
       }},
      {"transformer_block_forward", [](Case& c) {
         const int64_t b = 2, t = 13, d = 24, heads = 2;
         Tensor x = c.Input(DType::kF32, {b * t, d}, 1);
         Tensor h =
             LayerNorm(x, c.Input(DType::kF32, {d}, 2, 0.5, 1.5), c.Input(DType::kF32, {d}, 3));
         Tensor qkv = Dense(h, c.Input(DType::kF32, {d, 3 * d}, 4, -0.2, 0.2),
                            c.Input(DType::kF32, {3 * d}, 5));
         auto head_view = [&](int i) {
           return Transpose(Reshape(Slice(qkv, {0, i * d}, {b * t, d}), {b, t, heads, d / heads}),
                            {0, 2, 1, 3});
         };
         AttentionOptions o;
         o.causal = true;
         Tensor att = ScaledDotProductAttention(head_view(0), head_view(1), head_view(2), o);
         Tensor r = x + Reshape(Transpose(att, {0, 2, 1, 3}), {b * t, d});
         Tensor m = Dense(r, c.Input(DType::kF32, {d, 4 * d}, 6, -0.2, 0.2),
                          c.Input(DType::kF32, {4 * d}, 7), Activation::kGelu);
         c.outputs = {r + Dense(m, c.Input(DType::kF32, {4 * d, d}, 8, -0.1, 0.1),
                                c.Input(DType::kF32, {d}, 9))};
       }}};
  for (const Workload& w : workloads) {
    SCOPED_TRACE(w.name);
    Case c;
    w.build(c);
    ASSERT_TRUE(c.graph->status().ok()) << c.graph->status();
    auto code = GenerateCudaCode(SpecOf(c, w.name), Scheduler::kGpuFused);
    ASSERT_TRUE(code.ok()) << code.status();
    EXPECT_TRUE(code->scheduler_failures.empty()) << absl::StrJoin(code->scheduler_failures, "; ");
    ASSERT_FALSE(code->kernels.empty());
    std::cout << w.name << ": " << code->kernels.size() << " kernels\n";
    if (!HavePtxas()) continue;
    auto report = AssemblePtx(code->ptx, "sm_90");
    ASSERT_TRUE(report.ok()) << report.status();
    EXPECT_EQ(CheckRegistersPerBlock(*code, *report), "") << report->log;
    for (const PtxasKernel& k : report->kernels) {
      EXPECT_EQ(k.spill_store_bytes + k.spill_load_bytes, 0) << k.name;
      EXPECT_EQ(k.stack_bytes, 0) << k.name;
    }
  }
}

// The global memory instructions of a PTX module ("ld.global.nc.v4.u16", ...): the
// opcode of each instruction line starting with `prefix`.
std::vector<std::string> GlobalAccesses(const std::string& ptx, const std::string& prefix) {
  std::vector<std::string> out;
  for (absl::string_view line : absl::StrSplit(ptx, '\n')) {
    line = absl::StripLeadingAsciiWhitespace(line);
    if (!absl::StartsWith(line, prefix)) continue;
    out.emplace_back(line.substr(0, line.find_first_of(" \t")));
  }
  return out;
}

// Whether a global access instruction moves 16-bit elements: .u16/.b16/.s16 or a
// vector of them (".v4.u16").
bool Is16BitAccess(const std::string& op) {
  return absl::EndsWith(op, ".u16") || absl::EndsWith(op, ".b16") || absl::EndsWith(op, ".s16");
}

// The GPU schedules of 16-bit clusters read and write their bf16 and f16 buffers as
// 16-bit values (issue 38: no widened copies of them in global memory): an elementwise
// chain with a broadcast bias into a row softmax (computed in f32, the rule), and a
// matmul with its bias and ReLU as Halide kernels (what runs where cuBLASLt refuses, or
// with cuda_matmul=halide). Every global load and store of these clusters, whose inputs
// and outputs are all 16-bit, is a 16-bit one, and every kernel assembles for sm_90
// without spills or stack. The matmul's own kernel stored its f32 accumulator (and the
// bias kernel read it back as f32) until the lowering rounded it there
// (lower/lowering.cc, LowerNode).
TEST(GpuPtxCodegen, SixteenBitBuffersAreLoadedAndStoredAs16Bits) {
  struct Cluster {
    std::string name;
    std::function<Tensor(Case&, DType)> build;
  };
  const std::vector<Cluster> clusters = {
      {"elementwise_softmax",
       [](Case& c, DType t) {
         Tensor x = c.Input(t, {67, 1000}, 1);
         return Softmax(Relu(x * 0.5 + c.Input(t, {1000}, 2)) - Sigmoid(x));
       }},
      {"dense_relu", [](Case& c, DType t) {
         return Relu(MatMul(c.Input(t, {37, 129}, 4), c.Input(t, {129, 67}, 5)) +
                     c.Input(t, {67}, 6));
       }}};
  for (DType dtype : {DType::kBF16, DType::kF16}) {
    for (const Cluster& cl : clusters) {
      SCOPED_TRACE(absl::StrCat(DTypeName(dtype), " ", cl.name));
      Case c;
      c.outputs = {cl.build(c, dtype)};
      if (c.outputs[0].dtype() != dtype) c.outputs[0] = Cast(c.outputs[0], dtype);
      ASSERT_TRUE(c.graph->status().ok()) << c.graph->status();
      auto code = GenerateCudaCode(SpecOf(c, cl.name), Scheduler::kGpuFused);
      ASSERT_TRUE(code.ok()) << code.status();
      EXPECT_TRUE(code->scheduler_failures.empty())
          << absl::StrJoin(code->scheduler_failures, "; ");
      EXPECT_EQ(code->host_loops, 0) << code->schedule;
      const std::vector<std::string> loads = GlobalAccesses(code->ptx, "ld.global");
      const std::vector<std::string> stores = GlobalAccesses(code->ptx, "st.global");
      ASSERT_FALSE(loads.empty());
      ASSERT_FALSE(stores.empty());
      for (const std::string& op : loads) EXPECT_TRUE(Is16BitAccess(op)) << op;
      for (const std::string& op : stores) EXPECT_TRUE(Is16BitAccess(op)) << op;
      std::cout << DTypeName(dtype) << " " << cl.name << ": " << code->kernels.size()
                << " kernels, " << loads.size() << " global loads (" << loads[0] << ", ...), "
                << stores.size() << " stores (" << stores[0] << ", ...)\n";
      if (!HavePtxas()) continue;
      auto report = AssemblePtx(code->ptx, "sm_90");
      ASSERT_TRUE(report.ok()) << report.status();
      EXPECT_EQ(CheckRegistersPerBlock(*code, *report), "") << report->log;
      for (const PtxasKernel& k : report->kernels) {
        EXPECT_EQ(k.spill_store_bytes + k.spill_load_bytes, 0) << k.name;
        EXPECT_EQ(k.stack_bytes, 0) << k.name;
      }
    }
  }
}

// The empty-batch programs of NanInPipeline (e2e_tests) as one CUDA cluster each: the
// Mean of no rows is a NaN literal, Max and Min of none -inf and +inf, and the kernels
// that read them (the bf16 and f16 casts' NaN selects, the means of their squares) now
// read them from kernel arguments: no PTX float immediate is an infinity or a NaN (the
// kernels of these programs call no exp, log or libdevice function, whose own constants
// stay). docs/CUDA.md, "Non-finite constants in device code"; the values are checked by
// NanInPipeline.EmptyBatchProgramsOnOpenCL here and ...OnCuda on a GPU.
TEST(GpuPtxCodegen, EmptyBatchConstantsAreKernelArguments) {
  auto random = [](DType dtype, const Shape& shape, uint64_t seed) {
    return HostTensor::RandomUniform(dtype, shape, seed, -2, 2);
  };
  for (const bool max_min : {false, true}) {
    SCOPED_TRACE(max_min ? "Max and Min of an empty batch" : "Mean of an empty batch");
    Case c;
    Tensor x = c.Input(random(DType::kF32, {0, 16}, 1));
    Tensor w = Const(*c.graph, random(DType::kF16, {16, 6}, 59949));
    if (max_min) {
      Tensor mx = Max(x, {0}, true), mn = Min(x, {0}, true), s = Sum(x, {0}, true);
      c.outputs = {MatMul(Cast(Mean(Mul(mx, mx), {-2}, true), DType::kF16), w),
                   MatMul(Cast(Mean(Mul(mn, s), {-2}, true), DType::kF16), w)};
    } else {
      Tensor m = Mean(x, {0}, true);
      Tensor h = Cast(Cast(Mean(Mul(m, m), {-2}, true), DType::kBF16), DType::kF16);
      c.outputs = {MatMul(h, w)};
    }
    ASSERT_TRUE(c.graph->status().ok()) << c.graph->status();
    auto code = GenerateCudaCode(SpecOf(c, "empty_batch"), Scheduler::kGpuFused);
    ASSERT_TRUE(code.ok()) << code.status();
    EXPECT_TRUE(code->scheduler_failures.empty()) << absl::StrJoin(code->scheduler_failures, "; ");
    EXPECT_EQ(code->host_loops, 0) << code->schedule;
    EXPECT_EQ(NonFiniteImmediate(code->ptx), "") << code->ptx;
    EXPECT_NE(code->ptx.find("st.global"), std::string::npos) << code->ptx;
    if (!HavePtxas()) continue;
    auto report = AssemblePtx(code->ptx, "sm_90");
    ASSERT_TRUE(report.ok()) << report.status();
    EXPECT_EQ(CheckRegistersPerBlock(*code, *report), "") << report->log;
  }
}

}  // namespace
}  // namespace lowertest
}  // namespace braze
