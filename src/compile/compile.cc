// CompileCluster: the layers of compilation, composed. A map of the compile driver:
//
//   CompileCluster (here)
//     -> the disk cache layer (disk_cache_layer.h): CPU kernels with a disk key; looks
//        the cluster up, and on a miss asks the chain for an object file to store
//     -> the scheduler chain (scheduler_chain.h): lowers, schedules (stored schedule,
//        then the target's chain of schedulers, falling through on failure) and
//        compiles: JIT, or into an object file when asked
//   The kernels it returns share one launch contract (launch.h: argument checks,
//   buffer wrapping, thread counts): JitKernel (jit_kernel.h) and the ahead-of-time
//   AotKernel loaded from the disk cache (aot_kernel.h; the cache's directory, format
//   and eviction: disk_cache.h).
//
// Halide's errors, at compile and at run time, come back as absl::Status: every Halide
// call sits inside CatchHalideErrors, and no Halide handler may abort the process
// (docs/HALIDE14.md rule 4).
#include "compile/compile.h"

#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "braze/status.h"
#include "compile/disk_cache_layer.h"
#include "compile/scheduler_chain.h"
#include "device/features.h"

namespace braze {

absl::StatusOr<std::string> JitTargetString(const Device& device) {
  return device::JitTargetString(device);
}

absl::Status CompiledKernel::Run(absl::Span<const HostTensor* const> inputs,
                                 absl::Span<HostTensor* const> outputs) {
  std::vector<KernelArg> in, out;
  for (const HostTensor* t : inputs) in.push_back(KernelArg::Host(t));
  for (HostTensor* t : outputs) out.push_back(KernelArg{t, nullptr});
  return Launch(in, out);
}

absl::Status CompiledKernel::RunOnDevice(absl::Span<DeviceTensor* const> inputs,
                                         absl::Span<DeviceTensor* const> outputs) {
  std::vector<KernelArg> in, out;
  for (DeviceTensor* t : inputs) in.push_back(KernelArg::Device(t));
  for (DeviceTensor* t : outputs) out.push_back(KernelArg::Device(t));
  return Launch(in, out);
}

absl::StatusOr<std::unique_ptr<CompiledKernel>> CompileCluster(const ClusterSpec& spec,
                                                               const CompileOptions& options) {
  if (options.num_threads < 0) {
    return absl::InvalidArgumentError(absl::StrCat(spec.name.empty() ? "cluster" : spec.name,
                                                   ": num_threads must be >= 0, got ",
                                                   options.num_threads));
  }
  auto chain = [&](const std::string* object_path) {
    return compile::RunSchedulerChain(spec, options, object_path);
  };
  if (compile::DiskCacheApplies(options)) {
    return compile::CompileThroughDiskCache(spec, options, chain);
  }
  BRAZE_ASSIGN_OR_RETURN(compile::ProducedKernel produced, chain(nullptr));
  return std::move(produced.kernel);
}

}  // namespace braze
