// The repairs of compile/codegen_workarounds.h, each against the Halide 14 bug it works
// around, reproduced in a plain Halide pipeline.
#include "compile/codegen_workarounds.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "braze/ops.h"
#include "compile/cuda_codegen.h"
#include "compile/ptx_registers.h"
#include "device/halide_util.h"
#include "lower/lower_test_util.h"
#include "lower/lowering.h"

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
    InstallCodegenWorkarounds(p, /*gpu=*/false);
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

// out(l, d) = d < 2 ? 5 : (t(max(d, 2) - 2 + 3l) == 0.5 ? 2 : 1), vectorized by 4 over
// l, with t a small internal buffer: the strided load's base is `max(d, 2) + -2`, which
// Halide 14 shifted to one element before t. Without the repair the row d = 2 came out
// as garbage (NaN, 0, 1.4e-45: LLVM's value for an out-of-bounds stack load).
TEST(CodegenWorkarounds, StridedLoadsBelowTheirBaseRunAndAreRight) {
  Halide::Var x("x"), l("l"), d("d");
  Halide::Func t("t"), out("out");
  t(x) = Halide::select(x == 6, 0.5f, Halide::cast<float>(x) * 0.25f + 10.0f);
  t.compute_root().bound(x, 0, 12);
  out(l, d) = Halide::select(d < 2, 5.0f,
                             Halide::select(t(Halide::max(d, 2) - 2 + 3 * l) == 0.5f, 2.0f, 1.0f));
  out.bound(l, 0, 4).bound(d, 0, 5).vectorize(l, 4);
  Halide::Pipeline p(out);
  InstallCodegenWorkarounds(p, /*gpu=*/false);
  Halide::Buffer<float> o = p.realize({4, 5});
  for (int dd = 0; dd < 5; ++dd) {
    for (int ll = 0; ll < 4; ++ll) {
      const int i = dd - 2 + 3 * ll;
      const float want = dd < 2 ? 5.0f : i == 6 ? 2.0f : 1.0f;
      EXPECT_EQ(o(ll, dd), want) << "l " << ll << " d " << dd;
    }
  }
}

TEST(CodegenWorkarounds, OnlyStridedLoadsWithAnOddConstantGetTheirBaseFromALet) {
  using namespace Halide::Internal;
  const Halide::Expr v = Variable::make(Halide::Int(32), "v");
  auto rewritten = [&](const Halide::Expr& index) {
    const Halide::Expr load = Load::make(Halide::Float(32, 4), "buf", index, Halide::Buffer<>(),
                                         Parameter(), const_true(4), ModulusRemainder());
    const Stmt out = LoadStridedVectorsFromTheirBase(Evaluate::make(load));
    return out.as<Evaluate>()->value.as<Let>() != nullptr;
  };
  EXPECT_TRUE(rewritten(Ramp::make(v + -2, 3, 4)));
  EXPECT_TRUE(rewritten(Ramp::make(v + 1, 2, 4)));
  EXPECT_FALSE(rewritten(Ramp::make(v + 3, 3, 4)));  // a multiple of the stride: no shift
  EXPECT_FALSE(rewritten(Ramp::make(v, 3, 4)));
  EXPECT_FALSE(rewritten(Ramp::make(v + 1, 1, 4)));  // dense
  EXPECT_FALSE(rewritten(Ramp::make(v + 1, 5, 4)));  // a gather, not a shuffle
}

