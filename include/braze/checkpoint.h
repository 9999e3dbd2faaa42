// Checkpoints: every Variable of a graph (weights, optimizer slots such as Adam's m and v
// and its step, a dropout step, ...) and user metadata (a data loader's position), saved
// to a directory and restored, so a run killed mid-training resumes where its last
// checkpoint left it (docs/CHECKPOINTS.md).
//
//   CheckpointManager ckpt("/runs/mlp", {/*keep_last=*/3});
//   VariableSet vars = SessionVariables(session);       // after the graph is complete
//   absl::StatusOr<CheckpointInfo> restored = ckpt.RestoreLatest(vars);
//   if (!restored.ok() && !absl::IsNotFound(restored.status())) return restored.status();
//   int64_t step = restored.ok() ? restored->step : 0;  // NotFound: a fresh start
//   for (; step < steps; ++step) {
//     ... one training step ...
//     if ((step + 1) % every == 0) ckpt.Save(vars, step + 1, {{"data_seed", "1"}});
//   }
//
// Layout: <dir>/ckpt-<step, 12 digits>/ holds model.safetensors (every variable under its
// graph name, readable by any safetensors tool) and manifest.json (format, format
// version, step, metadata, and each file's size and CRC-32). A checkpoint is written in a
// temporary directory, its files fsynced, and renamed into place: a crash leaves the
// previous checkpoints intact and at most a temporary directory, which the next Save
// removes. Only ckpt-* directories are checkpoints.
//
// Restore checks everything before it assigns anything: the manifest and its version,
// each file's size and checksum, the safetensors structure, and that the checkpoint
// holds exactly the variables, each with the variable's dtype and shape. Any failure is
// a Status naming the file or the variable and leaves every variable as it was.
//
// Several processes (data parallelism): one writes, all restore. Give every rank the
// same directory (a shared file system) and CheckpointOptions with write = (rank == 0):
// Save on the other ranks reads nothing and writes nothing. Every rank calls
// RestoreLatest; after a Save, the ranks must meet at a barrier before another rank may
// rely on seeing the new checkpoint.
#ifndef BRAZE_CHECKPOINT_H_
#define BRAZE_CHECKPOINT_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "braze/graph.h"
#include "braze/host_tensor.h"
#include "braze/safetensors.h"
#include "braze/session.h"

namespace braze {

// The version of the checkpoint layout this Braze writes; a manifest with another is
// refused (FailedPrecondition naming it).
constexpr int kCheckpointFormatVersion = 1;

// The variables a checkpoint covers and where their values live: a Session's, or the
// values braze::Functions share (ReadVariable/AssignVariable).
// A set built by hand needs both functions (read alone for Save) and variables of distinct
// names; otherwise Save, Restore, ReadVariables and LoadVariables are InvalidArgument.
struct VariableSet {
  std::vector<Tensor> variables;  // keyed by Tensor::name() in the checkpoint
  std::function<absl::StatusOr<HostTensor>(const Tensor&)> read;
  std::function<absl::Status(const Tensor&, const HostTensor&)> assign;
};

// Every Variable of `graph`, in node order.
std::vector<Tensor> GraphVariables(const Graph& graph);
// Every Variable of the session's graph, read and assigned in the session. The session
// must outlive the set. Build it after the graph is complete (the optimizer's slots are
// Variables made by Minimize).
VariableSet SessionVariables(Session& session);
// Every Variable of a graph that braze::Functions trace into (FunctionOptions::graph),
// through ReadVariable / AssignVariable. Slots a Function's body creates exist after its
// first trace: build the set after it (Function::GetConcreteFunction traces).
VariableSet FunctionVariables(const Graph& graph);

// The current values of the variables, by name.
absl::StatusOr<TensorMap> ReadVariables(const VariableSet& vars);

struct LoadOptions {
  bool allow_missing = false;  // variables the tensors do not name keep their values
  bool allow_unused = false;   // tensors naming no variable are ignored
};
// Assigns tensors to the variables of the same name (weights from elsewhere: a
// safetensors file written by PyTorch, say). Everything is checked first: a missing
// variable, an unused tensor (unless allowed) or a dtype or shape mismatch is
// InvalidArgument naming the variable, and nothing is assigned. A variable declared
// without a value and never assigned is assigned too (resuming a run). If an assignment
// still fails, the variables already assigned are set back, but for such uninitialized
// ones, which are assigned last (a VariableSet cannot uninitialize a variable). Returns
// how many were assigned.
absl::StatusOr<int> LoadVariables(const VariableSet& vars, const TensorMap& tensors,
                                  const LoadOptions& options = {});

struct CheckpointOptions {
  // Kept: after a Save, the oldest (by step) beyond this many are deleted, never the one
  // the Save wrote. 0: all; < 0: an error.
  int keep_last = 5;
  // false: Save reads and writes nothing (the ranks other than 0 of a data-parallel run).
  bool write = true;
};

struct CheckpointInfo {
  std::string path;  // the checkpoint's directory
  int64_t step = 0;
  int format_version = kCheckpointFormatVersion;
  StringMap metadata;    // the user metadata given to Save
  bool written = false;  // Save: false when options.write is false
};

class CheckpointManager {
 public:
  explicit CheckpointManager(std::string directory, CheckpointOptions options = {});

  // Writes the variables' values as the checkpoint of `step` (>= 0), replacing one of
  // the same step, then deletes the oldest others beyond keep_last. Metadata keys must not
  // start with "braze." (Braze's own). Errors name the variable or the file; a failed
  // Save leaves the checkpoints that were there.
  absl::StatusOr<CheckpointInfo> Save(const VariableSet& vars, int64_t step,
                                      const StringMap& metadata = {});
  // Restores the newest checkpoint. NotFound when the directory holds none (a fresh
  // start); any other error (DataLoss: truncated, corrupt or missing file;
  // InvalidArgument: another model's variables; FailedPrecondition: another format
  // version) names the file or the variable, and no variable is changed.
  absl::StatusOr<CheckpointInfo> RestoreLatest(const VariableSet& vars) const;
  // The same for every variable of a session's graph (SessionVariables).
  absl::StatusOr<CheckpointInfo> Save(Session& session, int64_t step,
                                      const StringMap& metadata = {});
  absl::StatusOr<CheckpointInfo> RestoreLatest(Session& session) const;
  // Restores the checkpoint in directory `path` (as listed by List).
  absl::StatusOr<CheckpointInfo> Restore(const VariableSet& vars, const std::string& path) const;
  // Checks a checkpoint (manifest, sizes, checksums, format) and returns its contents
  // without touching any variable.
  absl::StatusOr<SafetensorsContents> Read(const std::string& path,
                                           CheckpointInfo* info = nullptr) const;
  // The checkpoints in the directory, oldest first (by step, from their names; not
  // checked). Empty when the directory does not exist.
  absl::StatusOr<std::vector<CheckpointInfo>> List() const;

  const std::string& directory() const { return directory_; }
  const CheckpointOptions& options() const { return options_; }

 private:
  absl::Status CleanUp() const;
  absl::Status Prune(int64_t written_step) const;
  std::string directory_;
  CheckpointOptions options_;
};

}  // namespace braze

#endif  // BRAZE_CHECKPOINT_H_
