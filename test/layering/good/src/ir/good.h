// Fixture: ir includes only itself, the public API and outside libraries.
#include "ir/graph_util.h"
#include "braze/graph.h"
#include "absl/types/span.h"
