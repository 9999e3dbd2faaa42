// The OpenCL backend: kernels compiled for the host target plus OpenCL, in device
// memory (DeviceTensor), with Halide's OpenCL runtime loading the OpenCL library
// through Braze's isolated loader (device/opencl_driver.h). On a machine without a GPU
// the device is POCL's, running the same kernels on the CPU: the GPU schedules, device
// buffers and copies are exercised there, but its timings are CPU timings.
#include <mutex>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "braze/device.h"
#include "braze/status.h"
#include "device/backend.h"
#include "device/device_tensor_impl.h"
#include "device/halide_util.h"
#include "device/jit_memory.h"
#include "device/opencl_driver.h"

namespace braze {
namespace device {
namespace {

struct OpenCLState {
  std::mutex mu;
  bool initialized = false;
  absl::Status status;
  const halide_device_interface_t* interface = nullptr;
};

OpenCLState& State() {
  static OpenCLState* state = new OpenCLState();
  return *state;
}

// The JIT target of OpenCL kernels: the sanitized host target plus OpenCL with doubles
// (cl_khr_fp64; POCL has it, and a device without it fails f64 kernels' builds with a
// Status), and with `half` (CLHalf) when opencl:0 has cl_khr_fp16: f16 values are then
// `half` in the kernels, converted by the device. Without it (POCL 3.1 here) f16, and
// bf16 on every device, are stored as their bits (compile/float16_bits.h). The
// extension is part of the target, so of every compile and disk cache key.
Halide::Target OpenCLJitTarget() {
  Halide::Target target = SanitizedJitTarget()
                              .with_feature(Halide::Target::OpenCL)
                              .with_feature(Halide::Target::CLDoubles);
  if (OpenCLDeviceHasExtension("cl_khr_fp16")) target = target.with_feature(Halide::Target::CLHalf);
  return target;
}

// Sets the isolated loader's handlers (device/opencl_driver.h) in `handlers`.
void UseOpenCLHandlers(Halide::JITHandlers* handlers) {
  handlers->custom_load_library = LoadLibraryIsolated;
  handlers->custom_get_library_symbol = GetLibrarySymbol;
}

absl::Status Initialize(OpenCLState& s) {
  BRAZE_RETURN_IF_ERROR(CheckOpenCLAvailable());
  // The defaults too, not only each pipeline's handlers: Halide's OpenCL runtime module
  // loads the library with the default handlers when it is first created.
  InstallDefaultDeviceHandlers(UseOpenCLHandlers);
  return CatchHalideErrors("Halide's OpenCL runtime", absl::StatusCode::kInternal, [&] {
    s.interface = Halide::get_device_interface_for_device_api(Halide::DeviceAPI::OpenCL,
                                                              OpenCLJitTarget(), "braze");
    return s.interface != nullptr
               ? absl::OkStatus()
               : absl::InternalError("no OpenCL device interface in the JIT runtime");
  });
}

// Halide's OpenCL device interface in the JIT runtime, with the isolated loader and
// Braze's error handler installed. Status when OpenCL is unavailable or `ordinal` is
// not 0 (Halide's runtime uses one device per process: the first device of the first
// platform, OpenCLDevices()[0]).
absl::StatusOr<const halide_device_interface_t*> OpenCLInterface(int ordinal) {
  OpenCLState& s = State();
  std::lock_guard<std::mutex> lock(s.mu);
  if (!s.initialized) {
    s.initialized = true;
    s.status = Initialize(s);
  }
  BRAZE_RETURN_IF_ERROR(s.status);
  if (ordinal != 0) {
    return absl::UnimplementedError(
        absl::StrCat("opencl:", ordinal,
                     " is not available: Halide's OpenCL runtime uses one device per "
                     "process, opencl:0 (",
                     OpenCLDevices()[0], ")"));
  }
  return s.interface;
}

class OpenCLBackend : public Backend {
 public:
  Device::Kind kind() const override { return Device::Kind::kOpenCL; }
  const Features& features() const override {
    static const Features features = [] {
      Features f;
      f.device_memory = true;
      f.stored_schedules = true;  // the GPU heuristic's, per device (Architecture)
      return f;
    }();
    return features;
  }
  absl::Status CheckAvailable(int index) const override {
    BRAZE_RETURN_IF_ERROR(CheckOpenCLAvailable());
    if (index != 0) {
      // Halide's OpenCL runtime drives one device per process (OpenCLInterface).
      return absl::UnimplementedError(absl::StrCat("only opencl:0 (", OpenCLDevices()[0],
                                                   ") is supported; this machine has ",
                                                   OpenCLDevices().size(), " OpenCL device(s)"));
    }
    return absl::OkStatus();
  }
  // "<platform>: <device name> (<type>)" of the device Halide's runtime drives: what
  // a tuned GPU schedule holds for (OpenCL has no portable architecture number).
  absl::StatusOr<std::string> Architecture(int ordinal) const override {
    BRAZE_RETURN_IF_ERROR(CheckAvailable(ordinal));
    return OpenCLDevices()[ordinal];
  }
  // POCL's CPU device runs kernels on the host more slowly than the host backend: "auto"
  // picks OpenCL only when its first device is a GPU.
  // The listing alone decides first (no driver is loaded here, nothing compiled, for
  // every Session's "auto"); a GPU listed is then probed in full (CheckOpenCLAvailable).
  bool PreferredForAuto() const override {
    const std::vector<std::string> listed = ListedOpenCLDevices();
    if (listed.empty() || !absl::EndsWith(listed[0], "(GPU)")) return false;
    const std::vector<std::string> devices = OpenCLDevices();
    return !devices.empty() && absl::EndsWith(devices[0], "(GPU)");
  }
  Halide::Target JitTarget() const override { return OpenCLJitTarget(); }
  void InstallHandlers(Halide::JITHandlers* handlers) const override {
    UseJitBufferCache(handlers);  // host-side intermediates of the pipeline
    UseOpenCLHandlers(handlers);
  }
  absl::StatusOr<const halide_device_interface_t*> Interface(int ordinal) const override {
    return OpenCLInterface(ordinal);
  }
};

}  // namespace

absl::Status RunOpenCLProbeKernel() {
  return CatchHalideErrors(
      "a one-kernel Halide pipeline on opencl:0 failed", absl::StatusCode::kFailedPrecondition,
      [&]() -> absl::Status {
        InstallDefaultDeviceHandlers(UseOpenCLHandlers);
        constexpr int kN = 67;  // prime: the last work-group is partial
        Halide::Buffer<float> input(kN + 1);
        for (int i = 0; i <= kN; ++i) input(i) = 0.25f * static_cast<float>(i) - 3.0f;
        input.set_host_dirty();
        Halide::ImageParam in(Halide::Float(32), 1, "probe_in");
        Halide::Func staged("probe_staged"), out("probe_out");
        Halide::Var x("x"), xo("xo"), xi("xi");
        staged(x) = in(x)*2.0f;
        out(x) = staged(x) + staged(x + 1) + 1.0f;
        // Staged in local memory per work-group, with a barrier: as Braze's GPU schedules.
        out.gpu_tile(x, xo, xi, 16, Halide::TailStrategy::GuardWithIf);
        staged.compute_at(out, xo).gpu_threads(x);
        Halide::Pipeline pipeline(out);
        UseOpenCLHandlers(&pipeline.jit_handlers());
        in.set(input);
        Halide::Buffer<float> result(kN);
        TakeRuntimeError();
        pipeline.realize(result, OpenCLJitTarget());
        if (result.copy_to_host() != 0) {
          return absl::FailedPreconditionError(
              absl::StrCat("copying its result back failed: ", TakeRuntimeError()));
        }
        for (int i = 0; i < kN; ++i) {
          const float want = 2.0f * input(i) + 2.0f * input(i + 1) + 1.0f;
          if (result(i) != want) {
            return absl::FailedPreconditionError(
                absl::StrCat("it computed ", result(i), " for element ", i, ", not ", want));
          }
        }
        return absl::OkStatus();
      });
}

const Backend& OpenCLBackendInstance() {
  static const OpenCLBackend* backend = new OpenCLBackend();
  return *backend;
}

}  // namespace device
}  // namespace braze
