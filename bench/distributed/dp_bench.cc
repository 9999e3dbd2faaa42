// braze_dp_bench: data parallelism's benchmarks (docs/DISTRIBUTED.md), run by mpirun:
//
//   mpirun --allow-run-as-root --oversubscribe -np 2 build/bench/braze_dp_bench
//       --benchmark_repetitions=5 --benchmark_enable_random_interleaving=true  (one line)
//
//  - BM_BrazeAllReduce/bytes, BM_BrazeProducer/bytes and BM_MpiAllreduce/bytes (4 KiB to
//    64 MiB of f32). Braze: one Session run of sink = AllReduce(-x), x a variable: the
//    compiled negation writes a buffer whose last use is the AllReduce, which sums it in
//    place (MPI_IN_PLACE on the executor's buffer), and the sum becomes the variable sink
//    by a buffer swap. So the time is the run (plan lookup, the negation, the hand-off to
//    the communication thread, the wait, the commit) plus the reduction; it copies
//    nothing. BM_BrazeProducer times the same run without the AllReduce (sink = -x), so
//    the op's own time is the difference. MPI: a plain MPI_Allreduce in place on a
//    buffer of the same size, nothing else; BM_MpiIallreduce the same with the
//    non-blocking call Braze makes (MPI_Iallreduce, MPI_Wait), whose algorithm
//    InitDistributed chose. BM_MpiProducerAllreduce and BM_MpiProducer are MPI's peer in
//    Braze's context: the same negation into the same two alternating buffers, with and
//    without MPI_Allreduce after it, so MPI's op time is their difference as Braze's is.
//    Bytes per second are the buffer's size per all-reduce (also for the producers, to
//    subtract times: docs/DISTRIBUTED.md). Rank 0 ends with a summary per size: the op's
//    time against MPI_Allreduce alone and against MPI's op in context, from the medians of
//    the repetitions and from the fastest iterations. --allreduce_piece_kb=N sets
//    DistributedOptions::allreduce_piece_bytes (0: one MPI call per all-reduce), to
//    compare the pieces with one call in alternated runs of the same binary; each
//    benchmark reports its page faults per iteration (faults_per_op: pages the calls
//    allocate afresh).
//  - BM_BrazeBucketAllReduce/bytes and BM_BrazeBucketProducer/bytes: the same without
//    the Assign (y = AllReduce(-x) or y = -x run as a target), so the negation writes the
//    same step buffer every run, as a gradient bucket's producer does, instead of the
//    other of two buffers (the commit's swap); BM_MpiBucketAllreduce/BM_MpiBucketProducer
//    are their MPI peers (one buffer). The second summary table.
//  - BM_BrazeAllReduceAlone/bytes: Braze's op as hot as MPI_Allreduce alone, nothing
//    subtracted: the run of y = AllReduce(x), x a variable, y a target (the same input
//    and output buffers every run; out of place, as a variable's all-reduce is), against
//    BM_MpiAllreduce (the goal's baseline, in place) and BM_MpiAllreduceOutOfPlace (the
//    same call out of place). The third summary table.
//  - BM_MlpStep: examples/mlp's 784-1024-1024-10 Adam step at a global batch of 200,
//    with the ranks' data-parallel step (bucket_kb 1024: about 8 buckets that overlap the
//    backward pass; 25600: DDP's default, one bucket that cannot) against one process
//    doing the whole batch (/world:1; the other ranks wait meanwhile).
// Every rank must run the same collectives the same number of times, so each benchmark
// has a fixed iteration count (Google Benchmark's adaptive count differs by rank and
// would deadlock): --benchmark_min_time does not apply. For the same reason the ranks
// must run the benchmarks in the same order: --benchmark_enable_random_interleaving is
// done here (rank 0's seed), not by Google Benchmark (a seed per process). Only rank 0
// reports. Each benchmark checks its result once before it is timed (SkipWithError on a
// mismatch).
#include <benchmark/benchmark.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <random>
#include <string>
#include <vector>

#define OMPI_SKIP_MPICXX 1  // the C API only
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>

#include "braze/braze.h"
#include "braze/distributed.h"

