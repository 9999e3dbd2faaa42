// The one launch contract of compiled kernels, whatever produced them: the JIT
// (compile/jit_kernel.h), a shared library compiled ahead of time and kept by the disk
// cache (compile/aot_kernel.h), and any later kind (a library call). PipelineKernel's
// Launch does, once for all of them, what CompiledKernel::Launch promises:
//   1. checks the arguments against the kernel's layout (compile/kernel_layout.h): their
//      counts, host or device memory as the kernel was compiled for, elided inputs
//      empty, every output's dtype and shape (Halide checks the inputs' own);
//   2. wraps them as Halide buffers without copying (KernelBuffer);
//   3. sets the thread count: the pool of the Halide runtime the code binds to (CPU
//      kernels) and Braze's own (device/thread_pool.h) for the launch;
// and then hands the buffers to the kernel's Call, which only runs its code on them.
//
// Internal header of src/compile: includes Halide.h (other layers see compile.h only).
#ifndef BRAZE_COMPILE_LAUNCH_H_
#define BRAZE_COMPILE_LAUNCH_H_

#include <atomic>
#include <mutex>
#include <string>
#include <vector>

#include "Halide.h"
#include "absl/functional/function_ref.h"
#include "compile/compile.h"
#include "compile/kernel_layout.h"

namespace braze {
namespace compile {

// The thread count of one Halide runtime's pool (the JIT's, or the disk cache's
// runtime). Such a pool is process-wide: the count is set only when a launch asks for
// another than the last one did (a call costs microseconds). Setting it before the
// pool's first parallel loop is reliable; raising it later takes effect at once,
// lowering it may lag (docs/HALIDE14.md §3).
class RuntimeThreadCount {
 public:
  using SetNumThreads = int (*)(int);
  // Sets the pool to `n` threads (0: Halide's default, HL_NUM_THREADS or all cores)
  // unless the last call did. `find` gives the runtime's halide_set_num_threads, or null
  // while that runtime is not loaded (then nothing is set); it is asked until it gives one.
  void Use(int n, absl::FunctionRef<SetNumThreads()> find);

 private:
  std::atomic<int> current_{-1};
  std::mutex mu_;
  SetNumThreads set_ = nullptr;  // guarded by mu_
};

// One argument of a compiled function, wrapped without a copy: a host tensor's memory
// (dims reversed, as Halide's dim 0 is the innermost; rank 0 as one element of a 1-D
// buffer, as the pipelines see it), or a device tensor's own Halide buffer.
class KernelBuffer {
 public:
  explicit KernelBuffer(HostTensor& t);
  explicit KernelBuffer(DeviceTensor& t);
  // What compiled code takes (an ahead-of-time kernel's argv).
  halide_buffer_t* raw() { return device_.defined() ? device_.raw_buffer() : host_.raw_buffer(); }
  // What Halide's JIT takes (ImageParam::set, a Realization): a device tensor's buffer
  // is the tensor's own, shared, so that the dirty flags the pipeline sets are the
  // tensor's.
  Halide::Buffer<> jit_buffer() const {
    return device_.defined() ? device_ : Halide::Buffer<>(Halide::Runtime::Buffer<>(host_));
  }

 private:
  Halide::Runtime::Buffer<> host_;  // a host tensor's
  Halide::Buffer<> device_;         // a device tensor's; undefined for a host tensor
};

// A kernel that runs one compiled pipeline function through the launch contract above.
class PipelineKernel : public CompiledKernel {
 public:
  absl::Status Launch(absl::Span<const KernelArg> inputs,
                      absl::Span<const KernelArg> outputs) final;
  bool on_device() const final { return on_device_; }
  const std::vector<TensorType>& output_types() const final { return layout_.output_types; }
  Scheduler scheduler_used() const final { return layout_.scheduler; }
  const std::vector<std::string>& scheduler_failures() const final { return layout_.failures; }
  double compile_ms() const final { return compile_ms_; }
  std::string schedule_text() const override { return layout_.schedule; }
  void set_compile_ms(double ms) { compile_ms_ = ms; }

 protected:
  // `name` starts every error message; `num_threads` as CompileOptions::num_threads.
  PipelineKernel(std::string name, KernelLayout layout, bool on_device, int num_threads);

  const std::string& name() const { return name_; }
  const KernelLayout& layout() const { return layout_; }

  // Runs the code on `args`, the compiled function's arguments in its order: the
  // non-elided inputs in spec order, then the pipeline's outputs in pipeline order
  // (`num_inputs` of them are inputs). Called with the arguments checked, at least one
  // output, and the thread counts set. A failure is InvalidArgument
  // "<name>: Halide run-time error: <Halide's message>".
  virtual absl::Status Call(std::vector<KernelBuffer>& args, size_t num_inputs) = 0;
  // Before each Call of a CPU kernel: sets the pool of the Halide runtime the code binds
  // to to `n` threads, by RuntimeThreadCount::Use with where that runtime's
  // halide_set_num_threads is.
  virtual void UseRuntimeThreads(int n) = 0;

 private:
  absl::Status CheckArgs(absl::Span<const KernelArg> inputs,
                         absl::Span<const KernelArg> outputs) const;

  const std::string name_;
  const KernelLayout layout_;
  const bool on_device_;
  const int num_threads_;
  // The spec outputs the pipeline computes, in pipeline order.
  std::vector<size_t> pipeline_outputs_;
  double compile_ms_ = 0;
};

}  // namespace compile
}  // namespace braze

#endif  // BRAZE_COMPILE_LAUNCH_H_
