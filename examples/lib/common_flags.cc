#include "lib/common_flags.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace braze_examples {

const char* JitModeName(JitMode mode) {
  switch (mode) {
    case JitMode::kOff:
      return "off";
    case JitMode::kScope:
      return "scope";
    case JitMode::kAuto:
      return "auto";
  }
  return "?";
}

std::string CheckpointFlagsUsage(const CommonFlags& d) {
  return absl::StrFormat(
      "  --checkpoint_dir  save checkpoints there (docs/CHECKPOINTS.md) and resume from the\n"
      "               newest one it holds: the same command after a kill continues the run\n"
      "  --checkpoint_every  steps between checkpoints (default %lld); one is also saved\n"
      "               at the last step\n"
      "  --keep_checkpoints  checkpoints kept (default %lld; 0: all)\n"
      "  --print_losses  print every step's loss exactly: `step_loss <step> <hex float>`\n",
      static_cast<long long>(d.checkpoint_every), static_cast<long long>(d.keep_checkpoints));
}

bool ParseBool(const std::string& value, bool* out) {
  if (value == "true" || value == "1") {
    *out = true;
  } else if (value == "false" || value == "0") {
    *out = false;
  } else {
    return false;
  }
  return true;
}

bool ParseFiniteDouble(const std::string& value, double* out) {
  return absl::SimpleAtod(value, out) && std::isfinite(*out);
}

FlagMatch ParseCommonFlag(const std::string& arg, const std::string& value, CommonFlags* flags) {
  bool ok = true;
  if (arg == "--jit") {
    ok = value == "off" || value == "scope" || value == "auto";
    if (ok) {
      flags->jit = value == "off"    ? JitMode::kOff
                   : value == "auto" ? JitMode::kAuto
                                     : JitMode::kScope;
    }
  } else if (arg == "--api") {
    ok = value == "session" || value == "function";
    if (ok) flags->api = value == "function" ? Api::kFunction : Api::kSession;
  } else if (arg == "--device") {
    flags->device = value;
    ok = value == "auto" || braze::ParseDevice(value).ok();
  } else if (arg == "--steps") {
    ok = absl::SimpleAtoi(value, &flags->steps) && flags->steps >= 1;
  } else if (arg == "--batch") {
    ok = absl::SimpleAtoi(value, &flags->batch) && flags->batch >= 1;
  } else if (arg == "--seed") {
    ok = absl::SimpleAtoi(value, &flags->seed);
  } else if (arg == "--checkpoint_dir") {
    flags->checkpoint_dir = value;
    ok = !value.empty();
  } else if (arg == "--checkpoint_every") {
    ok = absl::SimpleAtoi(value, &flags->checkpoint_every) && flags->checkpoint_every >= 1;
  } else if (arg == "--keep_checkpoints") {
    ok = absl::SimpleAtoi(value, &flags->keep_checkpoints) && flags->keep_checkpoints >= 0 &&
         flags->keep_checkpoints <= 1000000;
  } else if (arg == "--precision") {
    ok = value == "f32" || value == "bf16" || value == "f16";
    flags->precision = value == "bf16"  ? braze::DType::kBF16
                       : value == "f16" ? braze::DType::kF16
                                        : braze::DType::kF32;
  } else if (arg == "--print_losses") {
    ok = ParseBool(value, &flags->print_losses);
  } else {
    return FlagMatch::kUnknown;
  }
  return ok ? FlagMatch::kOk : FlagMatch::kBadValue;
}

namespace {

std::string ProgramName(const char* argv0) {
  const std::string path = argv0 == nullptr ? "" : argv0;
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

}  // namespace

absl::Status ParseCommandLine(
    int argc, char** argv, const std::vector<std::string>& bare, const std::function<void()>& help,
    const std::function<FlagMatch(const std::string&, const std::string&)>& parse) {
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--help" || arg == "-h") {
      help();
      std::exit(0);
    }
    std::string value;
    if (const size_t eq = arg.find('='); eq != std::string::npos) {
      value = arg.substr(eq + 1);
      arg.resize(eq);
    } else if (std::find(bare.begin(), bare.end(), arg) != bare.end()) {
      value = "true";
    } else if (i + 1 < argc) {
      value = argv[++i];
    } else {
      return absl::InvalidArgumentError(absl::StrCat("flag ", arg, " needs a value"));
    }
    switch (parse(arg, value)) {
      case FlagMatch::kOk:
        break;
      case FlagMatch::kBadValue:
        return absl::InvalidArgumentError(absl::StrCat("bad value for ", arg, ": ", value));
      case FlagMatch::kUnknown:
        return absl::InvalidArgumentError(absl::StrCat("unknown flag ", arg));
      case FlagMatch::kUnused:
        return absl::InvalidArgumentError(
            absl::StrCat("flag ", arg, " does not apply to ", ProgramName(argv[0])));
    }
  }
  return absl::OkStatus();
}

braze::SessionOptions SessionOptionsFor(JitMode jit, const std::string& device) {
  braze::SessionOptions options;
  if (jit == JitMode::kAuto) options.global_jit_level = braze::JitLevel::kOn1;
  options.device = device;
  return options;
}

void SetFunctionOptions(JitMode jit, const std::string& device, braze::FunctionOptions* options) {
  if (jit == JitMode::kScope) options->jit_compile = true;
  if (jit == JitMode::kOff) options->jit_compile = false;
  if (jit == JitMode::kAuto) options->session.global_jit_level = braze::JitLevel::kOn1;
  options->session.device = device;
}

}  // namespace braze_examples
