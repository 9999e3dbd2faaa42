// MpiCommunicator: Open MPI collectives on host memory (communicator.h). Every call is
// the non-blocking form (MPI_Iallreduce, MPI_Ibcast, MPI_Iallgather) polled with
// MPI_Testany until a deadline, on a duplicate of MPI_COMM_WORLD whose error handler
// returns (MPI_ERRORS_RETURN): a rank that died or hangs makes the others fail with
// DeadlineExceeded or Unavailable within the timeout instead of blocking forever.
// Counts beyond INT_MAX elements are split into several calls, and an all-reduce larger
// than DistributedOptions::allreduce_piece_bytes into pieces of that size, two in flight:
// Open MPI's ring all-reduce mallocs a temporary of half the piece per call, which for a
// whole 64 MiB message is 32 MiB of fresh pages (8193 page faults per call, glibc maps
// anything above 32 MiB anew) and at 16 MiB streams 8 MiB more through the caches beside
// a buffer just written; a piece's temporary is reused, cached (docs/DISTRIBUTED.md).
#include <algorithm>
#include <atomic>
#include <chrono>
#include <climits>
#include <cstdlib>
#include <mutex>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "device/communicator.h"
#include "ir/environment.h"

#if BRAZE_HAVE_MPI
// The C API only: the deprecated C++ bindings need a library Braze does not link.
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>
#endif

namespace braze {
namespace comm {

#if BRAZE_HAVE_MPI

namespace {

MPI_Datatype MpiType(DType dtype) {
  switch (dtype) {
    case DType::kF32:
      return MPI_FLOAT;
    case DType::kF64:
      return MPI_DOUBLE;
    case DType::kI32:
      return MPI_INT32_T;
    case DType::kBool:
      return MPI_UINT8_T;
    // 16-bit floats travel as their bits (Broadcast, AllGather); AllReduce refuses them
    // at build time (shape inference), so MPI never sums these.
    case DType::kBF16:
    case DType::kF16:
      return MPI_UINT16_T;
  }
  return MPI_DATATYPE_NULL;
}

std::string MpiError(int code) {
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  if (MPI_Error_string(code, text, &len) != MPI_SUCCESS) return absl::StrCat("MPI error ", code);
  return std::string(text, len);
}

// At most this many pieces of one call in flight (AllReduceSum).
constexpr int kMaxInFlight = 2;

// Set when a call returned with requests that may still be in flight (its deadline
// passed, or MPI_Testany failed and left them in an unknown state). MPI cannot cancel a
// collective, and any later MPI call of this process (on any communicator: the progress
// engine is shared) could advance them and write into, or read from, buffers their
// caller has since freed or reused. So from then on this process makes no MPI call but
// MPI_Abort: every communicator's calls fail at once, CreateMpiCommunicator refuses, and
// FinalizeMpi aborts the job instead of MPI_Finalize (which would progress them).
std::atomic<bool> abandoned_requests{false};

absl::Status AbandonedError() {
  return absl::FailedPreconditionError(
      "an earlier MPI collective of this process failed with requests still in flight: "
      "MPI can neither cancel nor finish them, so this process makes no further MPI call "
      "(FinalizeDistributed aborts the job; restart it, docs/DISTRIBUTED.md \"Faults\")");
}

// MPI allows no call but a few queries after MPI_Finalize (Open MPI aborts the process):
// after FinalizeDistributed a collective, or InitDistributed again, is refused instead.
absl::Status NotFinalized() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  return finalized ? FinalizedError() : absl::OkStatus();
}

class MpiCommunicator : public Communicator {
 public:
  MpiCommunicator(MPI_Comm comm, int rank, int size, double timeout_s, int64_t piece_bytes)
      : comm_(comm), rank_(rank), size_(size), timeout_s_(timeout_s), piece_bytes_(piece_bytes) {}
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  const char* engine() const override { return "mpi"; }
  bool failed() const override {
    std::lock_guard<std::mutex> lock(mu_);
    return !failure_.ok();
  }

