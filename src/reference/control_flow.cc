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

// Copies row `i` of `t`'s leading axis into `row` (of the row's type).
void GetRow(const HostTensor& t, int64_t i, HostTensor& row) {
  if (row.num_bytes() > 0) {
    std::memcpy(row.raw_data(), static_cast<const char*>(t.raw_data()) + i * row.num_bytes(),
                row.num_bytes());
  }
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

// Pointers to `head` then `captures`: a body's parameters, passed by reference.
std::vector<const HostTensor*> Params(absl::Span<const HostTensor> head,
                                      absl::Span<const HostTensor> captures) {
  std::vector<const HostTensor*> p;
  p.reserve(head.size() + captures.size());
  for (const HostTensor& t : head) p.push_back(&t);
  for (const HostTensor& t : captures) p.push_back(&t);
  return p;
}

absl::StatusOr<std::vector<HostTensor>> RunCond(const Node& node, absl::Span<const HostTensor> in,
                                                absl::Span<const TensorType> out_types,
                                                const BodyRunner& run, LoopCounters& counters) {
  const int branch = in[0].GetDouble(0) != 0 ? 0 : 1;
  std::vector<HostTensor> out;
  ++counters.body_runs;
  BRAZE_RETURN_IF_ERROR(run(branch, Params(in.subspan(1), {}), &out));
  BRAZE_RETURN_IF_ERROR(CheckResults(BodyOf(node, branch), out, out_types, ""));
  return out;
}

// Each step reads the carry by reference and leaves the new carry in a second set of
// buffers, swapped with the first after the step: no carry is copied between steps
// (only into the stacked carries the gradient reads), and captures never are.
absl::StatusOr<std::vector<HostTensor>> RunScan(const Node& node, absl::Span<const HostTensor> in,
                                                absl::Span<const TensorType> out_types,
                                                const BodyRunner& run, LoopCounters& counters) {
  const auto& a = std::get<ControlFlowAttrs>(node.attrs());
  const size_t nc = a.num_carried, ne = a.num_elems;
  const size_t ns = out_types.size() - 2 * nc;  // step outputs
  const int64_t length = in[nc].dim(0);
  const absl::Span<const HostTensor> captures = in.subspan(nc + ne);
  std::vector<HostTensor> carry(in.begin(), in.begin() + nc);
  for (const HostTensor& c : carry) counters.copied_bytes += c.num_bytes();
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
  std::vector<HostTensor> rows;  // this step's slice of each elem, reused
  for (size_t e = 0; e < ne; ++e) {
    const Shape& s = in[nc + e].shape();
    rows.emplace_back(in[nc + e].dtype(), Shape(s.begin() + 1, s.end()));
  }
  std::vector<const HostTensor*> params = Params(carry, {});
  for (const HostTensor& r : rows) params.push_back(&r);
  for (const HostTensor& c : captures) params.push_back(&c);
  std::vector<HostTensor> next;  // the step's results, reused
  for (int64_t k = 0; k < length; ++k) {
    const int64_t t = a.reverse ? length - 1 - k : k;
    for (size_t i = 0; i < nc; ++i) {
      SetRow(out[ns + i], t, carry[i]);
      params[i] = &carry[i];
      counters.copied_bytes += carry[i].num_bytes();
    }
    for (size_t e = 0; e < ne; ++e) {
      GetRow(in[nc + e], t, rows[e]);
      counters.copied_bytes += rows[e].num_bytes();
    }
    ++counters.body_runs;
    BRAZE_RETURN_IF_ERROR(run(0, params, &next));
    BRAZE_RETURN_IF_ERROR(CheckResults(BodyOf(node, 0), next, want, absl::StrCat(" at step ", t)));
    for (size_t j = 0; j < ns; ++j) {
      SetRow(out[j], t, next[nc + j]);
      counters.copied_bytes += next[nc + j].num_bytes();
    }
    for (size_t i = 0; i < nc; ++i) std::swap(carry[i], next[i]);
  }
  carry.insert(carry.end(), std::make_move_iterator(out.begin()),
               std::make_move_iterator(out.end()));
  return carry;
}

absl::StatusOr<std::vector<HostTensor>> RunWhile(const Node& node, absl::Span<const HostTensor> in,
                                                 absl::Span<const TensorType> out_types,
                                                 const BodyRunner& run, LoopCounters& counters) {
  const auto& a = std::get<ControlFlowAttrs>(node.attrs());
  const size_t nv = a.num_carried;
  const absl::Span<const HostTensor> captures = in.subspan(nv);
  std::vector<HostTensor> vars(in.begin(), in.begin() + nv);
  for (const HostTensor& v : vars) counters.copied_bytes += v.num_bytes();
  std::vector<HostTensor> c, next;  // the cond's and the body's results, reused
  for (int64_t k = 0; a.max_iterations < 0 || k < a.max_iterations; ++k) {
    const std::vector<const HostTensor*> params = Params(vars, captures);
    ++counters.body_runs;
    BRAZE_RETURN_IF_ERROR(run(0, params, &c));
    if (c.size() != 1 || c[0].num_elements() != 1) {
      return absl::InternalError("While's cond returned no scalar");
    }
    if (c[0].GetDouble(0) == 0) break;
    ++counters.body_runs;
    BRAZE_RETURN_IF_ERROR(run(1, params, &next));
    BRAZE_RETURN_IF_ERROR(
        CheckResults(BodyOf(node, 1), next, out_types, absl::StrCat(" at iteration ", k)));
    std::swap(vars, next);
  }
  return vars;
}

}  // namespace

absl::StatusOr<std::vector<HostTensor>> RunControlFlow(const Node& node,
                                                       absl::Span<const HostTensor> inputs,
                                                       absl::Span<const TensorType> output_types,
                                                       const BodyRunner& run,
                                                       LoopCounters* counters) {
  LoopCounters unused;
  LoopCounters& c = counters != nullptr ? *counters : unused;
  switch (node.op()) {
    case OpKind::kCond:
      return RunCond(node, inputs, output_types, run, c);
    case OpKind::kScan:
      return RunScan(node, inputs, output_types, run, c);
    case OpKind::kWhile:
      return RunWhile(node, inputs, output_types, run, c);
    default:
      return absl::InternalError(absl::StrCat(node.op_name(), " is not a control-flow op"));
  }
}

absl::Status RunBodyReference(const Body& body, absl::Span<const HostTensor* const> params,
                              std::vector<HostTensor>* results) {
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
      values[id] = {*params[it->second]};
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
  results->clear();
  for (const Tensor& r : body.results) results->push_back(values[r.node_id()][r.index()]);
  return absl::OkStatus();
}

}  // namespace braze
