// The OpenCL loader and its drivers, loaded so that a driver built on another LLVM than
// Halide's cannot bind to Halide's LLVM symbols; for the probe (braze/device.h:
// CheckOpenCLAvailable) and for Halide's OpenCL runtime, which loads the library and
// looks up its symbols through the JIT handlers these functions fill.
//
// Why: POCL 3.1 (Debian 12) links LLVM 15. Loaded into a process that has Halide's
// LLVM 14, its calls bound to LLVM 14's symbols and it crashed in
// llvm::VerifierPass::run. Each driver named in /etc/OpenCL/vendors (or
// $OCL_ICD_VENDORS) that links a libLLVM is loaded first with RTLD_DEEPBIND, so it and
// the libraries it brings look up their own symbols first (other drivers are not: C++
// drivers can break under deep binding, see opencl_driver.cc). A link-map namespace of its own
// (dlmopen) isolated it too, but brought a second C library into the process, and POCL's threads
// allocating with it corrupted the heap within a few dozen kernels (malloc(): unsorted
// double linked list corrupted, in the jit:opencl random-graph test).
#ifndef BRAZE_DEVICE_OPENCL_DRIVER_H_
#define BRAZE_DEVICE_OPENCL_DRIVER_H_

#include <string>
#include <vector>

#include "absl/status/status.h"

namespace braze {
namespace device {

// For JITHandlers::custom_load_library: any name of the OpenCL loader ("libOpenCL.so",
// "libOpenCL.so.1", ...) gives the loader opened after its drivers were deep-bound;
// other libraries are dlopen'ed as Halide would.
void* LoadLibraryIsolated(const char* name);
// For JITHandlers::custom_get_library_symbol: dlsym.
void* GetLibrarySymbol(void* lib, const char* name);

// Runs a one-kernel Halide pipeline on opencl:0 (local memory, a barrier, a partial
// last work-group) through Halide's OpenCL runtime with Braze's handlers and JIT target,
// as a compiled cluster does, and checks its values. The probe (CheckOpenCLAvailable)
// runs it in a process of its own (device/opencl_probe.h) before this one uses a driver
// whose opencl:0 is not a CPU device: a driver that throws or crashes in clCreateContext,
// clBuildProgram or a launch ends that process, not this program. Defined in
// opencl_backend.cc.
absl::Status RunOpenCLProbeKernel();

// The OpenCL devices as the probe's process listed them (names as OpenCLDevices() gives
// them), without loading a driver into this process or running the kernel probe: for
// "auto" device selection, which every Session does. Empty when the listing failed.
std::vector<std::string> ListedOpenCLDevices();

// Whether opencl:0 (the device Halide's runtime drives) lists the extension `name`
// (e.g. "cl_khr_fp16") in CL_DEVICE_EXTENSIONS; false when OpenCL is unavailable.
bool OpenCLDeviceHasExtension(const std::string& name);

}  // namespace device
}  // namespace braze

#endif  // BRAZE_DEVICE_OPENCL_DRIVER_H_
