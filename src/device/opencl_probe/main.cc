// braze-opencl-probe: Braze's OpenCL probe as a process of its own (device/opencl_probe.h).
// A Braze program starts it before loading any OpenCL driver; run by hand, it prints what
// that program would see (`braze-opencl-probe [--kernel]`).
#include "device/opencl_probe.h"

int main(int argc, char** argv) { return braze::device::OpenCLProbeMain(argc, argv); }
