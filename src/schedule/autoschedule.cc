// Runs Halide's autoschedulers; see autoschedule.h.
#include "schedule/autoschedule.h"

#include <cstdlib>
#include <map>
#include <mutex>
#include <string>

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
    Halide::load_plugin(path);  // throws Halide::Error when dlopen fails
    (*loaded)[k] = path;
  };
  if (!tried_all) {
    tried_all = true;
    for (Scheduler k :
         {Scheduler::kAdams2019, Scheduler::kMullapudi2016, Scheduler::kLi2018}) {
      try {
        load(k);
      } catch (const Halide::Error&) {
        // Reported below if `kind` is the one missing; the others when asked for.
      }
    }
  }
  load(kind);
}

}  // namespace

std::string ApplyAutoscheduler(Scheduler kind, Halide::Pipeline& pipeline,
                               const Halide::Target& target, int parallelism) {
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
  if (kind == Scheduler::kAdams2019) one_search.lock();
  // docs/HALIDE14.md: 32 MiB last-level cache, balance 40 (Halide's own defaults for CPUs).
  const Halide::MachineParams params(parallelism, uint64_t{32} << 20, 40);
  Halide::AutoSchedulerResults results = pipeline.auto_schedule(name, target, params);
  return results.schedule_source;
}

}  // namespace schedule
}  // namespace braze
