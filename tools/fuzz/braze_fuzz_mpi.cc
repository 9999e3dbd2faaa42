// braze-fuzz-mpi: differential fuzzing of programs with collectives, run by mpirun. Every
// rank generates the same random program per seed (GenerateOptions::
// collective_probability 1: AllReduce, Broadcast and AllGather among its ops), runs it
// compiled on its own feeds, and compares with the reference kernels running every rank's
// copy of the program on every rank's feeds (fuzz_runner.h's RunWorldProgram).
//
//   mpirun -np 2 build/tools/braze-fuzz-mpi --seeds=1:200 [--verbose] [--max_ops=N]
//       [--dynamic=P] [--scheduler=random|NAME] [--timeout=S] [--function]
//
// --function: each rank's compiled run is a Function (jit_compile, the program's input
// signature) traced from the program on its arguments, so the collectives run inside
// Functions; the oracle is the same.
// One process per rank, no shards (a fork after MPI_Init is not allowed); the scheduler
// is drawn per seed as braze-fuzz's --scheduler=random does. Every rank prints its own
// mismatches and errors (with the program as C++, not minimized: shrinking would need
// every rank to agree on each try); rank 0 prints the summary, the counts summed over the
// ranks: "braze-fuzz-mpi: N programs on R ranks: P passed, S skipped, M mismatches, E
// errors". An error on every rank (the same Run failed everywhere) lets the run go on; one
// on some ranks only stops it (the peers' collectives time out, and the communicator has
// failed). Exit status 1 on any mismatch or error.
#include <cmath>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "braze/braze.h"
#include "braze/distributed.h"
#include "tools/fuzz/fuzz_runner.h"

namespace braze {
namespace fuzz {
namespace {

struct Flags {
  uint64_t first = 1, last = 101;  // [first, last)
  bool verbose = false;
  int max_ops = 14;
  double dynamic = -1;  // < 0: the generator's default
  std::string scheduler = "random";
  double timeout = 120;   // DistributedOptions::timeout_seconds
  bool function = false;  // the compiled run through a Function (RunOptions::function)
};

bool ParseFlags(int argc, char** argv, Flags* f) {
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i], value;
    if (size_t eq = arg.find('='); eq != std::string::npos) {
      value = arg.substr(eq + 1);
      arg.resize(eq);
    }
    if (arg == "--seeds") {
      std::vector<std::string> parts = absl::StrSplit(value, ':');
      if (parts.size() > 2 || !absl::SimpleAtoi(parts[0], &f->first)) return false;
      f->last = f->first + 1;
      if (parts.size() == 2 && !absl::SimpleAtoi(parts[1], &f->last)) return false;
    } else if (arg == "--verbose") {
      if (!value.empty()) return false;  // a switch: =false would read as on
      f->verbose = true;
    } else if (arg == "--max_ops") {
      if (!absl::SimpleAtoi(value, &f->max_ops) || f->max_ops < 3) return false;
    } else if (arg == "--dynamic") {
      if (!absl::SimpleAtod(value, &f->dynamic) || !(f->dynamic >= 0 && f->dynamic <= 1)) {
        return false;  // written so that NaN fails too
      }
    } else if (arg == "--scheduler") {
      f->scheduler = value;
    } else if (arg == "--function") {
      if (!value.empty()) return false;
      f->function = true;
    } else if (arg == "--timeout") {
      // Finite: "inf" would wait for a lost rank for ever.
      if (!absl::SimpleAtod(value, &f->timeout) || !(f->timeout > 0) ||
          !std::isfinite(f->timeout)) {
        return false;
      }
    } else {
      return false;
    }
  }
  return f->first < f->last;
}

Scheduler SchedulerFor(const std::string& name, uint64_t seed) {
  static const Scheduler kCpu[] = {Scheduler::kAuto, Scheduler::kAdams2019,
                                   Scheduler::kMullapudi2016, Scheduler::kLi2018,
                                   Scheduler::kSafeDefault};
  if (name == "random") return kCpu[(seed * 2654435761u >> 7) % 5];
  std::optional<Scheduler> parsed = ParseScheduler(name);
  return parsed.has_value() && !IsGpuHeuristic(*parsed) ? *parsed : Scheduler::kAuto;
}

// Counts summed over the ranks: Braze's AllReduce of an f64 vector of `n`, in a session of
// its own.
class SumOverRanks {
 public:
  explicit SumOverRanks(int64_t n) : n_(n) {
    x_ = Placeholder(g_, DType::kF64, {n}, "counts");
    total_ = AllReduce(x_);
    SessionOptions o;
    o.device = "cpu";
    session_ = std::make_unique<Session>(g_, o);
  }
  absl::StatusOr<std::vector<double>> Sum(const std::vector<double>& counts) {
    HostTensor in(DType::kF64, {n_});
    for (int64_t i = 0; i < n_; ++i) in.data<double>()[i] = counts[i];
    BRAZE_ASSIGN_OR_RETURN(std::vector<HostTensor> out, session_->Run({{x_, in}}, {total_}));
    return std::vector<double>(out[0].data<double>(), out[0].data<double>() + n_);
  }

