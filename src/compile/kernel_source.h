// The front door to compiled kernels, as TensorFlow's DeviceCompiler::CompileIfNeeded:
// a plan step asks its KernelSource for the kernel of an input signature and gets one
// that is ready, not ready yet (the caller runs the step op by op meanwhile), or failed
// with the reason (the caller falls back, or reports it in strict mode).
//
// The source owns everything that decides which kernel a step gets and when:
//   - the cache key (compile/cluster_key.h) and the stored-schedule lookup
//     (schedule/stored_schedule.h), whose parameters enter the key;
//   - symbolic shapes: which input dims are one symbol class (a -1 in the graph), and
//     the kernel for small sizes of a class;
//   - the memory cache (compile/compile_cache.h, process-wide) and, below it, the disk
//     cache, which CompileCluster (compile/compile.h) consults by options.disk_key;
//   - the compile policies (CompilePolicy: eager, lazy, async) and the recompile guard
//     (XLA's "megamorphic" rule), with their per-step state.
// It knows nothing of sessions, plans or memory spaces: the runtime translates its
// options into KernelSourceOptions once per step and launches what it gets.
//
// Thread-compatible: one step's source is used by one Run at a time. Background
// compiles (kAsync) work on a snapshot of the cluster, never on the caller's graph.
#ifndef BRAZE_COMPILE_KERNEL_SOURCE_H_
#define BRAZE_COMPILE_KERNEL_SOURCE_H_

#include <functional>
#include <future>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "braze/session.h"
#include "compile/compile.h"
#include "compile/compile_cache.h"
#include "lower/cluster_spec.h"

namespace braze {

struct KernelSourceOptions {
  // How the kernel is compiled: scheduler, threads, device, the CPU GEMM library.
  CompileOptions compile;
  // Where stored schedules are looked up, in order; empty: none are used.
  std::vector<std::string> schedule_dirs;
  // Compiled CPU kernels are kept in (and loaded from) the disk cache.
  bool disk_cache = false;
  // An input dim the graph declares -1 compiles as a symbol: one kernel for its sizes.
  bool symbolic_shapes = false;
  CompilePolicy policy = CompilePolicy::kEager;
  int lazy_compile_threshold = 2;  // kLazy: compile at the K-th run of a signature
  // The recompile guard: a step that met more signatures than this, with few runs
  // each, is no longer compiled for new ones. <= 0: no guard.
  int max_signatures = 10;
  // The caller can run the step without its kernel (op by op): the policies and the
  // guard may answer "not ready". False in strict mode and for steps with no fallback:
  // every answer is then ready or failed.
  bool can_wait = true;
  // How messages name the step: "cluster 'cluster_0'" or "node 'x' (Exp)".
  std::string what;
  bool is_cluster = true;  // for the compile log's "cluster 'name'" / "'name'"
  // --log_compiles: one line per kernel obtained, with why and what the caches had.
  bool log_compiles = false;
  // Testing hook (SessionOptions::inject_compile_failure): compiling fails at once.
  std::function<bool(const std::string& name)> inject_failure;
};

// One answer of KernelSource::Get.
struct KernelAnswer {
  enum class State { kReady, kNotReady, kFailed };
  // Why a kernel is not ready: the lazy policy's count not reached, a background
  // compile under way, or the recompile guard refusing a new signature.
  enum class Wait { kNone, kLazy, kAsync, kMegamorphic };
  // Where a ready (or failed) kernel came from, for the session's counters.
  enum class Origin { kNone, kMemoryCache, kDiskCache, kCompiled };

  State state = State::kNotReady;
  Wait wait = Wait::kNone;
  Origin origin = Origin::kNone;
  double compile_ms = 0;                 // kCompiled: this compile's wall time
  std::shared_ptr<SharedKernel> kernel;  // kReady
  absl::Status error;                    // kFailed: why it could not be compiled
  std::vector<TensorType> output_types;  // kReady: the cluster outputs' concrete types
  // A symbolic kernel: the symbol class of each input dim, and the input types it was
  // compiled for (each class at its estimate); both empty for a concrete kernel.
  std::vector<std::vector<int>> input_symbols;
  std::vector<TensorType> compiled_types;
};

class KernelSource {
 public:
  // `cluster`: the graph, name, nodes, inputs and outputs (its types are set per
  // signature). The graph must outlive the source.
  KernelSource(ClusterSpec cluster, KernelSourceOptions options);
  ~KernelSource();  // waits for background compiles
  KernelSource(const KernelSource&) = delete;
  KernelSource& operator=(const KernelSource&) = delete;

  // The kernel for input types `types`; `node_types` are the cluster nodes' types for
  // them (parallel to the cluster's nodes), inferred by the caller. `ahead`: a
  // compile-ahead call (Session::Compile), which the policies never defer.
  KernelAnswer Get(const std::vector<TensorType>& types, std::vector<TensorType> node_types,
                   bool ahead = false);
  // Counts one run of the step, whether or not it asked for a kernel: the guard
  // weighs signatures against runs.
  void CountRun() { ++runs_; }
  bool megamorphic() const { return megamorphic_; }
  // Blocks until no background compile is under way (tests, shutdown).
  void WaitForBackgroundCompiles();

  // The symbol class of each input dim for `types` (ClusterSpec::input_symbols);
  // empty when no dim is symbolic or symbolic shapes do not apply.
  std::vector<std::vector<int>> InputSymbols(const std::vector<TensorType>& types) const;

 private:
  ClusterSpec SpecFor(const std::vector<TensorType>& types,
                      std::vector<TensorType> node_types) const;
  // True when `types` must not be compiled (the guard tripped and has not met them),
  // after warning once when it trips.
  bool Megamorphic(const std::vector<TensorType>& types);
  std::optional<std::shared_future<CompileCache::Result>> CompileInBackground(
      const ClusterSpec& spec);
  KernelAnswer Answer(const std::vector<TensorType>& types, const ClusterSpec& spec,
                      const std::string& reason, const CompileCache::Result& result);

  const ClusterSpec cluster_;
  const KernelSourceOptions options_;
  // The recompile guard: distinct signatures met (as kernels see them), runs so far.
  std::vector<std::vector<TensorType>> seen_;
  int64_t runs_ = 0;
  bool megamorphic_ = false;
  // A symbolic kernel was refused (a Concat along the dynamic dim, say): every size
  // compiles, so the guard counts concrete signatures.
  bool symbolic_refused_ = false;
  std::vector<TensorType> last_types_;    // of the last kernel asked for, for the log
  std::map<std::string, int> lazy_runs_;  // kLazy: runs per signature so far
  std::map<std::string, std::shared_future<CompileCache::Result>> pending_;  // kAsync
};

// The guard's rule (as XLA's kMinExecutionsPerCompile): a step that met more than
// max_signatures signatures with fewer than this many runs each on average is
// megamorphic.
inline constexpr int64_t kRunsPerSignature = 50;

}  // namespace braze

#endif  // BRAZE_COMPILE_KERNEL_SOURCE_H_