namespace {

using braze::DType;
using braze::HostTensor;
using braze::Tensor;

// Fewer iterations for larger buffers: about 256 MiB moved per benchmark, 5 to 200 runs.
int64_t IterationsFor(int64_t bytes) {
  return std::max<int64_t>(5, std::min<int64_t>(200, (int64_t{256} << 20) / bytes));
}

// A barrier that sleeps while it waits (MPI_Barrier spins a core, which would slow the
// rank being measured).
void QuietBarrier() {
  MPI_Request req;
  MPI_Ibarrier(MPI_COMM_WORLD, &req);
  for (int done = 0; !done;) {
    MPI_Test(&req, &done, MPI_STATUS_IGNORE);
    if (!done) usleep(1000);
  }
}

// Load-robust counters of a timed loop (this VM is shared, so wall times under load say
// little): the fastest iteration's wall time, and the process's voluntary context
// switches per iteration (every thread's sleeps: a hand-off between threads costs the
// waiting one a sleep and a wake-up, a poll loop that sleeps costs one per sleep), and
// its page faults per iteration.
class LoopCounters {
 public:
  LoopCounters() : start_(VoluntarySwitches()), faults_(MinorFaults()) {}
  void BeginIteration() { begin_ = std::chrono::steady_clock::now(); }
  void EndIteration() {
    const double us =
        std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - begin_)
            .count();
    min_us_ = std::min(min_us_, us);
  }
  void Report(benchmark::State& state) const {
    const double n = std::max<double>(1, static_cast<double>(state.iterations()));
    state.counters["min_us"] = min_us_;
    state.counters["sleeps_per_op"] = static_cast<double>(VoluntarySwitches() - start_) / n;
    state.counters["faults_per_op"] = static_cast<double>(MinorFaults() - faults_) / n;
  }

 private:
  static int64_t VoluntarySwitches() {
    rusage u{};
    getrusage(RUSAGE_SELF, &u);
    return u.ru_nvcsw;
  }
  // Page faults (every first touch of fresh pages: a buffer allocated per call).
  static int64_t MinorFaults() {
    rusage u{};
    getrusage(RUSAGE_SELF, &u);
    return u.ru_minflt;
  }
  int64_t start_;
  int64_t faults_;
  std::chrono::steady_clock::time_point begin_;
  double min_us_ = 1e30;
};

braze::SessionOptions CpuOptions() {
  braze::SessionOptions o;
  o.device = "cpu";
  return o;
}

// sink = AllReduce(-x) (reduce) or sink = -x, on rank r's x; checked once before timing.
// With `bucket`, y = AllReduce(-x) or y = -x run as a target, nothing assigned: the
// result stays in the step's own buffer, the same every run, as a gradient bucket's does
// (docs/DISTRIBUTED.md, "Overlap"); with Assign the commit's swap makes the negation
// write the other of two buffers each run.
void RunBrazeAllReduce(benchmark::State& state, bool reduce, bool bucket = false) {
  const int64_t n = state.range(0) / 4;
  braze::Graph g;
  const HostTensor init = HostTensor::RandomUniform(DType::kF32, {n}, 1 + braze::WorldRank());
  Tensor x = braze::Variable(g, init, "x");
  Tensor sink = braze::Variable(g, DType::kF32, {n}, "sink");
  Tensor result, update;
  {
    braze::JitScope scope(g);
    Tensor negated = -x;
    result = reduce ? braze::AllReduce(negated) : negated;
    update = bucket ? result : braze::Assign(sink, result);
  }
  braze::Session s(g, CpuOptions());
  absl::Status first = s.Run({}, {}, {update}).status();
  auto got = first.ok() ? s.Run({}, {bucket ? result : sink})
                        : absl::StatusOr<std::vector<HostTensor>>(first);
  if (!got.ok()) {
    state.SkipWithError(std::string(got.status().message()).c_str());
    return;
  }
  if (reduce && s.stats().collectives_in_place < 1) {
    state.SkipWithError("the AllReduce did not work in place");
    return;
  }
  for (int64_t i : {int64_t{0}, n / 2, n - 1}) {
    double want = -init.GetDouble(i);
    if (reduce) {
      want = 0;
      for (int r = 0; r < braze::WorldSize(); ++r) {
        want -= HostTensor::RandomUniform(DType::kF32, {n}, 1 + r).GetDouble(i);
      }
    }
    if (std::abs((*got)[0].GetDouble(i) - want) > 1e-5) {
      state.SkipWithError("the result is wrong");
      return;
    }
  }
  // Once more untimed: the commit's swap makes the negation write sink's old storage in
  // this run, pages never touched before (a first touch in the timed loop was up to
  // 16384 page faults in one repetition's first iteration at 64 MiB, in some
  // repetitions only, depending on what the allocator reused).
  if (absl::Status st = s.Run({}, {}, {update}).status(); !st.ok()) {
    state.SkipWithError(std::string(st.message()).c_str());
    return;
  }
  const int64_t run_here = s.stats().collectives_run_here;
  const int64_t in_place = s.stats().collectives_in_place;
  LoopCounters counters;
  for (auto _ : state) {
    counters.BeginIteration();
    absl::Status st = s.Run({}, {}, {update}).status();
    counters.EndIteration();
    if (!st.ok()) {
      state.SkipWithError(std::string(st.message()).c_str());
      break;
    }
  }
  state.SetBytesProcessed(state.iterations() * state.range(0));
  counters.Report(state);
  // Whether the executor made the call itself (nothing to overlap: Step::run_here).
  if (reduce) state.counters["run_here"] = s.stats().collectives_run_here > run_here ? 1 : 0;
  if (reduce && s.stats().collectives_in_place - in_place != state.iterations()) {
    state.SkipWithError("a timed AllReduce did not work in place");
  }
}

