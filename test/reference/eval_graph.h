// A tiny graph evaluator for the reference-kernel tests: it evaluates the nodes a fetch
// needs in id order, takes Placeholder values from the feeds and Variable values from
// their initial values, re-infers each node's output types from its concrete inputs (as
// the executor does) and runs everything else through RunReferenceKernel. It lets the
// kernels be tested without the Session.
#ifndef BRAZE_TEST_REFERENCE_EVAL_GRAPH_H_
#define BRAZE_TEST_REFERENCE_EVAL_GRAPH_H_

#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "braze/graph.h"
#include "braze/host_tensor.h"
#include "gtest/gtest.h"
#include "reference/reference.h"

namespace braze {
namespace reftest {

using FeedList = std::vector<std::pair<Tensor, HostTensor>>;

inline absl::StatusOr<std::vector<HostTensor>> Evaluate(const std::vector<Tensor>& fetches,
                                                        const FeedList& feeds = {}) {
  if (fetches.empty()) return std::vector<HostTensor>{};
  for (const Tensor& t : fetches) {
    if (!t.valid()) return absl::InvalidArgumentError("invalid fetch");
  }
  const Graph& g = *fetches[0].graph();
  // Mark what the fetches need; inputs always precede their users, so one backward
  // sweep over ids finds it.
  std::vector<bool> needed(g.num_nodes(), false);
  for (const Tensor& t : fetches) needed[t.node_id()] = true;
  for (int id = g.num_nodes() - 1; id >= 0; --id) {
    if (!needed[id]) continue;
    for (const Tensor& in : g.node(id).inputs()) needed[in.node_id()] = true;
  }
  std::vector<std::vector<HostTensor>> values(g.num_nodes());
  for (int id = 0; id < g.num_nodes(); ++id) {
    if (!needed[id]) continue;
    const Node& node = g.node(id);
    if (!node.status().ok()) return node.status();
    auto fail = [&](const absl::Status& s) {
      return absl::Status(s.code(), absl::StrCat("node '", node.name(), "': ", s.message()));
    };
    if (node.op() == OpKind::kPlaceholder) {
      bool found = false;
      for (const auto& [t, value] : feeds) {
        if (t.node_id() != id) continue;
        if (value.dtype() != node.output(0).dtype ||
            !ShapeMatches(node.output(0).shape, value.shape())) {
          return fail(absl::InvalidArgumentError(absl::StrCat(
              "fed ", TypeString(value.type()), ", expected ", TypeString(node.output(0)))));
        }
        values[id] = {value};
        found = true;
      }
      if (!found) return fail(absl::InvalidArgumentError("placeholder not fed"));
      continue;
    }
    if (node.op() == OpKind::kVariable) {
      const auto& attrs = node.attrs_as<VariableAttrs>();
      if (attrs.initial_value == nullptr) {
        return fail(absl::FailedPreconditionError("uninitialized variable"));
      }
      values[id] = {*attrs.initial_value};
      continue;
    }
    std::vector<HostTensor> inputs;
    std::vector<TensorType> input_types;
    for (const Tensor& in : node.inputs()) {
      inputs.push_back(values[in.node_id()][in.index()]);
      input_types.push_back(inputs.back().type());
    }
    absl::StatusOr<std::vector<TensorType>> types =
        InferOutputTypes(node.op(), node.attrs(), input_types);
    if (!types.ok()) return fail(types.status());
    absl::StatusOr<std::vector<HostTensor>> outs = RunReferenceKernel(node, inputs, *types);
    if (!outs.ok()) return fail(outs.status());
    values[id] = *std::move(outs);
  }
  std::vector<HostTensor> result;
  for (const Tensor& t : fetches) result.push_back(values[t.node_id()][t.index()]);
  return result;
}

inline absl::StatusOr<HostTensor> Evaluate(const Tensor& fetch, const FeedList& feeds = {}) {
  absl::StatusOr<std::vector<HostTensor>> r = Evaluate(std::vector<Tensor>{fetch}, feeds);
  if (!r.ok()) return r.status();
  return (*r)[0];
}

// Same dtype and shape, and every value within atol + rtol * |want| (NaN matches NaN,
// infinities must be equal). With the default tolerance of 0 the match is exact.
inline ::testing::AssertionResult TensorNear(const HostTensor& got, const HostTensor& want,
                                             double tol = 0) {
  std::string why;
  if (AllClose(got, want, tol, tol, &why)) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure()
         << why << "\n  got:  " << got.DebugString(64) << "\n  want: " << want.DebugString(64);
}

// Evaluates `t` and compares it with `want`.
inline ::testing::AssertionResult EvalNear(const Tensor& t, const HostTensor& want, double tol = 0,
                                           const FeedList& feeds = {}) {
  absl::StatusOr<HostTensor> got = Evaluate(t, feeds);
  if (!got.ok()) return ::testing::AssertionFailure() << got.status();
  return TensorNear(*got, want, tol);
}

// Evaluates `t`, which must fail with `code` and a message containing `substr`.
inline ::testing::AssertionResult EvalFails(const Tensor& t, absl::StatusCode code,
                                            const std::string& substr, const FeedList& feeds = {}) {
  absl::StatusOr<HostTensor> got = Evaluate(t, feeds);
  if (got.ok()) {
    return ::testing::AssertionFailure() << "expected an error, got " << got->DebugString();
  }
  if (got.status().code() != code || got.status().message().find(substr) == std::string::npos) {
    return ::testing::AssertionFailure() << "expected code " << absl::StatusCodeToString(code)
                                         << " with '" << substr << "', got " << got.status();
  }
  return ::testing::AssertionSuccess();
}

}  // namespace reftest
}  // namespace braze

#endif  // BRAZE_TEST_REFERENCE_EVAL_GRAPH_H_
