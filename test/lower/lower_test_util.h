// Helpers for the lowering tests: build a graph, make a ClusterSpec of every compute
// node, compile it, run it on seeded random inputs and compare with the reference
// kernels evaluated node by node.
#ifndef BRAZE_TEST_LOWER_LOWER_TEST_UTIL_H_
#define BRAZE_TEST_LOWER_LOWER_TEST_UTIL_H_

#include <algorithm>
#include <cstdlib>
#include <functional>
#include <iostream>
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "braze/device.h"
#include "braze/graph.h"
#include "braze/host_tensor.h"
#include "braze/ops.h"
#include "compile/compile.h"
#include "compile/cuda_codegen.h"
#include "gtest/gtest.h"
#include "reference/reference.h"

namespace braze {
namespace lowertest {

// A graph with its placeholders (the cluster inputs), the values fed to them and the
// tensors the cluster must produce.
// A window of padding p, strides (sh, sw) and dilations (dh, dw), NHWC.
inline Window2D Win(Padding p, int sh, int sw, int dh = 1, int dw = 1) {
  Window2D w;
  w.padding = p;
  w.stride_h = sh;
  w.stride_w = sw;
  w.dilation_h = dh;
  w.dilation_w = dw;
  return w;
}

struct Case {
  std::unique_ptr<Graph> graph = std::make_unique<Graph>();
  std::vector<Tensor> inputs;
  std::vector<HostTensor> values;
  std::vector<Tensor> outputs;