// Braze's op alone, as hot as MPI_Allreduce alone: one Session run of y = AllReduce(x), x
// a variable, y run as a target (neither fetched nor assigned), so every run reads the
// same x and writes the same step buffer, both left in the cache by the previous run, as
// MPI_Allreduce alone finds its buffer. Nothing is subtracted: the time includes the
// run's own cost (plan lookup, hand-off, commit). The input is a variable, so the call is
// out of place (MPI copies x into the output inside the call); its peer is
// BM_MpiAllreduceOutOfPlace, the same call on two buffers of the same size, and the
// issue's baseline stays BM_MpiAllreduce (in place). Checked once before timing: the sum
// of every rank's x, out of place, no copy by the engine.
void BM_BrazeAllReduceAlone(benchmark::State& state) {
  const int64_t n = state.range(0) / 4;
  braze::Graph g;
  const HostTensor init = HostTensor::RandomUniform(DType::kF32, {n}, 1 + braze::WorldRank());
  Tensor x = braze::Variable(g, init, "x");
  Tensor y;
  {
    braze::JitScope scope(g);
    y = braze::AllReduce(x);
  }
  braze::Session s(g, CpuOptions());
  auto got = s.Run({}, {y});
  if (!got.ok()) {
    state.SkipWithError(std::string(got.status().message()).c_str());
    return;
  }
  for (int64_t i : {int64_t{0}, n / 2, n - 1}) {
    double want = 0;
    for (int r = 0; r < braze::WorldSize(); ++r) {
      want += HostTensor::RandomUniform(DType::kF32, {n}, 1 + r).GetDouble(i);
    }
    if (std::abs((*got)[0].GetDouble(i) - want) > 1e-5) {
      state.SkipWithError("the result is wrong");
      return;
    }
  }
  if (absl::Status st = s.Run({}, {}, {y}).status(); !st.ok()) {  // untimed, as the others
    state.SkipWithError(std::string(st.message()).c_str());
    return;
  }
  const braze::SessionStats before = s.stats();
  LoopCounters counters;
  for (auto _ : state) {
    counters.BeginIteration();
    absl::Status st = s.Run({}, {}, {y}).status();
    counters.EndIteration();
    if (!st.ok()) {
      state.SkipWithError(std::string(st.message()).c_str());
      break;
    }
  }
  state.SetBytesProcessed(state.iterations() * state.range(0));
  counters.Report(state);
  if (s.stats().copied_bytes != before.copied_bytes ||
      s.stats().collectives_in_place != before.collectives_in_place ||
      s.stats().collectives - before.collectives != state.iterations()) {
    state.SkipWithError("the engine copied, worked in place on the variable or skipped a call");
  }
}

void BM_BrazeAllReduce(benchmark::State& state) { RunBrazeAllReduce(state, true); }

// Every rank runs it (no collective in it): ranks stay in step for the next benchmark.
void BM_BrazeProducer(benchmark::State& state) { RunBrazeAllReduce(state, false); }

// The same as a gradient bucket (nothing assigned: one buffer, the same every run).
void BM_BrazeBucketAllReduce(benchmark::State& state) { RunBrazeAllReduce(state, true, true); }
void BM_BrazeBucketProducer(benchmark::State& state) { RunBrazeAllReduce(state, false, true); }

// This rank's values, as the Braze benchmarks' variables hold them (seed 1 + rank).
std::vector<float> RankValues(int64_t n) {
  const HostTensor init = HostTensor::RandomUniform(DType::kF32, {n}, 1 + braze::WorldRank());
  std::vector<float> v(n);
  for (int64_t i = 0; i < n; ++i) v[i] = static_cast<float>(init.GetDouble(i));
  return v;
}

