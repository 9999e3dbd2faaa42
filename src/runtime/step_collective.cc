// The collective step kind (kCollective; dp, issue 37): an AllReduce, Broadcast or
// AllGather node (op_list.def's kCollective ops) runs on the job's communicators
// (device/communicator.h), never inside a fused kernel: the plan claims every needed
// collective before clustering, so none joins a cluster, and orders each one as soon
// as its input is ready (run_early).
//
// Where it runs follows where its value lives (the node's placement): on a CUDA device
// the step is a device step and the collective runs on NCCL on device memory, from the
// input where it is into a device buffer of the step's own (NCCL reads and writes device
// memory directly, so out of place costs no copy); the value never visits the host.
// Elsewhere (the host, jit:cpu, an OpenCL device) the input is brought to the host and
// the collective runs on MPI. There, when the input dies at this step (Step::input_dies:
// no other reader, not fetched) in a buffer the executor owns (another step's output),
// an AllReduce sums in place there (MPI_IN_PLACE) and a Broadcast sends or receives
// there, and that buffer becomes the output: no buffer of the step's own, no copy.
// Otherwise the all-reduce and all-gather read the input where it is and write the
// step's buffer (the broadcast's root copies its input there first).
//
// Then the call runs on the process's communication queue (comm::ProcessCommQueue), in
// plan order on every rank. When steps the executor can run come before the first
// reader of the result, the call is handed to the communication thread and the executor
// goes on; the first step that reads the result waits for it (Executor::AddPending,
// which runs queued calls itself rather than sleep), and the Run waits for every
// collective before its fetches and commits. So a data-parallel step's bucket
// all-reduces overlap the rest of its backward pass; on the timeline each is a bar of
// category "collective" on the communication thread. When nothing could overlap it
// (Step::run_here) the executor makes the call itself: a hand-off would only add two
// thread wake-ups to its time. In a world of one a collective is the identity (no copy,
// no thread).
#include <cstring>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "braze/status.h"
#include "device/communicator.h"
#include "device/device_tensor.h"
#include "ir/timeline.h"
#include "runtime/executor.h"
#include "runtime/step_kind.h"

namespace braze {
namespace {

// The work of one collective on raw buffers (host memory for MPI, CUdeviceptr for
// NCCL): `count` elements of the input per rank.
absl::Status Communicate(comm::Communicator& c, OpKind op, const CollectiveAttrs& a, const void* in,
                         void* out, int64_t count, DType dtype) {
  switch (op) {
    case OpKind::kAllReduce:
      return c.AllReduceSum(in, out, count, dtype);
    case OpKind::kBroadcast:
      return c.Broadcast(out, count, dtype, a.root);
    case OpKind::kAllGather:
      return c.AllGather(in, count, dtype, out);
    default:
      return absl::InternalError(absl::StrCat(OpName(op), " is not a collective"));
  }
}

// OK when every rank's input has `count` elements, else InvalidArgument listing them (on
// every rank alike, so none is left waiting). Asked only of an input with a dynamic dim:
// one graph gives every rank the same static shapes, while a -1 dim takes whatever each
// rank feeds (a last, uneven shard), and MPI given other counts on each rank does not
// fail cleanly (Open MPI's libnbc: MPI_ERR_TRUNCATE, then a crash in its error path).
// The counts travel on the host's MPI communicator.
absl::Status SameCountOnEveryRank(OpKind op, int64_t count) {
  comm::Communicator* world = comm::World();
  if (world == nullptr) return absl::OkStatus();
  BRAZE_ASSIGN_OR_RETURN(const std::vector<int64_t> counts, comm::ValueOfEveryRank(*world, count));
  bool same = true;
  std::string each;
  for (size_t r = 0; r < counts.size(); ++r) {
    same = same && counts[r] == counts[0];
    absl::StrAppend(&each, r == 0 ? "" : ", ", "rank ", r, ": ", counts[r]);
  }
  if (same) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      "the ranks' inputs differ in size (elements on ", each, "): a dynamic dim must have the ",
      "same size on every rank for ", OpName(op), " (feed every rank the same number of rows)"));
}