TEST(CodegenWorkarounds, OpaqueZeroAdditionsAreTakenOut) {
  using namespace Halide::Internal;
  const Halide::Expr x = Variable::make(Halide::Float(64), "x");
  const Halide::Expr zero =
      Load::make(Halide::Float(64), lower::kOpaqueZeroBuffer, 0, Halide::Buffer<>(), Parameter(),
                 const_true(), ModulusRemainder());
  auto after = [](const Halide::Expr& e) {
    return DropOpaqueZeroLoads(Evaluate::make(e)).as<Evaluate>()->value;
  };
  EXPECT_TRUE(equal(after(x + zero), x));
  EXPECT_TRUE(equal(after(zero + x), x));
  const Halide::Expr f32 = Variable::make(Halide::Float(32), "f");
  EXPECT_TRUE(equal(after(f32 + Halide::cast(Halide::Float(32), zero)), f32));
  const Halide::Expr v8 = Variable::make(Halide::Float(32, 8), "v");
  EXPECT_TRUE(equal(after(v8 + Broadcast::make(Halide::cast(Halide::Float(32), zero), 8)), v8));
  const Halide::Expr i = Variable::make(Halide::UInt(32), "i");
  EXPECT_TRUE(equal(after(i + Halide::cast(Halide::UInt(32), zero)), i));
  EXPECT_TRUE(equal(after(x * zero), x * make_zero(Halide::Float(64))));  // any other read: 0
  const Halide::Expr one = make_one(Halide::Float(64));
  EXPECT_TRUE(equal(after(x + one), x + one));
  // A sum's update, acc + (zero + term), either order: let s = term in strict(acc + s).
  const Halide::Expr acc = Variable::make(Halide::Float(64), "acc");
  for (const Halide::Expr& update : {acc + (zero + x), acc + (x + zero), (zero + x) + acc}) {
    const Halide::Expr e = after(update);
    const Let* let = e.as<Let>();
    ASSERT_NE(let, nullptr) << e;
    EXPECT_TRUE(equal(let->value, x)) << e;
    const Call* strict = let->body.as<Call>();
    ASSERT_TRUE(strict != nullptr && strict->is_intrinsic(Call::strict_float)) << e;
    const Halide::Expr s = Variable::make(Halide::Float(64), let->name);
    EXPECT_TRUE(equal(strict->args[0],
                      update.as<Halide::Internal::Add>()->a.same_as(acc) ? acc + s : s + acc))
        << e;
  }
  // The zero bound to a Let by common-subexpression elimination.
  const Halide::Expr z = Variable::make(Halide::Float(64), "z");
  const Halide::Expr bound = after(Let::make("z", zero, acc + (z + x)));
  const Let* outer = bound.as<Let>();
  ASSERT_NE(outer, nullptr) << bound;
  EXPECT_TRUE(is_const_zero(outer->value)) << bound;
  const Let* inner = outer->body.as<Let>();
  ASSERT_NE(inner, nullptr) << bound;
  EXPECT_TRUE(equal(inner->value, x)) << bound;
  // A vector update, the zero broadcast.
  const Halide::Expr vacc = Variable::make(Halide::Float(32, 8), "vacc");
  const Halide::Expr vzero = Broadcast::make(Halide::cast(Halide::Float(32), zero), 8);
  const Halide::Expr vupdate = after(vacc + (vzero + v8));
  ASSERT_NE(vupdate.as<Let>(), nullptr) << vupdate;
  EXPECT_TRUE(equal(vupdate.as<Let>()->value, v8)) << vupdate;
  // A term the vector does not vary along, broadcast whole: x8(zero + f).
  const Halide::Expr bupdate =
      after(vacc + Broadcast::make(Halide::cast(Halide::Float(32), zero) + f32, 8));
  const Let* blet = bupdate.as<Let>();
  ASSERT_NE(blet, nullptr) << bupdate;
  EXPECT_TRUE(equal(blet->value, Broadcast::make(f32, 8))) << bupdate;
  const Call* bstrict = blet->body.as<Call>();
  EXPECT_TRUE(bstrict != nullptr && bstrict->is_intrinsic(Call::strict_float)) << bupdate;
  // A whole `zero + term` bound to a Let: the value loses the zero, the update is strict.
  const Halide::Expr t = Variable::make(Halide::Float(64), "t");
  const Halide::Expr via_term = after(Let::make("t", zero + x, acc + t));
  const Let* term_let = via_term.as<Let>();
  ASSERT_NE(term_let, nullptr) << via_term;
  EXPECT_TRUE(equal(term_let->value, x)) << via_term;
  EXPECT_TRUE(equal(term_let->body, Halide::strict_float(acc + t))) << via_term;
  // The zero bound by a LetStmt, as Halide hoists it out of loops.
  const Halide::Internal::Stmt stmt =
      DropOpaqueZeroLoads(LetStmt::make("z", zero, Evaluate::make(acc + (z + x))));
  const LetStmt* let_stmt = stmt.as<LetStmt>();
  ASSERT_NE(let_stmt, nullptr) << stmt;
  const Halide::Expr stmt_update = let_stmt->body.as<Evaluate>()->value;
  ASSERT_NE(stmt_update.as<Let>(), nullptr) << stmt;
  EXPECT_TRUE(equal(stmt_update.as<Let>()->value, x)) << stmt;
  // An integer sum (a NaN count) keeps its plain addition.
  EXPECT_TRUE(equal(after(i + (Halide::cast(Halide::UInt(32), zero) + i)), i + i));
}

