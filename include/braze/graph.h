// The graph IR: typed nodes with typed attributes, Tensor handles, name scopes and the
// JIT scope stack that JitScope pushes onto. Builders live in braze/ops.h.
//
// Build-time errors (bad broadcast, bad axis, inputs from another graph, ...) do not
// throw: the node is still created, carries the error, and Graph::status() plus every
// Session::Run that touches the graph report it, naming the node.
#ifndef BRAZE_GRAPH_H_
#define BRAZE_GRAPH_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <variant>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "braze/device_type.h"
#include "braze/dtype.h"
#include "braze/host_tensor.h"

namespace braze {

enum class OpKind : uint16_t {
#define BRAZE_OP(e, name, cat, arity, compiled) e,
#include "braze/op_list.def"
#undef BRAZE_OP
};
enum class OpCategory : uint8_t {
  kSource,
  kState,
  kUnary,
  kBinary,
  kSelect,
  kReduce,
  kMatMul,
  kLayout,
  kWindow,
  kAttention,
  kRandom,
  kCollective,
  kHostCall,
  kControlFlow  // cf (issue 40)
};
inline constexpr int kNumOps = 0
#define BRAZE_OP(e, name, cat, arity, compiled) +1
#include "braze/op_list.def"
#undef BRAZE_OP
    ;

const char* OpName(OpKind op);
OpCategory OpCategoryOf(OpKind op);
int OpArity(OpKind op);  // -1: variadic
// True when the op has a Halide lowering and so may be compiled and join a cluster:
// the Compiled column of op_list.def.
bool OpIsCompilable(OpKind op);
std::optional<OpKind> OpFromName(std::string_view name);

class Graph;
class Node;

namespace internal {
// Appended to "... is not a tensor" errors: where an invalid Tensor comes from, since a
// builder with no valid input (Concat of an empty list) has no graph to record it on.
inline constexpr char kNotATensorHint[] =
    " (a default-constructed Tensor, or what an op builder returns when none of its inputs "
    "is a tensor, as Concat of an empty list)";
}  // namespace internal

// A handle to output `index` of node `node_id` in `graph`. Cheap to copy. A handle built
// by hand may name no output of its graph (Tensor(&g, 999), an index past the node's
// outputs): Graph::HasOutput says so; its node() is then a stand-in named
// "<no such node>" with one f32[] output, so reading it never leaves the graph, and
// builders, Gradients and Session::Run reject it with an error naming it.
class Tensor {
 public:
  Tensor() = default;
  Tensor(Graph* graph, int node_id, int index = 0)
      : graph_(graph), node_id_(node_id), index_(index) {}
  bool valid() const { return graph_ != nullptr; }
  Graph* graph() const { return graph_; }
  int node_id() const { return node_id_; }
  int index() const { return index_; }
  const Node& node() const;
  const TensorType& type() const;
  DType dtype() const { return type().dtype; }
  const Shape& shape() const { return type().shape; }
  int rank() const { return static_cast<int>(shape().size()); }
  const std::string& name() const;  // the node's name ("dense/MatMul_1")
  bool operator==(const Tensor& o) const {
    return graph_ == o.graph_ && node_id_ == o.node_id_ && index_ == o.index_;
  }
  bool operator!=(const Tensor& o) const { return !(*this == o); }

 private:
  static const Node& NoSuchNode();  // the stand-in node() of a handle naming nothing

