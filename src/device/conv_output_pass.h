// The pass that finishes a oneDNN Winograd forward convolution (onednn_conv.cc,
// FinishForward): the result of conv + bias out of the primitive's blocked layout into the
// caller's y, scanned for NaN and infinities, with the residual added and the ReLU applied.
#ifndef BRAZE_DEVICE_CONV_OUTPUT_PASS_H_
#define BRAZE_DEVICE_CONV_OUTPUT_PASS_H_

#include <atomic>
#include <cstdint>

namespace braze {
namespace onednn {

// One pass over a Winograd forward result (conv + bias), written into y: each element is
// read from the primitive's nChw16c buffer (or from y, where oneDNN reordered it), checked
// for NaN and infinities (which send the call to the direct convolution: RunConv), then
// the residual added and the ReLU applied (x < 0 ? 0 : x: NaN and -0 kept), the
// reference's order (bias, residual, ReLU: docs/CONVOLUTIONS.md). A row (image, output
// row) a call, so that rows can go to different threads.
struct ConvOutputPass {
  const float* src;  // nChw16c (channels padded to 16) when `blocked`, else y itself
  bool blocked, nchw, relu;
  const float* residual;  // y's layout, or null
  float* y;
  int64_t o, oh, ow;
  std::atomic<bool> special{false};  // conv + bias held a NaN or an infinity

  void Row(int64_t n, int64_t h);
};

// Tests only: true sends every row to the portable loop, so that a machine with AVX-512
// checks both paths (conv_output_pass_test.cc).
void SetConvOutputPassPortableForTesting(bool portable);

}  // namespace onednn
}  // namespace braze

#endif  // BRAZE_DEVICE_CONV_OUTPUT_PASS_H_