// Sums and a Halide matmul with a computed operand carry the zero through loop trimming,
// and the compiled kernel no longer loads it.
TEST(CodegenWorkarounds, KernelsNeverLoadTheOpaqueZero) {
  lowertest::Case c;
  Tensor x = c.Input(DType::kF32, {37, 53}, 1);
  Tensor w = c.Input(DType::kF32, {53, 7}, 2);
  c.outputs = {Sum(Exp(x), {1}), Mean(x * x), MatMul(Exp(x), w)};
  CompileOptions options;
  options.cpu_gemm_library = false;
  auto kernel = CompileCluster(lowertest::SpecOf(c), options);
  ASSERT_TRUE(kernel.ok()) << kernel.status();
  const std::string stmt = (*kernel)->lowered_stmt();
  EXPECT_NE(stmt.find(std::string("buffer ") + lower::kOpaqueZeroBuffer), std::string::npos);
  EXPECT_EQ(stmt.find(std::string(lower::kOpaqueZeroBuffer) + "["), std::string::npos) << stmt;
  EXPECT_TRUE(lowertest::CompileRunCompare(c, Scheduler::kSafeDefault));
}

// A plain Halide pipeline with a NaN or infinite literal read by an update that is not
// strict: acc(x) = 0; acc(x) += c * (x + 1), vectorized, acc stored, out(x) = acc(x).
// Under LLVM's no-NaNs and no-infinities flags a literal NaN or infinity operand is
// poison; LLVM deleted the update's store and every element was 0 (the Mean of an empty
// batch, braze-fuzz seed 62701289). With the repair the literal is a run-time value.
TEST(CodegenWorkarounds, NonFiniteLiteralsReachTheirConsumers) {
  const float inf = std::numeric_limits<float>::infinity();
  for (const float c : {std::numeric_limits<float>::quiet_NaN(), inf, -inf}) {
    for (const Halide::Type t : {Halide::Float(32), Halide::Float(64)}) {
      Halide::Var x("x");
      Halide::Func acc("acc"), out("out");
      acc(x) = Halide::cast(t, 0);
      acc(x) = acc(x) + Halide::cast(t, c) * Halide::cast(t, x + 1);
      out(x) = Halide::cast<float>(acc(x));
      acc.compute_root().vectorize(x, 8);
      acc.update().vectorize(x, 8);
      out.vectorize(x, 8);
      Halide::Pipeline p(out);
      InstallCodegenWorkarounds(p, /*gpu=*/false);
      const Halide::Buffer<float> got = p.realize({16});
      for (int i = 0; i < 16; ++i) {
        ASSERT_EQ(std::isnan(got(i)), std::isnan(c))
            << c << " " << t << " [" << i << "] " << got(i);
        if (!std::isnan(c)) {
          ASSERT_EQ(got(i), c) << t << " [" << i << "]";
        }
      }
    }
  }
}

