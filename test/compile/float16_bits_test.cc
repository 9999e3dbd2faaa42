// compile/float16_bits.h: 16-bit floats as their bits in OpenCL pipelines. The integer
// conversions (lower/lower_float16.h) against Braze's reference conversions on the host
// over every pattern and every rounding probe; the OpenCL C that Halide 14 prints with
// the pass, with and without the device's cl_khr_fp16 (CLHalf), and without it the
// refusal the pass exists for. Nothing here needs an OpenCL device: OpenCL C is
// generated, not built (float16_test.cc's Float16OpenCLTest runs it on POCL).
#include "compile/float16_bits.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "braze/dtype.h"
#include "lower/lower_float16.h"

namespace braze {
namespace {

// Every f32 a narrowing must round right: each 16-bit pattern's value (of both types),
// the midpoints between neighbours (ties) and the f32 values on each side of them, and
// the f32 specials.
std::vector<float> Probes() {
  std::vector<float> v = {0.0f,          -0.0f,         INFINITY,      -INFINITY,   NAN,      -NAN,
                          1e-45f,        -1e-40f,       65504.0f,      65519.99f,   65520.0f, 3e38f,
                          5.9604645e-8f, 2.9802322e-8f, 2.9802326e-8f, 8.940697e-8f};
  for (uint32_t b = 0; b < 65536; ++b) {
    for (bool bf16 : {true, false}) {
      const float a = bf16 ? BF16BitsToFloat(b) : F16BitsToFloat(b);
      const float next = bf16 ? BF16BitsToFloat(b + 1) : F16BitsToFloat(b + 1);
      v.push_back(a);
      if (b == 65535 || !std::isfinite(a) || !std::isfinite(next)) continue;
      const float mid = static_cast<float>((static_cast<double>(a) + next) / 2);
      v.insert(v.end(), {mid, std::nextafter(mid, -INFINITY), std::nextafter(mid, INFINITY)});
    }
  }
  return v;
}

bool SameOrBothNan(float a, float b) {
  return (std::isnan(a) && std::isnan(b)) || std::memcmp(&a, &b, sizeof(a)) == 0;
}

TEST(Float16Bits, WideningIsExactForEveryPattern) {
  Halide::Buffer<uint16_t> bits(65536);
  for (int i = 0; i < 65536; ++i) bits(i) = static_cast<uint16_t>(i);
  Halide::Var x("x");
  Halide::Func bf("bf"), f("f");
  bf(x) = lower::BF16BitsToF32(bits(x));
  f(x) = lower::F16BitsToF32(bits(x));
  bf.vectorize(x, 8);
  f.vectorize(x, 8);
  Halide::Buffer<float> got_bf = bf.realize({65536}), got_f = f.realize({65536});
  int bad = 0;
  for (int i = 0; i < 65536 && bad < 5; ++i) {
    const uint16_t b = static_cast<uint16_t>(i);
    if (!SameOrBothNan(got_bf(i), BF16BitsToFloat(b))) {
      ++bad;
      ADD_FAILURE() << "bf16 0x" << std::hex << i << ": " << got_bf(i);
    }
    if (!SameOrBothNan(got_f(i), F16BitsToFloat(b))) {
      ++bad;
      ADD_FAILURE() << "f16 0x" << std::hex << i << ": " << got_f(i) << " want "
                    << F16BitsToFloat(b);
    }
  }
}

// Bit for bit as the reference's (Eigen's) rounding, NaN included: the quiet NaN of the
// input's sign.
TEST(Float16Bits, NarrowingRoundsAsTheReferenceEverywhere) {
  const std::vector<float> probes = Probes();
  const int n = static_cast<int>(probes.size());
  Halide::Buffer<float> in(n);
  for (int i = 0; i < n; ++i) in(i) = probes[i];
  Halide::Var x("x");
  Halide::Func bf("bf"), f("f");
  bf(x) = lower::F32ToBF16Bits(in(x));
  f(x) = lower::F32ToF16Bits(in(x));
  bf.vectorize(x, 8);
  f.vectorize(x, 8);
  Halide::Buffer<uint16_t> got_bf = bf.realize({n}), got_f = f.realize({n});
  int bad = 0;
  for (int i = 0; i < n && bad < 5; ++i) {
    if (got_bf(i) != FloatToBF16Bits(probes[i])) {
      ++bad;
      ADD_FAILURE() << "bf16 of " << probes[i] << ": 0x" << std::hex << got_bf(i) << " want 0x"
                    << FloatToBF16Bits(probes[i]);
    }
    if (got_f(i) != FloatToF16Bits(probes[i])) {
      ++bad;
      ADD_FAILURE() << "f16 of " << probes[i] << ": 0x" << std::hex << got_f(i) << " want 0x"
                    << FloatToF16Bits(probes[i]);
    }
  }
}

// A kernel reading an f16 and a bf16 buffer and writing one of each, as Braze's lowering
// writes them (f16 through Halide's casts, bf16 on its bits), on the GPU.
Halide::Pipeline SixteenBitKernels(Halide::ImageParam& a, Halide::ImageParam& b) {
  Halide::Var x("x"), xo("xo"), xi("xi");
  Halide::Func f16("f16_out"), bf16("bf16_out");
  const Halide::Expr fa = Halide::cast<float>(a(x));
  const Halide::Expr fb = lower::BF16BitsToF32(Halide::reinterpret(Halide::UInt(16), b(x)));
  f16(x) = Halide::cast(Halide::Float(16), fa * fb);
  bf16(x) = Halide::reinterpret(Halide::BFloat(16), lower::F32ToBF16Bits(fa + fb));
  f16.gpu_tile(x, xo, xi, 16);
  bf16.gpu_tile(x, xo, xi, 16);
  return Halide::Pipeline({f16, bf16});
}

// The OpenCL C source of the pipeline's kernels for `target`.
std::string OpenCLSource(Halide::Pipeline& p, const std::vector<Halide::Argument>& args,
                         const Halide::Target& target) {
  const Halide::Module m = p.compile_to_module(args, "k", target);
  std::string text;
  for (const Halide::Buffer<>& buffer : m.buffers()) {
    if (buffer.name().find("gpu_source_kernels") == std::string::npos) continue;
    text += static_cast<const char*>(buffer.data());
  }
  return text;
}

TEST(Float16Bits, OpenCLKernelsWithoutClHalfSeeOnlyBits) {
  const Halide::Target target("host-opencl-cl_doubles");
  ASSERT_TRUE(StoresFloat16AsBits(target));
  EXPECT_FALSE(StoresFloat16AsBits(Halide::Target("host-cuda")));
  EXPECT_FALSE(StoresFloat16AsBits(Halide::Target("host")));
  Halide::ImageParam a(Halide::Float(16), 1, "a"), b(Halide::BFloat(16), 1, "b");
  {
    // What the pass is for: Halide 14 refuses the f16 and bf16 buffers as `half`.
    Halide::Pipeline bare = SixteenBitKernels(a, b);
    EXPECT_THROW(OpenCLSource(bare, {a, b}, target), Halide::CompileError);
  }
  Halide::Pipeline p = SixteenBitKernels(a, b);
  InstallFloat16AsBits(p, target);
  const std::string source = OpenCLSource(p, {a, b}, target);
  ASSERT_FALSE(source.empty());
  EXPECT_EQ(source.find("half"), std::string::npos) << source;
  EXPECT_NE(source.find("const ushort *restrict _a"), std::string::npos) << source;
  EXPECT_NE(source.find("const ushort *restrict _b"), std::string::npos) << source;
}

TEST(Float16Bits, WithClHalfF16IsHalfAndBf16StaysBits) {
  const Halide::Target target("host-opencl-cl_doubles-cl_half");
  Halide::ImageParam a(Halide::Float(16), 1, "a"), b(Halide::BFloat(16), 1, "b");
  Halide::Pipeline p = SixteenBitKernels(a, b);
  InstallFloat16AsBits(p, target);
  const std::string source = OpenCLSource(p, {a, b}, target);
  ASSERT_FALSE(source.empty());
  EXPECT_NE(source.find("cl_khr_fp16"), std::string::npos) << source;
  EXPECT_NE(source.find("const half *restrict _a"), std::string::npos) << source;
  EXPECT_NE(source.find("const ushort *restrict _b"), std::string::npos) << source;
  EXPECT_EQ(source.find("half *restrict _b"), std::string::npos) << source;
}

// Finds any value of a 16-bit float type in a statement.
class Any16BitFloat : public Halide::Internal::IRGraphVisitor {
 public:
  bool found = false;

