// KernelSource: see kernel_source.h.
#include "compile/kernel_source.h"

#include <algorithm>
#include <chrono>
#include <mutex>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "compile/cluster_key.h"
#include "device/cpu_conv.h"
#include "device/cpu_gemm.h"
#include "device/features.h"
#include "ir/changing_dims.h"
#include "ir/logging.h"
#include "ir/timeline.h"
#include "lower/conv_bn_fold.h"
#include "schedule/scheduler.h"
#include "schedule/stored_schedule.h"

namespace braze {
namespace {

std::string SignatureKey(const std::vector<TensorType>& types) {
  std::string key;
  for (const TensorType& t : types) absl::StrAppend(&key, TypeString(t), ";");
  return key;
}

// "input 0 dim 0 was 128, now 100": how `now` differs from `before` (same count).
std::string SignatureChange(const std::vector<TensorType>& before,
                            const std::vector<TensorType>& now) {
  std::vector<std::string> parts;
  for (size_t i = 0; i < now.size() && i < before.size(); ++i) {
    if (before[i].dtype != now[i].dtype || before[i].shape.size() != now[i].shape.size()) {
      parts.push_back(
          absl::StrCat("input ", i, " was ", TypeString(before[i]), ", now ", TypeString(now[i])));
      continue;
    }
    for (size_t d = 0; d < now[i].shape.size(); ++d) {
      if (before[i].shape[d] != now[i].shape[d]) {
        parts.push_back(absl::StrCat("input ", i, " dim ", d, " was ", before[i].shape[d], ", now ",
                                     now[i].shape[d]));
      }
    }
  }
  return parts.empty() ? "the same signature again" : absl::StrJoin(parts, ", ");
}

// Which path a kernel's matmuls took, for --log_compiles (docs/CPU_GEMM.md): "; matmul by
// oneDNN 2.6.3 (bf16 x bf16 -> bf16)" for the library's calls, with their operand and
// product types as the safe default's schedule text gives them (f32 operands in a
// 16-bit cluster: widened copies), or "; matmul in Braze's Halide loops" for loops.
std::string MatMulPath(const std::string& text) {
  std::vector<std::string> calls;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    if (!absl::StrContains(line, absl::StrCat("extern ", kCpuGemmF32Symbol, " ")) &&
        !absl::StrContains(line, absl::StrCat("extern ", kCpuGemmBiasF32Symbol, " "))) {
      continue;
    }
    constexpr absl::string_view kTypes = "(the CPU GEMM library: ";
    const size_t at = line.find(kTypes);
    std::string types = "?";
    if (at != absl::string_view::npos) {
      const absl::string_view rest = line.substr(at + kTypes.size());
      types = std::string(rest.substr(0, rest.find(')')));
    }
    if (std::find(calls.begin(), calls.end(), types) == calls.end()) calls.push_back(types);
  }
  if (!calls.empty()) {
    return absl::StrCat("; matmul by ", CpuGemmLibrary(), " (", absl::StrJoin(calls, ", "), ")");
  }
  return absl::StrContains(text, "MatMul_") ? "; matmul in Braze's Halide loops" : "";
}

// How many expensive shared values the safe default stored once instead of inlining
// them into each reader (schedule/shared_values.h), for --log_compiles: "; 3 shared
// values stored once", or nothing.
// Likewise the values stored to bound inlining (schedule/inline_budget.h): "; 12 values
// stored to bound inlining".
std::string SharedValuesNote(const std::string& text) {
  int n = 0, breaks = 0;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    n += absl::StrContains(line, kSharedValueStoredOnce) ? 1 : 0;
    breaks += absl::StrContains(line, kInlineBudgetStored) ? 1 : 0;
  }
  std::string note;
  if (n > 0) {
    absl::StrAppend(&note, "; ", n, n == 1 ? " shared value" : " shared values", " stored once");
  }
  if (breaks > 0) {
    absl::StrAppend(&note, "; ", breaks, breaks == 1 ? " value " : " values ", kInlineBudgetStored);
  }
  return note;
}

