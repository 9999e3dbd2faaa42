// braze-tune: tunes the schedules of a real program's clusters and writes the winners
// to a schedules/ directory, where the runtime finds them (docs/SCHEDULES.md).
//
//   BRAZE_FLAGS=--dump_to=/tmp/dump ./my_program       # writes *.cluster files
//   braze-tune --budget=600 --out=schedules /tmp/dump
//
// Each cluster (one per distinct signature, however many sessions dumped it) gets a
// share of the budget: its default schedule is measured, then candidates (the CPU
// autoschedulers; Braze's template with each factor varied from the best point so far),
// each checked against the reference kernels before it may win, timed as the median of
// --runs samples. A winner at least --min_speedup times faster than the default, in
// each of three alternated re-timings, is written at once; every finished cluster is recorded in
// DIR/tune.journal, so a run that is stopped and started again goes on where it was (--force tunes
// all again).
//
// --device=jit:cuda or jit:opencl tunes the GPU heuristic's plan and sizes instead
// (threads per block, tile width, elements per row thread, warp rows, vector width,
// matmul tile), each candidate run on that device, and stores entries keyed by the
// device's architecture (sm_90; the OpenCL device's name).
#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "braze/device_type.h"
#include "braze/logging.h"
#include "device/features.h"
#include "tools/tune/tuner.h"

namespace braze {
namespace tune {
namespace {

using Clock = std::chrono::steady_clock;

constexpr char kUsage[] = R"(usage: braze-tune [flags] DUMP_DIR_OR_CLUSTER_FILE...

Tunes the schedule of each cluster a program dumped (BRAZE_FLAGS=--dump_to=DIR writes
one .cluster file per kernel) and writes the winners to --out as .schedule files, which
sessions apply (SessionOptions::schedule_dirs, BRAZE_FLAGS --schedule_dirs, or the
repository's schedules/ by default). Every candidate is checked against the reference
kernels before it may win.

flags:
  --budget=SECONDS     total tuning time, shared among the clusters (default 300)
  --device=D           where the kernels run: cpu (the CPU templates; default), or
                       jit:cuda / jit:opencl (the GPU heuristic's parameters, entries
                       keyed by the GPU's architecture)
  --threads=N          Halide worker threads while timing; 0 = all cores (default 0)
  --runs=N             timed samples per candidate, the median counts (default 7)
  --out=DIR            where winners and tune.journal go (default schedules)
  --min_speedup=X      store the fastest candidate only if default/tuned >= X and
                       each of its three alternated re-timings beats each of the
                       default's (default 1.03; 0: always, even when the default
                       was faster)
  --force              tune clusters the journal says are done
  --help               this text
)";

struct Flags {
  double budget_s = 300;
  int threads = 0;
  int runs = 7;
  std::string out = "schedules";
  double min_speedup = 1.03;
  bool force = false;
  Device device;
  std::vector<std::string> inputs;
};

bool ParseFlags(int argc, char** argv, Flags* f, bool* help) {
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--help" || arg == "-h") {
      *help = true;
      return true;
    }
    if (arg.rfind("--", 0) != 0) {
      f->inputs.push_back(arg);
      continue;
    }
    const size_t eq = arg.find('=');
    const std::string name = arg.substr(2, eq == std::string::npos ? std::string::npos : eq - 2);
    const std::string value = eq == std::string::npos ? "" : arg.substr(eq + 1);
    bool ok = true;
    if (name == "budget") {  // at most a year: the deadline arithmetic stays in range
      ok = absl::SimpleAtod(value, &f->budget_s) && f->budget_s > 0 && f->budget_s <= 3.2e7;
    } else if (name == "threads") {
      ok = absl::SimpleAtoi(value, &f->threads) && f->threads >= 0;
    } else if (name == "runs") {
      ok = absl::SimpleAtoi(value, &f->runs) && f->runs >= 1;
    } else if (name == "out") {
      f->out = value;
      ok = !value.empty();
    } else if (name == "min_speedup") {
      ok = absl::SimpleAtod(value, &f->min_speedup) && std::isfinite(f->min_speedup) &&
           f->min_speedup >= 0;
    } else if (name == "device") {
      absl::StatusOr<Device> d = ParseDevice(value);
      ok = d.ok();
      if (ok) f->device = Device{d->kind, d->index, false};
    } else if (name == "force") {  // bare, or =true / =false
      ok = eq == std::string::npos || absl::SimpleAtob(value, &f->force);
      if (eq == std::string::npos) f->force = true;
    } else {
      std::fprintf(stderr, "braze-tune: unknown flag '%s'\n%s", arg.c_str(), kUsage);
      return false;
    }
    if (!ok) {
      std::fprintf(stderr, "braze-tune: bad value in '%s'\n", arg.c_str());
      return false;
    }
  }
  if (f->inputs.empty()) {
    std::fprintf(stderr, "braze-tune: no dump directory or .cluster file given\n%s", kUsage);
    return false;
  }
  return true;
}

bool EndsWith(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// The .cluster files named, or found in the directories named, sorted; an error names
// an input that does not exist or a directory that holds no .cluster file (a mistyped
// path must not tune nothing and succeed).
absl::StatusOr<std::vector<std::string>> ClusterFiles(const std::vector<std::string>& inputs) {
  std::set<std::string> files;
  for (const std::string& in : inputs) {
    struct stat st;
    if (stat(in.c_str(), &st) != 0) {
      return absl::NotFoundError(absl::StrCat(in, ": ", std::strerror(errno)));
    }
    if (!S_ISDIR(st.st_mode)) {
      files.insert(in);
      continue;
    }
    DIR* d = opendir(in.c_str());
    if (d == nullptr) {
      return absl::PermissionDeniedError(absl::StrCat(in, ": ", std::strerror(errno)));
    }
    const size_t before = files.size();
    while (dirent* e = readdir(d)) {
      if (EndsWith(e->d_name, ".cluster")) files.insert(in + "/" + e->d_name);
    }
    closedir(d);
    if (files.size() == before) {
      return absl::NotFoundError(absl::StrCat(
          in, ": no .cluster file in this directory (BRAZE_FLAGS=--dump_to=DIR writes them)"));
    }
  }
  return std::vector<std::string>(files.begin(), files.end());
}

// The whole file; an unreadable one (permissions, a directory, an I/O error) is an
// error naming it, not an empty cluster text.
absl::StatusOr<std::string> ReadAll(const std::string& path) {
  std::FILE* f = std::fopen(path.c_str(), "rb");
  std::string text;
  int error = f == nullptr ? errno : 0;
  if (f != nullptr) {
    errno = 0;
    char buf[1 << 16];
    size_t n;
    while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) text.append(buf, n);
    if (std::ferror(f)) error = errno != 0 ? errno : EIO;
    std::fclose(f);
  }
  if (error != 0) {
    return absl::NotFoundError(absl::StrCat(path, ": cannot read (", std::strerror(error), ")"));
  }
  return text;
}

// Writes `text` to `path` through a temporary file and a rename, so a reader never sees
// half an entry; false (and a message) when it cannot be written.
bool WriteAtomically(const std::string& path, const std::string& text) {
  const std::string tmp = absl::StrCat(path, ".tmp.", getpid());
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out << text;
    if (!out.flush()) {
      std::fprintf(stderr, "\nbraze-tune: cannot write %s\n", tmp.c_str());
      std::remove(tmp.c_str());
      return false;
    }
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    std::fprintf(stderr, "\nbraze-tune: cannot rename %s to %s\n", tmp.c_str(), path.c_str());
    std::remove(tmp.c_str());
    return false;
  }
  return true;
}