  Graph* graph_ = nullptr;
  int node_id_ = -1;
  int index_ = 0;
};

// ---- Typed attributes (one struct per op family; no string maps). ----
struct NoAttrs {};
struct PlaceholderAttrs {
  DType dtype;
  Shape shape;
};
struct ConstAttrs {
  std::shared_ptr<const HostTensor> value;
};
// A null initial value means "uninitialized until assigned".
struct VariableAttrs {
  DType dtype;
  Shape shape;
  std::shared_ptr<const HostTensor> initial_value;
};
struct CastAttrs {
  DType dtype;
};
// Axes are normalized at build time: non-negative, sorted, unique.
struct ReduceAttrs {
  std::vector<int> axes;
  bool keep_dims = false;
};
struct ArgMaxAttrs {
  int axis = 0;
};  // output is i32, the axis removed
struct MatMulAttrs {
  bool transpose_a = false;
  bool transpose_b = false;
};
struct ReshapeAttrs {
  Shape shape;
};  // as given; at most one -1
struct TransposeAttrs {
  std::vector<int> perm;
};
struct BroadcastToAttrs {
  Shape shape;
};
struct ConcatAttrs {
  int axis = 0;
};  // normalized
struct SliceAttrs {
  std::vector<int64_t> begin;
  std::vector<int64_t> size;
};  // size -1: to end
struct PadAttrs {
  std::vector<std::pair<int64_t, int64_t>> paddings;
  double value = 0;
};
// indices (i32, any shape) -> indices.shape + [depth] of `dtype`; out of range -> off.
struct OneHotAttrs {
  int64_t depth = 0;
  double on_value = 1;
  double off_value = 0;
  DType dtype = DType::kF32;
};
// Gather(params, indices) (TF's tf.gather, batch_dims = 0): indices (i32, any shape)
// pick slices of params along `axis`; the output is
// params.shape[:axis] + indices.shape + params.shape[axis + 1:]. An index outside
// [0, params.shape[axis]) reads zeros (docs/BAD_INPUT.md says why), never memory.
struct GatherAttrs {
  int axis = 0;  // normalized: 0 <= axis < params' rank
};
// UnsortedSegmentSum(data, segment_ids): TF's op, generalized to an axis (TF's is 0).
// segment_ids (i32) must have the shape of data.shape[axis : axis + ids' rank]; the
// output is data.shape[:axis] + [num_segments] + data.shape[axis + ids' rank:], each
// segment the sum of the data slices whose id names it, added in row-major order of
// the ids (the same order, compiled or not); an id outside [0, num_segments) is
// dropped. Gather's gradient, and its own gradient is a Gather.
struct SegmentSumAttrs {
  int axis = 0;  // normalized
  int64_t num_segments = 0;
};
// Iota(like): the 1-D tensor [0, 1, ..., n - 1] of `dtype` with n = like.shape[axis],
// which may be symbolic (-1); like's values are never read.
struct IotaAttrs {
  int axis = 0;  // normalized
  DType dtype = DType::kI32;
};
// RandomUniform(like, step) and RandomNormal(like, step): a tensor of like's shape whose
// element at row-major flat index i is a function of (seed, op_key, step, i) alone
// (docs/RANDOM.md): the same bits compiled or not, on every device and schedule.
// Uniform: [0, 1), f32 or f64; Normal: mean 0, variance 1, f32.
struct RandomAttrs {
  uint64_t seed = 0;  // the user's; Braze keeps no hidden random state
  // Tells two random ops of one program apart. Unset: Graph::AddNode sets it to
  // RandomOpKeyOf(the node's name) (braze/random.h), so re-building or re-tracing a
  // program gives the same bits and two ops of one graph differ.
  std::optional<uint64_t> op_key;
  DType dtype = DType::kF32;
};
// Convolution and pooling. Spatial dims are H and W; `format` says where N, H, W and C
// sit (NHWC: TF's default). Filters are [KH, KW, C_in / groups, C_out] in both formats
// (TF's HWIO); groups = C_in / the filter's dim 2 (C_out / groups filters per group:
// groups == C_in is a depthwise convolution).
enum class Padding : uint8_t {
  kValid,     // no padding: windows lie inside the input
  kSame,      // out = ceil(in / stride), the padding split with the extra after (TF)
  kExplicit,  // pad_top/bottom/left/right
};
enum class DataFormat : uint8_t { kNHWC, kNCHW };
// How a 2-D window (a filter, a pooling window) steps over the spatial dims.
struct Window2D {
  int stride_h = 1;
  int stride_w = 1;
  int dilation_h = 1;  // pooling: 1
  int dilation_w = 1;
  Padding padding = Padding::kValid;
  int64_t pad_top = 0;  // kExplicit only
  int64_t pad_bottom = 0;
  int64_t pad_left = 0;
  int64_t pad_right = 0;
  DataFormat format = DataFormat::kNHWC;
};
// Conv2D(x, filter). Conv2DBackpropInput(filter, dy): `shape` is x's.
// Conv2DBackpropFilter(x, dy): `shape` is the filter's. Empty for Conv2D.
struct Conv2DAttrs {
  Window2D window;
  Shape shape;
};
// MaxPool(x), AvgPool(x), MaxPoolGrad(x, dy), MaxPoolGradGrad(x, g) and
// AvgPoolGrad(dy) (`shape`: x's; empty for the others). Windows of size_h x size_w.
struct Pool2DAttrs {
  int64_t size_h = 1;
  int64_t size_w = 1;
  Window2D window;
  Shape shape;
};
// The attention ops (op_list.def's Attention section; docs/ATTENTION.md). q is
// [..., Tq, D], k [..., Tk, D] and v [..., Tk, Dv] with equal leading dims; the output is
// [..., Tq, Dv]. Key j is visible to query i unless causal and j > i + (Tk - Tq) (torch's
// is_causal when Tq == Tk); a query that sees no key gives 0 (its logsumexp -inf).
// Dropout zeroes each weight with probability `dropout` and scales the rest by
// 1 / (1 - dropout), as Dropout does: dropped where RandomUniform(weights, step, seed,
// dtype, op_key) < dropout, the uniform of the weight's row-major index in [..., Tq, Tk]
// (docs/RANDOM.md), the same bits in the fused kernels, the unfused composite and the
// reference. With a nonzero rate the ops take the i32 scalar step as their last input.
struct AttentionAttrs {
  bool causal = false;
  double scale = 1;  // of q k^T; the builder's default is 1 / sqrt(D)
  double dropout = 0;
  uint64_t seed = 0;
  uint64_t op_key = 0;  // the dropout stream's (braze/random.h's RandomKey(seed, op_key))
};
struct TensorSpec {
  DType dtype;
  Shape shape;
};  // -1 dims allowed
// A user's C++ function. It receives the inputs and must return tensors matching
// `outputs` (checked at run time); a non-OK status fails the Run naming the node.
using HostFunction =
    std::function<absl::StatusOr<std::vector<HostTensor>>(absl::Span<const HostTensor>)>;
struct HostCallAttrs {
  HostFunction fn;
  std::vector<TensorSpec> outputs;
};

// dp (issue 37): the collectives (op_list.def's kCollective ops; braze/distributed.h).
// A graph is built for one job: the world size and this process's rank when it was built
// (a run on a communicator of another size is FailedPrecondition naming the node).
// AllReduce sums over the ranks (the mean is a Mul after it, which fuses); Broadcast
// gives every rank `root`'s value; AllGather concatenates every rank's value along dim
// 0, rank r's at rows [r d0, (r + 1) d0).
struct CollectiveAttrs {
  int world_size = 1;
  int rank = 0;
  int root = 0;  // Broadcast
};

// cf (issue 40): control flow (braze/control_flow.h; docs/CONTROL_FLOW.md). A body is
// a sub-graph of its own, traced once from a C++ lambda: Placeholders `params` stand for
// what the op hands it, `results` are what it returns. Tensors of the enclosing graph
// that a body uses (captures) are explicit inputs of the op, after its operands.
struct Body {
  std::shared_ptr<Graph> graph;
  std::vector<Tensor> params;   // Placeholders of `graph`
  std::vector<Tensor> results;  // tensors of `graph` (invalid: the body returned none)
  std::string name;             // "then", "else", "cond", "body", "fn"
};
// Cond(pred, operands..., captures...): bodies {then, else}, each taking operands and
// captures. Scan(init..., elems..., captures...): bodies {fn}, fn(carry, elem slices,
// captures) -> (new carry, step outputs); the node's outputs are the final carry, the
// step outputs stacked along a new leading axis, and the carry before each step
// stacked (what the gradient reads, as TF's stacks). While(vars..., captures...): bodies
// {cond, body}, each taking vars and captures; cond returns a scalar bool.
struct ControlFlowAttrs {
  std::vector<std::shared_ptr<const Body>> bodies;
  int num_carried = 0;          // Scan, While: the loop-carried values (Cond: the operands)
  int num_elems = 0;            // Scan: the sequences scanned over their leading axis
  int64_t max_iterations = -1;  // While: the bound (-1: none)
  bool reverse = false;         // Scan: from the last element to the first
};

using Attrs =
    std::variant<NoAttrs, PlaceholderAttrs, ConstAttrs, VariableAttrs, CastAttrs, ReduceAttrs,
                 ArgMaxAttrs, MatMulAttrs, ReshapeAttrs, TransposeAttrs, BroadcastToAttrs,
                 ConcatAttrs, SliceAttrs, PadAttrs, OneHotAttrs, GatherAttrs, SegmentSumAttrs,
                 IotaAttrs, Conv2DAttrs, Pool2DAttrs, AttentionAttrs, RandomAttrs, CollectiveAttrs,
                 HostCallAttrs, ControlFlowAttrs>;

// What JitScope recorded on a node. `compile` is empty outside any scope (the op may be
// auto-clustered or join a neighbouring scope's cluster), true/false inside one.
struct JitInfo {
  std::optional<bool> compile;
  std::string scope;  // "jit_scope_0"; empty outside any scope
  bool separate_compiled_gradients = false;
};

class Node {
 public:
  int id() const { return id_; }
  OpKind op() const { return op_; }
  const char* op_name() const { return OpName(op_); }
  const std::string& name() const { return name_; }
  const std::vector<Tensor>& inputs() const { return inputs_; }
  const Tensor& input(int i) const { return inputs_[i]; }
  int num_inputs() const { return static_cast<int>(inputs_.size()); }
  const Attrs& attrs() const { return attrs_; }
  template <typename A>
  const A& attrs_as() const {
    return std::get<A>(attrs_);
  }
  const std::vector<TensorType>& outputs() const { return outputs_; }
  const TensorType& output(int i) const { return outputs_[i]; }
  int num_outputs() const { return static_cast<int>(outputs_.size()); }
  const JitInfo& jit() const { return jit_; }
  JitInfo& mutable_jit() { return jit_; }
  // Where the op is placed (DeviceScope); empty: no placement, the session's default.
  const std::optional<Device>& device() const { return device_; }
  // The build-time error of this node, if any (already names the node).
  const absl::Status& status() const { return status_; }
  bool is_stateful() const {
    return op_ == OpKind::kVariable || op_ == OpKind::kAssign || op_ == OpKind::kAssignAdd ||
           op_ == OpKind::kAssignSub || op_ == OpKind::kHostCall;
  }