  // In pieces of at most piece_bytes_, two in flight (DistributedOptions::
  // allreduce_piece_bytes): every rank cuts the same pieces and starts them in the same
  // order, as MPI requires of collectives on one communicator.
  absl::Status AllReduceSum(const void* in, void* out, int64_t count, DType dtype) override {
    const char* from = static_cast<const char*>(in);
    char* to = static_cast<char*>(out);
    const size_t elem = SizeOf(dtype);
    const int64_t piece =
        piece_bytes_ > 0
            ? std::clamp<int64_t>(piece_bytes_ / static_cast<int64_t>(elem), 1, INT_MAX)
            : int64_t{INT_MAX};
    return Pieces(
        count, piece, kMaxInFlight, "all-reduce", dtype, [&](int64_t at, int n, MPI_Request* req) {
          const void* send = in == out ? MPI_IN_PLACE : static_cast<const void*>(from + at * elem);
          return MPI_Iallreduce(send, to + at * elem, n, MpiType(dtype), MPI_SUM, comm_, req);
        });
  }

  absl::Status Broadcast(void* data, int64_t count, DType dtype, int root) override {
    if (root < 0 || root >= size_) {
      return absl::InvalidArgumentError(absl::StrCat("broadcast root ", root, " is not a rank"));
    }
    char* p = static_cast<char*>(data);
    const size_t elem = SizeOf(dtype);
    return Pieces(count, INT_MAX, 1, "broadcast", dtype, [&](int64_t at, int n, MPI_Request* req) {
      return MPI_Ibcast(p + at * elem, n, MpiType(dtype), root, comm_, req);
    });
  }

  absl::Status AllGather(const void* in, int64_t count, DType dtype, void* out) override {
    if (count > INT_MAX) {
      return absl::UnimplementedError(
          absl::StrCat("an all-gather of ", count, " elements per rank (more than INT_MAX)"));
    }
    return Pieces(count, INT_MAX, 1, "all-gather", dtype, [&](int64_t, int n, MPI_Request* req) {
      return MPI_Iallgather(in, n, MpiType(dtype), out, n, MpiType(dtype), comm_, req);
    });
  }

  absl::Status Barrier() override {
    return Pieces(0, 1, 1, "barrier", DType::kBool,
                  [&](int64_t, int, MPI_Request* req) { return MPI_Ibarrier(comm_, req); });
  }