// Whether some convolution call takes a residual add: its Func is named for its
// epilogue (lower_conv_library.cc: "Conv2D_5_bias_residual_relu$1: extern ...").
bool CallsResidualConv(absl::string_view text) {
  const std::string call = absl::StrCat(": extern ", kCpuConvF32Symbol, " ");
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    const size_t at = line.find(call);
    if (at == absl::string_view::npos) continue;
    absl::string_view name = line.substr(0, at);
    name = name.substr(0, name.find('$'));
    if (absl::EndsWith(name, "_residual") || absl::EndsWith(name, "_residual_relu")) return true;
  }
  return false;
}

// --log_compiles: one line per kernel a step obtains, with why it was needed and what
// the compile cache had.
void LogCompile(const KernelSourceOptions& options, const ClusterSpec& cluster,
                const std::vector<TensorType>& types, const std::string& reason,
                const CompileCache::Result& result) {
  std::string line = absl::StrCat("compile: ", options.is_cluster ? "cluster '" : "'", cluster.name,
                                  "' (", cluster.nodes.size(), " ops) for (");
  for (size_t i = 0; i < types.size(); ++i) {
    absl::StrAppend(&line, i > 0 ? ", " : "", TypeString(types[i]));
  }
  absl::StrAppend(&line, "): ", reason, "; ");
  if (!result.hit) {
    absl::StrAppend(&line, result.evicted ? "evicted from the compile cache earlier; "
                                          : "not in the compile cache; ");
    if (result.kernel.ok() && (*result.kernel)->kernel->loaded_from_disk()) {
      absl::StrAppend(&line, "loaded from the disk cache; ");
    }
  }
  if (!result.kernel.ok()) {
    absl::StrAppend(&line, "failed: ", result.kernel.status().message());
  } else {
    const CompiledKernel& k = *(*result.kernel)->kernel;
    absl::StrAppend(&line, SchedulerName(k.scheduler_used()),
                    result.hit ? ", cache hit" : absl::StrFormat(", %.1f ms", result.compile_ms));
    if (!k.schedule_note().empty()) absl::StrAppend(&line, "; ", k.schedule_note());
    absl::StrAppend(&line, MatMulPath(k.schedule_text()));
    absl::StrAppend(&line, SharedValuesNote(k.schedule_text()));
    // Which path a kernel's convolutions took (docs/CONVOLUTIONS.md): its Funcs are named
    // for their ops (Conv2D_3, Conv2DBackpropInput_7, ...).
    if (absl::StrContains(k.schedule_text(), kCpuConvF32Symbol)) {
      absl::StrAppend(&line, "; convolution by ", CpuGemmLibrary());
      if (CallsResidualConv(k.schedule_text())) {
        absl::StrAppend(&line, " with the residual add in the call");
      }
    } else if (absl::StrContains(k.schedule_text(), "Conv2D")) {
      absl::StrAppend(&line, "; convolution by Braze's Halide loops");
    }
    // Batch norms folded into convolutions: the schedule text's "// folded ..." lines.
    for (absl::string_view text_line : absl::StrSplit(k.schedule_text(), '\n')) {
      if (absl::ConsumePrefix(&text_line, lower::kFoldNotePrefix)) {
        absl::StrAppend(&line, "; batch norm folded: ", text_line);
      }
    }
    if (!result.hit && !k.disk_note().empty()) absl::StrAppend(&line, "; ", k.disk_note());
    for (const std::string& refused : k.scheduler_failures()) {
      absl::StrAppend(&line, "\n  refused first: ", refused);
    }
  }
  LogInfo(0, line);
}

// A copy of a cluster's nodes in a graph of its own, its inputs placeholders of their
// concrete types: what a background compile lowers, so that it never reads the
// program's graph while the program goes on (and perhaps adds nodes to it).
struct ClusterSnapshot {
  std::shared_ptr<Graph> graph = std::make_shared<Graph>();
  ClusterSpec spec;
};

