#include "runtime/dump.h"

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "braze/status.h"
#include "ir/logging.h"
#include "lower/cluster_text.h"
#include "runtime/flags.h"
#include "runtime/step_kind.h"

namespace braze {
namespace {

namespace fs = std::filesystem;

// Text inside a double-quoted DOT string. Newlines become DOT's "\n" line breaks.
std::string DotEscape(const std::string& s) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    if (c == '"' || c == '\\') {
      out.push_back('\\');
      out.push_back(c);
    } else if (c == '\n') {
      out.append("\\n");
    } else if (static_cast<unsigned char>(c) < 0x20) {
      out.push_back(' ');
    } else {
      out.push_back(c);
    }
  }
  return out;
}

// A file-name fragment: node names carry '/' (name scopes) and other punctuation.
std::string FileNameFragment(const std::string& s) {
  std::string out;
  for (char c : s) {
    const bool keep = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                      c == '_' || c == '-';
    out.push_back(keep ? c : '_');
  }
  return out.empty() ? "_" : out;
}

// FNV-1a: stable across runs and builds, unlike absl::Hash, so dumps of two runs of a
// program name the same kernel the same way.
uint64_t StableHash(const std::string& s) {
  uint64_t h = 14695981039346656037ull;
  for (unsigned char c : s) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
}

absl::Status EnsureDirectory(const std::string& dir) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec || !fs::is_directory(dir, ec)) {
    return absl::FailedPreconditionError(absl::StrCat(
        "BRAZE_FLAGS --dump_to=", dir, ": cannot create the directory",
        ec ? absl::StrCat(": ", ec.message()) : std::string(" (a file is in the way)")));
  }
  return absl::OkStatus();
}

absl::Status WriteFile(const fs::path& path, const std::string& contents) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << contents;
  out.close();
  if (!out) {
    return absl::FailedPreconditionError(absl::StrCat("BRAZE_FLAGS --dump_to: cannot write '",
                                                      path.string(), "': ", std::strerror(errno)));
  }
  return absl::OkStatus();
}

std::string SchedulerLine(const CompiledKernel& kernel) {
  std::string line = SchedulerName(kernel.scheduler_used());
  for (const std::string& failure : kernel.scheduler_failures()) {
    absl::StrAppend(&line, "\n//   (tried first: ", failure, ")");
  }
  return line;
}

}  // namespace

std::string SignatureFileName(const std::vector<TensorType>& types) {
  std::vector<std::string> parts;
  for (const TensorType& t : types) {
    std::vector<std::string> dims;
    for (int64_t d : t.shape) dims.push_back(d < 0 ? "?" : absl::StrCat(d));
    parts.push_back(
        absl::StrCat(DTypeName(t.dtype), "_", dims.empty() ? "scalar" : absl::StrJoin(dims, "x")));
  }
  std::string readable = parts.empty() ? "no_inputs" : absl::StrJoin(parts, "__");
  readable = FileNameFragment(readable);
  if (readable.size() <= 80) return readable;
  char hash[24];
  std::snprintf(hash, sizeof(hash), "sig_%016llx",
                static_cast<unsigned long long>(StableHash(absl::StrJoin(parts, "__"))));
  return hash;
}

