// Session: runs a Graph. Variables live in the session and keep their values across
// Run calls; several sessions on one graph are independent.
#ifndef BRAZE_SESSION_H_
#define BRAZE_SESSION_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "braze/graph.h"
#include "braze/host_tensor.h"
#include "braze/scheduler.h"

namespace braze {

// Session-level auto-clustering, as TF's global_jit_level. kOff: only ops under a
// compiling JitScope (and unscoped ops joining them) are clustered. kOn1 / kOn2: every
// compilable op may be auto-clustered; the two levels behave identically (as in TF, whose
// docs say "at present, no distinction").
enum class JitLevel { kOff, kOn1, kOn2 };

// When a compiled step (a cluster, or an op outside clusters) is compiled for a new
// input signature. kEager: before its first run (blocking it). kLazy: its first
// lazy_compile_threshold - 1 runs with that signature run op by op on the reference
// kernels, the next one compiles (as XLA's lazy compilation of auto-clusters). kAsync:
// the compile starts on another thread and runs go op by op on the reference kernels
// until it is ready, then switch to it: no Run waits for a compile. Strict mode
// (jit_compile=true) and Session::Compile always compile eagerly.
enum class CompilePolicy { kEager, kLazy, kAsync };

// A number out of the range its comment gives (num_threads < 0, a cluster size < 1, a
// verify tolerance negative or NaN, ...) or an enum value outside its enum is every
// Run's InvalidArgument naming the field, as a bad device name is.
struct SessionOptions {
  JitLevel global_jit_level = JitLevel::kOff;
  // Where ops with no DeviceScope placement run: "cpu", "cuda[:N]", "jit:cpu", ... (see
  // braze/device.h), or "auto": "cuda:0" when a CUDA driver and device are present
  // (CheckCudaAvailable), else "opencl:0" when OpenCL's first device is a GPU, else
  // "cpu". Parsed once, when the Session is constructed; a bad name is the error of
  // every Run. Values computed on a device stay there between
  // kernels; copies happen at feeds, fetches, HostCall/reference ops and edges between
  // devices, and are counted in SessionStats.
  std::string device = "auto";
  // MatMul/BatchMatMul on CUDA: kCublas (default) runs each as a cuBLASLt GEMM, a
  // cluster boundary, with a following bias Add folded into its epilogue; the
  // elementwise ops around it still fuse into Halide clusters. kHalide clusters them
  // like any op and uses Braze's tiled GPU matmul schedule. A GEMM cuBLAS refuses (or
  // no cuBLAS library) runs as a Halide kernel, with one warning.
  enum class CudaMatMul { kCublas, kHalide };
  CudaMatMul cuda_matmul = CudaMatMul::kCublas;
  // Also fold a Relu after the bias into the cuBLASLt epilogue (RELU_BIAS). Off by
  // default because cuBLASLt does not document what its ReLU does with NaN, while
  // braze::Relu (reference, Halide) keeps it (an H200 with cuBLASLt 13 kept it too).
  bool cuda_relu_epilogue = false;
  // MatMul/BatchMatMul on the CPU: kLibrary (default) computes each f32 or bf16 one of
  // at least 2^18 multiply-adds with oneDNN's matmul, called from inside its cluster's Halide
  // kernel (an extern stage, as XLA's CPU backend calls Eigen), so the ops around it
  // stay fused in the same kernel; smaller ones, f64 ones, and every one when oneDNN is
  // not installed (logged once), run as Braze's tiled Halide loops. kHalide: always the
  // Halide loops. A stored schedule may also choose per cluster (docs/CPU_GEMM.md).
  enum class CpuMatMul { kLibrary, kHalide };
  CpuMatMul cpu_matmul = CpuMatMul::kLibrary;
  int min_cluster_size = 4;  // smallest auto-cluster (TF's default); scopes: any size
  // The most ops one cluster holds, explicit scopes included (a larger scope is split
  // into several clusters, all compiled; XLA bounds the size of its fusions too). A
  // cluster is one Halide pipeline, and Halide 14 lowers a pipeline in time that grows
  // with the square of the values it stores at root (outputs, shared values) times the
  // pipeline's size (its fork_async_producers pass; docs/FUZZING_FAMILIES.md, "Large
  // clusters"): a 150-op elementwise chain and its gradient, 1,147 ops in one cluster,
  // did not compile in 10 minutes on 2 cores; in clusters of at most 128 ops it compiles
  // in about a minute (at most 256: nearly three, one cluster of them 109 s). Constants
  // count. The clusters of the benchmarked models hold at most 105 ops, so this bound
  // changes none of them; an AdamW step with a clipped norm and a learning-rate schedule
  // over two variables is 132 (a cluster of 128 and one of 4). Remat's copies of cheap
  // producers (`rematerialize`) may take a cluster past it by at most 16 ops (one copied
  // cone).
  int max_cluster_size = 128;
  // A cluster is one Halide pipeline with one schedule. As XLA's fusion pass never puts
  // two dots in one kernel, a cluster holds at most this many MatMul/BatchMatMul ops
  // and convolutions (Conv2D and its gradient ops), each with the elementwise ops,
  // pools and reductions around it fused in. One whole MLP
  // training step as a single pipeline ran slower than op by op (README, Examples).
  int max_matmuls_per_cluster = 1;
  // A cluster that reads a value another cluster computed by a cheap elementwise chain
  // recomputes the chain from its inputs when those take no more bytes than the value
  // (XLA's duplication of elementwise producers into each consumer fusion): a training
  // step's backward pass then recomputes GELU's or a softmax's intermediates instead of
  // the forward pass writing each one (docs/CHAR_LM.md, "Where the step's time goes").
  bool rematerialize = true;
  // Who schedules compiled kernels (braze/scheduler.h). A CPU scheduler schedules CPU
  // kernels (GPU kernels start at the GPU heuristic's fused plan); a GPU heuristic plan
  // (kGpuFused, kGpuSeparate, kGpuSerial) starts the chain of GPU kernels, and a plan
  // with compiled CPU steps under it is InvalidArgument.
  Scheduler scheduler = Scheduler::kAuto;
  // Threads of a CPU kernel's parallel loops (Braze's pool, docs/THREAD_POOL.md); 0 = all
  // the CPUs the process may use (or HL_NUM_THREADS), which is also the most.
  int num_threads = 0;
  // jit_compile=true: a cluster that fails to compile, or an op marked for compilation
  // that has no lowering, is InvalidArgument naming it, instead of an op-by-op fallback.
  bool strict = false;
  // Recompile guard (XLA's megamorphic rule): a compiled cluster or op that has met more
  // than this many input signatures, with fewer than 50 runs per signature, is not
  // compiled for new signatures any more: they run op by op on compiled single-op
  // kernels (symbolic where they can be; an op whose own signatures churn trips its own
  // guard and runs on its reference kernel), after one warning naming the step and the
  // input dims that keep changing. Signatures
  // it compiled before still run compiled. Any int: 0 or less is no guard. Strict mode
  // (jit_compile=true) always compiles.
  int max_signatures_per_cluster = 10;
  CompilePolicy compile_policy = CompilePolicy::kEager;
  // Symbolic shapes (docs/SYMBOLIC_SHAPES.md): a dim the program left -1 (a
  // placeholder's, a Function's input_signature or reduce_retracing) is compiled as a
  // run-time extent, so one CPU kernel serves every size of it from 16 up (a training
  // loop's smaller last batch compiles nothing); smaller sizes get kernels of their own.
  // Scheduled by the safe default (scheduler kAuto or kSafeDefault; another scheduler,
  // or a GPU, compiles per size). false: every signature compiles its own kernel.
  bool symbolic_shapes = true;
  // The persistent compile cache (docs/DISK_CACHE.md): CPU kernels are compiled ahead of
  // time into BRAZE_CACHE_DIR (default $XDG_CACHE_HOME/braze or ~/.cache/braze;
  // BRAZE_CACHE_DIR=off turns it off for the process) and a later process loads them
  // instead of compiling. false: this session neither reads nor writes it.
  bool disk_cache = true;
  // Stored, tuned schedules (docs/SCHEDULES.md, written by tools/braze-tune): a CPU
  // cluster under Scheduler::kAuto looks its signature up in these directories first,
  // then in BRAZE_FLAGS --schedule_dirs, then in the repository's and the installed
  // schedules/; an entry found is applied before Braze's own heuristics. An invalid or
  // stale entry is one warning naming its file, and the default schedule.
  // stored_schedules = false: none is used (BRAZE_FLAGS --stored_schedules=false too).
  // An entry that is not a directory (a typo) is every Run's InvalidArgument naming it.
  std::vector<std::string> schedule_dirs;
  bool stored_schedules = true;
  // kLazy: compile at the K-th run of a signature. Any int: 1 or less compiles at the
  // first run.
  int lazy_compile_threshold = 2;
  // Ops outside clusters run as compiled single-op kernels (the unfused path). With
  // reference_only, nothing is compiled: every op runs on the reference kernels.
  bool reference_only = false;
  // Testing hook: compiles of steps (clusters or single ops) whose name it accepts fail
  // as a real compile error would, to exercise the fallback and strict paths.
  std::function<bool(const std::string& step_name)> inject_compile_failure;
  // Verify mode (also BRAZE_FLAGS=--verify), for checking a model: the first run of
  // every compiled kernel for an input signature also runs the kernel's ops on the
  // reference kernels, and any output element beyond
  //   verify_atol * max(1, max |reference|) + verify_rtol * |reference|
  // (NaN must match NaN; integers and bools exactly) fails the Run with an Internal
  // Status naming the cluster, its ops, the scheduler, the output and the worst element,
  // after writing the kernel's schedule and lowered statement to a dump directory
  // (--dump_to, else a new /tmp/braze_verify_* directory) named in the Status. A
  // mismatch is a compiler bug: verify mode reports it rather than falling back. No
  // variable changes in a failed Run. Costs one reference evaluation per new signature.
  // The tolerances are >= 0, +inf included (that output always passes); NaN or a
  // negative one is an error.
  bool verify = false;
  double verify_rtol = 2e-3;
  double verify_atol = 2e-4;
  // Testing hook for verify mode: after a compiled step whose name it accepts runs, the
  // first element of its first output is changed, as a miscompile would.
  std::function<bool(const std::string& step_name)> inject_wrong_result;
};

// Counters since the session was created (or ResetStats).
struct SessionStats {
  int64_t runs = 0;
  int64_t compiles = 0;            // kernels this session compiled (cache misses)
  int64_t cache_hits = 0;          // kernels found compiled (by any session)
  int64_t disk_cache_hits = 0;     // kernels loaded from the disk cache (not compiled)
  int64_t cluster_launches = 0;    // fused cluster kernels run
  int64_t single_op_launches = 0;  // compiled single-op kernels run (ops outside clusters)
  int64_t reference_launches = 0;  // ops run on reference kernels (HostCall, state, fallback)
  int64_t gemm_launches = 0;       // cuBLAS GEMMs run (CUDA MatMuls, with folded epilogues)
  int64_t collectives = 0;         // AllReduce/Broadcast/AllGather steps run across processes
  // Of those, AllReduce/Broadcast steps that worked in place on their input's buffer (its
  // last use, in memory the session owns): no output buffer, no copy.
  int64_t collectives_in_place = 0;
  // Of those, steps run on NCCL on a CUDA device's memory (the others ran on MPI on the
  // host), and steps the executor ran on its own thread, nothing being there to overlap
  // them (the others ran on the communication thread beside later steps).
  int64_t collectives_on_device = 0;
  int64_t collectives_run_here = 0;
  int64_t verified_kernels = 0;  // compiled kernels checked by verify mode
  double compile_ms = 0;         // wall time spent compiling
  // Copies between memory spaces (the host, jit:cpu's memory, a CUDA device): onto a
  // device (feeds, host results, variables' first use) and off it (fetches, HostCall
  // and reference ops, host consumers). Zero within a device.
  int64_t host_to_device_copies = 0;
  int64_t device_to_host_copies = 0;
  int64_t copied_bytes = 0;
  // Memory of a Run's intermediates, the largest over the Runs (runtime/live_bytes.h):
  // the outputs of its steps (clusters, single ops, library calls: a training step's
  // activations, gradients and updates), each live from the step writing it to the last
  // step reading it. peak_live_bytes: the most live at once over the step order;
  // step_output_bytes: all of them (the buffers a session keeps between Runs).
  // peak_activation_bytes: the peak of those computed from the Run's feeds that are not
  // variable updates (activations and their gradients; not a 16-bit copy of a weight,
  // nor the new values of variables and slots).
  int64_t peak_live_bytes = 0;
  int64_t step_output_bytes = 0;
  int64_t peak_activation_bytes = 0;
  // Control flow (issue 40, docs/CONTROL_FLOW.md): bodies run (a Scan's steps, a While's
  // conds and bodies, a Cond's branch), and the bytes the loops copied on the host
  // between them: each step's rows of the elems, rows stacked into the outputs, the
  // initial carry, and any result a body's plan did not write in place. Carries and
  // captures are passed by reference, never copied per iteration.
  int64_t body_runs = 0;
  int64_t body_copied_bytes = 0;
};

using Feeds = std::vector<std::pair<Tensor, HostTensor>>;

class Session {
 public:
  explicit Session(const Graph& graph, SessionOptions options = {});
  ~Session();
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  // Feeds any tensor (usually placeholders), computes `fetches` and runs `targets` for
  // their side effects (Assign ops). A Variable may be fed (its reads see the fed value)
  // but not in a Run that also updates it: InvalidArgument naming both. Returns one HostTensor per
  // fetch. A Run from inside one of this session's own Runs (a HostCall's function) is
  // FailedPrecondition. A fed node is not run: a node of several outputs (a HostCall, a
  // Cond, a While, a Scan) is fed whole or not at all, and a fed node is no target
  // (InvalidArgument naming it in both cases).
  absl::StatusOr<std::vector<HostTensor>> Run(const Feeds& feeds,
                                              const std::vector<Tensor>& fetches,
                                              const std::vector<Tensor>& targets = {});