 private:
  friend class Graph;
  friend class Tensor;  // the stand-in node of a handle naming nothing
  int id_ = -1;
  OpKind op_ = OpKind::kPlaceholder;
  std::string name_;
  std::vector<Tensor> inputs_;
  Attrs attrs_;
  std::vector<TensorType> outputs_;
  JitInfo jit_;
  std::optional<Device> device_;
  absl::Status status_;
};

// Read-only view handed to JitScope predicates (the seeds' NodeDef).
class NodeDef {
 public:
  explicit NodeDef(const Node& node) : node_(&node) {}
  const char* op() const { return node_->op_name(); }
  OpKind op_kind() const { return node_->op(); }
  const std::string& name() const { return node_->name(); }
  const Attrs& attrs() const { return node_->attrs(); }
  const Node& node() const { return *node_; }

 private:
  const Node* node_;
};

using CompilePredicate = std::function<bool(const NodeDef&)>;

// One entry of a graph's JIT scope stack (pushed/popped by JitScope).
struct JitScopeFrame {
  std::string scope;    // inherited from the outermost frame
  bool compile = true;  // used when `predicate` is empty
  CompilePredicate predicate;
  bool separate_compiled_gradients = false;
  uint64_t token = 0;  // identifies the JitScope that pushed it
};

class Graph {
 public:
  Graph();
  Graph(const Graph&) = delete;
  Graph& operator=(const Graph&) = delete;

