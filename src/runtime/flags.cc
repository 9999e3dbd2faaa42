#include "runtime/flags.h"

#include <cstdlib>
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "device/communicator.h"
#include "device/cpu_conv.h"
#include "ir/logging.h"
#include "ir/timeline.h"
#include "schedule/stored_schedule.h"

namespace braze {
namespace {

constexpr char kKnownFlags[] =
    "known flags: --dump_to=DIR, --clustering_debug[=true|false], --timeline=FILE, --v=N, "
    "--verify[=true|false], --log_compiles[=true|false], --symbolic_shapes[=true|false], "
    "--schedule_dirs=DIR[:DIR...], --stored_schedules[=true|false], "
    "--cpu_gemm_library[=true|false], --cpu_gemm_min_work=N, --cpu_conv_winograd[=true|false]";

absl::Status Bad(const std::string& what) {
  return absl::InvalidArgumentError(absl::StrCat("BRAZE_FLAGS: ", what, "; ", kKnownFlags));
}

bool IsSpace(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}

std::vector<std::string_view> SplitWhitespace(std::string_view text) {
  std::vector<std::string_view> tokens;
  size_t i = 0;
  while (i < text.size()) {
    while (i < text.size() && IsSpace(text[i])) ++i;
    const size_t start = i;
    while (i < text.size() && !IsSpace(text[i])) ++i;
    if (i > start) tokens.push_back(text.substr(start, i - start));
  }
  return tokens;
}

struct FlagState {
  BrazeFlags flags;
  absl::Status status;
};

FlagState* NewFlagStateFromEnvironment() {
  auto* state = new FlagState;
  const char* env = std::getenv("BRAZE_FLAGS");
  if (env == nullptr) return state;
  absl::StatusOr<BrazeFlags> parsed = ParseBrazeFlags(env);
  if (!parsed.ok()) {
    state->status = parsed.status();
    return state;
  }
  // A directory that is not one (a typo) was skipped: its tuned schedules were never
  // used, without a word (SessionOptions::schedule_dirs are checked the same way).
  for (const std::string& dir : parsed->schedule_dirs) {
    if (absl::Status checked = CheckScheduleDirectory(dir); !checked.ok()) {
      state->status = absl::InvalidArgumentError(
          absl::StrCat("BRAZE_FLAGS --schedule_dirs: ", checked.message(),
                       "; it must be a directory of stored schedules"));
      return state;
    }
  }
  const auto [rank, world_size] = comm::LauncherRankAndSize();
  ApplyRankToPaths(rank, world_size, &*parsed);
  if (!parsed->timeline.empty()) {
    absl::Status started = Timeline::Start(parsed->timeline);
    if (!started.ok()) {
      state->status =
          absl::Status(started.code(), absl::StrCat("BRAZE_FLAGS --timeline: ", started.message()));
      return state;
    }
  }
  state->flags = *std::move(parsed);
  if (state->flags.v) SetLogVerbosity(*state->flags.v);
  SetCpuConvWinograd(state->flags.cpu_conv_winograd);
  return state;
}

// Leaked on purpose: sessions may run during static destruction.
FlagState& State() {
  static FlagState* const state = NewFlagStateFromEnvironment();
  return *state;
}

}  // namespace

void ApplyRankToPaths(int rank, int world_size, BrazeFlags* flags) {
  if (world_size <= 1) return;
  const std::string tag = absl::StrCat("rank", rank);
  if (!flags->timeline.empty()) {
    std::filesystem::path file(flags->timeline);
    const std::string stem = file.stem().string(), ext = file.extension().string();
    file.replace_filename(absl::StrCat(stem, ".", tag, ext));
    flags->timeline = file.string();
  }
  if (!flags->dump_to.empty())
    flags->dump_to = (std::filesystem::path(flags->dump_to) / tag).string();
}

absl::StatusOr<BrazeFlags> ParseBrazeFlags(std::string_view text) {
  BrazeFlags flags;
  for (std::string_view token : SplitWhitespace(text)) {
    if (token.substr(0, 2) != "--" || token.size() == 2) {
      return Bad(absl::StrCat("malformed flag '", std::string(token),
                              "' (flags look like --name or --name=value)"));
    }
    std::string_view body = token.substr(2);
    const size_t eq = body.find('=');
    const std::string_view name = body.substr(0, eq);
    const bool has_value = eq != std::string_view::npos;
    const std::string value(has_value ? body.substr(eq + 1) : std::string_view());
    if (name == "dump_to" || name == "timeline") {
      if (!has_value || value.empty()) {
        return Bad(absl::StrCat("--", std::string(name), " needs a value (--", std::string(name),
                                name == "dump_to" ? "=DIR)" : "=FILE)"));
      }
      (name == "dump_to" ? flags.dump_to : flags.timeline) = value;
    } else if (name == "schedule_dirs") {
      if (!has_value || value.empty()) {
        return Bad("--schedule_dirs needs a value (--schedule_dirs=DIR[:DIR...])");
      }
      flags.schedule_dirs.clear();  // a repeated flag's last value wins
      for (absl::string_view dir : absl::StrSplit(value, ':', absl::SkipEmpty())) {
        flags.schedule_dirs.emplace_back(dir);
      }
    } else if (name == "clustering_debug" || name == "verify" || name == "log_compiles" ||
               name == "symbolic_shapes" || name == "stored_schedules" ||
               name == "cpu_gemm_library" || name == "cpu_conv_winograd") {
      bool& flag = name == "verify"              ? flags.verify
                   : name == "log_compiles"      ? flags.log_compiles
                   : name == "symbolic_shapes"   ? flags.symbolic_shapes
                   : name == "stored_schedules"  ? flags.stored_schedules
                   : name == "cpu_gemm_library"  ? flags.cpu_gemm_library
                   : name == "cpu_conv_winograd" ? flags.cpu_conv_winograd
                                                 : flags.clustering_debug;
      if (!has_value || value == "true" || value == "1") {
        flag = true;
      } else if (value == "false" || value == "0") {
        flag = false;
      } else {
        return Bad(
            absl::StrCat("--", std::string(name), " takes true, false, 1 or 0, not '", value, "'"));
      }
    } else if (name == "v") {
      int v = 0;
      if (!has_value || value.empty()) return Bad("--v needs a value (--v=N)");
      if (!absl::SimpleAtoi(value, &v) || v < 0) {
        return Bad(absl::StrCat("--v takes a non-negative integer, not '", value, "'"));
      }
      flags.v = v;
    } else if (name == "cpu_gemm_min_work") {
      int64_t n = 0;
      if (!has_value || !absl::SimpleAtoi(value, &n) || n < 1) {
        return Bad(absl::StrCat("--cpu_gemm_min_work takes a positive integer, not '", value, "'"));
      }
      flags.cpu_gemm_min_work = n;
    } else {
      return Bad(absl::StrCat("unknown flag '--", std::string(name), "'"));
    }
  }
  return flags;
}

const BrazeFlags& GetBrazeFlags() { return State().flags; }

const absl::Status& BrazeFlagsStatus() { return State().status; }

void SetBrazeFlagsForTesting(absl::StatusOr<BrazeFlags> flags) {
  FlagState& state = State();
  if (flags.ok()) {
    state.flags = *std::move(flags);
    state.status = absl::OkStatus();
    if (state.flags.v) SetLogVerbosity(*state.flags.v);
    SetCpuConvWinograd(state.flags.cpu_conv_winograd);
  } else {
    state.flags = BrazeFlags{};
    state.status = flags.status();
  }
}

}  // namespace braze