// DIR/tune.journal: one line per finished cluster, "<key> <default ms> <best ms> <what>".
std::set<std::string> JournalKeys(const std::string& path) {
  std::set<std::string> keys;
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    const std::string key = line.substr(0, line.find(' '));
    if (!key.empty() && key[0] != '#') keys.insert(key);
  }
  return keys;
}

std::string Duration(double s) {
  if (s < 0) s = 0;
  const int total = static_cast<int>(s + 0.5);
  return total >= 60 ? absl::StrFormat("%dm%02ds", total / 60, total % 60)
                     : absl::StrFormat("%ds", total);
}

// One line, redrawn in place on a terminal: the bar over the whole run's candidates.
class ProgressBar {
 public:
  ProgressBar(int total, double budget_s)
      : total_(std::max(1, total)), budget_s_(budget_s), tty_(isatty(2)), start_(Clock::now()) {}
  void Update(int done, const std::string& what) {
    const double elapsed = std::chrono::duration<double>(Clock::now() - start_).count();
    // The run ends when the candidates or the budget run out, whichever is first.
    const double by_rate = done > 0 ? elapsed / done * (total_ - done) : budget_s_;
    const double eta = std::min(by_rate, budget_s_ - elapsed);
    const int width = 30, filled = std::min(width, width * done / total_);
    const std::string line =
        absl::StrFormat("[%s%s] %d/%d candidates, %s elapsed, ETA %s  %s", std::string(filled, '#'),
                        std::string(width - filled, '.'), done, total_, Duration(elapsed),
                        Duration(eta), what.substr(0, 60));
    std::fprintf(stderr, tty_ ? "\r%-130s" : "%s\n", line.c_str());
    std::fflush(stderr);
  }
  void Done() {
    if (tty_) std::fprintf(stderr, "\n");
  }