 private:
  // Runs start(at, n, &request) for each piece [at, at + n) of `count` elements, pieces
  // of `piece` (<= INT_MAX) elements, at most `in_flight` (<= kMaxInFlight) started and
  // not complete at a time, started in order; polls them to completion or the deadline.
  // A count of 0 is one call of 0 elements. It returns with no request in flight, except
  // past the deadline or after an MPI_Testany error (then abandoned_requests).
  template <typename Start>
  absl::Status Pieces(int64_t count, int64_t piece, int in_flight, const char* what, DType dtype,
                      Start start) {
    std::lock_guard<std::mutex> serial(call_mu_);  // MPI_THREAD_SERIALIZED
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (!failure_.ok()) return failure_;
    }
    if (abandoned_requests.load()) return AbandonedError();
    if (absl::Status s = NotFinalized(); !s.ok()) return s;
    auto fail = [&](absl::Status s) {
      std::lock_guard<std::mutex> lock(mu_);
      failure_ = s;
      return s;
    };
    const int64_t bytes = count * static_cast<int64_t>(SizeOf(dtype));
    auto label = [&] {
      return absl::StrCat("MPI ", what, " of ", bytes, " bytes on rank ", rank_, " of ", size_);
    };
    const int64_t pieces = count == 0 ? 1 : (count + piece - 1) / piece;
    MPI_Request reqs[kMaxInFlight];
    std::fill(reqs, reqs + kMaxInFlight, MPI_REQUEST_NULL);
    int64_t started = 0;
    int live = 0;
    // Starts pieces into the free slots.
    auto fill = [&]() -> int {
      for (int slot = 0; slot < in_flight && started < pieces; ++slot) {
        if (reqs[slot] != MPI_REQUEST_NULL) continue;
        const int64_t at = started * piece;
        const int n = static_cast<int>(std::min(count - at, piece));
        if (int rc = start(at, n, &reqs[slot]); rc != MPI_SUCCESS) {
          reqs[slot] = MPI_REQUEST_NULL;  // not started: nothing to complete
          return rc;
        }
        ++started;
        ++live;
      }
      return MPI_SUCCESS;
    };
    using Clock = std::chrono::steady_clock;
    const auto deadline = Clock::now() + std::chrono::duration<double>(timeout_s_);
    // Returns with requests that may still be in flight: see abandoned_requests.
    auto abandon = [&](absl::Status s) {
      abandoned_requests.store(true);
      return fail(std::move(s));
    };
    auto timed_out = [&] {
      // The requests stay pending: MPI cannot cancel a collective. The job is over.
      return abandon(absl::DeadlineExceededError(absl::StrFormat(
          "%s did not complete within %g s (DistributedOptions::timeout_seconds): a "
          "rank died or hangs",
          label(), timeout_s_)));
    };
    // A piece failed to start while earlier ones are in flight: they still write `out`
    // and read `in`, which the caller may free once this returns, so they are completed
    // first (polled to the same deadline, no new piece started). Other ranks may have
    // started the piece this one could not: the communicator fails either way.
    auto start_failed = [&](int rc) {
      absl::Status s = absl::UnavailableError(absl::StrCat(label(), " failed: ", MpiError(rc)));
      while (live > 0) {
        int index = MPI_UNDEFINED, done = 0;
        if (MPI_Testany(in_flight, reqs, &index, &done, MPI_STATUS_IGNORE) != MPI_SUCCESS) {
          return abandon(s);
        }
        if (done && index != MPI_UNDEFINED) {
          --live;
        } else if (Clock::now() > deadline) {
          return abandon(s);
        } else {
          std::this_thread::yield();
        }
      }
      return fail(s);
    };
    if (int rc = fill(); rc != MPI_SUCCESS) return start_failed(rc);
    for (int64_t polls = 0;; ++polls) {
      int index = MPI_UNDEFINED, done = 0;
      if (int rc = MPI_Testany(in_flight, reqs, &index, &done, MPI_STATUS_IGNORE);
          rc != MPI_SUCCESS) {
        // The requests' state is unknown (MPI_ERRORS_RETURN): they may still be live.
        return abandon(absl::UnavailableError(
            absl::StrCat(label(), " failed (a rank died?): ", MpiError(rc))));
      }
      if (done && index != MPI_UNDEFINED) {  // MPI_Testany freed reqs[index]
        --live;
        if (int rc = fill(); rc != MPI_SUCCESS) return start_failed(rc);
        if (live == 0) return absl::OkStatus();
        continue;
      }
      // A non-blocking collective advances only inside MPI_Test* (libnbc has no progress
      // thread), so every yield or sleep between two polls delays each round of its
      // algorithm. While a thread waits for this result with nothing else to run
      // (comm::Awaited), poll back to back as MPI_Wait does: polled with a sched_yield
      // between tests, a 16 MiB all-reduce of 2 ranks took 2.5x MPI_Wait's time even at
      // its best, under load (docs/DISTRIBUTED.md). Otherwise kernels run beside the
      // call: spin a little (small messages finish in microseconds), then back off so
      // they keep the cores.
      const bool awaited = Awaited();
      if (awaited || polls <= 2000) {
        if ((polls & 1023) == 1023 && Clock::now() > deadline) return timed_out();
        if (!awaited) std::this_thread::yield();
        continue;
      }
      if (Clock::now() > deadline) return timed_out();
      std::this_thread::sleep_for(std::chrono::microseconds(polls > 20000 ? 200 : 20));
    }
  }

