#include "compile/compile_cache.h"

#include <chrono>
#include <exception>

#include "absl/strings/str_cat.h"

namespace braze {

CompileCache& CompileCache::Global() {
  static CompileCache* cache = new CompileCache();
  return *cache;
}

namespace {

// A failed compile is remembered under its key, and a key holds no names: the message
// names the nodes of the cluster that compiled first, perhaps of another step or graph
// (a strict Run's InvalidArgument named a node of another graph as its own). Said so.
absl::Status EarlierFailure(const absl::Status& failed) {
  return absl::Status(failed.code(),
                      absl::StrCat("a cluster of the same ops, shapes and options failed to "
                                   "compile earlier (its node names are in the message): ",
                                   failed.message()));
}

}  // namespace

CompileCache::Result CompileCache::GetOrCompile(const std::string& key, const CompileFn& compile) {
  std::shared_ptr<Entry> entry;
  bool evicted = false;
  {
    std::unique_lock<std::mutex> lock(mu_);
    auto it = entries_.find(key);
    if (it != entries_.end()) {
      entry = it->second;
      lru_.splice(lru_.begin(), lru_, entry->lru);
      ++counters_.hits;
      ready_cv_.wait(lock, [&] { return entry->ready; });
      if (!entry->kernel.ok()) return Result{EarlierFailure(entry->kernel.status()), true, 0};
      return Result{entry->kernel, true, 0};
    }
    evicted = evicted_.erase(key) > 0;
    entry = std::make_shared<Entry>();
    lru_.push_front(key);
    entry->lru = lru_.begin();
    entries_[key] = entry;
    ++counters_.misses;
  }
  // Compile outside the lock; others asking for this key wait on ready_cv_.
  auto start = std::chrono::steady_clock::now();
  // An exception out of `compile` (no memory; Halide's errors are Statuses already) is
  // this key's error: the entry must become ready, or every later caller of the key
  // would wait on ready_cv_ forever.
  absl::StatusOr<std::unique_ptr<CompiledKernel>> compiled =
      absl::InternalError("the compile of a cluster threw an unknown exception");
  try {
    compiled = compile();
  } catch (const std::exception& e) {
    compiled = absl::InternalError(absl::StrCat("the compile of a cluster threw: ", e.what()));
  } catch (...) {
  }
  double ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  absl::StatusOr<std::shared_ptr<SharedKernel>> kernel;
  if (compiled.ok()) {
    auto shared = std::make_shared<SharedKernel>();
    shared->kernel = *std::move(compiled);
    kernel = std::move(shared);
  } else {
    kernel = compiled.status();
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    entry->kernel = kernel;
    entry->ready = true;
    counters_.compile_ms += ms;
    EvictLocked();
  }
  ready_cv_.notify_all();
  return Result{kernel, false, ms, evicted};
}

void CompileCache::EvictLocked() {
  while (entries_.size() > capacity_ && !lru_.empty()) {
    auto it = entries_.find(lru_.back());
    // Entries still compiling stay: their waiters hold them.
    if (it != entries_.end() && !it->second->ready) break;
    if (it != entries_.end()) entries_.erase(it);
    if (evicted_.size() >= 4 * capacity_ + 16) evicted_.clear();
    evicted_.insert(lru_.back());
    lru_.pop_back();
    ++counters_.evictions;
  }
}

void CompileCache::set_capacity(size_t capacity) {
  std::lock_guard<std::mutex> lock(mu_);
  capacity_ = capacity;
  EvictLocked();
}

size_t CompileCache::size() const {
  std::lock_guard<std::mutex> lock(mu_);
  return entries_.size();
}

void CompileCache::Clear() {
  std::lock_guard<std::mutex> lock(mu_);
  for (auto it = entries_.begin(); it != entries_.end();) {
    if (it->second->ready) {
      lru_.erase(it->second->lru);
      it = entries_.erase(it);
    } else {
      ++it;
    }
  }
}

CompileCache::Counters CompileCache::counters() const {
  std::lock_guard<std::mutex> lock(mu_);
  return counters_;
}

}  // namespace braze