 private:
  int64_t n_;
  Graph g_;
  Tensor x_, total_;
  std::unique_ptr<Session> session_;
};

int Main(int argc, char** argv) {
  Flags f;
  if (!ParseFlags(argc, argv, &f)) {
    std::fprintf(stderr,
                 "usage: mpirun -np N braze-fuzz-mpi [--seeds=A:B] [--verbose] [--max_ops=N] "
                 "[--dynamic=P] [--scheduler=random|NAME] [--timeout=S] [--function]\n");
    return 2;
  }
  DistributedOptions d;
  d.timeout_seconds = f.timeout;
  if (absl::Status s = InitDistributed(d); !s.ok()) {
    std::fprintf(stderr, "braze-fuzz-mpi: %s\n", s.ToString().c_str());
    return 1;
  }
  const int me = WorldRank(), world = WorldSize();
  GenerateOptions gen;
  gen.max_ops = f.max_ops;
  if (f.dynamic >= 0) gen.dynamic_probability = f.dynamic;
  gen.collective_probability = 1;
  // passed, skipped, mismatches, errors, programs with a collective, cluster launches
  std::vector<double> tally(6, 0);
  bool stop = false;
  SumOverRanks seed_errors(1);
  for (uint64_t seed = f.first; seed < f.last && !stop; ++seed) {
    const Program p = GenerateProgram(seed, gen);
    RunOptions o;
    o.scheduler = SchedulerFor(f.scheduler, seed);
    o.function = f.function;
    const Outcome out = RunWorldProgram(p, o);
    const int kind = out.kind == Outcome::Kind::kPass       ? 0
                     : out.kind == Outcome::Kind::kSkip     ? 1
                     : out.kind == Outcome::Kind::kMismatch ? 2
                                                            : 3;
    tally[kind] += 1;
    for (const ProgramOp& op : p.ops) {
      if (op.simulate) {
        tally[4] += 1;
        break;
      }
    }
    tally[5] += static_cast<double>(out.cluster_launches);
    if (f.verbose && me == 0) {
      std::printf("seed %llu %s (%d ops, gradients %s)%s%s\n",
                  static_cast<unsigned long long>(seed), OutcomeName(out.kind),
                  static_cast<int>(p.ops.size()), p.gradients ? "yes" : "no",
                  out.detail.empty() ? "" : ": ", out.detail.c_str());
      std::fflush(stdout);
    }
    if (kind >= 2) {
      std::printf("==== seed %llu: %s on rank %d of %d\n%s\n---- program\n%s\n",
                  static_cast<unsigned long long>(seed), OutcomeName(out.kind), me, world,
                  out.detail.c_str(), ProgramToCpp(p).c_str());
      std::fflush(stdout);
    }
    // An error every rank had (the same Run failed everywhere: the collectives stayed in
    // step) lets the run go on; one some ranks had leaves the others' collectives to time
    // out, and the communicator failed: stop.
    absl::StatusOr<std::vector<double>> errors = seed_errors.Sum({kind == 3 ? 1.0 : 0.0});
    stop = !errors.ok() || ((*errors)[0] > 0 && (*errors)[0] < world);
    if (stop && me == 0) {
      std::printf("braze-fuzz-mpi: stopped after seed %llu: %s\n",
                  static_cast<unsigned long long>(seed),
                  errors.ok() ? "an error on some ranks only" : errors.status().ToString().c_str());
    }
  }
  absl::StatusOr<std::vector<double>> total = SumOverRanks(tally.size()).Sum(tally);
  if (!total.ok()) {
    std::fprintf(stderr, "braze-fuzz-mpi: rank %d: summing the counts: %s\n", me,
                 total.status().ToString().c_str());
    (void)FinalizeDistributed();
    return 1;
  }
  const std::vector<double>& t = *total;
  if (me == 0) {
    // Every rank ran every program: per program, the counts of the R ranks.
    std::printf(
        "braze-fuzz-mpi: %.0f programs on %d ranks (%.0f with a collective): %.0f rank runs "
        "passed, %.0f skipped, %.0f mismatches, %.0f errors; %.0f cluster launches\n",
        (t[0] + t[1] + t[2] + t[3]) / world, world, t[4] / world, t[0], t[1], t[2], t[3], t[5]);
  }
  const bool failed = t[2] > 0 || t[3] > 0;
  if (absl::Status s = FinalizeDistributed(); !s.ok()) return 1;
  return failed ? 1 : 0;
}

}  // namespace
}  // namespace fuzz
}  // namespace braze

int main(int argc, char** argv) { return braze::fuzz::Main(argc, argv); }
