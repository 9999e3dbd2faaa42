// Kernels compiled ahead of time into shared libraries, as the disk cache keeps them:
// linking a Halide object file into a library (the system's C compiler driver), the one
// Halide runtime every such library binds to, and the AotKernel that launches one
// through the launch contract (launch.h).
//
// Kernel objects are compiled with no runtime of their own (Halide's NoRuntime): each
// binds to one runtime per process, Halide's standalone runtime for the target plus
// Braze's extern trampolines (the CPU GEMM library's extern stages and the
// streaming-store copy, which Braze's static libraries do not export), loaded
// RTLD_GLOBAL with Braze's handlers installed: errors recorded instead of Halide's
// abort, prints to the log, allocations through Braze's buffer cache
// (device/jit_memory.h), parallel loops on Braze's thread pool (device/thread_pool.h).
//
// Where these files live, how they are named, checked and evicted is the disk cache's
// business (disk_cache.h); this file only builds, loads and runs them.
//
// Internal header of src/compile; no Halide here.
#ifndef BRAZE_COMPILE_AOT_KERNEL_H_
#define BRAZE_COMPILE_AOT_KERNEL_H_

#include <memory>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "compile/compile.h"
#include "compile/kernel_layout.h"

namespace braze {
namespace compile {

// `cc -shared -o so_path object_path`, with the system's C compiler driver ($CC, else
// cc). FailedPrecondition when the driver cannot be run, Internal when it fails.
absl::Status LinkShared(const std::string& object_path, const std::string& so_path);

// The source of Braze's extern trampolines, part of every runtime BuildRuntime makes (a
// runtime with other trampolines is another file).
const char* RuntimeExternsSource();

// Builds the Halide runtime for `target` (a target string without "jit") with Braze's
// extern trampolines into the shared library `so_path`.
absl::Status BuildRuntime(const std::string& target, const std::string& so_path);

// The runtime this process loaded, if any: one per process, as its symbols are global.
struct LoadedRuntime {
  std::string target;
  std::string path;  // never evicted by this process
};
std::optional<LoadedRuntime> CurrentRuntime();

// Loads the runtime library `so_path`, built by BuildRuntime for `target`, and installs
// Braze's handlers and extern addresses in it. DataLoss when it cannot be loaded or is
// no runtime Braze built (the caller removes the file); FailedPrecondition when this
// process already loaded one.
absl::Status LoadRuntime(const std::string& so_path, const std::string& target);

// The kernel in the library `so_path` (its function braze_kernel_argv, bound to the
// loaded runtime), named `name` in errors. `loaded`: it was found in the cache rather
// than just compiled (CompiledKernel::loaded_from_disk). DataLoss when it cannot be
// opened.
absl::StatusOr<std::unique_ptr<CompiledKernel>> OpenKernel(const std::string& so_path,
                                                           const std::string& name,
                                                           const KernelLayout& layout,
                                                           int num_threads, bool loaded);

}  // namespace compile
}  // namespace braze

#endif  // BRAZE_COMPILE_AOT_KERNEL_H_