// Runs an MPI peer's `reduce` once, checks the last element of `result` against the sum
// of every rank's values, then times it.
template <typename Reduce>
void CheckAndTimeMpi(benchmark::State& state, const char* what, const std::vector<float>& result,
                     Reduce reduce) {
  const int64_t n = static_cast<int64_t>(result.size());
  reduce();
  double want = 0;
  for (int r = 0; r < braze::WorldSize(); ++r) {
    want += HostTensor::RandomUniform(DType::kF32, {n}, 1 + r).GetDouble(n - 1);
  }
  if (std::abs(result[n - 1] - want) > 1e-5) {
    state.SkipWithError((std::string(what) + "'s sum is wrong").c_str());
    return;
  }
  LoopCounters counters;
  for (auto _ : state) {
    counters.BeginIteration();
    reduce();
    counters.EndIteration();
    benchmark::DoNotOptimize(result.data());
  }
  state.SetBytesProcessed(state.iterations() * state.range(0));
  counters.Report(state);
}

void BM_MpiAllreduce(benchmark::State& state) {
  std::vector<float> buf = RankValues(state.range(0) / 4);
  CheckAndTimeMpi(state, "MPI_Allreduce", buf, [&] {
    MPI_Allreduce(MPI_IN_PLACE, buf.data(), static_cast<int>(buf.size()), MPI_FLOAT, MPI_SUM,
                  MPI_COMM_WORLD);
  });
}

// The peer of BM_BrazeAllReduceAlone: MPI_Allreduce from one buffer into another, the
// same two every call (out of place, as Braze's all-reduce of a variable is).
void BM_MpiAllreduceOutOfPlace(benchmark::State& state) {
  const std::vector<float> x = RankValues(state.range(0) / 4);
  std::vector<float> y(x.size());
  CheckAndTimeMpi(state, "MPI_Allreduce", y, [&] {
    MPI_Allreduce(x.data(), y.data(), static_cast<int>(x.size()), MPI_FLOAT, MPI_SUM,
                  MPI_COMM_WORLD);
  });
}

