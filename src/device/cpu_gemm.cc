// CPU GEMMs through oneDNN; see cpu_gemm.h.
//
// Halide buffers are column-major in Halide's dim order, which is Braze's row-major:
// dim 0 is a row's contiguous run, dim 1's stride is the leading dimension. So a
// Halide [n, m] buffer is the row-major m x n matrix oneDNN's matmul describes with
// strides {ld, 1}, a transposed operand with {1, ld}, and no operand is swapped
// (cublas_gemm.cc, column-major, has to swap them).
#include "device/cpu_gemm.h"

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "HalideRuntime.h"
#include "absl/container/flat_hash_map.h"
#include "braze/dtype.h"
#include "device/onednn_matmul.h"
#include "device/thread_pool.h"

namespace braze {
namespace {

using onednn::Library;
using onednn::Loaded;

#if BRAZE_HAVE_DNNL
using onednn::GemmKey;
using onednn::kBias;
using onednn::kBiasRelu;
using onednn::kNoEpilogue;
using onednn::Prepare;
using onednn::Prepared;
using onednn::ReluPostOpsChecked;
using onednn::RunGemm;

// braze::Relu (x < 0 ? 0 : x, NaN kept) over rows x cols at c, rows ldc apart, elements
// of type `t` (f32 or bf16): the epilogue's ReLU where the primitive does not apply it.
// A bf16 ReLU is exact on the stored value (a negative becomes +0, anything else stays).
void ReluInPlace(void* c, int64_t rows, int64_t cols, int64_t ldc, dnnl_data_type_t t) {
  for (int64_t i = 0; i < rows; ++i) {
    if (t == dnnl_bf16) {
      uint16_t* row = static_cast<uint16_t*>(c) + i * ldc;
      for (int64_t j = 0; j < cols; ++j) {
        if (BF16BitsToFloat(row[j]) < 0.0f) row[j] = 0;
      }
    } else {
      float* row = static_cast<float*>(c) + i * ldc;
      for (int64_t j = 0; j < cols; ++j) row[j] = row[j] < 0.0f ? 0.0f : row[j];
    }
  }
}

// oneDNN's type for a buffer's elements: f32, bf16, or undef for any other.
dnnl_data_type_t ElementType(const halide_buffer_t* b) {
  if (b->type.lanes != 1) return dnnl_data_type_undef;
  if (b->type.code == halide_type_float && b->type.bits == 32) return dnnl_f32;
  if (b->type.code == halide_type_bfloat && b->type.bits == 16) return dnnl_bf16;
  return dnnl_data_type_undef;
}

// The type combinations the call runs: f32 throughout, or bf16 operands (f32
// accumulation) with an f32 or bf16 product; the bias is of the product's type.
bool TypesSupported(dnnl_data_type_t ab, dnnl_data_type_t b, dnnl_data_type_t c,
                    dnnl_data_type_t bias) {
  const bool operands = ab == b && (ab == dnnl_f32 || ab == dnnl_bf16);
  const bool product = c == dnnl_f32 || (c == dnnl_bf16 && ab == dnnl_bf16);
  return operands && product && (bias == dnnl_data_type_undef || bias == c);
}

std::atomic<bool> relu_post_ops_allowed{true};  // AllowCpuGemmReluPostOpsForTesting

// The prepared primitive for `g`, made at its first use; `packed`: one reading b in
// oneDNN's packed layout (null where that layout is b's own). The cache is bounded: past
// kMaxPrepared configurations (symbolic shapes meet many) it starts again; a primitive
// in use stays alive through its caller's reference. A call cut among the pool's threads
// holds one configuration per part (up to kMaxParts, below, and twice that with a packed
// b), so the bound leaves room for a training step's dozen matmuls cut 64 ways: a
// smaller one would start again at every step of a many-core machine and make every
// primitive anew.
std::shared_ptr<Prepared> Lookup(const Library& lib, const GemmKey& g, bool packed) {
  constexpr size_t kMaxPrepared = 4096;
  static std::mutex mu;
  static auto* cache =
      new absl::flat_hash_map<std::pair<GemmKey, bool>, std::shared_ptr<Prepared>>();
  std::lock_guard<std::mutex> lock(mu);
  auto it = cache->find({g, packed});
  if (it != cache->end()) return it->second;
  if (cache->size() >= kMaxPrepared) cache->clear();
  std::shared_ptr<Prepared> p;
  if (g.epilogue == kBiasRelu && relu_post_ops_allowed.load()) {
    p = Prepare(lib, g, /*relu_post_ops=*/true, packed);
    if (p != nullptr && !ReluPostOpsChecked(lib, p->impl)) p = nullptr;
  }
  // No ReLU, or oneDNN refused its post-ops, or they are not confirmed: the call's loop.
  if (p == nullptr) p = Prepare(lib, g, /*relu_post_ops=*/false, packed);
  // A packed configuration oneDNN has no packed layout for stays null (the plain one
  // runs); a plain one that failed (memory) is tried again at the next call.
  if (p != nullptr || packed) cache->emplace(std::make_pair(g, packed), p);
  return p;
}

// A constant b as a call reads it: `id` names the constant's contents (the lowering's
// hash of its bytes, never the address, which a later constant may reuse), `offset`
// the element read first; with the region read (k x n, ldb, transposed or not). The
// batch size m is not part of it: configurations of several m share a packed copy
// where their layouts agree.
struct PackedKey {
  uint64_t id;
  int64_t offset, k, n, ldb;
  bool tb;
  bool operator==(const PackedKey& o) const {
    return id == o.id && offset == o.offset && k == o.k && n == o.n && ldb == o.ldb && tb == o.tb;
  }
  template <typename H>
  friend H AbslHashValue(H h, const PackedKey& k) {
    return H::combine(std::move(h), k.id, k.offset, k.k, k.n, k.ldb, k.tb);
  }
};

std::atomic<int64_t> weight_packs{0};   // CpuGemmWeightPacks
std::atomic<int64_t> batched_calls{0};  // CpuGemmBatchedCalls
std::atomic<int64_t> split_calls{0};    // CpuGemmSplitCalls
std::atomic<int64_t> not_cut_calls{0};  // CpuGemmNotCutCalls
// CpuGemmPackedCacheStatsForTesting's counters.
std::atomic<int64_t> packed_evictions{0}, packed_row_major_reads{0};

// The packed copies of the process: at most kPackedBudget bytes, the least recently
// used evicted first (one in use stays alive through its caller's reference). A
// constant packed kMaxPacks times (evicted again and again: the working set exceeds
// the budget) is not packed again: its calls read it row-major, as before packing.
class PackedCache {
 public:
  static constexpr size_t kPackedBudget = size_t{1} << 30;
  static constexpr int kMaxPacks = 4;