// The rewrite of host and device code: every non-finite constant becomes a variable
// bound once at the top of the pipeline (host code) to the opaque function's result; a
// GPU loop reads the variable (Halide passes it to the kernel as a scalar argument) and
// never calls the function.
TEST(CodegenWorkarounds, NonFiniteConstantsBecomeVariablesBoundOnTheHost) {
  using namespace Halide::Internal;
  struct Finder : IRVisitor {
    int non_finite = 0, opaque_calls = 0, calls_on_device = 0, vars_on_device = 0;
    int device_loops = 0;
    using IRVisitor::visit;
    void visit(const FloatImm* op) override { non_finite += !std::isfinite(op->value); }
    void visit(const Call* op) override {
      opaque_calls += op->name == kOpaqueBitsSymbol;
      calls_on_device += op->name == kOpaqueBitsSymbol && device_loops > 0;
      IRVisitor::visit(op);
    }
    void visit(const Halide::Internal::Variable* op) override {
      vars_on_device += device_loops > 0 && op->name.find("braze_nonfinite") == 0;
    }
    void visit(const For* op) override {
      const bool device =
          op->device_api == Halide::DeviceAPI::CUDA || op->device_api == Halide::DeviceAPI::OpenCL;
      device_loops += device;
      IRVisitor::visit(op);
      device_loops -= device;
    }
  };
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double inf = std::numeric_limits<double>::infinity();
  const Halide::Expr v = Variable::make(Halide::Float(32), "v");
  const Halide::Expr f16_nan_bits =
      Halide::reinterpret(Halide::Float(16), make_const(Halide::UInt(16), 0x7e00));
  const Halide::Expr bf16_inf_bits =
      Halide::reinterpret(Halide::BFloat(16), make_const(Halide::UInt(16), 0x7f80));
  const Halide::Expr f32_finite_bits =
      Halide::reinterpret(Halide::Float(32), make_const(Halide::UInt(32), 0x3f800000));
  // NaN and -inf as literals (f32 NaN twice: one variable), f16 NaN and bf16 inf by bits.
  const Stmt code = Evaluate::make(Call::make(
      Halide::Float(32), "f",
      {v + FloatImm::make(Halide::Float(32), nan), v * FloatImm::make(Halide::Float(32), nan),
       Halide::cast<float>(FloatImm::make(Halide::Float(64), -inf)),
       Halide::cast<float>(f16_nan_bits), Halide::reinterpret(Halide::UInt(16), bf16_inf_bits),
       v + FloatImm::make(Halide::Float(32), 1.5), f32_finite_bits},
      Call::PureExtern));
  for (const Halide::DeviceAPI api :
       {Halide::DeviceAPI::None, Halide::DeviceAPI::CUDA, Halide::DeviceAPI::OpenCL}) {
    const bool device = api != Halide::DeviceAPI::None;
    const Stmt in = device ? For::make("t", 0, 4, ForType::GPUThread, api, code) : code;
    const Stmt out = NonFiniteConstantsAsOpaque(in);
    Finder after;
    out.accept(&after);
    EXPECT_EQ(after.non_finite, 0) << out;
    EXPECT_EQ(after.opaque_calls, 4) << out;  // f32 NaN, f64 -inf, f16 NaN, bf16 inf
    EXPECT_EQ(after.calls_on_device, 0) << out;
    EXPECT_EQ(after.vars_on_device, device ? 5 : 0) << out;
    // The bindings come first, host code; the finite literal and bits are left alone.
    EXPECT_NE(out.as<LetStmt>(), nullptr) << out;
    std::ostringstream text;
    text << out;
    EXPECT_NE(text.str().find("1.500000f"), std::string::npos) << out;
    EXPECT_NE(text.str().find("1065353216"), std::string::npos) << out;
  }
  // Nothing to bind: the Stmt is returned as it was.
  const Stmt finite = Evaluate::make(v + 1.5f);
  EXPECT_TRUE(NonFiniteConstantsAsOpaque(finite).same_as(finite));
  const Stmt gpu = For::make("t", 0, 4, ForType::GPUThread, Halide::DeviceAPI::CUDA, finite);
  EXPECT_TRUE(NonFiniteConstantsAsOpaque(gpu).same_as(gpu));
}

// The GPU source Halide keeps in a Module (PTX, or OpenCL C), "" if none.
std::string DeviceSource(const Halide::Module& module) {
  for (const Halide::Buffer<>& b : module.buffers()) {
    if (b.name().find("gpu_source_kernels") == std::string::npos) continue;
    const char* text = static_cast<const char*>(b.data());
    return std::string(text, strnlen(text, b.size_in_bytes()));
  }
  return "";
}

