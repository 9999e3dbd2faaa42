// The repairs of compile/codegen_workarounds.h, each against the Halide 14 bug it works
// around, reproduced in a plain Halide pipeline.
#include "compile/codegen_workarounds.h"

#include <gtest/gtest.h>

namespace braze {
namespace {

// out(x, y) = c(base + 3x) * y, vectorized by 16, with c an internal buffer: the strided
// load of c has a constant base. Without the repair, bases 8 and 10 compiled to an
// aligned vmovaps of c's element 6 (9) and the realize died of a general-protection
// fault (SIGSEGV): this test crashes then.
TEST(CodegenWorkarounds, StridedLoadsAtAConstantAddressRunAndAreRight) {
  for (int base : {8, 10, 4, 5, 13}) {
    Halide::Var x("x"), y("y");
    Halide::Func c("c"), out("out");
    c(x) = Halide::cast<float>(x) * 0.5f;
    out(x, y) = c(base + 3 * x) * Halide::cast<float>(y);
    c.compute_root().bound(x, 0, 64);
    out.bound(x, 0, 16).vectorize(x, 16).parallel(y);
    Halide::Pipeline p(out);
    InstallCodegenWorkarounds(p);
    Halide::Buffer<float> o = p.realize({16, 7});
    for (int yy = 0; yy < 7; ++yy) {
      for (int xx = 0; xx < 16; ++xx) {
        ASSERT_EQ(o(xx, yy), (base + 3 * xx) * 0.5f * yy) << "base " << base;
      }
    }
  }
}

TEST(CodegenWorkarounds, OnlyConstantBaseStridedLoadsLoseTheirAlignment) {
  using namespace Halide::Internal;
  const Halide::Expr v = Variable::make(Halide::Int(32), "v");
  auto load = [](const Halide::Expr& index) {
    return Load::make(Halide::Float(32, 16), "buf", index, Halide::Buffer<>(), Parameter(),
                      const_true(16), ModulusRemainder(0, 8));
  };
  auto alignment_after = [&](const Halide::Expr& index) {
    const Stmt s = Evaluate::make(load(index));
    const Stmt out = UnalignConstantStridedLoads(s);
    return out.as<Evaluate>()->value.as<Load>()->alignment;
  };
  const ModulusRemainder strided = alignment_after(Ramp::make(8, 3, 16));
  EXPECT_EQ(strided.modulus, 1);  // unknown
  const ModulusRemainder dense = alignment_after(Ramp::make(8, 1, 16));
  EXPECT_EQ(dense.modulus, 0);  // a dense load keeps "exactly 8": Halide handles it
  EXPECT_EQ(dense.remainder, 8);
  const ModulusRemainder variable = alignment_after(Ramp::make(v, 3, 16));
  EXPECT_EQ(variable.modulus, 0);  // untouched: only constant bases are repaired
}

}  // namespace
}  // namespace braze