// The peer of BM_BrazeAllReduce doing the same work (with_reduce) and of
// BM_BrazeProducer (without): each iteration writes -x into one of two buffers, in turn,
// then (with_reduce) all-reduces that buffer in place with MPI_Allreduce. Braze's run does
// exactly this: its negation writes the step's buffer, the AllReduce sums it in place, and
// the commit swaps it into the variable sink, so the next run writes sink's old buffer.
// Why a peer in context: MPI_Allreduce alone on one buffer finds that buffer (and its
// temporary) in the cache left by its previous call, which no all-reduce of a value just
// computed does; at 16 MiB on this VM's 32 MiB L3 that alone made the same call take
// longer after the producer than without it (docs/DISTRIBUTED.md, "All-reduce speed").
// The negation is a plain loop on one thread (Braze's is a vectorized kernel on the
// rank's cores: one under mpirun's default binding); the producer's own time is
// subtracted on both sides.
void RunMpiInContext(benchmark::State& state, bool with_reduce, int turns = 2) {
  const int64_t n = state.range(0) / 4;
  const HostTensor init = HostTensor::RandomUniform(DType::kF32, {n}, 1 + braze::WorldRank());
  std::vector<float> x(n);
  for (int64_t i = 0; i < n; ++i) x[i] = static_cast<float>(init.GetDouble(i));
  std::vector<float> buffers[2] = {std::vector<float>(n), std::vector<float>(n)};
  int64_t turn = 0;
  auto run = [&] {
    float* buf = buffers[turn++ % turns].data();
    const float* from = x.data();
    for (int64_t i = 0; i < n; ++i) buf[i] = -from[i];
    if (with_reduce) {
      MPI_Allreduce(MPI_IN_PLACE, buf, static_cast<int>(n), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    }
    benchmark::DoNotOptimize(buf);
  };
  run();
  double want = -x[n - 1];
  if (with_reduce) {
    want = 0;
    for (int r = 0; r < braze::WorldSize(); ++r) {
      want -= HostTensor::RandomUniform(DType::kF32, {n}, 1 + r).GetDouble(n - 1);
    }
  }
  if (std::abs(buffers[0][n - 1] - want) > 1e-5) {
    state.SkipWithError("the MPI peer's result is wrong");
    return;
  }
  LoopCounters counters;
  for (auto _ : state) {
    counters.BeginIteration();
    run();
    counters.EndIteration();
  }
  state.SetBytesProcessed(state.iterations() * state.range(0));
  counters.Report(state);
}

void BM_MpiProducerAllreduce(benchmark::State& state) { RunMpiInContext(state, true); }

// Every rank runs it (no collective in it), as BM_BrazeProducer.
void BM_MpiProducer(benchmark::State& state) { RunMpiInContext(state, false); }

// The peers of the bucket benchmarks: the negation always writes the same buffer.
void BM_MpiBucketAllreduce(benchmark::State& state) { RunMpiInContext(state, true, 1); }
void BM_MpiBucketProducer(benchmark::State& state) { RunMpiInContext(state, false, 1); }

// The non-blocking call Braze's communicator makes (MPI_Iallreduce in place, then
// MPI_Wait): Open MPI's libnbc with the algorithm InitDistributed chose (the ring, unless
// OMPI_MCA_coll_libnbc_iallreduce_algorithm was set: =0 gives libnbc's default).
void BM_MpiIallreduce(benchmark::State& state) {
  std::vector<float> buf = RankValues(state.range(0) / 4);
  CheckAndTimeMpi(state, "MPI_Iallreduce", buf, [&] {
    MPI_Request req;
    MPI_Iallreduce(MPI_IN_PLACE, buf.data(), static_cast<int>(buf.size()), MPI_FLOAT, MPI_SUM,
                   MPI_COMM_WORLD, &req);
    MPI_Wait(&req, MPI_STATUS_IGNORE);
  });
}

// examples/mlp's step. world 1: one process, the whole batch (other ranks skip);
// otherwise the data-parallel step of batch / N rows with buckets of bucket_kb.
void RunMlpStep(benchmark::State& state, int world, int64_t bucket_bytes) {
  constexpr int64_t kBatch = 200, kPixels = 784, kHidden = 1024, kClasses = 10;
  const int64_t rows = kBatch / world;
  braze::Graph g;
  Tensor x = braze::Placeholder(g, DType::kF32, {rows, kPixels}, "x");
  Tensor labels = braze::Placeholder(g, DType::kI32, {rows}, "labels");
  std::vector<Tensor> params;
  auto dense = [&](Tensor in, int64_t fan_in, int64_t fan_out, uint64_t seed, bool relu) {
    Tensor w = braze::Variable(g, HostTensor::RandomNormal(DType::kF32, {fan_in, fan_out}, seed, 0,
                                                           std::sqrt(2.0 / fan_in)));
    Tensor b = braze::Variable(g, HostTensor(DType::kF32, {fan_out}));
    params.push_back(w);
    params.push_back(b);
    return braze::Dense(in, w, b, relu ? braze::Activation::kRelu : braze::Activation::kNone);
  };
  Tensor loss;
  absl::StatusOr<std::vector<Tensor>> train;
  {
    braze::JitScope scope(g);
    Tensor h = dense(dense(x, kPixels, kHidden, 1, true), kHidden, kHidden, 2, true);
    Tensor logits = dense(h, kHidden, kClasses, 3, false);
    loss =
        braze::Mean(braze::SoftmaxCrossEntropyWithLogits(logits, braze::OneHot(labels, kClasses)));
    braze::Optimizer adam = braze::Optimizer::Adam(1e-3);
    if (world > 1) adam = adam.WithDataParallel(bucket_bytes);
    train = braze::Minimize(adam, loss, params);
  }
  if (!train.ok()) {
    state.SkipWithError(std::string(train.status().message()).c_str());
    return;
  }
  braze::Session s(g, CpuOptions());
  const braze::Feeds feeds = {
      {x, HostTensor::RandomUniform(DType::kF32, {rows, kPixels}, 7 + braze::WorldRank(), 0, 1)},
      {labels,
       HostTensor::RandomUniform(DType::kI32, {rows}, 8 + braze::WorldRank(), 0, kClasses)}};
  std::vector<HostTensor> out;
  for (int warmup = 0; warmup < 2; ++warmup) {  // compiles, then allocates
    absl::Status st = s.RunInto(feeds, {loss}, &out, *train);
    if (!st.ok() || !std::isfinite(out[0].GetDouble(0))) {
      state.SkipWithError(st.ok() ? "the loss is not finite" : std::string(st.message()).c_str());
      return;
    }
  }
  for (auto _ : state) {
    absl::Status st = s.RunInto(feeds, {loss}, &out, *train);
    if (!st.ok()) {
      state.SkipWithError(std::string(st.message()).c_str());
      break;
    }
  }
  state.SetItemsProcessed(state.iterations() * kBatch);  // global examples
  state.counters["world"] = world;
}

void BM_MlpStep(benchmark::State& state) {
  const int world = static_cast<int>(state.range(0));
  if (world == 1 && braze::WorldRank() != 0) {
    QuietBarrier();  // idle while rank 0 measures
    state.SkipWithError("the one-process baseline runs on rank 0 alone");
    return;
  }
  RunMlpStep(state, world, state.range(1) << 10);
  if (world == 1) QuietBarrier();
}

class NullReporter : public benchmark::BenchmarkReporter {
 public:
  bool ReportContext(const Context&) override { return true; }
  void ReportRuns(const std::vector<Run>&) override {}
};

// Rank 0's console output, then a summary per size of issue 37's measure: the op's time
// (BM_BrazeAllReduce - BM_BrazeProducer) against MPI_Allreduce alone and against the
// MPI peer's op in the same context (BM_MpiProducerAllreduce - BM_MpiProducer), from the
// medians of the repetitions (means of their iterations) and from the fastest
// iterations (min_us), which load disturbs least.
class SummaryReporter : public benchmark::ConsoleReporter {
 public:
  SummaryReporter() : benchmark::ConsoleReporter(OO_None) {}
  void ReportRuns(const std::vector<Run>& runs) override {
    benchmark::ConsoleReporter::ReportRuns(runs);
    for (const Run& run : runs) {
      if (run.run_type != Run::RT_Iteration || run.error_occurred || run.iterations == 0) continue;
      Samples& s = samples_[{run.run_name.function_name, run.run_name.args}];
      s.mean_us.push_back(run.real_accumulated_time * 1e6 / static_cast<double>(run.iterations));
      auto min = run.counters.find("min_us");
      if (min != run.counters.end()) s.min_us.push_back(min->second.value);
    }
  }

  void Summarize() const {
    InContext(
        "All-reduce op = AllReduce - Producer (sink = AllReduce(-x): the commit's swap "
        "alternates two buffers)",
        "BM_BrazeAllReduce", "BM_BrazeProducer", "BM_MpiProducerAllreduce", "BM_MpiProducer");
    InContext(
        "Bucket op = BucketAllReduce - BucketProducer (y = AllReduce(-x), nothing "
        "assigned: one buffer, as a gradient bucket)",
        "BM_BrazeBucketAllReduce", "BM_BrazeBucketProducer", "BM_MpiBucketAllreduce",
        "BM_MpiBucketProducer");
    SummarizeAlone();
  }

  // One table of an op in context: Braze's (braze_ar - braze_prod) against MPI_Allreduce
  // alone and against MPI's op in the same context (mpi_ar - mpi_prod).
  void InContext(const char* title, const char* braze_ar, const char* braze_prod,
                 const char* mpi_ar, const char* mpi_prod) const {
    std::printf(
        "\n%s;\nratio = MPI time / Braze op (>= 0.9x: goal).\n"
        "%9s %5s | %-28s %10s %6s | %-22s %6s | fastest iterations: op, alone, in context\n",
        title, "bytes", "reps", "Braze op med (slowest) us", "MPI alone", "ratio",
        "MPI op in context", "ratio");
    for (int64_t bytes = 4 << 10; bytes <= (int64_t{64} << 20); bytes *= 4) {
      const std::string arg = std::to_string(bytes);
      const Samples* ar = Find(braze_ar, arg);
      const Samples* prod = Find(braze_prod, arg);
      const Samples* alone = Find("BM_MpiAllreduce", arg);
      const Samples* ctx = Find(mpi_ar, arg);
      const Samples* ctx_prod = Find(mpi_prod, arg);
      if (ar == nullptr || prod == nullptr || alone == nullptr) continue;
      const double op = Median(ar->mean_us) - Median(prod->mean_us);
      const double slowest = Max(ar->mean_us) - Median(prod->mean_us);
      const double mpi = Median(alone->mean_us);
      const double op_min = Min(ar->min_us) - Min(prod->min_us);
      double in_ctx = 0, in_ctx_min = 0;
      if (ctx != nullptr && ctx_prod != nullptr) {
        in_ctx = Median(ctx->mean_us) - Median(ctx_prod->mean_us);
        in_ctx_min = Min(ctx->min_us) - Min(ctx_prod->min_us);
      }
      std::printf(
          "%9lld %5zu | %12.1f (%12.1f) %10.1f %5.2fx | %22.1f %5.2fx | %.1f %.1f %.1f: %.2fx "
          "%.2fx\n",
          static_cast<long long>(bytes), ar->mean_us.size(), op, slowest, mpi, mpi / op, in_ctx,
          in_ctx / op, op_min, Min(alone->min_us), in_ctx_min, Min(alone->min_us) / op_min,
          in_ctx_min / op_min);
    }
  }

  // Braze's op alone, as hot as MPI_Allreduce alone (BM_BrazeAllReduceAlone: the whole
  // run, nothing subtracted) against MPI_Allreduce alone in place (the goal's baseline)
  // and against the same call out of place (BM_MpiAllreduceOutOfPlace, its exact peer).
  void SummarizeAlone() const {
    std::printf(
        "\nBraze op alone = the run of y = AllReduce(x), x a variable (hot, out of place);\n"
        "ratio = MPI time / Braze time.\n"
        "%9s %5s | %-28s %10s %6s | %-22s %6s | fastest iterations: Braze, in place, out of "
        "place\n",
        "bytes", "reps", "Braze alone med (slowest) us", "MPI alone", "ratio",
        "MPI alone out of place", "ratio");
    for (int64_t bytes = 4 << 10; bytes <= (int64_t{64} << 20); bytes *= 4) {
      const std::string arg = std::to_string(bytes);
      const Samples* braze = Find("BM_BrazeAllReduceAlone", arg);
      const Samples* alone = Find("BM_MpiAllreduce", arg);
      const Samples* oop = Find("BM_MpiAllreduceOutOfPlace", arg);
      if (braze == nullptr || alone == nullptr || oop == nullptr) continue;
      const double op = Median(braze->mean_us), op_min = Min(braze->min_us);
      std::printf(
          "%9lld %5zu | %12.1f (%12.1f) %10.1f %5.2fx | %22.1f %5.2fx | %.1f %.1f %.1f: %.2fx "
          "%.2fx\n",
          static_cast<long long>(bytes), braze->mean_us.size(), op, Max(braze->mean_us),
          Median(alone->mean_us), Median(alone->mean_us) / op, Median(oop->mean_us),
          Median(oop->mean_us) / op, op_min, Min(alone->min_us), Min(oop->min_us),
          Min(alone->min_us) / op_min, Min(oop->min_us) / op_min);
    }
  }

 private:
  struct Samples {
    std::vector<double> mean_us, min_us;
  };
  const Samples* Find(const std::string& name, const std::string& arg) const {
    auto it = samples_.find({name, arg});
    return it == samples_.end() || it->second.mean_us.empty() ? nullptr : &it->second;
  }
  static double Median(std::vector<double> v) {
    if (v.empty()) return 0;
    std::sort(v.begin(), v.end());
    return v.size() % 2 == 1 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
  }
  static double Max(const std::vector<double>& v) {
    return v.empty() ? 0 : *std::max_element(v.begin(), v.end());
  }
  static double Min(const std::vector<double>& v) {
    return v.empty() ? 0 : *std::min_element(v.begin(), v.end());
  }
  std::map<std::pair<std::string, std::string>, Samples> samples_;
};

// Takes --benchmark_enable_random_interleaving[=true] out of argv and returns whether it
// was there, with the --benchmark_repetitions count. Google Benchmark shuffles its runs
// with a seed of std::random_device, so each rank would run another order and their
// collectives would not match (a hang until the timeout): the ranks interleave here
// instead, with one seed.
// Also drops --benchmark_out on every rank but 0: all ranks writing one file interleaved
// their JSON into a corrupt one.
// And drops --allreduce_piece_kb=N, which TakePieceSize read before InitDistributed.
bool TakeInterleaving(int* argc, char** argv, int* repetitions) {
  bool interleave = false;
  int kept = 1;
  for (int i = 1; i < *argc; ++i) {
    const std::string arg = argv[i];
    if (arg.rfind("--allreduce_piece_kb=", 0) == 0) continue;  // TakePieceSize's
    if (braze::WorldRank() != 0 && arg.rfind("--benchmark_out", 0) == 0) continue;
    if (arg == "--benchmark_enable_random_interleaving" ||
        arg == "--benchmark_enable_random_interleaving=true") {
      interleave = true;
      continue;
    }
    if (arg.rfind("--benchmark_repetitions=", 0) == 0) {
      *repetitions = std::max(1, std::atoi(arg.c_str() + std::strlen("--benchmark_repetitions=")));
    }
    argv[kept++] = argv[i];
  }
  *argc = kept;
  return interleave;
}

// Registers every benchmark once (repetitions from the flag) or, interleaved, in
// `rounds` rounds: each round takes the sizes in a random order and, per size, the twelve
// benchmarks in a random order (so each Braze run sits beside its MPI peers in time), then
// the MLP steps; every rank draws the same order from rank 0's seed.
void Register(int world, int rounds, bool interleave) {
  uint32_t seed = std::random_device{}();
  MPI_Bcast(&seed, 1, MPI_UINT32_T, 0, MPI_COMM_WORLD);
  std::mt19937 rng(seed);
  struct Kind {
    const char* name;
    void (*fn)(benchmark::State&);
  };
  std::vector<Kind> kinds = {{"BM_BrazeAllReduce", BM_BrazeAllReduce},
                             {"BM_BrazeProducer", BM_BrazeProducer},
                             {"BM_MpiAllreduce", BM_MpiAllreduce},
                             {"BM_MpiProducerAllreduce", BM_MpiProducerAllreduce},
                             {"BM_MpiProducer", BM_MpiProducer},
                             {"BM_MpiIallreduce", BM_MpiIallreduce},
                             {"BM_BrazeAllReduceAlone", BM_BrazeAllReduceAlone},
                             {"BM_BrazeBucketAllReduce", BM_BrazeBucketAllReduce},
                             {"BM_BrazeBucketProducer", BM_BrazeBucketProducer},
                             {"BM_MpiBucketAllreduce", BM_MpiBucketAllreduce},
                             {"BM_MpiBucketProducer", BM_MpiBucketProducer},
                             {"BM_MpiAllreduceOutOfPlace", BM_MpiAllreduceOutOfPlace}};
  std::vector<int64_t> sizes;
  for (int64_t bytes = 4 << 10; bytes <= (int64_t{64} << 20); bytes *= 4) sizes.push_back(bytes);
  std::vector<std::vector<int64_t>> steps = {{1, 0}};
  if (world > 1) steps.push_back({world, 1024}), steps.push_back({world, 25600});
  for (int round = 0; round < (interleave ? rounds : 1); ++round) {
    if (interleave) std::shuffle(sizes.begin(), sizes.end(), rng);
    for (int64_t bytes : sizes) {
      if (interleave) std::shuffle(kinds.begin(), kinds.end(), rng);
      for (const Kind& k : kinds) {
        auto* b = benchmark::RegisterBenchmark(k.name, k.fn)
                      ->Arg(bytes)
                      ->Iterations(IterationsFor(bytes))
                      ->UseRealTime();
        if (interleave) b->Repetitions(1);
      }
    }
    if (interleave) std::shuffle(steps.begin(), steps.end(), rng);
    for (const std::vector<int64_t>& args : steps) {
      auto* b = benchmark::RegisterBenchmark("BM_MlpStep", BM_MlpStep)
                    ->ArgNames({"world", "bucket_kb"})
                    ->Args(args)
                    ->Iterations(10)
                    ->UseRealTime()
                    ->Unit(benchmark::kMillisecond);
      if (interleave) b->Repetitions(1);
    }
  }
}

}  // namespace