// The update of NonFiniteLiteralsReachTheirConsumers in a GPU kernel (one thread per x),
// compiled for CUDA and OpenCL without a device. NVPTX code carries the same no-NaNs and
// no-infinities flags: without the repair LLVM deleted the kernel's whole body (the
// entry was a bare `ret`, for NaN, inf and -inf in f16, f32 and f64), so the output
// kept whatever the device memory held. With it the constant is a scalar kernel argument
// (a 64-bit integer, narrowed in the kernel), multiplied and stored, and the PTX
// assembles for sm_90; OpenCL C gets it as a ulong.
TEST(CodegenWorkarounds, NonFiniteLiteralsInKernelsArriveAsKernelArguments) {
  const float inf = std::numeric_limits<float>::infinity();
  const Halide::Target cuda("host-cuda-cuda_capability_86");
  const Halide::Target opencl("host-opencl-cl_doubles-cl_half");
  for (const float c : {std::numeric_limits<float>::quiet_NaN(), inf, -inf}) {
    for (const Halide::Type t : {Halide::Float(16), Halide::Float(32), Halide::Float(64)}) {
      SCOPED_TRACE(::testing::Message() << c << " " << t);
      auto compile = [&](bool repair, const Halide::Target& target) {
        Halide::Var x("x"), xo("xo"), xi("xi");
        Halide::Func acc("acc"), out("out");
        acc(x) = Halide::cast(t, 0);
        acc(x) = acc(x) + Halide::cast(t, c) * Halide::cast(t, x + 1);
        out(x) = Halide::cast<float>(acc(x));
        out.gpu_tile(x, xo, xi, 16);
        acc.compute_at(out, xi);
        out.output_buffer().dim(0).set_bounds(0, 16);
        Halide::Pipeline p(out);
        if (repair) InstallCodegenWorkarounds(p, /*gpu=*/true);
        return DeviceSource(p.compile_to_module({}, "nonfinite", target));
      };
      // What the repair is for: the unrepaired kernel stores nothing.
      EXPECT_EQ(compile(false, cuda).find("st.global"), std::string::npos)
          << "LLVM kept the store of a non-finite literal's product: docs/CUDA.md, "
             "\"Non-finite constants in device code\", may be out of date";
      const std::string ptx = compile(true, cuda);
      EXPECT_EQ(Count(ptx, ".param "), 2) << ptx;  // the output and the constant
      EXPECT_EQ(Count(ptx, "ld.param."), 2) << ptx;
      EXPECT_EQ(Count(ptx, "mul.f" + std::to_string(t.bits())), 1) << ptx;
      EXPECT_EQ(Count(ptx, "st.global.f32"), 1) << ptx;
      EXPECT_EQ(NonFiniteImmediate(ptx), "") << ptx;
      if (HavePtxas()) {
        const auto report = AssemblePtx(ptx, "sm_90");
        EXPECT_TRUE(report.ok()) << report.status();
      }
      const std::string cl = compile(true, opencl);
      EXPECT_NE(cl.find("const ulong _braze_nonfinite"), std::string::npos) << cl;
      EXPECT_EQ(cl.find("braze_opaque_bits"), std::string::npos) << cl;
    }
  }
}

TEST(CodegenWorkarounds, OnlyHostSideConditionsThatReadABufferAreDropped) {
  using namespace Halide::Internal;
  const Stmt body = Evaluate::make(0);
  const Halide::Expr load = Load::make(Halide::Float(32), "count", 0, Halide::Buffer<>(),
                                       Parameter(), const_true(), ModulusRemainder());
  const Halide::Expr v = Variable::make(Halide::Int(32), "v");
  // Host side, reading a buffer: dropped, the body stays.
  EXPECT_TRUE(ComputeSkippableGpuStages(IfThenElse::make(load > 0.0f, body)).same_as(body));
  // No buffer read, or an else branch: kept.
  EXPECT_TRUE(ComputeSkippableGpuStages(IfThenElse::make(v > 0, body)).as<IfThenElse>());
  EXPECT_TRUE(
      ComputeSkippableGpuStages(IfThenElse::make(load > 0.0f, body, body)).as<IfThenElse>());
  // Inside a GPU loop: kept (device code reads device memory).
  const Stmt gpu = For::make("t", 0, 4, ForType::GPUThread, Halide::DeviceAPI::OpenCL,
                             IfThenElse::make(load > 0.0f, body));
  const Stmt out = ComputeSkippableGpuStages(gpu);
  ASSERT_TRUE(out.as<For>());
  EXPECT_TRUE(out.as<For>()->body.as<IfThenElse>());
}

