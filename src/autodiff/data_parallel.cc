// Data parallelism's graph builders (braze/optimizers.h): AverageGradients packs the
// gradients into buckets, one AllReduce each, as PyTorch's DistributedDataParallel does;
// BroadcastVariables gives every rank rank 0's initial values.
//
// Why buckets: one all-reduce per gradient pays the engine's latency (tens of
// microseconds over TCP, more across machines) once per tensor, and one all-reduce for
// everything cannot start before the whole backward pass ends. Buckets of ~25 MB in
// reverse variable order (the order the backward pass produces them) start early and
// each moves enough bytes to reach the link's bandwidth (docs/DISTRIBUTED.md has the
// arithmetic).
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "braze/distributed.h"
#include "braze/ops.h"
#include "braze/optimizers.h"

namespace braze {
namespace {

struct Bucket {
  std::vector<int> members;  // indices into the gradients, in backward order
  int64_t bytes = 0;
};

std::vector<Bucket> MakeBuckets(const std::vector<Tensor>& grads, int64_t bucket_bytes) {
  std::vector<Bucket> buckets;
  for (int i = static_cast<int>(grads.size()) - 1; i >= 0; --i) {
    const int64_t bytes =
        static_cast<int64_t>(SizeOf(grads[i].dtype())) * NumElements(grads[i].shape());
    const bool fits = !buckets.empty() && buckets.back().bytes + bytes <= bucket_bytes &&
                      grads[buckets.back().members.front()].dtype() == grads[i].dtype();
    if (!fits) buckets.emplace_back();
    buckets.back().members.push_back(i);
    buckets.back().bytes += bytes;
  }
  return buckets;
}

}  // namespace

absl::StatusOr<std::vector<Tensor>> AverageGradients(const std::vector<Tensor>& grads,
                                                     int64_t bucket_bytes, std::string_view name) {
  if (grads.empty()) return absl::InvalidArgumentError("AverageGradients: no gradients");
  if (bucket_bytes < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("AverageGradients: bucket_bytes must be >= 1, got ", bucket_bytes));
  }
  Graph* g = grads[0].graph();
  for (size_t i = 0; i < grads.size(); ++i) {
    const Tensor& t = grads[i];
    if (!t.valid() || t.graph() != g || !IsFloating(t.dtype()) || !IsFullyDefined(t.shape())) {
      return absl::InvalidArgumentError(
          absl::StrCat("AverageGradients: gradient ", i,
                       " is not a floating tensor of known shape in the first gradient's graph"));
    }
  }
  NameScope scope(*g, name);
  std::vector<Tensor> out(grads.size());
  for (const Bucket& b : MakeBuckets(grads, bucket_bytes)) {
    if (b.members.size() == 1) {
      out[b.members[0]] = AllReduce(grads[b.members[0]], Reduction::kMean);
      continue;
    }
    std::vector<Tensor> flat;
    for (int i : b.members) flat.push_back(Reshape(grads[i], {-1}));
    const Tensor mean = AllReduce(Concat(flat, 0), Reduction::kMean);
    int64_t at = 0;
    for (int i : b.members) {
      const int64_t n = NumElements(grads[i].shape());
      out[i] = Reshape(Slice(mean, {at}, {n}), grads[i].shape());
      at += n;
    }
  }
  for (const Tensor& t : out) {
    if (!t.node().status().ok()) return t.node().status();
  }
  return out;
}

absl::StatusOr<std::vector<Tensor>> BroadcastVariables(const std::vector<Tensor>& vars, int root,
                                                       std::string_view name) {
  if (vars.empty()) return absl::InvalidArgumentError("BroadcastVariables: no variables");
  std::vector<Tensor> assigns;
  for (size_t i = 0; i < vars.size(); ++i) {
    const Tensor& v = vars[i];
    if (!v.valid() || v.node().op() != OpKind::kVariable) {
      return absl::InvalidArgumentError(
          absl::StrCat("BroadcastVariables: argument ", i, " is not a Variable"));
    }
    NameScope scope(*v.graph(), name);
    assigns.push_back(Assign(v, Broadcast(v, root)));
    if (!assigns.back().node().status().ok()) return assigns.back().node().status();
  }
  return assigns;
}

}  // namespace braze