  // Whether `key` may still be packed.
  bool MayPack(const PackedKey& key) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = packs_.find(key);
    const bool may = it == packs_.end() || it->second < kMaxPacks;
    if (!may) packed_row_major_reads.fetch_add(1);
    return may;
  }

  // b in p's packed layout, packed at its first use (null: not packed). The caller holds
  // p.mu; two Prepared of one configuration (after Lookup's cache started again) may
  // each pack a copy, which is only work done twice.
  std::shared_ptr<void> Get(const Library& lib, Prepared& p, const PackedKey& key, const void* b) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (p.packed_b_bytes > budget_ / 2) return nullptr;
      for (Entry& e : entries_[key]) {
        if (lib.api.memory_desc_equal(&e.layout, &p.packed_b) != 0) {
          e.last_use = ++clock_;
          return e.bytes;
        }
      }
    }
    std::shared_ptr<void> packed = PackWeights(lib, p, b);
    if (packed == nullptr) return nullptr;
    weight_packs.fetch_add(1);
    std::lock_guard<std::mutex> lock(mu_);
    if (packs_.size() > 65536) packs_.clear();  // a long-running process's tally
    ++packs_[key];
    entries_[key].push_back(Entry{p.packed_b, packed, p.packed_b_bytes, ++clock_});
    bytes_ += p.packed_b_bytes;
    EvictDownTo(budget_);
    return packed;
  }

  // Tests (SetCpuGemmPackedBudgetForTesting, ResetCpuGemmPackedCacheForTesting, stats).
  void SetBudget(size_t bytes) {
    std::lock_guard<std::mutex> lock(mu_);
    budget_ = bytes == 0 ? kPackedBudget : bytes;
    EvictDownTo(budget_);
  }
  void Reset() {
    std::lock_guard<std::mutex> lock(mu_);
    entries_.clear();
    packs_.clear();
    bytes_ = 0;
  }
  void Held(int64_t* copies, int64_t* bytes) {
    std::lock_guard<std::mutex> lock(mu_);
    *copies = 0;
    for (const auto& [key, list] : entries_) *copies += static_cast<int64_t>(list.size());
    *bytes = static_cast<int64_t>(bytes_);
  }

 private:
  struct Entry {
    dnnl_memory_desc_t layout;  // read only in the layout it was packed in
    std::shared_ptr<void> bytes;
    size_t size;
    uint64_t last_use;
  };

  void EvictDownTo(size_t budget) {
    while (bytes_ > budget) {
      auto oldest = entries_.end();
      size_t index = 0;
      uint64_t last = UINT64_MAX;
      for (auto it = entries_.begin(); it != entries_.end(); ++it) {
        for (size_t i = 0; i < it->second.size(); ++i) {
          if (it->second[i].last_use < last) {
            last = it->second[i].last_use;
            oldest = it;
            index = i;
          }
        }
      }
      if (oldest == entries_.end()) return;
      bytes_ -= oldest->second[index].size;
      packed_evictions.fetch_add(1);
      oldest->second.erase(oldest->second.begin() + index);
      if (oldest->second.empty()) entries_.erase(oldest);
    }
  }

  std::mutex mu_;
  absl::flat_hash_map<PackedKey, std::vector<Entry>> entries_;
  absl::flat_hash_map<PackedKey, int> packs_;  // how often each was packed
  size_t bytes_ = 0;
  uint64_t clock_ = 0;
  size_t budget_ = kPackedBudget;  // SetCpuGemmPackedBudgetForTesting
};