// Null when a node reads a value that is neither the cluster's nor one of its inputs
// (not expected: the caller then compiles on its own thread).
std::shared_ptr<ClusterSnapshot> Snapshot(const ClusterSpec& spec) {
  auto snap = std::make_shared<ClusterSnapshot>();
  Graph& h = *snap->graph;
  std::map<std::pair<int, int>, Tensor> here;  // (node id, output) -> tensor of h
  for (size_t i = 0; i < spec.inputs.size(); ++i) {
    const Tensor& in = spec.inputs[i];
    Tensor p = h.AddNode(OpKind::kPlaceholder, {},
                         PlaceholderAttrs{spec.input_types[i].dtype, spec.input_types[i].shape},
                         absl::StrCat("input_", i));
    here[{in.node_id(), in.index()}] = p;
    snap->spec.inputs.push_back(p);
  }
  auto find = [&](const Tensor& t, Tensor* out) {
    auto it = here.find({t.node_id(), t.index()});
    if (it == here.end()) return false;
    *out = it->second;
    return true;
  };
  for (int id : spec.nodes) {
    const Node& n = spec.graph->node(id);
    std::vector<Tensor> inputs(n.num_inputs());
    for (int i = 0; i < n.num_inputs(); ++i) {
      if (!find(n.input(i), &inputs[i])) return nullptr;
    }
    Tensor t = h.AddNode(n.op(), std::move(inputs), n.attrs(), n.name());
    for (int o = 0; o < n.num_outputs(); ++o) here[{id, o}] = Tensor(&h, t.node_id(), o);
    snap->spec.nodes.push_back(t.node_id());
  }
  for (const Tensor& out : spec.outputs) {
    snap->spec.outputs.emplace_back();
    if (!find(out, &snap->spec.outputs.back())) return nullptr;
  }
  if (!h.status().ok()) return nullptr;
  snap->spec.graph = &h;
  snap->spec.name = spec.name;
  snap->spec.input_types = spec.input_types;
  snap->spec.node_types = spec.node_types;
  snap->spec.input_symbols = spec.input_symbols;
  return snap;
}

// The concrete type of each cluster output for these input types: a node's (node_types
// is parallel to nodes) or an input's. A symbolic kernel's own output types have -1s.
std::vector<TensorType> OutputTypes(const ClusterSpec& spec) {
  std::vector<TensorType> out;
  for (const Tensor& t : spec.outputs) {
    TensorType type;
    for (size_t p = 0; p < spec.nodes.size() && p < spec.node_types.size(); ++p) {
      if (spec.nodes[p] == t.node_id()) type = spec.node_types[p];
    }
    for (size_t i = 0; i < spec.inputs.size(); ++i) {
      if (spec.inputs[i] == t) type = spec.input_types[i];
    }
    out.push_back(type);
  }
  return out;
}

// "input 0 dim 0": the symbolic dims of `symbols`, for the compile log.
std::string SymbolicDims(const std::vector<std::vector<int>>& symbols) {
  std::vector<std::string> dims;
  for (size_t i = 0; i < symbols.size(); ++i) {
    for (size_t d = 0; d < symbols[i].size(); ++d) {
      if (symbols[i][d] >= 0) dims.push_back(absl::StrCat("input ", i, " dim ", d));
    }
  }
  return absl::StrJoin(dims, ", ");
}

// The compile cache's key for `spec`, and the options to compile it with: `copts` plus
// the stored schedule (schedule/stored_schedule.h) found for it in `schedule_dirs`, if
// any. Only clusters under the default scheduler look one up (CPU: kAuto; GPU: the
// heuristic's fused plan): a scheduler the program chose explicitly is respected. The
// stored schedule's parameters enter the key, so kernels compiled with and without it
// are different kernels.
std::string KeyAndOptions(const ClusterSpec& spec, const CompileOptions& copts, bool disk_cache,
                          const std::vector<std::string>& schedule_dirs, CompileOptions* with) {
  *with = copts;
  std::string key = ClusterKey(spec, copts);
  const device::Features& features = device::FeaturesOf(copts.device);
  if (!schedule_dirs.empty() && features.stored_schedules && features.device_memory &&
      copts.gpu_scheduler == Scheduler::kGpuFused) {
    // A GPU entry is keyed by the device's architecture too (StoredScheduleKeyFor).
    absl::StatusOr<StoredScheduleKey> lookup = StoredScheduleKeyFor(spec, copts.device);
    if (lookup.ok()) {
      with->stored_schedule = FindStoredSchedule(schedule_dirs, lookup->hash, lookup->target);
    } else {
      // No architecture, no entry: the heuristic's own sizes, said once per process.
      static std::once_flag said;
      std::call_once(said, [&] {
        LogWarning(absl::StrCat("stored GPU schedules are not looked up: ",
                                lookup.status().message(), "; the GPU heuristic's own sizes"));
      });
    }
    if (with->stored_schedule) {
      absl::StrAppend(&key, ";stored=", ParamsSummary(with->stored_schedule->params));
    }
  } else if (!schedule_dirs.empty() && features.stored_schedules && !features.device_memory &&
             copts.scheduler == Scheduler::kAuto) {
    // Threads do not enter the stored schedule's key (its factors are per thread): the
    // key under default options, which is `key` itself unless a thread count was set
    // or the GEMM library turned off.
    const bool default_key = copts.num_threads == 0 && copts.cpu_gemm_library &&
                             copts.cpu_gemm_min_work == kLibraryGemmMinWork;
    const std::string lookup =
        ScheduleKeyHash(default_key ? key : ClusterKey(spec, CompileOptions()));
    // The host's target (Device{}): stored schedules are tuned for it.
    static const absl::StatusOr<std::string> target = device::JitTargetString(Device{});
    if (target.ok()) with->stored_schedule = FindStoredSchedule(schedule_dirs, lookup, *target);
    if (with->stored_schedule) {
      absl::StrAppend(&key, ";stored=", ParamsSummary(with->stored_schedule->params));
    }
  }
  if (disk_cache) with->disk_key = key;
  return key;
}