std::string PlanToDot(const Graph& graph, const Plan& plan, DotStage stage,
                      const std::string& title) {
  const int n = graph.num_nodes();
  const bool after = stage == DotStage::kAfterClustering;
  const ClusteringResult& cl = plan.clustering;
  // The plan runs the needed ops; values fed into them are drawn too, as their sources.
  std::vector<bool> shown(n, false);
  int num_ops = 0;
  for (int id = 0; id < n && id < static_cast<int>(plan.needed.size()); ++id) {
    if (!plan.needed[id]) continue;
    shown[id] = true;
    ++num_ops;
    for (const Tensor& in : graph.node(id).inputs()) shown[in.node_id()] = true;
  }
  std::map<int, Step::Kind> runs_as;
  for (const Step& s : plan.steps) {
    for (int id : s.nodes) runs_as[id] = s.kind;
  }

  auto node_line = [&](int id) {
    const Node& node = graph.node(id);
    // The op line is left out when the node is named after its op ("MatMul").
    std::string label = node.name() == node.op_name()
                            ? node.name()
                            : absl::StrCat(node.name(), "\n", node.op_name());
    std::string fill = "white";
    std::string tooltip;
    const bool fed = id < static_cast<int>(plan.needed.size()) && !plan.needed[id];
    if (fed) {
      absl::StrAppend(&label, "\n[fed]");
      fill = "#eeeeee";
    } else if (!after) {
      const JitInfo& jit = node.jit();
      if (jit.compile.has_value()) {
        absl::StrAppend(&label, "\n", jit.scope.empty() ? "scope" : jit.scope,
                        *jit.compile ? "" : " compile=false");
        fill = *jit.compile ? "#d9ead3" : "#f4cccc";
      }
    } else if (cl.ClusterOf(id) < 0) {
      if (id < static_cast<int>(cl.nodes.size())) {
        const NodeClustering& nc = cl.nodes[id];
        if (nc.reason != ExclusionReason::kNone) {
          absl::StrAppend(&label, "\n[", ExclusionReasonName(nc.reason), "]");
          tooltip = nc.explanation;
        }
      }
      auto it = runs_as.find(id);
      if (it != runs_as.end()) {
        absl::StrAppend(&label, "\nruns: ", StepKindOf(it->second).runs_as());
      }
      fill = "#fff2cc";
    }
    std::string line =
        absl::StrCat("n", id, " [label=\"", DotEscape(label), "\", fillcolor=\"", fill, "\"");
    if (!tooltip.empty()) absl::StrAppend(&line, ", tooltip=\"", DotEscape(tooltip), "\"");
    return absl::StrCat(line, "];\n");
  };

  std::string out = absl::StrCat("digraph \"", DotEscape(title), "\" {\n");
  absl::StrAppend(
      &out, "  graph [fontname=\"Helvetica\", labelloc=t, label=\"",
      DotEscape(absl::StrCat(
          title, " (", num_ops, " ops",
          after ? absl::StrCat(", ", cl.clusters.size(), " cluster(s)") : std::string(), ")")),
      "\"];\n");
  absl::StrAppend(&out,
                  "  node [shape=box, style=\"rounded,filled\", fontname=\"Helvetica\", "
                  "fontsize=10];\n  edge [fontname=\"Helvetica\", fontsize=9];\n");
  std::vector<bool> drawn(n, false);
  if (after) {
    for (size_t c = 0; c < cl.clusters.size(); ++c) {
      const Cluster& cluster = cl.clusters[c];
      std::string label =
          absl::StrCat(cluster.name, "\n", cluster.scope.empty() ? "auto-cluster" : cluster.scope,
                       ", ", cluster.nodes.size(), " ops");
      absl::StrAppend(&label, ", ", cluster.device.ToString());
      absl::StrAppend(&out, "  subgraph cluster_", c, " {\n    label=\"", DotEscape(label),
                      "\";\n    style=\"rounded,filled\"; fillcolor=\"#e8f0fe\"; "
                      "color=\"#4a86e8\";\n");
      for (int id : cluster.nodes) {
        if (id < 0 || id >= n || !shown[id]) continue;
        absl::StrAppend(&out, "    ", node_line(id));
        drawn[id] = true;
      }
      absl::StrAppend(&out, "  }\n");
    }
  }
  for (int id = 0; id < n; ++id) {
    if (shown[id] && !drawn[id]) absl::StrAppend(&out, "  ", node_line(id));
  }

  std::map<std::pair<int, int>, const MergeRefusal*> refused;
  if (after) {
    for (const MergeRefusal& r : cl.refusals) refused[{r.producer, r.consumer}] = &r;
  }
  for (int id = 0; id < n; ++id) {
    if (!shown[id] || (id < static_cast<int>(plan.needed.size()) && !plan.needed[id])) continue;
    for (const Tensor& in : graph.node(id).inputs()) {
      std::string label = TypeString(in.type());
      if (graph.node(in.node_id()).num_outputs() > 1)
        label = absl::StrCat(":", in.index(), " ", label);
      std::string attrs;
      auto it = refused.find({in.node_id(), id});
      if (it != refused.end()) {
        absl::StrAppend(&label, "\nnot merged: ", ExclusionReasonName(it->second->reason));
        attrs = absl::StrCat(", style=dashed, color=\"#cc0000\", tooltip=\"",
                             DotEscape(it->second->text), "\"");
      }
      absl::StrAppend(&out, "  n", in.node_id(), " -> n", id, " [label=\"", DotEscape(label), "\"",
                      attrs, "];\n");
    }
  }
  absl::StrAppend(&out, "}\n");
  return out;
}

int SessionDumper::SessionId() {
  static std::atomic<int> next{0};
  if (session_id_ < 0) session_id_ = next.fetch_add(1);
  return session_id_;
}