PackedCache& Packed() {
  static auto* cache = new PackedCache;
  return *cache;
}
#endif

bool IsBoundsQuery(const halide_buffer_t* b) { return b->host == nullptr && b->device == 0; }

// The offset in elements of the element at (dims 0 and 1 at their mins, `batch` for
// dims 2...).
int64_t Offset(const halide_buffer_t* b, int64_t d0, int64_t d1, const int64_t* batch) {
  int64_t offset = (d0 - b->dim[0].min) * b->dim[0].stride;
  offset += (d1 - b->dim[1].min) * static_cast<int64_t>(b->dim[1].stride);
  for (int d = 2; d < b->dimensions; ++d) {
    offset += (batch[d - 2] - b->dim[d].min) * static_cast<int64_t>(b->dim[d].stride);
  }
  return offset;
}

// Its address (elements of the buffer's own type).
uint8_t* At(const halide_buffer_t* b, int64_t d0, int64_t d1, const int64_t* batch) {
  return b->host + Offset(b, d0, d1, batch) * b->type.bytes();
}

void SetDim(halide_buffer_t* b, int d, int32_t min, int32_t extent) {
  b->dim[d].min = min;
  b->dim[d].extent = extent;
}

// True when `b` holds [d0, d0 + e0) x [d1, d1 + e1) and out's batch region, with dim 0
// dense and each row of dim 0 apart by at least its length.
bool Covers(const halide_buffer_t* b, int64_t d0, int64_t e0, int64_t d1, int64_t e1,
            const halide_buffer_t* out) {
  auto holds = [](const halide_dimension_t& dim, int64_t min, int64_t extent) {
    return dim.min <= min && min + extent <= int64_t{dim.min} + dim.extent;
  };
  if (b->dimensions != out->dimensions || b->dim[0].stride != 1) return false;
  if (!holds(b->dim[0], d0, e0) || !holds(b->dim[1], d1, e1)) return false;
  if (b->dim[1].extent > 1 && b->dim[1].stride < b->dim[0].extent) return false;
  for (int d = 2; d < b->dimensions; ++d) {
    if (!holds(b->dim[d], out->dim[d].min, out->dim[d].extent)) return false;
  }
  return true;
}

// dim 1's stride: the leading dimension (any value of at least a row holds one row).
int64_t LeadingDim(const halide_buffer_t* b) {
  return std::max<int64_t>(b->dim[1].stride, b->dim[0].extent);
}

// The regions of a, b and bias that out's region needs: every k, out's rows (m),
// columns (n) and batch; the bias's columns.
void AnswerBoundsQuery(halide_buffer_t* a, halide_buffer_t* b, halide_buffer_t* bias, bool ta,
                       bool tb, int32_t k, const halide_buffer_t* out) {
  const halide_dimension_t& n = out->dim[0];
  const halide_dimension_t& m = out->dim[1];
  if (IsBoundsQuery(a)) {
    SetDim(a, ta ? 1 : 0, 0, k);
    SetDim(a, ta ? 0 : 1, m.min, m.extent);
    for (int d = 2; d < a->dimensions; ++d) SetDim(a, d, out->dim[d].min, out->dim[d].extent);
  }
  if (IsBoundsQuery(b)) {
    SetDim(b, tb ? 0 : 1, 0, k);
    SetDim(b, tb ? 1 : 0, n.min, n.extent);
    for (int d = 2; d < b->dimensions; ++d) SetDim(b, d, out->dim[d].min, out->dim[d].extent);
  }
  if (bias != nullptr && IsBoundsQuery(bias)) SetDim(bias, 0, n.min, n.extent);
}

// out's batch region (dims 2...) as `count` matrices a fixed stride apart in each of a,
// b and out (elements), when every operand's batch dims collapse into one: each batch
// dim of more than one index has the stride of the one before times its extent. False
// when there is no batch of two or more, or a dim does not collapse (a broadcast, a
// permuted batch), and the call then runs a GEMM per matrix.
struct Batch {
  int64_t count = 1, a = 0, b = 0, c = 0;
};
bool CollapsedBatch(const halide_buffer_t* a, const halide_buffer_t* b, const halide_buffer_t* out,
                    Batch* batch) {
  batch->count = 1;
  for (int d = 2; d < out->dimensions; ++d) batch->count *= out->dim[d].extent;
  if (batch->count < 2) return false;
  auto stride = [out](const halide_buffer_t* buf, int64_t* first) {
    *first = 0;
    int64_t expected = 0;
    for (int d = 2; d < out->dimensions; ++d) {
      if (out->dim[d].extent == 1) continue;
      const int64_t s = buf->dim[d].stride;
      if (s <= 0 || (*first != 0 && s != expected)) return false;
      if (*first == 0) *first = s;
      expected = s * out->dim[d].extent;
    }
    return *first > 0;
  };
  return stride(a, &batch->a) && stride(b, &batch->b) && stride(out, &batch->c);
}

