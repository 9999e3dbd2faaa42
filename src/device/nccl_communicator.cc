// NcclCommunicator: NCCL collectives on CUDA device memory (communicator.h). NCCL is
// dlopen'ed at run time, as cuBLASLt is (cublas_gemm.cc): a build needs only <nccl.h>,
// and a machine without libnccl.so.2, or without a GPU, gets a FailedPrecondition saying
// which. The unique id travels from rank 0 over the bootstrap communicator (MPI); each
// call is enqueued on the legacy default stream and polled (cuStreamQuery and
// ncclCommGetAsyncError) against the bootstrap's deadline, and a call that times out
// aborts the NCCL communicator (ncclCommAbort) instead of blocking forever.
#include <dlfcn.h>

#include <chrono>
#include <cstring>
#include <mutex>
#include <thread>

#include "absl/strings/str_cat.h"
#include "braze/device.h"
#include "braze/status.h"
#include "device/communicator.h"

#if __has_include(<nccl.h>)
#include <nccl.h>
#define BRAZE_HAVE_NCCL_H 1
#else
#define BRAZE_HAVE_NCCL_H 0
#endif

namespace braze {
namespace comm {

#if BRAZE_HAVE_NCCL_H
namespace {

// The NCCL entry points Braze calls, typed from <nccl.h>.
struct Nccl {
  absl::Status status;
  int version = 0;
  decltype(&ncclGetVersion) get_version = nullptr;
  decltype(&ncclGetUniqueId) get_unique_id = nullptr;
  decltype(&ncclCommInitRank) init_rank = nullptr;
  decltype(&ncclCommDestroy) destroy = nullptr;
  decltype(&ncclCommAbort) abort = nullptr;
  decltype(&ncclCommGetAsyncError) async_error = nullptr;
  decltype(&ncclGetErrorString) error_string = nullptr;
  decltype(&ncclAllReduce) all_reduce = nullptr;
  decltype(&ncclBroadcast) broadcast = nullptr;
  decltype(&ncclAllGather) all_gather = nullptr;
};

template <typename F>
bool Resolve(void* lib, const char* symbol, F* fn) {
  *fn = reinterpret_cast<F>(dlsym(lib, symbol));
  return *fn != nullptr;
}

absl::Status Load(Nccl& n) {
  auto unavailable = [](const std::string& why) {
    return absl::FailedPreconditionError(absl::StrCat("NCCL is not available: ", why));
  };
  void* lib = nullptr;
  std::string errors;
  for (const char* path : {"libnccl.so.2", "/usr/local/cuda/lib64/libnccl.so.2"}) {
    lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (lib != nullptr) break;
    const char* err = dlerror();
    absl::StrAppend(&errors, errors.empty() ? "" : "; ", err != nullptr ? err : path);
  }
  if (lib == nullptr) return unavailable(absl::StrCat("cannot load libnccl.so.2 (", errors, ")"));
  struct Entry {
    const char* symbol;
    bool ok;
  };
  const Entry entries[] = {
      {"ncclGetVersion", Resolve(lib, "ncclGetVersion", &n.get_version)},
      {"ncclGetUniqueId", Resolve(lib, "ncclGetUniqueId", &n.get_unique_id)},
      {"ncclCommInitRank", Resolve(lib, "ncclCommInitRank", &n.init_rank)},
      {"ncclCommDestroy", Resolve(lib, "ncclCommDestroy", &n.destroy)},
      {"ncclCommAbort", Resolve(lib, "ncclCommAbort", &n.abort)},
      {"ncclCommGetAsyncError", Resolve(lib, "ncclCommGetAsyncError", &n.async_error)},
      {"ncclGetErrorString", Resolve(lib, "ncclGetErrorString", &n.error_string)},
      {"ncclAllReduce", Resolve(lib, "ncclAllReduce", &n.all_reduce)},
      {"ncclBroadcast", Resolve(lib, "ncclBroadcast", &n.broadcast)},
      {"ncclAllGather", Resolve(lib, "ncclAllGather", &n.all_gather)},
  };
  for (const Entry& e : entries) {
    if (!e.ok) return unavailable(absl::StrCat("the loaded libnccl.so.2 lacks ", e.symbol));
  }
  if (ncclResult_t r = n.get_version(&n.version); r != ncclSuccess) {
    return unavailable(absl::StrCat("ncclGetVersion failed: ", n.error_string(r)));
  }
  return absl::OkStatus();
}

// The process' NCCL, loaded on first use and never unloaded.
const Nccl& Lib() {
  static Nccl* n = new Nccl();
  static std::once_flag once;
  std::call_once(once, [] { n->status = Load(*n); });
  return *n;
}

// The driver calls NCCL needs around it: the device's primary context made current (the
// one Braze's CUDA backend computes in) and a poll of the default stream.
struct Driver {
  using Retain = int (*)(void** ctx, int device);
  using SetCurrent = int (*)(void* ctx);
  using Query = int (*)(void* stream);
  Retain retain = nullptr;
  SetCurrent set_current = nullptr;
  Query query = nullptr;
};

absl::StatusOr<Driver> LoadDriver() {
  void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_GLOBAL);
  Driver d;
  if (lib == nullptr || !Resolve(lib, "cuDevicePrimaryCtxRetain", &d.retain) ||
      !Resolve(lib, "cuCtxSetCurrent", &d.set_current) ||
      !Resolve(lib, "cuStreamQuery", &d.query)) {
    return absl::FailedPreconditionError("the CUDA driver lacks the calls NCCL needs");
  }
  return d;
}

ncclDataType_t NcclType(DType dtype) {
  switch (dtype) {
    case DType::kF32:
      return ncclFloat32;
    case DType::kF64:
      return ncclFloat64;
    case DType::kI32:
      return ncclInt32;
    case DType::kBool:
      return ncclUint8;
    case DType::kBF16:
      return ncclBfloat16;
    case DType::kF16:
      return ncclFloat16;
  }
  return ncclUint8;
}

constexpr int kCudaErrorNotReady = 600;  // CUDA_ERROR_NOT_READY

class NcclCommunicator : public Communicator {
 public:
  NcclCommunicator(ncclComm_t comm, Driver driver, void* ctx, int rank, int size, double timeout)
      : comm_(comm), driver_(driver), ctx_(ctx), rank_(rank), size_(size), timeout_s_(timeout) {}
  ~NcclCommunicator() override {
    if (failure_.ok()) Lib().destroy(comm_);
  }
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  const char* engine() const override { return "nccl"; }
  bool failed() const override {
    std::lock_guard<std::mutex> lock(mu_);
    return !failure_.ok();
  }
  absl::Status AllReduceSum(const void* in, void* out, int64_t count, DType dtype) override {
    return Call("all-reduce", count * SizeOf(dtype), [&] {
      return Lib().all_reduce(in, out, count, NcclType(dtype), ncclSum, comm_, nullptr);
    });
  }
  absl::Status Broadcast(void* data, int64_t count, DType dtype, int root) override {
    return Call("broadcast", count * SizeOf(dtype), [&] {
      return Lib().broadcast(data, data, count, NcclType(dtype), root, comm_, nullptr);
    });
  }
  absl::Status AllGather(const void* in, int64_t count, DType dtype, void* out) override {
    return Call("all-gather", count * SizeOf(dtype),
                [&] { return Lib().all_gather(in, out, count, NcclType(dtype), comm_, nullptr); });
  }
  absl::Status Barrier() override {
    return absl::UnimplementedError("an NCCL barrier: use the bootstrap (MPI) communicator's");
  }

