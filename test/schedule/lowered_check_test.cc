// The lowered-code checks catch the Halide 14 miscompile and the never-runnable split
// on small pipelines built here, and pass correct schedules.
#include "schedule/lowered_check.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace braze {
namespace schedule {
namespace {

using ::testing::HasSubstr;

// out(x) = select(f(x) > 1, f(x), f(x) / 2) over `n` elements, f computed at root,
// out vectorized by `w` with `tail`.
std::string Check(int n, int w, Halide::TailStrategy tail, bool with_select) {
  Halide::ImageParam in(Halide::Float(32), 1, "in");
  in.dim(0).set_bounds(0, n);
  Halide::Var x("x");
  Halide::Func f("f"), out("out");
  f(x) = in(x)*2.0f;
  out(x) = with_select ? Halide::select(f(x) > 1.0f, f(x), f(x) * 0.5f) : f(x) * 0.5f;
  f.compute_root();
  out.vectorize(x, w, tail);
  out.output_buffer().dim(0).set_bounds(0, n);
  Halide::Module m =
      Halide::Pipeline(out).compile_to_module({in}, "check", Halide::get_host_target());
  return CheckLoweredModule(m);
}

TEST(LoweredCheck, CatchesTheGuardedVectorLoopThatDropsItsIndex) {
  // Halide 14: extent w + 1, GuardWithIf, a select: both iterations store lanes 0..3.
  EXPECT_THAT(Check(5, 4, Halide::TailStrategy::GuardWithIf, true),
              HasSubstr("does not move with loop out.s0.x.x"));
}

TEST(LoweredCheck, PassesCorrectSchedules) {
  EXPECT_EQ(Check(5, 4, Halide::TailStrategy::ShiftInwards, true), "");
  EXPECT_EQ(Check(5, 4, Halide::TailStrategy::GuardWithIf, false), "");
  EXPECT_EQ(Check(37, 8, Halide::TailStrategy::GuardWithIf, true), "");
  EXPECT_EQ(Check(64, 8, Halide::TailStrategy::RoundUp, true), "");
}

TEST(LoweredCheck, ReductionLoopsMayStoreInPlace) {
  Halide::ImageParam in(Halide::Float(32), 2, "in");
  in.dim(0).set_bounds(0, 16);
  in.dim(1).set_bounds(0, 8);
  in.dim(1).set_stride(16);
  Halide::Var x("x");
  Halide::RDom r(0, 16, "r");
  Halide::Func sum("sum");
  sum(x) = 0.0f;
  sum(x) += in(r, x);
  sum.output_buffer().dim(0).set_bounds(0, 8);
  sum.update(0).vectorize(x, 8);
  Halide::Module m =
      Halide::Pipeline(sum).compile_to_module({in}, "check", Halide::get_host_target());
  EXPECT_EQ(CheckLoweredModule(m), "");
}

TEST(LoweredCheck, CatchesASplitThatCanNeverRun) {
  // A producer split by 64, shifted inwards, over 8 elements: it reads the input at -56.
  Halide::ImageParam in(Halide::Float(32), 1, "in");
  in.dim(0).set_bounds(0, 8);
  Halide::Var x("x"), xi("xi");
  Halide::Func g("g"), out("out");
  g(x) = in(x) + 1.0f;
  out(x) = g(x) * 2.0f;
  out.output_buffer().dim(0).set_bounds(0, 8);
  out.split(x, x, xi, 64, Halide::TailStrategy::GuardWithIf);
  g.compute_at(out, x).split(x, x, xi, 64, Halide::TailStrategy::ShiftInwards);
  Halide::Module m =
      Halide::Pipeline(out).compile_to_module({in}, "check", Halide::get_host_target());
  EXPECT_THAT(CheckLoweredModule(m), HasSubstr("can never run"));
}

TEST(LoweredCheck, PassesParallelChunksThatStayInTheOutput) {
  // Chunks of 5008 over 40000 elements with a select in the body, the last chunk
  // shifted inwards: the bounds check finds every store inside the output.
  Halide::ImageParam in(Halide::Float(32), 1, "in");
  in.dim(0).set_bounds(0, 40000);
  Halide::Var x("x"), xo("xo"), xi("xi");
  Halide::Func out("out");
  out(x) = Halide::select(in(x) > 0.5f, in(x)*2.0f, in(x) + 1.0f);
  out.output_buffer().dim(0).set_bounds(0, 40000);
  out.split(x, xo, xi, 5008, Halide::TailStrategy::ShiftInwards)
      .parallel(xo)
      .vectorize(xi, 16, Halide::TailStrategy::ShiftInwards);
  Halide::Module m =
      Halide::Pipeline(out).compile_to_module({in}, "check", Halide::get_host_target());
  EXPECT_EQ(CheckLoweredModule(m, {{"out", 40000}}), "");
}

TEST(LoweredCheck, CatchesAStorePastAnOutput) {
  // A hand-built statement: for (i, 0, 10) buf[i] = 0, with buf an output of 8.
  using namespace Halide::Internal;
  Stmt store = Store::make("buf", Halide::Expr(0.0f), Variable::make(Halide::Int(32), "f.s0.i"),
                           Parameter(), const_true(), ModulusRemainder());
  Stmt loop = For::make("f.s0.i", 0, 10, ForType::Serial, Halide::DeviceAPI::None, store);
  Halide::Module m("check", Halide::get_host_target());
  m.append(
      LoweredFunc("check", std::vector<LoweredArgument>{}, loop, Halide::LinkageType::External));
  EXPECT_THAT(CheckLoweredModule(m, {{"buf", 8}}), HasSubstr("reaches index 9 of 8"));
  EXPECT_EQ(CheckLoweredModule(m, {{"buf", 10}}), "");
}

// out(x) = 7 / f(x) in i32 over 2 elements, vectorized by 16 with GuardWithIf: the
// divisor is a masked load.
TEST(LoweredCheck, CatchesIntegerDivisionByAMaskedLoad) {
  Halide::ImageParam in(Halide::Int(32), 1, "in");
  in.dim(0).set_bounds(0, 2);
  Halide::Var x("x");
  Halide::Func f("f"), out("out");
  f(x) = in(x)-2;
  out(x) = 7 / f(x);
  f.compute_root();
  out.vectorize(x, 16, Halide::TailStrategy::GuardWithIf);
  out.output_buffer().dim(0).set_bounds(0, 2);
  Halide::Module m =
      Halide::Pipeline(out).compile_to_module({in}, "check", Halide::get_host_target());
  EXPECT_THAT(CheckLoweredModule(m), HasSubstr("divides by lanes of a masked load"));

  Halide::Func ok("ok");
  ok(x) = 7 / f(x);
  ok.vectorize(x, 2);
  ok.output_buffer().dim(0).set_bounds(0, 2);
  Halide::Module m2 =
      Halide::Pipeline(ok).compile_to_module({in}, "check", Halide::get_host_target());
  EXPECT_EQ(CheckLoweredModule(m2), "");
}

// out(x) = in(x + 60) over 10 elements of an input fixed at 61: the input bounds check
// can only fail at run time, and with the input's fixed shape known, it is constant-false
// at compile time (Adams2019 on a padded softmax, braze-fuzz seed 57088).
Halide::Module ShiftedRead(int input_extent) {
  Halide::ImageParam in(Halide::Float(32), 1, "in");
  in.dim(0).set_bounds(0, input_extent);
  Halide::Var x("x");
  Halide::Func out("out");
  out(x) = in(x + 60);
  out.output_buffer().dim(0).set_bounds(0, 10);
  return Halide::Pipeline(out).compile_to_module({in}, "check", Halide::get_host_target());
}

TEST(LoweredCheck, CatchesAnInputReadThatMustFailWithTheShapesKnown) {
  const Halide::Module m = ShiftedRead(61);
  EXPECT_EQ(CheckLoweredModule(m), "");  // unknown shapes: only the run can tell
  EXPECT_THAT(CheckLoweredModule(m, {}, {{"in.min.0", 0}, {"in.extent.0", 61}}),
              HasSubstr("can never run at these shapes"));
  EXPECT_EQ(CheckLoweredModule(ShiftedRead(70), {}, {{"in.min.0", 0}, {"in.extent.0", 70}}), "");
}

// out(x) = c(x + 60) for 10 elements of an embedded buffer c of `elements`: its shape is
// the module's, so no known value is needed (braze-fuzz seed 700061: a Const's buffer
// required past its end by Adams2019's loops, an error at every run).
Halide::Module ShiftedConstantRead(int elements) {
  Halide::Buffer<float> c(elements, "c_data");
  c.fill(1.0f);
  Halide::Var x("x");
  Halide::Func out("out");
  out(x) = c(x + 60);
  out.output_buffer().dim(0).set_bounds(0, 10);
  return Halide::Pipeline(out).compile_to_module({}, "check", Halide::get_host_target());
}

TEST(LoweredCheck, CatchesAConstantReadPastItsEnd) {
  EXPECT_THAT(CheckLoweredModule(ShiftedConstantRead(61)), HasSubstr("can never run"));
  EXPECT_EQ(CheckLoweredModule(ShiftedConstantRead(70)), "");
}

// acc(x, n) += in(2x + r, n) over 3 taps r, for 6 columns and 16 images, as a conv's
// accumulator: unscheduled, the update's loop over n (outermost, scalar) stores acc and
// loads it back at a stride of 6 elements per image, the loop LLVM 14's loop vectorizer
// miscompiles once it has unrolled the loops inside (braze-fuzz seed 13200191).
// `vector_x`: the update vectorized over x, so no loop is scalar; `per_image`: one
// column per image (acc(n)), so the loop over n moves the store by 1.
std::string StridedUpdate(bool vector_x, bool per_image) {
  Halide::ImageParam in(Halide::Float(32), 2, "in");
  in.dim(0).set_bounds(0, 13);
  in.dim(1).set_bounds(0, 16).set_stride(13);
  Halide::Var x("x"), n("n");
  Halide::RDom r(0, 3, "r");
  Halide::Func acc("acc"), out("out");
  const Halide::Expr column = per_image ? Halide::Expr(0) : x;
  acc(x, n) = 0.0f;
  acc(x, n) += in(2 * column + r, n);
  out(x, n) = acc(x, n);
  acc.compute_root();
  if (vector_x) acc.update(0).vectorize(x, 2);
  out.output_buffer().dim(0).set_bounds(0, per_image ? 1 : 6);
  out.output_buffer().dim(1).set_bounds(0, 16);
  Halide::Module m =
      Halide::Pipeline(out).compile_to_module({in}, "check", Halide::get_host_target());
  return FindStridedReadModifyWriteLoop(m);
}

TEST(LoweredCheck, FindsAScalarReadModifyWriteStridedInItsLoop) {
  EXPECT_THAT(StridedUpdate(false, false),
              HasSubstr("a read-modify-write of acc with stride 6 in loop acc.s1.n"));
  EXPECT_EQ(StridedUpdate(true, false), "");  // vector code: LLVM leaves the loops alone
  EXPECT_EQ(StridedUpdate(false, true), "");  // consecutive: LLVM's groups need a stride
}

}  // namespace
}  // namespace schedule
}  // namespace braze

