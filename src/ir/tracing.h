// Function tracing support in the graph (used by braze::Function, src/api/). While a
// Function traces into graph T on this thread, every op built on a graph that existed
// before the trace began (a program's own graph) is built in T instead, as TF builds
// everything inside a tf.function into its FuncGraph; tensors of other graphs that such
// ops use are handed to T's capture function (Graph::set_capture), which returns what
// stands for them in T (a Variable of T sharing the outside variable's value, a copy of
// a Const) or an error. Graphs created during the trace are left alone.
#ifndef BRAZE_IR_TRACING_H_
#define BRAZE_IR_TRACING_H_

#include <cstdint>
#include <vector>

namespace braze {

class Graph;

namespace ir {

// RAII: marks `graph` as the graph being traced into on this thread.
class TracingScope {
 public:
  explicit TracingScope(Graph* graph);
  ~TracingScope();
  TracingScope(const TracingScope&) = delete;
  TracingScope& operator=(const TracingScope&) = delete;

 private:
  Graph* previous_graph_;
  uint64_t previous_first_new_id_;
};

// The graph being traced into on this thread (null: none), and the first graph id
// created after the trace began.
Graph* TracingGraph();
uint64_t TracingFirstNewGraphId();

// RAII: marks `body` as a control-flow body being traced on this thread (bodies nest: a
// Scan built in a Cond's branch). An op whose inputs include a tensor of such a body is
// built in the innermost one of them, even when its first input (which picks the graph
// the builder adds to) is a tensor of an enclosing graph: `w * x` in a body, with w
// captured, is the body's op as `x * w` is (TF builds every op of a body in its
// FuncGraph). Graph::AddNode asks InnermostTracedBody.
class BodyTracingScope {
 public:
  explicit BodyTracingScope(Graph* body);
  ~BodyTracingScope();
  BodyTracingScope(const BodyTracingScope&) = delete;
  BodyTracingScope& operator=(const BodyTracingScope&) = delete;
};

// Of the bodies being traced on this thread, the innermost one that `graphs` holds, when
// it is nested deeper than `g` (g itself being no body, or an enclosing one); else null.
Graph* InnermostTracedBody(const Graph* g, const std::vector<const Graph*>& graphs);

}  // namespace ir
}  // namespace braze

#endif  // BRAZE_IR_TRACING_H_
