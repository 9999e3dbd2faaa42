// Checkpoints (docs/CHECKPOINTS.md) of the mlp example's state: its six weights and
// biases with Adam's m and v for each, and Adam's step (5.6M f32, 22 MB), in a session
// (no graph is run: only the variables matter):
//
//   BM_CheckpointSave: CheckpointManager::Save (read every variable, encode safetensors,
//     CRC-32, write and fsync two files, rename, prune to the last 2).
//   BM_CheckpointRestore: RestoreLatest (read, checksum, parse, check, assign).
//   BM_WriteFsync_peer: the same bytes written and fsynced as one file, with nothing
//     else: the floor a checkpoint's Save cannot beat on this disk.
//
// Each iteration's restore is checked: every variable equal to what was saved, bit for
// bit, or a SkipWithError. Counter MB/s: checkpoint bytes per second.
#include <benchmark/benchmark.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "braze/braze.h"

namespace braze {
namespace {

struct MlpState {
  Graph graph;
  std::vector<Tensor> train;
  MlpState() {
    Tensor x = Placeholder(graph, DType::kF32, {-1, 784}, "x");
    Tensor labels = Placeholder(graph, DType::kI32, {-1}, "labels");
    const int64_t dims[] = {784, 1024, 1024, 10};
    std::vector<Tensor> vars;
    Tensor h = x;
    for (int i = 0; i < 3; ++i) {
      Tensor w = Variable(graph, HostTensor::RandomNormal(DType::kF32, {dims[i], dims[i + 1]}, i),
                          "w" + std::to_string(i));
      Tensor b = Variable(graph, HostTensor::RandomUniform(DType::kF32, {dims[i + 1]}, 9 + i),
                          "b" + std::to_string(i));
      h = Dense(h, w, b, i < 2 ? Activation::kRelu : Activation::kNone);
      vars.push_back(w);
      vars.push_back(b);
    }
    Tensor loss = Mean(SoftmaxCrossEntropyWithLogits(h, OneHot(labels, 10)));
    train = *Minimize(Optimizer::Adam(1e-3), loss, vars);
  }
};

std::string BenchDir(const char* name) {
  const std::string dir = std::filesystem::temp_directory_path().string() + "/braze_bench_" + name +
                          "_" + std::to_string(getpid());
  std::filesystem::remove_all(dir);
  return dir;
}

int64_t CheckpointBytes(const VariableSet& vars) {
  int64_t bytes = 0;
  for (const Tensor& v : vars.variables) bytes += NumElements(v.shape()) * SizeOf(v.dtype());
  return bytes;
}

void SetRate(benchmark::State& state, int64_t bytes) {
  state.counters["MB/s"] =
      benchmark::Counter(1e-6 * bytes * state.iterations(), benchmark::Counter::kIsRate);
  state.counters["MB"] = 1e-6 * bytes;
}

void BM_CheckpointSave(benchmark::State& state) {
  MlpState mlp;
  Session session(mlp.graph);
  const VariableSet vars = SessionVariables(session);
  const std::string dir = BenchDir("save");
  CheckpointManager ckpt(dir, {/*keep_last=*/2});
  int64_t step = 0;
  for (auto _ : state) {
    absl::StatusOr<CheckpointInfo> saved = ckpt.Save(vars, ++step);
    if (!saved.ok()) {
      state.SkipWithError(saved.status().ToString().c_str());
      break;
    }
  }
  SetRate(state, CheckpointBytes(vars));
  std::filesystem::remove_all(dir);
}
BENCHMARK(BM_CheckpointSave)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_CheckpointRestore(benchmark::State& state) {
  MlpState mlp;
  Session session(mlp.graph);
  const VariableSet vars = SessionVariables(session);
  const std::string dir = BenchDir("restore");
  CheckpointManager ckpt(dir);
  absl::StatusOr<TensorMap> saved = ReadVariables(vars);
  absl::Status s = saved.status();
  if (s.ok()) s = ckpt.Save(vars, 1).status();
  for (auto _ : state) {
    if (!s.ok()) break;
    s = ckpt.RestoreLatest(vars).status();
    for (size_t i = 0; s.ok() && i < vars.variables.size(); ++i) {
      const Tensor& v = vars.variables[i];
      absl::StatusOr<HostTensor> now = session.VariableValue(v);
      const HostTensor& want = saved->at(v.name());
      if (!now.ok() || std::memcmp(now->raw_data(), want.raw_data(), want.num_bytes()) != 0) {
        s = absl::InternalError("restored " + v.name() + " differs from the saved value");
      }
    }
  }
  if (!s.ok()) state.SkipWithError(s.ToString().c_str());
  SetRate(state, CheckpointBytes(vars));
  std::filesystem::remove_all(dir);
}
BENCHMARK(BM_CheckpointRestore)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_WriteFsync_peer(benchmark::State& state) {
  MlpState mlp;
  Session session(mlp.graph);
  const VariableSet vars = SessionVariables(session);
  const std::string bytes(CheckpointBytes(vars), '\x5a');
  const std::string dir = BenchDir("fsync");
  std::filesystem::create_directories(dir);
  for (auto _ : state) {
    absl::Status s = WriteFileDurably(dir + "/plain.bin", bytes);
    if (!s.ok()) {
      state.SkipWithError(s.ToString().c_str());
      break;
    }
  }
  SetRate(state, static_cast<int64_t>(bytes.size()));
  std::filesystem::remove_all(dir);
}
BENCHMARK(BM_WriteFsync_peer)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace
}  // namespace braze