 private:
  template <typename Start>
  absl::Status Call(const char* what, int64_t bytes, Start start) {
    std::lock_guard<std::mutex> serial(call_mu_);
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (!failure_.ok()) return failure_;
    }
    auto fail = [&](const std::string& why, bool timeout) {
      std::lock_guard<std::mutex> lock(mu_);
      const std::string msg = absl::StrCat("NCCL ", what, " of ", bytes, " bytes on rank ", rank_,
                                           " of ", size_, ": ", why);
      failure_ = timeout ? absl::DeadlineExceededError(msg) : absl::UnavailableError(msg);
      Lib().abort(comm_);
      return failure_;
    };
    driver_.set_current(ctx_);
    if (ncclResult_t r = start(); r != ncclSuccess) return fail(Lib().error_string(r), false);
    const auto deadline =
        std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s_);
    for (;;) {
      const int q = driver_.query(nullptr);
      if (q == 0) return absl::OkStatus();
      if (q != kCudaErrorNotReady) return fail(absl::StrCat("cuStreamQuery error ", q), false);
      ncclResult_t async = ncclSuccess;
      Lib().async_error(comm_, &async);
      if (async != ncclSuccess) return fail(Lib().error_string(async), false);
      if (std::chrono::steady_clock::now() > deadline) {
        return fail("did not complete within the timeout: a rank died or hangs", true);
      }
      // Back to back while a thread waits for the result (comm::Awaited), as in MPI's
      // poll loop; otherwise leave the host's cores to the work beside the call.
      if (!Awaited()) std::this_thread::sleep_for(std::chrono::microseconds(20));
    }
  }