#if BRAZE_HAVE_DNNL
// ---- A GEMM cut among Braze's pool threads ----
// oneDNN threads with OpenMP: a call with the kernel's thread count starts libgomp's
// team, whose workers then wait beside Braze's pool, which runs the kernel's next loop
// (an optimizer's update, an epilogue) on the same cores: with libgomp's spin they take
// those cores, passive they sleep and are woken at the next call. A GEMM large enough
// is therefore cut into one part per thread of the kernel, each part a oneDNN call on
// one OpenMP thread (no team), run as one loop of Braze's pool: by rows (a constant b is
// then packed once and read by every part), else by columns in blocks of 16 (oneDNN's
// AVX-512 register block). docs/CPU_GEMM.md, "One pool", has the measurements.

// Smaller GEMMs (multiply-adds) run as one call: the pool's dispatch would cost more
// than a second thread gives.
constexpr int64_t kSplitMinWork = int64_t{1} << 18;
constexpr int64_t kSplitMinRows = 16;  // the fewest rows a part may get
constexpr int64_t kSplitColumns = 16;  // a part's columns are a multiple of these
constexpr int kMaxParts = 64;

enum class Cut { kNone, kRows, kColumns };

// How a GEMM of out's m x n (k deep) is cut into `parts`; `b_const`: b is a constant
// packed once, which a cut by columns would pack once per part.
Cut ChooseCut(int64_t m, int64_t n, int64_t k, int parts, bool b_const) {
  if (parts < 2 || m * n * k < kSplitMinWork) return Cut::kNone;
  if (m >= kSplitMinRows * parts) return Cut::kRows;
  if (!b_const && n >= 4 * kSplitColumns * parts) return Cut::kColumns;
  return Cut::kNone;
}

// Sets the calling thread's OpenMP thread count (libgomp's per-thread setting) while it
// lives, then restores the one before: a caller's own OpenMP code keeps its setting.
class ScopedOmpThreads {
 public:
  ScopedOmpThreads(const onednn::Api& api, int threads) : api_(api), previous_(api.get_threads()) {
    api_.set_threads(threads);
  }
  ~ScopedOmpThreads() { api_.set_threads(previous_); }
  ScopedOmpThreads(const ScopedOmpThreads&) = delete;
  ScopedOmpThreads& operator=(const ScopedOmpThreads&) = delete;

 private:
  const onednn::Api& api_;
  int previous_;
};

// One part: its primitive (and the packed b it reads, kept alive), where it reads and
// writes, and whether it applies the ReLU itself.
struct PartRun {
  std::shared_ptr<Prepared> prepared;
  std::shared_ptr<void> packed_b;
  const void* a = nullptr;
  const void* b = nullptr;
  const void* bias = nullptr;
  void* c = nullptr;
  int64_t rows = 0, cols = 0, ldc = 0;
  int64_t matrices = 1, c_step = 0;  // a batch's matrices, c_step bytes apart in c
  bool relu_here = false;
  dnnl_data_type_t type = dnnl_f32;
};

struct PartCall {
  const onednn::Api* api;
  std::vector<PartRun> runs;  // one per part
};

// The pool's task: part `index` on one OpenMP thread. Nothing may throw out of a pool
// task (a worker thread has no one to catch it).
int RunPart(void* /*user_context*/, int index, uint8_t* closure) try {
  PartCall& call = *reinterpret_cast<PartCall*>(closure);
  PartRun& r = call.runs[index];
  if (r.prepared == nullptr) return 0;  // an empty part
  ScopedOmpThreads one(*call.api, 1);
  std::lock_guard<std::mutex> lock(r.prepared->mu);
  if (!RunGemm(*call.api, *r.prepared, r.a, r.b, r.bias, r.c)) return -3;
  for (int64_t i = 0; r.relu_here && i < r.matrices; ++i) {
    ReluInPlace(static_cast<uint8_t*>(r.c) + i * r.c_step, r.rows, r.cols, r.ldc, r.type);
  }
  return 0;
} catch (...) {
  return -3;
}

// What SplitGemm returns when it ran nothing and the call is to run uncut: the pool is
// busy with another thread's loop (the parts would run one after another on the caller,
// up to `parts` times slower than the uncut call on the kernel's OpenMP threads), or
// oneDNN refused a part's configuration. Not a status a task returns (0 or -3).
constexpr int kNotCut = 1;