// The work queued for one collective: the call on the communicator for `memory` (the
// host's MPI, or NCCL on a CUDA device, made at its first use: in queue order, as the
// other ranks make theirs), a timeline bar on the thread that runs it. With
// `agree_count` (an input with a dynamic dim) the ranks first agree on the size.
std::function<absl::Status()> Work(const Step& step, const Node& node, const Device& memory,
                                   const void* in, void* out, int64_t count, DType dtype) {
  const CollectiveAttrs a = node.attrs_as<CollectiveAttrs>();
  const bool agree_count = !IsFullyDefined(node.input(0).type().shape);
  return [op = node.op(), a, memory, in, out, count, dtype, agree_count, label = NodeLabel(node),
          name = step.name]() {
    TimelineEvent trace(name, "collective");
    absl::Status s = agree_count ? SameCountOnEveryRank(op, count) : absl::OkStatus();
    if (s.ok()) {
      absl::StatusOr<comm::Communicator*> c = comm::CommunicatorFor(memory);
      s = c.ok() ? Communicate(**c, op, a, in, out, count, dtype) : c.status();
    }
    return s.ok() ? s : Annotate(label, s);
  };
}

// Makes the call: here when nothing could overlap it (Step::run_here), else on the
// communication thread, the output pending until then.
absl::Status Start(Executor& ex, const Step& step, std::function<absl::Status()> work) {
  if (step.run_here) {
    ++ex.stats().collectives_run_here;
    return comm::ProcessCommQueue().RunHere(std::move(work));
  }
  ex.AddPending(step.outputs[0], comm::ProcessCommQueue().Enqueue(std::move(work)));
  return absl::OkStatus();
}

// Whether node `reader` is the only needed reader of `t` and `t` is not fetched: then its
// value is dead after `reader` runs. (Counted on the graph, before clustering: a reader
// inside a cluster still counts, so a value a cluster reads too is never reduced in place.)
bool OnlyReader(const PlanView& plan, const Tensor& t, int reader) {
  if (plan.fetched.count({t.node_id(), t.index()}) > 0) return false;
  // A state op's output is also its variable's pending update, and Assign's is its value's
  // own buffer (which other ops may read): reduced in place, the variable took the sum.
  if (OpCategoryOf(plan.g.node(t.node_id()).op()) == OpCategory::kState) return false;
  for (int id = 0; id < plan.g.num_nodes(); ++id) {
    if (!plan.needed[id] || id == reader) continue;
    for (const Tensor& in : plan.g.node(id).inputs()) {
      if (in == t) return false;
    }
  }
  // A node reading it twice (AllReduce has one input; kept general).
  int uses = 0;
  for (const Tensor& in : plan.g.node(reader).inputs()) uses += in == t ? 1 : 0;
  return uses == 1;
}

// The buffer an AllReduce or Broadcast may work in place on: the input's, when it dies
// at this step and the executor owns it (a step's output, not a feed, a variable, a
// mirror or a caller's fetch tensor); else nullptr.
HostTensor* InPlaceBuffer(Executor& ex, const Step& step, OpKind op, const Value& host) {
  if (!step.input_dies || (op != OpKind::kAllReduce && op != OpKind::kBroadcast)) return nullptr;
  if (host.variable >= 0 || host.host == nullptr) return nullptr;
  return ex.StepBuffer(host.host);
}

// MPI on host memory, in place on a dead input the executor owns (InPlaceBuffer).
absl::Status RunOnHost(Executor& ex, const Step& step, StepState& state, const Node& node,
                       const TensorType& out_type, const Value& input, int rank) {
  BRAZE_ASSIGN_OR_RETURN(Value host, ex.In(step.inputs[0], input, Space::kHost, Device{}));
  const OpKind op = node.op();
  HostTensor* dest = InPlaceBuffer(ex, step, op, host);
  if (dest != nullptr) {
    ++ex.stats().collectives_in_place;
  } else {
    state.buffers.resize(1);
    dest = &state.buffers[0];
    if (dest->type() != out_type) *dest = HostTensor(out_type.dtype, out_type.shape);
    // A broadcast's root sends from its output buffer; the all-reduce and all-gather
    // read the input where it is (valid until the Run ends: it waits for every
    // collective).
    const int root = node.attrs_as<CollectiveAttrs>().root;
    if (op == OpKind::kBroadcast && rank == root && host.host->num_bytes() > 0) {
      std::memcpy(dest->raw_data(), host.host->raw_data(), host.host->num_bytes());
    }
  }
  const HostTensor* in = host.host;
  ex.BindHost(step.outputs[0], dest);
  return Start(ex, step,
               Work(step, node, Device{}, in->raw_data(), dest->raw_data(), in->num_elements(),
                    in->dtype()));
}

