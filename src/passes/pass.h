// The pass interface, after XLA's HloPassInterface: a name for logs and dumps, and a
// Run that returns whether the pass did anything.
//
// Unlike XLA's, Braze passes take a const Graph: a user's Graph is append-only and may be
// shared by several Sessions with different options, so passes are analyses that leave
// their result in the pass object (e.g. MarkForCompilationPass::result()) instead of
// rewriting the graph in place.
#ifndef BRAZE_PASSES_PASS_H_
#define BRAZE_PASSES_PASS_H_

#include <string>

#include "absl/status/statusor.h"
#include "braze/graph.h"

namespace braze {

class GraphPass {
 public:
  virtual ~GraphPass() = default;
  // A short snake_case identifier ("mark_for_compilation").
  virtual std::string name() const = 0;
  // Analyzes `graph`. Returns true when the result is non-trivial (what "changed" means
  // for an analysis, e.g. at least one cluster formed), or an error naming the problem.
  virtual absl::StatusOr<bool> Run(const Graph& graph) = 0;
};

}  // namespace braze

#endif  // BRAZE_PASSES_PASS_H_
