// Runs Halide's autoschedulers; see autoschedule.h.
#include "schedule/autoschedule.h"

#include <dlfcn.h>

#include <chrono>
#include <cstdlib>
#include <map>
#include <mutex>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "ir/environment.h"
#include "ir/logging.h"

namespace braze {
namespace schedule {
namespace {

// Halide's registry name and the plugin's file name for each autoscheduler: the
// vocabulary's own names (braze/schedulers.def) are Halide's for its plugins.
const char* RegistryName(Scheduler kind) {
  switch (kind) {
    case Scheduler::kAdams2019:
    case Scheduler::kMullapudi2016:
    case Scheduler::kLi2018:
      return SchedulerName(kind);
    case Scheduler::kAuto:  // not plugins
    case Scheduler::kSafeDefault:
    case Scheduler::kGpuFused:
    case Scheduler::kGpuSeparate:
    case Scheduler::kGpuSerial:
      break;
  }
  return nullptr;
}

const char* CompiledInPath(Scheduler kind) {
  switch (kind) {
    case Scheduler::kAdams2019:
      return BRAZE_ADAMS2019_SO;
    case Scheduler::kMullapudi2016:
      return BRAZE_MULLAPUDI2016_SO;
    case Scheduler::kLi2018:
      return BRAZE_LI2018_SO;
    case Scheduler::kAuto:  // not plugins
    case Scheduler::kSafeDefault:
    case Scheduler::kGpuFused:
    case Scheduler::kGpuSeparate:
    case Scheduler::kGpuSerial:
      break;
  }
  return "";
}

const char* FileName(Scheduler kind) {
  switch (kind) {
    case Scheduler::kAdams2019:
      return "libautoschedule_adams2019.so";
    case Scheduler::kMullapudi2016:
      return "libautoschedule_mullapudi2016.so";
    case Scheduler::kLi2018:
      return "libautoschedule_li2018.so";
    case Scheduler::kAuto:  // not plugins
    case Scheduler::kSafeDefault:
    case Scheduler::kGpuFused:
    case Scheduler::kGpuSeparate:
    case Scheduler::kGpuSerial:
      break;
  }
  return "";
}

}  // namespace
}  // namespace schedule

std::string AutoschedulerPluginPath(Scheduler kind) {
  const char* dir = std::getenv("BRAZE_HALIDE_PLUGIN_DIR");
  if (dir != nullptr && *dir != '\0') {
    return std::string(dir) + "/" + schedule::FileName(kind);
  }
  return schedule::CompiledInPath(kind);
}

namespace schedule {
namespace {

// Loads the plugin for `kind` unless an earlier call did. A failed load is retried next
// time (the environment may have been fixed); a successful one is never repeated.
//
// The first call loads every plugin: loading one adds to Halide's registry of
// autoschedulers, which Pipeline::auto_schedule reads with no lock, so a plugin loaded
// while another thread autoschedules raced with it (TSan: add_autoscheduler against
// find_autoscheduler, two clusters compiling at once under different schedulers).
void EnsurePluginLoaded(Scheduler kind) {
  static std::mutex mu;
  static std::map<Scheduler, std::string>* loaded =
      new std::map<Scheduler, std::string>();  // kind -> path; never destroyed
  static bool tried_all = false;
  std::lock_guard<std::mutex> lock(mu);
  auto load = [&](Scheduler k) {
    if (loaded->count(k) > 0) return;
    const std::string path = AutoschedulerPluginPath(k);
    // Every symbol of the plugin bound now, not at its first call (Halide's dlopen is
    // lazy). Each plugin carries its own copy of Halide's runtime (weak symbols it reaches
    // through the dynamic linker: the work queue, its mutexes, halide_do_par_for), and
    // the disk cache's runtime is loaded RTLD_GLOBAL later (aot_kernel.cc), after which
    // a lazy binding would resolve to that copy: Adams2019's cost model then locked one
    // runtime's work-queue mutex and unlocked the other's, and the next
    // halide_set_num_threads of a cached kernel slept forever (docs/DISK_CACHE.md,
    // "One Halide runtime per caller"). Bound at load, the plugin uses one runtime
    // throughout: its own, or the cache's where that was loaded first. The handle stays
    // open; Halide's own dlopen below finds the library loaded.
    dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);  // a failure is reported by load_plugin
    Halide::load_plugin(path);                    // throws Halide::Error when dlopen fails
    (*loaded)[k] = path;
  };
  if (!tried_all) {
    tried_all = true;
    for (Scheduler k : {Scheduler::kAdams2019, Scheduler::kMullapudi2016, Scheduler::kLi2018}) {
      try {
        load(k);
      } catch (const Halide::Error&) {
        // Reported below if `kind` is the one missing; the others when asked for.
      }
    }
  }
  load(kind);
}

// HL_BEAM_SIZE as the user set it before the process started ("" when unset), read by
// a static initializer while the process is still single-threaded. When unset, the
// initializer sets it to Halide's own default, so that SetAdams2019Beam only ever
// replaces an existing variable: glibc's setenv then swaps one pointer in environ (a
// getenv on another thread sees the old value or the new one), whereas adding a
// variable may move environ under a concurrent getenv. A marker says the value is
// Braze's, not the user's, to a Braze process this one starts (which inherits both).
constexpr char kBeamMarker[] = "BRAZE_SET_HL_BEAM_SIZE";
const std::string& UserBeamSize() {
  static const std::string* const user = [] {
    const char* set = std::getenv("HL_BEAM_SIZE");
    const bool ours = std::getenv(kBeamMarker) != nullptr;
    auto* value = new std::string(set != nullptr && !ours ? set : "");  // never destroyed
    if (value->empty()) {
      SetEnvironmentVariable("HL_BEAM_SIZE", "32", /*overwrite=*/true);
      SetEnvironmentVariable(kBeamMarker, "1", /*overwrite=*/true);
    }
    return value;
  }();
  return *user;
}
[[maybe_unused]] const bool kUserBeamSizeRead = UserBeamSize().empty();  // before main()

// Halide 14's Adams2019 reads HL_BEAM_SIZE at every search (one pass with a beam of 1,
// five passes otherwise). Called under the Adams2019 lock.
void SetAdams2019Beam(int beam) {
  SetEnvironmentVariable("HL_BEAM_SIZE", std::to_string(beam), /*overwrite=*/true);
}

double SecondsSince(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

double Adams2019SearchBudgetSeconds() {
  const char* set = std::getenv("BRAZE_ADAMS2019_SEARCH_S");
  if (set == nullptr || *set == '\0') return kAdams2019SearchBudgetSeconds;
  char* end = nullptr;
  const double seconds = std::strtod(set, &end);
  // A malformed value keeps the default (said once: it is read at every search).
  if (*end != '\0' || !(seconds >= 0)) {
    static std::once_flag once;
    std::call_once(once, [&] {
      LogWarning(absl::StrCat("BRAZE_ADAMS2019_SEARCH_S='", set,
                              "' is not a number of seconds >= 0; the default holds (",
                              kAdams2019SearchBudgetSeconds, " s: the greedy search)"));
    });
    return kAdams2019SearchBudgetSeconds;
  }
  return seconds;
}

// The beam for Adams2019's search of the pipeline `fresh` makes, timed by a greedy
// search of it (see autoschedule.h); `*note` says why when the full search is cut.
int Adams2019Beam(const FreshPipeline& fresh, const char* name, const Halide::Target& target,
                  const Halide::MachineParams& params, std::string* note) {
  const double budget_s = Adams2019SearchBudgetSeconds();
  if (budget_s <= 0) {
    *note =
        "Adams2019: greedy search (beam 1, one pass): the full search has no time bound "
        "(BRAZE_ADAMS2019_SEARCH_S is 0)";
    return 1;
  }
  if (!fresh) return kAdams2019FullBeam;
  Halide::Pipeline probe = fresh();
  SetAdams2019Beam(1);
  const auto t0 = std::chrono::steady_clock::now();
  probe.auto_schedule(name, target, params);
  const double greedy_s = SecondsSince(t0);
  const double estimate_s = greedy_s * kAdams2019FullSearchFactor;
  if (estimate_s <= budget_s) return kAdams2019FullBeam;
  *note = absl::StrFormat(
      "Adams2019: greedy search (beam 1, one pass): its greedy search took %.2f s, so the "
      "full search (beam %d, five passes) would take about %.0f s, over the bound of %.0f s",
      greedy_s, kAdams2019FullBeam, estimate_s, budget_s);
  return 1;
}

}  // namespace

std::string ApplyAutoscheduler(Scheduler kind, Halide::Pipeline& pipeline,
                               const Halide::Target& target, int parallelism,
                               const FreshPipeline& fresh) {
  const char* name = RegistryName(kind);
  if (name == nullptr) {
    throw Halide::CompileError(std::string("ApplyAutoscheduler: ") + SchedulerName(kind) +
                               " is not an autoscheduler");
  }
  EnsurePluginLoaded(kind);
  // Adams2019 searches run one at a time (docs/HALIDE14.md, "HALIDE_TIC/TOC"): each calls
  // Halide 14's HALIDE_TIC and HALIDE_TOC, whose timers live in one unlocked global
  // vector, so two at once can corrupt it; a TOC that then pops an empty vector indents
  // its debug line about 2^64 times (a compile hung in
  // HalideOutputTest.ConcurrentCompilesShareTheCapture, its stack in halide_toc_impl).
  static std::mutex* const adams2019_mu = new std::mutex();  // never destroyed
  std::unique_lock<std::mutex> one_search(*adams2019_mu, std::defer_lock);
  // docs/HALIDE14.md: 32 MiB last-level cache, balance 40 (Halide's own defaults for CPUs).
  const Halide::MachineParams params(parallelism, uint64_t{32} << 20, 40);
  std::string note;
  if (kind == Scheduler::kAdams2019) {
    one_search.lock();
    // Its search has no time limit (issue 35, braze-fuzz seed 13600022: past 10 minutes
    // on one cluster): a user's HL_BEAM_SIZE decides, else the greedy probe does.
    if (UserBeamSize().empty()) {
      SetAdams2019Beam(Adams2019Beam(fresh, name, target, params, &note));
      // A cut the user's BRAZE_ADAMS2019_SEARCH_S decided is logged; the default greedy
      // search is not (it is every Adams2019 compile's, and --v=1 is for decisions): the
      // schedule's text says it either way.
      if (!note.empty() && Adams2019SearchBudgetSeconds() > 0 && VLogIsOn(1)) LogInfo(1, note);
    }
  }
  Halide::AutoSchedulerResults results = pipeline.auto_schedule(name, target, params);
  return note.empty() ? results.schedule_source
                      : absl::StrCat("// ", note, "\n", results.schedule_source);
}

}  // namespace schedule
}  // namespace braze
