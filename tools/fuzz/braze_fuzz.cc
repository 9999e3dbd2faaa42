// braze-fuzz: differential fuzzing of the compiler at scale. Each seed is a random
// program (tools/fuzz/random_program.h) run fused, in strict mode, under a scheduler,
// and on the reference kernels; outputs must agree. A failure is minimized and printed
// as a self-contained C++ snippet.
//
//   braze-fuzz --seeds=1000:2000 --jobs=2 --budget=600
//   braze-fuzz --seeds=4711 --scheduler=Mullapudi2016 --verbose
//
// Flags: --seeds=A:B (the half-open range, or one seed), --jobs=N (processes; seeds are
// dealt round-robin), --budget=S (seconds; stops starting new seeds after that),
// --scheduler=auto|adams2019|mullapudi2016|li2018|safedefault|random (random: one per
// seed, from the seed), --jit_device[=D] (place ops on D, jit:cpu by default or
// jit:opencl, instead of a JitScope), --function (the compiled run is a Function,
// jit_compile with the program's input signature, its body the program traced on its
// arguments, instead of a JitScope),
// --no_minimize, --max_ops=N, --dynamic=P (the chance an input has dim 0 declared -1),
// --dynamic_dims[=P] (the chance an input declares -1 on dims of its choice, several at
// once, each fed sizes of its own per run; default 0; bare: every input),
// --specials=P (the chance a float input holds infinities, NaN, zeros and subnormals),
// --large[=P] (the chance a program's values are past the last-level cache, 4M to 8M
// elements: streaming stores, parallel splits; bare: every program), --gemm[=P] (the
// chance its matmuls do 2^21 to 2^22 multiply-adds, where oneDNN takes over; bare: every
// program), --window[=P] (the chance a program is image-shaped, with convolutions and
// pools; default 0.1; bare: every program), --sequence[=P] (the chance a program draws
// the sequence ops: Gather, UnsortedSegmentSum, Iota, Sin, Cos; default 0; bare: every
// program), --random[=P] (the chance a program draws the random ops: RandomUniform,
// RandomNormal, Dropout, their bits compared exactly; default 0; bare: every program),
// --attention[=P] (the chance a program draws ScaledDotProductAttention, fused or not,
// and in half of them its gradients; default 0; bare: every program), --float16[=P] (the
// chance a program draws bf16 and f16 values, ops on them and casts; default 0; bare:
// every program), --control_flow[=P] (the chance a program draws Conds, Scans and
// bounded Whiles around random bodies; default 0; bare: every program), --edges[=P] (the
// chance a program draws what the other families seldom or never do: casts between every
// pair of dtypes, comparisons and selects of every dtype, negative axes, values with no
// elements, ranks 5 and 6; default 0; bare: every program), --all_families (every family
// in every program at a third of its usual share, 24 ops at most, window 0.3, gemm 0.05
// and dynamic_dims 0.3, as an outside generator mixes them; flags after it override it),
// --threads=N|random (SessionOptions::num_threads of the
// compiled run; random: one of 1, 2, 3, 4 and all the CPUs per seed, from the seed; default 0,
// all),
// --verbose (a line per seed), --print (print the programs
// as C++ and run nothing), --coverage (tally the ops, dtypes and modes the programs hold,
// their gradients and control flow bodies included, and print the table; run nothing:
// tools/fuzz/fuzz_coverage.h). Exit status 1 on any
// mismatch or error. The first line ("braze-fuzz: settings: ...") and the summary name
// every setting, the disk cache's and BRAZE_FLAGS included, so a kept log says how it
// ran (docs/FUZZING.md, "Campaigns"). The last line reads "braze-fuzz: N passed, M failed".
// Every shard is a process: one that crashes is reported with the seed it was running
// (and the command that reproduces it) and replaced by one that goes on with its seeds.
// --seed_timeout=S (default 600; 0: none) does the same to a seed that runs longer than
// S seconds before any mismatch is minimized: a hang is a failure too (seed 3500676 on
// jit:opencl once held a run for half an hour in POCL's kernel compiler). The report
// of a hang says the CPU time the shard used in the seed and the load average: a seed
// starved by other processes used a small part of its wall time (64200109: 6 s alone).
#include <sched.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "braze/logging.h"
#include "compile/disk_cache.h"
#include "tools/fuzz/fuzz_coverage.h"
#include "tools/fuzz/fuzz_runner.h"