// A scalar computed on the host from PTX's approximate exp2 and division (as CUDA
// lowering emits them for a Tanh), read by a kernel. Without the repair the x86 back end
// failed: "LLVM ERROR: Cannot select: intrinsic %llvm.nvvm.div.approx.f" (braze-fuzz
// seed 6000280 on an H100; here a thrown error).
TEST(CodegenWorkarounds, NvvmMathOnTheHostCompilesToItsHostForms) {
  using Halide::Internal::Call;
  Halide::Param<float> a("a"), b("b");
  auto scalar = [&] {
    const Halide::Expr e = Call::make(Halide::Float(32), lower::kNvvmEx2, {b}, Call::PureExtern);
    return Call::make(Halide::Float(32), lower::kNvvmDiv, {a, e}, Call::PureExtern);
  };
  {
    Halide::ImageParam in(Halide::Float(32), 1, "in");
    Halide::Func s("s"), out("out");
    Halide::Var x("x"), xo("xo"), xi("xi");
    s() = scalar();
    out(x) = in(x)*s();
    s.compute_root();
    out.gpu_tile(x, xo, xi, 32);
    Halide::Pipeline p(out);
    InstallCodegenWorkarounds(p, /*gpu=*/true);
    device::LlvmFatalErrorsThrow llvm_errors_throw;
    EXPECT_NO_THROW(p.compile_to_assembly(::testing::TempDir() + "nvvm_host.s", {in, a, b},
                                          "nvvm_host",
                                          Halide::Target("host-cuda-cuda_capability_86")));
  }
  // The host forms' values: a / 2^b.
  Halide::Func s("s");
  s() = scalar();
  Halide::Pipeline p(s);
  InstallCodegenWorkarounds(p, /*gpu=*/true);
  for (const auto [av, bv] :
       {std::pair<float, float>{3.0f, 0.25f}, {-1.5f, -20.0f}, {7.0f, 57.5f}}) {
    a.set(av);
    b.set(bv);
    const Halide::Buffer<float> got = p.realize();
    const double want = av / std::exp2(static_cast<double>(bv));
    // exp(b ln 2): the product's rounding is 2^-24 of b ln 2, relative to the result.
    const double tolerance = (1 + std::abs(bv)) * std::ldexp(1.0, -23);
    EXPECT_NEAR(got(), want, std::abs(want) * tolerance) << av << " / 2^" << bv;
  }
}

TEST(CodegenWorkarounds, OnlyNvvmMathOffTheDeviceGetsHostForms) {
  using namespace Halide::Internal;
  struct Counter : IRVisitor {
    int n = 0;
    using IRVisitor::visit;
    void visit(const Call* op) override {
      n += op->name == lower::kNvvmEx2 || op->name == lower::kNvvmDiv;
      IRVisitor::visit(op);
    }
  };
  auto nvvm_calls = [](const Stmt& s) {
    Counter counter;
    s.accept(&counter);
    return counter.n;
  };
  const Halide::Expr v = Variable::make(Halide::Float(32), "v");
  const Halide::Expr w = Variable::make(Halide::Float(32, 8), "w");
  auto ex2 = [](Halide::Expr x) {
    return Call::make(x.type(), lower::kNvvmEx2, {x}, Call::PureExtern);
  };
  auto div = [](Halide::Expr a, Halide::Expr b) {
    return Call::make(a.type(), lower::kNvvmDiv, {a, b}, Call::PureExtern);
  };
  // Scalar, nested and vector calls on the host: all replaced.
  const Stmt host = Block::make({Evaluate::make(div(v, ex2(div(v, v)))), Evaluate::make(ex2(w))});
  EXPECT_EQ(nvvm_calls(host), 4);
  EXPECT_EQ(nvvm_calls(HostFormsOfDeviceMath(host)), 0);
  // Inside a GPU loop: kept; in its extent (the launch's, on the host): replaced.
  const Halide::Expr extent = Halide::cast<int>(ex2(v));
  const Stmt gpu = For::make("t", 0, extent, ForType::GPUThread, Halide::DeviceAPI::CUDA, host);
  const Stmt out = HostFormsOfDeviceMath(gpu);
  ASSERT_TRUE(out.as<For>());
  EXPECT_EQ(nvvm_calls(out), 4);
  EXPECT_EQ(nvvm_calls(out.as<For>()->body), 4);
}

// What Halide 14's PTX options do and do not do (issue 39, docs/CUDA.md "IEEE
// semantics on CUDA"). Halide builds its NVPTX target machine with UnsafeFPMath,
// NoNaNsFPMath and NoInfsFPMath, but LLVM 14's instruction selection resets those from
// each function's attributes, which Halide does not set: a plain f32 division stays
// IEEE's div.rn.f32 (UnsafeFPMath would make it div.approx or div.full). What does lose
// NaN is Halide's own IR: its != is the ordered compare, and its simplifier rewrites
// !(a == b) to a != b, even under strict_float; is_nan stays an unordered test.
std::string PtxOf(const Halide::Expr& e, const Halide::ImageParam& in) {
  Halide::Func f("f");
  Halide::Var x("x"), xo("xo"), xi("xi");
  f(x) = e;
  f.gpu_tile(x, xo, xi, 32);
  const Halide::Module m =
      f.compile_to_module({in}, "f", Halide::Target("x86-64-linux-cuda-cuda_capability_86"));
  for (const Halide::Buffer<>& b : m.buffers()) {
    if (b.name().find("gpu_source_kernels") == std::string::npos) continue;
    const char* data = static_cast<const char*>(b.data());
    return std::string(data, strnlen(data, b.size_in_bytes()));
  }
  return "(no PTX)";
}

