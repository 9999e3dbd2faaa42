// JitKernel: a pipeline JIT-compiled in this process, run through the launch contract
// (see jit_kernel.h). Every Halide call sits inside CatchHalideErrors.
#include "compile/jit_kernel.h"

#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <sstream>
#include <utility>

#include "absl/strings/str_cat.h"
#include "device/device_tensor_impl.h"
#include "device/halide_util.h"
#include "device/thread_pool.h"
#include "schedule/gpu_launch_check.h"

namespace braze {
namespace compile {

namespace {

using device::CatchHalideErrors;

// The JIT runtime's pool. halide_set_num_threads is not exported by libHalide, only by
// the JIT shared runtime, which exists after the first compile_jit (docs/HALIDE14.md
// §3). Kernels' loops run on Braze's pool (device/thread_pool.h); this runtime's pool
// takes those launched while Braze's is busy, whose halide_default_do_par_for is found
// here too.
RuntimeThreadCount jit_runtime_threads;

RuntimeThreadCount::SetNumThreads FindJitSetNumThreads(const Halide::Target& target) {
  for (auto& module : Halide::Internal::JITSharedRuntime::get(
           nullptr, target.with_feature(Halide::Target::JIT), false)) {
    auto symbol = module.find_symbol_by_name("halide_set_num_threads");
    if (symbol.address == nullptr) continue;
    // The same runtime's pool takes loops Braze's is too busy for (thread_pool.h).
    auto pool = module.find_symbol_by_name("halide_default_do_par_for");
    if (pool.address != nullptr) {
      device::SetJitHalidePool(reinterpret_cast<device::ParallelForFunction>(pool.address));
    }
    return reinterpret_cast<RuntimeThreadCount::SetNumThreads>(symbol.address);
  }
  return nullptr;  // no JIT runtime yet: nothing runs on it
}

}  // namespace

std::vector<Halide::Argument> ArgumentsOf(const lower::LoweredCluster& lowered) {
  std::vector<Halide::Argument> args;
  for (size_t i = 0; i < lowered.params.size(); ++i) {
    if (!lowered.input_elided[i]) args.push_back(lowered.params[i]);
  }
  return args;
}

KernelLayout LayoutOf(const lower::LoweredCluster& lowered, Scheduler used,
                      std::vector<std::string> failures, std::string schedule) {
  return KernelLayout{lowered.input_elided, lowered.pipeline_output, lowered.output_types, used,
                      std::move(failures),  std::move(schedule)};
}

JitKernel::JitKernel(std::string name, KernelLayout layout, lower::LoweredCluster lowered,
                     Halide::Pipeline pipeline, Halide::Target target, int num_threads,
                     bool on_device)
    : PipelineKernel(std::move(name), std::move(layout), on_device, num_threads),
      lowered_(std::move(lowered)),
      pipeline_(std::move(pipeline)),
      target_(std::move(target)) {}

void JitKernel::UseRuntimeThreads(int n) {
  jit_runtime_threads.Use(n, [&] { return FindJitSetNumThreads(target_); });
}

absl::Status JitKernel::Call(std::vector<KernelBuffer>& args, size_t num_inputs) {
  device::TakeRuntimeError();  // drop messages of earlier calls
  absl::Status status = CatchHalideErrors(name() + ": Halide run-time error",
                                          absl::StatusCode::kInvalidArgument, [&] {
                                            size_t k = 0;
                                            for (size_t i = 0; i < lowered_.params.size(); ++i) {
                                              if (!lowered_.input_elided[i])
                                                lowered_.params[i].set(args[k++].jit_buffer());
                                            }
                                            std::vector<Halide::Buffer<>> outputs;
                                            for (size_t j = num_inputs; j < args.size(); ++j) {
                                              outputs.push_back(args[j].jit_buffer());
                                            }
                                            Halide::Realization realization(outputs);
                                            pipeline_.realize(realization, target_);
                                            return absl::OkStatus();
                                          });
  // Drop the references to the caller's memory.
  for (size_t i = 0; i < lowered_.params.size(); ++i) {
    if (!lowered_.input_elided[i]) lowered_.params[i].reset();
  }
  // A device runtime reports some errors (an unknown CUDA error code, say) through
  // the default handler rather than the pipeline's: add them.
  if (std::string more = device::TakeRuntimeError(); !status.ok() && !more.empty()) {
    status =
        absl::Status(status.code(),
                     device::NoteLostCudaContext(absl::StrCat(status.message(), " [", more, "]")));
  }
  // Halide's runtime names no kernel when a launch fails (too many registers or threads
  // for a block, say): name this pipeline's launches and their sizes.
  if (!status.ok() && status.message().find("cuLaunchKernel failed") != std::string::npos) {
    status = absl::Status(status.code(),
                          absl::StrCat(status.message(), "; this pipeline's ",
                                       "launches (one of them failed):\n", DescribeLaunches()));
  }
  return status;
}

std::string JitKernel::DescribeLaunches() const {
  std::string launches;
  absl::Status s = CatchHalideErrors(name() + ": launches", absl::StatusCode::kInternal, [&] {
    device::HalideOutputCapture halide_output;
    Halide::Pipeline p = pipeline_;
    launches = schedule::DescribeGpuLaunches(
        p.compile_to_module(ArgumentsOf(lowered_), "braze_launches", target_));
    return absl::OkStatus();
  });
  return s.ok() ? launches : std::string(s.message());
}

std::string JitKernel::lowered_stmt() const {
  if (lowered_.info.outputs.empty()) return "// nothing to compute: every output is empty\n";
  char path[] = "/tmp/braze_stmt_XXXXXX";
  const int fd = mkstemp(path);
  if (fd < 0) return "// could not create a temporary file for the statement\n";
  close(fd);
  absl::Status s =
      CatchHalideErrors(name() + ": lowered statement", absl::StatusCode::kInternal, [&] {
        device::HalideOutputCapture halide_output;  // lowering repeats its warnings
        Halide::Pipeline p = pipeline_;
        p.compile_to_lowered_stmt(path, ArgumentsOf(lowered_), Halide::Text, target_);
        return absl::OkStatus();
      });
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  std::remove(path);
  return s.ok() ? ss.str() : absl::StrCat("// ", s.message(), "\n");
}

CompiledKernel::DeviceSource JitKernel::device_source() const {
  if (!on_device() || lowered_.info.outputs.empty()) return {};
  DeviceSource source;
  source.extension = target_.has_feature(Halide::Target::OpenCL) ? "cl" : "ptx";
  absl::Status s = CatchHalideErrors(name() + ": device source", absl::StatusCode::kInternal, [&] {
    device::HalideOutputCapture halide_output;
    Halide::Pipeline p = pipeline_;
    const Halide::Module module = p.compile_to_module(ArgumentsOf(lowered_), "braze_dump", target_);
    // Halide keeps each GPU loop nest's source in a buffer "..._gpu_source_kernels".
    for (const Halide::Buffer<>& b : module.buffers()) {
      if (b.name().find("gpu_source_kernels") == std::string::npos) continue;
      const char* bytes = static_cast<const char*>(b.data());
      std::string text(bytes, bytes + b.size_in_bytes());
      while (!text.empty() && text.back() == '\0') text.pop_back();
      absl::StrAppend(&source.text, "// ", b.name(), "\n", text, "\n");
    }
    return absl::OkStatus();
  });
  if (!s.ok()) source.text = absl::StrCat("// ", s.message(), "\n");
  return source;
}

}  // namespace compile
}  // namespace braze
