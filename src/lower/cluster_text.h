// A lossless text form of a ClusterSpec: what BRAZE_FLAGS=--dump_to writes beside each
// kernel (runtime/dump.h) so that a tool (braze-tune) can rebuild the cluster of a real
// program in a graph of its own and compile it again. No Halide include.
//
// The format (version 1), one item a line; `#` starts a comment outside quotes, blank
// lines are ignored:
//
//   braze-cluster 1
//   name "cluster_0"
//   input 0 f32 [128,784] symbols [0,-1]
//   input 1 f32 [784,10]
//   node 0 MatMul transpose_a=0 transpose_b=0 in=a0,a1 name="dense/MatMul"
//   node 1 Const value=f32[10]:0000803f...  in= name="dense/bias"   # 1, 2, ...
//   node 2 Add in=n0.0,n1.0 name="dense/Add"
//   node 3 Pad paddings=[1:2,0:0] value=0x1.999999999999ap-4 in=n2.0 name="Pad"   # 0.1
//   output 0 n3.0
//   output 1 n0.0
//   end
//
// - `input i DTYPE SHAPE [symbols CLASSES]`: argument i's concrete type and, when the
//   spec has input_symbols, the class of each of its dims (-1: concrete).
// - `node k OP KEY=VALUE... in=REFS name="..."`: the cluster's k-th node (OP as
//   op_list.def spells it) with every field of its typed attributes; REFS name its
//   inputs by position, as the cluster key does: `a3` is argument 3, `n2.0` output 0 of
//   node 2 of the cluster (an earlier line).
//   Attribute keys by family: Placeholder dtype= shape=; Const value=; Variable dtype=
//   shape= initial_value= (a value or `none`); Cast dtype=; Sum/Mean/Max/Min axes=
//   keep_dims=; ArgMax axis=; MatMul/BatchMatMul transpose_a= transpose_b=; Reshape
//   shape=; Transpose perm=; BroadcastTo shape=; Concat axis=; Slice begin= size=; Pad
//   paddings=[LO:HI,...] value=; OneHot depth= on_value= off_value= dtype=.
//   A value is DTYPE SHAPE `:` its bytes in hex, as stored (row-major, this machine's
//   byte order); doubles are C99 hex floats (%a), so they round-trip bit for bit
//   (decimal is read too); booleans are 0/1.
// - `output j REF`: the spec's j-th result.
// - `end`: the last line (a file without it was cut short).
//
// Names are double-quoted with C escapes (\" \\ \n \t \xHH).
#ifndef BRAZE_LOWER_CLUSTER_TEXT_H_
#define BRAZE_LOWER_CLUSTER_TEXT_H_

#include <memory>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "braze/graph.h"
#include "lower/cluster_spec.h"

namespace braze {

// The version ClusterToText writes and ClusterFromText reads.
inline constexpr int kClusterTextVersion = 1;

// `spec` as text (the format above). InvalidArgument for what the format cannot hold: a
// HostCall node (a user's C++ function; never part of a compiled cluster), a Const
// without a value, a node input or result that is neither an argument nor an earlier
// node of the cluster, input_types not parallel to inputs.
absl::StatusOr<std::string> ClusterToText(const ClusterSpec& spec);

// A cluster rebuilt from its text: a fresh graph holding a Placeholder per argument (its
// declared shape: -1 for a symbolic dim, else the size) and the cluster's nodes, and
// the spec over it (node_types empty: the lowering infers them). `spec.graph` is
// `graph.get()`, so moving a RebuiltCluster keeps it valid.
struct RebuiltCluster {
  std::unique_ptr<Graph> graph;
  ClusterSpec spec;
};

// Parses ClusterToText's output. ClusterKey (compile/cluster_key.h) of the result equals
// that of the spec that was written. Every error is InvalidArgument
// "<source_name>:<line>: <what>" (a bad version, unknown op or key, bad number, a
// reference to a node not defined yet, a graph error from the node's shape inference,
// a file cut short); no input crashes.
absl::StatusOr<RebuiltCluster> ClusterFromText(std::string_view text, std::string_view source_name);

}  // namespace braze

#endif  // BRAZE_LOWER_CLUSTER_TEXT_H_
