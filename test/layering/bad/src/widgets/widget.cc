// Fixture: a folder of src/ that no braze_layer(...) declares.
#include "ir/graph_util.h"
