// Fixture: runtime includes compile, passes, reference and, through compile, lower,
// schedule, device and ir.
#include "runtime/plan.h"
#include "compile/compile.h"
#include "lower/cluster_text.h"
#include "passes/dce.h"
#include "reference/kernels.h"
#include "device/cublas_gemm.h"
#include "ir/logging.h"