// When a symbol class of `spec` is smaller than kMinSymbolicExtent, makes `spec` the one
// of the kernel for sizes 1 to 15: each class at a fixed estimate (15 - class, never 1,
// which would broadcast), shapes inferred again. The estimate below kMinSymbolicExtent
// is what marks that kernel (its key, its splits by 1); all its small sizes share it.
bool ForSmallSizes(ClusterSpec* spec) {
  bool small = false;
  for (size_t i = 0; i < spec->input_symbols.size() && i < spec->input_types.size(); ++i) {
    for (size_t d = 0; d < spec->input_symbols[i].size(); ++d) {
      small |= spec->input_symbols[i][d] >= 0 && spec->input_types[i].shape[d] < kMinSymbolicExtent;
    }
  }
  if (!small) return false;
  for (size_t i = 0; i < spec->input_symbols.size() && i < spec->input_types.size(); ++i) {
    for (size_t d = 0; d < spec->input_symbols[i].size(); ++d) {
      const int k = spec->input_symbols[i][d];
      if (k >= 0) spec->input_types[i].shape[d] = std::max<int64_t>(2, kMinSymbolicExtent - 1 - k);
    }
  }
  spec->node_types.clear();
  return true;
}

// The kernel for `spec` from the compile cache (compiled on a miss): the symbolic one
// when spec has symbols, else, or when that is refused (symbolic.h says when), the one
// for its concrete shapes. What happened is appended to `*note` for the compile log.
CompileCache::Result GetKernel(ClusterSpec spec, const CompileOptions& copts, bool disk_cache,
                               const std::vector<std::string>& schedule_dirs, std::string* note) {
  if (!spec.input_symbols.empty()) {
    ClusterSpec symbolic = spec;
    const bool small = ForSmallSizes(&symbolic);
    CompileOptions with_key;
    const std::string key = KeyAndOptions(symbolic, copts, disk_cache, schedule_dirs, &with_key);
    CompileCache::Result result = CompileCache::Global().GetOrCompile(
        key, [&] { return CompileCluster(symbolic, with_key); });
    if (result.kernel.ok()) {
      absl::StrAppend(
          note, "; symbolic in ", SymbolicDims(spec.input_symbols),
          small ? absl::StrCat(" (a size below ", kMinSymbolicExtent,
                               ": one kernel for every size >= 1, its symbolic "
                               "dims unsplit)")
                : absl::StrCat(" (one kernel for every size >= ", kMinSymbolicExtent, ")"));
      result.input_symbols = spec.input_symbols;
      result.input_types = symbolic.input_types;
      return result;
    }
    absl::StrAppend(note, "; no symbolic kernel (", result.kernel.status().message(),
                    "): compiled for these sizes");
    spec.input_symbols.clear();
  }
  CompileOptions with_key;
  const std::string key = KeyAndOptions(spec, copts, disk_cache, schedule_dirs, &with_key);
  return CompileCache::Global().GetOrCompile(key, [&] { return CompileCluster(spec, with_key); });
}

