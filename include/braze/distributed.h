// Data parallelism across processes (docs/DISTRIBUTED.md): a job of N processes (ranks)
// launched by Open MPI's mpirun, collectives between them as graph ops, and a training
// helper (braze/optimizers.h's DataParallel) that averages gradients in buckets.
//
//   int main(int argc, char** argv) {
//     CHECK_OK(braze::InitDistributed());  // a world of 1 when not under mpirun
//     Graph g;  // built after InitDistributed: the collectives record the world's size
//     ...
//     Tensor total = braze::AllReduce(local_count);          // the sum over the ranks
//     Tensor mean = braze::AllReduce(x, Reduction::kMean);   // AllReduce then x (1/N)
//     ...
//     CHECK_OK(braze::FinalizeDistributed());
//   }
//
// The collectives run on an existing engine, never on Braze's own protocol: Open MPI for
// host memory, NCCL (loaded at run time, on a CUDA device) for device memory. Each is a
// plan step of its own kind (never inside a fused kernel); the runtime starts it as soon
// as its input is ready, on a communication thread, and the steps after it that do not
// read its result run meanwhile. Every rank must run the same graph's collectives in
// the same order, as with MPI (a graph built by the same code on every rank does).
//
// Faults: a collective that has not completed within DistributedOptions::timeout_seconds
// (a rank died or hangs) fails the Run with DeadlineExceeded naming the node, and every
// later collective of the process fails at once; the job cannot continue (MPI keeps no
// consistent state after a lost rank), so the program should report it and exit:
// FinalizeDistributed then aborts the job instead of waiting for the lost rank.
#ifndef BRAZE_DISTRIBUTED_H_
#define BRAZE_DISTRIBUTED_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "braze/graph.h"

namespace braze {

struct DistributedOptions {
  // A collective not done after this long fails with DeadlineExceeded (> 0).
  double timeout_seconds = 300;
  // An all-reduce on MPI (host memory) of more bytes than this is made as pieces of at
  // most this many bytes, two in flight, instead of one call: Open MPI's all-reduce
  // allocates a temporary of about half the message per call (fresh pages from the kernel
  // each call above 32 MiB) and streams it through the caches beside the buffer, while a
  // piece's temporary stays cached and is reused (docs/DISTRIBUTED.md, "All-reduce
  // speed"). 0: every all-reduce in one call. >= 0. NCCL pipelines on its own.
  // The same on every rank (each piece is a collective call): InitDistributed compares
  // the ranks' values (one all-gather) and returns InvalidArgument on every rank when
  // they differ, leaving the process out of the job as before the call.
  int64_t allreduce_piece_bytes = int64_t{4} << 20;
};

// Joins the job: MPI_Init (thread level serialized or better) when Braze was built with
// MPI; a process not started by mpirun is a world of one. Without MPI in the build,
// a world of one, and a process started by mpirun with more than one rank is
// FailedPrecondition (it would silently train N independent models). A second call is
// FailedPrecondition.
absl::Status InitDistributed(const DistributedOptions& options = {});
// Leaves the job (MPI_Finalize). After a failed collective it aborts the job
// (MPI_Abort) rather than wait for a lost rank. Nothing to do when never initialized;
// after an InitDistributed that was refused once MPI had started, it ends MPI too. MPI
// cannot start again: after it, a Run with a collective and InitDistributed fail with
// FailedPrecondition (in a job of more than one process).
absl::Status FinalizeDistributed();
// This process's rank and the number of processes (0 and 1 before InitDistributed).
int WorldRank();
int WorldSize();
// Whether this build has MPI ("mpi") or not ("none"): what InitDistributed can join.
const char* DistributedEngine();

// ---- Collectives (graph ops; graph.h's CollectiveAttrs) ----
enum class Reduction { kSum, kMean };
// The element-wise sum over the ranks of x; kMean multiplies it by 1 / WorldSize() with a
// plain Mul, which fuses into the kernels after it.
Tensor AllReduce(Tensor x, Reduction reduction = Reduction::kSum);
// Every rank gets rank `root`'s x (same shape and dtype on every rank).
Tensor Broadcast(Tensor x, int root = 0);
// Every rank's x stacked along dim 0 in rank order: [N d0, ...].
Tensor AllGather(Tensor x);

}  // namespace braze

#endif  // BRAZE_DISTRIBUTED_H_