  MPI_Comm comm_;
  const int rank_, size_;
  const double timeout_s_;
  const int64_t piece_bytes_;  // 0: an all-reduce in one call (up to INT_MAX elements)
  std::mutex call_mu_;
  mutable std::mutex mu_;
  absl::Status failure_;
};

}  // namespace

// Open MPI's non-blocking all-reduce (coll/libnbc) picks, by default, a binomial tree
// (reduce to rank 0, then broadcast) for fewer than 4 ranks and for every in-place call;
// on 2 ranks that took twice the blocking MPI_Allreduce's time at 64 KiB to 64 MiB,
// while its ring algorithm matched it at every size from 4 KiB (docs/DISTRIBUTED.md).
// So the ring, unless the user chose an algorithm; an MCA parameter is read when MPI
// starts, hence before MPI_Init_thread (a job that started MPI itself keeps its choice).
// Other MPI libraries ignore the variable.
void PreferRingAllReduce() {
  SetEnvironmentVariable("OMPI_MCA_coll_libnbc_iallreduce_algorithm", "1", /*overwrite=*/false);
}

bool MpiBuilt() { return true; }

absl::StatusOr<std::unique_ptr<Communicator>> CreateMpiCommunicator(double timeout_seconds,
                                                                    int64_t allreduce_piece_bytes) {
  if (abandoned_requests.load()) return AbandonedError();
  if (absl::Status s = NotFinalized(); !s.ok()) return s;
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (!initialized) {
    PreferRingAllReduce();
    int provided = 0;
    if (int rc = MPI_Init_thread(nullptr, nullptr, MPI_THREAD_MULTIPLE, &provided);
        rc != MPI_SUCCESS) {
      return absl::UnavailableError(absl::StrCat("MPI_Init_thread failed: ", MpiError(rc)));
    }
    if (provided < MPI_THREAD_SERIALIZED) {
      return absl::FailedPreconditionError(
          "this MPI library offers no thread support beyond MPI_THREAD_FUNNELED; Braze calls "
          "MPI from its communication thread");
    }
  }
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  MPI_Comm comm;
  if (int rc = MPI_Comm_dup(MPI_COMM_WORLD, &comm); rc != MPI_SUCCESS) {
    return absl::UnavailableError(absl::StrCat("MPI_Comm_dup failed: ", MpiError(rc)));
  }
  MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
  int rank = 0, size = 1;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &size);
  return std::unique_ptr<Communicator>(
      std::make_unique<MpiCommunicator>(comm, rank, size, timeout_seconds, allreduce_piece_bytes));
}

absl::Status FinalizeMpi(bool abort) {
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (!initialized || finalized) return absl::OkStatus();
  if (abort || abandoned_requests.load()) {
    MPI_Abort(MPI_COMM_WORLD, 1);
    return absl::AbortedError("MPI_Abort returned");
  }
  if (int rc = MPI_Finalize(); rc != MPI_SUCCESS) {
    return absl::UnavailableError(absl::StrCat("MPI_Finalize failed: ", MpiError(rc)));
  }
  return absl::OkStatus();
}

#else  // !BRAZE_HAVE_MPI

bool MpiBuilt() { return false; }

absl::StatusOr<std::unique_ptr<Communicator>> CreateMpiCommunicator(double, int64_t) {
  return absl::UnimplementedError(
      "Braze was built without MPI (tools/setup.sh installs Open MPI; then re-run CMake)");
}

absl::Status FinalizeMpi(bool) { return absl::OkStatus(); }

#endif  // BRAZE_HAVE_MPI

absl::Status FinalizedError() {
  return absl::FailedPreconditionError(
      "FinalizeDistributed was called: this process has left the MPI job, which cannot be "
      "joined again (MPI_Finalize is final); no collective can run");
}

}  // namespace comm
}  // namespace braze
