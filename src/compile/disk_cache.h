// The persistent compile cache: CPU kernels compiled ahead of time into shared
// libraries in BRAZE_CACHE_DIR, so that a second process loads them instead of
// compiling (docs/DISK_CACHE.md).
//
// An entry is `<name>.so` (the kernel, compiled by Halide with NoRuntime and linked by
// the system's C compiler driver) and `<name>.meta` (the full key, the .so's size and
// CRC-32, and what the kernel needs to be launched: its argument layout, output types,
// scheduler and schedule text). Kernels bind to one Halide runtime per target,
// `runtime-<name>.so` in the same directory, built once (about 0.8 s) and loaded
// RTLD_GLOBAL. Every file is written to a temporary name and renamed into place, so
// readers never see a partial file and concurrent writers of one key are safe. A
// missing, truncated, corrupt or foreign entry is a miss, with one warning when it was
// damaged; the directory is kept under a size bound by deleting the least recently used
// entries (loads refresh an entry's time).
//
// The key includes the cluster key (ops, attributes, constants, shapes, scheduler), the
// Halide target, and the build IDs of the running executable and of libHalide, so a
// rebuilt Braze or another Halide never loads an old kernel.
//
// This is the storage: how entries are named, written, checked, locked and evicted.
// Building, loading and launching the libraries is compile/aot_kernel.h's; using the
// cache while compiling (look up, else compile an object and store it) is the layer in
// compile/disk_cache_layer.h.
#ifndef BRAZE_COMPILE_DISK_CACHE_H_
#define BRAZE_COMPILE_DISK_CACHE_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "compile/compile.h"
#include "compile/kernel_layout.h"

namespace braze {
namespace disk_cache {

// BRAZE_CACHE_DIR: the directory; "off" (or empty when set) turns the cache off.
// Unset: $XDG_CACHE_HOME/braze, else $HOME/.cache/braze. BRAZE_CACHE_MAX_MB: the size
// bound (default 1024). Read at each use, so a program (or test) may change them.
struct Settings {
  bool enabled = false;
  std::string dir;
  uint64_t max_bytes = uint64_t{1024} << 20;
};
Settings CurrentSettings();

// The full key of a cluster key (see above); empty when the build IDs are unknown (the
// cache is then not used).
std::string FullKey(const std::string& cluster_key, const std::string& target);

// Which build last stored a kernel for `cluster_key` and `target`: a line "exe <build
// id> halide <build id>" in `<name>.builds` beside the entries. An entry of another
// build is another key, so a rebuilt Braze or another Halide simply misses; this file
// lets the miss say why. RecordBuild writes it (after a store); StaleNote reads it:
// "disk entry stale: Halide build changed" (or Braze's, or both), empty when no other
// build stored this kernel.
void RecordBuild(const Settings& settings, const std::string& cluster_key,
                 const std::string& target);
std::string StaleNote(const Settings& settings, const std::string& cluster_key,
                      const std::string& target);
// The file RecordBuild writes (tests fake another build's with it).
std::string BuildsPath(const Settings& settings, const std::string& cluster_key,
                       const std::string& target);

// The kernel stored under `full_key`, or NotFound (a damaged entry is removed, with a
// warning). Other errors: the cache could not be used (the caller compiles).
// `runtime_target`: the kernel's target without "no_runtime" (the runtime's).
absl::StatusOr<std::unique_ptr<CompiledKernel>> Load(const Settings& settings,
                                                     const std::string& full_key,
                                                     const std::string& runtime_target,
                                                     const std::string& name, int num_threads);

// Stores the object file `object_path` (a kernel compiled with NoRuntime for
// `runtime_target`, function "braze_kernel") under `full_key`, with `layout` (what
// launching it needs, kept in the .meta file), and returns the kernel loaded from it.
absl::StatusOr<std::unique_ptr<CompiledKernel>> StoreAndLoad(
    const Settings& settings, const std::string& full_key, const std::string& runtime_target,
    const std::string& name, int num_threads, const std::string& object_path,
    const compile::KernelLayout& layout);

}  // namespace disk_cache
}  // namespace braze

#endif  // BRAZE_COMPILE_DISK_CACHE_H_