// NCCL on the CUDA device step.device: the input brought there if it lives elsewhere (a
// feed), the result in the step's device buffer.
absl::Status RunOnDevice(Executor& ex, const Step& step, StepState& state, const Node& node,
                         const TensorType& out_type, const Value& input) {
  BRAZE_ASSIGN_OR_RETURN(Value in, ex.In(step.inputs[0], input, Space::kDevice, step.device));
  BRAZE_RETURN_IF_ERROR(ex.EnsureDeviceBuffers(step, state, {out_type}));
  DeviceTensor* out = state.device_buffers[0].get();
  const CollectiveAttrs& a = node.attrs_as<CollectiveAttrs>();
  if (node.op() == OpKind::kBroadcast && comm::World()->rank() == a.root && out->num_bytes() > 0) {
    // The root sends from the output buffer (ordered on the stream before the call).
    if (absl::Status s = out->CopyFrom(*in.device); !s.ok()) return Annotate(NodeLabel(node), s);
  }
  ++ex.stats().collectives_on_device;
  Value v;
  v.space = Space::kDevice;
  v.device = out;
  ex.Slot(step.outputs[0]) = v;
  const void* from = reinterpret_cast<const void*>(in.device->device_address());
  void* to = reinterpret_cast<void*>(out->device_address());
  return Start(
      ex, step,
      Work(step, node, step.device, from, to, in.device->num_elements(), in.device->type().dtype));
}

class CollectiveKind : public StepKind {
 public:
  std::vector<Step> Claim(const PlanView& plan) const override {
    std::vector<Step> steps;
    for (int id = 0; id < plan.g.num_nodes(); ++id) {
      const Node& n = plan.g.node(id);
      if (!plan.needed[id] || OpCategoryOf(n.op()) != OpCategory::kCollective) continue;
      Step s;
      s.kind = Step::Kind::kCollective;
      // On a CUDA device's memory: NCCL there; anywhere else: MPI on the host.
      const Device memory = plan.memory_device(id);
      s.space = memory.kind == Device::Kind::kCuda ? Space::kDevice : Space::kHost;
      if (s.space == Space::kDevice) s.device = memory;
      s.name = n.name();
      s.nodes = {id};
      s.inputs = n.inputs();
      s.outputs = {Tensor(const_cast<Graph*>(&plan.g), id, 0)};
      s.input_dies = OnlyReader(plan, n.input(0), id);
      steps.push_back(std::move(s));
    }
    return steps;
  }

  absl::Status Run(Executor& ex, const Step& step, StepState& state,
                   const std::vector<Value>& inputs, const std::vector<TensorType>& types,
                   bool compile_only) const override {
    const Node& node = ex.graph().node(step.nodes.front());
    const CollectiveAttrs& a = node.attrs_as<CollectiveAttrs>();
    comm::Communicator* world = comm::World();
    const int size = world != nullptr ? world->size() : 1;
    if (size != a.world_size || (world != nullptr && world->rank() != a.rank)) {
      return absl::FailedPreconditionError(absl::StrCat(
          NodeLabel(node), " was built for rank ", a.rank, " of a world of ", a.world_size,
          " processes, but this process is rank ", world != nullptr ? world->rank() : 0, " of ",
          size, " (build the graph after InitDistributed)"));
    }
    auto out_types = InferOutputTypes(node.op(), node.attrs(), types);
    if (!out_types.ok()) return Annotate(NodeLabel(node), out_types.status());
    if (compile_only) {
      ex.StandIn(step, state, *out_types);
      return absl::OkStatus();
    }
    if (world == nullptr) {  // a world of one: the identity
      ex.Slot(step.outputs[0]) = inputs[0];
      return absl::OkStatus();
    }
    ++ex.stats().collectives;
    if (step.space == Space::kDevice) {
      return RunOnDevice(ex, step, state, node, (*out_types)[0], inputs[0]);
    }
    return RunOnHost(ex, step, state, node, (*out_types)[0], inputs[0], world->rank());
  }

  bool run_early() const override { return true; }
  // A collective has no fallback: every rank must take part in it.
  const char* instead() const override { return "nothing else can run it"; }
  const char* runs_as() const override { return "collective"; }
};

}  // namespace

const StepKind& CollectiveStepKind() {
  static const CollectiveKind kind;
  return kind;
}

}  // namespace braze
