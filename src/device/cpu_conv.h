// Convolutions on the CPU through oneDNN's convolution primitive, called from inside a
// cluster's Halide pipeline as an extern stage, as matmuls call oneDNN's matmul
// (cpu_gemm.h, docs/CPU_GEMM.md): the ops around the convolution stay fused in the same
// kernel, and a bias add, a residual add and a ReLU right after it go into the call. The lowering
// (src/lower/lower_conv_library.cc) decides which Conv2D nodes become such a stage; every
// other one (f64, a GPU, too little work, no oneDNN) is Braze's own Halide convolution.
#ifndef BRAZE_DEVICE_CPU_CONV_H_
#define BRAZE_DEVICE_CPU_CONV_H_

#include <cstdint>
#include <string>

namespace braze {

// The extern stage's C symbol (f32):
//   int braze_cpu_conv_f32(halide_buffer_t* a, halide_buffer_t* b, halide_buffer_t* bias,
//                          halide_buffer_t* residual, int32_t direction, int32_t nchw, int32_t n,
//                          int32_t c_in, int32_t in_h, int32_t in_w, int32_t c_out, int32_t kh,
//                          int32_t kw, int32_t groups, int32_t stride_h, int32_t stride_w, int32_t
//                          dilation_h, int32_t dilation_w, int32_t pad_top, int32_t pad_bottom,
//                          int32_t pad_left, int32_t pad_right, int32_t post, int32_t threads,
//                          halide_buffer_t* out)
// direction 0: out = Conv2D(a = x, b = w) (+ bias, ReLU); 1: out = Conv2DBackpropInput
// (a = dy, b = w); 2: out = Conv2DBackpropFilter (a = x, b = dy), over all n images.
// Buffers in Halide's dim order: activations [C, W, H, N] (NHWC) or [W, H, C, N]
// (NCHW), the HWIO filter [C_out, C_in / groups, KW, KH], bias [C_out], residual out's
// shape. `post` (direction 0; flags, applied in this order): 1 a bias, 2 a residual
// added (oneDNN's binary_add post-op; the lowering asks CpuConvSupported, which says no
// where a check once per process has not confirmed it, and keeps the add in Halide),
// 4 braze::Relu (NaN kept: oneDNN's post-ops where a check once per process confirms
// them, else a loop of the call's own). A bias or residual not used is a buffer of one
// element, not read. Bounds queries answer whole
// operands, activations over out's batch range (all n for direction 2). Every buffer
// must be dense and whole but for the batch range. Returns 0, or -1 oneDNN not
// loadable, -2 a buffer that is not dense or does not hold what is read, -3 oneDNN
// refused the configuration or failed.
inline constexpr char kCpuConvF32Symbol[] = "braze_cpu_conv_f32";

// A call's sizes and direction, as the extern's integer arguments give them.
struct CpuConvGeometry {
  int32_t dir;  // 0 forward, 1 backward data, 2 backward weights
  bool nchw;
  int32_t n, c_in, in_h, in_w, c_out, kh, kw, groups;
  int32_t sh, sw, dh, dw, pt, pb, pl, pr;
  int32_t post;  // onednn::ConvPost flags: 1 bias, 2 residual, 4 ReLU
  int32_t OutH() const { return (in_h + pt + pb - ((kh - 1) * dh + 1)) / sh + 1; }
  int32_t OutW() const { return (in_w + pl + pr - ((kw - 1) * dw + 1)) / sw + 1; }
};

// Whether oneDNN takes the convolution `g` with `threads` threads: its primitive is made
// now (and kept for the calls). The lowering asks first, so that a configuration oneDNN
// refuses is Braze's Halide convolution rather than a call that fails at run time. False
// without oneDNN.
bool CpuConvSupported(const CpuConvGeometry& g, int threads);

// oneDNN's name of the implementation the convolution `g` with `threads` threads runs
// ("jit_wino_4x3:avx512_core", "brgconv:avx512_core"); empty where CpuConvSupported is false.
std::string CpuConvImplementation(const CpuConvGeometry& g, int threads);

// Whether a 3x3 convolution of at least 64 input and output channels may run as oneDNN's
// Winograd algorithm (device/onednn_conv.h, docs/CONVOLUTIONS.md): on by default, off by
// BRAZE_FLAGS --cpu_conv_winograd=false; read at each call. And how many calls since the
// process started had a NaN or an infinity in a Winograd result and were recomputed by
// the direct convolution.
void SetCpuConvWinograd(bool on);
int64_t CpuConvWinogradRecomputes();

// How many times the calls reordered a filter into oneDNN's layout (forward and backward
// data) since the process started: once per configuration and filter contents, not per
// call (a constant filter is reordered at the first call only; docs/CONVOLUTIONS.md).
int64_t CpuConvFilterReorders();
// How many of them kept a copy of the filter for the next call's compare: a filter that
// changed at its last two compares (trained every step) is copied at one reorder in 16.
int64_t CpuConvFilterCopies();

// braze_cpu_conv_f32's address, for JIT pipelines and the disk cache's runtime.
void* CpuConvF32Address();

}  // namespace braze

#endif  // BRAZE_DEVICE_CPU_CONV_H_
