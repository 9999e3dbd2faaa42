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

}  // namespace ir
}  // namespace braze

#endif  // BRAZE_IR_TRACING_H_