  // Adds a placeholder fed with uniform values in [lo, hi) from `seed`.
  Tensor Input(DType dtype, Shape shape, uint64_t seed, double lo = -1, double hi = 1) {
    Tensor t = Placeholder(*graph, dtype, shape);
    inputs.push_back(t);
    values.push_back(HostTensor::RandomUniform(dtype, shape, seed, lo, hi));
    return t;
  }
  // Adds a placeholder fed with `value`.
  Tensor Input(HostTensor value) {
    Tensor t = Placeholder(*graph, value.dtype(), value.shape());
    inputs.push_back(t);
    values.push_back(std::move(value));
    return t;
  }
};

// Every non-placeholder node, in id order, with the placeholders as inputs.
inline ClusterSpec SpecOf(const Case& c, const std::string& name = "cluster_test") {
  ClusterSpec spec;
  spec.graph = c.graph.get();
  spec.name = name;
  for (int id = 0; id < c.graph->num_nodes(); ++id) {
    if (c.graph->node(id).op() != OpKind::kPlaceholder) spec.nodes.push_back(id);
  }
  spec.inputs = c.inputs;
  for (const HostTensor& v : c.values) spec.input_types.push_back(v.type());
  spec.outputs = c.outputs;
  return spec;
}

// The cluster's outputs computed by the reference kernels, node by node.
inline absl::StatusOr<std::vector<HostTensor>> ReferenceOutputs(
    const ClusterSpec& spec, const std::vector<HostTensor>& inputs) {
  std::map<std::pair<int, int>, HostTensor> values;
  for (size_t i = 0; i < spec.inputs.size(); ++i) {
    values[{spec.inputs[i].node_id(), spec.inputs[i].index()}] = inputs[i];
  }
  for (int id : spec.nodes) {
    const Node& node = spec.graph->node(id);
    std::vector<HostTensor> in;
    std::vector<TensorType> types;
    for (const Tensor& t : node.inputs()) {
      in.push_back(values.at({t.node_id(), t.index()}));
      types.push_back(in.back().type());
    }
    auto out_types = InferOutputTypes(node.op(), node.attrs(), types);
    if (!out_types.ok()) return out_types.status();
    auto outs = RunReferenceKernel(node, in, *out_types);
    if (!outs.ok()) {
      return absl::Status(outs.status().code(),
                          absl::StrCat(node.name(), ": ", outs.status().message()));
    }
    for (size_t k = 0; k < outs->size(); ++k) values[{id, static_cast<int>(k)}] = (*outs)[k];
  }
  std::vector<HostTensor> result;
  for (const Tensor& t : spec.outputs) result.push_back(values.at({t.node_id(), t.index()}));
  return result;
}

struct Tolerance {
  double rtol = 1e-4;
  double atol = 1e-5;
};

// Runs a compiled kernel on `inputs` into `outputs` (allocated by the caller).
inline absl::StatusOr<std::vector<HostTensor>> RunKernelInto(CompiledKernel& kernel,
                                                             const std::vector<HostTensor>& inputs,
                                                             std::vector<HostTensor> outputs) {
  std::vector<const HostTensor*> in;
  for (const HostTensor& t : inputs) in.push_back(&t);
  std::vector<HostTensor*> out;
  for (HostTensor& t : outputs) out.push_back(&t);
  absl::Status s = kernel.Run(in, out);
  if (!s.ok()) return s;
  return outputs;
}

// Runs a compiled kernel on `inputs`, allocating outputs of its output types.
inline absl::StatusOr<std::vector<HostTensor>> RunKernel(CompiledKernel& kernel,
                                                         const std::vector<HostTensor>& inputs) {
  std::vector<HostTensor> outputs;
  for (const TensorType& t : kernel.output_types()) outputs.emplace_back(t.dtype, t.shape);
  return RunKernelInto(kernel, inputs, std::move(outputs));
}

// Runs a kernel with symbolic dims on `inputs`, its outputs shaped like `like` (the
// reference's outputs at these sizes).
inline absl::StatusOr<std::vector<HostTensor>> RunKernelLike(CompiledKernel& kernel,
                                                             const std::vector<HostTensor>& inputs,
                                                             const std::vector<HostTensor>& like) {
  std::vector<HostTensor> outputs;
  for (const HostTensor& t : like) outputs.emplace_back(t.dtype(), t.shape());
  return RunKernelInto(kernel, inputs, std::move(outputs));
}

// Why a scheduler may refuse a cluster and hand it on, as the compile driver records it
// (CompiledKernel::scheduler_failures), with the reason it is expected:
//  - Li2018 makes CPU schedules with atomic (predicated) stores that Halide 14's CPU
//    backend cannot lower;
//  - Braze's lowered-code check (schedule/lowered_check.h) rejects a schedule Halide 14
//    miscompiles silently or one that could never run at the cluster's shapes;
//  - Mullapudi2016 and Li2018 inline by rewriting definitions, and a value that a
//    reduction and a comparison both read must be stored once (compile.cc).
// Anything else is a surprise: a test named after a scheduler fails when it did not run.
inline const char* ExpectedRefusal(Scheduler scheduler, const std::string& failure) {
  if (scheduler == Scheduler::kLi2018 &&
      failure.find("Atomic predicated store is not supported") != std::string::npos) {
    return "Li2018's atomic stores";
  }
  if (failure.find("Halide 14 miscompiled the schedule") != std::string::npos) {
    return "lowered check: a miscompile";
  }
  if (failure.find("can never run at these shapes") != std::string::npos) {
    return "lowered check: a split larger than its extent";
  }
  if (failure.find("which a reduction and a comparison both read") != std::string::npos) {
    return "an autoscheduler inlined a value a comparison shares with a reduction";
  }
  if (failure.find("Failed to load") != std::string::npos) {
    return "the autoscheduler plugin is missing (BRAZE_HALIDE_PLUGIN_DIR)";
  }
  return nullptr;
}

// Compiles `c` under `scheduler`, runs it and compares every output with the reference.
// The scheduler must have made the schedule, or have refused for an expected reason
// (ExpectedRefusal). `used` (optional) receives the scheduler that produced it. `base`:
// the other compile options (the library calls' thresholds, say).
inline ::testing::AssertionResult CompileRunCompare(const Case& c, Scheduler scheduler,
                                                    Tolerance tol = {}, Scheduler* used = nullptr,
                                                    const CompileOptions& base = {}) {
  if (!c.graph->status().ok()) {
    return ::testing::AssertionFailure() << "graph: " << c.graph->status();
  }
  const ClusterSpec spec = SpecOf(c);
  auto expected = ReferenceOutputs(spec, c.values);
  if (!expected.ok()) return ::testing::AssertionFailure() << "reference: " << expected.status();
  CompileOptions options = base;
  options.scheduler = scheduler;
  auto kernel = CompileCluster(spec, options);
  if (!kernel.ok()) return ::testing::AssertionFailure() << "compile: " << kernel.status();
  if (used != nullptr) *used = (*kernel)->scheduler_used();
  if (scheduler != Scheduler::kAuto && (*kernel)->scheduler_used() != scheduler) {
    const std::vector<std::string>& failures = (*kernel)->scheduler_failures();
    const std::string first = failures.empty() ? "(no failure recorded)" : failures[0];
    if (ExpectedRefusal(scheduler, first) == nullptr) {
      return ::testing::AssertionFailure()
             << SchedulerName(scheduler) << " did not schedule the cluster ("
             << SchedulerName((*kernel)->scheduler_used()) << " did): " << first;
    }
  }
  if (std::getenv("BRAZE_TEST_VERBOSE") != nullptr) {
    // One line per compile: chosen -> used scheduler, total ms, the timing line of the
    // schedule text, and the output types.
    const std::string text = (*kernel)->schedule_text();
    const size_t l1 = text.find('\n');
    const size_t l2 = text.find('\n', l1 + 1);
    std::cerr << "[compile] " << SchedulerName(scheduler) << " -> "
              << SchedulerName((*kernel)->scheduler_used()) << " " << (*kernel)->compile_ms()
              << " ms " << text.substr(l1 + 1, l2 - l1 - 1) << " |";
    for (const TensorType& t : (*kernel)->output_types()) std::cerr << " " << TypeString(t);
    if (text.find("Serial instead of vectorized") != std::string::npos) std::cerr << " [repaired]";
    if (text.find("LLVM's loop optimizations off") != std::string::npos) {
      std::cerr << " [no LLVM loop opt]";
    }
    std::cerr << "\n";
  }
  auto actual = RunKernel(**kernel, c.values);
  if (!actual.ok()) return ::testing::AssertionFailure() << "run: " << actual.status();
  for (size_t i = 0; i < actual->size(); ++i) {
    std::string why;
    if (!AllClose((*actual)[i], (*expected)[i], tol.rtol, tol.atol, &why)) {
      return ::testing::AssertionFailure()
             << "output " << i << " (" << TypeString((*expected)[i].type()) << ") under "
             << SchedulerName((*kernel)->scheduler_used()) << ": " << why << "\nschedule:\n"
             << (*kernel)->schedule_text();
    }
  }
  return ::testing::AssertionSuccess();
}

// One op (or composite) test: `build` makes the graph for a base shape. Every scheduler
// runs the small shapes; the large ones (17x33x65, ...) run under Adams2019, the
// default, and SafeDefault, the end of every fall-through chain, to keep the suite fast.
struct OpTestCase {
  std::string name;
  std::function<void(Case&, const Shape&)> build;
  std::vector<Shape> small_shapes;
  std::vector<Shape> large_shapes;
  Tolerance tol;
};

// gtest prints parameters; the name is enough.
inline void PrintTo(const OpTestCase& tc, std::ostream* os) { *os << tc.name; }

inline const std::vector<Scheduler>& AllSchedulers() {
  static const std::vector<Scheduler> kinds = {Scheduler::kAdams2019, Scheduler::kMullapudi2016,
                                               Scheduler::kLi2018, Scheduler::kSafeDefault};
  return kinds;
}

inline void RunOpTestCase(const OpTestCase& tc, Scheduler kind) {
  std::vector<Shape> shapes = tc.small_shapes;
  if (kind == Scheduler::kAdams2019 || kind == Scheduler::kSafeDefault) {
    shapes.insert(shapes.end(), tc.large_shapes.begin(), tc.large_shapes.end());
  }
  for (const Shape& shape : shapes) {
    Case c;
    tc.build(c, shape);
    EXPECT_TRUE(CompileRunCompare(c, kind, tc.tol))
        << tc.name << " at base shape " << ShapeString(shape);
  }
}

// Compiles `c` for `device` with the GPU heuristic, uploads the inputs, runs it there and
// downloads its outputs into `outs` (and the schedule's text into `schedule`).
// `plan`: the GPU chain's first scheduler.
inline ::testing::AssertionResult RunOnDevice(const Case& c, const Device& device,
                                              std::vector<HostTensor>* outs, std::string* schedule,
                                              bool run = true,
                                              Scheduler plan = Scheduler::kGpuFused) {
  if (!c.graph->status().ok()) {
    return ::testing::AssertionFailure() << "graph: " << c.graph->status();
  }
  CompileOptions options;
  options.device = device;
  options.gpu_scheduler = plan;
  auto kernel = CompileCluster(SpecOf(c), options);
  if (!kernel.ok()) return ::testing::AssertionFailure() << "compile: " << kernel.status();
  if (!(*kernel)->on_device()) return ::testing::AssertionFailure() << "not a device kernel";
  *schedule = (*kernel)->schedule_text();
  if (!run) return ::testing::AssertionSuccess();
  std::vector<std::unique_ptr<DeviceTensor>> ins, device_outs;
  std::vector<DeviceTensor*> in_ptrs, out_ptrs;
  for (const HostTensor& v : c.values) {
    auto d = DeviceTensor::Allocate(v.type(), device);
    if (!d.ok()) return ::testing::AssertionFailure() << "allocate: " << d.status();
    if (absl::Status s = (*d)->CopyFromHost(v); !s.ok()) {
      return ::testing::AssertionFailure() << "upload: " << s;
    }
    in_ptrs.push_back(d->get());
    ins.push_back(*std::move(d));
  }
  for (const TensorType& t : (*kernel)->output_types()) {
    auto d = DeviceTensor::Allocate(t, device);
    if (!d.ok()) return ::testing::AssertionFailure() << "allocate: " << d.status();
    out_ptrs.push_back(d->get());
    device_outs.push_back(*std::move(d));
  }
  if (absl::Status s = (*kernel)->RunOnDevice(in_ptrs, out_ptrs); !s.ok()) {
    return ::testing::AssertionFailure() << "run: " << s << "\nschedule:\n" << *schedule;
  }
  outs->clear();
  for (const auto& d : device_outs) {
    HostTensor got;
    if (absl::Status s = d->CopyToHost(&got); !s.ok()) {
      return ::testing::AssertionFailure() << "download: " << s;
    }
    outs->push_back(std::move(got));
  }
  return ::testing::AssertionSuccess();
}

// A device backend (CUDA, OpenCL): compiles `c` for `device` with the GPU heuristic;
// with `run`, uploads the inputs, runs it on the device and compares the downloaded
// outputs with the reference.
inline ::testing::AssertionResult CompileRunCompareOnDevice(const Case& c, Tolerance tol,
                                                            const Device& device, bool run) {
  if (!c.graph->status().ok()) {
    return ::testing::AssertionFailure() << "graph: " << c.graph->status();
  }
  auto expected = ReferenceOutputs(SpecOf(c), c.values);
  if (!expected.ok()) return ::testing::AssertionFailure() << "reference: " << expected.status();
  std::vector<HostTensor> got;
  std::string schedule;
  ::testing::AssertionResult ran = RunOnDevice(c, device, &got, &schedule, run);
  if (!ran || !run) return ran;
  for (size_t i = 0; i < got.size(); ++i) {
    std::string why;
    if (!AllClose(got[i], (*expected)[i], tol.rtol, tol.atol, &why)) {
      return ::testing::AssertionFailure()
             << "output " << i << " on " << device.ToString() << ": " << why << "\nschedule:\n"
             << schedule;
    }
  }
  return ::testing::AssertionSuccess();
}

// The CUDA path of one op, as two cases named for what they run:
//
// CompilesAndAssembles (RunOpTestCaseCudaCompile), everywhere: the cluster at its first
// small shape is JIT-compiled for cuda:0 (Braze's GPU schedule, the host code and the
// PTX, as a Session on a GPU would compile it) and that PTX is assembled with ptxas for
// sm_90. No GPU is needed; nothing runs and no value is compared. Where ptxas is
// missing the case is skipped after the compile, saying so.
//
// MatchesReferenceOnGpu (RunOpTestCaseCudaOnGpu): every shape compiled, run on the GPU
// and compared with the reference; skipped, with CheckCudaAvailable's reason, without a
// GPU. Halide's f32 exp, which GPUs use, returns 0 below FLT_MIN (docs/CUDA.md): an H200
// gave sigmoid(-87.5) = 0, not 9.98e-39, so f32 outputs are compared with an absolute
// floor of FLT_MIN there.
//
// gpu_ptx_test (compile_tests) checks more of the generated code (spills, kernel counts).

// Compiles `c` for cuda:0 and assembles its PTX with ptxas. `not_assembled` is set to
// the reason when ptxas is missing (the compile is still checked).
// The label of the first PTX block holding a warp shuffle that LLVM named as a
// conditional's (then_bb...), or "" if none: a full-mask shfl.sync that only some lanes
// run is undefined (schedule/gpu_reduce.cc, Cooperative).
inline std::string ShuffleInConditional(const std::string& ptx) {
  std::string block;
  size_t start = 0;
  while (start < ptx.size()) {
    size_t end = ptx.find('\n', start);
    if (end == std::string::npos) end = ptx.size();
    const std::string line = ptx.substr(start, end - start);
    if (line.rfind("LBB", 0) == 0 || line.rfind("// %bb", 0) == 0) block = line;
    if (line.find("shfl.sync") != std::string::npos && block.find("then_bb") != std::string::npos) {
      return block;
    }
    start = end + 1;
  }
  return "";
}

inline ::testing::AssertionResult CompileForCudaAndAssemble(const Case& c,
                                                            std::string* not_assembled) {
  if (!c.graph->status().ok()) {
    return ::testing::AssertionFailure() << "graph: " << c.graph->status();
  }
  CompileOptions options;
  options.device = Device{Device::Kind::kCuda, 0};
  auto kernel = CompileCluster(SpecOf(c), options);
  if (!kernel.ok()) return ::testing::AssertionFailure() << "compile: " << kernel.status();
  if (!(*kernel)->on_device()) return ::testing::AssertionFailure() << "not a device kernel";
  // Braze's own GPU plans keep the launch limits (schedule/gpu_launch_check.h); the check
  // would reject one silently to the next plan.
  for (const std::string& failure : (*kernel)->scheduler_failures()) {
    if (failure.find("would fail to launch") != std::string::npos) {
      return ::testing::AssertionFailure() << "a GPU schedule over the launch limits: " << failure;
    }
  }
  bool empty = true;
  for (const TensorType& t : (*kernel)->output_types()) empty = empty && NumElements(t.shape) == 0;
  if (empty) return ::testing::AssertionSuccess();  // nothing to compute, no PTX
  const CompiledKernel::DeviceSource source = (*kernel)->device_source();
  if (source.extension != "ptx" || source.text.find(".entry") == std::string::npos) {
    return ::testing::AssertionFailure()
           << "no PTX kernel in the compiled cluster's device source (." << source.extension
           << "):\n"
           << source.text.substr(0, 2000);
  }
  if (std::string block = ShuffleInConditional(source.text); !block.empty()) {
    return ::testing::AssertionFailure() << "a warp shuffle in a conditional block: " << block;
  }
  auto report = AssemblePtx(source.text, "sm_90");
  if (report.status().code() == absl::StatusCode::kFailedPrecondition) {
    *not_assembled = std::string(report.status().message());
    return ::testing::AssertionSuccess();
  }
  if (!report.ok()) return ::testing::AssertionFailure() << "ptxas: " << report.status();
  if (report->kernels.empty()) {
    return ::testing::AssertionFailure() << "ptxas reported no kernel:\n" << report->log;
  }
  return ::testing::AssertionSuccess();
}

inline void RunOpTestCaseCudaCompile(const OpTestCase& tc) {
  ASSERT_FALSE(tc.small_shapes.empty()) << tc.name << " has no small shape";
  const Shape& shape = tc.small_shapes.front();
  Case c;
  tc.build(c, shape);
  std::string not_assembled;
  EXPECT_TRUE(CompileForCudaAndAssemble(c, &not_assembled))
      << tc.name << " at base shape " << ShapeString(shape);
  if (!not_assembled.empty()) {
    GTEST_SKIP() << "compiled for CUDA but not assembled: " << not_assembled;
  }
}

inline void RunOpTestCaseCudaOnGpu(const OpTestCase& tc) {
  if (absl::Status s = CheckCudaAvailable(); !s.ok()) {
    GTEST_SKIP() << "needs a CUDA GPU, nothing run or compared: " << s.message();
  }
  std::vector<Shape> shapes = tc.small_shapes;
  shapes.insert(shapes.end(), tc.large_shapes.begin(), tc.large_shapes.end());
  for (const Shape& shape : shapes) {
    Case c;
    tc.build(c, shape);
    Tolerance tol = tc.tol;
    for (const Tensor& out : c.outputs) {
      if (out.dtype() == DType::kF32) tol.atol = std::max(tol.atol, 1.1754944e-38);
    }
    EXPECT_TRUE(CompileRunCompareOnDevice(c, tol, Device{Device::Kind::kCuda, 0}, true))
        << tc.name << " at base shape " << ShapeString(shape);
  }
}

// Every shape on opencl:0: with POCL (tools/setup.sh installs it) the GPU schedules run
// here, on the CPU. Skipped, with the reason, on a machine without OpenCL. OpenCL's
// double exp may be off by a few ulp (the spec allows 3), and Tanh near 0 divides two
// such values that nearly cancel: f64 cases get an absolute tolerance of 1e-12 there
// (POCL: TanhF64 was off by 9.4e-14 at 0.0212).
inline void RunOpTestCaseOpenCL(const OpTestCase& tc) {
  if (absl::Status s = CheckOpenCLAvailable(); !s.ok()) GTEST_SKIP() << s.message();
  Tolerance tol = tc.tol;
  tol.atol = std::max(tol.atol, 1e-12);
  std::vector<Shape> shapes = tc.small_shapes;
  shapes.insert(shapes.end(), tc.large_shapes.begin(), tc.large_shapes.end());
  for (const Shape& shape : shapes) {
    Case c;
    tc.build(c, shape);
    EXPECT_TRUE(CompileRunCompareOnDevice(c, tol, Device{Device::Kind::kOpenCL, 0}, true))
        << tc.name << " at base shape " << ShapeString(shape);
  }
}

inline std::string CaseName(const ::testing::TestParamInfo<OpTestCase>& info) {
  return info.param.name;
}

using OpParam = std::tuple<OpTestCase, Scheduler>;

inline std::string OpParamName(const ::testing::TestParamInfo<OpParam>& info) {
  return std::get<0>(info.param).name + "_" + SchedulerName(std::get<1>(info.param));
}

}  // namespace lowertest
}  // namespace braze

#endif  // BRAZE_TEST_LOWER_LOWER_TEST_UTIL_H_