namespace braze {
namespace fuzz {
namespace {

// The steady clock's reading, comparable between the tool's processes.
int64_t NowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// The CPU time of process `pid` (every thread), from /proc; -1 when unreadable.
int64_t ProcCpuNs(pid_t pid) {
  std::FILE* file = std::fopen(absl::StrCat("/proc/", pid, "/stat").c_str(), "r");
  if (file == nullptr) return -1;
  char line[1024] = {};
  const size_t n = std::fread(line, 1, sizeof(line) - 1, file);
  std::fclose(file);
  // Fields 14 and 15 (utime, stime, in clock ticks) follow the command's closing paren.
  const char* after = std::strrchr(line, ')');
  if (n == 0 || after == nullptr) return -1;
  unsigned long long utime = 0, stime = 0;
  if (std::sscanf(after + 1, " %*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &utime,
                  &stime) != 2) {
    return -1;
  }
  return static_cast<int64_t>((utime + stime) * (1e9 / sysconf(_SC_CLK_TCK)));
}

// Why a seed's shard was killed for time, as a triage reads it: the CPU time the shard
// used in the seed and the load. A seed starved of the CPU by other processes (the
// campaigns run at nice 10 beside other engineers' builds) used a small part of its
// wall time; a deadlock used none, a livelock or a slow compile all of it, or more.
std::string TimeoutNote(pid_t pid, int64_t started_cpu_ns) {
  const int64_t cpu = ProcCpuNs(pid);
  double load = -1;
  if (std::FILE* file = std::fopen("/proc/loadavg", "r")) {
    if (std::fscanf(file, "%lf", &load) != 1) load = -1;
    std::fclose(file);
  }
  std::string note;
  if (cpu >= 0 && started_cpu_ns >= 0) {
    absl::StrAppend(&note, ", ", absl::StrFormat("%.1f", (cpu - started_cpu_ns) * 1e-9),
                    " s of CPU in it (every thread)");
  }
  if (load >= 0) absl::StrAppend(&note, ", load average ", absl::StrFormat("%.1f", load));
  return note;
}

struct Flags {
  uint64_t first = 1, last = 101;  // [first, last)
  int jobs = 1;
  double budget = 0;  // 0: none
  std::string scheduler = "random";
  std::string jit_device;  // empty: a JitScope
  bool function = false;   // the compiled run through a Function (RunOptions::function)
  bool minimize = true;
  bool verbose = false;
  bool print = false;
  bool coverage = false;  // tally what the programs hold (fuzz_coverage.h), run nothing
  int max_ops = 14;
  double dynamic = -1;      // < 0: the generator's default
  double dynamic_dims = 0;  // GenerateOptions::dynamic_dims_probability
  double specials = 0;
  double large = 0;           // GenerateOptions::dram_probability
  double gemm = 0;            // GenerateOptions::gemm_probability
  double window = -1;         // GenerateOptions::window_probability; < 0: its default
  double sequence = 0;        // GenerateOptions::sequence_probability
  double random = 0;          // GenerateOptions::random_probability
  double attention = 0;       // GenerateOptions::attention_probability
  double float16 = 0;         // GenerateOptions::float16_probability
  double control_flow = 0;    // GenerateOptions::control_flow_probability (cf, issue 40)
  double edges = 0;           // GenerateOptions::edges_probability
  double family_share = 1;    // GenerateOptions::family_share (--all_families: 1/3)
  int threads = 0;            // SessionOptions::num_threads; -1: random per seed
  double seed_timeout = 600;  // seconds; 0: none
};

// A probability flag's value: bare (`--large`) is 1.
bool ParseProbability(const std::string& value, double* p) {
  if (value.empty()) {
    *p = 1;
    return true;
  }
  return absl::SimpleAtod(value, p) && *p >= 0 && *p <= 1;
}

// One flag; false when it is unknown or its value is one it cannot take.
bool ParseOneFlag(std::string arg, Flags* f) {
  std::string value;
  if (size_t eq = arg.find('='); eq != std::string::npos) {
    value = arg.substr(eq + 1);
    arg = arg.substr(0, eq);
  }
  if (arg == "--seeds") {
    std::vector<std::string> parts = absl::StrSplit(value, ':');
    if (parts.size() > 2 || !absl::SimpleAtoi(parts[0], &f->first)) return false;
    f->last = f->first + 1;
    if (parts.size() == 2 && !absl::SimpleAtoi(parts[1], &f->last)) return false;
  } else if (arg == "--jobs") {
    if (!absl::SimpleAtoi(value, &f->jobs) || f->jobs < 1) return false;
  } else if (arg == "--budget") {
    if (!absl::SimpleAtod(value, &f->budget) || !std::isfinite(f->budget) || f->budget < 0)
      return false;
  } else if (arg == "--scheduler") {
    f->scheduler = value;
  } else if (arg == "--max_ops") {
    if (!absl::SimpleAtoi(value, &f->max_ops) || f->max_ops < 3) return false;
  } else if (arg == "--jit_device") {
    f->jit_device = value.empty() ? "jit:cpu" : value;
    if (f->jit_device.rfind("jit:", 0) != 0) return false;
  } else if (arg == "--function") {
    if (!value.empty()) return false;  // a switch: --function=false would read as on
    f->function = true;
  } else if (arg == "--dynamic") {
    if (!absl::SimpleAtod(value, &f->dynamic) || !(f->dynamic >= 0 && f->dynamic <= 1)) {
      return false;  // written so that NaN fails too
    }
  } else if (arg == "--dynamic_dims") {
    if (!ParseProbability(value, &f->dynamic_dims)) return false;
  } else if (arg == "--specials") {
    if (!absl::SimpleAtod(value, &f->specials) || !(f->specials >= 0 && f->specials <= 1)) {
      return false;
    }
  } else if (arg == "--large") {
    if (!ParseProbability(value, &f->large)) return false;
  } else if (arg == "--gemm") {
    if (!ParseProbability(value, &f->gemm)) return false;
  } else if (arg == "--window") {
    if (!ParseProbability(value, &f->window)) return false;
  } else if (arg == "--sequence") {
    if (!ParseProbability(value, &f->sequence)) return false;
  } else if (arg == "--random") {
    if (!ParseProbability(value, &f->random)) return false;
  } else if (arg == "--attention") {
    if (!ParseProbability(value, &f->attention)) return false;
  } else if (arg == "--float16") {
    if (!ParseProbability(value, &f->float16)) return false;
  } else if (arg == "--control_flow") {
    if (!ParseProbability(value, &f->control_flow)) return false;
  } else if (arg == "--edges") {
    if (!ParseProbability(value, &f->edges)) return false;
  } else if (arg == "--all_families") {
    // Every family in every program, as an outside generator mixes them; flags after
    // it override its settings.
    if (!value.empty()) return false;
    const GenerateOptions all = AllFamilies();
    f->window = all.window_probability;
    f->gemm = all.gemm_probability;
    f->sequence = all.sequence_probability;
    f->random = all.random_probability;
    f->attention = all.attention_probability;
    f->float16 = all.float16_probability;
    f->control_flow = all.control_flow_probability;
    f->edges = all.edges_probability;
    f->dynamic_dims = all.dynamic_dims_probability;
    f->family_share = all.family_share;
    f->max_ops = all.max_ops;
  } else if (arg == "--threads") {
    if (value == "random") {
      f->threads = -1;
    } else if (!absl::SimpleAtoi(value, &f->threads) || f->threads < 0) {
      return false;
    }
  } else if (arg == "--seed_timeout") {
    if (!absl::SimpleAtod(value, &f->seed_timeout) || !std::isfinite(f->seed_timeout) ||
        f->seed_timeout < 0) {
      return false;
    }
  } else if (arg == "--no_minimize") {
    if (!value.empty()) return false;  // a switch: --no_minimize=false would read as on
    f->minimize = false;
  } else if (arg == "--verbose") {
    if (!value.empty()) return false;  // a switch: --verbose=false would read as on
    f->verbose = true;
  } else if (arg == "--print") {
    if (!value.empty()) return false;  // a switch: --print=false would read as on
    f->print = true;
  } else if (arg == "--coverage") {
    if (!value.empty()) return false;  // a switch: --coverage=false would read as on
    f->coverage = true;
  } else {
    return false;
  }
  return true;
}

// Every flag, or false with `bad` the argument refused (a value it cannot take, an
// unknown flag, a value given to a flag that takes none) or what the flags disagree on.
bool ParseFlags(int argc, char** argv, Flags* f, std::string* bad) {
  for (int i = 1; i < argc; ++i) {
    if (!ParseOneFlag(argv[i], f)) {
      *bad = argv[i];
      return false;
    }
  }
  if (!(f->first < f->last)) {
    *bad = absl::StrCat("--seeds: the range ", f->first, ":", f->last, " is empty");
    return false;
  }
  if (f->function && !f->jit_device.empty()) {
    *bad = "--function and --jit_device: a program runs one way, not both";
    return false;
  }
  // A shard per seed at most: more would be processes with nothing to run.
  f->jobs = static_cast<int>(std::min<uint64_t>(f->jobs, f->last - f->first));
  return true;
}

// --scheduler: "random" (one of the CPU schedulers per seed) or a scheduler's name in
// any case (braze/scheduler.h: "safedefault", "Adams2019", ...); a GPU heuristic plan
// schedules no CPU kernel, so it is refused.
bool SchedulerFor(const std::string& name, uint64_t seed, Scheduler* out) {
  static const Scheduler kCpu[] = {Scheduler::kAuto, Scheduler::kAdams2019,
                                   Scheduler::kMullapudi2016, Scheduler::kLi2018,
                                   Scheduler::kSafeDefault};
  if (name == "random") {
    *out = kCpu[(seed * 2654435761u >> 7) % 5];
    return true;
  }
  std::optional<Scheduler> parsed = ParseScheduler(name);
  if (!parsed.has_value() || IsGpuHeuristic(*parsed)) return false;
  *out = *parsed;
  return true;
}

// The generator's options from the flags.
GenerateOptions GenOptions(const Flags& f) {
  GenerateOptions gen;
  gen.max_ops = f.max_ops;
  if (f.dynamic >= 0) gen.dynamic_probability = f.dynamic;
  gen.dynamic_dims_probability = f.dynamic_dims;
  gen.specials_probability = f.specials;
  gen.dram_probability = f.large;
  gen.gemm_probability = f.gemm;
  if (f.window >= 0) gen.window_probability = f.window;
  gen.sequence_probability = f.sequence;
  gen.random_probability = f.random;
  gen.attention_probability = f.attention;
  gen.float16_probability = f.float16;
  gen.control_flow_probability = f.control_flow;
  gen.edges_probability = f.edges;
  gen.family_share = f.family_share;
  return gen;
}

// The compiled run's thread count for `seed`: --threads, or with --threads=random one of
// 1, 2, 3, 4 and 0 (all the CPUs), from the seed.
int ThreadsFor(const Flags& f, uint64_t seed) {
  static const int kThreads[] = {1, 2, 3, 4, 0};
  return f.threads >= 0 ? f.threads : kThreads[(seed * 40503u >> 5) % 5];
}

// The CPUs this process may use.
int Cpus() {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof(set), &set) != 0) return 0;
  return CPU_COUNT(&set);
}

// Every setting of the run, for its log: the flags (defaults included), the disk cache
// (BRAZE_CACHE_DIR as set, and what it resolves to), BRAZE_FLAGS and the CPUs.
std::string Settings(const Flags& f) {
  const GenerateOptions gen = GenOptions(f);
  const disk_cache::Settings cache = disk_cache::CurrentSettings();
  const char* cache_env = std::getenv("BRAZE_CACHE_DIR");
  const char* braze_flags = std::getenv("BRAZE_FLAGS");
  const char* hl_threads = std::getenv("HL_NUM_THREADS");
  return absl::StrCat(
      "seeds=", f.first, ":", f.last, " jobs=", f.jobs,
      " budget=", f.budget > 0 ? absl::StrCat(f.budget, "s") : "none", " scheduler=", f.scheduler,
      " run=",
      f.function             ? "Function"
      : f.jit_device.empty() ? "JitScope"
                             : f.jit_device,
      " strict max_ops=", f.max_ops, " dynamic=", gen.dynamic_probability,
      f.dynamic < 0 ? "(default)" : "", " dynamic_dims=", gen.dynamic_dims_probability,
      " specials=", f.specials, " large=", f.large, " gemm=", f.gemm,
      " window=", gen.window_probability, f.window < 0 ? "(default)" : "",
      " sequence=", gen.sequence_probability, " random=", gen.random_probability,
      " attention=", gen.attention_probability, " float16=", gen.float16_probability,
      " control_flow=", gen.control_flow_probability, " edges=", gen.edges_probability,
      " family_share=", gen.family_share, " threads=",
      f.threads < 0    ? "random(1,2,3,4,all)"
      : f.threads == 0 ? "all"
                       : absl::StrCat(f.threads),
      " cpus=", Cpus(), hl_threads ? absl::StrCat(" HL_NUM_THREADS=", hl_threads) : "",
      " minimize=", f.minimize ? "yes" : "no", " seed_timeout=", f.seed_timeout, "s",
      " BRAZE_CACHE_DIR=", cache_env ? (*cache_env ? cache_env : "(empty)") : "(unset)", " cache=",
      cache.enabled ? absl::StrCat(cache.dir, " max ", cache.max_bytes >> 20, "MiB") : "off",
      " BRAZE_FLAGS=", braze_flags ? absl::StrCat("'", braze_flags, "'") : "(unset)");
}

// The enumerator's spelling, for printing a failing program as C++.
const char* Name(Scheduler s) {
  switch (s) {
#define V(kind, name)   \
  case Scheduler::kind: \
    return #kind;
#include "braze/schedulers.def"
#undef V
  }
  return "?";
}

struct Tally {
  int64_t passed = 0, skipped = 0, mismatches = 0, errors = 0, launches = 0;
  int64_t ill_conditioned = 0;  // neither passed nor failed: see fuzz_runner.h
};

// What a shard process shares with the parent (in a MAP_SHARED page), so that a shard
// killed by a signal still tells which seed it was running and what it had tallied, and
// a replacement can go on with the seeds after it.
struct ShardState {
  Tally tally;
  std::atomic<uint64_t> running{0};        // the seed being run; 0 between seeds
  std::atomic<int64_t> started_ns{0};      // when it started (steady clock, shared by all
                                           // processes: CLOCK_MONOTONIC)
  std::atomic<int64_t> started_cpu_ns{0};  // the shard's CPU time (every thread) then
  uint64_t next = 0;                       // the next seed this shard starts
  std::atomic<uint64_t> minimizing{0};     // nonzero while a failure is minimized and
                                           // reported (no timeout then)
};

// Runs seeds state->next, state->next + jobs, ...; prints failures as they come.
// A shard's exit status after a seed lost the CUDA context: the parent starts a new one.
constexpr int kLostCudaContextExit = 75;

void RunShard(const Flags& f, std::chrono::steady_clock::time_point start, ShardState* state) {
  Tally& t = state->tally;
  const GenerateOptions gen = GenOptions(f);
  for (uint64_t seed = state->next; seed < f.last; seed = state->next) {
    state->next = seed + f.jobs;
    const double elapsed =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (f.budget > 0 && elapsed > f.budget) break;
    Program p = GenerateProgram(seed, gen);
    if (f.print) {
      std::printf("%s\n", ProgramToCpp(p).c_str());
      continue;
    }
    RunOptions o;
    SchedulerFor(f.scheduler, seed, &o.scheduler);
    o.jit_scope = f.jit_device.empty();
    if (!o.jit_scope) o.jit_device = f.jit_device;
    o.function = f.function;
    o.num_threads = ThreadsFor(f, seed);
    state->started_ns = NowNs();
    state->started_cpu_ns = ProcCpuNs(getpid());  // the clock the watcher reads
    state->running = seed;
    const Outcome out = RunProgram(p, o);
    t.launches += out.cluster_launches;
    switch (out.kind) {
      case Outcome::Kind::kPass:
        ++t.passed;
        break;
      case Outcome::Kind::kSkip:
        ++t.skipped;
        break;
      case Outcome::Kind::kMismatch:
        ++t.mismatches;
        break;
      case Outcome::Kind::kError:
        ++t.errors;
        break;
      case Outcome::Kind::kIllConditioned:
        ++t.ill_conditioned;
        break;
    }
    if (out.kind == Outcome::Kind::kIllConditioned && !f.verbose) {
      std::printf("---- seed %llu: ill-conditioned under Scheduler::%s: %s\n",
                  static_cast<unsigned long long>(seed), Name(o.scheduler), out.detail.c_str());
      std::fflush(stdout);
    }
    if (f.verbose) {
      std::printf(
          "seed %llu %s threads %d %s (%d ops, %lld elements, %lld multiply-adds, %lld "
          "launches, %d of %d feed runs)%s%s\n",
          static_cast<unsigned long long>(seed), Name(o.scheduler), o.num_threads,
          OutcomeName(out.kind), static_cast<int>(p.ops.size()),
          static_cast<long long>(p.max_elements), static_cast<long long>(p.max_matmul_work),
          static_cast<long long>(out.cluster_launches), out.runs,
          static_cast<int>(FeedRuns(p).size()), out.detail.empty() ? "" : ": ", out.detail.c_str());
      std::fflush(stdout);
    }
    // A kernel's fault kills the process's CUDA context (device/halide_util.h's note
    // in the Status): every later CUDA call fails, so the failure cannot be minimized
    // here and the shard's next seeds would be blamed for it (27 on the first H200 run).
    // The seed is reported as it was generated, and the shard restarts in a new process.
    const bool lost_context = out.kind == Outcome::Kind::kError &&
                              out.detail.find("CUDA context is lost") != std::string::npos;
    if (lost_context) {
      std::printf(
          "==== seed %llu: %s under Scheduler::%s (strict, %s, num_threads %d)\n%s\n"
          "---- program (not minimized: the CUDA context is lost; the shard restarts)\n%s\n",
          static_cast<unsigned long long>(seed), OutcomeName(out.kind), Name(o.scheduler),
          o.function ? "a Function of the program (jit_compile)"
                     : ("ops on " + o.jit_device).c_str(),
          o.num_threads, out.detail.c_str(), ProgramToCpp(p).c_str());
      std::fflush(stdout);
      state->running = 0;
      _exit(kLostCudaContextExit);
    }
    if (out.kind == Outcome::Kind::kMismatch || out.kind == Outcome::Kind::kError) {
      std::vector<bool> keep;
      Outcome shown = out;
      state->minimizing = 1;  // the watchdog restarts the seed's clock when it ends
      if (f.minimize) {
        keep = Minimize(p, o, out.kind);
        shown = RunProgram(p, o, keep);
      }
      std::printf(
          "==== seed %llu: %s under Scheduler::%s (strict, %s, num_threads %d)\n%s\n"
          "---- minimized program\n"
          "%s// Session(g, {.scheduler = Scheduler::%s, .strict = true, .num_threads = %d}) vs "
          "reference_only\n\n",
          static_cast<unsigned long long>(seed), OutcomeName(shown.kind), Name(o.scheduler),
          o.function    ? "a Function of the program (jit_compile)"
          : o.jit_scope ? "JitScope(g) around every op"
                        : ("ops on " + o.jit_device).c_str(),
          o.num_threads, shown.detail.c_str(), ProgramToCpp(p, keep).c_str(), Name(o.scheduler),
          o.num_threads);
      std::fflush(stdout);
    }
    state->running = 0;
    state->minimizing = 0;
  }
}

// A shard process died while running `seed`: the program is printed as it was generated
// (a crash cannot be minimized in-process) with the command that reproduces it.
// `timeout_note`: TimeoutNote's, taken as the shard was killed for time.
void ReportCrash(const Flags& f, uint64_t seed, int status, bool timed_out,
                 const std::string& timeout_note) {
  const GenerateOptions gen = GenOptions(f);
  const std::string how =
      timed_out ? absl::StrCat("killed after --seed_timeout=", f.seed_timeout, " s", timeout_note)
      : WIFSIGNALED(status) ? absl::StrCat("killed by signal ", WTERMSIG(status), " (",
                                           strsignal(WTERMSIG(status)), ")")
                            : absl::StrCat("exited with status ", WEXITSTATUS(status));
  // Every flag that changes the program or where it runs.
  // --all_families first: the flags after it (each of its settings) override it.
  std::string flags =
      absl::StrCat(f.family_share != 1 ? " --all_families" : "", " --max_ops=", f.max_ops);
  if (f.dynamic >= 0) absl::StrAppend(&flags, " --dynamic=", absl::StrFormat("%.17g", f.dynamic));
  if (f.specials > 0) {
    absl::StrAppend(&flags, " --specials=", absl::StrFormat("%.17g", f.specials));
  }
  // A probability: when nonzero, or each with --all_families (it sets them).
  const bool all = f.family_share != 1;
  auto probability = [&](const char* name, double p) {
    if (p > 0 || all) absl::StrAppend(&flags, " --", name, "=", absl::StrFormat("%.17g", p));
  };
  probability("dynamic_dims", f.dynamic_dims);
  probability("large", f.large);
  probability("gemm", f.gemm);
  if (f.window >= 0) absl::StrAppend(&flags, " --window=", absl::StrFormat("%.17g", f.window));
  probability("sequence", f.sequence);
  probability("random", f.random);
  probability("attention", f.attention);
  probability("float16", f.float16);
  probability("control_flow", f.control_flow);
  probability("edges", f.edges);
  if (f.threads != 0) absl::StrAppend(&flags, " --threads=", ThreadsFor(f, seed));
  if (!f.jit_device.empty()) absl::StrAppend(&flags, " --jit_device=", f.jit_device);
  if (f.function) absl::StrAppend(&flags, " --function");
  std::printf(
      "==== seed %llu: %s, the shard running it was %s\n"
      "reproduce: braze-fuzz --seeds=%llu --scheduler=%s --verbose%s\n---- program\n%s\n",
      static_cast<unsigned long long>(seed), timed_out ? "hang" : "crash", how.c_str(),
      static_cast<unsigned long long>(seed), f.scheduler.c_str(), flags.c_str(),
      ProgramToCpp(GenerateProgram(seed, gen)).c_str());
  std::fflush(stdout);
}

// Runs the shards as processes. One killed by a crash is counted as an error naming its
// seed and replaced by a process that goes on from the next seed of that shard.
Tally RunShards(const Flags& f, std::chrono::steady_clock::time_point start) {
  const size_t bytes = sizeof(ShardState) * f.jobs;
  void* shared = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (shared == MAP_FAILED) {
    std::fprintf(stderr, "braze-fuzz: mmap of the shard states failed\n");
    std::exit(2);
  }
  auto* states = new (shared) ShardState[f.jobs];
  std::vector<pid_t> pids(f.jobs, -1);
  auto start_shard = [&](int shard) {
    std::fflush(stdout);
    const pid_t pid = fork();
    if (pid < 0) {
      // A shard that cannot start would leave its seeds unrun behind a clean tally.
      std::fprintf(stderr, "braze-fuzz: fork of shard %d failed: %s\n", shard,
                   std::strerror(errno));
      for (pid_t started : pids) {
        if (started > 0) kill(started, SIGKILL);
      }
      while (waitpid(-1, nullptr, 0) > 0) {
      }
      std::exit(2);
    }
    if (pid == 0) {
      RunShard(f, start, &states[shard]);
      std::fflush(stdout);
      _exit(0);
    }
    pids[shard] = pid;
  };
  for (int shard = 0; shard < f.jobs; ++shard) {
    states[shard].next = f.first + shard;
    start_shard(shard);
  }
  Tally crashes;
  // Per shard: the seed last seen running, since when, and whether it was killed for it.
  using Clock = std::chrono::steady_clock;
  std::vector<uint64_t> seen(f.jobs, 0);
  std::vector<Clock::time_point> since(f.jobs, Clock::now());
  std::vector<bool> timed_out(f.jobs, false);
  std::vector<std::string> timeout_notes(f.jobs);
  for (int alive = f.jobs; alive > 0;) {
    int status = 0;
    const pid_t pid = waitpid(-1, &status, f.seed_timeout > 0 ? WNOHANG : 0);
    if (pid < 0) break;
    if (pid == 0) {  // none exited: watch for a seed that runs too long
      for (int i = 0; i < f.jobs; ++i) {
        const uint64_t running = states[i].running;
        // A seed's time counts from its start (the shard's clock), or from the end of its
        // minimization and report, which may take long.
        if (states[i].minimizing != 0) {
          since[i] = Clock::now();
        } else if (running != seen[i]) {
          seen[i] = running;
          since[i] = Clock::time_point(std::chrono::nanoseconds(states[i].started_ns.load()));
        } else if (running != 0 && !timed_out[i] && pids[i] > 0 &&
                   std::chrono::duration<double>(Clock::now() - since[i]).count() >
                       f.seed_timeout &&
                   states[i].running == running) {
          timed_out[i] = true;
          timeout_notes[i] = TimeoutNote(pids[i], states[i].started_cpu_ns.load());
          kill(pids[i], SIGKILL);
        }
      }
      // Often enough that a short --seed_timeout is seen while the seed still runs.
      usleep(static_cast<useconds_t>(std::clamp(f.seed_timeout * 0.25e6, 1e3, 2e5)));
      continue;
    }
    int shard = 0;
    while (shard < f.jobs && pids[shard] != pid) ++shard;
    if (shard == f.jobs) continue;
    pids[shard] = -1;  // reaped: its pid may be reused by another process from now on
    // Killed by us, not a crash of its own that came first.
    const bool killed_for_time =
        timed_out[shard] && WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL;
    timed_out[shard] = false;
    ShardState& s = states[shard];
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0) {
      --alive;
      continue;
    }
    if (WIFEXITED(status) && WEXITSTATUS(status) == kLostCudaContextExit && s.running == 0) {
      start_shard(shard);  // the seed was counted and reported; a fresh CUDA context
      continue;
    }
    ++crashes.errors;
    if (s.running == 0 && killed_for_time) {  // the seed ended as we killed: go on
      --crashes.errors;
      start_shard(shard);
      continue;
    }
    if (s.running == 0) {  // not a program's crash: do not restart it
      std::printf("braze-fuzz: a shard died between seeds (status %d)\n", status);
      --alive;
      continue;
    }
    ReportCrash(f, s.running, status, killed_for_time, timeout_notes[shard]);
    s.running = 0;
    start_shard(shard);  // goes on from s.next
  }
  Tally total = crashes;
  for (int shard = 0; shard < f.jobs; ++shard) {
    const Tally& t = states[shard].tally;
    total.passed += t.passed;
    total.skipped += t.skipped;
    total.mismatches += t.mismatches;
    total.errors += t.errors;
    total.ill_conditioned += t.ill_conditioned;
    total.launches += t.launches;
  }
  munmap(shared, bytes);
  return total;
}

