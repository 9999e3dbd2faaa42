// The lowering pass; see lowering.h.
#include "lower/lowering.h"

#include <algorithm>
#include <limits>
#include <map>
#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "braze/status.h"
#include "lower/conv_bn_fold.h"
#include "lower/gemm_epilogue.h"
#include "lower/lower_float16.h"
#include "lower/lower_ops.h"
#include "lower/lower_util.h"
#include "lower/online_softmax.h"
#include "lower/sibling_reductions.h"
#include "lower/symbolic.h"

namespace braze {

namespace lower {
namespace {

using Halide::Expr;
using ValueKey = std::pair<int, int>;  // (node id, output index)

// The symbol classes of a value's row-major dims (empty when none is symbolic).
std::vector<int> SymbolsOf(const SymbolMap& symbols, const ValueKey& key) {
  auto it = symbols.find(key);
  return it == symbols.end() ? std::vector<int>() : it->second;
}

// The class of Halide dim d of a value with row-major classes `sym`, or -1.
int HalideDimSymbol(const std::vector<int>& sym, size_t d) {
  return d < sym.size() ? sym[sym.size() - 1 - d] : -1;
}

// `e` with each Variable that holds a Parameter (a buffer's `in0.extent.0`) replaced
// by one of the same name alone, for a buffer's own constraints. A Parameter keeps its
// constraints' Exprs, and such a Variable keeps its Parameter: a symbolic input's stride
// (the product of its extents before it) made the input's Parameter hold itself, a
// reference cycle Halide's IntrusivePtr never frees (LeakSanitizer: about 900 bytes per
// discarded kernel; docs/SANITIZERS.md). Lowering resolves a constraint's Variables by
// name (each buffer field is a let of the pipeline's body), so the checks are the same.
// Outputs' constraints keep their Parameters (below).
Expr ByNameOnly(const Expr& e) {
  class Strip : public Halide::Internal::IRMutator {
    using IRMutator::visit;
    Expr visit(const Halide::Internal::Variable* op) override {
      if (!op->param.defined()) return op;
      return Halide::Internal::Variable::make(op->type, op->name);
    }
  } strip;
  return strip.mutate(e);
}

// The layout ops whose lowering computes with a dim's size, when that dim is symbolic:
// a Concat along it (piece offsets), a Reshape that merges or splits it with other dims
// (flat index arithmetic). Shape probing (symbolic.h) lets some of these through (a
// Concat with one non-empty piece, a Reshape of [2, n] to [n, 2]), so they are refused
// here: the caller compiles the cluster for its concrete shapes.
absl::Status CheckSymbolicLayout(const Node& node, const std::vector<Value>& in,
                                 const TensorType& out, const std::vector<int>& out_sym) {
  auto refuse = [&](const std::string& why) {
    return absl::UnimplementedError(
        absl::StrCat("node '", node.name(), "' (", node.op_name(), ") ", why));
  };
  if (node.op() == OpKind::kConcat) {
    const int axis = node.attrs_as<ConcatAttrs>().axis;
    for (const Value& v : in) {
      if (axis >= 0 && SymbolOf(v, axis) >= 0) return refuse("concatenates along a symbolic dim");
    }
  }
  if (node.op() == OpKind::kReshape && !ReshapeKeepsSymbols(in[0], out.shape, out_sym)) {
    return refuse("merges or splits a symbolic dim");
  }
  return absl::OkStatus();
}

// Whether every element of `node`'s float output is >= 0, -0, +inf or NaN (never a
// negative number nor -inf: a sum of them cannot cancel) whatever its
// inputs' values are, given which inputs are (`in[i].nonnegative`). Conservative: false
// for anything not listed.
bool NonNegative(const Node& node, const std::vector<Value>& in) {
  auto all_in = [&] {
    for (const Value& v : in) {
      if (!v.nonnegative) return false;
    }
    return !in.empty();
  };
  switch (node.op()) {
    case OpKind::kExp:
    case OpKind::kSquare:
    case OpKind::kAbs:
    case OpKind::kSqrt:  // NaN below 0, -0 at -0
    case OpKind::kRelu:
    case OpKind::kSigmoid:
      return true;
    case OpKind::kMul:
      // x * x, or a product of non-negative factors.
      return node.inputs()[0] == node.inputs()[1] || all_in();
    case OpKind::kMaximum:
      return in[0].nonnegative || in[1].nonnegative;
    // Not Div (x / -0 is -inf) nor the Max reduction (-inf over no elements).
    case OpKind::kAdd:
    case OpKind::kMinimum:
    case OpKind::kSum:
    case OpKind::kMean:
    case OpKind::kMin:
    case OpKind::kReshape:
    case OpKind::kTranspose:
    case OpKind::kBroadcastTo:
    case OpKind::kSlice:
    case OpKind::kConcat:
      return all_in();
    case OpKind::kSelect:
      return in[1].nonnegative && in[2].nonnegative;
    case OpKind::kSumToShapeOf:  // like's values are never read
      return in[0].nonnegative;
    default:
      return false;
  }
}

// Lowers one node whose inputs are `in` to its single output of type `out` (no 16-bit
// floats here). `cast_to`: a Cast's target type. `epilogue`: a MatMul's bias Add and
// ReLU it may fold (LowerMatMul).
absl::StatusOr<Value> LowerTypedNode(LoweringContext& ctx, const Node& node,
                                     const std::vector<Value>& in, const TensorType& out,
                                     DType cast_to, MatMulEpilogue* epilogue) {
  const std::string name = absl::StrCat(node.op_name(), "_", node.id());
  const OpKind op = node.op();
  switch (op) {
    case OpKind::kPlaceholder:
    case OpKind::kVariable:
    case OpKind::kAssign:
    case OpKind::kAssignAdd:
    case OpKind::kAssignSub:
    case OpKind::kAllReduce:  // dp (issue 37): collectives are steps of their own kind
    case OpKind::kBroadcast:
    case OpKind::kAllGather:
    case OpKind::kCond:  // cf (issue 40): control flow is a step of its own kind
    case OpKind::kWhile:
    case OpKind::kScan:
    case OpKind::kHostCall:
      // The kNotCompiled ops of op_list.def (OpIsCompilable): never clustered.
      return absl::InvalidArgumentError(
          absl::StrCat(node.op_name(), " has no Halide lowering and cannot be in a cluster"));
    case OpKind::kConst:
      return LowerConst(ctx, name, *node.attrs_as<ConstAttrs>().value);
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
      return LowerUnary(ctx, name, op, in[0]);
    case OpKind::kCast:
      return LowerCast(ctx, name, in[0], cast_to);
    case OpKind::kStopGradient: {
      // x itself, read inline (only Gradients treats it otherwise).
      Value v = Inline(in[0].dtype, in[0].shape,
                       [x = in[0]](const std::vector<Expr>& i) { return At(x, i); });
      v.sym = in[0].sym;
      v.nonnegative = in[0].nonnegative;
      return v;
    }
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
      return LowerBinary(ctx, name, op, in[0], in[1], out);
    case OpKind::kSelect:
      return LowerSelect(ctx, name, in[0], in[1], in[2], out);
    case OpKind::kSum:
    case OpKind::kMean:
    case OpKind::kMax:
    case OpKind::kMin:
      return LowerReduce(ctx, name, op, node.attrs_as<ReduceAttrs>(), in[0], out);
    case OpKind::kSumToShapeOf:
      return LowerSumToShapeOf(ctx, name, in[0], in[1], out);
    case OpKind::kArgMax:
      return LowerArgMax(ctx, name, node.attrs_as<ArgMaxAttrs>(), in[0], out);
    case OpKind::kMatMul:
    case OpKind::kBatchMatMul:
      return LowerMatMul(ctx, name, node.attrs_as<MatMulAttrs>(), in[0], in[1], out, epilogue);
    case OpKind::kReshape:
      return LowerReshape(ctx, name, in[0], out);
    case OpKind::kTranspose:
      return LowerTranspose(ctx, name, node.attrs_as<TransposeAttrs>(), in[0], out);
    case OpKind::kBroadcastTo:
      return LowerBroadcastTo(ctx, name, in[0], out);
    case OpKind::kConcat:
      return LowerConcat(ctx, name, node.attrs_as<ConcatAttrs>(), in, out);
    case OpKind::kSlice:
      return LowerSlice(ctx, name, node.attrs_as<SliceAttrs>(), in[0], out);
    case OpKind::kPad:
      return LowerPad(ctx, name, node.attrs_as<PadAttrs>(), in[0], out);
    case OpKind::kOneHot:
      return LowerOneHot(ctx, name, node.attrs_as<OneHotAttrs>(), in[0], out);
    case OpKind::kGather:
      return LowerGather(ctx, name, node.attrs_as<GatherAttrs>(), in[0], in[1], out);
    case OpKind::kUnsortedSegmentSum:
      return LowerSegmentSum(ctx, name, node.attrs_as<SegmentSumAttrs>(), in[0], in[1], out);
    case OpKind::kIota:
      return LowerIota(out);
    case OpKind::kRandomUniform:
    case OpKind::kRandomNormal:
      return LowerRandom(ctx, name, node, in[0], in[1], out);
    case OpKind::kConv2D:
    case OpKind::kConv2DBackpropInput:
    case OpKind::kConv2DBackpropFilter: {
      const Conv2DAttrs& attrs = node.attrs_as<Conv2DAttrs>();
      // An empty operand sums nothing: LowerConv's zeros, never a library call (which
      // would hand oneDNN a batch or channel count of 0).
      const bool empty_operand = std::any_of(
          in.begin(), in.end(), [](const Value& v) { return NumElements(v.shape) == 0; });
      if (!empty_operand) {
        std::optional<Value> call =
            LowerLibraryConv(ctx, name, op, attrs, in[0], in[1], out, epilogue);
        if (call.has_value()) return *std::move(call);
      }
      return LowerConv(ctx, name, op, attrs, in, out);
    }
    case OpKind::kMaxPool:
    case OpKind::kMaxPoolGrad:
    case OpKind::kMaxPoolGradGrad:
    case OpKind::kAvgPool:
    case OpKind::kAvgPoolGrad:
      return LowerPool(ctx, name, op, node.attrs_as<Pool2DAttrs>(), in, out);
    case OpKind::kAttention:
    case OpKind::kAttentionLogSumExp:
    case OpKind::kAttentionGradQ:
    case OpKind::kAttentionGradK:
    case OpKind::kAttentionGradV:
      return LowerAttention(ctx, name, op, node.attrs_as<AttentionAttrs>(), in, out);
  }
  return absl::InternalError(absl::StrCat("unknown op ", static_cast<int>(op)));
}

// Lowers one node; an op on bf16 or f16 computes in f32 and rounds its result once
// (lower_float16.h). Such a matmul folds no epilogue (the Add and ReLU round on their
// own), except a bf16 matmul on the CPU GEMM library: oneDNN reads the bf16 operands as
// they are, accumulates in f32 and rounds once, after the bias and ReLU it takes.
absl::StatusOr<Value> LowerNode(LoweringContext& ctx, const Node& node,
                                const std::vector<Value>& in, const TensorType& out,
                                MatMulEpilogue* epilogue) {
  const DType cast_to = node.op() == OpKind::kCast ? node.attrs_as<CastAttrs>().dtype : out.dtype;
  const bool matmul = node.op() == OpKind::kMatMul || node.op() == OpKind::kBatchMatMul;
  if (!Computes16BitFloats(node.op(), in, out) ||
      (matmul && LibraryTakesBF16(ctx, node.attrs_as<MatMulAttrs>(), in[0], in[1], out))) {
    return LowerTypedNode(ctx, node, in, out, cast_to, epilogue);
  }
  std::vector<Value> wide;
  for (const Value& v : in) wide.push_back(Widen(v));
  const TensorType wide_out{ComputeDType(out.dtype), out.shape};
  MatMulEpilogue none;
  BRAZE_ASSIGN_OR_RETURN(Value value,
                         LowerTypedNode(ctx, node, wide, wide_out, ComputeDType(cast_to), &none));
  Value narrow = Narrow(value, out.dtype);
  if (value.func.defined()) ctx.wide_values.push_back(value);
  // A GPU schedule makes a matmul's result a kernel of its own (compute_root): rounded
  // there and stored in 16 bits, not as the f32 accumulator that every reader would round
  // (twice the bytes through global memory). The same one rounding of the product.
  std::vector<schedule::Stage>& stages = ctx.stages();
  if (matmul && ctx.gpu && value.func.defined() && !stages.empty() &&
      stages.back().kind == schedule::StageKind::kMatMul &&
      stages.back().result.name() == value.func.name()) {
    Value stored =
        Define(ctx, absl::StrCat(node.op_name(), "_", node.id(), "_16"), out.dtype, out.shape,
               [&narrow](const std::vector<Halide::Expr>& i) { return At(narrow, i); });
    stored.sym = narrow.sym;
    stored.nonnegative = narrow.nonnegative;
    stages.back().result = stored.func;
    return stored;
  }
  return narrow;
}

absl::Status CheckSpec(const ClusterSpec& spec) {
  if (spec.graph == nullptr) return absl::InvalidArgumentError(spec.name + ": no graph");
  if (spec.inputs.size() != spec.input_types.size()) {
    return absl::InvalidArgumentError(absl::StrCat(spec.name, ": ", spec.inputs.size(),
                                                   " inputs but ", spec.input_types.size(),
                                                   " input types"));
  }
  if (spec.outputs.empty()) return absl::InvalidArgumentError(spec.name + ": no outputs");
  for (size_t i = 0; i < spec.input_types.size(); ++i) {
    if (!IsFullyDefined(spec.input_types[i].shape)) {
      return absl::InvalidArgumentError(absl::StrCat(spec.name, ": input ", i, " has type ",
                                                     TypeString(spec.input_types[i]),
                                                     "; cluster inputs must be concrete"));
    }
  }
  for (int id : spec.nodes) {
    if (id < 0 || id >= spec.graph->num_nodes()) {
      return absl::InvalidArgumentError(absl::StrCat(spec.name, ": no node ", id));
    }
  }
  // Halide 14 buffers (without the LargeBuffers feature) hold at most 2^31 - 1 bytes and
  // take int extents: a larger tensor would be truncated silently, so it is refused
  // here and runs on the reference kernels (or is an error in strict mode).
  auto check_size = [&](const TensorType& t, const std::string& what) -> absl::Status {
    if (!IsFullyDefined(t.shape)) {  // concrete inputs give concrete types: a Braze bug
      return absl::InternalError(absl::StrCat(spec.name, ": ", what, " is ", TypeString(t),
                                              ", left unknown by shape inference"));
    }
    const int64_t n = NumElements(t.shape);  // -1: past int64
    if (n < 0 || n > std::numeric_limits<int32_t>::max() / static_cast<int64_t>(SizeOf(t.dtype))) {
      return absl::UnimplementedError(absl::StrCat(spec.name, ": ", what, " is ", TypeString(t),
                                                   ", over the 2 GiB a Halide 14 buffer holds"));
    }
    return absl::OkStatus();
  };
  for (size_t i = 0; i < spec.input_types.size(); ++i) {
    BRAZE_RETURN_IF_ERROR(check_size(spec.input_types[i], absl::StrCat("input ", i)));
  }
  for (size_t i = 0; i < spec.node_types.size(); ++i) {
    BRAZE_RETURN_IF_ERROR(check_size(
        spec.node_types[i], absl::StrCat("node '", spec.graph->node(spec.nodes[i]).name(), "'")));
  }
  return absl::OkStatus();
}

// The leader's value of a group of sibling reductions (sibling_reductions.h), lowered
// with its followers', which go into `values`. Inputs of differing shapes (the graph's
// types did not tell the lowered ones) lower one reduction each.
absl::StatusOr<Value> LowerSiblingGroup(LoweringContext& ctx, const ClusterSpec& spec,
                                        const std::vector<int>& members,
                                        std::map<ValueKey, Value>& values) {
  std::vector<Value> in;
  std::vector<TensorType> outs;
  std::vector<OpKind> ops;
  bool same = true;
  for (int id : members) {
    const Node& node = spec.graph->node(id);
    const Tensor& t = node.inputs()[0];
    auto it = values.find({t.node_id(), t.index()});
    if (it == values.end()) {
      return absl::InternalError(
          absl::StrCat("sibling reduction '", node.name(), "': its input is not lowered yet"));
    }
    in.push_back(it->second);
    BRAZE_ASSIGN_OR_RETURN(std::vector<TensorType> types,
                           InferOutputTypes(node.op(), node.attrs(),
                                            {TensorType{it->second.dtype, it->second.shape}}));
    outs.push_back(types[0]);
    ops.push_back(node.op());
    same &= in.back().shape == in[0].shape && in.back().dtype == DType::kF32 &&
            in.back().sym.empty() && outs.back().shape == outs[0].shape;
  }
  const Node& leader = spec.graph->node(members[0]);
  const ReduceAttrs& attrs = leader.attrs_as<ReduceAttrs>();
  std::vector<Value> lowered;
  if (same) {
    lowered = LowerSiblingSums(ctx, absl::StrCat(leader.op_name(), "_", members[0], "_siblings"),
                               ops, attrs, in, outs);
  } else {
    for (size_t i = 0; i < members.size(); ++i) {
      const Node& node = spec.graph->node(members[i]);
      lowered.push_back(LowerReduce(ctx, absl::StrCat(node.op_name(), "_", members[i]), ops[i],
                                    node.attrs_as<ReduceAttrs>(), in[i], outs[i]));
    }
  }
  for (size_t i = 1; i < members.size(); ++i) {
    lowered[i].nonnegative = in[i].nonnegative;  // a sum of non-negative terms
    values[{members[i], 0}] = lowered[i];
  }
  return lowered[0];
}

// A moments' mean (`node`), lowered with its variance `var_id`'s value, which goes
// into `variances`; an input that turned out symbolic lowers the mean alone (the
// variance then lowers as its own node).
absl::StatusOr<Value> LowerMomentsOf(LoweringContext& ctx, const ClusterSpec& spec,
                                     const Node& node, int var_id, const Value& x,
                                     const TensorType& out, std::map<int, Value>& variances) {
  const ReduceAttrs& attrs = node.attrs_as<ReduceAttrs>();
  if (!x.sym.empty() || x.dtype != DType::kF32) {
    return LowerReduce(ctx, absl::StrCat(node.op_name(), "_", node.id()), node.op(), attrs, x, out);
  }
  const Node& var = spec.graph->node(var_id);
  BRAZE_ASSIGN_OR_RETURN(std::vector<TensorType> var_types,
                         InferOutputTypes(var.op(), var.attrs(), {TensorType{x.dtype, x.shape}}));
  auto [mean, variance] =
      LowerMoments(ctx, absl::StrCat(node.op_name(), "_", node.id()), attrs, x, out, var_types[0]);
  variance.nonnegative = true;
  variances[var_id] = variance;
  return mean;
}

// A softmax's Max (`node`), lowered with its Sum `sum_id` (online_softmax.h), whose
// value goes into `sums`; where the pass does not apply (a symbolic or long row) the Max
// alone (the Sum then lowers as its own node).
absl::StatusOr<Value> LowerOnlineSoftmaxOf(LoweringContext& ctx, const ClusterSpec& spec,
                                           const Node& node, int sum_id, const Value& x,
                                           const TensorType& out, std::map<int, Value>& sums) {
  const std::string name = absl::StrCat(node.op_name(), "_", node.id());
  const Node& sum = spec.graph->node(sum_id);
  BRAZE_ASSIGN_OR_RETURN(std::vector<TensorType> sum_types,
                         InferOutputTypes(sum.op(), sum.attrs(), {TensorType{x.dtype, x.shape}}));
  auto pair = LowerOnlineSoftmax(ctx, name, x, out, sum_types[0]);
  if (!pair.has_value()) {
    return LowerReduce(ctx, name, node.op(), node.attrs_as<ReduceAttrs>(), x, out);
  }
  sums[sum_id] = pair->second;
  return pair->first;
}

// The input buffers the Funcs of `outputs` load from (directly or through the Funcs they
// call), once each definition is simplified as Halide will (a Select of two equal
// constants, FilledLike's zeros, loads nothing). Halide unpacks a buffer's fields (its
// extents) only for the buffers the pipeline loads from.
std::set<std::string> LoadedBuffers(const std::vector<Halide::Func>& outputs) {
  using Halide::Internal::Call;
  using Halide::Internal::Function;
  class Loads : public Halide::Internal::IRGraphVisitor {
   public:
    std::set<std::string> names;
    std::vector<Function> calls;  // Funcs called, to visit in turn

   private:
    using IRGraphVisitor::visit;
    void visit(const Call* op) override {
      if (op->call_type == Call::Image && op->param.defined()) names.insert(op->param.name());
      if (op->call_type == Call::Halide && op->func.defined()) calls.emplace_back(op->func);
      IRGraphVisitor::visit(op);
    }
  } loads;
  auto visit = [&](const Halide::Internal::Definition& d) {
    for (const Expr& e : d.values()) Halide::Internal::simplify(e).accept(&loads);
    for (const Expr& e : d.args()) Halide::Internal::simplify(e).accept(&loads);
    if (d.predicate().defined()) Halide::Internal::simplify(d.predicate()).accept(&loads);
  };
  std::set<std::string> seen;
  for (const Halide::Func& out : outputs) loads.calls.push_back(out.function());
  while (!loads.calls.empty()) {
    const Function f = loads.calls.back();
    loads.calls.pop_back();
    if (!seen.insert(f.name()).second) continue;
    if (f.has_extern_definition()) f.accept(&loads);  // its buffers, as they are
    if (f.has_pure_definition()) visit(f.definition());
    for (const Halide::Internal::Definition& u : f.updates()) visit(u);
  }
  return loads.names;
}

// `unread`: inputs whose buffers the pipeline does not load from (LoadedBuffers, after a
// first lowering: LowerCluster). None gives a symbol class its extent: a class taken
// from one failed to compile ("Symbol not found: in0.extent.1"), and each size compiled
// a kernel of its own.
absl::Status Lower(const ClusterSpec& spec, const LowerOptions& options, LoweredCluster& result,
                   const std::set<size_t>& unread) {
  LoweringContext ctx;
  ctx.library_gemm_min_work = options.library_gemm_min_work;
  ctx.library_conv_min_work = options.library_conv_min_work;
  ctx.library_gemm_threads = options.library_gemm_threads;
  ctx.library_gemm_bf16 = options.library_gemm_bf16;
  ctx.gpu = options.gpu;
  ctx.cuda = options.cuda;
  ctx.block_long_sums = options.block_long_sums;
  std::map<ValueKey, Value> values;
  BRAZE_ASSIGN_OR_RETURN(const SymbolMap symbols, InferSymbols(spec));

  // A buffer per input with elements, then each symbol class's extent: that of the first
  // buffer of the class the pipeline loads from, else of the first buffer of the class.
  std::vector<Halide::ImageParam> params(spec.inputs.size());
  for (size_t i = 0; i < spec.inputs.size(); ++i) {
    const TensorType& type = spec.input_types[i];
    if (NumElements(type.shape) == 0) continue;
    // A rank-0 input is a buffer of one dim (HalideExtents).
    params[i] = Halide::ImageParam(HalideType(type.dtype),
                                   static_cast<int>(HalideExtents(type.shape).size()),
                                   ctx.UniqueName(absl::StrCat("in", i)));
  }
  std::vector<Expr>& classes = ctx.symbols();
  std::map<int, std::pair<size_t, size_t>> class_source;  // class -> (input, Halide dim)
  for (const bool loaded_only : {true, false}) {
    for (size_t i = 0; i < spec.inputs.size(); ++i) {
      if (!params[i].defined() || (loaded_only && unread.count(i) > 0)) continue;
      const Tensor& t = spec.inputs[i];
      const std::vector<int> sym = SymbolsOf(symbols, {t.node_id(), t.index()});
      for (size_t d = 0; d < spec.input_types[i].shape.size(); ++d) {
        const int k = HalideDimSymbol(sym, d);
        if (k < 0 || class_source.count(k) > 0) continue;
        if (classes.size() <= static_cast<size_t>(k)) classes.resize(k + 1);
        classes[k] = params[i].dim(static_cast<int>(d)).extent();
        class_source[k] = {i, d};
      }
    }
  }

  for (size_t i = 0; i < spec.inputs.size(); ++i) {
    const TensorType& type = spec.input_types[i];
    const Tensor& t = spec.inputs[i];
    if (NumElements(type.shape) == 0) {
      result.params.emplace_back();
      result.input_elided.push_back(true);
      Value empty = Fill(type.dtype, type.shape, 0);
      // Its other dims may be symbolic: a cluster output taken from it is then -1 there.
      empty.sym = SymbolsOf(symbols, {t.node_id(), t.index()});
      values[{t.node_id(), t.index()}] = empty;
      continue;
    }
    const std::vector<int> sym = SymbolsOf(symbols, {t.node_id(), t.index()});
    const schedule::Extents extents = HalideExtents(type.shape);
    Halide::ImageParam param = params[i];
    Expr stride = 1;
    for (size_t d = 0; d < extents.size(); ++d) {
      const int e = static_cast<int>(extents[d]);
      const int k = HalideDimSymbol(sym, d);
      Expr extent = e;
      if (k >= 0) {
        if (class_source.at(k) == std::make_pair(i, d)) {
          param.dim(d).set_min(0);  // the class's extent is this buffer's
        } else {
          // The others must match (Halide checks).
          param.dim(d).set_bounds(0, ByNameOnly(classes[k]));
        }
        extent = classes[k];
      } else {
        param.dim(d).set_bounds(0, e);
      }
      param.dim(d).set_stride(ByNameOnly(stride));
      param.dim(d).set_estimate(0, e);
      stride = Halide::Internal::simplify(stride * extent);
    }
    Value value;
    value.param = param;
    value.dtype = type.dtype;
    value.shape = type.shape;
    value.sym = sym;
    values[{t.node_id(), t.index()}] = value;
    result.params.push_back(param);
    result.input_elided.push_back(false);
  }

  // Every class must have its extent from some input buffer: a class seen only in
  // inputs with no elements (which have no buffer) has none, and is compiled concretely.
  for (const auto& [key, sym] : symbols) {
    for (int k : sym) {
      if (k >= 0 &&
          (static_cast<size_t>(k) >= ctx.symbols().size() || !ctx.symbols()[k].defined())) {
        return absl::UnimplementedError(
            absl::StrCat(spec.name, ": a symbolic size appears only in inputs with no elements"));
      }
    }
  }
  if (!spec.node_types.empty() && spec.node_types.size() != spec.nodes.size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        spec.name, ": ", spec.node_types.size(), " node types for ", spec.nodes.size(), " nodes"));
  }
  const std::map<int, GemmEpilogueNodes> epilogues = FindGemmEpilogues(spec);
  // Outputs a matmul of the cluster reads (below, where they are stored).
  std::set<ValueKey> output_matmul_operands;
  {
    std::set<ValueKey> outputs;
    for (const Tensor& t : spec.outputs) outputs.insert({t.node_id(), t.index()});
    for (int id : spec.nodes) {
      const OpKind op = spec.graph->node(id).op();
      if (op != OpKind::kMatMul && op != OpKind::kBatchMatMul) continue;
      for (const Tensor& t : spec.graph->node(id).inputs()) {
        if (outputs.count({t.node_id(), t.index()}) > 0) {
          output_matmul_operands.insert({t.node_id(), t.index()});
        }
      }
    }
  }
  std::set<int> folded;  // Adds and Relus a matmul's library call computes
  // Batch norms folded into their convolutions, by the Add's id: the convolution, Sub
  // and Mul are lowered there, as one node.
  const std::map<int, ConvBnFold> bn_folds = FindConvBnFolds(spec);
  for (const auto& [add, f] : bn_folds) folded.insert({f.conv, f.sub, f.mul});
  // Reductions sharing a pass over their input, and the order that lowers each group
  // of siblings at once (sibling_reductions.h).
  const SiblingReductions siblings = FindSiblingReductions(spec, !options.gpu);
  // Softmaxes' Max and Sum pairs lowered as one pass on GPUs (online_softmax.h).
  const std::map<int, int> online = FindOnlineSoftmaxes(spec, options.gpu);
  // Values lowered with an earlier node (a moments' variance, an online softmax's sum),
  // by their node's id.
  std::map<int, Value> variances;
  for (size_t k : siblings.order) {
    const int id = spec.nodes[k];
    if (folded.count(id) > 0) continue;              // a matmul's or a folded batch norm's node
    if (siblings.followers.count(id) > 0) continue;  // lowered with its group's leader
    if (auto v = variances.find(id); v != variances.end()) {
      values[{id, 0}] = v->second;  // lowered with its mean
      continue;
    }
    const Node& node = spec.graph->node(id);
    auto fail = [&](const absl::Status& s) {
      return absl::Status(s.code(), absl::StrCat(spec.name, ": node '", node.name(), "' (",
                                                 node.op_name(), "): ", s.message()));
    };
    if (!node.status().ok()) return fail(node.status());
    if (node.op() == OpKind::kConst && node.attrs_as<ConstAttrs>().value->num_elements() != 1) {
      result.embeds_constants = true;
    }
    auto bn_fold = bn_folds.find(id);
    const ConvBnFold* bn = bn_fold != bn_folds.end() ? &bn_fold->second : nullptr;
    // What is computed here: the node, or at a folded Add its convolution (whose type
    // the Add's is), reading the per-channel operands after its own.
    const Node& computed = bn != nullptr ? spec.graph->node(bn->conv) : node;
    std::vector<Tensor> inputs = computed.inputs();
    if (bn != nullptr) inputs.insert(inputs.end(), {bn->mean, bn->scale, bn->shift});
    std::vector<Value> in;
    std::vector<TensorType> in_types;
    for (const Tensor& t : inputs) {
      auto it = values.find({t.node_id(), t.index()});
      if (it == values.end()) {
        return fail(absl::InvalidArgumentError(
            absl::StrCat("input '", t.name(),
                         "' is neither a cluster input nor computed earlier in the "
                         "cluster")));
      }
      in.push_back(it->second);
      in_types.push_back({it->second.dtype, it->second.shape});
    }
    absl::StatusOr<std::vector<TensorType>> types;
    if (!spec.node_types.empty()) {
      types = std::vector<TensorType>{spec.node_types[k]};
    } else {
      in_types.resize(computed.num_inputs());
      types = InferOutputTypes(computed.op(), computed.attrs(), in_types);
    }
    if (!types.ok()) return fail(types.status());
    if (types->size() != 1) {
      return fail(absl::InternalError(absl::StrCat(types->size(), " outputs; expected 1")));
    }
    const TensorType& out = (*types)[0];
    if (NumElements(out.shape) == 0) {
      // Nothing to compute; its other dims may still be symbolic (a [2, 0, T] softmax of
      // an empty query against T keys), so its output type says -1 there, not the
      // nominal extent the symbol was lowered with.
      Value empty = Fill(out.dtype, out.shape, 0);
      empty.sym = SymbolsOf(symbols, {id, 0});
      values[{id, 0}] = empty;
      continue;
    }
    const std::vector<int> out_sym = SymbolsOf(symbols, {id, 0});
    if (!symbols.empty()) BRAZE_RETURN_IF_ERROR(CheckSymbolicLayout(node, in, out, out_sym));
    // A bias lowered before the matmul may go into its library call (an Add whose
    // bias comes later in the graph's order stays an op of its own).
    MatMulEpilogue epilogue;
    auto e = epilogues.find(id);
    if (e != epilogues.end()) {
      auto bias = values.find({e->second.bias.node_id(), e->second.bias.index()});
      if (bias != values.end()) epilogue.bias = &bias->second;
      // A Conv2D's residual Add (gemm_epilogue.h): its Relu reads that Add, so it folds
      // only with it.
      bool relu = e->second.relu >= 0;
      if (e->second.residual_add >= 0) {
        auto res = values.find({e->second.residual.node_id(), e->second.residual.index()});
        if (res != values.end()) epilogue.residual = &res->second;
        relu = relu && res != values.end();
      }
      epilogue.relu = relu;
    }
    // A folded batch norm's residual Add and Relu, which its library call may take.
    MatMulEpilogue after_bn;
    if (bn != nullptr) {
      bool relu = bn->relu >= 0;
      if (bn->residual_add >= 0) {
        auto res = values.find({bn->residual.node_id(), bn->residual.index()});
        if (res != values.end()) after_bn.residual = &res->second;
        relu = relu && res != values.end();
      }
      after_bn.relu = relu;
    }
    const size_t first_stage = ctx.stages().size();
    const size_t first_wide = ctx.wide_values.size();
    auto group = siblings.groups.find(id);
    auto moments = siblings.moments.find(id);
    auto softmax = online.find(id);
    absl::StatusOr<Value> value;
    if (group != siblings.groups.end()) {
      value = LowerSiblingGroup(ctx, spec, group->second, values);
    } else if (moments != siblings.moments.end()) {
      value = LowerMomentsOf(ctx, spec, node, moments->second, in[0], out, variances);
    } else if (softmax != online.end()) {
      value = LowerOnlineSoftmaxOf(ctx, spec, node, softmax->second, in[0], out, variances);
    } else {
      value = bn == nullptr
                  ? LowerNode(ctx, node, in, out, &epilogue)
                  : LowerFoldedConv(ctx, absl::StrCat(computed.op_name(), "_", bn->conv, "_bn"),
                                    computed.attrs_as<Conv2DAttrs>(), in, out, &after_bn);
    }
    const bool relu_folded = bn != nullptr && after_bn.ReluFolded();
    if (!value.ok()) return fail(value.status());
    int result_id = id;  // the node whose value this is
    if (bn != nullptr) {
      result.folds.push_back(bn->Describe(*spec.graph));
      if (after_bn.residual_folded) {
        result_id = bn->residual_add;
        folded.insert(bn->residual_add);
        absl::StrAppend(&result.folds.back(), ", and the residual Add '",
                        spec.graph->node(bn->residual_add).name(), "'");
      }
      if (relu_folded) {
        result_id = bn->relu;
        folded.insert(bn->relu);
        absl::StrAppend(&result.folds.back(), ", and Relu '", spec.graph->node(bn->relu).name(),
                        "' into the library call");
      }
    } else if (epilogue.folded) {
      result_id = epilogue.ReluFolded()      ? e->second.relu
                  : epilogue.residual_folded ? e->second.residual_add
                                             : e->second.add;
      folded.insert(e->second.add);
      if (epilogue.residual_folded) folded.insert(e->second.residual_add);
      if (epilogue.ReluFolded()) folded.insert(e->second.relu);
    }
    value->sym = SymbolsOf(symbols, {result_id, 0});
    // The f32 Func a 16-bit node computes in has the node's shape, and its symbols.
    for (size_t w = first_wide; w < ctx.wide_values.size(); ++w) ctx.wide_values[w].sym = out_sym;
    value->nonnegative = bn != nullptr     ? relu_folded
                         : epilogue.folded ? epilogue.ReluFolded()
                                           : IsFloating(out.dtype) && NonNegative(node, in);
    for (size_t s = first_stage; s < ctx.stages().size(); ++s) {
      // A node's stages hold its output (an ArgMax's inner Max too: the same dims), or
      // its output and one more dim: a long sum's partial sums (long_sums.h), whose
      // blocks are a constant count.
      schedule::Stage& stage = ctx.stages()[s];
      stage.symbolic = HalideSymbolic(out_sym, out.shape.size());
      if (stage.extents.size() == stage.symbolic.size() + 1) stage.symbolic.push_back(false);
      if (stage.symbolic.size() != stage.extents.size()) stage.symbolic.clear();
      stage.symbolic_extents.assign(stage.symbolic.size(), Expr());
      for (size_t d = 0; d < stage.symbolic.size(); ++d) {
        const int k = HalideDimSymbol(out_sym, d);
        if (k >= 0) stage.symbolic_extents[d] = ctx.symbols().at(k);
      }
    }
    if (value->inline_body && output_matmul_operands.count({result_id, 0}) > 0) {
      // An output a matmul reads is one Func: the library call stores its operands, and
      // the output's copy then reads that store instead of computing the value again
      // from the inputs (a weight's bf16 copy read twice from its f32 master a step).
      // Elsewhere an unscheduled Func is inlined as the value was.
      const Value src = *value;
      *value = Define(ctx, absl::StrCat(node.op_name(), "_shared"), src.dtype, src.shape,
                      [src](const std::vector<Expr>& i) { return At(src, i); });
      value->sym = src.sym;
      value->nonnegative = src.nonnegative;
    }
    values[{result_id, 0}] = *value;
  }

