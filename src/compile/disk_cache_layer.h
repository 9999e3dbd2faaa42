// The disk cache as a layer of compilation, over a producer of kernels (the scheduler
// chain, compile/scheduler_chain.h), which knows nothing of it:
//
//   CompileCluster (compile.cc)
//     -> CompileThroughDiskCache: look the cluster up by its key (compile/disk_cache.h)
//          hit  -> the stored kernel, loaded
//          miss -> producer(object file) -> store it, load it back
//     -> producer (no object file): a JIT kernel
//
// CPU kernels only; the key is the options' cluster key plus what the stored code
// depends on besides it (the target, whether the CPU GEMM library loads, the cores the
// schedule was sized for, the build IDs of Braze and Halide). The layer owns the
// process's "disk cache unusable" latch: once the cache fails in a way a retry would meet
// again (no C compiler driver, an unwritable directory), one warning says so and every
// later kernel is JIT-compiled as without it. What --log_compiles says of the cache for
// a kernel (CompiledKernel::disk_note) is written here.
//
// Internal header of src/compile; no Halide here.
#ifndef BRAZE_COMPILE_DISK_CACHE_LAYER_H_
#define BRAZE_COMPILE_DISK_CACHE_LAYER_H_

#include <memory>

#include "absl/status/statusor.h"
#include "compile/compile.h"
#include "compile/scheduler_chain.h"
#include "lower/cluster_spec.h"

namespace braze {
namespace compile {

// Whether CompileCluster goes through the layer: a CPU kernel with a key
// (options.disk_key), while the cache has not been found unusable in this process.
// BRAZE_CACHE_DIR=off (disk_cache::CurrentSettings) is asked by the layer itself.
bool DiskCacheApplies(const CompileOptions& options);

// The kernel for `spec`: loaded from the disk cache, else compiled by `producer` into an
// object file that is stored and loaded back, else (the producer made no object, or
// the cache could not take it) JIT-compiled. The producer's errors are returned as
// they are; the cache's own never fail a compile.
absl::StatusOr<std::unique_ptr<CompiledKernel>> CompileThroughDiskCache(
    const ClusterSpec& spec, const CompileOptions& options, KernelProducer producer);

}  // namespace compile
}  // namespace braze

#endif  // BRAZE_COMPILE_DISK_CACHE_LAYER_H_
