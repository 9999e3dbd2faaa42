// The internal side of braze/logging.h: what Braze's layers call to log. Everything goes
// through one process-wide sink (stderr by default); see braze/logging.h for severities,
// verbosity levels and thread-safety.
//
//   LogWarning(absl::StrCat(what, " failed to compile, running it op by op: ", why));
//   if (VLogIsOn(2)) LogInfo(2, ExpensiveDescription());  // build the text only if shown
#ifndef BRAZE_IR_LOGGING_H_
#define BRAZE_IR_LOGGING_H_

#include <string_view>

#include "braze/logging.h"

namespace braze {

// Whether an info message of verbosity `v` would be delivered: one relaxed atomic load,
// so callers can skip building a message nobody sees.
bool VLogIsOn(int v);

// Delivers `message` (no trailing newline needed) to the sink when VLogIsOn(v).
void LogInfo(int v, std::string_view message);

// Always delivered.
void LogWarning(std::string_view message);
void LogError(std::string_view message);

}  // namespace braze

#endif  // BRAZE_IR_LOGGING_H_
