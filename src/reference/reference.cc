// Dispatch from OpKind to the reference kernel families. The switch has no default so a
// new op in op_list.def fails to compile here (-Werror=switch) until it has a kernel.
#include "reference/reference.h"

#include <exception>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "braze/status.h"
#include "reference/control_flow.h"
#include "reference/kernel_util.h"

namespace braze {
namespace {

using reference_internal::CheckCounts;
using reference_internal::Kernel;

template <typename A>
absl::StatusOr<const A*> GetAttrs(const Node& node) {
  const A* attrs = std::get_if<A>(&node.attrs());
  if (attrs == nullptr) {
    return absl::InternalError(
        absl::StrCat(node.op_name(), " carries attributes of the wrong kind"));
  }
  return attrs;
}

Kernel RunConst(const ConstAttrs& attrs, const TensorType& out) {
  if (attrs.value == nullptr) return absl::InternalError("Const has no value");
  if (attrs.value->type() != out) {
    return absl::InvalidArgumentError(absl::StrCat(
        "Const value is ", TypeString(attrs.value->type()), ", expected ", TypeString(out)));
  }
  std::vector<HostTensor> result;
  result.push_back(*attrs.value);  // deep copy: the graph's constant stays untouched
  return result;
}

// Assign, AssignAdd, AssignSub: the variable's new value. The executor stores it.
Kernel RunAssign(OpKind op, const HostTensor& var, const HostTensor& value, const TensorType& out) {
  if (var.type() != value.type() || value.type() != out) {
    return absl::InvalidArgumentError(
        absl::StrCat(OpName(op), " needs equal types, got variable ", TypeString(var.type()),
                     ", value ", TypeString(value.type()), ", output ", TypeString(out)));
  }
  if (op == OpKind::kAssign) return std::vector<HostTensor>{value};
  return reference_internal::RunBinary(op == OpKind::kAssignAdd ? OpKind::kAdd : OpKind::kSub, var,
                                       value, out);
}

Kernel RunHostCall(const HostCallAttrs& attrs, absl::Span<const HostTensor> inputs,
                   absl::Span<const TensorType> output_types) {
  if (!attrs.fn) return absl::InvalidArgumentError("HostCall has no function");
  // A user's function may throw: that is its failure, reported like a Status, never a
  // crash of the program that runs it.
  absl::StatusOr<std::vector<HostTensor>> result;
  try {
    result = attrs.fn(inputs);
  } catch (const std::exception& e) {
    result = absl::InternalError(absl::StrCat("threw an exception: ", e.what()));
  } catch (...) {
    result = absl::InternalError("threw an exception that is not a std::exception");
  }
  if (!result.ok()) {
    return absl::Status(result.status().code(),
                        absl::StrCat("host function failed: ", result.status().message()));
  }
  if (result->size() != output_types.size()) {
    return absl::InvalidArgumentError(absl::StrCat("host function returned ", result->size(),
                                                   " tensors, expected ", output_types.size()));
  }
  for (size_t i = 0; i < result->size(); ++i) {
    const TensorType got = (*result)[i].type();
    if (got.dtype != output_types[i].dtype || !ShapeMatches(output_types[i].shape, got.shape)) {
      return absl::InvalidArgumentError(absl::StrCat("host function output ", i, " is ",
                                                     TypeString(got), ", expected ",
                                                     TypeString(output_types[i])));
    }
  }
  return result;
}

// A copy of `t` in `to` (a float type), each element converted through f32: exact when
// widening a 16-bit float, rounded to nearest even when narrowing to one.
HostTensor ConvertFloats(const HostTensor& t, DType to) {
  HostTensor out(to, t.shape());
  const int64_t n = t.num_elements();
  if (t.dtype() == DType::kF32 && to == DType::kBF16) {
    for (int64_t i = 0; i < n; ++i)
      out.data<BFloat16>()[i].bits = FloatToBF16Bits(t.data<float>()[i]);
  } else if (t.dtype() == DType::kF32 && to == DType::kF16) {
    for (int64_t i = 0; i < n; ++i)
      out.data<Float16>()[i].bits = FloatToF16Bits(t.data<float>()[i]);
  } else {
    for (int64_t i = 0; i < n; ++i) out.SetDouble(i, t.GetDouble(i));
  }
  return out;
}

// Whether the op reads or writes a 16-bit float, other than as a value it only passes
// through untouched (a Const's stored value, a HostCall's tensors).
bool Touches16BitFloats(OpKind op, absl::Span<const HostTensor> inputs,
                        absl::Span<const TensorType> output_types) {
  if (op == OpKind::kConst || op == OpKind::kHostCall) return false;
  if (OpCategoryOf(op) == OpCategory::kControlFlow) return false;  // bodies' ops decide
  for (const HostTensor& t : inputs) {
    if (Is16BitFloat(t.dtype())) return true;
  }
  for (const TensorType& t : output_types) {
    if (Is16BitFloat(t.dtype)) return true;
  }
  return false;
}

absl::StatusOr<std::vector<HostTensor>> RunTypedKernel(const Node& node,
                                                       absl::Span<const HostTensor> inputs,
                                                       absl::Span<const TensorType> output_types);

}  // namespace

// bf16 and f16: every op computes in f32 from exactly widened inputs and rounds each
// result once to its 16-bit type (docs/MIXED_PRECISION.md), so sums, means, matmuls and
// convolutions accumulate in f32 and the oracle says exactly what a 16-bit result is.
absl::StatusOr<std::vector<HostTensor>> RunReferenceKernel(
    const Node& node, absl::Span<const HostTensor> inputs,
    absl::Span<const TensorType> output_types) {
  if (!Touches16BitFloats(node.op(), inputs, output_types)) {
    return RunTypedKernel(node, inputs, output_types);
  }
  std::vector<HostTensor> wide;
  wide.reserve(inputs.size());
  for (const HostTensor& t : inputs) {
    wide.push_back(Is16BitFloat(t.dtype()) ? ConvertFloats(t, DType::kF32) : t);
  }
  std::vector<TensorType> wide_types(output_types.begin(), output_types.end());
  for (TensorType& t : wide_types) t.dtype = ComputeDType(t.dtype);
  BRAZE_ASSIGN_OR_RETURN(std::vector<HostTensor> result, RunTypedKernel(node, wide, wide_types));
  for (size_t i = 0; i < result.size() && i < output_types.size(); ++i) {
    if (Is16BitFloat(output_types[i].dtype) && result[i].dtype() == DType::kF32) {
      result[i] = ConvertFloats(result[i], output_types[i].dtype);
    }
  }
  return result;
}

namespace {

absl::StatusOr<std::vector<HostTensor>> RunTypedKernel(const Node& node,
                                                       absl::Span<const HostTensor> inputs,
                                                       absl::Span<const TensorType> output_types) {
  namespace ri = reference_internal;
  const OpKind op = node.op();
  // Every op but HostCall has exactly one output.
  const int num_outputs = op == OpKind::kHostCall || OpCategoryOf(op) == OpCategory::kControlFlow
                              ? node.num_outputs()
                              : 1;
  BRAZE_RETURN_IF_ERROR(CheckCounts(inputs, output_types, OpArity(op), num_outputs));
  // A HostCall's declared output shapes may keep -1 dims (matched against what the
  // function returns); every other op's output types must be concrete.
  if (op != OpKind::kHostCall) BRAZE_RETURN_IF_ERROR(ri::CheckFullyDefined(output_types));
  if (op == OpKind::kConcat && inputs.empty()) {
    return absl::InvalidArgumentError("Concat needs at least one input");
  }

  switch (op) {
    case OpKind::kPlaceholder:
    case OpKind::kVariable:
      return absl::InternalError(absl::StrCat(
          node.op_name(), " has no reference kernel; the executor provides its value"));
    case OpKind::kConst: {
      BRAZE_ASSIGN_OR_RETURN(const ConstAttrs* attrs, GetAttrs<ConstAttrs>(node));
      return RunConst(*attrs, output_types[0]);
    }
    case OpKind::kAssign:
    case OpKind::kAssignAdd:
    case OpKind::kAssignSub:
      return RunAssign(op, inputs[0], inputs[1], output_types[0]);

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
      return ri::RunUnary(op, inputs[0], output_types[0]);
    case OpKind::kCast:
      return ri::RunCast(inputs[0], output_types[0]);
    case OpKind::kStopGradient:  // x itself: a Reshape to its own shape copies it
      return ri::RunReshape(inputs[0], output_types[0]);

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
      return ri::RunBinary(op, inputs[0], inputs[1], output_types[0]);
    case OpKind::kSelect:
      return ri::RunSelect(inputs[0], inputs[1], inputs[2], output_types[0]);

    case OpKind::kSum:
    case OpKind::kMean:
    case OpKind::kMax:
    case OpKind::kMin: {
      BRAZE_ASSIGN_OR_RETURN(const ReduceAttrs* attrs, GetAttrs<ReduceAttrs>(node));
      return ri::RunReduce(op, *attrs, inputs[0], output_types[0]);
    }
    case OpKind::kSumToShapeOf:
      return ri::RunSumToShapeOf(inputs[0], inputs[1], output_types[0]);
    case OpKind::kArgMax: {
      BRAZE_ASSIGN_OR_RETURN(const ArgMaxAttrs* attrs, GetAttrs<ArgMaxAttrs>(node));
      return ri::RunArgMax(*attrs, inputs[0], output_types[0]);
    }

    case OpKind::kMatMul:
    case OpKind::kBatchMatMul: {
      BRAZE_ASSIGN_OR_RETURN(const MatMulAttrs* attrs, GetAttrs<MatMulAttrs>(node));
      return ri::RunMatMul(*attrs, inputs[0], inputs[1], output_types[0],
                           op == OpKind::kBatchMatMul);
    }

    case OpKind::kReshape:
      return ri::RunReshape(inputs[0], output_types[0]);
    case OpKind::kTranspose: {
      BRAZE_ASSIGN_OR_RETURN(const TransposeAttrs* attrs, GetAttrs<TransposeAttrs>(node));
      return ri::RunTranspose(*attrs, inputs[0], output_types[0]);
    }
    case OpKind::kBroadcastTo:
      return ri::RunBroadcastTo(inputs[0], output_types[0]);
    case OpKind::kConcat: {
      BRAZE_ASSIGN_OR_RETURN(const ConcatAttrs* attrs, GetAttrs<ConcatAttrs>(node));
      return ri::RunConcat(*attrs, inputs, output_types[0]);
    }
    case OpKind::kSlice: {
      BRAZE_ASSIGN_OR_RETURN(const SliceAttrs* attrs, GetAttrs<SliceAttrs>(node));
      return ri::RunSlice(*attrs, inputs[0], output_types[0]);
    }
    case OpKind::kPad: {
      BRAZE_ASSIGN_OR_RETURN(const PadAttrs* attrs, GetAttrs<PadAttrs>(node));
      return ri::RunPad(*attrs, inputs[0], output_types[0]);
    }
    case OpKind::kOneHot: {
      BRAZE_ASSIGN_OR_RETURN(const OneHotAttrs* attrs, GetAttrs<OneHotAttrs>(node));
      return ri::RunOneHot(*attrs, inputs[0], output_types[0]);
    }
    case OpKind::kGather: {
      BRAZE_ASSIGN_OR_RETURN(const GatherAttrs* attrs, GetAttrs<GatherAttrs>(node));
      return ri::RunGather(*attrs, inputs[0], inputs[1], output_types[0]);
    }
    case OpKind::kUnsortedSegmentSum: {
      BRAZE_ASSIGN_OR_RETURN(const SegmentSumAttrs* attrs, GetAttrs<SegmentSumAttrs>(node));
      return ri::RunSegmentSum(*attrs, inputs[0], inputs[1], output_types[0]);
    }
    case OpKind::kIota: {
      BRAZE_ASSIGN_OR_RETURN(const IotaAttrs* attrs, GetAttrs<IotaAttrs>(node));
      return ri::RunIota(*attrs, inputs[0], output_types[0]);
    }
    case OpKind::kRandomUniform:
    case OpKind::kRandomNormal: {
      BRAZE_ASSIGN_OR_RETURN(const RandomAttrs* attrs, GetAttrs<RandomAttrs>(node));
      return ri::RunRandom(node, *attrs, inputs[1], output_types[0]);
    }
    case OpKind::kConv2D:
    case OpKind::kConv2DBackpropInput:
    case OpKind::kConv2DBackpropFilter: {
      BRAZE_ASSIGN_OR_RETURN(const Conv2DAttrs* attrs, GetAttrs<Conv2DAttrs>(node));
      return ri::RunConv(op, *attrs, inputs, output_types[0]);
    }
    case OpKind::kMaxPool:
    case OpKind::kMaxPoolGrad:
    case OpKind::kMaxPoolGradGrad:
    case OpKind::kAvgPool:
    case OpKind::kAvgPoolGrad: {
      BRAZE_ASSIGN_OR_RETURN(const Pool2DAttrs* attrs, GetAttrs<Pool2DAttrs>(node));
      return ri::RunPool(op, *attrs, inputs, output_types[0]);
    }
    case OpKind::kAttention:
    case OpKind::kAttentionLogSumExp:
    case OpKind::kAttentionGradQ:
    case OpKind::kAttentionGradK:
    case OpKind::kAttentionGradV: {
      BRAZE_ASSIGN_OR_RETURN(const AttentionAttrs* attrs, GetAttrs<AttentionAttrs>(node));
      return ri::RunAttention(op, *attrs, inputs, output_types[0]);
    }
    // dp (issue 37): across one process every collective is the identity. A graph
    // built for a larger world runs them as collective steps (runtime/step_collective.cc).
    case OpKind::kAllReduce:
    case OpKind::kBroadcast:
    case OpKind::kAllGather: {
      BRAZE_ASSIGN_OR_RETURN(const CollectiveAttrs* attrs, GetAttrs<CollectiveAttrs>(node));
      if (attrs->world_size != 1) {
        return absl::FailedPreconditionError(
            absl::StrCat(node.op_name(), " across ", attrs->world_size,
                         " processes has no reference kernel: it runs as a collective step"));
      }
      return std::vector<HostTensor>{inputs[0]};
    }
    // cf (issue 40): bodies run op by op on these kernels (reference/control_flow.h).
    case OpKind::kCond:
    case OpKind::kWhile:
    case OpKind::kScan: {
      BRAZE_ASSIGN_OR_RETURN(const ControlFlowAttrs* attrs, GetAttrs<ControlFlowAttrs>(node));
      return RunControlFlow(node, inputs, output_types,
                            [attrs](int i, absl::Span<const HostTensor* const> params,
                                    std::vector<HostTensor>* results) {
                              return RunBodyReference(*attrs->bodies[i], params, results);
                            });
    }
    case OpKind::kHostCall: {
      BRAZE_ASSIGN_OR_RETURN(const HostCallAttrs* attrs, GetAttrs<HostCallAttrs>(node));
      return RunHostCall(*attrs, inputs, output_types);
    }
  }
  return absl::InternalError(absl::StrCat("unknown op ", static_cast<int>(op)));
}

}  // namespace
}  // namespace braze