absl::Status SessionDumper::OnPlanBuilt(const Graph& graph, const Plan& plan) {
  const BrazeFlags& flags = GetBrazeFlags();
  if (flags.dump_to.empty() && !flags.clustering_debug) return absl::OkStatus();
  const std::string prefix = absl::StrCat("session_", SessionId(), ".plan_", num_plans_++);
  if (flags.clustering_debug) {
    // Info at level 0: the flag asked for it, so it shows at the default verbosity.
    LogInfo(0, absl::StrCat(prefix, " clustering:\n", plan.clustering.DebugString()));
  }
  if (flags.dump_to.empty()) return absl::OkStatus();
  BRAZE_RETURN_IF_ERROR(EnsureDirectory(flags.dump_to));
  for (DotStage stage : {DotStage::kBeforeClustering, DotStage::kAfterClustering}) {
    const std::string name = absl::StrCat(
        prefix, stage == DotStage::kBeforeClustering ? ".before_clustering" : ".after_clustering");
    BRAZE_RETURN_IF_ERROR(WriteFile(fs::path(flags.dump_to) / absl::StrCat(name, ".dot"),
                                    PlanToDot(graph, plan, stage, name)));
  }
  return absl::OkStatus();
}

absl::Status SessionDumper::OnKernelReady(const Graph& graph, const Step& step,
                                          const std::vector<TensorType>& types,
                                          const CompiledKernel& kernel,
                                          const std::vector<std::vector<int>>& input_symbols,
                                          const std::vector<TensorType>& compiled_types) {
  const BrazeFlags& flags = GetBrazeFlags();
  if (flags.dump_to.empty()) return absl::OkStatus();
  BRAZE_RETURN_IF_ERROR(EnsureDirectory(flags.dump_to));
  const std::string session = absl::StrCat("session_", SessionId());
  std::vector<std::string> ops, in_types, out_types;
  for (int id : step.nodes) {
    ops.push_back(absl::StrCat(graph.node(id).name(), " (", graph.node(id).op_name(), ")"));
  }
  for (const TensorType& t : types) in_types.push_back(TypeString(t));
  for (const TensorType& t : kernel.output_types()) out_types.push_back(TypeString(t));
  std::string text = absl::StrCat(
      "// ", session, " ", step.name, " (", StepKindOf(step.kind).runs_as(), ")\n",
      "// ops: ", absl::StrJoin(ops, ", "), "\n", "// inputs: ", absl::StrJoin(in_types, ", "),
      "\n", "// outputs: ", absl::StrJoin(out_types, ", "), "\n",
      "// scheduler: ", SchedulerLine(kernel), "\n", "// compile_ms: ", kernel.compile_ms(), "\n\n",
      kernel.schedule_text());
  if (text.back() != '\n') text.push_back('\n');
  absl::StrAppend(&text, "\n// Lowered Halide statement\n", kernel.lowered_stmt());
  if (text.back() != '\n') text.push_back('\n');
  const std::string base =
      absl::StrCat(session, ".", FileNameFragment(step.name), ".", SignatureFileName(types));
  BRAZE_RETURN_IF_ERROR(WriteFile(fs::path(flags.dump_to) / (base + ".txt"), text));
  // The cluster itself, for tools that compile it again (lower/cluster_text.h).
  ClusterSpec spec{&graph,
                   step.name,
                   step.nodes,
                   step.inputs,
                   compiled_types.empty() ? types : compiled_types,
                   step.outputs,
                   {},
                   input_symbols};
  absl::StatusOr<std::string> cluster = ClusterToText(spec);
  if (!cluster.ok()) {
    LogWarning(absl::StrCat("--dump_to: no .cluster file for ", step.name, ": ",
                            cluster.status().message()));
  } else {
    const uint64_t hash = StableHash(*cluster);
    const fs::path path = fs::path(flags.dump_to) / (base + ".cluster");
    auto it = cluster_files_.find(path.string());
    if (it == cluster_files_.end() || it->second != hash) {
      BRAZE_RETURN_IF_ERROR(WriteFile(path, *cluster));
      cluster_files_[path.string()] = hash;
    }
  }
  // A device kernel's generated code beside it: OpenCL C (.cl) or PTX (.ptx).
  const CompiledKernel::DeviceSource source = kernel.device_source();
  if (source.text.empty()) return absl::OkStatus();
  return WriteFile(fs::path(flags.dump_to) / (base + "." + source.extension), source.text);
}

}  // namespace braze