// The signature as kernels see it: symbolic dims (`symbols`) as -2 - class, so every
// size of them is one signature (the recompile guard counts kernels, not sizes).
std::vector<TensorType> KernelSignature(std::vector<TensorType> types,
                                        const std::vector<std::vector<int>>& symbols) {
  for (size_t i = 0; i < types.size() && i < symbols.size(); ++i) {
    for (size_t d = 0; d < types[i].shape.size() && d < symbols[i].size(); ++d) {
      if (symbols[i][d] >= 0) types[i].shape[d] = -2 - symbols[i][d];
    }
  }
  return types;
}

CompileCache::Result InjectedFailure() {
  CompileCache::Result result;
  result.kernel = absl::InternalError("injected compile failure");
  return result;
}

}  // namespace

KernelSource::KernelSource(ClusterSpec cluster, KernelSourceOptions options)
    : cluster_(std::move(cluster)), options_(std::move(options)) {}

KernelSource::~KernelSource() { WaitForBackgroundCompiles(); }

void KernelSource::WaitForBackgroundCompiles() {
  for (auto& [signature, future] : pending_) future.wait();
}

ClusterSpec KernelSource::SpecFor(const std::vector<TensorType>& types,
                                  std::vector<TensorType> node_types) const {
  ClusterSpec spec = cluster_;
  spec.input_types = types;
  spec.node_types = std::move(node_types);
  spec.input_symbols = InputSymbols(types);
  return spec;
}

std::vector<std::vector<int>> KernelSource::InputSymbols(
    const std::vector<TensorType>& types) const {
  if (!options_.symbolic_shapes) return {};
  const Scheduler scheduler = options_.compile.scheduler;
  if (scheduler != Scheduler::kAuto && scheduler != Scheduler::kSafeDefault) return {};
  std::vector<std::vector<int>> symbols(types.size());
  std::vector<int64_t> sizes;  // of each class: equal sizes share one
  for (size_t i = 0; i < types.size() && i < cluster_.inputs.size(); ++i) {
    const Shape& declared = cluster_.inputs[i].shape();  // the graph's: -1 where unknown
    const Shape& shape = types[i].shape;
    symbols[i].assign(shape.size(), -1);
    if (declared.size() != shape.size()) continue;
    for (size_t d = 0; d < shape.size(); ++d) {
      if (declared[d] != -1 || shape[d] < 1) continue;  // size 0: nothing to compute
      auto it = std::find(sizes.begin(), sizes.end(), shape[d]);
      symbols[i][d] = static_cast<int>(it - sizes.begin());
      if (it == sizes.end()) sizes.push_back(shape[d]);
    }
  }
  if (sizes.empty()) return {};
  return symbols;
}

KernelAnswer KernelSource::Get(const std::vector<TensorType>& types,
                               std::vector<TensorType> node_types, bool ahead) {
  KernelAnswer wait;
  if (Megamorphic(types)) {
    wait.wait = KernelAnswer::Wait::kMegamorphic;
    return wait;
  }
  const std::string reason =
      last_types_.empty() ? std::string("first use")
                          : absl::StrCat("new signature: ", SignatureChange(last_types_, types));
  ClusterSpec spec = SpecFor(types, std::move(node_types));
  // The policies: each decides whether this call compiles now. A switch with no
  // default (-Werror=switch): a new CompilePolicy without its case fails the build.
  if (!ahead && options_.can_wait) {
    const std::string signature = SignatureKey(types);
    switch (options_.policy) {
      case CompilePolicy::kEager:
        break;
      case CompilePolicy::kLazy:
        if (++lazy_runs_[signature] < options_.lazy_compile_threshold) {
          wait.wait = KernelAnswer::Wait::kLazy;
          return wait;
        }
        break;
      case CompilePolicy::kAsync: {
        auto it = pending_.find(signature);
        if (it == pending_.end()) {
          auto started = CompileInBackground(spec);
          if (started.has_value()) {
            pending_.emplace(signature, *std::move(started));
            wait.wait = KernelAnswer::Wait::kAsync;
            return wait;
          }
          break;  // not copyable for another thread: compiled here, below
        }
        if (it->second.wait_for(std::chrono::seconds(0)) != std::future_status::ready) {
          wait.wait = KernelAnswer::Wait::kAsync;
          return wait;
        }
        const CompileCache::Result result = it->second.get();
        pending_.erase(it);
        return Answer(types, spec, absl::StrCat(reason, " (compiled in the background)"), result);
      }
    }
  }
  if (options_.inject_failure && options_.inject_failure(cluster_.name)) {
    // Not through the cache: the failure is this source's alone.
    return Answer(types, spec, reason, InjectedFailure());
  }
  std::string note = reason;
  TimelineEvent trace(cluster_.name, "compile");  // observability: ir/timeline.h
  const bool wanted_symbols = !spec.input_symbols.empty();
  CompileCache::Result result =
      GetKernel(spec, options_.compile, options_.disk_cache, options_.schedule_dirs, &note);
  if (wanted_symbols && result.kernel.ok() && result.input_symbols.empty()) {
    symbolic_refused_ = true;
  }
  trace.set_args(result.hit ? "\"cache_hit\":true" : "\"cache_hit\":false");
  return Answer(types, spec, note, result);
}

