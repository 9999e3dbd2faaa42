// Fixture: the lowest layer includes the frontend.
#ifndef BRAZE_IR_UPWARD_H_
#define BRAZE_IR_UPWARD_H_
#include "braze/graph.h"
  #  include "frontend/eager_body.h"
#endif
