// The compile-cache key of a cluster: its structure (ops, typed attrs, internal wiring,
// which argument feeds which input, which values are results), the concrete input types,
// and the compile options. Two clusters with equal keys compile to the same kernel, even
// across graphs and sessions. Constants enter by a hash of their bytes.
#ifndef BRAZE_COMPILE_CLUSTER_KEY_H_
#define BRAZE_COMPILE_CLUSTER_KEY_H_

#include <string>

#include "compile/compile.h"

namespace braze {

std::string ClusterKey(const ClusterSpec& spec, const CompileOptions& options);

}  // namespace braze

#endif  // BRAZE_COMPILE_CLUSTER_KEY_H_