// ParallelFor's `busy`: the pool is running another thread's loop.
int PoolBusy(void*, device::ParallelTask, int, int, uint8_t*) { return kNotCut; }

// out = a b (+ bias, ReLU) of one matrix each, cut as `cut` says into `parts` run on
// the pool. `whole`: the uncut call's configuration; `pbias`: the bias at out's first
// column. Returns as Gemm, or kNotCut having written nothing.
int SplitGemm(const Library& lib, const halide_buffer_t* a, const halide_buffer_t* b,
              const void* pbias, const halide_buffer_t* out, const GemmKey& whole, Cut cut,
              int parts, uint64_t b_const) try {
  const int64_t n0 = out->dim[0].min, m0 = out->dim[1].min, m = whole.m, n = whole.n;
  const size_t c_bytes = out->type.bytes();
  PartCall call{&lib.api, std::vector<PartRun>(parts)};
  // The primitives are made (and a constant b packed) here, one after another, for one
  // OpenMP thread each: a primitive's partitioning is fixed when it is made, and a
  // constant read by every part is packed once.
  ScopedOmpThreads one(lib.api, 1);
  PackedKey packed_key{b_const, 0, whole.k, n, whole.ldb, whole.tb};
  bool may_pack = false;
  // Only a cut by rows reads the packed copy: its key and source are b's whole region.
  if (b_const != 0 && cut == Cut::kRows) {
    packed_key.offset = whole.tb ? Offset(b, 0, n0, nullptr) : Offset(b, n0, 0, nullptr);
    may_pack = Packed().MayPack(packed_key);
  }
  const int64_t blocks = (n + kSplitColumns - 1) / kSplitColumns;
  for (int i = 0; i < parts; ++i) {
    int64_t r0 = m0, rows = m, c0 = n0, cols = n;
    if (cut == Cut::kRows) {
      r0 = m0 + m * i / parts;
      rows = m0 + m * (i + 1) / parts - r0;
    } else {
      c0 = n0 + std::min(n, kSplitColumns * (blocks * i / parts));
      cols = n0 + std::min(n, kSplitColumns * (blocks * (i + 1) / parts)) - c0;
    }
    if (rows == 0 || cols == 0) continue;
    GemmKey key = whole;
    key.m = rows;
    key.n = cols;
    key.threads = 1;
    key.part = i;
    PartRun& r = call.runs[i];
    if (may_pack) {
      std::shared_ptr<Prepared> p = Lookup(lib, key, /*packed=*/true);
      if (p != nullptr) {
        std::lock_guard<std::mutex> lock(p->mu);
        r.packed_b =
            Packed().Get(lib, *p, packed_key, b->host + packed_key.offset * b->type.bytes());
        if (r.packed_b != nullptr) r.prepared = p;
      }
    }
    if (r.prepared == nullptr) r.prepared = Lookup(lib, key, /*packed=*/false);
    if (r.prepared == nullptr) return kNotCut;  // the whole configuration may still be made
    r.a = whole.ta ? At(a, r0, 0, nullptr) : At(a, 0, r0, nullptr);
    r.b = r.packed_b != nullptr ? r.packed_b.get()
          : whole.tb            ? At(b, 0, c0, nullptr)
                                : At(b, c0, 0, nullptr);
    r.bias = pbias == nullptr ? nullptr : static_cast<const uint8_t*>(pbias) + (c0 - n0) * c_bytes;
    r.c = At(out, c0, r0, nullptr);
    r.rows = rows;
    r.cols = cols;
    r.ldc = whole.ldc;
    r.relu_here = whole.epilogue == kBiasRelu && !r.prepared->relu_post_ops;
    r.type = whole.c;
  }
  const int status =
      device::ParallelFor(nullptr, RunPart, 0, parts, reinterpret_cast<uint8_t*>(&call), PoolBusy);
  if (status == 0) split_calls.fetch_add(1, std::memory_order_relaxed);
  return status;
} catch (...) {  // memory for the parts' table: nothing has run
  return -3;
}

// Whether a batch of `count` matrices is cut among `threads` (kMaxParts at most) by
// whole matrices: each part gets as many (or one in four more), and a product of the
// batch is kSplitMinWork or more.
int BatchParts(int64_t count, int threads, int64_t m, int64_t n, int64_t k) {
  const int parts = std::min(threads, kMaxParts);
  if (parts < 2 || count < parts || count * m * n * k < kSplitMinWork) return 0;
  return count % parts == 0 || count >= 4 * parts ? parts : 0;
}

