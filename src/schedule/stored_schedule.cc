// Stored schedules: the text format, the lookup and its warnings (stored_schedule.h).
#include "schedule/stored_schedule.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <map>
#include <mutex>
#include <set>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "ir/logging.h"

namespace braze {
namespace {

constexpr char kHeader[] = "braze-schedule 1";

// The schedulers an entry may name: the CPU template, the CPU autoschedulers, and the
// GPU heuristic's plans that rfactor (the serial plan is the fallback of last resort).
std::optional<Scheduler> StoredSchedulerNamed(absl::string_view name) {
  for (Scheduler k : {Scheduler::kSafeDefault, Scheduler::kAdams2019, Scheduler::kMullapudi2016,
                      Scheduler::kGpuFused, Scheduler::kGpuSeparate}) {
    if (name == SchedulerName(k)) return k;
  }
  return std::nullopt;
}

bool IsGpuEntry(const ScheduleParams& p) { return IsGpuHeuristic(p.scheduler); }

// One knob of the GPU heuristic (GpuScheduleParams): its field name, where it lives, the
// values it may take.
struct GpuKnob {
  const char* name;
  int lo, hi;
  bool power_of_two;
  int GpuScheduleParams::*field;
};

const std::vector<GpuKnob>& GpuKnobs() {
  static const std::vector<GpuKnob> knobs = {
      {"gpu_block_threads", 32, 1024, true, &GpuScheduleParams::block_threads},
      {"gpu_tile_x", 1, 1024, true, &GpuScheduleParams::tile_x},
      {"gpu_row_elements", 1, 256, true, &GpuScheduleParams::row_elements},
      {"gpu_warp_row", 0, 65536, false, &GpuScheduleParams::warp_row},
      {"gpu_vector", 1, 4, true, &GpuScheduleParams::vector},
      {"gpu_matmul_tile", 1, 32, true, &GpuScheduleParams::matmul_tile},
  };
  return knobs;
}

const GpuKnob* GpuKnobNamed(absl::string_view name) {
  for (const GpuKnob& k : GpuKnobs()) {
    if (name == k.name) return &k;
  }
  return nullptr;
}

// One integer knob: its field name, where it lives and the values it may take.
struct IntKnob {
  const char* name;
  int64_t lo, hi;
  bool power_of_two;
  int64_t ScheduleParams::*wide;
  int ScheduleParams::*narrow;
  int64_t Get(const ScheduleParams& p) const { return wide ? p.*wide : p.*narrow; }
  void Set(ScheduleParams& p, int64_t v) const {
    if (wide) {
      p.*wide = v;
    } else {
      p.*narrow = static_cast<int>(v);
    }
  }
};

const std::vector<IntKnob>& IntKnobs() {
  static const std::vector<IntKnob> knobs = {
      {"tasks_per_thread", 1, 64, false, nullptr, &ScheduleParams::tasks_per_thread},
      {"min_parallel_work", 0, int64_t{1} << 30, false, &ScheduleParams::min_parallel_work,
       nullptr},
      {"vector_factor", 1, 4, true, nullptr, &ScheduleParams::vector_factor},
      {"matmul_vectors", 1, 4, false, nullptr, &ScheduleParams::matmul_vectors},
      {"matmul_rows", 1, 256, false, nullptr, &ScheduleParams::matmul_rows},
      {"matmul_strip", 1, 8, false, nullptr, &ScheduleParams::matmul_strip},
      {"row_lanes", 1, 4, true, nullptr, &ScheduleParams::row_lanes},
      {"stream_min_mib", 0, 1 << 20, false, nullptr, &ScheduleParams::stream_min_mib},
      {"row_prefetch", 0, 2, false, nullptr, &ScheduleParams::row_prefetch},
  };
  return knobs;
}

bool IsHex16(absl::string_view s) {
  if (s.size() != 16) return false;
  for (char c : s) {
    if (!absl::ascii_isxdigit(static_cast<unsigned char>(c)) || absl::ascii_isupper(c)) {
      return false;
    }
  }
  return true;
}

// Reads a file whole; nullopt when it does not exist, or when it cannot be read with
// `*unreadable` saying why (a stored schedule there is not silently passed over).
std::optional<std::string> ReadFile(const std::string& path, std::string* unreadable) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    const int error = errno;
    struct stat st;
    if (lstat(path.c_str(), &st) == 0) {  // there, but not to be read (a dangling link)
      *unreadable = absl::StrCat("it cannot be read: ", std::strerror(error));
    }
    return std::nullopt;
  }
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace

bool GpuScheduleParams::operator==(const GpuScheduleParams& o) const {
  for (const GpuKnob& k : GpuKnobs()) {
    if (this->*k.field != o.*k.field) return false;
  }
  return true;
}

bool ScheduleParams::operator==(const ScheduleParams& o) const {
  if (scheduler != o.scheduler || gpu != o.gpu || row_pipeline != o.row_pipeline ||
      row_materialize != o.row_materialize || matmul_library != o.matmul_library) {
    return false;
  }
  for (const IntKnob& k : IntKnobs()) {
    if (k.Get(*this) != k.Get(o)) return false;
  }
  return true;
}

std::string ParamsSummary(const ScheduleParams& params) {
  std::string s = SchedulerName(params.scheduler);
  const ScheduleParams defaults;
  if (IsGpuEntry(params)) {
    for (const GpuKnob& k : GpuKnobs()) {
      if (params.gpu.*k.field != defaults.gpu.*k.field) {
        absl::StrAppend(&s, " ", k.name, "=", params.gpu.*k.field);
      }
    }
    return s;
  }
  if (params.scheduler != Scheduler::kSafeDefault) return s;
  for (const IntKnob& k : IntKnobs()) {
    if (k.Get(params) != k.Get(defaults)) absl::StrAppend(&s, " ", k.name, "=", k.Get(params));
  }
  if (!params.row_pipeline) absl::StrAppend(&s, " row_pipeline=false");
  if (!params.row_materialize) absl::StrAppend(&s, " row_materialize=false");
  if (!params.matmul_library) absl::StrAppend(&s, " matmul_library=false");
  return s;
}

std::string ScheduleKeyHash(absl::string_view cluster_key) {
  uint64_t h = 14695981039346656037ull;  // FNV-1a: stable across builds and processes
  for (unsigned char c : cluster_key) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return absl::StrFormat("%016x", h);
}

std::string FormatStoredSchedule(const StoredSchedule& e) {
  std::string text = absl::StrCat(
      "# Braze stored schedule (docs/SCHEDULES.md): the parameters of Braze's ",
      IsGpuEntry(e.params) ? "GPU\n# heuristic" : "CPU\n# schedule templates",
      " for one cluster signature, found by braze-tune.\n", kHeader, "\n", "key: ", e.key_hash,
      "\n", "target: ", e.target, "\n", "templates: ", e.templates_version, "\n");
  // Values are one line each: a newline inside one would end the entry's field early.
  auto line = [&](const char* name, const std::string& value) {
    if (value.empty()) return;
    std::string v = value;
    for (char& c : v) {
      if (c == '\n' || c == '\r') c = ' ';
    }
    absl::StrAppend(&text, name, ": ", v, "\n");
  };
  line("cluster", e.cluster);
  line("ops", e.ops);
  line("inputs", e.inputs);
  line("measured", e.measured);
  absl::StrAppend(&text, "scheduler: ", SchedulerName(e.params.scheduler), "\n");
  if (IsGpuEntry(e.params)) {
    for (const GpuKnob& k : GpuKnobs()) {
      absl::StrAppend(&text, k.name, ": ", e.params.gpu.*k.field, "\n");
    }
    return text;
  }
  for (const IntKnob& k : IntKnobs()) absl::StrAppend(&text, k.name, ": ", k.Get(e.params), "\n");
  absl::StrAppend(&text, "row_pipeline: ", e.params.row_pipeline ? "true" : "false", "\n");
  absl::StrAppend(&text, "row_materialize: ", e.params.row_materialize ? "true" : "false", "\n");
  absl::StrAppend(&text, "matmul_library: ", e.params.matmul_library ? "true" : "false", "\n");
  return text;
}

absl::StatusOr<StoredSchedule> ParseStoredSchedule(absl::string_view text, absl::string_view path) {
  StoredSchedule e;
  e.path = std::string(path);
  bool header = false, has_key = false, has_target = false, has_templates = false,
       has_scheduler = false;
  std::set<std::string> seen;
  int line_no = 0;
  for (absl::string_view raw : absl::StrSplit(text, '\n')) {
    ++line_no;
    const absl::string_view line = absl::StripAsciiWhitespace(raw);
    auto error = [&](const std::string& what) {
      return absl::InvalidArgumentError(absl::StrCat(path, ":", line_no, ": ", what));
    };
    if (line.empty() || line[0] == '#') continue;
    if (!header) {
      if (line != kHeader) {
        return error(
            absl::StrCat("not a stored schedule: expected '", kHeader, "', got '", line, "'"));
      }
      header = true;
      continue;
    }
    const size_t colon = line.find(':');
    if (colon == absl::string_view::npos)
      return error(absl::StrCat("expected 'name: value', got '", line, "'"));
    const std::string name(absl::StripAsciiWhitespace(line.substr(0, colon)));
    const std::string value(absl::StripAsciiWhitespace(line.substr(colon + 1)));
    if (!seen.insert(name).second) return error(absl::StrCat("'", name, "' given twice"));
    if (name == "key") {
      if (!IsHex16(value))
        return error(absl::StrCat("key must be 16 hex digits, got '", value, "'"));
      e.key_hash = value;
      has_key = true;
    } else if (name == "target") {
      if (value.empty()) return error("empty target");
      e.target = value;
      has_target = true;
    } else if (name == "templates") {
      if (!absl::SimpleAtoi(value, &e.templates_version)) {
        return error(absl::StrCat("templates must be a number, got '", value, "'"));
      }
      has_templates = true;
    } else if (name == "cluster" || name == "ops" || name == "inputs" || name == "measured") {
      (name == "cluster"  ? e.cluster
       : name == "ops"    ? e.ops
       : name == "inputs" ? e.inputs
                          : e.measured) = value;
    } else if (name == "scheduler") {
      std::optional<Scheduler> kind = StoredSchedulerNamed(value);
      if (!kind) {
        return error(absl::StrCat("scheduler must be SafeDefault, Adams2019, Mullapudi2016, ",
                                  SchedulerName(Scheduler::kGpuFused), " or ",
                                  SchedulerName(Scheduler::kGpuSeparate), ", got '", value, "'"));
      }
      e.params.scheduler = *kind;
      has_scheduler = true;
    } else if (name == "row_pipeline" || name == "row_materialize" || name == "matmul_library") {
      if (value != "true" && value != "false") {
        return error(absl::StrCat(name, " must be true or false, got '", value, "'"));
      }
      (name == "row_pipeline"      ? e.params.row_pipeline
       : name == "row_materialize" ? e.params.row_materialize
                                   : e.params.matmul_library) = value == "true";
    } else if (const GpuKnob* g = GpuKnobNamed(name)) {
      int v = 0;
      if (!absl::SimpleAtoi(value, &v) || v < g->lo || v > g->hi ||
          (g->power_of_two && (v & (v - 1)) != 0)) {
        return error(absl::StrCat(name, " must be ", g->power_of_two ? "a power of two " : "",
                                  "in [", g->lo, ", ", g->hi, "], got '", value, "'"));
      }
      e.params.gpu.*g->field = v;
    } else {
      const IntKnob* knob = nullptr;
      for (const IntKnob& k : IntKnobs()) {
        if (name == k.name) knob = &k;
      }
      if (knob == nullptr && has_templates && e.templates_version != kScheduleTemplatesVersion) {
        // Another version's field: the entry is stale, which the lookup says.
        continue;
      }
      if (knob == nullptr) return error(absl::StrCat("unknown field '", name, "'"));
      int64_t v = 0;
      if (!absl::SimpleAtoi(value, &v) || v < knob->lo || v > knob->hi ||
          (knob->power_of_two && (v & (v - 1)) != 0)) {
        return error(absl::StrCat(name, " must be ", knob->power_of_two ? "a power of two " : "",
                                  "in [", knob->lo, ", ", knob->hi, "], got '", value, "'"));
      }
      knob->Set(e.params, v);
    }
  }
  auto missing = [&](const char* what) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": no '", what, "' line"));
  };
  if (!header)
    return absl::InvalidArgumentError(absl::StrCat(path, ": empty, not a stored schedule"));
  if (!has_key) return missing("key");
  if (!has_target) return missing("target");
  if (!has_templates) return missing("templates");
  if (!has_scheduler) return missing("scheduler");
  // A GPU plan's entry holds the GPU heuristic's knobs, a CPU one the templates': the
  // other kind's would be silently unused.
  for (const std::string& name : seen) {
    const bool gpu_knob = GpuKnobNamed(name) != nullptr;
    bool cpu_knob = name == "row_pipeline" || name == "row_materialize" || name == "matmul_library";
    for (const IntKnob& k : IntKnobs()) cpu_knob |= name == k.name;
    if (IsGpuEntry(e.params) ? cpu_knob : gpu_knob) {
      return absl::InvalidArgumentError(
          absl::StrCat(path, ": '", name, "' is a ", gpu_knob ? "GPU" : "CPU",
                       " field, but the entry's scheduler is ", SchedulerName(e.params.scheduler)));
    }
  }
  return e;
}

