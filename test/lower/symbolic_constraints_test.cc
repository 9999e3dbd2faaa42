// A symbolic cluster's buffer constraints name buffer fields by name only. A Variable
// that held its buffer's Parameter made a symbolic input's Parameter hold itself (its
// stride is the product of its own extents), a reference cycle that was never freed
// (LeakSanitizer; docs/SANITIZERS.md). The kernel still checks and runs as before. A
// class's extent comes from a buffer the pipeline loads (an input read only for its shape
// has no unpacked extents).
#include <set>
#include <string>
#include <vector>

#include "braze/ops.h"
#include "lower/lower_test_util.h"
#include "lower/lowering.h"

namespace braze {
namespace lowertest {
namespace {

// The names of the Variables in `e` that hold a Parameter.
std::set<std::string> ParameterVariables(const Halide::Expr& e) {
  class Finder : public Halide::Internal::IRGraphVisitor {
   public:
    std::set<std::string> names;

   private:
    using IRGraphVisitor::visit;
    void visit(const Halide::Internal::Variable* op) override {
      if (op->param.defined()) names.insert(op->name);
    }
  } finder;
  if (e.defined()) e.accept(&finder);
  return finder.names;
}

// Every constraint of `p`'s dims that holds a Parameter, as "what: variables".
std::vector<std::string> ConstraintsHoldingParameters(const Halide::Internal::Parameter& p) {
  std::vector<std::string> found;
  for (int d = 0; d < p.dimensions(); ++d) {
    const std::pair<const char*, Halide::Expr> constraints[] = {{"min", p.min_constraint(d)},
                                                                {"extent", p.extent_constraint(d)},
                                                                {"stride", p.stride_constraint(d)}};
    for (const auto& [what, e] : constraints) {
      for (const std::string& v : ParameterVariables(e)) {
        found.push_back(p.name() + " " + what + "." + std::to_string(d) + ": " + v);
      }
    }
  }
  return found;
}

// Two inputs [5, 3, n] sharing the symbolic class of n (Halide's innermost dim, so
// every outer stride is a product with n), and a result of the same shape.
Case TwoInputs() {
  Case c;
  const Tensor a = c.Input(DType::kF32, {5, 3, 7}, 11, -2, 2);
  const Tensor b = c.Input(DType::kF32, {5, 3, 7}, 12, -2, 2);
  c.outputs = {Tanh(a) * b + a};
  return c;
}

TEST(SymbolicConstraints, NameBufferFieldsWithoutHoldingParameters) {
  Case c = TwoInputs();
  ClusterSpec spec = SpecOf(c);
  spec.input_symbols = {{-1, -1, 0}, {-1, -1, 0}};
  absl::StatusOr<lower::LoweredCluster> lowered = lower::LowerCluster(spec, lower::LowerOptions());
  ASSERT_TRUE(lowered.ok()) << lowered.status();
  ASSERT_EQ(lowered->params.size(), 2u);
  std::vector<std::string> found;
  for (const Halide::ImageParam& p : lowered->params) {
    const std::vector<std::string> f = ConstraintsHoldingParameters(p.parameter());
    found.insert(found.end(), f.begin(), f.end());
  }
  EXPECT_TRUE(found.empty()) << found.front();
  // An output's constraints hold the inputs' Parameters (so that Halide unpacks the
  // buffer a class's extent comes from, loaded or not), never the output's own: no
  // Parameter reaches itself.
  for (const Halide::Func& f : lowered->info.outputs) {
    const Halide::Internal::Parameter out = f.output_buffer().parameter();
    for (const std::string& o : ConstraintsHoldingParameters(out)) {
      EXPECT_EQ(o.find(": " + out.name() + "."), std::string::npos) << o;
    }
  }
  // The constraints are still there: the first input's stride of dim 1 is its extent of
  // dim 0, and the second input's extent of dim 0 is the first's.
  const Halide::Internal::Parameter& in0 = lowered->params[0].parameter();
  const Halide::Internal::Parameter& in1 = lowered->params[1].parameter();
  const auto* stride = in0.stride_constraint(1).as<Halide::Internal::Variable>();
  ASSERT_NE(stride, nullptr) << in0.stride_constraint(1);
  EXPECT_EQ(stride->name, in0.name() + ".extent.0");
  const auto* extent = in1.extent_constraint(0).as<Halide::Internal::Variable>();
  ASSERT_NE(extent, nullptr) << in1.extent_constraint(0);
  EXPECT_EQ(extent->name, in0.name() + ".extent.0");
}

// The symbolic kernel, its constraints by name, runs at other lengths of the class.
TEST(SymbolicConstraints, TheKernelRunsAtEveryLength) {
  Case c0 = TwoInputs();
  ClusterSpec spec = SpecOf(c0);
  spec.input_symbols = {{-1, -1, 0}, {-1, -1, 0}};
  auto kernel = CompileCluster(spec, CompileOptions());
  ASSERT_TRUE(kernel.ok()) << kernel.status();
  for (int64_t n : {1, 7, 13, 64}) {
    Case c;
    const Tensor a = c.Input(DType::kF32, {5, 3, n}, 21 + n, -2, 2);
    const Tensor b = c.Input(DType::kF32, {5, 3, n}, 22 + n, -2, 2);
    c.outputs = {Tanh(a) * b + a};
    auto expected = ReferenceOutputs(SpecOf(c), c.values);
    ASSERT_TRUE(expected.ok()) << expected.status();
    auto run = RunKernelLike(**kernel, c.values, *expected);
    ASSERT_TRUE(run.ok()) << n << ": " << run.status();
    std::string why;
    EXPECT_TRUE(AllClose((*run)[0], (*expected)[0], 1e-5, 1e-6, &why)) << n << ": " << why;
  }
}

// Two inputs [n, 3] of one symbolic class, the first read only for its shape: zeros like
// it (the gradient of Sign, as Gradients builds it: Select(Equal(a, a), 0, 0), which
// Halide folds to 0) plus Exp of the second. The class's extent came from the first
// input's buffer, which the folded pipeline never loads, so Halide had no
// `in0.extent.1` ("Symbol not found" in code generation) and every size compiled a
// kernel of its own. The extent now comes from a buffer the pipeline loads.
Case ShapeOnlyInput(int64_t n) {
  Case c;
  const Tensor a = c.Input(DType::kF32, {n, 3}, 31 + n, -2, 2);
  const Tensor b = c.Input(DType::kF32, {n, 3}, 32 + n, -2, 2);
  const Tensor zero = Const(*c.graph, HostTensor::Scalar(0.0f));
  c.outputs = {Exp(Select(Equal(a, a), zero, zero)) + Exp(b)};
  return c;
}

// One kernel, compiled for `make(20)` with dim 0 of every input symbolic, runs the case
// at lengths 1, 7, 20 and 33 and matches the reference.
void ExpectOneKernelForEveryLength(Case (*make)(int64_t), double rtol, double atol) {
  Case c0 = make(20);
  ClusterSpec spec = SpecOf(c0);
  spec.input_symbols.assign(spec.inputs.size(), {0, -1});
  auto kernel = CompileCluster(spec, CompileOptions());
  ASSERT_TRUE(kernel.ok()) << kernel.status();
  for (int64_t n : {1, 7, 20, 33}) {
    Case c = make(n);
    auto expected = ReferenceOutputs(SpecOf(c), c.values);
    ASSERT_TRUE(expected.ok()) << expected.status();
    auto run = RunKernelLike(**kernel, c.values, *expected);
    ASSERT_TRUE(run.ok()) << n << ": " << run.status();
    ASSERT_EQ((*run)[0].shape(), Shape({n, 3}));
    std::string why;
    EXPECT_TRUE(AllClose((*run)[0], (*expected)[0], rtol, atol, &why)) << n << ": " << why;
  }
}

TEST(SymbolicConstraints, AClassOfAnInputReadOnlyForItsShapeCompilesOnce) {
  ExpectOneKernelForEveryLength(ShapeOnlyInput, 1e-5, 1e-6);
}

// One input [n, 3], read only for its shape: the result is zeros like it. With no other
// buffer, the class's extent is that input's, which the pipeline never loads; the
// output's constraint named it by name only, so Halide unpacked nothing of the input
// ("Symbol not found: in0.extent.1") and each size compiled a kernel of its own (seed
// 71600013 of braze-fuzz --dynamic_dims: a gradient of Sign). The output's constraint
// now holds the input's Parameter, so Halide unpacks the input's fields.
Case ZerosLikeItsOnlyInput(int64_t n) {
  Case c;
  const Tensor a = c.Input(DType::kF32, {n, 3}, 41 + n, -2, 2);
  const Tensor zero = Const(*c.graph, HostTensor::Scalar(0.0f));
  c.outputs = {Select(Equal(a, a), zero, zero)};
  return c;
}

TEST(SymbolicConstraints, AClassWhoseOnlyInputIsReadForItsShapeCompilesOnce) {
  ExpectOneKernelForEveryLength(ZerosLikeItsOnlyInput, 0, 0);
}

}  // namespace
}  // namespace lowertest
}  // namespace braze