// out = a b (+ bias, ReLU) of `whole.batch` matrices a fixed stride apart in each operand
// (`whole`: the batched call's configuration; pa, pb, pc: the first matrices), cut into
// `parts` runs of whole matrices on the pool, each one batched primitive on one OpenMP
// thread: attention's per-head products, as the one-matrix cut above. Returns as Gemm,
// or kNotCut having written nothing.
int SplitBatch(const Library& lib, const uint8_t* pa, const uint8_t* pb, const void* pbias,
               uint8_t* pc, const GemmKey& whole, const halide_buffer_t* out, int parts) try {
  const size_t ab_bytes = whole.ab == dnnl_bf16 ? 2 : 4, c_bytes = out->type.bytes();
  PartCall call{&lib.api, std::vector<PartRun>(parts)};
  ScopedOmpThreads one(lib.api, 1);
  for (int i = 0; i < parts; ++i) {
    const int64_t first = whole.batch * i / parts, count = whole.batch * (i + 1) / parts - first;
    GemmKey key = whole;
    key.batch = count;
    key.threads = 1;
    key.part = i;
    PartRun& r = call.runs[i];
    r.prepared = Lookup(lib, key, /*packed=*/false);
    // As for the whole batch: oneDNN's reference kernel would be slower than the team.
    if (r.prepared == nullptr || r.prepared->impl.rfind("ref", 0) == 0) return kNotCut;
    r.a = pa + first * whole.batch_a * ab_bytes;
    r.b = pb + first * whole.batch_b * ab_bytes;
    r.bias = pbias;
    r.c = pc + first * whole.batch_c * c_bytes;
    r.rows = whole.m;
    r.cols = whole.n;
    r.ldc = whole.ldc;
    r.matrices = count;
    r.c_step = whole.batch_c * static_cast<int64_t>(c_bytes);
    r.relu_here = whole.epilogue == kBiasRelu && !r.prepared->relu_post_ops;
    r.type = whole.c;
  }
  const int status =
      device::ParallelFor(nullptr, RunPart, 0, parts, reinterpret_cast<uint8_t*>(&call), PoolBusy);
  if (status == 0) {
    split_calls.fetch_add(1, std::memory_order_relaxed);
    batched_calls.fetch_add(1, std::memory_order_relaxed);
  }
  return status;
} catch (...) {
  return -3;
}
#endif

