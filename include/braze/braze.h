// Umbrella header for users of Braze.
#ifndef BRAZE_BRAZE_H_
#define BRAZE_BRAZE_H_

#include "braze/checkpoint.h"
#include "braze/control_flow.h"
#include "braze/data.h"
#include "braze/device.h"
#include "braze/distributed.h"
#include "braze/dtype.h"
#include "braze/function.h"
#include "braze/gradients.h"
#include "braze/graph.h"
#include "braze/host_tensor.h"
#include "braze/jit_scope.h"
#include "braze/logging.h"
#include "braze/ops.h"
#include "braze/optimizers.h"
#include "braze/safetensors.h"
#include "braze/session.h"
#include "braze/status.h"
#include "braze/timeline.h"

#endif  // BRAZE_BRAZE_H_