  int num_nodes() const { return static_cast<int>(nodes_.size()); }
  const Node& node(int id) const { return *nodes_[id]; }
  Node& mutable_node(int id) { return *nodes_[id]; }
  uint64_t id() const { return id_; }

  // Adds a node: checks inputs, infers output types, records the node's error if any,
  // names it `<name scope>/<name or op name>[_N]` and applies the JIT scope stack.
  // Returns output 0 (a Tensor to a zero-output node is still valid as a target).
  Tensor AddNode(OpKind op, std::vector<Tensor> inputs, Attrs attrs, std::string_view name = "");
  // Every output of t's node; {} when `t` names no node of this graph or an index past
  // its node's outputs (HasOutput).
  std::vector<Tensor> Outputs(const Tensor& t) const;
  // True when `t` is a tensor of this graph naming an existing output (index 0 of a node
  // with no outputs too, when `allow_no_outputs`: such a handle is valid as a target).
  bool HasOutput(const Tensor& t, bool allow_no_outputs = false) const;

  // OK, or the first node error (naming it) or recorded misuse (e.g. JitScope order).
  absl::Status status() const { return first_error_; }
  // Records an error found outside AddNode (kept if it is the first).
  void RecordError(absl::Status status);
  // Capturing tensors of other graphs, for braze::Function: while set, AddNode hands
  // every input from another graph to `capture` and uses what it returns (or records
  // its error on the node). Capture(t) is t for a tensor of this graph, else the same
  // mapping (t unchanged when no capture function is set). Gradients and optimizers
  // map their variables through it, so a body can differentiate captured variables.
  using CaptureFn = std::function<absl::StatusOr<Tensor>(const Tensor& outside)>;
  void set_capture(CaptureFn capture) { capture_ = std::move(capture); }
  absl::StatusOr<Tensor> Capture(const Tensor& t);
  // Rolls the graph back to its first `num_nodes` nodes and sets status() back to
  // `status` (what it was then): a Function drops a trace that failed this way. Tensors
  // to the dropped nodes become invalid; nothing may run the graph meanwhile.
  void Truncate(int num_nodes, absl::Status status);
  // What Truncate does not restore: the names given out (UniqueName's counts, the JIT
  // scopes' numbers). A failed trace rolled back with them leaves the names of later ones
  // as if it never ran: its variables' checkpoint names, and the random ops' default keys
  // (made from their names), stay those of a program without the failure.
  struct NamesMark {
    std::unordered_map<std::string, int> counts;
    int next_jit_scope = 0;
  };
  NamesMark MarkNames() const { return {name_counts_, next_jit_scope_}; }
  void RestoreNames(NamesMark mark) {
    name_counts_ = std::move(mark.counts);
    next_jit_scope_ = mark.next_jit_scope;
  }
  // Finds a node by its full name.
  std::optional<Tensor> FindTensor(std::string_view name) const;