namespace braze {
namespace schedule {
namespace {

// The PTX LLVM 14 emitted for an f64 order key, bits ^ ((bits >> 63) & 0x7f..f), which
// an H200 ran as "flip the lowest bit": an f64 Min over negatives was the one nearest 0.
TEST(PtxCheck, CatchesABitFieldExtractPastItsOperand) {
  const std::string bad =
      "\tld.global.nc.u64 \t%rd68, [%rd67];\n"
      "\tbfe.u64 \t%rd69, %rd68, 63, 63;\n"
      "\txor.b64  \t%rd70, %rd69, %rd68;\n";
  EXPECT_THAT(CheckPtxBitFieldExtracts(bad),
              ::testing::HasSubstr("bfe.u64 \t%rd69, %rd68, 63, 63;"));
  EXPECT_NE(CheckPtxBitFieldExtracts("bfe.s32 %r1, %r2, 31, 2;"), "");
}

// out(x) = (in(x) >> 63) & 0x7f..f over i64 on a CUDA target (no GPU needed: Halide
// compiles the PTX into the module while lowering): the whole check reaches the PTX
// and rejects what LLVM 14 makes of it; with the mask applied first it passes.
std::string CheckCudaShiftAndMask(bool mask_after_shift) {
  Halide::ImageParam in(Halide::Int(64), 1, "in");
  in.dim(0).set_bounds(0, 256);
  Halide::Var x("x"), xo("xo"), xi("xi");
  Halide::Func out("out");
  const Halide::Expr mask = Halide::Expr(int64_t{0x7fffffffffffffff});
  out(x) = mask_after_shift ? (in(x) >> 63) & mask : (in(x)&mask) ^ (in(x) >> 63);
  out.gpu_tile(x, xo, xi, 64);
  out.output_buffer().dim(0).set_bounds(0, 256);
  const Halide::Target cuda("x86-64-linux-cuda-cuda_capability_86");
  Halide::Module m = Halide::Pipeline(out).compile_to_module({in}, "check", cuda);
  return CheckLoweredModule(m);
}

// A module of one function whose body is `body`.
Halide::Module ModuleOf(const Halide::Internal::Stmt& body) {
  Halide::Module m("check", Halide::get_host_target());
  m.append(Halide::Internal::LoweredFunc("check", std::vector<Halide::Internal::LoweredArgument>{},
                                         body, Halide::LinkageType::External));
  return m;
}

// Braze's pipelines pass: two outputs, one of them a Tuple's; a stage computed at
// root and another inside the output's loop; a parallel, vectorized output.
TEST(UnwrittenBuffer, PassesPipelinesThatWriteEverything) {
  Halide::ImageParam in(Halide::Float(32), 1, "in");
  in.dim(0).set_bounds(0, 37);
  Halide::Var x("x"), xo("xo"), xi("xi");
  Halide::Func f("f"), g("g"), out("out"), pair("pair");
  f(x) = in(x)*2.0f;
  g(x) = f(x) + 1.0f;
  out(x) = g(x) * g(x);
  pair(x) = Halide::Tuple(f(x), in(x));
  f.compute_root();
  out.split(x, xo, xi, 16, Halide::TailStrategy::GuardWithIf).parallel(xo).vectorize(xi);
  g.compute_at(out, xo);
  // Only a Tuple's first buffer takes bounds: the others share them.
  for (Halide::Func* o : {&out, &pair}) o->output_buffers()[0].dim(0).set_bounds(0, 37);
  const Halide::Module m =
      Halide::Pipeline({out, pair}).compile_to_module({in}, "check", Halide::get_host_target());
  EXPECT_EQ(FindUnwrittenBuffer(m, {out.name(), pair.name()}), "");
}

// An output written by an extern stage (a library call, as oneDNN's matmul) is written.
TEST(UnwrittenBuffer, AnExternStageWritesItsOutput) {
  Halide::ImageParam in(Halide::Float(32), 1, "in");
  Halide::Func out("out");
  out.define_extern("braze_test_copy", {in}, Halide::Float(32), 1);
  const Halide::Module m =
      Halide::Pipeline(out).compile_to_module({in}, "check", Halide::get_host_target());
  EXPECT_EQ(FindUnwrittenBuffer(m, {out.name()}), "");
}

// What Halide 14 left of the pipeline of braze-fuzz seed 14530153 under Adams2019: its
// simplifier deleted the body, so nothing wrote the outputs (hand-built statements).
TEST(UnwrittenBuffer, CatchesAnOutputNothingWrites) {
  using namespace Halide::Internal;
  const Halide::Expr i = Variable::make(Halide::Int(32), "out.s0.i");
  const Stmt store_out =
      Store::make("out", Halide::Expr(1.0f), i, Parameter(), const_true(), ModulusRemainder());
  const Stmt loop =
      For::make("out.s0.i", 0, 8, ForType::Serial, Halide::DeviceAPI::None, store_out);
  EXPECT_EQ(FindUnwrittenBuffer(ModuleOf(loop), {"out"}), "");
  EXPECT_THAT(FindUnwrittenBuffer(ModuleOf(loop), {"out", "out2"}),
              HasSubstr("deleted the computation of output out2"));
  EXPECT_THAT(FindUnwrittenBuffer(ModuleOf(Evaluate::make(0)), {"out"}),
              HasSubstr("never writes it"));
}

// An internal buffer read but no longer written (its producer's loop deleted) is caught;
// one that is written, or never read, is not.
TEST(UnwrittenBuffer, CatchesAnAllocationReadButNeverWritten) {
  using namespace Halide::Internal;
  const Halide::Expr i = Variable::make(Halide::Int(32), "out.s0.i");
  const Halide::Expr read = Load::make(Halide::Float(32), "tmp", i, Halide::Buffer<>(), Parameter(),
                                       const_true(), ModulusRemainder());
  const Stmt store_out = Store::make("out", read, i, Parameter(), const_true(), ModulusRemainder());
  const Stmt store_tmp =
      Store::make("tmp", Halide::Expr(2.0f), i, Parameter(), const_true(), ModulusRemainder());
  auto program = [&](bool produce_tmp, bool read_tmp) {
    Stmt body = read_tmp ? store_out
                         : Store::make("out", Halide::Expr(0.0f), i, Parameter(), const_true(),
                                       ModulusRemainder());
    if (produce_tmp) body = Block::make(store_tmp, body);
    body = For::make("out.s0.i", 0, 8, ForType::Serial, Halide::DeviceAPI::None, body);
    return Allocate::make("tmp", Halide::Float(32), Halide::MemoryType::Heap, {8}, const_true(),
                          body);
  };
  EXPECT_EQ(FindUnwrittenBuffer(ModuleOf(program(true, true)), {"out"}), "");
  EXPECT_EQ(FindUnwrittenBuffer(ModuleOf(program(false, false)), {"out"}), "");
  EXPECT_THAT(FindUnwrittenBuffer(ModuleOf(program(false, true)), {"out"}),
              HasSubstr("deleted the computation of tmp"));
}

// A buffer read only in a branch a constant condition never takes is not read: Halide
// 14 keeps `strict_float(select((uint1)0, tmp[i], 0))` after dropping tmp's producer,
// whose required region is empty (braze-fuzz seed 64600008, a false "deleted" that
// failed its cluster under the safe default and Mullapudi2016 in strict mode).
TEST(UnwrittenBuffer, AReadInABranchNeverTakenIsNoRead) {
  using namespace Halide::Internal;
  const Halide::Expr i = Variable::make(Halide::Int(32), "out.s0.i");
  const Halide::Expr read = Load::make(Halide::Float(32), "tmp", i, Halide::Buffer<>(), Parameter(),
                                       const_true(), ModulusRemainder());
  auto program = [&](const Halide::Expr& value) {
    const Stmt store = Store::make(
        "out", Call::make(Halide::Float(32), Call::strict_float, {value}, Call::PureIntrinsic), i,
        Parameter(), const_true(), ModulusRemainder());
    return Allocate::make(
        "tmp", Halide::Float(32), Halide::MemoryType::Heap, {8}, const_true(),
        For::make("out.s0.i", 0, 8, ForType::Serial, Halide::DeviceAPI::None, store));
  };
  const Halide::Expr zero(0.0f);
  for (const Halide::Expr& dead :
       {Select::make(const_false(), read, zero), Select::make(const_true(), zero, read),
        Call::make(Halide::Float(32), Call::if_then_else, {const_false(), read, zero},
                   Call::PureIntrinsic)}) {
    EXPECT_EQ(FindUnwrittenBuffer(ModuleOf(program(dead)), {"out"}), "") << dead;
  }
  const Halide::Expr live = Select::make(i > 3, read, zero);
  EXPECT_THAT(FindUnwrittenBuffer(ModuleOf(program(live)), {"out"}),
              HasSubstr("deleted the computation of tmp"));
  EXPECT_THAT(
      FindUnwrittenBuffer(ModuleOf(program(Select::make(const_true(), read, zero))), {"out"}),
      HasSubstr("deleted the computation of tmp"));
}

TEST(PtxCheck, TheLoweredCheckReadsACudaModulesPtx) {
  EXPECT_THAT(CheckCudaShiftAndMask(true), HasSubstr("bfe.u64"));
  EXPECT_EQ(CheckCudaShiftAndMask(false), "");
}

TEST(PtxCheck, PassesFieldsInsideTheirOperand) {
  EXPECT_EQ(CheckPtxBitFieldExtracts("bfe.u64 %rd1, %rd2, 32, 32;\nbfe.s32 %r1, %r2, 8, 24;\n"
                                     "shr.s64 %rd70, %rd68, 63;\nbfe.u32 %r3, %r4, %r5, 4;\n"),
            "");
}

}  // namespace
}  // namespace schedule
}  // namespace braze
