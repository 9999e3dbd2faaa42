// The launch contract (compile/launch.h), as a JIT-compiled kernel keeps it: argument
// counts, the memory space, elided inputs and every output's dtype and shape are
// checked before any Halide code runs, each with a message naming the kernel and the
// argument; a kernel still runs after a refused launch. (A kernel loaded from the disk
// cache gives the same messages: DiskCacheTest.ALoadedKernelChecksItsArgumentsAsAJit...)
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "braze/ops.h"
#include "gtest/gtest.h"
#include "lower/lower_test_util.h"

namespace braze {
namespace lowertest {
namespace {

// Tanh(y) + Sum(x, {0}) of an empty x f32[0,3] (an elided input) and y f32[3].
struct ElidedInputCase {
  Case c;
  std::unique_ptr<CompiledKernel> kernel;
  ElidedInputCase() {
    Tensor x = c.Input(DType::kF32, {0, 3}, 1);
    Tensor y = c.Input(DType::kF32, {3}, 2);
    c.outputs = {Tanh(y) + Sum(x, {0})};
    auto compiled = CompileCluster(SpecOf(c, "launch_test"), {});
    EXPECT_TRUE(compiled.ok()) << compiled.status();
    if (compiled.ok()) kernel = std::move(*compiled);
  }
};

// The status of launching `kernel` on `inputs` and `outputs`, expected InvalidArgument
// with a message holding `want`.
void ExpectRefused(CompiledKernel& kernel, std::vector<KernelArg> inputs,
                   std::vector<KernelArg> outputs, const std::string& want) {
  const absl::Status s = kernel.Launch(inputs, outputs);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_TRUE(absl::StrContains(s.message(), want)) << s.message() << "\nwanted: " << want;
}

TEST(LaunchContractTest, EveryCheckNamesTheKernelAndTheArgument) {
  ElidedInputCase e;
  ASSERT_NE(e.kernel, nullptr);
  CompiledKernel& k = *e.kernel;
  EXPECT_FALSE(k.on_device());
  const HostTensor& x = e.c.values[0];
  const HostTensor& y = e.c.values[1];
  HostTensor out(DType::kF32, {3});
  HostTensor not_empty = HostTensor::RandomUniform(DType::kF32, {2, 3}, 3);
  HostTensor long_out(DType::kF32, {4});
  HostTensor f64_out(DType::kF64, {3});

  ExpectRefused(k, {KernelArg::Host(&y)}, {KernelArg{&out, nullptr}},
                "launch_test: launched with 1 inputs and 1 outputs; the kernel takes 2 and 1");
  ExpectRefused(k, {KernelArg::Host(&x), KernelArg{}}, {KernelArg{&out, nullptr}},
                "launch_test: input 1 must be a host tensor");
  ExpectRefused(k, {KernelArg::Host(&x), KernelArg::Host(&y)}, {KernelArg{}},
                "launch_test: output 0 must be a host tensor");
  ExpectRefused(k, {KernelArg::Host(&not_empty), KernelArg::Host(&y)}, {KernelArg{&out, nullptr}},
                "launch_test: input 0 is f32[2,3] but the kernel was compiled for an empty tensor");
  ExpectRefused(k, {KernelArg::Host(&x), KernelArg::Host(&y)}, {KernelArg{&long_out, nullptr}},
                "launch_test: output 0 is f32[4], expected f32[3]");
  ExpectRefused(k, {KernelArg::Host(&x), KernelArg::Host(&y)}, {KernelArg{&f64_out, nullptr}},
                "launch_test: output 0 is f64[3], expected f32[3]");

  // Still runs, into the caller's buffer.
  const void* data = out.raw_data();
  ASSERT_TRUE(k.Run({&x, &y}, {&out}).ok());
  EXPECT_EQ(out.raw_data(), data);
  auto expected = ReferenceOutputs(SpecOf(e.c), e.c.values);
  ASSERT_TRUE(expected.ok()) << expected.status();
  EXPECT_TRUE(AllClose(out, (*expected)[0], 1e-6, 1e-6));
}

// An input Halide sees is checked by Halide, after the contract's own checks: its
// message still names the kernel.
TEST(LaunchContractTest, HalideChecksTheInputsItSees) {
  ElidedInputCase e;
  ASSERT_NE(e.kernel, nullptr);
  HostTensor short_y = HostTensor::RandomUniform(DType::kF32, {2}, 4);
  HostTensor out(DType::kF32, {3});
  const absl::Status s = e.kernel->Run({&e.c.values[0], &short_y}, {&out});
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_TRUE(absl::StartsWith(s.message(), "launch_test: Halide run-time error")) << s.message();
}

}  // namespace
}  // namespace lowertest
}  // namespace braze
