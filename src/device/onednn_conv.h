// oneDNN's convolution primitives as cpu_conv.cc uses them: forward (with the bias, a
// residual add as a binary_add post-op, and the ReLU post-ops), backward data and backward weights,
// a primitive per configuration made at its first use and kept, each with its memory objects and
// scratchpad; a 3x3 one of enough channels by oneDNN's Winograd algorithm (F(4x4, 3x3)), with
// a recompute by the direct one where its result holds a NaN or an infinity.
//
// Internal header: includes oneDNN's C header where the build has it.
#ifndef BRAZE_DEVICE_ONEDNN_CONV_H_
#define BRAZE_DEVICE_ONEDNN_CONV_H_

#include <cstdint>
#include <memory>
#include <string>
#include <tuple>
#include <utility>

#include "device/onednn_matmul.h"

namespace braze {
namespace onednn {

#if BRAZE_HAVE_DNNL
// What a call computes: y from x and w (forward), x's gradient from y's and w (data),
// or w's gradient from x and y's (weights).
enum ConvDirection : int { kForward = 0, kBackwardData = 1, kBackwardWeights = 2 };

// What a forward call adds after the convolution, in this order: a per-channel bias, a
// residual of y's shape (binary_add post-op), braze::Relu. Flags, as the extern's `post`.
enum ConvPost : int { kPostBias = 1, kPostResidual = 2, kPostRelu = 4 };

// One convolution configuration. x is n x c x h x w (NCHW or NHWC, dense), the filter
// HWIO [kh, kw, c / g, o], y n x o x oh x ow in x's format.
struct ConvKey {
  int64_t n, c, h, w, o, oh, ow, kh, kw, g;
  int32_t sh, sw, dh, dw, pt, pb, pl, pr;
  bool nchw;
  int post;  // forward only: ConvPost flags
  int threads;
  int dir;  // ConvDirection
  // Winograd allowed (SetCpuConvWinograd); LookupConv uses it where WinogradCandidate.
  bool winograd = false;
  auto Tie() const {
    return std::make_tuple(n, c, h, w, o, oh, ow, kh, kw, g, sh, sw, dh, dw, pt, pb, pl, pr, nchw,
                           post, threads, dir, winograd);
  }
  bool operator==(const ConvKey& k) const { return Tie() == k.Tie(); }
  template <typename H>
  friend H AbslHashValue(H h, const ConvKey& k) {
    return H::combine(std::move(h), k.Tie());
  }
};

struct PreparedConv;

// Whether `k` may run as oneDNN's Winograd convolution: a 3x3 window at unit strides
// without dilation or groups, padding of at most 1, at least 64 input and output channels
// (CPU time per call on the 2-core AVX-512 VM under load: at 64 -> 64, 56x56 1.3-1.9x
// faster than the direct convolution, the reorders to and from its blocked layout
// included; at 32 -> 64, 14x14 and 16 -> 16 2-4x slower). A forward key's residual and
// ReLU are not the primitive's post-ops but the call's own pass over the result, after
// its scan for special values (onednn_conv.cc, FinishForward). oneDNN may still refuse
// it; the direct one is used then.
bool WinogradCandidate(const ConvKey& k);

// The prepared primitive for `k`, made at its first use and kept (at most 256, then the
// cache starts again; one in use lives on through its caller's reference); null when
// oneDNN refuses the configuration.
std::shared_ptr<PreparedConv> LookupConv(const Library& lib, const ConvKey& k);

// Runs `p` under its lock. Forward: y = conv(x, w) (+ bias, + residual, ReLU); backward
// data: x = the gradient from y (dy) and w; backward weights: w = the gradient from x
// and y (dy). Each pointer is a dense tensor of the key's shapes (residual: y's); bias
// and residual are read only where the key's `post` has them. False on an error.
bool RunConv(const Library& lib, PreparedConv& p, float* x, float* w, const float* bias,
             const float* residual, float* y);

// Whether a kPostRelu forward primitive applies the ReLU itself (its post-ops were
// checked for its implementation); if not, the caller applies braze::Relu after it.
// The residual add is always the primitive's: a key whose binary_add post-op is not
// checked for its implementation gets no primitive (LookupConv is null).
bool ConvAppliesRelu(const PreparedConv& p);

// oneDNN's name of `p`'s implementation ("jit_wino_4x3:avx512_core", "brgconv:avx512_core").
const std::string& ConvImplementation(const PreparedConv& p);
#endif

// Winograd on or off for the calls from now on (default on; BRAZE_FLAGS
// --cpu_conv_winograd=false turns it off), and the calls whose Winograd result held a NaN or
// an infinity and were recomputed by the direct convolution, since the process started.
void SetWinograd(bool on);
bool WinogradOn();
int64_t WinogradRecomputes();
// How many filter reorders into a primitive's layout (forward, backward data) the calls
// did since the process started: a call whose filter has the bits of its configuration's
// last reorder reuses it (constant inference weights reorder once).
int64_t FilterReorders();
// How many of those reorders kept a copy of the filter to compare the next call's with
// (not kept for a filter that changed at its last two compares, as in training, but at
// one reorder in 16).
int64_t FilterCopies();

}  // namespace onednn
}  // namespace braze

#endif  // BRAZE_DEVICE_ONEDNN_CONV_H_
