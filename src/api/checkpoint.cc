// Checkpoint directories (braze/checkpoint.h): a manifest (nlohmann::json) with each
// file's size and zlib CRC-32 (the checksum the disk cache uses too), model.safetensors,
// written under a temporary name and renamed into place.
#include "braze/checkpoint.h"

#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <filesystem>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <system_error>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "braze/function.h"
#include "braze/status.h"
#include "nlohmann/json.hpp"

namespace braze {
namespace {

namespace fs = std::filesystem;
using Json = nlohmann::json;

constexpr char kFormat[] = "braze-checkpoint";
constexpr char kManifest[] = "manifest.json";
constexpr char kModel[] = "model.safetensors";
constexpr char kPrefix[] = "ckpt-";
constexpr char kTmpPrefix[] = ".tmp-ckpt-";
constexpr char kOldPrefix[] = ".old-ckpt-";

// A file-system failure with the errno's code (PermissionDenied, NotFound,
// InvalidArgument for an empty directory name, ...): an Internal code says Braze is wrong.
absl::Status FileError(const std::error_code& ec, const std::string& what) {
  return absl::Status(absl::ErrnoToStatusCode(ec.value()), absl::StrCat(what, ": ", ec.message()));
}

uint32_t Crc32(std::string_view bytes) {
  // zlib's crc32 takes a uInt length: feed large files in chunks.
  uLong crc = crc32(0L, Z_NULL, 0);
  for (size_t at = 0; at < bytes.size();) {
    const size_t n = std::min<size_t>(bytes.size() - at, 1u << 30);
    crc = crc32(crc, reinterpret_cast<const Bytef*>(bytes.data() + at), static_cast<uInt>(n));
    at += n;
  }
  return static_cast<uint32_t>(crc);
}

std::string CheckpointName(int64_t step) { return absl::StrFormat("%s%012d", kPrefix, step); }

// The step of a directory named ckpt-<digits>, or -1.
int64_t StepOfName(const std::string& name) {
  if (!absl::StartsWith(name, kPrefix)) return -1;
  const std::string digits = name.substr(sizeof(kPrefix) - 1);
  if (digits.empty() ||
      !std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; }))
    return -1;
  int64_t step = -1;
  return absl::SimpleAtoi(digits, &step) ? step : -1;
}

absl::Status RemoveAll(const fs::path& path) {
  std::error_code ec;
  fs::remove_all(path, ec);
  if (ec) return FileError(ec, absl::StrCat("cannot remove ", path.string()));
  return absl::OkStatus();
}

std::string ManifestText(int64_t step, const StringMap& metadata, const std::string& model) {
  Json files = Json::object();
  files[kModel] = {{"bytes", model.size()}, {"crc32", Crc32(model)}};
  Json manifest = {{"format", kFormat},
                   {"format_version", kCheckpointFormatVersion},
                   {"step", step},
                   {"metadata", metadata},
                   {"files", files}};
  return manifest.dump(2) + "\n";
}

// The parsed manifest of checkpoint `dir`: its step, metadata and the expected size
// and checksum of the model file.
struct Manifest {
  int64_t step = 0;
  int version = 0;
  StringMap metadata;
  uint64_t model_bytes = 0;
  uint32_t model_crc = 0;
};

// A JSON integer as an int64, nullopt past its range (nlohmann's get<> wraps).
std::optional<int64_t> Int64Of(const Json& v) {
  if (v.is_number_unsigned()) {
    const uint64_t u = v.get<uint64_t>();
    if (u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) return std::nullopt;
    return static_cast<int64_t>(u);
  }
  if (v.is_number_integer()) return v.get<int64_t>();
  return std::nullopt;
}