KernelAnswer KernelSource::Answer(const std::vector<TensorType>& types, const ClusterSpec& spec,
                                  const std::string& reason, const CompileCache::Result& result) {
  KernelAnswer answer;
  if (result.hit) {
    answer.origin = KernelAnswer::Origin::kMemoryCache;
  } else if (result.kernel.ok() && (*result.kernel)->kernel->loaded_from_disk()) {
    answer.origin = KernelAnswer::Origin::kDiskCache;
  } else if (result.kernel.ok() || result.compile_ms > 0) {
    answer.origin = KernelAnswer::Origin::kCompiled;
    answer.compile_ms = result.compile_ms;
  }
  if (options_.log_compiles) LogCompile(options_, cluster_, types, reason, result);
  if (!result.kernel.ok()) {
    answer.state = KernelAnswer::State::kFailed;
    answer.error = result.kernel.status();
    return answer;
  }
  answer.state = KernelAnswer::State::kReady;
  answer.kernel = *result.kernel;
  answer.output_types = OutputTypes(spec);
  answer.input_symbols = result.input_symbols;
  answer.compiled_types = result.input_types;
  last_types_ = types;
  return answer;
}

std::optional<std::shared_future<CompileCache::Result>> KernelSource::CompileInBackground(
    const ClusterSpec& spec) {
  if (options_.inject_failure && options_.inject_failure(cluster_.name)) {
    std::promise<CompileCache::Result> failed;
    failed.set_value(InjectedFailure());
    return failed.get_future().share();
  }
  std::shared_ptr<ClusterSnapshot> snap = Snapshot(spec);
  if (snap == nullptr) return std::nullopt;
  return std::async(std::launch::async,
                    [snap, copts = options_.compile, disk_cache = options_.disk_cache,
                     dirs = options_.schedule_dirs]() {
                      TimelineEvent trace(snap->spec.name, "compile");
                      std::string note;  // the answer logs "compiled in the background"
                      return GetKernel(snap->spec, copts, disk_cache, dirs, &note);
                    })
      .share();
}

bool KernelSource::Megamorphic(const std::vector<TensorType>& signature) {
  const std::vector<TensorType> types =
      symbolic_refused_ ? signature : KernelSignature(signature, InputSymbols(signature));
  const int limit = options_.max_signatures;
  if (limit <= 0 || !options_.can_wait) return false;
  if (std::find(seen_.begin(), seen_.end(), types) != seen_.end()) return false;
  if (megamorphic_) return true;
  if (static_cast<int>(seen_.size()) >= limit &&
      runs_ < kRunsPerSignature * static_cast<int64_t>(seen_.size() + 1)) {
    megamorphic_ = true;
    std::vector<std::vector<TensorType>> all = seen_;
    all.push_back(types);
    LogWarning(absl::StrCat(
        options_.what, " met ", all.size(), " input signatures in ", runs_,
        " runs (more than max_signatures_per_cluster = ", limit, ", fewer than ", kRunsPerSignature,
        " runs each): it is no longer compiled for new signatures, which run ",
        options_.is_cluster ? "op by op on compiled single-op kernels" : "on its reference kernel",
        ". Changing: ", ChangingDims(all, "input"),
        ". A -1 dim in an input_signature with reduce_retracing, or padding to a "
        "few sizes, avoids this."));
    return true;
  }
  seen_.push_back(types);
  return false;
}

}  // namespace braze
