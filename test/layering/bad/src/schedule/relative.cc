// Fixture: schedule reaches device through a relative path; schedule may use only ir.
#include "schedule/scheduler.h"
#include "../device/backend.h"
#include "ir/graph_util.h"
