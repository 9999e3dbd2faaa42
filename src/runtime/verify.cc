// Verify mode; see verify.h.
#include "runtime/verify.h"

#include <stdlib.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <map>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "braze/status.h"
#include "reference/reference.h"

namespace braze {
namespace {

struct Difference {
  int64_t count = 0, worst = -1;
  double worst_err = 0;
};

}  // namespace

double OutputRtol(DType t, double rtol) {
  if (t == DType::kBF16) return std::max(rtol, 0x1p-7);
  if (t == DType::kF16) return std::max(rtol, 0x1p-10);
  return rtol;
}

namespace {

Difference Compare(const HostTensor& got, const HostTensor& want, const VerifyOptions& o) {
  Difference d;
  const double rtol = OutputRtol(want.dtype(), o.rtol);
  double scale = 1;
  for (int64_t i = 0; i < want.num_elements(); ++i) {
    if (std::isfinite(want.GetDouble(i))) scale = std::max(scale, std::fabs(want.GetDouble(i)));
  }
  const bool exact = !IsFloating(want.dtype());
  for (int64_t i = 0; i < want.num_elements(); ++i) {
    const double x = got.GetDouble(i), y = want.GetDouble(i);
    double err = 0;
    if (std::isnan(x) || std::isnan(y)) {
      err = std::isnan(x) == std::isnan(y) ? 0 : INFINITY;
    } else if (std::isinf(x) || std::isinf(y)) {
      err = x == y ? 0 : INFINITY;
    } else {
      err = std::fabs(x - y);
    }
    const double tol = exact ? 0 : o.atol * scale + rtol * std::fabs(y);
    if (err > tol && (d.count++ == 0 || err > d.worst_err)) {
      d.worst = i;
      d.worst_err = err;
    }
  }
  return d;
}

// Writes the kernel's schedule and lowered statement; returns the file's path.
std::string Dump(const Step& step, const CompiledKernel& kernel, const VerifyOptions& o) {
  std::string dir = o.dump_to;
  if (dir.empty()) {
    char tmpl[] = "/tmp/braze_verify_XXXXXX";
    if (mkdtemp(tmpl) == nullptr) return "(could not create a dump directory)";
    dir = tmpl;
  }
  const std::string path = absl::StrCat(dir, "/verify_", step.name, ".txt");
  std::ofstream out(path);
  out << "// " << step.name << ": differs from the reference kernels\n"
      << kernel.schedule_text() << "\n// Lowered Halide statement\n"
      << kernel.lowered_stmt();
  return out ? path : absl::StrCat("(could not write ", path, ")");
}

}  // namespace

absl::Status VerifyStep(const Graph& g, const Step& step, const std::vector<HostTensor>& inputs,
                        const std::vector<HostTensor>& outputs, const CompiledKernel& kernel,
                        const VerifyOptions& options) {
  std::map<std::pair<int, int>, HostTensor> values;
  for (size_t i = 0; i < step.inputs.size(); ++i) {
    values[{step.inputs[i].node_id(), step.inputs[i].index()}] = inputs[i];
  }
  std::vector<std::string> ops;
  for (int id : step.nodes) {
    const Node& n = g.node(id);
    ops.push_back(n.op_name());
    std::vector<HostTensor> in;
    std::vector<TensorType> types;
    for (const Tensor& t : n.inputs()) {
      in.push_back(values.at({t.node_id(), t.index()}));
      types.push_back(in.back().type());
    }
    BRAZE_ASSIGN_OR_RETURN(std::vector<TensorType> out_types,
                           InferOutputTypes(n.op(), n.attrs(), types));
    BRAZE_ASSIGN_OR_RETURN(std::vector<HostTensor> out, RunReferenceKernel(n, in, out_types));
    for (size_t o = 0; o < out.size(); ++o) values[{id, static_cast<int>(o)}] = std::move(out[o]);
  }
  for (size_t o = 0; o < step.outputs.size(); ++o) {
    const HostTensor& want = values.at({step.outputs[o].node_id(), step.outputs[o].index()});
    const Difference d = Compare(outputs[o], want, options);
    if (d.count == 0) continue;
    return absl::InternalError(absl::StrCat(
        "verify: ", step.kind == Step::Kind::kCluster ? "cluster '" : "kernel '", step.name,
        "' (ops: ", absl::StrJoin(ops, ", "), "; scheduler ",
        SchedulerName(kernel.scheduler_used()), ") differs from the reference kernels: output ", o,
        " ('", step.outputs[o].name(), "', ", TypeString(want.type()), "): ", d.count, " of ",
        want.num_elements(), " elements, worst [", d.worst, "]: got ",
        outputs[o].GetDouble(d.worst), ", reference ", want.GetDouble(d.worst),
        "; kernel dumped to ", Dump(step, kernel, options)));
  }
  return absl::OkStatus();
}

}  // namespace braze