TEST(CodegenWorkarounds, HalidePtxOptionsDoNotReachInstructionSelection) {
  Halide::ImageParam in(Halide::Float(32), 1, "in");
  const Halide::Expr v = in(Halide::Var("x"));
  EXPECT_NE(PtxOf(v / (v + 3.0f), in).find("div.rn.f32"), std::string::npos);
  EXPECT_NE(PtxOf(Halide::select(Halide::is_nan(v), 1.0f, 0.0f), in).find("setp.nan.f32"),
            std::string::npos);
  // Halide's IR, not LLVM's options: NaN != 0 is false even strict.
  const std::string ne = PtxOf(Halide::strict_float(Halide::select(!(v == 0.0f), 1.0f, 0.0f)), in);
  EXPECT_NE(ne.find("setp.ne.f32"), std::string::npos) << ne;
  EXPECT_EQ(ne.find("setp.neu.f32"), std::string::npos) << ne;
}

// CUDA's f32 Tanh and Sigmoid (lower_elementwise.cc) run on this machine through their
// host forms: every part of the formulas but the hardware's approximations (ex2 and
// division, within 3 ulp) is checked against the reference, special values exactly.
TEST(CodegenWorkarounds, CudaTanhAndSigmoidFormsMatchTheReferenceOnTheHost) {
  const float inf = std::numeric_limits<float>::infinity();
  std::vector<float> values = {std::nanf(""),  -std::nanf(""),  inf,     -inf,
                               0.0f,           -0.0f,           1e-40f,  -1e-40f,
                               1.4e-45f,       1.17549435e-38f, 3.4e38f, -3.4e38f,
                               2.44140625e-4f, 2.44140600e-4f,  0.625f,  0.62499994f,
                               -0.625f,        20.0f,           -20.0f,  87.5f,
                               -87.5f,         -90.0f,          -103.0f, -103.9f,
                               -104.0f,        -104.5f,         150.0f};
  for (float x = -110.0f; x < 110.0f; x += 0.0137f) values.push_back(x);
  for (float x = 1e-6f; x < 1.0f; x *= 1.07f) {
    values.push_back(x);
    values.push_back(-x);
  }
  lowertest::Case c;
  const HostTensor input = HostTensor::Vector(values);
  Tensor x = c.Input(input);
  c.outputs = {Tanh(x), Sigmoid(x)};
  lower::LowerOptions options;
  options.gpu = true;
  options.cuda = true;
  auto lowered = lower::LowerCluster(lowertest::SpecOf(c), options);
  ASSERT_TRUE(lowered.ok()) << lowered.status();
  Halide::Pipeline p(lowered->info.outputs);
  InstallCodegenWorkarounds(p, /*gpu=*/true);
  const int n = static_cast<int>(values.size());
  Halide::Buffer<float> in(values.data(), n);
  lowered->params[0].set(in);
  Halide::Buffer<float> tanh_out(n), sigmoid_out(n);
  p.realize({tanh_out, sigmoid_out});
  auto want = lowertest::ReferenceOutputs(lowertest::SpecOf(c), {input});
  ASSERT_TRUE(want.ok()) << want.status();
  for (int i = 0; i < n; ++i) {
    for (int o = 0; o < 2; ++o) {
      const float got = o == 0 ? tanh_out(i) : sigmoid_out(i);
      const float ref = static_cast<float>((*want)[o].GetDouble(i));
      SCOPED_TRACE(::testing::Message() << (o == 0 ? "Tanh(" : "Sigmoid(") << values[i] << ")");
      if (std::isnan(ref)) {
        EXPECT_TRUE(std::isnan(got)) << got;
      } else if (ref == 0 || std::isinf(ref) || std::abs(values[i]) < 1e-30f) {
        EXPECT_EQ(got, ref);  // zeros with their sign, subnormal passes, limits
        EXPECT_EQ(std::signbit(got), std::signbit(ref));
      } else {
        // A few ulp of the result, or of FLT_MIN for subnormal results.
        EXPECT_NEAR(got, ref, std::max(std::abs(ref), 1.17549435e-38f) * 4e-7f) << got;
      }
    }
  }
}

}  // namespace
}  // namespace braze
