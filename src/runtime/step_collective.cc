// The collective step kind (kCollective; dp, issue 37): an AllReduce, Broadcast or
// AllGather node (op_list.def's kCollective ops) runs on the job's communicator
// (device/communicator.h), never inside a fused kernel: the plan claims every needed
// collective before clustering, so none joins a cluster, and orders each one as soon
// as its input is ready (run_early).
//
// Running: the input is brought to the host. When it dies at this step (Step::input_dies:
// no other reader, not fetched) in a buffer the executor owns (another step's output), an
// AllReduce sums in place there (MPI_IN_PLACE) and a Broadcast sends or receives there,
// and that buffer becomes the output: no buffer of the step's own, no copy. Otherwise the
// all-reduce and all-gather read the input where it is and write the step's buffer (the
// broadcast's root copies its input there first). Then the call is enqueued on the process's
// communication thread (comm::ProcessCommQueue) and the executor goes on with the steps
// that do not read the result; the first step that does waits for it (Executor::
// AddPending), and the Run waits for every collective before its fetches and commits.
// So a data-parallel step's bucket all-reduces overlap the rest of its backward pass;
// on the timeline each is a bar of category "collective" on the communication thread.
// In a world of one a collective is the identity (no copy, no thread).
#include <cstring>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "braze/status.h"
#include "device/communicator.h"
#include "ir/timeline.h"
#include "runtime/executor.h"
#include "runtime/step_kind.h"

namespace braze {
namespace {

// The work of one collective on host buffers, run on the communication thread.
absl::Status Communicate(comm::Communicator& c, OpKind op, const CollectiveAttrs& a,
                         const HostTensor* in, HostTensor* out) {
  const int64_t count = in->num_elements();
  switch (op) {
    case OpKind::kAllReduce:
      return c.AllReduceSum(in->raw_data(), out->raw_data(), count, out->dtype());
    case OpKind::kBroadcast:
      return c.Broadcast(out->raw_data(), count, out->dtype(), a.root);
    case OpKind::kAllGather:
      return c.AllGather(in->raw_data(), count, in->dtype(), out->raw_data());
    default:
      return absl::InternalError(absl::StrCat(OpName(op), " is not a collective"));
  }
}

// Whether node `reader` is the only needed reader of `t` and `t` is not fetched: then its
// value is dead after `reader` runs. (Counted on the graph, before clustering: a reader
// inside a cluster still counts, so a value a cluster reads too is never reduced in place.)
bool OnlyReader(const PlanView& plan, const Tensor& t, int reader) {
  if (plan.fetched.count({t.node_id(), t.index()}) > 0) return false;
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

class CollectiveKind : public StepKind {
 public:
  std::vector<Step> Claim(const PlanView& plan) const override {
    std::vector<Step> steps;
    for (int id = 0; id < plan.g.num_nodes(); ++id) {
      const Node& n = plan.g.node(id);
      if (!plan.needed[id] || OpCategoryOf(n.op()) != OpCategory::kCollective) continue;
      Step s;
      s.kind = Step::Kind::kCollective;
      s.space = Space::kHost;
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
    BRAZE_ASSIGN_OR_RETURN(Value host, ex.In(step.inputs[0], inputs[0], Space::kHost, Device{}));
    const OpKind op = node.op();
    HostTensor* dest = InPlaceBuffer(ex, step, op, host);
    if (dest != nullptr) {
      ++ex.stats().collectives_in_place;
    } else {
      state.buffers.resize(1);
      dest = &state.buffers[0];
      if (dest->type() != (*out_types)[0])
        *dest = HostTensor((*out_types)[0].dtype, (*out_types)[0].shape);
      // A broadcast's root sends from its output buffer; the all-reduce and all-gather
      // read the input where it is (valid until the Run ends: it waits for every
      // collective).
      if (op == OpKind::kBroadcast && world->rank() == a.root && host.host->num_bytes() > 0) {
        std::memcpy(dest->raw_data(), host.host->raw_data(), host.host->num_bytes());
      }
    }
    ++ex.stats().collectives;
    const HostTensor* in = host.host;
    const std::string label = NodeLabel(node);
    const std::string name = step.name;
    std::shared_future<absl::Status> done =
        comm::ProcessCommQueue().Enqueue([world, op, a, in, dest, label, name]() {
          TimelineEvent trace(name, "collective");  // on the communication thread's row
          absl::Status s = Communicate(*world, op, a, in, dest);
          return s.ok() ? s : Annotate(label, s);
        });
    ex.BindHost(step.outputs[0], dest);
    ex.AddPending(step.outputs[0], std::move(done));
    return absl::OkStatus();
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
