// Batch norm folded into a convolution at inference (as XLA's algebraic simplifier and
// TF grappler's remapper fold it): inside one cluster, the per-output-channel affine
// that BatchNorm(training = false) builds after a Conv2D,
//
//   Conv2D(x, f) -> Sub(., mean) -> Mul(., scale) -> Add(., shift)
//        |              |                |                [-> Add(., residual)] [-> Relu(.)]
//        each read once, by the next alone, in the cluster; none is a cluster output
//
// (the residual Add and the Relu are recorded for oneDNN's call to take: its bias's
// binary_add and ReLU post-ops; a ResNet block's BN, shortcut add and ReLU at inference)
//
// with mean, scale and shift per output channel (every dim 1 but the channel's, which is
// C_out or 1; scale may come either side of the Mul, shift either side of the Add), is
// computed as
//
//   Conv2D(x, f * scale[c_out]) + (shift - mean * scale)[c_out]
//
// so the activation is written once: by oneDNN's call with the bias (and the ReLU) in
// it, or by Braze's Halide convolution with the bias added as it is stored. The filter
// and bias are recomputed at every run from the current values: the moving statistics
// are variables. Equal in real arithmetic; in floating point the rounding differs
// (docs/CONVOLUTIONS.md, "Batch norm folded into the convolution").
//
// It never fires in training: BatchNorm's batch statistics read the convolution's
// output a second time (Mean), as any other reader or a fetch of the convolution or of
// the Sub or Mul does. A node with an error is never matched: its lowering reports it.
//
// Matched on structure (op kinds, single readers, shapes and dtypes), not on names:
// any per-channel affine after a convolution folds, BatchNorm's or a user's. A
// convolution that does not fold is logged at --v=2 with the reason.
// Pure graph logic on a ClusterSpec; the Halide side is lower_conv_fold.cc.
#ifndef BRAZE_LOWER_CONV_BN_FOLD_H_
#define BRAZE_LOWER_CONV_BN_FOLD_H_

#include <map>
#include <string>

#include "braze/graph.h"
#include "lower/cluster_spec.h"

namespace braze {
namespace lower {

// How a kernel's schedule text names each fold, one line each (compile/: dumps and
// --log_compiles).
inline constexpr char kFoldNotePrefix[] = "// folded ";

struct ConvBnFold {
  int conv = -1, sub = -1, mul = -1, add = -1;
  int relu = -1;  // the Relu reading the last Add alone, or -1 (oneDNN's call may take it)
  Tensor mean, scale, shift;
  int residual_add = -1;  // an Add reading `add` alone (its other operand `residual`), or -1
  Tensor residual;
  // "Sub 'bn/Sub', Mul 'bn/Mul', Add 'bn/Add' into the filter and bias of Conv2D 'c'":
  // for logs and dumps.
  std::string Describe(const Graph& g) const;
};

// By the Add's node id (where the folded convolution is lowered: every operand has been
// lowered by then, in the cluster's topological order): the folds of `spec`.
std::map<int, ConvBnFold> FindConvBnFolds(const ClusterSpec& spec);

}  // namespace lower
}  // namespace braze

#endif  // BRAZE_LOWER_CONV_BN_FOLD_H_
