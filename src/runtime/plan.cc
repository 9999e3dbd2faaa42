#include "runtime/plan.h"

#include <algorithm>
#include <set>
#include <unordered_map>

#include "absl/strings/str_cat.h"
#include "braze/device.h"
#include "braze/status.h"
#include "compile/compile.h"

namespace braze {
namespace {

bool IsSource(OpKind op) {
  return op == OpKind::kPlaceholder || op == OpKind::kVariable || op == OpKind::kConst;
}

Step SingleStep(const Graph& g, int id, const SessionOptions& options,
                const std::string& default_device) {
  const Node& n = g.node(id);
  Step s;
  s.kind = (!options.reference_only && OpIsCompilable(n.op())) ? Step::Kind::kSingleOp
                                                                  : Step::Kind::kReference;
  if (s.kind == Step::Kind::kSingleOp) {
    s.space = SpaceOfDevice(n.device().empty() ? default_device : n.device(), &s.ordinal);
  }
  s.name = n.name();
  s.nodes = {id};
  s.inputs = n.inputs();
  for (int o = 0; o < n.num_outputs(); ++o) s.outputs.emplace_back(const_cast<Graph*>(&g), id, o);
  return s;
}

// GEMMs for cuBLAS on CUDA: each MatMul/BatchMatMul placed on a CUDA device (f32/f64),
// with the bias Add (a [n] vector) that follows, and the Relu after it when
// options.cuda_relu_epilogue, when nothing else reads the values in between. Returns the steps;
// marks their nodes in `library_calls`.
std::vector<Step> FindGemms(const Graph& g, const SessionOptions& options,
                            const std::string& default_device, const std::vector<bool>& needed,
                            const std::vector<std::vector<int>>& consumers,
                            const std::set<std::pair<int, int>>& fetched,
                            std::vector<bool>* library_calls) {
  std::vector<Step> gemms;
  if (options.reference_only || options.cuda_matmul != SessionOptions::CudaMatMul::kCublas) {
    return gemms;
  }
  auto device_of = [&](const Node& n) { return n.device().empty() ? default_device : n.device(); };
  // The single needed consumer of output 0 of `id`, on the same device, or -1.
  auto only_consumer = [&](int id) {
    if (fetched.count({id, 0}) || consumers[id].size() != 1) return -1;
    const int user = consumers[id][0];
    return device_of(g.node(user)) == device_of(g.node(id)) ? user : -1;
  };
  for (int id = 0; id < g.num_nodes(); ++id) {
    const Node& n = g.node(id);
    if (!needed[id] || (n.op() != OpKind::kMatMul && n.op() != OpKind::kBatchMatMul)) continue;
    Step s;
    s.space = SpaceOfDevice(device_of(n), &s.ordinal);
    const DType dtype = n.output(0).dtype;
    if (s.space != Space::kCuda || (dtype != DType::kF32 && dtype != DType::kF64)) continue;
    s.kind = Step::Kind::kGemm;
    s.name = n.name();
    s.nodes = {id};
    s.inputs = n.inputs();
    int last = id;
    const int add = only_consumer(id);
    if (add >= 0 && g.node(add).op() == OpKind::kAdd) {
      const Node& a = g.node(add);
      const Tensor bias = a.input(0).node_id() == id ? a.input(1) : a.input(0);
      const int64_t cols = n.output(0).shape.empty() ? -1 : n.output(0).shape.back();
      const bool vector = bias.shape().size() == 1 && bias.shape()[0] == cols && cols >= 0 &&
                          bias.dtype() == dtype && bias.node_id() != id &&
                          a.output(0).shape == n.output(0).shape;
      if (vector) {
        s.nodes.push_back(add);
        s.inputs.push_back(bias);
        s.gemm.epilogue = GemmEpilogue::kBias;
        last = add;
        const int relu = options.cuda_relu_epilogue ? only_consumer(add) : -1;
        if (relu >= 0 && g.node(relu).op() == OpKind::kRelu) {
          s.nodes.push_back(relu);
          s.gemm.epilogue = GemmEpilogue::kBiasRelu;
          last = relu;
        }
      }
    }
    s.outputs.emplace_back(const_cast<Graph*>(&g), last, 0);
    for (int m : s.nodes) (*library_calls)[m] = true;
    gemms.push_back(std::move(s));
  }
  return gemms;
}

}  // namespace

const char* SpaceName(Space space) {
  switch (space) {
    case Space::kHost:
      return "host";
    case Space::kJitCpu:
      return "jit:cpu";
    case Space::kCuda:
      return "cuda";
  }
  return "?";
}

Space SpaceOfDevice(const std::string& device, int* ordinal) {
  *ordinal = 0;
  auto d = ParseDevice(device);
  if (!d.ok()) return Space::kHost;  // BuildPlan rejects bad devices before this matters
  if (d->kind == Device::Kind::kCuda) {
    *ordinal = d->index;
    return Space::kCuda;
  }
  return d->force_compile ? Space::kJitCpu : Space::kHost;
}

absl::StatusOr<std::string> ResolveDefaultDevice(const SessionOptions& options) {
  if (options.device == "auto") {
    return std::string(CheckCudaAvailable().ok() ? "cuda:0" : "cpu");
  }
  BRAZE_ASSIGN_OR_RETURN(Device d, ParseDevice(options.device));
  return d.ToString();
}

std::vector<Step> OpByOpSteps(const Graph& graph, const std::vector<int>& nodes,
                              const SessionOptions& options) {
  auto default_device = ResolveDefaultDevice(options);
  std::vector<Step> steps;
  for (int id : nodes) {
    if (!IsSource(graph.node(id).op())) {
      steps.push_back(SingleStep(graph, id, options, default_device.value_or("cpu")));
    }
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
      if (cuda.ok() && d.index >= CudaDeviceCount()) {
        cuda = absl::InvalidArgumentError(
            absl::StrCat("this machine has ", CudaDeviceCount(), " CUDA device(s)"));
      }
      if (!cuda.ok()) {
        return absl::Status(cuda.code(), absl::StrCat("node '", n.name(), "' is placed on ", device,
                                                      ": ", cuda.message()));
      }
    }
  }