// out = a b (+ bias, then ReLU when `relu`) for both externs; `bias` null: none.
// `b_const`: nonzero names b's contents when b is a constant of the kernel.
int Gemm(halide_buffer_t* a, halide_buffer_t* b, halide_buffer_t* bias, bool ta, bool tb, int32_t k,
         bool relu, int32_t threads, uint64_t b_const, halide_buffer_t* out) {
  // Halide asks for bounds with query buffers (no memory); an input it already holds
  // may come as itself, so a query is any buffer without memory, out included.
  if (IsBoundsQuery(a) || IsBoundsQuery(b) || IsBoundsQuery(out) ||
      (bias != nullptr && IsBoundsQuery(bias))) {
    AnswerBoundsQuery(a, b, bias, ta, tb, k, out);
    return 0;
  }
  const Library& lib = Loaded();
  if (!lib.status.ok()) return -1;
#if !BRAZE_HAVE_DNNL
  (void)relu;
  (void)threads;
  (void)b_const;
  return -1;
#else
  const dnnl_data_type_t ab = ElementType(a), c = ElementType(out);
  if (!TypesSupported(ab, ElementType(b), c,
                      bias == nullptr ? dnnl_data_type_undef : ElementType(bias))) {
    return -2;
  }
  const int64_t n = out->dim[0].extent, m = out->dim[1].extent;
  if (n == 0 || m == 0) return 0;
  const int64_t n0 = out->dim[0].min, m0 = out->dim[1].min;
  // Every element read must be in its buffer, rows dense: a buffer realized over less
  // than asked for would be read out of bounds, never silently.
  const bool covered = ta ? Covers(a, m0, m, 0, k, out) : Covers(a, 0, k, m0, m, out);
  if (!covered || !(tb ? Covers(b, 0, k, n0, n, out) : Covers(b, n0, n, 0, k, out)) ||
      !Covers(out, n0, n, m0, m, out)) {
    return -2;
  }
  if (bias != nullptr &&
      (bias->dimensions != 1 || bias->dim[0].stride != 1 || bias->dim[0].min > n0 ||
       n0 + n > bias->dim[0].min + bias->dim[0].extent)) {
    return -2;
  }
  const void* pbias =
      bias == nullptr ? nullptr : bias->host + (n0 - bias->dim[0].min) * bias->type.bytes();
  const int epilogue = bias == nullptr ? kNoEpilogue : relu ? kBiasRelu : kBias;
  GemmKey key{m, n, k, LeadingDim(a), LeadingDim(b), LeadingDim(out), ta, tb, epilogue, threads};
  key.ab = ab;
  key.c = c;
  const int batch_dims = out->dimensions - 2;
  if (batch_dims > 8) return -2;
  // One matrix on several threads, outside the pool's own loops (where a loop runs
  // serially): cut among the pool's threads.
  if (batch_dims == 0 && lib.api.get_threads != nullptr && !device::InPoolTask()) {
    const int parts = std::min(threads, kMaxParts);
    const Cut cut = ChooseCut(m, n, k, parts, b_const != 0);
    if (cut != Cut::kNone) {
      const int status = SplitGemm(lib, a, b, pbias, out, key, cut, parts, b_const);
      if (status != kNotCut) return status;
      not_cut_calls.fetch_add(1, std::memory_order_relaxed);
    }
  }
  // Once per call, not per batch index: every batch index has the same configuration.
  if (lib.api.set_threads != nullptr && threads > 0) lib.api.set_threads(threads);
  // A constant b of one matrix is read packed, as oneDNN lays weights out for its
  // kernels, instead of repacked at every call (3-6% at 1024^3, docs/CPU_GEMM.md).
  std::shared_ptr<Prepared> prepared;
  std::shared_ptr<void> packed_b;
  PackedKey packed_key{b_const, 0, k, n, key.ldb, tb};
  if (b_const != 0 && batch_dims == 0) {
    packed_key.offset = tb ? Offset(b, 0, n0, nullptr) : Offset(b, n0, 0, nullptr);
    if (Packed().MayPack(packed_key)) prepared = Lookup(lib, key, /*packed=*/true);
  }
  std::unique_lock<std::mutex> lock;
  if (prepared != nullptr) {
    lock = std::unique_lock<std::mutex>(prepared->mu);
    const uint8_t* pb = b->host + packed_key.offset * b->type.bytes();
    packed_b = Packed().Get(lib, *prepared, packed_key, pb);
    if (packed_b == nullptr) {  // not packed (too large, or oneDNN failed): the plain one
      lock = std::unique_lock<std::mutex>();
      prepared = nullptr;
    }
  }
  int64_t batch[8] = {0};
  for (int d = 0; d < batch_dims; ++d) {
    if (out->dim[d + 2].extent == 0) return 0;
    batch[d] = out->dim[d + 2].min;
  }
  // A batch that collapses into one strided dim is one call of a batched primitive:
  // oneDNN splits the batch's matrices among its threads, where a call per matrix
  // pays a parallel region (and the primitive's dispatch) for each small product
  // (attention's per-head matmuls: 64 of 128 x 128 x 64 in a GPT block).
  Batch collapsed;
  if (packed_b == nullptr && CollapsedBatch(a, b, out, &collapsed)) {
    GemmKey batched = key;
    batched.batch = collapsed.count;
    batched.batch_a = collapsed.a;
    batched.batch_b = collapsed.b;
    batched.batch_c = collapsed.c;
    const uint8_t* pa = ta ? At(a, m0, 0, batch) : At(a, 0, m0, batch);
    const uint8_t* pb = tb ? At(b, 0, n0, batch) : At(b, n0, 0, batch);
    uint8_t* pc = At(out, n0, m0, batch);
    // Cut among the pool's threads by whole matrices where there are enough of them.
    const int parts = device::InPoolTask() || lib.api.get_threads == nullptr
                          ? 0
                          : BatchParts(collapsed.count, threads, m, n, k);
    if (parts > 0) {
      const int status = SplitBatch(lib, pa, pb, pbias, pc, batched, out, parts);
      if (status != kNotCut) return status;
      not_cut_calls.fetch_add(1, std::memory_order_relaxed);
    }
    std::shared_ptr<Prepared> p = Lookup(lib, batched, /*packed=*/false);
    // oneDNN's reference kernel (strides its optimized ones refuse) would be slower
    // than a call per matrix.
    if (p != nullptr && p->impl.rfind("ref", 0) != 0) {
      lock = std::unique_lock<std::mutex>(p->mu);
      if (!RunGemm(lib.api, *p, pa, pb, pbias, pc)) return -3;
      batched_calls.fetch_add(1, std::memory_order_relaxed);
      if (epilogue == kBiasRelu && !p->relu_post_ops) {
        for (int64_t i = 0; i < collapsed.count; ++i) {
          ReluInPlace(pc + i * collapsed.c * out->type.bytes(), m, n, key.ldc, c);
        }
      }
      return 0;
    }
  }
  if (prepared == nullptr) {
    prepared = Lookup(lib, key, /*packed=*/false);
    if (prepared == nullptr) return -3;
    lock = std::unique_lock<std::mutex>(prepared->mu);
  }
  const bool relu_here = epilogue == kBiasRelu && !prepared->relu_post_ops;
  // One GEMM per batch index; `batch` walks out's batch dims like an odometer.
  while (true) {
    const void* pa = ta ? At(a, m0, 0, batch) : At(a, 0, m0, batch);
    const void* pb = packed_b != nullptr ? packed_b.get()
                     : tb                ? At(b, 0, n0, batch)
                                         : At(b, n0, 0, batch);
    void* pc = At(out, n0, m0, batch);
    if (!RunGemm(lib.api, *prepared, pa, pb, pbias, pc)) return -3;
    if (relu_here) ReluInPlace(pc, m, n, key.ldc, c);
    int d = 0;
    for (; d < batch_dims; ++d) {
      const halide_dimension_t& dim = out->dim[d + 2];
      if (++batch[d] < dim.min + dim.extent) break;
      batch[d] = dim.min;
    }
    if (d == batch_dims) return 0;
  }
#endif
}

}  // namespace

