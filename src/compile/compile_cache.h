// The process-wide compile cache (as XLA's, shared by every session): key -> compiled
// kernel. Thread-safe; concurrent callers asking for the same key wait for one compile.
// Failed compiles are remembered too, so a broken cluster is not recompiled every run.
// Bounded: least-recently-used kernels are dropped past the capacity (kernels in use by
// a plan stay alive through their shared_ptr).
#ifndef BRAZE_COMPILE_COMPILE_CACHE_H_
#define BRAZE_COMPILE_COMPILE_CACHE_H_

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "absl/status/statusor.h"
#include "compile/compile.h"

namespace braze {

// A compiled kernel shared between sessions; Run calls are serialized by `mu`.
struct SharedKernel {
  std::unique_ptr<CompiledKernel> kernel;
  std::mutex mu;
};

class CompileCache {
 public:
  using CompileFn = std::function<absl::StatusOr<std::unique_ptr<CompiledKernel>>()>;

  explicit CompileCache(size_t capacity = 4096) : capacity_(capacity) {}
  static CompileCache& Global();

  struct Result {
    absl::StatusOr<std::shared_ptr<SharedKernel>> kernel;
    bool hit = false;       // found (compiled earlier or by a concurrent caller)
    double compile_ms = 0;  // this call's compile time, 0 on a hit
    bool evicted = false;   // a miss for a key that was compiled and evicted before
    // Set by the caller, not the cache: the symbolic dims (lower/cluster_spec.h) of the
    // spec the kernel was compiled for, empty when it serves only concrete sizes.
    std::vector<std::vector<int>> input_symbols;
    // With input_symbols: the input types it was compiled for (each class at its
    // estimate, which may differ from this run's sizes).
    std::vector<TensorType> input_types;
  };
  Result GetOrCompile(const std::string& key, const CompileFn& compile);

  void set_capacity(size_t capacity);
  size_t size() const;
  void Clear();
  struct Counters {
    int64_t hits = 0, misses = 0, evictions = 0;
    double compile_ms = 0;
  };
  Counters counters() const;

 private:
  struct Entry {
    bool ready = false;
    absl::StatusOr<std::shared_ptr<SharedKernel>> kernel{absl::UnknownError("compiling")};
    std::list<std::string>::iterator lru;
  };
  void EvictLocked();

  mutable std::mutex mu_;
  std::condition_variable ready_cv_;
  size_t capacity_;
  std::unordered_map<std::string, std::shared_ptr<Entry>> entries_;
  std::list<std::string> lru_;  // front = most recent
  // Keys evicted (for --log_compiles' reasons); cleared when it outgrows 4x capacity.
  std::unordered_set<std::string> evicted_;
  Counters counters_;
};

}  // namespace braze

#endif  // BRAZE_COMPILE_COMPILE_CACHE_H_