  ncclComm_t comm_;
  Driver driver_;
  void* ctx_;
  const int rank_, size_;
  const double timeout_s_;
  std::mutex call_mu_;
  mutable std::mutex mu_;
  absl::Status failure_;
};

}  // namespace

absl::StatusOr<int> LoadNccl() {
  const Nccl& n = Lib();
  if (!n.status.ok()) return n.status;
  return n.version;
}

absl::Status CheckNccl(const Device& device) {
  const Nccl& n = Lib();
  if (!n.status.ok()) return n.status;
  if (device.kind != Device::Kind::kCuda) {
    return absl::InvalidArgumentError(
        absl::StrCat("NCCL runs on CUDA devices, not ", device.ToString()));
  }
  if (absl::Status cuda = CheckCudaAvailable(); !cuda.ok()) {
    return absl::FailedPreconditionError(
        absl::StrCat("NCCL needs a CUDA device: ", cuda.message()));
  }
  if (device.index < 0 || device.index >= CudaDeviceCount()) {
    return absl::FailedPreconditionError(
        absl::StrCat(device.ToString(), " does not exist (", CudaDeviceCount(), " CUDA devices)"));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<Communicator>> CreateNcclCommunicator(Communicator& bootstrap,
                                                                     const Device& device,
                                                                     double timeout_seconds) {
  absl::Status usable = CheckNccl(device);
  absl::StatusOr<Driver> driver = usable.ok() ? LoadDriver() : absl::StatusOr<Driver>(usable);
  void* ctx = nullptr;
  if (driver.ok() && (driver->retain(&ctx, device.index) != 0 || driver->set_current(ctx) != 0)) {
    driver = absl::FailedPreconditionError(
        absl::StrCat("cannot make ", device.ToString(), "'s primary context current"));
  }
  // Every rank says whether it can; all go on, or all stop here.
  const int32_t can = driver.ok() ? 1 : 0;
  int32_t ranks_that_can = 0;
  BRAZE_RETURN_IF_ERROR(bootstrap.AllReduceSum(&can, &ranks_that_can, 1, DType::kI32));
  if (!driver.ok()) return driver.status();
  if (ranks_that_can != bootstrap.size()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "NCCL cannot run on ", device.ToString(), " on ", bootstrap.size() - ranks_that_can, " of ",
        bootstrap.size(), " ranks (their errors say why)"));
  }
  const Nccl& n = Lib();
  ncclUniqueId id;
  std::memset(&id, 0, sizeof(id));
  absl::Status made_id;
  if (bootstrap.rank() == 0) {
    if (ncclResult_t r = n.get_unique_id(&id); r != ncclSuccess) {
      made_id = absl::UnavailableError(absl::StrCat("ncclGetUniqueId: ", n.error_string(r)));
    }
  }
  // Rank 0 broadcasts the id even when making it failed (zeros): the others must not wait
  // for a broadcast that never comes. A zero id fails ncclCommInitRank on every rank.
  BRAZE_RETURN_IF_ERROR(bootstrap.Broadcast(&id, sizeof(id), DType::kBool, 0));
  BRAZE_RETURN_IF_ERROR(made_id);
  ncclComm_t comm = nullptr;
  if (ncclResult_t r = n.init_rank(&comm, bootstrap.size(), id, bootstrap.rank());
      r != ncclSuccess) {
    return absl::UnavailableError(absl::StrCat("ncclCommInitRank: ", n.error_string(r)));
  }
  return std::unique_ptr<Communicator>(std::make_unique<NcclCommunicator>(
      comm, *driver, ctx, bootstrap.rank(), bootstrap.size(), timeout_seconds));
}

#else  // !BRAZE_HAVE_NCCL_H

absl::StatusOr<int> LoadNccl() {
  return absl::FailedPreconditionError(
      "NCCL is not available: Braze was built without <nccl.h> (the CUDA toolkit's)");
}

absl::Status CheckNccl(const Device&) { return LoadNccl().status(); }

absl::StatusOr<std::unique_ptr<Communicator>> CreateNcclCommunicator(Communicator& bootstrap,
                                                                     const Device& device, double) {
  // The ranks agree as with NCCL: none can here.
  const int32_t can = 0;
  int32_t ranks_that_can = 0;
  BRAZE_RETURN_IF_ERROR(bootstrap.AllReduceSum(&can, &ranks_that_can, 1, DType::kI32));
  return CheckNccl(device);
}

#endif  // BRAZE_HAVE_NCCL_H

}  // namespace comm
}  // namespace braze
