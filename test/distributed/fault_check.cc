// A lost rank under `mpirun -np 2 --enable-recovery` (test/CMakeLists.txt): rank 1 exits
// without a word (`exit`) or hangs (`hang`) after both joined; rank 0's next collective,
// inside Session::Run, must fail with a clear Status naming the node within
// DistributedOptions::timeout_seconds (2 s here, checked against 30 s of slack for a
// loaded machine), never hang. Rank 0 prints "fault check passed" (what ctest looks for:
// the exit status of a job that lost a rank is mpirun's business) when, besides, a later
// Run fails at once and no new MPI communicator can be made (the timed-out requests are
// still in flight), then FinalizeDistributed aborts the job, taking a hung rank 1 with it.
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <string>
#include <thread>

#include "braze/braze.h"
#include "braze/distributed.h"
#include "device/communicator.h"

int main(int argc, char** argv) {
  using namespace braze;
  const std::string mode = argc > 1 ? argv[1] : "exit";
  DistributedOptions options;
  options.timeout_seconds = 2;
  if (absl::Status s = InitDistributed(options); !s.ok() || WorldSize() != 2) {
    std::printf("fault check: needs mpirun -np 2 (%s)\n", s.ToString().c_str());
    return 1;
  }
  Graph g;
  Tensor x = Placeholder(g, DType::kF32, {1000}, "x");
  Tensor total = AllReduce(Exp(x), Reduction::kSum);
  SessionOptions so;
  so.device = "cpu";
  Session session(g, so);
  const HostTensor xv = HostTensor::RandomUniform(DType::kF32, {1000}, 1);
  auto first = session.Run({{x, xv}}, {total});  // both ranks alive: works
  if (!first.ok()) {
    std::printf("fault check: the first all-reduce failed: %s\n",
                first.status().ToString().c_str());
    return 1;
  }
  if (WorldRank() == 1) {
    if (mode == "hang") std::this_thread::sleep_for(std::chrono::hours(1));
    _exit(0);  // no MPI_Finalize: a crash as far as the job knows
  }
  const auto t0 = std::chrono::steady_clock::now();
  auto second = session.Run({{x, xv}}, {total});
  const double waited =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const std::string why = second.ok() ? "OK" : second.status().ToString();
  std::printf("fault check (%s): rank 0's Run returned after %.1f s: %s\n", mode.c_str(), waited,
              why.c_str());
  const bool named = why.find("AllReduce") != std::string::npos;
  const bool clear =
      !second.ok() && (second.status().code() == absl::StatusCode::kDeadlineExceeded ||
                       second.status().code() == absl::StatusCode::kUnavailable);
  // A third Run fails at once: the communicator stays failed.
  auto third = session.Run({{x, xv}}, {total});
  std::printf("fault check: a later Run: %s\n", third.status().ToString().c_str());
  // The timed-out all-reduce's requests are still in flight, and any MPI call could
  // advance them into buffers since freed: no new communicator (no MPI call) either.
  auto fresh = comm::CreateMpiCommunicator(/*timeout_seconds=*/2, /*allreduce_piece_bytes=*/0);
  std::printf("fault check: a new communicator: %s\n", fresh.status().ToString().c_str());
  const bool refused = fresh.status().code() == absl::StatusCode::kFailedPrecondition;
  if (clear && named && waited < 30 && !third.ok() && refused) std::printf("fault check passed\n");
  std::fflush(stdout);
  (void)FinalizeDistributed();  // MPI_Abort: the job is over
  return 1;
}
