// What the random programs cover (braze-fuzz --coverage, docs/FUZZING.md "Coverage"):
// each program is built into a graph (its gradients included) and every node is
// tallied, the bodies of control flow too, by op and dtype and by the attributes and
// modes an outside generator would vary (broadcasting, keep_dims, negative axes, 0- and
// 1-sized dims, symbolic dims, every padding, stride, dilation and layout of the window
// ops, every cast). Features come from the graph, not from the printed C++, so a
// composite counts as the primitives it is built of, and a gradient as its ops.
#ifndef BRAZE_TOOLS_FUZZ_FUZZ_COVERAGE_H_
#define BRAZE_TOOLS_FUZZ_FUZZ_COVERAGE_H_

#include <cstdint>
#include <map>
#include <set>
#include <string>

#include "tools/fuzz/random_program.h"

namespace braze {
namespace fuzz {

class Coverage {
 public:
  // Builds `program` and tallies its nodes; a program that does not build is counted
  // under "program/does not build".
  void Add(const Program& program);
  // Every feature with the nodes and the programs that hold it, in sections; every op
  // of op_list.def and every cast between two dtypes is listed, 0 where never drawn.
  std::string Table() const;
  // Nodes holding `feature` (0 if none).
  int64_t nodes(const std::string& feature) const;
  int64_t programs() const { return programs_; }

 private:
  void Tally(const Graph& g, std::set<std::string>& seen);
  void CountSymbols(const Program& program, const ProgramInput& in, std::set<std::string>& seen);
  void Count(const std::string& feature, std::set<std::string>& seen);

  std::map<std::string, int64_t> nodes_;    // per feature: the nodes holding it
  std::map<std::string, int64_t> holders_;  // per feature: the programs holding it
  int64_t programs_ = 0;
};

}  // namespace fuzz
}  // namespace braze

#endif  // BRAZE_TOOLS_FUZZ_FUZZ_COVERAGE_H_