 private:
  using IRGraphVisitor::include;
  void include(const Halide::Expr& e) override {
    if (e.type().bits() == 16 && e.type().is_float()) found = true;
    IRGraphVisitor::include(e);
  }
};

// Arithmetic, comparisons, lets and selects on bf16 values (which Braze's lowering does
// not emit, but Halide's passes might) leave no 16-bit float behind; a call the pass
// does not know, and an atomic update of the bits, are refused by name.
TEST(Float16Bits, EveryValueBecomesBitsOrIsRefused) {
  using namespace Halide::Internal;
  const Halide::Type bf16 = Halide::BFloat(16, 4);
  auto load = [&](const std::string& buffer) {
    return Load::make(bf16, buffer, Ramp::make(0, 1, 4), Halide::Buffer<>(), Parameter(),
                      const_true(4), ModulusRemainder());
  };
  const Halide::Expr a = load("a"), b = load("b");
  const Halide::Expr t = Variable::make(bf16, "t");
  const Halide::Expr value =
      Let::make("t", a + make_const(bf16, 1.5),
                Select::make(t < b, Max::make(t, b),
                             Halide::cast(bf16, Halide::cast(Halide::Float(32, 4), a) * 2.0f)));
  const Stmt s = Store::make("out", value, Ramp::make(0, 1, 4), Parameter(), const_true(4),
                             ModulusRemainder());
  Any16BitFloat before, after;
  s.accept(&before);
  Float16AsBits(s, /*f16_too=*/false).accept(&after);
  EXPECT_TRUE(before.found);
  EXPECT_FALSE(after.found);

  const Stmt call = Evaluate::make(Call::make(bf16, "mystery", {a}, Call::PureExtern));
  try {
    Float16AsBits(call, false);
    ADD_FAILURE() << "no error for a call of an unknown function";
  } catch (const Halide::CompileError& e) {
    EXPECT_NE(std::string(e.what()).find("mystery"), std::string::npos) << e.what();
  }
  const Stmt atomic = Atomic::make("", "", s);
  EXPECT_THROW(Float16AsBits(atomic, false), Halide::CompileError);
}

}  // namespace
}  // namespace braze
