// The lowered-code checks run as a custom lowering pass inside the compile
// (AddLoweredCheckPass): they reject what the module checks reject, stop a compile for
// a loop LLVM's loop vectorizer would miscompile until its loop optimizations are off
// (saying so in their state, not by throwing inside Halide's lowering),
// and judge a parallel loop's body as code of its own, as in the module Halide outlines
// it into.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "schedule/lowered_check.h"

namespace braze {
namespace schedule {
namespace {

using ::testing::HasSubstr;

// JIT-compiles `out` with the check pass (its output `elements` long, in 1 dim, or
// unbounded when 0). Returns "" when it compiled, else what stopped it; `*state` is the
// pass's.
std::string CompileChecked(Halide::Func out, int64_t elements, LoweredCheckState* state) {
  LoweredCheckInputs inputs;
  if (elements > 0) inputs.output_sizes[out.name()] = elements;
  inputs.outputs = {out.name()};
  auto shared = std::make_shared<LoweredCheckState>(*state);
  Halide::Pipeline p(out);
  const Halide::Target target = Halide::get_jit_target_from_environment();
  AddLoweredCheckPass(p, target, inputs, shared);
  // The pass throws nothing (lowered_check.h): it says in the state what it found.
  p.compile_jit(target);
  std::string stopped = shared->problem;
  if (stopped.empty() && shared->needs_loop_opt_off) {
    stopped = "loop optimizations must be off: " + shared->llvm_loop;
  }
  *state = *shared;
  return stopped;
}

// out(x) = select(f(x) > 1, f(x), f(x) / 2) over 5 elements, vectorized by 4 with
// GuardWithIf: the store Halide 14 makes that drops the loop's index
// (lowered_check_test.cc's Check).
Halide::Func GuardedSelect(bool guarded) {
  Halide::ImageParam in(Halide::Float(32), 1, "pin");
  in.dim(0).set_bounds(0, 5);
  Halide::Var x("x");
  Halide::Func f("pf"), out("pout");
  f(x) = in(x)*2.0f;
  out(x) = Halide::select(f(x) > 1.0f, f(x), f(x) * 0.5f);
  f.compute_root();
  out.vectorize(x, 4, guarded ? Halide::TailStrategy::GuardWithIf : Halide::TailStrategy::Auto);
  out.output_buffer().dim(0).set_bounds(0, 5);
  return out;
}

TEST(LoweredCheckPass, RejectsWhatTheModuleCheckRejects) {
  LoweredCheckState state;
  EXPECT_THAT(CompileChecked(GuardedSelect(true), 5, &state), HasSubstr("does not move with loop"));
  LoweredCheckState fresh;
  EXPECT_EQ(CompileChecked(GuardedSelect(false), 5, &fresh), "");
}

// acc(x, n) += in(2x + r, n) over 3 taps, 6 columns and 16 images (lowered_check_test.cc's
// StridedUpdate): the update's scalar loop over n stores acc and loads it back at a
// stride of 6. `parallel_x`: the loop over x inside it parallel, so the read-modify-write
// is in the outlined body, where the loop over n is none of its loops.
Halide::Func StridedUpdate(bool parallel_x, Halide::ImageParam in = {Halide::Float(32), 2, "pin"}) {
  in.dim(0).set_bounds(0, 13);
  in.dim(1).set_bounds(0, 16).set_stride(13);
  Halide::Var x("x"), n("n");
  Halide::RDom r(0, 3, "r");
  Halide::Func acc("pacc"), out("pout");
  acc(x, n) = 0.0f;
  acc(x, n) += in(2 * x + r, n);
  out(x, n) = acc(x, n);
  acc.compute_root();
  if (parallel_x) acc.update(0).parallel(x);
  out.output_buffer().dim(0).set_bounds(0, 6);
  out.output_buffer().dim(1).set_bounds(0, 16);
  return out;
}

TEST(LoweredCheckPass, StopsAtAStridedReadModifyWriteUntilLoopOptimizationsAreOff) {
  LoweredCheckState state;
  EXPECT_THAT(CompileChecked(StridedUpdate(false), 96, &state),
              HasSubstr("loop optimizations must be off: a read-modify-write of pacc"));
  // (Funcs built again get Halide's unique names: pacc$1, ...)
  EXPECT_THAT(state.llvm_loop, HasSubstr("with stride 6 in loop pacc"));
  // The caller compiles again for a target with DisableLLVMLoopOpt and says so.
  state.loop_opt_off = true;
  state.needs_loop_opt_off = false;
  state.llvm_loop.clear();
  EXPECT_EQ(CompileChecked(StridedUpdate(false), 96, &state), "");
  EXPECT_THAT(state.llvm_loop, HasSubstr("with stride 6 in loop pacc"));
}

TEST(LoweredCheckPass, AParallelLoopsBodyIsNotPartOfTheLoopsAroundIt) {
  LoweredCheckState state;
  EXPECT_EQ(CompileChecked(StridedUpdate(true), 96, &state), "");
  EXPECT_EQ(state.llvm_loop, "");
  // The module's verdict, where the body is a function of its own.
  Halide::ImageParam in(Halide::Float(32), 2, "pin");
  Halide::Module m = Halide::Pipeline(StridedUpdate(true, in))
                         .compile_to_module({in}, "check", Halide::get_host_target());
  EXPECT_EQ(FindStridedReadModifyWriteLoop(m), "");
}

}  // namespace
}  // namespace schedule
}  // namespace braze
