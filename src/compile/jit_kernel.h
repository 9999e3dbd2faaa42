// The kernel of a pipeline JIT-compiled in this process (Pipeline::compile_jit by the
// scheduler chain, compile.cc): launched through the launch contract (launch.h), it
// binds its arguments to the lowered cluster's ImageParams and realizes the pipeline
// into the output buffers. A Halide run-time error comes back as a Status: the
// pipeline's JIT error handler (device/backend.h) records the message and throws
// instead of calling Halide's default handler, which would abort the process
// (docs/HALIDE14.md rule 4). It can also lower and compile itself again on request, for
// dumps: its loop nest, and a device kernel's generated code.
//
// Internal header of src/compile: includes Halide.h.
#ifndef BRAZE_COMPILE_JIT_KERNEL_H_
#define BRAZE_COMPILE_JIT_KERNEL_H_

#include <string>
#include <vector>

#include "Halide.h"
#include "compile/launch.h"
#include "lower/lowering.h"

namespace braze {
namespace compile {

// The non-elided inputs: the arguments of the compiled function, in its order (before
// the outputs).
std::vector<Halide::Argument> ArgumentsOf(const lower::LoweredCluster& lowered);

// The launch layout of a lowered cluster, with the scheduler that scheduled it, those
// refused first and the schedule's text.
KernelLayout LayoutOf(const lower::LoweredCluster& lowered, Scheduler used,
                      std::vector<std::string> failures, std::string schedule);

class JitKernel : public PipelineKernel {
 public:
  // `pipeline` is `lowered`'s, scheduled and JIT-compiled for `target` (not compiled
  // when the cluster has nothing to compute).
  JitKernel(std::string name, KernelLayout layout, lower::LoweredCluster lowered,
            Halide::Pipeline pipeline, Halide::Target target, int num_threads, bool on_device);

  std::string lowered_stmt() const override;
  DeviceSource device_source() const override;

 protected:
  absl::Status Call(std::vector<KernelBuffer>& args, size_t num_inputs) override;
  void UseRuntimeThreads(int n) override;

 private:
  // The pipeline's GPU launches with their sizes (schedule::DescribeGpuLaunches), for a
  // failed launch's Status; lowers the pipeline again (only on that error path).
  std::string DescribeLaunches() const;

  lower::LoweredCluster lowered_;
  Halide::Pipeline pipeline_;
  const Halide::Target target_;
};

}  // namespace compile
}  // namespace braze

#endif  // BRAZE_COMPILE_JIT_KERNEL_H_
