#include "compile/cluster_key.h"

#include <unordered_map>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/string_view.h"
#include "braze/status.h"
#include "device/features.h"
#include "ir/overloaded.h"
#include "ir/window_geometry.h"

namespace braze {
namespace {

// Every bit of a double (StrCat keeps 6 significant digits: 1.000001 and 1.000004 would
// share a kernel).
std::string Exact(double v) { return absl::StrFormat("%a", v); }

std::string WindowKey(const Window2D& w) {
  return absl::StrCat("s", w.stride_h, ",", w.stride_w, "d", w.dilation_h, ",", w.dilation_w,
                      PaddingName(w.padding), w.pad_top, ",", w.pad_bottom, ",", w.pad_left, ",",
                      w.pad_right, FormatName(w.format));
}

std::string AttrKey(const Attrs& attrs) {
  return std::visit(
      Overloaded{
          [](const NoAttrs&) { return std::string(); },
          [](const PlaceholderAttrs& a) {
            return TypeString({a.dtype, a.shape});
          },
          // The bytes themselves, not a hash of them: the value is compiled into the
          // kernel, so two constants may share a kernel only when they are equal.
          [](const ConstAttrs& a) {
            const HostTensor& v = *a.value;
            return absl::StrCat(
                TypeString(v.type()), "#",
                absl::string_view(static_cast<const char*>(v.raw_data()), v.num_bytes()));
          },
          [](const VariableAttrs& a) {
            return TypeString({a.dtype, a.shape});
          },
          [](const CastAttrs& a) { return std::string(DTypeName(a.dtype)); },
          [](const ReduceAttrs& a) {
            return absl::StrCat(absl::StrJoin(a.axes, ","), a.keep_dims ? "k" : "");
          },
          [](const ArgMaxAttrs& a) { return absl::StrCat(a.axis); },
          [](const MatMulAttrs& a) {
            return absl::StrCat(a.transpose_a ? "T" : "N", a.transpose_b ? "T" : "N");
          },
          [](const ReshapeAttrs& a) { return ShapeString(a.shape); },
          [](const TransposeAttrs& a) { return absl::StrJoin(a.perm, ","); },
          [](const BroadcastToAttrs& a) { return ShapeString(a.shape); },
          [](const ConcatAttrs& a) { return absl::StrCat(a.axis); },
          [](const SliceAttrs& a) {
            return absl::StrCat(absl::StrJoin(a.begin, ","), ":", absl::StrJoin(a.size, ","));
          },
          [](const PadAttrs& a) {
            std::string s;
            for (auto [lo, hi] : a.paddings) absl::StrAppend(&s, lo, "/", hi, ",");
            return absl::StrCat(s, Exact(a.value));
          },
          [](const OneHotAttrs& a) {
            return absl::StrCat(a.depth, ",", Exact(a.on_value), ",", Exact(a.off_value), ",",
                                DTypeName(a.dtype));
          },
          [](const GatherAttrs& a) { return absl::StrCat(a.axis); },
          [](const SegmentSumAttrs& a) { return absl::StrCat(a.axis, ",", a.num_segments); },
          [](const IotaAttrs& a) { return absl::StrCat(a.axis, ",", DTypeName(a.dtype)); },
          // The seed and op key are baked into the kernel (lower_random.cc).
          [](const RandomAttrs& a) {
            return absl::StrCat(a.seed, ",", a.op_key.value_or(0), ",", DTypeName(a.dtype));
          },
          [](const Conv2DAttrs& a) {
            return absl::StrCat(WindowKey(a.window), ShapeString(a.shape));
          },
          [](const Pool2DAttrs& a) {
            return absl::StrCat(a.size_h, "x", a.size_w, WindowKey(a.window), ShapeString(a.shape));
          },
          [](const AttentionAttrs& a) {
            return absl::StrCat(a.causal ? "causal," : "full,", Exact(a.scale), ",",
                                Exact(a.dropout), ",", a.seed, ",", a.op_key);
          },
          // dp (issue 37): never compiled, keyed for completeness.
          [](const CollectiveAttrs& a) {
            return absl::StrCat(a.world_size, ",", a.rank, ",", a.root);
          },
          // Never compiled; the function's identity is the only honest key.
          [](const HostCallAttrs& a) {
            return absl::StrCat("fn@", reinterpret_cast<uintptr_t>(&a));
          },
          // cf (issue 40): never compiled (its bodies' clusters are keyed on their own).
          [](const ControlFlowAttrs& a) {
            std::string key = absl::StrCat(a.num_carried, ",", a.num_elems, ",", a.max_iterations,
                                           ",", a.reverse ? 1 : 0);
            for (const auto& b : a.bodies) {
              absl::StrAppend(&key, ",", b->name, "@", reinterpret_cast<uintptr_t>(b.get()));
            }
            return key;
          },
      },
      attrs);
}

// The CPU GEMM library settings, when not the defaults: they change what compiles.
std::string GemmKeyPart(const CompileOptions& options) {
  if (!options.cpu_gemm_library) return ";matmul=halide";
  if (options.cpu_gemm_min_work != kLibraryGemmMinWork) {
    return absl::StrCat(";gemm_min_work=", options.cpu_gemm_min_work);
  }
  return "";
}

}  // namespace

std::string ClusterKey(const ClusterSpec& spec, const CompileOptions& options) {
  const Graph& g = *spec.graph;
  // Values are named by position: "a3" is argument 3, "n2.0" output 0 of the cluster's
  // third node. Node names and ids never enter the key.
  std::unordered_map<int, int> local;  // node id -> position in the cluster
  for (size_t i = 0; i < spec.nodes.size(); ++i) local[spec.nodes[i]] = static_cast<int>(i);
  auto value_ref = [&](const Tensor& t) -> std::string {
    auto it = local.find(t.node_id());
    if (it != local.end()) return absl::StrCat("n", it->second, ".", t.index());
    for (size_t a = 0; a < spec.inputs.size(); ++a) {
      if (spec.inputs[a] == t) return absl::StrCat("a", a);
    }
    return "?";
  };
  // The target (host CPU features or HL_JIT_TARGET) and the thread count the kernel
  // applies are part of what was compiled.
  auto target = device::JitTargetString(options.device);
  const bool gpu = device::FeaturesOf(options.device).device_memory;
  std::string key = absl::StrCat(
      "target=", target.ok() ? *target : "?", ";sched=",
      gpu ? absl::StrCat(SchedulerName(options.gpu_scheduler), "@", options.device.ToString())
          : std::string(SchedulerName(options.scheduler)),
      ";threads=", options.num_threads, GemmKeyPart(options), ";args=");
  // A symbolic dim enters as its class ("s0"), not its size: one kernel serves them all;
  // a class estimated below kMinSymbolicExtent is "t0", the kernel for sizes 1 to 15.
  for (size_t i = 0; i < spec.input_types.size(); ++i) {
    const TensorType& t = spec.input_types[i];
    std::vector<std::string> dims;
    for (size_t d = 0; d < t.shape.size(); ++d) {
      const int k = i < spec.input_symbols.size() && d < spec.input_symbols[i].size()
                        ? spec.input_symbols[i][d]
                        : -1;
      const char* prefix = t.shape[d] < kMinSymbolicExtent ? "t" : "s";
      dims.push_back(k >= 0 ? absl::StrCat(prefix, k) : absl::StrCat(t.shape[d]));
    }
    absl::StrAppend(&key, DTypeName(t.dtype), "[", absl::StrJoin(dims, ","), "],");
  }
  for (int id : spec.nodes) {
    const Node& n = g.node(id);
    absl::StrAppend(&key, ";", n.op_name(), "{", AttrKey(n.attrs()), "}(");
    for (const Tensor& in : n.inputs()) absl::StrAppend(&key, value_ref(in), ",");
    absl::StrAppend(&key, ")");
  }
  absl::StrAppend(&key, ";out=");
  for (const Tensor& t : spec.outputs) absl::StrAppend(&key, value_ref(t), ",");
  return key;
}

absl::StatusOr<StoredScheduleKey> StoredScheduleKeyFor(const ClusterSpec& spec,
                                                       const Device& device) {
  CompileOptions options;
  StoredScheduleKey key;
  if (!device::FeaturesOf(device).device_memory) {
    // The host: as entries have been named from the start (the target is in the key).
    BRAZE_ASSIGN_OR_RETURN(key.target, device::ScheduleTargetString(Device{}));
    key.hash = ScheduleKeyHash(ClusterKey(spec, options));
    return key;
  }
  options.device = Device{device.kind, 0, false};
  BRAZE_ASSIGN_OR_RETURN(key.target, device::ScheduleTargetString(device));
  BRAZE_ASSIGN_OR_RETURN(const std::string jit, device::JitTargetString(options.device));
  // The key names the schedule's target in the JIT target's place, so that the host's
  // CPU features do not enter it (ScheduleTargetString).
  std::string cluster_key = ClusterKey(spec, options);
  const std::string jit_part = absl::StrCat("target=", jit, ";");
  if (absl::StartsWith(cluster_key, jit_part)) cluster_key.erase(0, jit_part.size());
  key.hash = ScheduleKeyHash(absl::StrCat("target=", key.target, ";", cluster_key));
  return key;
}

}  // namespace braze
