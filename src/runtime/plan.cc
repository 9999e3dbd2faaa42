// BuildPlan: the planning stages listed in plan.h, one function each, run in order.
#include "runtime/plan.h"

#include <algorithm>
#include <limits>
#include <map>
#include <set>
#include <unordered_map>

#include "absl/strings/str_cat.h"
#include "braze/device.h"
#include "braze/status.h"
#include "device/features.h"
#include "ir/logging.h"
#include "runtime/remat.h"
#include "runtime/step_kind.h"

namespace braze {
namespace {

bool IsSource(OpKind op) {
  return op == OpKind::kPlaceholder || op == OpKind::kVariable || op == OpKind::kConst;
}

Space SpaceOf(const Device& d) {
  if (device::FeaturesOf(d).device_memory) return Space::kDevice;
  return d.force_compile ? Space::kJitCpu : Space::kHost;
}

// The device whose memory a step's values live in: "jit:cuda:0" computes in cuda:0's.
Device MemoryDevice(Device d) {
  d.force_compile = false;
  return d;
}

// What the stages share: the graph, the options, and what earlier stages found.
struct Planning {
  const Graph& g;
  const SessionOptions& options;
  Device default_device;       // SessionOptions::device, resolved when the session started
  std::vector<Device> device;  // by node id, for needed nodes (Place)
  std::set<std::pair<int, int>> fetched;
  std::vector<std::vector<int>> consumers;  // needed consumers, by node id
  // Steps kinds claimed before clustering (Claim), and by node id whether one did
  // (and why the node is in no cluster: the kind's claim_reason).
  std::vector<Step> claimed_steps;
  std::vector<bool> claimed;
  std::vector<ExclusionReason> claimed_as;
  // By node id of a needed Assign/AssignAdd/AssignSub: the needed one on the same
  // variable just before it in node (program) order, whose result it updates.
  std::unordered_map<int, int> prior_update;
  Plan* plan = nullptr;
};

Tensor OutputOf(const Graph& g, int id, int o) { return Tensor(const_cast<Graph*>(&g), id, o); }

// 1. The nodes the fetches and targets need, stopping at fed tensors.
void Prune(const std::vector<Tensor>& fetches, const std::vector<Tensor>& targets,
           const std::vector<bool>& fed, Planning& p) {
  std::vector<bool>& needed = p.plan->needed;
  needed.assign(p.g.num_nodes(), false);
  std::vector<int> stack;
  for (const Tensor& t : fetches) stack.push_back(t.node_id());
  for (const Tensor& t : targets) stack.push_back(t.node_id());
  while (!stack.empty()) {
    const int id = stack.back();
    stack.pop_back();
    if (needed[id] || fed[id]) continue;
    needed[id] = true;
    for (const Tensor& in : p.g.node(id).inputs()) stack.push_back(in.node_id());
  }
  p.consumers.assign(p.g.num_nodes(), {});
  for (int id = 0; id < p.g.num_nodes(); ++id) {
    if (!needed[id]) continue;
    for (const Tensor& in : p.g.node(id).inputs()) p.consumers[in.node_id()].push_back(id);
  }
  for (const Tensor& t : fetches) p.fetched.insert({t.node_id(), t.index()});
  // A target that is not an update is run for its value, as TF runs it: a cluster
  // computing it has it as an output (else the cluster would have none and fall back).
  for (const Tensor& t : targets) {
    if (!t.node().is_stateful()) p.fetched.insert({t.node_id(), t.index()});
  }
}

// 2. Strict mode: an op marked for compilation that has no lowering is the user's error.
absl::Status CheckStrict(Planning& p) {
  if (!p.options.strict) return absl::OkStatus();
  for (int id = 0; id < p.g.num_nodes(); ++id) {
    const Node& n = p.g.node(id);
    if (p.plan->needed[id] && n.jit().compile.value_or(false) && n.op() == OpKind::kHostCall) {
      return absl::InvalidArgumentError(
          absl::StrCat("node '", n.name(),
                       "' (HostCall) is marked for compilation but has no Halide "
                       "lowering (strict mode)"));
    }
  }
  return absl::OkStatus();
}

// 3. Every needed op's device (its placement, else the session's); the device must be
// available on this machine (its backend's check, device/features.h).
absl::Status Place(Planning& p) {
  p.device.assign(p.g.num_nodes(), Device{});
  for (int id = 0; id < p.g.num_nodes(); ++id) {
    if (!p.plan->needed[id]) continue;
    const Node& n = p.g.node(id);
    const Device d = n.device().value_or(p.default_device);
    absl::Status available = device::CheckAvailable(d);
    if (!available.ok()) {
      return absl::Status(available.code(), absl::StrCat("node '", n.name(), "' is placed on ",
                                                         d.ToString(), ": ", available.message()));
    }
    p.device[id] = d;
  }
  return absl::OkStatus();
}

// 4. Steps that step kinds claim before clustering (runtime/step_kind.h): a library
// GEMM's MatMul and epilogue, say. Their nodes are kept out of clusters.
std::vector<Step> OpByOp(const Planning& p, const std::vector<int>& nodes);

void Claim(Planning& p) {
  p.claimed.assign(p.g.num_nodes(), false);
  p.claimed_as.assign(p.g.num_nodes(), ExclusionReason::kNone);
  const PlanView view{p.g,
                      p.options,
                      p.plan->needed,
                      p.fetched,
                      p.default_device,
                      [&p](int id) { return MemoryDevice(p.device[id]); },
                      [&p](const std::vector<int>& nodes) { return OpByOp(p, nodes); }};
  for (const StepKind* kind : AllStepKinds()) {
    for (Step& s : kind->Claim(view)) {
      for (int id : s.nodes) {
        p.claimed[id] = true;
        p.claimed_as[id] = kind->claim_reason();
      }
      p.claimed_steps.push_back(std::move(s));
    }
  }
}

// Says (info, once per plan) which compile=true scopes max_cluster_size split into
// several clusters: a user of jit_compile expects one kernel per scope, and the bound is
// a default (SessionOptions::max_cluster_size) they may not know of. Every part is still
// compiled.
void SayScopesSplitBySize(const ClusteringResult& result, int max_cluster_size) {
  std::set<std::string> split;
  for (const MergeRefusal& r : result.refusals) {
    if (r.reason != ExclusionReason::kMaxClusterSize) continue;
    for (int id : {r.producer, r.consumer}) {
      const int c = result.ClusterOf(id);
      if (c >= 0 && result.clusters[c].explicit_scope) split.insert(result.clusters[c].scope);
    }
  }
  if (split.empty()) return;
  std::map<std::string, std::pair<int, size_t>> parts;  // scope -> clusters, ops
  for (const Cluster& c : result.clusters) {
    if (!split.count(c.scope)) continue;
    ++parts[c.scope].first;
    parts[c.scope].second += c.nodes.size();
  }
  for (const auto& [scope, count] : parts) {
    LogInfo(
        0, absl::StrCat("JIT scope ", scope.empty() ? "(none)" : scope, ": ", count.second,
                        " ops compiled as ", count.first, " clusters of at most ", max_cluster_size,
                        " ops (SessionOptions::max_cluster_size: Halide's lowering time "
                        "grows faster than a cluster's size)"));
  }
}

// 5. Clusters of compilable ops (the Cluster stage).
absl::Status ClusterOps(Planning& p) {
  ClusteringResult& result = p.plan->clustering;
  if (p.options.reference_only) {
    result.nodes.resize(p.g.num_nodes());
    return absl::OkStatus();
  }
  ClusteringOptions o;
  o.default_device = p.default_device;
  o.auto_cluster = p.options.global_jit_level != JitLevel::kOff;
  o.min_cluster_size = p.options.min_cluster_size;
  o.max_cluster_size = p.options.max_cluster_size;
  o.max_matmuls_per_cluster = p.options.max_matmuls_per_cluster;
  o.claimed = p.claimed_as;
  for (const auto& [id, prior] : p.prior_update) o.extra_edges.emplace_back(prior, id);
  BRAZE_ASSIGN_OR_RETURN(result, MarkForCompilation(p.g, o, p.plan->needed));
  SayScopesSplitBySize(result, p.options.max_cluster_size);
  return absl::OkStatus();
}

// 6. Steps, each with its fallback.
Step ReferenceStep(const Step& s) {
  Step ref;
  ref.kind = Step::Kind::kReference;
  ref.name = s.name;
  ref.nodes = s.nodes;
  ref.inputs = s.inputs;
  ref.outputs = s.outputs;
  return ref;
}

Step SingleStep(const Planning& p, int id) {
  const Node& n = p.g.node(id);
  Step s;
  s.kind = (!p.options.reference_only && OpIsCompilable(n.op())) ? Step::Kind::kSingleOp
                                                                 : Step::Kind::kReference;
  if (s.kind == Step::Kind::kSingleOp) {
    s.space = SpaceOf(p.device[id]);
    s.device = MemoryDevice(p.device[id]);
  }
  s.name = n.name();
  s.nodes = {id};
  s.inputs = n.inputs();
  // Several updates of one variable in a Run apply in program order, as tf.function's
  // automatic control dependencies order them: each updates the one before it (reads of
  // the variable still see its value from before the Run). Each computed its value from
  // the variable's, and the last one won: AssignAdd(v, 1) and AssignAdd(v, 10) left
  // v + 10 (a black-box test).
  if (auto it = p.prior_update.find(id); it != p.prior_update.end()) {
    s.inputs[0] = OutputOf(p.g, it->second, 0);
  }
  for (int o = 0; o < n.num_outputs(); ++o) s.outputs.push_back(OutputOf(p.g, id, o));
  if (s.kind == Step::Kind::kSingleOp) s.fallback.push_back(ReferenceStep(s));
  return s;
}

// One step per op of `nodes` (a cluster's or GEMM's fallback).
std::vector<Step> OpByOp(const Planning& p, const std::vector<int>& nodes) {
  std::vector<Step> steps;
  for (int id : nodes) {
    if (!IsSource(p.g.node(id).op())) steps.push_back(SingleStep(p, id));
  }
  return steps;
}

Step ClusterStep(const Planning& p, const Cluster& cluster) {
  Step s;
  s.kind = Step::Kind::kCluster;
  s.name = cluster.name;
  s.nodes = cluster.nodes;
  s.space = SpaceOf(p.device[cluster.nodes.front()]);  // one device per cluster
  s.device = MemoryDevice(p.device[cluster.nodes.front()]);
  const std::set<int> members(cluster.nodes.begin(), cluster.nodes.end());
  for (int m : cluster.nodes) {
    const Node& mn = p.g.node(m);
    for (const Tensor& in : mn.inputs()) {
      if (!members.count(in.node_id()) &&
          std::find(s.inputs.begin(), s.inputs.end(), in) == s.inputs.end()) {
        s.inputs.push_back(in);
      }
    }
    for (int o = 0; o < mn.num_outputs(); ++o) {
      bool escapes = p.fetched.count({m, o}) > 0;
      for (int user : p.consumers[m]) {
        if (members.count(user)) continue;
        for (const Tensor& in : p.g.node(user).inputs()) {
          if (in.node_id() == m && in.index() == o) escapes = true;
        }
      }
      if (escapes) s.outputs.push_back(OutputOf(p.g, m, o));
    }
  }
  s.fallback = OpByOp(p, s.nodes);
  return s;
}

// Drops the cluster steps that Remat left writing nothing: every value they computed
// is now computed by each step that reads it (a kernel with no outputs is no kernel,
// and compiling one is an error). Clusters hold no stateful op, so nothing is lost;
// `step_of` follows the steps that stay.
void DropDeadClusters(std::vector<Step>* steps, std::unordered_map<int, int>* step_of) {
  std::vector<int> new_index(steps->size(), -1);
  std::vector<Step> kept;
  for (size_t i = 0; i < steps->size(); ++i) {
    Step& s = (*steps)[i];
    if (s.kind == Step::Kind::kCluster && s.outputs.empty()) continue;
    new_index[i] = static_cast<int>(kept.size());
    kept.push_back(std::move(s));
  }
  for (auto it = step_of->begin(); it != step_of->end();) {
    const int to = new_index[it->second];
    if (to < 0) {
      it = step_of->erase(it);
    } else {
      it->second = to;
      ++it;
    }
  }
  *steps = std::move(kept);
}

// Planning::prior_update for the needed nodes.
void ChainUpdates(Planning& p) {
  std::unordered_map<int, int> last;  // variable node id -> its latest needed update
  for (int id = 0; id < p.g.num_nodes(); ++id) {
    const Node& n = p.g.node(id);
    if (!p.plan->needed[id] || OpCategoryOf(n.op()) != OpCategory::kState) continue;
    const int var = n.input(0).node_id();
    if (auto it = last.find(var); it != last.end()) p.prior_update[id] = it->second;
    last[var] = id;
  }
}

// A Variable fed in a Run that also updates it is an error: the fed value would stand
// for the variable in every read, the update's base included, so AssignAdd(w, 1) with w
// fed 5 committed 6 (TF2 updates the stored value instead, TF1 refuses to feed a ref).
// Which one a user meant is not knowable; feed the variable or update it, not both.
absl::Status CheckFedUpdates(const Planning& p, const std::vector<bool>& fed) {
  for (int id = 0; id < p.g.num_nodes(); ++id) {
    const Node& n = p.g.node(id);
    if (!p.plan->needed[id] || OpCategoryOf(n.op()) != OpCategory::kState) continue;
    const Node& var = n.input(0).node();
    if (!fed[var.id()]) continue;
    return absl::InvalidArgumentError(
        absl::StrCat("node '", var.name(), "' (", var.op_name(), ") is fed and updated by node '",
                     n.name(), "' (", n.op_name(), ")",
                     " in the same Run: the update would apply to the fed value; feed the "
                     "variable or update it, not both"));
  }
  return absl::OkStatus();
}

// Steps in node-id order of their first node; `step_of` maps node ids to them.
std::vector<Step> MakeSteps(const Planning& p, std::unordered_map<int, int>* step_of) {
  const ClusteringResult& cl = p.plan->clustering;
  std::unordered_map<int, const Step*> claimed_at;  // first node id -> claimed step
  for (const Step& s : p.claimed_steps) claimed_at[s.nodes.front()] = &s;
  std::vector<Step> steps;
  std::vector<bool> emitted_cluster(cl.clusters.size(), false);
  auto add = [&](Step s) {
    for (int m : s.nodes) (*step_of)[m] = static_cast<int>(steps.size());
    steps.push_back(std::move(s));
  };
  for (int id = 0; id < p.g.num_nodes(); ++id) {
    if (!p.plan->needed[id]) continue;
    const int c = cl.ClusterOf(id);
    if (c >= 0) {
      if (!emitted_cluster[c]) add(ClusterStep(p, cl.clusters[c]));
      emitted_cluster[c] = true;
    } else if (p.claimed[id]) {
      auto it = claimed_at.find(id);
      if (it != claimed_at.end()) add(*it->second);  // else a later node of that step
    } else if (!IsSource(p.g.node(id).op())) {
      add(SingleStep(p, id));
    }
  }
  return steps;
}

// A GPU heuristic plan as the session's scheduler schedules GPU kernels only: a
// compiled step on the host under it is the caller's error, not a silent safe default.
absl::Status CheckScheduler(const SessionOptions& options, const std::vector<Step>& steps) {
  if (!IsGpuHeuristic(options.scheduler)) return absl::OkStatus();
  for (const Step& s : steps) {
    if (s.space != Space::kDevice && !s.fallback.empty() && s.kind != Step::Kind::kReference) {
      return absl::InvalidArgumentError(absl::StrCat(
          "SessionOptions::scheduler is ", SchedulerName(options.scheduler),
          ", a GPU heuristic plan, but '", s.name, "' compiles for the CPU; CPU schedulers: ",
          "Auto, Adams2019, Mullapudi2016, Li2018, SafeDefault"));
    }
  }
  return absl::OkStatus();
}

// For each step, the index of the first collective step (in graph order) it is, or
// leads to; all 0 in a plan without collectives (then Order keeps graph order alone).
std::vector<int> EarliestCollective(const std::vector<Step>& steps,
                                    const std::vector<std::set<int>>& succ) {
  const int n = static_cast<int>(steps.size());
  constexpr int kNone = std::numeric_limits<int>::max();
  std::vector<int> lead(n, kNone);
  bool any = false;
  for (int s = 0; s < n; ++s) {
    if (StepKindOf(steps[s].kind).run_early()) lead[s] = s, any = true;
  }
  if (!any) return std::vector<int>(n, 0);
  // Successors first (an iterative depth-first post-order over the acyclic step graph).
  std::vector<char> done(n, 0);
  for (int root = 0; root < n; ++root) {
    if (done[root]) continue;
    std::vector<std::pair<int, std::set<int>::const_iterator>> stack = {{root, succ[root].begin()}};
    done[root] = 1;
    while (!stack.empty()) {
      auto& [s, it] = stack.back();
      if (it != succ[s].end()) {
        const int t = *it++;
        if (!done[t]) {
          done[t] = 1;
          stack.push_back({t, succ[t].begin()});
        }
        continue;
      }
      for (int t : succ[s]) lead[s] = std::min(lead[s], lead[t]);
      stack.pop_back();
    }
  }
  return lead;
}

// Step::run_here for each collective in the ordered steps: no step but collectives
// comes between it and the first step that reads one of its outputs.
void MarkRunHere(std::vector<Step>& steps) {
  for (size_t i = 0; i < steps.size(); ++i) {
    if (steps[i].kind != Step::Kind::kCollective) continue;
    const std::vector<Tensor>& outs = steps[i].outputs;
    bool overlaps = false;
    for (size_t j = i + 1; j < steps.size() && !overlaps; ++j) {
      const Step& next = steps[j];
      const bool reads = std::any_of(next.inputs.begin(), next.inputs.end(), [&](const Tensor& t) {
        return std::find(outs.begin(), outs.end(), t) != outs.end();
      });
      if (reads) break;
      overlaps = next.kind != Step::Kind::kCollective;
    }
    steps[i].run_here = !overlaps;
  }
}

// 7. Kahn's algorithm over steps (clustering guarantees the step graph is acyclic).
absl::Status Order(const std::unordered_map<int, int>& step_of, Plan* plan) {
  std::vector<Step> steps = std::move(plan->steps);
  plan->steps.clear();
  const int num_steps = static_cast<int>(steps.size());
  std::vector<std::set<int>> succ(num_steps);
  std::vector<int> indegree(num_steps, 0);
  for (int s = 0; s < num_steps; ++s) {
    for (const Tensor& in : steps[s].inputs) {
      auto it = step_of.find(in.node_id());
      if (it != step_of.end() && it->second != s && succ[it->second].insert(s).second) {
        ++indegree[s];
      }
    }
  }
  // Ordered: ties keep graph order, which keeps runs deterministic (and the collectives
  // in the same order on every rank). With collectives (StepKind::run_early) a step's
  // key is first the earliest collective it leads to: what the first collective needs
  // runs first, then the collective (started on the communication thread), then what the
  // next one needs, and so on, so each gradient bucket's all-reduce starts as soon as
  // the backward pass has produced it and overlaps the rest (steps leading to no
  // collective come last). Without collectives the key is the step's index alone.
  const std::vector<int> lead = EarliestCollective(steps, succ);
  std::set<std::pair<int, int>> ready;  // (earliest collective led to, step)
  auto make_ready = [&](int s) { ready.insert({lead[s], s}); };
  for (int s = 0; s < num_steps; ++s) {
    if (indegree[s] == 0) make_ready(s);
  }
  while (!ready.empty()) {
    const int s = ready.begin()->second;
    ready.erase(ready.begin());
    plan->steps.push_back(std::move(steps[s]));
    for (int t : succ[s]) {
      if (--indegree[t] == 0) make_ready(t);
    }
  }
  if (static_cast<int>(plan->steps.size()) != num_steps) {
    return absl::InternalError("the clustered graph has a cycle; clustering is broken");
  }
  MarkRunHere(plan->steps);
  return absl::OkStatus();
}

}  // namespace

const char* SpaceName(Space space) {
  switch (space) {
    case Space::kHost:
      return "host";
    case Space::kJitCpu:
      return "jit:cpu";
    case Space::kDevice:
      return "device";
  }
  return "?";
}

absl::StatusOr<std::unique_ptr<const Plan>> BuildPlan(const Graph& g, const SessionOptions& options,
                                                      const Device& default_device,
                                                      const std::vector<Tensor>& fetches,
                                                      const std::vector<Tensor>& targets,
                                                      const std::vector<bool>& fed,
                                                      const PlanStageHook& after_stage) {
  auto plan = std::make_unique<Plan>();
  Planning p{g, options, default_device};
  p.plan = plan.get();
  auto done = [&](const char* stage) {
    if (after_stage) after_stage(stage, *plan);
  };
  Prune(fetches, targets, fed, p);
  done("prune");
  BRAZE_RETURN_IF_ERROR(CheckFedUpdates(p, fed));
  BRAZE_RETURN_IF_ERROR(CheckStrict(p));
  done("check_strict");
  BRAZE_RETURN_IF_ERROR(Place(p));
  done("place");
  ChainUpdates(p);  // before Claim: a claimed step's op-by-op fallback reads it
  Claim(p);
  done("claim");
  BRAZE_RETURN_IF_ERROR(ClusterOps(p));
  done("cluster");
  std::unordered_map<int, int> step_of;
  plan->steps = MakeSteps(p, &step_of);
  done("steps");
  if (options.rematerialize) {
    // Copies may take a step past max_cluster_size by at most one cone.
    const int max_step_ops =
        options.max_cluster_size > std::numeric_limits<int>::max() - kMaxRematCone
            ? std::numeric_limits<int>::max()
            : options.max_cluster_size + kMaxRematCone;
    for (int i : RematerializeElementwise(g, p.fetched, max_step_ops, &plan->steps)) {
      plan->steps[i].fallback = OpByOp(p, plan->steps[i].nodes);
    }
    DropDeadClusters(&plan->steps, &step_of);
    done("remat");
  }
  BRAZE_RETURN_IF_ERROR(CheckScheduler(options, plan->steps));
  BRAZE_RETURN_IF_ERROR(Order(step_of, plan.get()));
  done("order");
  return std::unique_ptr<const Plan>(std::move(plan));
}

}  // namespace braze