 private:
  const int total_;
  const double budget_s_;
  const bool tty_;
  const Clock::time_point start_;
};

int Run(const Flags& flags) {
  SetLogSink([](LogSeverity severity, int, std::string_view text) {
    if (severity != LogSeverity::kInfo)
      std::fprintf(stderr, "\nbraze-tune: %.*s\n", static_cast<int>(text.size()), text.data());
  });
  absl::StatusOr<std::vector<std::string>> files = ClusterFiles(flags.inputs);
  if (!files.ok()) {
    std::fprintf(stderr, "braze-tune: %s\n", std::string(files.status().message()).c_str());
    return 2;
  }
  if (mkdir(flags.out.c_str(), 0755) != 0 && errno != EEXIST) {
    std::fprintf(stderr, "braze-tune: cannot create --out=%s: %s\n", flags.out.c_str(),
                 std::strerror(errno));
    return 2;
  }
  const std::string journal_path = flags.out + "/tune.journal";
  const std::set<std::string> done =
      flags.force ? std::set<std::string>() : JournalKeys(journal_path);
  if (absl::Status s = device::CheckAvailable(flags.device); !s.ok()) {
    std::fprintf(stderr, "braze-tune: --device=%s is not available: %s\n",
                 flags.device.ToString().c_str(), std::string(s.message()).c_str());
    return 2;
  }
  absl::StatusOr<std::string> target = device::ScheduleTargetString(flags.device);
  if (!target.ok()) {
    std::fprintf(stderr, "braze-tune: %s\n", std::string(target.status().message()).c_str());
    return 2;
  }
  std::printf("braze-tune: tuning for %s: %s\n", flags.device.ToString().c_str(), target->c_str());
  TuneOptions options;
  options.threads = flags.threads;
  options.runs = flags.runs;
  options.device = flags.device;
  // Rebuild every cluster; one tuner per distinct key.
  std::vector<std::unique_ptr<ClusterTuner>> tuners;
  std::set<std::string> keys;
  int skipped = 0, bad = 0;
  for (const std::string& file : *files) {
    absl::StatusOr<std::string> text = ReadAll(file);
    absl::StatusOr<RebuiltCluster> rebuilt =
        text.ok() ? ClusterFromText(*text, file) : absl::StatusOr<RebuiltCluster>(text.status());
    absl::StatusOr<std::unique_ptr<ClusterTuner>> tuner =
        rebuilt.ok() ? ClusterTuner::Create(*std::move(rebuilt), options)
                     : absl::StatusOr<std::unique_ptr<ClusterTuner>>(rebuilt.status());
    if (!tuner.ok()) {
      std::fprintf(stderr, "braze-tune: skipping %s: %s\n", file.c_str(),
                   std::string(tuner.status().message()).c_str());
      ++bad;
      continue;
    }
    const std::string key = (*tuner)->key_hash();
    if (!keys.insert(key).second) continue;
    if (done.count(key)) {
      ++skipped;
      continue;
    }
    tuners.push_back(*std::move(tuner));
  }
  std::printf(
      "braze-tune: %zu clusters to tune (%d done in an earlier run, %d unreadable), "
      "budget %s\n",
      tuners.size(), skipped, bad, Duration(flags.budget_s).c_str());
  int total = 0;
  for (const auto& t : tuners) total += t->PlannedCandidates();
  ProgressBar bar(total, flags.budget_s);
  const Clock::time_point end =
      Clock::now() + std::chrono::milliseconds(static_cast<int64_t>(flags.budget_s * 1000));
  std::vector<ClusterResult> results;
  std::vector<bool> stored;
  int measured_before = 0, unfinished = 0, write_errors = 0;
  for (size_t i = 0; i < tuners.size(); ++i) {
    // An equal share of what is left, so an early cluster cannot starve the others.
    const Clock::duration left = end - Clock::now();
    if (left <= Clock::duration::zero()) {  // budget spent: left for the next run
      unfinished += static_cast<int>(tuners.size() - i);
      break;
    }
    const Clock::time_point deadline = Clock::now() + left / static_cast<int>(tuners.size() - i);
    ClusterTuner& t = *tuners[i];
    const std::string tag =
        absl::StrCat("cluster ", i + 1, "/", tuners.size(), " (", t.key_hash(), ")");
    ClusterResult r = t.Tune(deadline, [&](int n, const Measured& m) {
      bar.Update(measured_before + n, absl::StrCat(tag, ": ", m.label));
    });
    measured_before += t.PlannedCandidates();
    // The winner stored is the fastest stored candidate, when it beats the default by
    // --min_speedup in the medians and each of its alternated re-timings beats each of
    // the default's (on a 2-core VM one cluster's times moved 15% within minutes, and
    // a 1.17x "winner" measured level in the benchmark); --min_speedup=0 stores it
    // always, even when the default itself was fastest.
    double speedup = 0;
    const bool store = ShouldStoreWinner(r, flags.min_speedup, &speedup);
    if (store) {
      const std::string where = device::FeaturesOf(flags.device).device_memory
                                    ? flags.device.ToString()
                                    : absl::StrCat("threads ", flags.threads);
      std::string note = absl::StrFormat(
          "default %.4g ms, tuned %.4g ms (%.2fx), %s, median of %d, %d candidates",
          r.baseline.median_ms, r.best_stored.median_ms, speedup, where, flags.runs, r.candidates);
      if (r.inputs_used == "positive") note += ", checked on positive inputs";
      if (!WriteAtomically(StoredSchedulePath(flags.out, r.key_hash),
                           FormatStoredSchedule(t.Entry(note)))) {
        ++write_errors;
        continue;  // not journaled: the next run tunes it again
      }
    } else if (r.baseline.error.empty() && r.complete) {
      // The default wins now: an entry an earlier run stored must not outlive that.
      std::remove(StoredSchedulePath(flags.out, r.key_hash).c_str());
    }
    results.push_back(r);
    stored.push_back(store);
    // A search the deadline cut short keeps what it stored, and is not journaled: the
    // next run searches it again.
    if (!r.complete && r.baseline.error.empty()) {
      ++unfinished;
      continue;
    }
    std::ofstream journal(journal_path, std::ios::app);
    journal << r.key_hash << " " << r.baseline.median_ms << " "
            << (store ? r.best_stored.median_ms : r.baseline.median_ms) << " "
            << (store                      ? ParamsSummary(r.best_stored.params)
                : r.baseline.error.empty() ? "default kept"
                                           : "failed")
            << "\n";
    if (!journal.flush()) {
      std::fprintf(stderr, "\nbraze-tune: cannot append to %s\n", journal_path.c_str());
      ++write_errors;
    }
  }
  bar.Done();
  if (unfinished > 0) {
    std::printf("braze-tune: %d clusters not finished within the budget: run again to go on\n",
                unfinished);
  }
  std::printf("\n%-18s %-34s %12s %12s %8s  %s\n", "cluster (key)", "ops", "default ms", "tuned ms",
              "speedup", "schedule");
  for (size_t i = 0; i < results.size(); ++i) {
    const ClusterResult& r = results[i];
    const std::string ops = r.ops.size() > 34 ? r.ops.substr(0, 31) + "..." : r.ops;
    if (!r.baseline.error.empty()) {
      std::printf("%-18s %-34s failed: %s\n", r.key_hash.c_str(), ops.c_str(),
                  r.baseline.error.c_str());
      continue;
    }
    const double tuned = stored[i] ? r.best_stored.median_ms : r.baseline.median_ms;
    std::printf("%-18s %-34s %12.4f %12.4f %7.2fx  %s%s\n", r.key_hash.c_str(), ops.c_str(),
                r.baseline.median_ms, tuned, r.baseline.median_ms / tuned,
                (stored[i]    ? ParamsSummary(r.best_stored.params)
                 : r.complete ? std::string("default kept")
                              : std::string("default kept so far"))
                    .c_str(),
                r.complete ? "" : " (search cut short by the budget: not journaled)");
    if (!r.signed_mismatch.empty()) {
      std::printf(
          "%18s   checked on positive inputs: on signed ones the default schedule "
          "itself disagreed (%s)\n",
          "", r.signed_mismatch.substr(0, 120).c_str());
    }
    for (const Measured& m : r.rejected) {
      std::printf("%18s   rejected %s: %s\n", "", m.label.c_str(), m.error.substr(0, 160).c_str());
    }
  }
  SetLogSink(nullptr);
  if (write_errors > 0) return 1;
  return bad > 0 && results.empty() ? 1 : 0;
}

}  // namespace
}  // namespace tune
}  // namespace braze

int main(int argc, char** argv) {
  braze::tune::Flags flags;
  bool help = false;
  if (!braze::tune::ParseFlags(argc, argv, &flags, &help)) return 2;
  if (help) {
    std::fputs(braze::tune::kUsage, stdout);
    return 0;
  }
  return braze::tune::Run(flags);
}