  // Consumers of every value, to find which cluster values escape.
  std::vector<std::vector<int>> consumers(num_nodes);
  for (int id = 0; id < num_nodes; ++id) {
    if (!plan->needed[id]) continue;
    for (const Tensor& in : g.node(id).inputs()) consumers[in.node_id()].push_back(id);
  }
  std::set<std::pair<int, int>> fetched;
  for (const Tensor& t : fetches) fetched.insert({t.node_id(), t.index()});

  std::vector<bool> library_calls(num_nodes, false);
  std::vector<Step> gemms =
      FindGemms(g, options, default_device, plan->needed, consumers, fetched, &library_calls);
  std::unordered_map<int, int> gemm_at;  // first node id -> index in gemms
  for (size_t i = 0; i < gemms.size(); ++i) gemm_at[gemms[i].nodes.front()] = static_cast<int>(i);

  if (!options.reference_only) {
    ClusteringOptions copts;
    copts.default_device = default_device;
    copts.auto_cluster = options.global_jit_level != JitLevel::kOff;
    copts.min_cluster_size = options.min_cluster_size;
    copts.max_cluster_size = options.max_cluster_size;
    copts.max_matmuls_per_cluster = options.max_matmuls_per_cluster;
    copts.library_calls = library_calls;
    BRAZE_ASSIGN_OR_RETURN(plan->clustering, MarkForCompilation(g, copts, plan->needed));
  } else {
    plan->clustering.nodes.resize(num_nodes);
  }
  const ClusteringResult& cl = plan->clustering;

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
      if (library_calls[id]) {
        auto it = gemm_at.find(id);
        if (it == gemm_at.end()) continue;  // a folded epilogue op: its GEMM's step
        Step& gemm = gemms[it->second];
        for (int m : gemm.nodes) step_of[m] = static_cast<int>(steps.size());
        steps.push_back(std::move(gemm));
        continue;
      }
      step_of[id] = static_cast<int>(steps.size());
      steps.push_back(SingleStep(g, id, options, default_device));
      continue;
    }
    if (emitted_cluster[c]) continue;
    emitted_cluster[c] = true;
    const Cluster& cluster = cl.clusters[c];
    Step s;
    s.kind = Step::Kind::kCluster;
    s.space = SpaceOfDevice(cluster.device.empty() ? default_device : cluster.device, &s.ordinal);
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
