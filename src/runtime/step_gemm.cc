// The library GEMM step kind (kGemm): a MatMul/BatchMatMul on CUDA run by cuBLASLt (f32,
// f64, bf16 and f16), with the bias Add (and ReLU) after it folded into the library's epilogue
// (passes/gemm_match.h finds them). It claims its nodes before clustering; when the
// library refuses or is missing, the same ops run as Halide kernels, op by op.
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "braze/status.h"
#include "device/cublas_gemm.h"
#include "device/device_timeline.h"
#include "device/features.h"
#include "ir/timeline.h"
#include "passes/gemm_match.h"
#include "runtime/executor.h"
#include "runtime/step_kind.h"

namespace braze {
namespace {

absl::Status RunGemm(Executor& ex, const Step& step, StepState& state,
                     const std::vector<Value>& inputs, const std::vector<TensorType>& types,
                     bool compile_only) {
  if (types != state.input_types) {  // sizes once per input signature, not per Run
    const Node& mm = ex.graph().node(step.nodes.front());
    BRAZE_RETURN_IF_ERROR(ex.CheckShapes(step, types).status());
    auto mm_types = InferOutputTypes(mm.op(), mm.attrs(), {types[0], types[1]});
    if (!mm_types.ok()) return Annotate(NodeLabel(mm), mm_types.status());
    const TensorType& out = (*mm_types)[0];
    const auto& attrs = mm.attrs_as<MatMulAttrs>();
    GemmShape& shape = state.gemm;
    shape.dtype = out.dtype;
    const size_t r = out.shape.size();
    shape.m = out.shape[r - 2];
    shape.n = out.shape[r - 1];
    shape.k = attrs.transpose_a ? types[0].shape[r - 2] : types[0].shape[r - 1];
    shape.batch = 1;
    for (size_t d = 0; d + 2 < r; ++d) shape.batch *= out.shape[d];
    shape.transpose_a = attrs.transpose_a;
    shape.transpose_b = attrs.transpose_b;
    shape.epilogue = step.nodes.size() == 1   ? GemmEpilogue::kNone
                     : step.nodes.size() == 2 ? GemmEpilogue::kBias
                                              : GemmEpilogue::kBiasRelu;
    state.input_types = types;
    state.device_buffers.clear();
  }
  // The output: out's batch dims (a's) then m x n.
  TensorType out{state.gemm.dtype, Shape(types[0].shape.begin(), types[0].shape.end() - 2)};
  out.shape.push_back(state.gemm.m);
  out.shape.push_back(state.gemm.n);
  if (compile_only) {
    ex.StandIn(step, state, {out});
    return absl::OkStatus();
  }
  const GemmShape& shape = state.gemm;
  absl::Status status = ex.EnsureDeviceBuffers(step, state, {out});
  std::vector<DeviceTensor*> ins;
  for (size_t i = 0; status.ok() && i < inputs.size(); ++i) {
    auto v = ex.In(step.inputs[i], inputs[i], Space::kDevice, step.device);
    status = v.status();
    if (v.ok()) ins.push_back(v->device);
  }
  if (status.ok()) {
    TimelineEvent trace(step.name, "gemm");
    device::DeviceSpan device_time(step.device, step.name, "gemm");
    DeviceTensor* result = state.device_buffers[0].get();
    status = RunInCudaContext(step.device.index, [&] {
      return CublasGemm(step.name, shape, ins[0]->device_address(), ins[1]->device_address(),
                        ins.size() > 2 ? ins[2]->device_address() : 0, result->device_address());
    });
  }
  // cuBLAS refused (or is missing): the same ops as Halide CUDA kernels.
  if (!status.ok()) return ex.FallBack(step, state, "(cuBLAS GEMM) failed", status, false);
  ++ex.stats().gemm_launches;
  Value& v = ex.Slot(step.outputs[0]);
  v = Value();
  v.space = Space::kDevice;
  v.device = state.device_buffers[0].get();
  return absl::OkStatus();
}

class GemmKind : public StepKind {
 public:
  std::vector<Step> Claim(const PlanView& p) const override {
    if (p.options.reference_only || p.options.cuda_matmul != SessionOptions::CudaMatMul::kCublas) {
      return {};
    }
    GemmMatchOptions o;
    o.default_device = p.default_device;
    o.has_library_gemm = [](const Device& d, DType dtype) {
      return device::FeaturesOf(d).library_gemm && IsCublasGemmDType(dtype);
    };
    o.fold_relu = p.options.cuda_relu_epilogue;
    std::vector<Step> steps;
    for (const GemmMatch& m : MatchGemms(p.g, p.needed, p.fetched, o)) {
      Step s;
      s.kind = Step::Kind::kGemm;
      s.space = Space::kDevice;
      s.device = p.memory_device(m.nodes.front());
      s.name = p.g.node(m.nodes.front()).name();
      s.nodes = m.nodes;
      s.inputs = m.inputs;
      s.outputs = {m.output};
      s.fallback = p.op_by_op(s.nodes);  // cuBLAS refused or missing: Halide kernels
      steps.push_back(std::move(s));
    }
    return steps;
  }
  absl::Status Run(Executor& ex, const Step& step, StepState& state,
                   const std::vector<Value>& inputs, const std::vector<TensorType>& types,
                   bool compile_only) const override {
    return RunGemm(ex, step, state, inputs, types, compile_only);
  }
  // A library refusing a GEMM is not the user's error: it falls back even in strict mode.
  bool strict_reports_failure() const override { return false; }
  const char* instead() const override { return "running it as Halide kernels"; }
  const char* runs_as() const override { return "cuBLASLt GEMM"; }
};

}  // namespace

const StepKind& GemmStepKind() {
  static const GemmKind kind;
  return kind;
}

}  // namespace braze
