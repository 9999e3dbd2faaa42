// Cond, While and Scan on concrete values (reference/control_flow.h).
#include "reference/control_flow.h"

#include <cstring>
#include <string>
#include <unordered_map>
#include <utility>

#include "absl/strings/str_cat.h"
#include "braze/status.h"
#include "ir/control_flow.h"
#include "reference/reference.h"

namespace braze {
namespace {

absl::Status Invalid(std::string msg) { return absl::InvalidArgumentError(std::move(msg)); }

// Row `i` of `t`'s leading axis.
HostTensor Row(const HostTensor& t, int64_t i) {
  HostTensor r(t.dtype(), Shape(t.shape().begin() + 1, t.shape().end()));
  if (r.num_bytes() > 0) {
    std::memcpy(r.raw_data(), static_cast<const char*>(t.raw_data()) + i * r.num_bytes(),
                r.num_bytes());
  }
  return r;
}

void SetRow(HostTensor& t, int64_t i, const HostTensor& row) {
  if (row.num_bytes() > 0) {
    std::memcpy(static_cast<char*>(t.raw_data()) + i * row.num_bytes(), row.raw_data(),
                row.num_bytes());
  }
}

const Body& BodyOf(const Node& node, int i) {
  return *std::get<ControlFlowAttrs>(node.attrs()).bodies[i];
}

// The body's results must be `want` exactly (concrete shapes at run time).
absl::Status CheckResults(const Body& body, const std::vector<HostTensor>& got,
                          absl::Span<const TensorType> want, const std::string& when) {
  if (got.size() != want.size()) {
    return absl::InternalError(
        absl::StrCat(body.name, " returned ", got.size(), " tensors, expected ", want.size()));
  }
  for (size_t i = 0; i < got.size(); ++i) {
    if (got[i].type() != want[i]) {
      return Invalid(absl::StrCat(body.name, " result ", i, " is ", TypeString(got[i].type()), when,
                                  ", expected ", TypeString(want[i])));
    }
  }
  return absl::OkStatus();
}

std::vector<HostTensor> Params(absl::Span<const HostTensor> head,
                               absl::Span<const HostTensor> captures) {
  std::vector<HostTensor> p(head.begin(), head.end());
  p.insert(p.end(), captures.begin(), captures.end());
  return p;
}

absl::StatusOr<std::vector<HostTensor>> RunCond(const Node& node, absl::Span<const HostTensor> in,
                                                absl::Span<const TensorType> out_types,
                                                const BodyRunner& run) {
  const int branch = in[0].GetDouble(0) != 0 ? 0 : 1;
  BRAZE_ASSIGN_OR_RETURN(std::vector<HostTensor> out,
                         run(branch, std::vector<HostTensor>(in.begin() + 1, in.end())));
  BRAZE_RETURN_IF_ERROR(CheckResults(BodyOf(node, branch), out, out_types, ""));
  return out;
}

absl::StatusOr<std::vector<HostTensor>> RunScan(const Node& node, absl::Span<const HostTensor> in,
                                                absl::Span<const TensorType> out_types,
                                                const BodyRunner& run) {
  const auto& a = std::get<ControlFlowAttrs>(node.attrs());
  const size_t nc = a.num_carried, ne = a.num_elems;
  const size_t ns = out_types.size() - 2 * nc;  // step outputs
  const int64_t length = in[nc].dim(0);
  const absl::Span<const HostTensor> captures = in.subspan(nc + ne);
  std::vector<HostTensor> carry(in.begin(), in.begin() + nc);
  std::vector<HostTensor> out;
  for (size_t j = 0; j < ns + nc; ++j) {
    out.emplace_back(out_types[nc + j].dtype, out_types[nc + j].shape);
  }
  // What each step must return: the carry's types, then the step outputs' row types.
  std::vector<TensorType> want(out_types.begin(), out_types.begin() + nc);
  for (size_t j = 0; j < ns; ++j) {
    TensorType row = out_types[nc + j];
    row.shape.erase(row.shape.begin());
    want.push_back(row);
  }
  for (int64_t k = 0; k < length; ++k) {
    const int64_t t = a.reverse ? length - 1 - k : k;
    for (size_t i = 0; i < nc; ++i) SetRow(out[ns + i], t, carry[i]);
    std::vector<HostTensor> params = carry;
    for (size_t e = 0; e < ne; ++e) params.push_back(Row(in[nc + e], t));
    params.insert(params.end(), captures.begin(), captures.end());
    BRAZE_ASSIGN_OR_RETURN(std::vector<HostTensor> r, run(0, std::move(params)));
    BRAZE_RETURN_IF_ERROR(CheckResults(BodyOf(node, 0), r, want, absl::StrCat(" at step ", t)));
    for (size_t j = 0; j < ns; ++j) SetRow(out[j], t, r[nc + j]);
    for (size_t i = 0; i < nc; ++i) carry[i] = std::move(r[i]);
  }
  carry.insert(carry.end(), std::make_move_iterator(out.begin()),
               std::make_move_iterator(out.end()));
  return carry;
}

absl::StatusOr<std::vector<HostTensor>> RunWhile(const Node& node, absl::Span<const HostTensor> in,
                                                 absl::Span<const TensorType> out_types,
                                                 const BodyRunner& run) {
  const auto& a = std::get<ControlFlowAttrs>(node.attrs());
  const size_t nv = a.num_carried;
  const absl::Span<const HostTensor> captures = in.subspan(nv);
  std::vector<HostTensor> vars(in.begin(), in.begin() + nv);
  for (int64_t k = 0; a.max_iterations < 0 || k < a.max_iterations; ++k) {
    BRAZE_ASSIGN_OR_RETURN(std::vector<HostTensor> c, run(0, Params(vars, captures)));
    if (c.size() != 1 || c[0].num_elements() != 1) {
      return absl::InternalError("While's cond returned no scalar");
    }
    if (c[0].GetDouble(0) == 0) break;
    BRAZE_ASSIGN_OR_RETURN(vars, run(1, Params(vars, captures)));
    BRAZE_RETURN_IF_ERROR(
        CheckResults(BodyOf(node, 1), vars, out_types, absl::StrCat(" at iteration ", k)));
  }
  return vars;
}

}  // namespace

absl::StatusOr<std::vector<HostTensor>> RunControlFlow(const Node& node,
                                                       absl::Span<const HostTensor> inputs,
                                                       absl::Span<const TensorType> output_types,
                                                       const BodyRunner& run) {
  switch (node.op()) {
    case OpKind::kCond:
      return RunCond(node, inputs, output_types, run);
    case OpKind::kScan:
      return RunScan(node, inputs, output_types, run);
    case OpKind::kWhile:
      return RunWhile(node, inputs, output_types, run);
    default:
      return absl::InternalError(absl::StrCat(node.op_name(), " is not a control-flow op"));
  }
}

absl::StatusOr<std::vector<HostTensor>> RunBodyReference(const Body& body,
                                                         std::vector<HostTensor> params) {
  const Graph& g = *body.graph;
  const std::vector<bool> needed = ir::BodyNodesNeeded(body);
  std::unordered_map<int, size_t> param_of;
  for (size_t i = 0; i < body.params.size(); ++i) param_of[body.params[i].node_id()] = i;
  std::vector<std::vector<HostTensor>> values(g.num_nodes());
  for (int id = 0; id < g.num_nodes(); ++id) {
    if (!needed[id]) continue;
    const Node& n = g.node(id);
    const std::string label =
        absl::StrCat(body.name, ": node '", n.name(), "' (", n.op_name(), ")");
    if (auto it = param_of.find(id); it != param_of.end()) {
      values[id] = {params[it->second]};
      continue;
    }
    std::vector<HostTensor> ins;
    std::vector<TensorType> types;
    for (const Tensor& in : n.inputs()) {
      ins.push_back(values[in.node_id()][in.index()]);
      types.push_back(ins.back().type());
    }
    auto out_types = InferOutputTypes(n.op(), n.attrs(), types);
    if (!out_types.ok()) return Invalid(absl::StrCat(label, ": ", out_types.status().message()));
    auto out = RunReferenceKernel(n, ins, *out_types);
    if (!out.ok()) {
      return absl::Status(out.status().code(), absl::StrCat(label, ": ", out.status().message()));
    }
    values[id] = *std::move(out);
  }
  std::vector<HostTensor> results;
  for (const Tensor& r : body.results) results.push_back(values[r.node_id()][r.index()]);
  return results;
}

}  // namespace braze
