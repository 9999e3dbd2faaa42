// Fixture: a header of lower.
#include "braze/dtype.h"