  // Name scopes: RAII, see NameScope below.
  void PushNameScope(std::string_view scope);
  void PopNameScope();
  std::string UniqueName(std::string_view base);

  // The JIT scope stack; use JitScope (braze/jit_scope.h), not these, directly.
  const std::vector<JitScopeFrame>& jit_frames() const { return jit_frames_; }
  std::vector<JitScopeFrame>& mutable_jit_frames() { return jit_frames_; }
  std::string NextJitScopeName();  // jit_scope_0, jit_scope_1, ...
  uint64_t NextToken() { return ++token_counter_; }

  // Device scope (tf.device): ops created while set record it; empty: no placement (the
  // session's default device). Use DeviceScope (braze/device.h), which parses names.
  void set_device(std::optional<Device> device) { device_ = device; }
  const std::optional<Device>& device() const { return device_; }

  // Mixed precision (braze/precision.h; use PrecisionScope): the compute dtype of the
  // autocast rule AddNode applies to the ops it builds; kF32: no rule.
  void set_compute_dtype(DType compute) { compute_dtype_ = compute; }
  DType compute_dtype() const { return compute_dtype_; }

  std::string DebugString() const;  // text printer, one node per line

 private:
  uint64_t id_;
  std::vector<std::unique_ptr<Node>> nodes_;
  std::vector<std::string> name_scopes_;
  std::vector<JitScopeFrame> jit_frames_;
  int next_jit_scope_ = 0;
  uint64_t token_counter_ = 0;
  std::optional<Device> device_;
  absl::Status first_error_;
  std::unordered_map<std::string, int> name_counts_;  // for UniqueName
  CaptureFn capture_;
  DType compute_dtype_ = DType::kF32;
  bool autocasting_ = false;  // AddNode is building the autocast's own Casts
};

// RAII name scope: ops built inside are named "scope/Op".
class NameScope {
 public:
  NameScope(Graph& g, std::string_view scope) : g_(g) { g_.PushNameScope(scope); }
  ~NameScope() { g_.PopNameScope(); }
  NameScope(const NameScope&) = delete;
  NameScope& operator=(const NameScope&) = delete;

 private:
  Graph& g_;
};

// Infers the output types of `op` given input types and attrs. Used at build time
// (dims may be -1) and at run time with concrete shapes. Errors do not name the node;
// callers prefix the node name.
absl::StatusOr<std::vector<TensorType>> InferOutputTypes(OpKind op, const Attrs& attrs,
                                                         absl::Span<const TensorType> inputs);

// Checks every node: inputs exist and precede it, arity, attrs variant, stored types
// equal re-inferred types. Returns the first problem, naming the node.
absl::Status VerifyGraph(const Graph& g);

}  // namespace braze

#endif  // BRAZE_GRAPH_H_
