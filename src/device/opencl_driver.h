// The OpenCL loader in a link-map namespace of its own, for the probe (braze/device.h:
// CheckOpenCLAvailable) and for Halide's OpenCL runtime, which loads the library and
// looks up its symbols through the JIT handlers these functions fill.
//
// Why a namespace of its own: an OpenCL driver may link LLVM itself. POCL 3.1 (Debian
// 12) links LLVM 15; loaded into a process that has Halide's LLVM 14, its calls bound to
// LLVM 14's symbols and it crashed in llvm::VerifierPass::run. dlmopen(LM_ID_NEWLM)
// gives the loader and everything it loads (the ICD drivers and their LLVM) their own
// symbol scope. Opened once per process: namespaces are few (glibc allows 16).
#ifndef BRAZE_DEVICE_OPENCL_DRIVER_H_
#define BRAZE_DEVICE_OPENCL_DRIVER_H_

namespace braze {
namespace device {

// For JITHandlers::custom_load_library: any name of the OpenCL loader ("libOpenCL.so",
// "libOpenCL.so.1", ...) gives the isolated loader's handle; other libraries are
// dlopen'ed as Halide would.
void* LoadLibraryIsolated(const char* name);
// For JITHandlers::custom_get_library_symbol: dlsym, in whichever namespace `lib` is.
void* GetLibrarySymbol(void* lib, const char* name);

}  // namespace device
}  // namespace braze

#endif  // BRAZE_DEVICE_OPENCL_DRIVER_H_