absl::StatusOr<Manifest> ParseManifest(const std::string& path, const std::string& text) {
  auto bad = [&](const std::string& why) {
    return absl::DataLossError(absl::StrCat(path, ": ", why));
  };
  const Json j = Json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return bad("not a JSON object (truncated or corrupt)");
  if (!j.contains("format") || j["format"] != kFormat)
    return bad("not a Braze checkpoint manifest");
  Manifest m;
  if (!j.contains("format_version") || !j["format_version"].is_number_integer())
    return bad("no integer format_version");
  const std::optional<int64_t> version = Int64Of(j["format_version"]);
  if (!version.has_value() || *version != kCheckpointFormatVersion) {
    return absl::FailedPreconditionError(
        absl::StrCat(path, ": checkpoint format version ", j["format_version"].dump(),
                     "; this Braze reads version ", kCheckpointFormatVersion));
  }
  const std::optional<int64_t> step = j.contains("step") ? Int64Of(j["step"]) : std::nullopt;
  if (!step.has_value()) return bad("no integer step that fits an int64");
  m.version = static_cast<int>(*version);
  m.step = *step;
  if (!j.contains("metadata") || !j["metadata"].is_object()) return bad("no metadata object");
  for (auto it = j["metadata"].begin(); it != j["metadata"].end(); ++it) {
    if (!it.value().is_string())
      return bad(absl::StrCat("metadata '", it.key(), "' is not a string"));
    m.metadata[it.key()] = it.value().get<std::string>();
  }
  const Json* file = nullptr;
  if (j.contains("files") && j["files"].is_object() && j["files"].contains(kModel)) {
    file = &j["files"][kModel];
  }
  if (file == nullptr || !file->is_object() || !file->contains("bytes") ||
      !file->contains("crc32") || !(*file)["bytes"].is_number_unsigned() ||
      !(*file)["crc32"].is_number_unsigned()) {
    return bad(absl::StrCat("no size and crc32 of ", kModel));
  }
  m.model_bytes = (*file)["bytes"].get<uint64_t>();
  const uint64_t crc = (*file)["crc32"].get<uint64_t>();
  if (crc > std::numeric_limits<uint32_t>::max()) {
    return bad(absl::StrCat("crc32 of ", kModel, " is past 32 bits"));
  }
  m.model_crc = static_cast<uint32_t>(crc);
  return m;
}

}  // namespace

std::vector<Tensor> GraphVariables(const Graph& graph) {
  std::vector<Tensor> vars;
  for (int id = 0; id < graph.num_nodes(); ++id) {
    if (graph.node(id).op() == OpKind::kVariable) {
      // Tensor handles are non-const by design; the set only reads the graph.
      vars.emplace_back(const_cast<Graph*>(&graph), id);
    }
  }
  return vars;
}

VariableSet SessionVariables(Session& session) {
  VariableSet set;
  set.variables = GraphVariables(session.graph());
  set.read = [&session](const Tensor& v) { return session.VariableValue(v); };
  set.assign = [&session](const Tensor& v, const HostTensor& value) {
    return session.AssignVariable(v, value);
  };
  return set;
}

VariableSet FunctionVariables(const Graph& graph) {
  VariableSet set;
  set.variables = GraphVariables(graph);
  set.read = [](const Tensor& v) { return ReadVariable(v); };
  set.assign = [](const Tensor& v, const HostTensor& value) { return AssignVariable(v, value); };
  return set;
}

