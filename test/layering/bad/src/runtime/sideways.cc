// Fixture: runtime includes frontend (not among its DEPS) and api (above it).
#include "runtime/plan.h"
#include "compile/compile.h"
#include <frontend/eager_body.h>
#include "api/signature.h"