std::string StoredSchedulePath(const std::string& dir, const std::string& key_hash) {
  return absl::StrCat(dir, dir.empty() || dir.back() == '/' ? "" : "/", key_hash, ".schedule");
}

void WarnStoredScheduleRefused(const std::string& path, const std::string& why) {
  static std::mutex mu;
  static std::set<std::string>* warned = new std::set<std::string>();
  {
    std::lock_guard<std::mutex> lock(mu);
    if (!warned->insert(path).second) return;
  }
  LogWarning(
      absl::StrCat("stored schedule ", path, " refused: ", why, "; using the default schedule"));
}

std::optional<StoredSchedule> FindStoredSchedule(const std::vector<std::string>& dirs,
                                                 const std::string& key_hash,
                                                 const std::string& target) {
  for (const std::string& dir : dirs) {
    const std::string path = StoredSchedulePath(dir, key_hash);
    std::string unreadable;
    std::optional<std::string> text = ReadFile(path, &unreadable);
    if (!text && !unreadable.empty()) {
      WarnStoredScheduleRefused(path, unreadable);
      return std::nullopt;
    }
    if (!text) continue;
    absl::StatusOr<StoredSchedule> entry = ParseStoredSchedule(*text, path);
    if (!entry.ok()) {
      WarnStoredScheduleRefused(path, std::string(entry.status().message()));
      return std::nullopt;
    }
    if (entry->key_hash != key_hash) {
      WarnStoredScheduleRefused(
          path, absl::StrCat("its key ", entry->key_hash, " is not its file's name"));
      return std::nullopt;
    }
    if (entry->templates_version != kScheduleTemplatesVersion) {
      WarnStoredScheduleRefused(
          path, absl::StrCat("stale: tuned for version ", entry->templates_version,
                             " of Braze's schedule templates, this build has version ",
                             kScheduleTemplatesVersion, " (run braze-tune again)"));
      return std::nullopt;
    }
    if (entry->target != target) {
      WarnStoredScheduleRefused(path, absl::StrCat("tuned for target ", entry->target,
                                                   ", this cluster compiles for ", target));
      return std::nullopt;
    }
    return *std::move(entry);
  }
  return std::nullopt;
}

absl::Status CheckScheduleDirectory(const std::string& dir) {
  struct stat st;
  if (dir.empty()) return absl::InvalidArgumentError("an empty directory name");
  if (stat(dir.c_str(), &st) != 0) {
    return absl::InvalidArgumentError(absl::StrCat("'", dir, "': ", std::strerror(errno)));
  }
  if (!S_ISDIR(st.st_mode)) {
    return absl::InvalidArgumentError(absl::StrCat("'", dir, "' is not a directory"));
  }
  return absl::OkStatus();
}

std::vector<std::string> DefaultScheduleDirs() {
  std::vector<std::string> dirs;
#ifdef BRAZE_SOURCE_SCHEDULES
  dirs.push_back(BRAZE_SOURCE_SCHEDULES);
#endif
#ifdef BRAZE_INSTALLED_SCHEDULES
  dirs.push_back(BRAZE_INSTALLED_SCHEDULES);
#endif
  return dirs;
}

}  // namespace braze