absl::Status CpuGemmAvailable() { return Loaded().status; }

namespace {
std::atomic<bool> bf16_allowed{true};  // AllowCpuGemmBF16ForTesting
}  // namespace

bool CpuGemmTakesBF16() {
#if BRAZE_HAVE_DNNL
  static const bool takes = [] {
    const Library& lib = Loaded();
    if (!lib.status.ok()) return false;
    GemmKey g{};
    g.m = g.n = g.k = g.lda = g.ldb = g.ldc = 16;
    g.ta = g.tb = false;
    g.epilogue = kNoEpilogue;
    g.threads = 1;
    g.ab = g.c = dnnl_bf16;
    const std::shared_ptr<Prepared> p = Prepare(lib, g, /*relu_post_ops=*/false, false);
    return p != nullptr && p->impl.rfind("ref", 0) != 0;
  }();
  return takes && bf16_allowed.load();
#else
  return false;
#endif
}

void AllowCpuGemmBF16ForTesting(bool allowed) { bf16_allowed = allowed; }

std::string CpuGemmLibrary() { return Loaded().status.ok() ? Loaded().name : std::string(); }

// Hidden: kernels reach them by address (JIT) or through the disk cache's runtime, and a
// second copy of Braze in the process must not bind their names to that runtime's jumps.
extern "C" __attribute__((visibility("hidden"))) int braze_cpu_gemm_f32(
    halide_buffer_t* a, halide_buffer_t* b, int32_t transpose_a, int32_t transpose_b, int32_t k,
    int32_t threads, uint64_t b_const, halide_buffer_t* out) {
  return Gemm(a, b, nullptr, transpose_a != 0, transpose_b != 0, k, false, threads, b_const, out);
}

extern "C" __attribute__((visibility("hidden"))) int braze_cpu_gemm_bias_f32(
    halide_buffer_t* a, halide_buffer_t* b, halide_buffer_t* bias, int32_t transpose_a,
    int32_t transpose_b, int32_t k, int32_t relu, int32_t threads, uint64_t b_const,
    halide_buffer_t* out) {
  return Gemm(a, b, bias, transpose_a != 0, transpose_b != 0, k, relu != 0, threads, b_const, out);
}

void AllowCpuGemmReluPostOpsForTesting(bool allowed) {
#if BRAZE_HAVE_DNNL
  relu_post_ops_allowed = allowed;
#else
  (void)allowed;
#endif
}

int64_t CpuGemmWeightPacks() {
#if BRAZE_HAVE_DNNL
  return weight_packs.load();
#else
  return 0;
#endif
}

int64_t CpuGemmBatchedCalls() {
#if BRAZE_HAVE_DNNL
  return batched_calls.load();
#else
  return 0;
#endif
}

int64_t CpuGemmSplitCalls() {
#if BRAZE_HAVE_DNNL
  return split_calls.load();
#else
  return 0;
#endif
}

int64_t CpuGemmNotCutCalls() {
#if BRAZE_HAVE_DNNL
  return not_cut_calls.load();
#else
  return 0;
#endif
}

CpuGemmPackedCacheStats CpuGemmPackedCacheStatsForTesting() {
  CpuGemmPackedCacheStats stats;
#if BRAZE_HAVE_DNNL
  stats.packs = weight_packs.load();
  stats.evictions = packed_evictions.load();
  stats.row_major_reads = packed_row_major_reads.load();
  Packed().Held(&stats.copies, &stats.bytes);
#endif
  return stats;
}

int CpuGemmMaxPacksForTesting() {
#if BRAZE_HAVE_DNNL
  return PackedCache::kMaxPacks;
#else
  return 0;
#endif
}

void SetCpuGemmPackedBudgetForTesting(int64_t bytes) {
#if BRAZE_HAVE_DNNL
  Packed().SetBudget(static_cast<size_t>(std::max<int64_t>(bytes, 0)));
#else
  (void)bytes;
#endif
}

void ResetCpuGemmPackedCacheForTesting() {
#if BRAZE_HAVE_DNNL
  Packed().Reset();
#endif
}

void* CpuGemmF32Address() { return reinterpret_cast<void*>(&braze_cpu_gemm_f32); }

void* CpuGemmBiasF32Address() { return reinterpret_cast<void*>(&braze_cpu_gemm_bias_f32); }

}  // namespace braze