namespace {

// A VariableSet built by hand, checked before it is used: a set without its read (or
// assign) function threw std::bad_function_call out of Save and Restore, and of two
// variables of one name (two graphs' 'w') the checkpoint kept the first's value alone and
// restored it into both, silently (tf.train.Saver refuses such a list too).
absl::Status CheckVariableSet(const VariableSet& vars, bool assigns) {
  if (!vars.read) return absl::InvalidArgumentError("the VariableSet has no read function");
  if (assigns && !vars.assign) {
    return absl::InvalidArgumentError("the VariableSet has no assign function");
  }
  std::map<std::string, size_t> first;
  for (size_t i = 0; i < vars.variables.size(); ++i) {
    const Tensor& v = vars.variables[i];
    if (!v.valid()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "the VariableSet's variable ", i, " is not a tensor", internal::kNotATensorHint));
    }
    auto [it, inserted] = first.emplace(v.name(), i);
    if (!inserted) {
      return absl::InvalidArgumentError(
          absl::StrCat("the VariableSet's variables ", it->second, " and ", i, " are both named '",
                       v.name(), "': a checkpoint keys each variable by its name"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<TensorMap> ReadVariables(const VariableSet& vars) {
  BRAZE_RETURN_IF_ERROR(CheckVariableSet(vars, /*assigns=*/false));
  TensorMap values;
  for (const Tensor& v : vars.variables) {
    absl::StatusOr<HostTensor> value = vars.read(v);
    if (!value.ok()) {
      return absl::Status(value.status().code(), absl::StrCat("reading variable '", v.name(),
                                                              "': ", value.status().message()));
    }
    values.emplace(v.name(), *std::move(value));
  }
  return values;
}

namespace {

// Whether `read` failed because `v` was declared without a value and never assigned.
bool Uninitialized(const Tensor& v, const absl::Status& read) {
  return read.code() == absl::StatusCode::kFailedPrecondition &&
         v.node().op() == OpKind::kVariable &&  // a hand-built set may hold other tensors
         v.node().attrs_as<VariableAttrs>().initial_value == nullptr;
}

}  // namespace

absl::StatusOr<int> LoadVariables(const VariableSet& vars, const TensorMap& tensors,
                                  const LoadOptions& options) {
  BRAZE_RETURN_IF_ERROR(CheckVariableSet(vars, /*assigns=*/true));
  // Check everything first, so a mismatch changes nothing.
  std::vector<std::pair<const Tensor*, const HostTensor*>> plan;
  size_t used = 0;
  for (const Tensor& v : vars.variables) {
    auto it = tensors.find(v.name());
    if (it == tensors.end()) {
      if (options.allow_missing) continue;
      return absl::InvalidArgumentError(
          absl::StrCat("no tensor for variable '", v.name(), "' ", TypeString(v.type())));
    }
    ++used;
    if (it->second.num_elements() < 0) {  // a scalar's type matches a moved-from tensor's
      return absl::InvalidArgumentError(absl::StrCat("the tensor for variable '", v.name(),
                                                     "' holds no values (moved from, or of an "
                                                     "impossible shape)"));
    }
    if (it->second.dtype() != v.dtype() || it->second.shape() != v.shape()) {
      return absl::InvalidArgumentError(absl::StrCat("variable '", v.name(), "' is ",
                                                     TypeString(v.type()), " but its tensor is ",
                                                     TypeString(it->second.type())));
    }
    plan.emplace_back(&v, &it->second);
  }
  if (!options.allow_unused && used != tensors.size()) {
    for (const auto& [name, t] : tensors) {
      const bool known = std::any_of(vars.variables.begin(), vars.variables.end(),
                                     [&](const Tensor& v) { return v.name() == name; });
      if (!known) {
        return absl::InvalidArgumentError(
            absl::StrCat("tensor '", name, "' ", TypeString(t.type()), " names no variable"));
      }
    }
  }
  // Old values, to set back if an assignment fails after others succeeded. A variable
  // declared without a value and never assigned (a resumed run's: restoring it is what
  // the checkpoint is for) has none: those go last, as a VariableSet cannot make a
  // variable uninitialized again.
  std::vector<std::optional<HostTensor>> old;
  for (const auto& [v, value] : plan) {
    absl::StatusOr<HostTensor> current = vars.read(*v);
    if (!current.ok() && Uninitialized(*v, current.status())) {
      old.emplace_back();
      continue;
    }
    if (!current.ok()) {
      return absl::Status(current.status().code(), absl::StrCat("reading variable '", v->name(),
                                                                "': ", current.status().message()));
    }
    old.emplace_back(*std::move(current));
  }
  std::vector<size_t> order(plan.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_partition(order.begin(), order.end(), [&](size_t i) { return old[i].has_value(); });
  for (size_t n = 0; n < order.size(); ++n) {
    const size_t i = order[n];
    absl::Status s = vars.assign(*plan[i].first, *plan[i].second);
    if (!s.ok()) {
      for (size_t m = 0; m < n; ++m) {
        const size_t j = order[m];
        if (old[j].has_value()) vars.assign(*plan[j].first, *old[j]).IgnoreError();
      }
      return absl::Status(s.code(), absl::StrCat("assigning variable '", plan[i].first->name(),
                                                 "': ", s.message()));
    }
  }
  return static_cast<int>(plan.size());
}

CheckpointManager::CheckpointManager(std::string directory, CheckpointOptions options)
    : directory_(std::move(directory)), options_(options) {}

absl::StatusOr<std::vector<CheckpointInfo>> CheckpointManager::List() const {
  std::vector<CheckpointInfo> found;
  std::error_code ec;
  if (!fs::exists(directory_, ec)) return found;
  for (fs::directory_iterator it(directory_, ec), end; !ec && it != end; it.increment(ec)) {
    const int64_t step = StepOfName(it->path().filename().string());
    if (step < 0 || !it->is_directory()) continue;
    CheckpointInfo info;
    info.path = it->path().string();
    info.step = step;
    found.push_back(std::move(info));
  }
  if (ec) return FileError(ec, absl::StrCat("cannot list ", directory_));
  std::sort(found.begin(), found.end(),
            [](const CheckpointInfo& a, const CheckpointInfo& b) { return a.step < b.step; });
  return found;
}

absl::StatusOr<CheckpointInfo> CheckpointManager::Save(const VariableSet& vars, int64_t step,
                                                       const StringMap& metadata) {
  CheckpointInfo info;
  info.step = step;
  info.metadata = metadata;
  info.path = (fs::path(directory_) / CheckpointName(step)).string();
  if (step < 0) return absl::InvalidArgumentError(absl::StrCat("checkpoint step ", step, " < 0"));
  if (options_.keep_last < 0) {
    return absl::InvalidArgumentError(absl::StrCat("CheckpointOptions.keep_last is ",
                                                   options_.keep_last,
                                                   ": expected >= 0 (0 keeps every checkpoint)"));
  }
  for (const auto& [key, value] : metadata) {
    if (absl::StartsWith(key, "braze.")) {
      return absl::InvalidArgumentError(
          absl::StrCat("checkpoint metadata key '", key, "': the braze. prefix is Braze's own"));
    }
  }
  if (!options_.write) return info;
  BRAZE_ASSIGN_OR_RETURN(TensorMap values, ReadVariables(vars));
  // The safetensors metadata repeats the step and the user metadata, for other tools.
  StringMap file_metadata = metadata;
  file_metadata["braze.format_version"] = absl::StrCat(kCheckpointFormatVersion);
  file_metadata["braze.step"] = absl::StrCat(step);
  BRAZE_ASSIGN_OR_RETURN(std::string model, EncodeSafetensors(values, file_metadata));
  std::string manifest;
  try {
    manifest = ManifestText(step, metadata, model);
  } catch (const Json::exception& e) {
    return absl::InvalidArgumentError(absl::StrCat("checkpoint metadata is not UTF-8: ", e.what()));
  }

  std::error_code ec;
  fs::create_directories(directory_, ec);
  if (ec) return FileError(ec, absl::StrCat("cannot create ", directory_));
  BRAZE_RETURN_IF_ERROR(CleanUp());
  const fs::path dir(directory_);
  const fs::path tmp = dir / absl::StrCat(kTmpPrefix, step, "-", getpid());
  fs::create_directory(tmp, ec);
  if (ec) return FileError(ec, absl::StrCat("cannot create ", tmp.string()));
  absl::Status written = WriteFileDurably((tmp / kModel).string(), model);
  if (written.ok()) written = WriteFileDurably((tmp / kManifest).string(), manifest);
  if (written.ok()) written = SyncDirectory(tmp.string());
  // A checkpoint of the same step is moved aside first (rename cannot replace a
  // non-empty directory), then removed once the new one is in place.
  const fs::path final_path(info.path);
  const fs::path old = dir / absl::StrCat(kOldPrefix, step, "-", getpid());
  const bool replacing = written.ok() && fs::exists(final_path, ec);
  // errno is read right after the failing call: the message's arguments (StrCat, path
  // strings) are evaluated in an unspecified order and may allocate.
  if (replacing && std::rename(final_path.c_str(), old.c_str()) != 0) {
    const int error = errno;
    written = FileError(std::error_code(error, std::generic_category()),
                        absl::StrCat("cannot move ", info.path, " aside"));
  }
  if (written.ok() && std::rename(tmp.c_str(), final_path.c_str()) != 0) {
    const int error = errno;
    written = FileError(std::error_code(error, std::generic_category()),
                        absl::StrCat("cannot rename ", tmp.string(), " to ", info.path));
  }
  if (!written.ok()) {
    RemoveAll(tmp).IgnoreError();
    // Put the checkpoint that was moved aside back in place.
    if (replacing && !fs::exists(final_path, ec)) std::rename(old.c_str(), final_path.c_str());
    return written;
  }
  BRAZE_RETURN_IF_ERROR(SyncDirectory(directory_));
  if (replacing) BRAZE_RETURN_IF_ERROR(RemoveAll(old));
  BRAZE_RETURN_IF_ERROR(Prune(step));
  info.written = true;
  return info;
}

absl::StatusOr<CheckpointInfo> CheckpointManager::Save(Session& session, int64_t step,
                                                       const StringMap& metadata) {
  return Save(SessionVariables(session), step, metadata);
}

absl::StatusOr<CheckpointInfo> CheckpointManager::RestoreLatest(Session& session) const {
  return RestoreLatest(SessionVariables(session));
}

absl::Status CheckpointManager::CleanUp() const {
  // What a writer that died left (one writer per directory): its temporary directory,
  // removed, and a checkpoint it had moved aside to replace, put back if its
  // replacement never arrived.
  std::error_code ec;
  std::vector<fs::path> leftovers;
  for (fs::directory_iterator it(directory_, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (absl::StartsWith(name, kTmpPrefix) || absl::StartsWith(name, kOldPrefix)) {
      leftovers.push_back(it->path());
    }
  }
  if (ec) return FileError(ec, absl::StrCat("cannot list ", directory_));
  for (const fs::path& path : leftovers) {
    const std::string name = path.filename().string();
    if (absl::StartsWith(name, kOldPrefix)) {
      // .old-ckpt-<step>-<pid>
      const std::string rest = name.substr(sizeof(kOldPrefix) - 1);
      int64_t step = -1;
      if (absl::SimpleAtoi(rest.substr(0, rest.find('-')), &step) && step >= 0) {
        const fs::path original = fs::path(directory_) / CheckpointName(step);
        if (!fs::exists(original, ec) && std::rename(path.c_str(), original.c_str()) == 0) continue;
      }
    }
    BRAZE_RETURN_IF_ERROR(RemoveAll(path));
  }
  return absl::OkStatus();
}

absl::Status CheckpointManager::Prune(int64_t written_step) const {
  if (options_.keep_last == 0) return absl::OkStatus();
  BRAZE_ASSIGN_OR_RETURN(std::vector<CheckpointInfo> all, List());
  const size_t keep = static_cast<size_t>(options_.keep_last);
  // The oldest by step go first, but never the one just written: a save of a step below
  // the directory's (a new run in an old run's directory) deleted itself and still
  // returned its path.
  size_t left = all.size();
  for (size_t i = 0; i < all.size() && left > keep; ++i) {
    if (all[i].step == written_step) continue;
    BRAZE_RETURN_IF_ERROR(RemoveAll(all[i].path));
    --left;
  }
  return absl::OkStatus();
}

absl::StatusOr<SafetensorsContents> CheckpointManager::Read(const std::string& path,
                                                            CheckpointInfo* info) const {
  std::error_code ec;
  if (!fs::is_directory(path, ec)) {
    return absl::NotFoundError(absl::StrCat("checkpoint ", path, " does not exist"));
  }
  const std::string manifest_path = (fs::path(path) / kManifest).string();
  const std::string model_path = (fs::path(path) / kModel).string();
  absl::StatusOr<std::string> manifest_text = ReadWholeFile(manifest_path);
  if (!manifest_text.ok()) {
    return absl::DataLossError(absl::StrCat(manifest_path, " is missing or unreadable (",
                                            manifest_text.status().message(), ")"));
  }
  BRAZE_ASSIGN_OR_RETURN(Manifest m, ParseManifest(manifest_path, *manifest_text));
  const int64_t named_step = StepOfName(fs::path(path).filename().string());
  if (named_step >= 0 && named_step != m.step) {
    return absl::DataLossError(
        absl::StrCat(manifest_path, ": step ", m.step, " does not match the directory's name"));
  }
  absl::StatusOr<std::string> model = ReadWholeFile(model_path);
  if (!model.ok()) {
    return absl::DataLossError(
        absl::StrCat(model_path, " is missing or unreadable (", model.status().message(), ")"));
  }
  if (model->size() != m.model_bytes) {
    return absl::DataLossError(absl::StrCat(model_path, ": ", model->size(),
                                            " bytes, the manifest says ", m.model_bytes,
                                            " (truncated?)"));
  }
  const uint32_t crc = Crc32(*model);
  if (crc != m.model_crc) {
    return absl::DataLossError(absl::StrCat(model_path, ": CRC-32 ", crc,
                                            " does not match the manifest's ", m.model_crc,
                                            " (corrupt)"));
  }
  BRAZE_ASSIGN_OR_RETURN(SafetensorsContents contents, DecodeSafetensors(*model, model_path));
  auto step_it = contents.metadata.find("braze.step");
  if (step_it == contents.metadata.end() || step_it->second != absl::StrCat(m.step)) {
    return absl::DataLossError(
        absl::StrCat(model_path, ": its braze.step does not match the manifest's step ", m.step));
  }
  if (info != nullptr) {
    info->path = path;
    info->step = m.step;
    info->format_version = m.version;
    info->metadata = m.metadata;
    info->written = true;
  }
  return contents;
}

absl::StatusOr<CheckpointInfo> CheckpointManager::Restore(const VariableSet& vars,
                                                          const std::string& path) const {
  CheckpointInfo info;
  BRAZE_ASSIGN_OR_RETURN(SafetensorsContents contents, Read(path, &info));
  absl::StatusOr<int> loaded = LoadVariables(vars, contents.tensors);
  if (!loaded.ok()) {
    return absl::Status(loaded.status().code(),
                        absl::StrCat("checkpoint ", path, ": ", loaded.status().message()));
  }
  return info;
}

absl::StatusOr<CheckpointInfo> CheckpointManager::RestoreLatest(const VariableSet& vars) const {
  BRAZE_ASSIGN_OR_RETURN(std::vector<CheckpointInfo> all, List());
  if (all.empty()) return absl::NotFoundError(absl::StrCat("no checkpoint in ", directory_));
  return Restore(vars, all.back().path);
}

}  // namespace braze
