// The disk cache as a layer over a producer of kernels (see disk_cache_layer.h).
#include "compile/disk_cache_layer.h"

#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "braze/status.h"
#include "compile/disk_cache.h"
#include "device/cpu_gemm.h"
#include "device/features.h"
#include "ir/logging.h"

namespace braze {
namespace compile {

namespace {

std::atomic<bool> disk_cache_broken{false};

// The disk cache could not be used (no C compiler driver, an unwritable directory):
// said once per process, then kernels are JIT-compiled as without it.
void DiskCacheUnusable(const absl::Status& why) {
  disk_cache_broken = true;
  static std::once_flag once;
  std::call_once(
      once, [&] { LogWarning(absl::StrCat("disk cache off for this process: ", why.message())); });
}

// Whether the cluster has a MatMul, BatchMatMul or convolution (which oneDNN may take).
bool HasMatMul(const ClusterSpec& spec) {
  for (int id : spec.nodes) {
    const OpKind op = spec.graph->node(id).op();
    if (op == OpKind::kMatMul || op == OpKind::kBatchMatMul || op == OpKind::kConv2D ||
        op == OpKind::kConv2DBackpropInput || op == OpKind::kConv2DBackpropFilter) {
      return true;
    }
  }
  return false;
}

// "a; b", or whichever is not empty.
std::string JoinNotes(const std::string& a, const std::string& b) {
  return absl::StrCat(a, !a.empty() && !b.empty() ? "; " : "", b);
}

// The producer's JIT kernel (no object file asked for), with `disk_note`.
absl::StatusOr<std::unique_ptr<CompiledKernel>> JitKernelOf(KernelProducer producer,
                                                            const std::string& disk_note) {
  BRAZE_ASSIGN_OR_RETURN(ProducedKernel produced, producer(nullptr));
  produced.kernel->set_disk_note(disk_note);
  return std::move(produced.kernel);
}

}  // namespace

bool DiskCacheApplies(const CompileOptions& options) {
  return !options.disk_key.empty() && !disk_cache_broken.load() &&
         !device::FeaturesOf(options.device).device_memory;
}

absl::StatusOr<std::unique_ptr<CompiledKernel>> CompileThroughDiskCache(
    const ClusterSpec& spec, const CompileOptions& options, KernelProducer producer) {
  const std::string name = spec.name.empty() ? "cluster" : spec.name;
  const disk_cache::Settings settings = disk_cache::CurrentSettings();
  BRAZE_ASSIGN_OR_RETURN(const std::string runtime_target, ObjectTarget(options, name));
  if (!settings.enabled) return JitKernelOf(producer, "");
  // Whether the GEMM library loads here (libdnnl may be gone since a kernel calling it
  // was stored: that kernel would fail, where a compile here lowers its matmuls to
  // Halide loops), asked only of clusters with a matmul; and the cores a kernel's
  // schedule and GEMM calls were sized for, when the options leave it to the machine (a
  // cache directory shared by machines of other sizes).
  const bool gemm = options.cpu_gemm_library && HasMatMul(spec) && CpuGemmAvailable().ok();
  const std::string full_key = disk_cache::FullKey(
      absl::StrCat(options.disk_key, ";gemm=", gemm ? 1 : 0, ";cores=", Parallelism(options)),
      runtime_target);
  if (full_key.empty()) return JitKernelOf(producer, "");  // no build IDs

  absl::StatusOr<std::unique_ptr<CompiledKernel>> stored =
      disk_cache::Load(settings, full_key, runtime_target, name, options.num_threads);
  if (stored.ok()) {
    // The stored schedule it was compiled with, as the compile said it: the schedule's
    // first line, after the loaded kernel's own ("// ahead of time, <file>").
    std::string text = (*stored)->schedule_text();
    text.erase(0, text.find('\n') + 1);
    if (options.stored_schedule && text.rfind("// stored schedule ", 0) == 0) {
      (*stored)->set_schedule_note(text.substr(3, text.find('\n') - 3));
    }
    return stored;
  }
  if (!absl::IsNotFound(stored.status())) {
    DiskCacheUnusable(stored.status());
    return JitKernelOf(producer, "");
  }
  // Why the cache missed, when another build stored this kernel.
  const std::string stale_note = disk_cache::StaleNote(settings, options.disk_key, runtime_target);
  char path[] = "/tmp/braze_kernel_XXXXXX.o";
  const int fd = mkstemps(path, 2);
  if (fd < 0) return JitKernelOf(producer, stale_note);  // no temporary file: the cache untouched
  close(fd);
  const std::string object_path = path;
  absl::StatusOr<ProducedKernel> produced = producer(&object_path);
  if (!produced.ok() || !produced->object) {
    std::remove(object_path.c_str());
    if (!produced.ok()) return produced.status();
    const std::string why =
        produced->no_object.empty()
            ? std::string()
            : absl::StrCat("not stored in the disk cache: ", produced->no_object);
    produced->kernel->set_disk_note(JoinNotes(stale_note, why));
    return std::move(produced->kernel);
  }
  absl::StatusOr<std::unique_ptr<CompiledKernel>> kernel =
      disk_cache::StoreAndLoad(settings, full_key, runtime_target, name, options.num_threads,
                               object_path, *produced->object);
  std::remove(object_path.c_str());
  if (kernel.ok()) {
    disk_cache::RecordBuild(settings, options.disk_key, runtime_target);
    if (!stale_note.empty()) (*kernel)->set_disk_note(stale_note + "; compiled and stored");
    (*kernel)->set_schedule_note(produced->schedule_note);
    return kernel;
  }
  // Not stored: JIT-compiled after all (the schedule is already on the pipeline).
  DiskCacheUnusable(kernel.status());
  BRAZE_ASSIGN_OR_RETURN(std::unique_ptr<CompiledKernel> jit, produced->jit_instead());
  jit->set_disk_note(JoinNotes(
      stale_note, absl::StrCat("not stored in the disk cache: ", kernel.status().message())));
  return jit;
}

}  // namespace compile
}  // namespace braze
