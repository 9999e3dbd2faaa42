// The scheduler chain, the producer of compiled kernels: a cluster lowered to Halide
// Funcs, scheduled by the first schedule Halide accepts (the stored schedule, then the
// target's chain of schedulers, each falling through to the next on failure:
// schedule/scheduler.h), and compiled: JIT-compiled into a kernel, or, when the caller
// asks, compiled ahead of time into an object file.
//
// It knows nothing of caches. The disk cache is a layer above it (disk_cache_layer.h)
// that asks it for an object file on a miss; CompileCluster (compile.cc) composes the two.
//
// Internal header of src/compile; no Halide here.
#ifndef BRAZE_COMPILE_SCHEDULER_CHAIN_H_
#define BRAZE_COMPILE_SCHEDULER_CHAIN_H_

#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "absl/functional/function_ref.h"
#include "absl/status/statusor.h"
#include "compile/compile.h"
#include "compile/kernel_layout.h"
#include "lower/cluster_spec.h"

namespace braze {
namespace compile {

// What a producer of kernels gives: a JIT-compiled kernel, or an object file.
struct ProducedKernel {
  // The JIT-compiled kernel; null when an object file was written instead.
  std::unique_ptr<CompiledKernel> kernel;
  // Set when the object file asked for was written: what launching it needs. The object
  // has one function, "braze_kernel" (its arguments: the non-elided inputs, then the
  // pipeline's outputs), compiled for ObjectTarget() with no runtime of its own.
  std::optional<KernelLayout> object;
  // Why an object file was asked for and a JIT kernel made instead ("it embeds a
  // constant buffer"); empty otherwise (also when there was nothing to compile).
  std::string no_object;
  // The kernel's CompiledKernel::schedule_note (already set on `kernel`).
  std::string schedule_note;
  // With `object`: JIT-compiles the pipeline the object was compiled from, as scheduled
  // (nothing is scheduled again), for a caller that cannot use the object after all.
  // Called at most once: the kernel takes the pipeline.
  std::function<absl::StatusOr<std::unique_ptr<CompiledKernel>>()> jit_instead;
};

// A producer: given an object file's path, compiles into it; given null, JIT-compiles.
using KernelProducer =
    absl::FunctionRef<absl::StatusOr<ProducedKernel>(const std::string* object_path)>;

// Lowers `spec`, schedules it and compiles the first schedule Halide accepts (see
// above): into ProducedKernel::kernel, or into the file `object_path` when it is given
// and the device is a CPU. Lowering errors are returned as they are (no schedule can fix
// them); when every schedule fails, Internal naming each one's failure. Requires
// options.num_threads >= 0 (CompileCluster checks it).
absl::StatusOr<ProducedKernel> RunSchedulerChain(const ClusterSpec& spec,
                                                 const CompileOptions& options,
                                                 const std::string* object_path);

// The cores a CPU kernel's schedule and GEMM calls are sized for: options.num_threads,
// else every hardware thread.
int Parallelism(const CompileOptions& options);

// The target of the object files RunSchedulerChain writes for `options.device`: its JIT
// target without "jit" (the Halide runtime such objects bind to is built for it).
// InvalidArgument "<name>: bad Halide target: ..." when HL_JIT_TARGET does not parse.
absl::StatusOr<std::string> ObjectTarget(const CompileOptions& options, const std::string& name);

}  // namespace compile
}  // namespace braze

#endif  // BRAZE_COMPILE_SCHEDULER_CHAIN_H_
