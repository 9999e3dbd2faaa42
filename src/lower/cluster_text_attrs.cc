// The attributes of each op in a cluster's text: one case per op (-Werror=switch), the
// keys ClusterToText (cluster_text.cc) writes (cluster_text_parse.h).
#include <cstdint>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "ir/window_geometry.h"
#include "lower/cluster_text_parse.h"

namespace braze {
namespace cluster_text {
namespace {

#define BRAZE_TAKE(var, key) BRAZE_ASSIGN_OR_RETURN(absl::string_view var, kv.Take(key))

// The fields WindowText (cluster_text.cc) writes.
absl::StatusOr<Window2D> ParseWindow(KeyValues& kv) {
  constexpr int64_t kMaxWindow = 1 << 20;
  BRAZE_TAKE(strides, "strides");
  BRAZE_TAKE(dilations, "dilations");
  BRAZE_TAKE(padding, "padding");
  BRAZE_TAKE(pads, "pads");
  BRAZE_TAKE(format, "format");
  Window2D w;
  BRAZE_ASSIGN_OR_RETURN(std::vector<int> s, ParseIntList<int>(strides, "strides", 0, kMaxWindow));
  BRAZE_ASSIGN_OR_RETURN(std::vector<int> d,
                         ParseIntList<int>(dilations, "dilations", 0, kMaxWindow));
  BRAZE_ASSIGN_OR_RETURN(std::vector<int64_t> p,
                         ParseIntList<int64_t>(pads, "pads", -kMaxWindow, kMaxWindow));
  if (s.size() != 2 || d.size() != 2 || p.size() != 4) {
    return Invalid("strides and dilations need 2 values, pads 4");
  }
  w.stride_h = s[0];
  w.stride_w = s[1];
  w.dilation_h = d[0];
  w.dilation_w = d[1];
  w.pad_top = p[0];
  w.pad_bottom = p[1];
  w.pad_left = p[2];
  w.pad_right = p[3];
  if (padding == "VALID") {
    w.padding = Padding::kValid;
  } else if (padding == "SAME") {
    w.padding = Padding::kSame;
  } else if (padding == "EXPLICIT") {
    w.padding = Padding::kExplicit;
  } else {
    return Invalid(absl::StrCat("padding: expected VALID, SAME or EXPLICIT, got '", padding, "'"));
  }
  if (format == "NHWC") {
    w.format = DataFormat::kNHWC;
  } else if (format == "NCHW") {
    w.format = DataFormat::kNCHW;
  } else {
    return Invalid(absl::StrCat("format: expected NHWC or NCHW, got '", format, "'"));
  }
  return w;
}

}  // namespace

// The attributes of `op` from its keys (the struct graph.h gives the op).
absl::StatusOr<Attrs> ParseAttrs(OpKind op, KeyValues& kv) {
  constexpr int64_t kMaxInt = 1 << 30;
  switch (op) {
    case OpKind::kPlaceholder: {
      BRAZE_TAKE(dtype, "dtype");
      BRAZE_TAKE(shape, "shape");
      PlaceholderAttrs a;
      BRAZE_ASSIGN_OR_RETURN(a.dtype, ParseDType(dtype, "dtype"));
      BRAZE_ASSIGN_OR_RETURN(a.shape, ParseShape(shape, "shape", -1));
      return Attrs(std::move(a));
    }
    case OpKind::kConst: {
      BRAZE_TAKE(value, "value");
      ConstAttrs a;
      BRAZE_ASSIGN_OR_RETURN(a.value, ParseValue(value, "value"));
      return Attrs(std::move(a));
    }
    case OpKind::kVariable: {
      BRAZE_TAKE(dtype, "dtype");
      BRAZE_TAKE(shape, "shape");
      BRAZE_TAKE(initial, "initial_value");
      VariableAttrs a;
      BRAZE_ASSIGN_OR_RETURN(a.dtype, ParseDType(dtype, "dtype"));
      BRAZE_ASSIGN_OR_RETURN(a.shape, ParseShape(shape, "shape", -1));
      if (initial != "none") {
        BRAZE_ASSIGN_OR_RETURN(a.initial_value, ParseValue(initial, "initial_value"));
      }
      return Attrs(std::move(a));
    }
    case OpKind::kAssign:
    case OpKind::kAssignAdd:
    case OpKind::kAssignSub:
    case OpKind::kNeg:
    case OpKind::kAbs:
    case OpKind::kExp:
    case OpKind::kLog:
    case OpKind::kSqrt:
    case OpKind::kRsqrt:
    case OpKind::kTanh:
    case OpKind::kSigmoid:
    case OpKind::kRelu:
    case OpKind::kSquare:
    case OpKind::kReciprocal:
    case OpKind::kSign:
    case OpKind::kFloor:
    case OpKind::kErf:
    case OpKind::kSin:
    case OpKind::kCos:
    case OpKind::kStopGradient:
    case OpKind::kAdd:
    case OpKind::kSub:
    case OpKind::kMul:
    case OpKind::kDiv:
    case OpKind::kMaximum:
    case OpKind::kMinimum:
    case OpKind::kPow:
    case OpKind::kGreater:
    case OpKind::kLess:
    case OpKind::kEqual:
    case OpKind::kSelect:
    case OpKind::kSumToShapeOf:
      return Attrs(NoAttrs{});
    case OpKind::kCast: {
      BRAZE_TAKE(dtype, "dtype");
      CastAttrs a;
      BRAZE_ASSIGN_OR_RETURN(a.dtype, ParseDType(dtype, "dtype"));
      return Attrs(a);
    }
    case OpKind::kSum:
    case OpKind::kMean:
    case OpKind::kMax:
    case OpKind::kMin: {
      BRAZE_TAKE(axes, "axes");
      BRAZE_TAKE(keep_dims, "keep_dims");
      ReduceAttrs a;
      BRAZE_ASSIGN_OR_RETURN(a.axes, ParseIntList<int>(axes, "axes", -kMaxInt, kMaxInt));
      BRAZE_ASSIGN_OR_RETURN(a.keep_dims, ParseBool(keep_dims, "keep_dims"));
      return Attrs(std::move(a));
    }
    case OpKind::kArgMax: {
      BRAZE_TAKE(axis, "axis");
      ArgMaxAttrs a;
      BRAZE_ASSIGN_OR_RETURN(int64_t v, ParseInt(axis, "axis", -kMaxInt, kMaxInt));
      a.axis = static_cast<int>(v);
      return Attrs(a);
    }
    case OpKind::kMatMul:
    case OpKind::kBatchMatMul: {
      BRAZE_TAKE(ta, "transpose_a");
      BRAZE_TAKE(tb, "transpose_b");
      MatMulAttrs a;
      BRAZE_ASSIGN_OR_RETURN(a.transpose_a, ParseBool(ta, "transpose_a"));
      BRAZE_ASSIGN_OR_RETURN(a.transpose_b, ParseBool(tb, "transpose_b"));
      return Attrs(a);
    }
    case OpKind::kReshape: {
      BRAZE_TAKE(shape, "shape");
      ReshapeAttrs a;
      BRAZE_ASSIGN_OR_RETURN(a.shape, ParseShape(shape, "shape", -kMaxExtent));
      return Attrs(std::move(a));
    }
    case OpKind::kTranspose: {
      BRAZE_TAKE(perm, "perm");
      TransposeAttrs a;
      BRAZE_ASSIGN_OR_RETURN(a.perm, ParseIntList<int>(perm, "perm", -kMaxInt, kMaxInt));
      return Attrs(std::move(a));
    }
    case OpKind::kBroadcastTo: {
      BRAZE_TAKE(shape, "shape");
      BroadcastToAttrs a;
      BRAZE_ASSIGN_OR_RETURN(a.shape, ParseShape(shape, "shape", -1));
      return Attrs(std::move(a));
    }
    case OpKind::kConcat: {
      BRAZE_TAKE(axis, "axis");
      ConcatAttrs a;
      BRAZE_ASSIGN_OR_RETURN(int64_t v, ParseInt(axis, "axis", -kMaxInt, kMaxInt));
      a.axis = static_cast<int>(v);
      return Attrs(a);
    }
    case OpKind::kSlice: {
      BRAZE_TAKE(begin, "begin");
      BRAZE_TAKE(size, "size");
      SliceAttrs a;
      BRAZE_ASSIGN_OR_RETURN(a.begin,
                             ParseIntList<int64_t>(begin, "begin", -kMaxExtent, kMaxExtent));
      BRAZE_ASSIGN_OR_RETURN(a.size, ParseIntList<int64_t>(size, "size", -kMaxExtent, kMaxExtent));
      return Attrs(std::move(a));
    }
    case OpKind::kPad: {
      BRAZE_TAKE(paddings, "paddings");
      BRAZE_TAKE(value, "value");
      PadAttrs a;
      BRAZE_ASSIGN_OR_RETURN(std::vector<absl::string_view> pairs, ListItems(paddings, "paddings"));
      for (absl::string_view pair : pairs) {
        const size_t colon = pair.find(':');
        if (colon == absl::string_view::npos) {
          return Invalid(absl::StrCat("paddings: expected LO:HI, got '", pair, "'"));
        }
        BRAZE_ASSIGN_OR_RETURN(
            int64_t lo, ParseInt(pair.substr(0, colon), "paddings", -kMaxExtent, kMaxExtent));
        BRAZE_ASSIGN_OR_RETURN(
            int64_t hi, ParseInt(pair.substr(colon + 1), "paddings", -kMaxExtent, kMaxExtent));
        a.paddings.emplace_back(lo, hi);
      }
      BRAZE_ASSIGN_OR_RETURN(a.value, ParseDouble(value, "value"));
      return Attrs(std::move(a));
    }
    case OpKind::kConv2D:
    case OpKind::kConv2DBackpropInput:
    case OpKind::kConv2DBackpropFilter: {
      Conv2DAttrs a;
      BRAZE_ASSIGN_OR_RETURN(a.window, ParseWindow(kv));
      BRAZE_TAKE(shape, "shape");
      BRAZE_ASSIGN_OR_RETURN(a.shape, ParseShape(shape, "shape", -1));
      return Attrs(std::move(a));
    }
    case OpKind::kMaxPool:
    case OpKind::kMaxPoolGrad:
    case OpKind::kMaxPoolGradGrad:
    case OpKind::kAvgPool:
    case OpKind::kAvgPoolGrad: {
      Pool2DAttrs a;
      BRAZE_TAKE(size, "size");
      BRAZE_ASSIGN_OR_RETURN(std::vector<int64_t> hw,
                             ParseIntList<int64_t>(size, "size", 0, kMaxInt));
      if (hw.size() != 2) return Invalid("size: expected 2 values");
      a.size_h = hw[0];
      a.size_w = hw[1];
      BRAZE_ASSIGN_OR_RETURN(a.window, ParseWindow(kv));
      BRAZE_TAKE(shape, "shape");
      BRAZE_ASSIGN_OR_RETURN(a.shape, ParseShape(shape, "shape", -1));
      return Attrs(std::move(a));
    }
    case OpKind::kOneHot: {
      BRAZE_TAKE(depth, "depth");
      BRAZE_TAKE(on, "on_value");
      BRAZE_TAKE(off, "off_value");
      BRAZE_TAKE(dtype, "dtype");
      OneHotAttrs a;
      BRAZE_ASSIGN_OR_RETURN(a.depth, ParseInt(depth, "depth", -kMaxExtent, kMaxExtent));
      BRAZE_ASSIGN_OR_RETURN(a.on_value, ParseDouble(on, "on_value"));
      BRAZE_ASSIGN_OR_RETURN(a.off_value, ParseDouble(off, "off_value"));
      BRAZE_ASSIGN_OR_RETURN(a.dtype, ParseDType(dtype, "dtype"));
      return Attrs(a);
    }
    case OpKind::kGather: {
      BRAZE_TAKE(axis, "axis");
      GatherAttrs a;
      BRAZE_ASSIGN_OR_RETURN(int64_t v, ParseInt(axis, "axis", -kMaxInt, kMaxInt));
      a.axis = static_cast<int>(v);
      return Attrs(a);
    }
    case OpKind::kUnsortedSegmentSum: {
      BRAZE_TAKE(axis, "axis");
      BRAZE_TAKE(segments, "num_segments");
      SegmentSumAttrs a;
      BRAZE_ASSIGN_OR_RETURN(int64_t v, ParseInt(axis, "axis", -kMaxInt, kMaxInt));
      a.axis = static_cast<int>(v);
      BRAZE_ASSIGN_OR_RETURN(a.num_segments,
                             ParseInt(segments, "num_segments", -kMaxExtent, kMaxExtent));
      return Attrs(a);
    }
    case OpKind::kIota: {
      BRAZE_TAKE(axis, "axis");
      BRAZE_TAKE(dtype, "dtype");
      IotaAttrs a;
      BRAZE_ASSIGN_OR_RETURN(int64_t v, ParseInt(axis, "axis", -kMaxInt, kMaxInt));
      a.axis = static_cast<int>(v);
      BRAZE_ASSIGN_OR_RETURN(a.dtype, ParseDType(dtype, "dtype"));
      return Attrs(a);
    }
    case OpKind::kAttention:
    case OpKind::kAttentionLogSumExp:
    case OpKind::kAttentionGradQ:
    case OpKind::kAttentionGradK:
    case OpKind::kAttentionGradV: {
      BRAZE_TAKE(causal, "causal");
      BRAZE_TAKE(scale, "scale");
      BRAZE_TAKE(dropout, "dropout");
      BRAZE_TAKE(seed, "seed");
      BRAZE_TAKE(op_key, "op_key");
      AttentionAttrs a;
      BRAZE_ASSIGN_OR_RETURN(a.causal, ParseBool(causal, "causal"));
      BRAZE_ASSIGN_OR_RETURN(a.scale, ParseDouble(scale, "scale"));
      BRAZE_ASSIGN_OR_RETURN(a.dropout, ParseDouble(dropout, "dropout"));
      BRAZE_ASSIGN_OR_RETURN(a.seed, ParseU64(seed, "seed"));
      BRAZE_ASSIGN_OR_RETURN(a.op_key, ParseU64(op_key, "op_key"));
      return Attrs(a);
    }
    case OpKind::kRandomUniform:
    case OpKind::kRandomNormal: {
      BRAZE_TAKE(seed, "seed");
      BRAZE_TAKE(op_key, "op_key");
      BRAZE_TAKE(dtype, "dtype");
      RandomAttrs a;
      BRAZE_ASSIGN_OR_RETURN(a.seed, ParseU64(seed, "seed"));
      BRAZE_ASSIGN_OR_RETURN(a.op_key, ParseU64(op_key, "op_key"));
      BRAZE_ASSIGN_OR_RETURN(a.dtype, ParseDType(dtype, "dtype"));
      return Attrs(a);
    }
    case OpKind::kAllReduce:  // dp (issue 37)
    case OpKind::kBroadcast:
    case OpKind::kAllGather: {
      BRAZE_TAKE(world_size, "world_size");
      BRAZE_TAKE(rank, "rank");
      BRAZE_TAKE(root, "root");
      CollectiveAttrs a;
      BRAZE_ASSIGN_OR_RETURN(int64_t w, ParseInt(world_size, "world_size", 1, kMaxInt));
      BRAZE_ASSIGN_OR_RETURN(int64_t r, ParseInt(rank, "rank", 0, kMaxInt));
      BRAZE_ASSIGN_OR_RETURN(int64_t o, ParseInt(root, "root", 0, kMaxInt));
      a.world_size = static_cast<int>(w);
      a.rank = static_cast<int>(r);
      a.root = static_cast<int>(o);
      return Attrs(a);
    }
    case OpKind::kCond:  // cf (issue 40): never in a cluster, so never in its text
    case OpKind::kWhile:
    case OpKind::kScan:
      return Invalid(absl::StrCat(OpName(op), " (control flow) is never in a cluster's text"));
    case OpKind::kHostCall:
      return Invalid("a HostCall (a user's C++ function) cannot be rebuilt from text");
  }
  return Invalid("unknown op");
}

#undef BRAZE_TAKE

}  // namespace cluster_text
}  // namespace braze