// --allreduce_piece_kb=N: DistributedOptions::allreduce_piece_bytes in KiB (0: one call
// per all-reduce), for A/B runs of the pieces; -1 when absent (then the default).
int64_t TakePieceSize(int argc, char** argv) {
  const std::string flag = "--allreduce_piece_kb=";
  for (int i = 1; i < argc; ++i) {
    if (std::string(argv[i]).rfind(flag, 0) == 0) return std::atoll(argv[i] + flag.size());
  }
  return -1;
}

int main(int argc, char** argv) {
  braze::DistributedOptions options;
  if (const int64_t kb = TakePieceSize(argc, argv); kb >= 0) {
    options.allreduce_piece_bytes = kb << 10;
  }
  if (absl::Status s = braze::InitDistributed(options); !s.ok()) {
    std::fprintf(stderr, "braze_dp_bench: %s\n", s.ToString().c_str());
    return 1;
  }
  int repetitions = 1;
  const bool interleave = TakeInterleaving(&argc, argv, &repetitions);
  Register(braze::WorldSize(), repetitions, interleave);
  benchmark::Initialize(&argc, argv);
  if (braze::WorldRank() == 0) {
    SummaryReporter console;
    benchmark::RunSpecifiedBenchmarks(&console);
    console.Summarize();
  } else {
    NullReporter quiet;
    benchmark::RunSpecifiedBenchmarks(&quiet);
  }
  benchmark::Shutdown();
  return braze::FinalizeDistributed().ok() ? 0 : 1;
}
