#include "runtime/plan.h"

#include <algorithm>
#include <set>
#include <unordered_map>

#include "absl/strings/str_cat.h"
#include "braze/device.h"
#include "braze/status.h"
#include "lower/compile.h"

namespace braze {
namespace {

bool IsSource(OpKind op) {
  return op == OpKind::kPlaceholder || op == OpKind::kVariable || op == OpKind::kConst;
}

Step SingleStep(const Graph& g, int id, const SessionOptions& options) {
  const Node& n = g.node(id);
  Step s;
  s.kind = (!options.reference_only && HasHalideLowering(n.op())) ? Step::Kind::kSingleOp
                                                                  : Step::Kind::kReference;
  s.name = n.name();
  s.nodes = {id};
  s.inputs = n.inputs();
  for (int o = 0; o < n.num_outputs(); ++o) s.outputs.emplace_back(const_cast<Graph*>(&g), id, o);
  return s;
}

}  // namespace

absl::StatusOr<std::string> ResolveDefaultDevice(const SessionOptions& options) {
  if (options.device == "auto") return std::string("cpu");
  BRAZE_ASSIGN_OR_RETURN(Device d, ParseDevice(options.device));
  return d.ToString();
}

std::vector<Step> OpByOpSteps(const Graph& graph, const std::vector<int>& nodes,
                              const SessionOptions& options) {
  std::vector<Step> steps;
  for (int id : nodes) {
    if (!IsSource(graph.node(id).op())) steps.push_back(SingleStep(graph, id, options));
  }
  return steps;
}

absl::StatusOr<std::unique_ptr<Plan>> BuildPlan(const Graph& g, const SessionOptions& options,
                                                const std::vector<Tensor>& fetches,
                                                const std::vector<Tensor>& targets,
                                                const std::vector<bool>& fed) {
  const int num_nodes = g.num_nodes();
  auto plan = std::make_unique<Plan>();
  plan->needed.assign(num_nodes, false);
  std::vector<int> stack;
  for (const Tensor& t : fetches) stack.push_back(t.node_id());
  for (const Tensor& t : targets) stack.push_back(t.node_id());
  while (!stack.empty()) {
    int id = stack.back();
    stack.pop_back();
    if (plan->needed[id] || fed[id]) continue;
    plan->needed[id] = true;
    for (const Tensor& in : g.node(id).inputs()) stack.push_back(in.node_id());
  }

  if (options.strict) {
    for (int id = 0; id < num_nodes; ++id) {
      const Node& n = g.node(id);
      if (plan->needed[id] && n.jit().compile.value_or(false) && n.op() == OpKind::kHostCall) {
        return absl::InvalidArgumentError(
            absl::StrCat("node '", n.name(),
                         "' (HostCall) is marked for compilation but has no Halide "
                         "lowering (strict mode)"));
      }
    }
  }

  BRAZE_ASSIGN_OR_RETURN(const std::string default_device, ResolveDefaultDevice(options));
  for (int id = 0; id < num_nodes; ++id) {
    if (!plan->needed[id]) continue;
    const Node& n = g.node(id);
    const std::string device = n.device().empty() ? default_device : n.device();
    BRAZE_ASSIGN_OR_RETURN(Device d, ParseDevice(device));
    if (d.kind == Device::Kind::kCuda) {
      absl::Status cuda = CheckCudaAvailable();
      if (!cuda.ok()) {
        return absl::FailedPreconditionError(
            absl::StrCat("node '", n.name(), "' is placed on ", device, ": ", cuda.message()));
      }
      return absl::UnimplementedError(absl::StrCat(
          "node '", n.name(), "' is placed on ", device,
          ": executing on CUDA devices is not implemented yet (CUDA code generation is; see "
          "GenerateCudaCode)"));
    }
  }

  if (!options.reference_only) {
    ClusteringOptions copts;
    copts.default_device = default_device;
    copts.global_jit_level = options.global_jit_level;
    copts.min_cluster_size = options.min_cluster_size;
    copts.max_cluster_size = options.max_cluster_size;
    copts.max_matmuls_per_cluster = options.max_matmuls_per_cluster;
    BRAZE_ASSIGN_OR_RETURN(plan->clustering, MarkForCompilation(g, copts, plan->needed));
  } else {
    plan->clustering.nodes.resize(num_nodes);
  }
  const ClusteringResult& cl = plan->clustering;

  // Consumers of every value, to find which cluster values escape.
  std::vector<std::vector<int>> consumers(num_nodes);
  for (int id = 0; id < num_nodes; ++id) {
    if (!plan->needed[id]) continue;
    for (const Tensor& in : g.node(id).inputs()) consumers[in.node_id()].push_back(id);
  }
  std::set<std::pair<int, int>> fetched;
  for (const Tensor& t : fetches) fetched.insert({t.node_id(), t.index()});

  // Steps in node-id order of their first node; then a topological sort over steps.
  std::vector<Step> steps;
  std::unordered_map<int, int> step_of;  // node id -> step index
  std::vector<bool> emitted_cluster(cl.clusters.size(), false);
  for (int id = 0; id < num_nodes; ++id) {
    if (!plan->needed[id]) continue;
    const Node& n = g.node(id);
    const int c = cl.ClusterOf(id);
    if (c < 0) {
      if (IsSource(n.op())) continue;
      step_of[id] = static_cast<int>(steps.size());
      steps.push_back(SingleStep(g, id, options));
      continue;
    }
    if (emitted_cluster[c]) continue;
    emitted_cluster[c] = true;
    const Cluster& cluster = cl.clusters[c];
    Step s;
    s.kind = Step::Kind::kCluster;
    s.name = cluster.name;
    s.nodes = cluster.nodes;
    std::set<int> members(cluster.nodes.begin(), cluster.nodes.end());
    for (int m : cluster.nodes) {
      step_of[m] = static_cast<int>(steps.size());
      const Node& mn = g.node(m);
      for (const Tensor& in : mn.inputs()) {
        if (!members.count(in.node_id()) &&
            std::find(s.inputs.begin(), s.inputs.end(), in) == s.inputs.end()) {
          s.inputs.push_back(in);
        }
      }
      for (int o = 0; o < mn.num_outputs(); ++o) {
        bool escapes = fetched.count({m, o}) > 0;
        for (int user : consumers[m]) {
          if (members.count(user)) continue;
          for (const Tensor& in : g.node(user).inputs()) {
            if (in.node_id() == m && in.index() == o) escapes = true;
          }
        }
        if (escapes) s.outputs.emplace_back(const_cast<Graph*>(&g), m, o);
      }
    }
    steps.push_back(std::move(s));
  }

  // Kahn's algorithm over steps (clustering guarantees the step graph is acyclic).
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
  std::set<int> ready;  // ordered: ties keep graph order, which keeps runs deterministic
  for (int s = 0; s < num_steps; ++s) {
    if (indegree[s] == 0) ready.insert(s);
  }
  while (!ready.empty()) {
    int s = *ready.begin();
    ready.erase(ready.begin());
    plan->steps.push_back(std::move(steps[s]));
    for (int t : succ[s]) {
      if (--indegree[t] == 0) ready.insert(t);
    }
  }
  if (static_cast<int>(plan->steps.size()) != num_steps) {
    return absl::InternalError("the clustered graph has a cycle; clustering is broken");
  }
  return plan;
}

}  // namespace braze