int Main(int argc, char** argv) {
  Flags f;
  std::string bad;
  if (!ParseFlags(argc, argv, &f, &bad)) {
    std::fprintf(stderr, "braze-fuzz: bad argument: %s\n", bad.c_str());
    std::fprintf(stderr,
                 "usage: braze-fuzz [--seeds=A:B] [--jobs=N] [--budget=SECONDS] "
                 "[--scheduler=auto|adams2019|mullapudi2016|li2018|safedefault|random] "
                 "[--jit_device[=jit:cpu|jit:opencl] | --function] [--no_minimize] [--max_ops=N] "
                 "[--dynamic=P] [--dynamic_dims[=P]] "
                 "[--specials=P] [--large[=P]] [--gemm[=P]] [--window[=P]] [--sequence[=P]] "
                 "[--random[=P]] [--attention[=P]] [--float16[=P]] [--control_flow[=P]] "
                 "[--edges[=P]] [--all_families] "
                 "[--threads=N|random] "
                 "[--seed_timeout=SECONDS] "
                 "[--verbose] "
                 "[--print] [--coverage]\n");
    return 2;
  }
  Scheduler unused;
  if (!SchedulerFor(f.scheduler, 0, &unused)) {
    std::fprintf(stderr, "braze-fuzz: unknown scheduler '%s'\n", f.scheduler.c_str());
    return 2;
  }
  SetLogSink([](LogSeverity, int, std::string_view) {});  // fallbacks are failures here
  const std::string settings = Settings(f);
  std::printf("braze-fuzz: settings: %s\n", settings.c_str());
  std::fflush(stdout);
  if (f.coverage) {  // in this process: building a program runs nothing
    Coverage coverage;
    const GenerateOptions gen = GenOptions(f);
    for (uint64_t seed = f.first; seed < f.last; ++seed) coverage.Add(GenerateProgram(seed, gen));
    std::printf("%s", coverage.Table().c_str());
    return 0;
  }
  const auto start = std::chrono::steady_clock::now();
  const Tally total = RunShards(f, start);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const int64_t failed = total.mismatches + total.errors;
  std::printf(
      "braze-fuzz: seeds %llu:%llu, %lld graphs run: %lld passed, %lld skipped, %lld "
      "mismatches, %lld errors, %lld ill-conditioned, %lld cluster launches, %.0f s\n",
      static_cast<unsigned long long>(f.first), static_cast<unsigned long long>(f.last),
      static_cast<long long>(total.passed + total.skipped + failed + total.ill_conditioned),
      static_cast<long long>(total.passed), static_cast<long long>(total.skipped),
      static_cast<long long>(total.mismatches), static_cast<long long>(total.errors),
      static_cast<long long>(total.ill_conditioned), static_cast<long long>(total.launches),
      seconds);
  std::printf("braze-fuzz: settings: %s\n", settings.c_str());
  std::printf("braze-fuzz: %lld passed, %lld failed\n", static_cast<long long>(total.passed),
              static_cast<long long>(failed));
  return failed == 0 ? 0 : 1;
}

}  // namespace
}  // namespace fuzz
}  // namespace braze

int main(int argc, char** argv) { return braze::fuzz::Main(argc, argv); }
