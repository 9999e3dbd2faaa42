// Fixture: api includes runtime and frontend (its DEPS) and what they reach.
#include "api/signature.h"
#include "runtime/plan.h"
#include "frontend/eager_body.h"
#include "ir/tracing.h"