  // As Run, but writes the fetches into `outputs` (resized to fetches.size()). A tensor
  // there that already has the fetch's type is written in place, by the compiled kernel
  // itself when one produces it: a training or benchmark loop reusing `outputs` copies
  // nothing. A Run that fails changes no variable, but may have written some of
  // `outputs` already: their contents are then unspecified.
  absl::Status RunInto(const Feeds& feeds, const std::vector<Tensor>& fetches,
                       std::vector<HostTensor>* outputs, const std::vector<Tensor>& targets = {});

  // Plans and compiles what Run(feeds, fetches, targets) would run, without running it.
  absl::Status Compile(const Feeds& feeds, const std::vector<Tensor>& fetches,
                       const std::vector<Tensor>& targets = {});

  // The current value of a variable in this session (for tests, checkpoints).
  absl::StatusOr<HostTensor> VariableValue(const Tensor& variable) const;
  // Sets a variable's value in this session, as an Assign would (checkpoint restore;
  // braze::Function sharing a variable between sessions). InvalidArgument naming the
  // variable on a dtype or shape mismatch.
  absl::Status AssignVariable(const Tensor& variable, const HostTensor& value);

  // The cluster `t`'s node ran in during the last Run/Compile, or nullopt.
  std::optional<std::string> ClusterOf(const Tensor& t) const;
  // The last plan's clustering: clusters, sizes, op histogram, and why ops were left out.
  std::string ClusteringDebugString() const;
  SessionStats stats() const;
  void ResetStats();

  const SessionOptions& options() const { return options_; }
  // The graph this session runs (checkpoints enumerate its variables).
  const Graph& graph() const { return graph_; }

 private:
  absl::Status RunInternal(const Feeds& feeds, const std::vector<Tensor>& fetches,
                           const std::vector<Tensor>& targets, bool compile_only,
                           std::vector<HostTensor>* outputs);
  absl::Status RunUnguarded(const Feeds& feeds, const std::vector<Tensor>& fetches,
                            const std::vector<Tensor>& targets, bool compile_only,
                            std::vector<HostTensor>* outputs);
  struct State;
  const Graph& graph_;
  SessionOptions options_;
  std::unique_ptr<State> state_;
};

}  // namespace braze

#endif  // BRAZE_SESSION_H_