  std::set<ValueKey> consumed;  // values some node of the cluster reads
  for (int id : spec.nodes) {
    for (const Tensor& t : spec.graph->node(id).inputs()) consumed.insert({t.node_id(), t.index()});
  }
  std::set<std::string> output_funcs;
  for (size_t j = 0; j < spec.outputs.size(); ++j) {
    const Tensor& t = spec.outputs[j];
    auto it = values.find({t.node_id(), t.index()});
    if (it == values.end()) {
      return absl::InvalidArgumentError(absl::StrCat(spec.name, ": output ", j, " ('",
                                                     t.valid() ? t.name() : "?",
                                                     "') is not computed by the cluster"));
    }
    const Value& v = it->second;
    TensorType out_type{v.dtype, v.shape};  // a symbolic dim is -1: known at run time
    for (size_t d = 0; d < out_type.shape.size(); ++d) {
      if (SymbolOf(v, d) >= 0) out_type.shape[d] = -1;
    }
    result.output_types.push_back(out_type);
    if (NumElements(v.shape) == 0) {
      result.pipeline_output.push_back(-1);
      continue;
    }
    const schedule::Extents extents = HalideExtents(v.shape);
    // A computed value that nothing in the cluster reads is its own output Func (a copy
    // would be one more stage to schedule). Values read inside the cluster get a copy:
    // a schedule may need such a Func over more than the output's extent (a consumer's
    // rounded-up split), and an output buffer cannot grow. Inputs, constants and
    // repeated outputs get a copy too.
    Halide::Func out;
    if (v.func.defined() && consumed.count({t.node_id(), t.index()}) == 0 &&
        output_funcs.insert(v.func.name()).second) {
      out = v.func;
    } else {
      out = Halide::Func(ctx.UniqueName(absl::StrCat("out", j)));
      const int rank = static_cast<int>(v.shape.size());
      std::vector<Halide::Var> vars = HalideVars(rank);
      std::vector<Expr> index;
      for (int d = 0; d < rank; ++d) index.push_back(vars[rank - 1 - d]);
      out(vars) = At(v, index);
    }
    Halide::Region estimates;
    Expr stride = 1;
    for (size_t d = 0; d < extents.size(); ++d) {
      const int e = static_cast<int>(extents[d]);
      const int k = HalideDimSymbol(v.sym, d);
      const Expr extent = k >= 0 ? ctx.symbols().at(k) : Expr(e);
      // With the class's Parameter, not ByNameOnly: no cycle (an input never names an
      // output), and Halide unpacks the fields of the buffer the class's extent comes
      // from even when the pipeline never loads it (zeros like an input: every size
      // compiled a kernel of its own, "Symbol not found: in0.extent.1").
      out.output_buffer().dim(d).set_bounds(0, extent).set_stride(stride);
      estimates.emplace_back(0, e);
      stride = Halide::Internal::simplify(stride * extent);
    }
    out.set_estimates(estimates);
    result.pipeline_output.push_back(static_cast<int>(result.info.outputs.size()));
    result.info.outputs.push_back(out);
    result.info.output_extents.push_back(extents);
    result.info.output_symbolic.push_back(HalideSymbolic(v.sym, v.shape.size()));
  }
  result.info.stages = ctx.stages();
  // Each value's Func with its extents, for schedules (PipelineInfo::values), and the f32
  // Func each 16-bit op computes in; a Func standing for values of two shapes is left out.
  std::set<std::string> ambiguous;
  std::vector<const Value*> funcs;
  for (const auto& [key, v] : values) funcs.push_back(&v);
  for (const Value& v : ctx.wide_values) funcs.push_back(&v);
  for (const Value* value : funcs) {
    const Value& v = *value;
    if (!v.func.defined() || NumElements(v.shape) == 0) continue;
    schedule::PipelineInfo::ValueExtents e;
    e.extents = HalideExtents(v.shape);
    e.symbolic = HalideSymbolic(v.sym, v.shape.size());
    for (size_t d = 0; d < e.extents.size(); ++d) {
      const int k = HalideDimSymbol(v.sym, d);
      e.extent_exprs.push_back(k >= 0 ? ctx.symbols().at(k) : Expr());
    }
    auto [it, added] = result.info.values.emplace(v.func.name(), e);
    if (!added && (it->second.extents != e.extents || it->second.symbolic != e.symbolic)) {
      ambiguous.insert(v.func.name());
    }
  }
  for (const std::string& name : ambiguous) result.info.values.erase(name);
  result.calls_library = ctx.calls_library;
  result.long_sums = ctx.long_sums;
  result.info.symbolic = !ctx.symbols().empty();
  // A class estimated below kMinSymbolicExtent: the kernel for sizes 1 to 15.
  for (size_t i = 0; i < spec.input_symbols.size() && i < spec.input_types.size(); ++i) {
    for (size_t d = 0; d < spec.input_symbols[i].size(); ++d) {
      if (spec.input_symbols[i][d] >= 0 && d < spec.input_types[i].shape.size() &&
          spec.input_types[i].shape[d] < kMinSymbolicExtent) {
        result.info.symbolic_min_extent = 1;
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<LoweredCluster> LowerCluster(const ClusterSpec& spec, const LowerOptions& options) {
  BRAZE_RETURN_IF_ERROR(CheckSpec(spec));
  LoweredCluster result;
  BRAZE_RETURN_IF_ERROR(CatchHalideErrors(spec.name + ": lowering failed",
                                          absl::StatusCode::kInternal,
                                          [&] { return Lower(spec, options, result, {}); }));
  if (!result.info.symbolic) return result;
  // A symbolic cluster with an input it does not load from (it reads only its shape):
  // lowered again, so that no class takes its extent from that input's buffer.
  std::set<size_t> unread;
  BRAZE_RETURN_IF_ERROR(
      CatchHalideErrors(spec.name + ": lowering failed", absl::StatusCode::kInternal, [&] {
        const std::set<std::string> loaded = LoadedBuffers(result.info.outputs);
        for (size_t i = 0; i < result.params.size(); ++i) {
          if (!result.input_elided[i] && loaded.count(result.params[i].name()) == 0) {
            unread.insert(i);
          }
        }
        return absl::OkStatus();
      }));
  if (unread.empty()) return result;
  result = LoweredCluster();
  BRAZE_RETURN_IF_ERROR(CatchHalideErrors(spec.name + ": lowering failed",
                                          absl::StatusCode::kInternal,
                                          [&] { return Lower(spec, options, result, unread); }));
  return result;
}

}  // namespace lower
}  // namespace braze
