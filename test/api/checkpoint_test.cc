// Checkpoints (braze/checkpoint.h): an Adam training run saved, restored into a fresh
// graph and session and continued gives bit-identical losses and variables to a run that
// never stopped; the last K are kept; a truncated, corrupt, missing or mismatched
// checkpoint is refused with a Status naming the file or variable, changing nothing;
// weights from a plain safetensors file load by name; braze::Function variables too.
#include "braze/checkpoint.h"

#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "braze/braze.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace braze {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

constexpr int64_t kIn = 7, kHidden = 5, kOut = 3, kBatch = 11;

// A two-layer regression model trained with Adam; every build is identical, as a
// restarted process would build it.
struct Model {
  Graph g;
  Tensor x, y, loss;
  std::vector<Tensor> train;
  explicit Model(int64_t hidden = kHidden, DType dtype = DType::kF32) {
    x = Placeholder(g, dtype, {-1, kIn}, "x");
    y = Placeholder(g, dtype, {-1, kOut}, "y");
    Tensor w1 = Variable(g, HostTensor::RandomNormal(dtype, {kIn, hidden}, 1, 0, 0.5), "w1");
    Tensor b1 = Variable(g, HostTensor::RandomUniform(dtype, {hidden}, 2), "b1");
    Tensor w2 = Variable(g, HostTensor::RandomNormal(dtype, {hidden, kOut}, 3, 0, 0.5), "w2");
    JitScope scope(g);
    Tensor h = Tanh(MatMul(x, w1) + b1);
    loss = Mean(Square(MatMul(h, w2) - y));
    train = *Minimize(Optimizer::Adam(0.05), loss, {w1, b1, w2});
  }
  Feeds Batch(int64_t step) const {
    return {{x, HostTensor::RandomUniform(x.dtype(), {kBatch, kIn}, 100 + step)},
            {y, HostTensor::RandomUniform(y.dtype(), {kBatch, kOut}, 200 + step)}};
  }
};

std::string NewDir(const std::string& name) {
  const std::string dir =
      ::testing::TempDir() + "checkpoint_test_" + std::to_string(getpid()) + "_" + name;
  fs::remove_all(dir);
  return dir;
}

// Runs steps [begin, end) and returns the losses.
std::vector<HostTensor> Train(Model& m, Session& s, int64_t begin, int64_t end) {
  std::vector<HostTensor> losses;
  for (int64_t step = begin; step < end; ++step) {
    absl::StatusOr<std::vector<HostTensor>> out = s.Run(m.Batch(step), {m.loss}, m.train);
    EXPECT_TRUE(out.ok()) << out.status();
    if (out.ok()) losses.push_back((*out)[0]);
  }
  return losses;
}

void ExpectSameBits(const HostTensor& a, const HostTensor& b, const std::string& what) {
  ASSERT_EQ(a.type().dtype, b.type().dtype) << what;
  ASSERT_EQ(a.shape(), b.shape()) << what;
  EXPECT_EQ(std::memcmp(a.raw_data(), b.raw_data(), a.num_bytes()), 0)
      << what << ": " << a.DebugString() << " vs " << b.DebugString();
}

TEST(CheckpointTest, RestoredAdamRunIsBitIdenticalToAnUninterruptedOne) {
  constexpr int64_t kSteps = 8, kStop = 3;
  Model ref;
  Session ref_session(ref.g);
  const std::vector<HostTensor> ref_losses = Train(ref, ref_session, 0, kSteps);

  const std::string dir = NewDir("adam");
  {
    Model first;
    Session s(first.g);
    Train(first, s, 0, kStop);
    CheckpointManager ckpt(dir);
    absl::StatusOr<CheckpointInfo> saved = ckpt.Save(s, kStop, {{"data_position", "3"}});
    ASSERT_TRUE(saved.ok()) << saved.status();
    EXPECT_TRUE(saved->written);
  }
  Model second;  // a new graph and session: as a restarted process
  Session s(second.g);
  CheckpointManager ckpt(dir);
  const VariableSet vars = SessionVariables(s);
  // w1, b1, w2, Adam's m and v for each, and Adam's step.
  EXPECT_EQ(vars.variables.size(), 3u + 6u + 1u);
  absl::StatusOr<CheckpointInfo> restored = ckpt.RestoreLatest(vars);
  ASSERT_TRUE(restored.ok()) << restored.status();
  EXPECT_EQ(restored->step, kStop);
  EXPECT_EQ(restored->metadata.at("data_position"), "3");
  EXPECT_EQ(s.VariableValue(*second.g.FindTensor("Adam/step"))->GetDouble(0), 3.0);
  const std::vector<HostTensor> losses = Train(second, s, kStop, kSteps);
  ASSERT_EQ(losses.size(), static_cast<size_t>(kSteps - kStop));
  for (int64_t i = 0; i < kSteps - kStop; ++i) {
    ExpectSameBits(losses[i], ref_losses[kStop + i], "loss of step " + std::to_string(kStop + i));
  }
  for (const Tensor& v : vars.variables) {
    ExpectSameBits(*s.VariableValue(v), *ref_session.VariableValue(*ref.g.FindTensor(v.name())),
                   v.name());
  }
}

TEST(CheckpointTest, KeepsTheLastKAndReplacesASavedStep) {
  Model m;
  Session s(m.g);
  const std::string dir = NewDir("keep");
  CheckpointManager ckpt(dir, {/*keep_last=*/2});
  const VariableSet vars = SessionVariables(s);
  for (int64_t step : {10, 20, 30, 30}) ASSERT_TRUE(ckpt.Save(vars, step).ok());
  absl::StatusOr<std::vector<CheckpointInfo>> all = ckpt.List();
  ASSERT_TRUE(all.ok());
  ASSERT_EQ(all->size(), 2u);
  EXPECT_EQ((*all)[0].step, 20);
  EXPECT_EQ((*all)[1].step, 30);
  EXPECT_EQ(fs::path((*all)[1].path).filename(), "ckpt-000000000030");
  // A writer that died mid-save left a temporary directory: ignored, then removed.
  fs::create_directories(dir + "/.tmp-ckpt-40-1");
  EXPECT_EQ(ckpt.RestoreLatest(vars)->step, 30);
  ASSERT_TRUE(ckpt.Save(vars, 40).ok());
  EXPECT_FALSE(fs::exists(dir + "/.tmp-ckpt-40-1"));
  // write = false (a data-parallel rank other than 0): nothing read or written.
  CheckpointManager reader(dir, {/*keep_last=*/2, /*write=*/false});
  absl::StatusOr<CheckpointInfo> skipped = reader.Save(vars, 50);
  ASSERT_TRUE(skipped.ok());
  EXPECT_FALSE(skipped->written);
  EXPECT_FALSE(fs::exists(skipped->path));
  EXPECT_EQ(reader.RestoreLatest(vars)->step, 40);
  EXPECT_EQ(CheckpointManager(NewDir("none")).RestoreLatest(vars).status().code(),
            absl::StatusCode::kNotFound);
  EXPECT_EQ(ckpt.Save(vars, 1, {{"braze.step", "1"}}).status().code(),
            absl::StatusCode::kInvalidArgument);
}

// A save of a step below every kept one (a new run started in an old run's directory)
// keeps what it wrote, and the oldest others go: it deleted itself and still returned
// OK with its path. keep_last = 1 then keeps the new one alone, which RestoreLatest finds.
TEST(CheckpointTest, ASaveOfAnOlderStepKeepsWhatItWrote) {
  Model m;
  Session s(m.g);
  const VariableSet vars = SessionVariables(s);
  for (int keep : {2, 1}) {
    SCOPED_TRACE(keep);
    const std::string dir = NewDir(absl::StrCat("older_", keep));
    CheckpointManager ckpt(dir, {keep});
    for (int64_t step : {100, 200}) ASSERT_TRUE(ckpt.Save(vars, step).ok());
    absl::StatusOr<CheckpointInfo> info = ckpt.Save(vars, 5);
    ASSERT_TRUE(info.ok()) << info.status();
    EXPECT_TRUE(info->written);
    EXPECT_TRUE(fs::exists(info->path)) << info->path;
    absl::StatusOr<std::vector<CheckpointInfo>> all = ckpt.List();
    ASSERT_TRUE(all.ok());
    std::vector<int64_t> steps;
    for (const CheckpointInfo& c : *all) steps.push_back(c.step);
    const std::vector<int64_t> want =
        keep == 2 ? std::vector<int64_t>{5, 200} : std::vector<int64_t>{5};
    EXPECT_EQ(steps, want);
    if (keep == 1) EXPECT_EQ(ckpt.RestoreLatest(vars)->step, 5);
  }
}

// A writer killed between moving a checkpoint aside and renaming its replacement into
// place: the next Save puts the old one back and removes the temporary directory.
TEST(CheckpointTest, ADeadWritersLeftoversArePutBackOrRemoved) {
  Model m;
  Session s(m.g);
  const VariableSet vars = SessionVariables(s);
  const std::string dir = NewDir("leftovers");
  CheckpointManager ckpt(dir, {/*keep_last=*/0});
  ASSERT_TRUE(ckpt.Save(vars, 10).ok());
  fs::rename(dir + "/ckpt-000000000010", dir + "/.old-ckpt-10-99");
  fs::create_directories(dir + "/.tmp-ckpt-10-99");
  EXPECT_EQ(ckpt.List()->size(), 0u);
  ASSERT_TRUE(ckpt.Save(vars, 20).ok());
  absl::StatusOr<std::vector<CheckpointInfo>> all = ckpt.List();
  ASSERT_EQ(all->size(), 2u);
  EXPECT_EQ((*all)[0].step, 10);
  EXPECT_TRUE(ckpt.Read((*all)[0].path).ok());
  EXPECT_FALSE(fs::exists(dir + "/.tmp-ckpt-10-99"));
  EXPECT_FALSE(fs::exists(dir + "/.old-ckpt-10-99"));
}

TEST(CheckpointTest, SaveErrorsNameWhatFailedAndWriteNothing) {
  Model m;
  Tensor unset = Variable(m.g, DType::kF32, {2}, "unset");  // no initial value
  Session s(m.g);
  const std::string dir = NewDir("save_errors");
  absl::Status status = CheckpointManager(dir).Save(SessionVariables(s), 1).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition) << status;
  EXPECT_THAT(std::string(status.message()), HasSubstr("reading variable 'unset'"));
  EXPECT_FALSE(fs::exists(dir));
  ASSERT_TRUE(s.AssignVariable(unset, HostTensor::Filled(DType::kF32, {2}, 1)).ok());
  // The directory's place is taken by a file.
  std::ofstream(dir) << "not a directory";
  status = CheckpointManager(dir).Save(SessionVariables(s), 1).status();
  EXPECT_FALSE(status.ok());
  EXPECT_THAT(std::string(status.message()), HasSubstr(dir));
  fs::remove(dir);
}

// Values of every variable, to check that a refused restore changed nothing.
std::vector<HostTensor> Snapshot(const VariableSet& vars) {
  std::vector<HostTensor> values;
  for (const Tensor& v : vars.variables) values.push_back(*vars.read(v));
  return values;
}

class BadCheckpointTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = NewDir(::testing::UnitTest::GetInstance()->current_test_info()->name());
    Model saved;
    Session s(saved.g);
    Train(saved, s, 0, 2);
    ASSERT_TRUE(CheckpointManager(dir_).Save(SessionVariables(s), 2).ok());
    path_ = dir_ + "/ckpt-000000000002";
  }
  // Restores into a model trained one step (its values differ from the checkpoint's) and
  // checks that the refusal names `expected` and changed no variable.
  void ExpectRefused(absl::StatusCode code, const std::string& expected, Model* model = nullptr) {
    Model fresh;
    if (model == nullptr) model = &fresh;
    Session s(model->g);
    Train(*model, s, 0, 1);
    const VariableSet vars = SessionVariables(s);
    const std::vector<HostTensor> before = Snapshot(vars);
    absl::Status status = CheckpointManager(dir_).RestoreLatest(s).status();
    EXPECT_EQ(status.code(), code) << status;
    EXPECT_THAT(std::string(status.message()), HasSubstr(expected));
    const std::vector<HostTensor> after = Snapshot(vars);
    for (size_t i = 0; i < before.size(); ++i) {
      ExpectSameBits(after[i], before[i], vars.variables[i].name());
    }
  }
  void Rewrite(const std::string& file, const std::function<void(std::string&)>& edit) {
    std::string bytes = *ReadWholeFile(path_ + "/" + file);
    edit(bytes);
    std::ofstream(path_ + "/" + file, std::ios::binary | std::ios::trunc) << bytes;
  }
  std::string dir_, path_;
};

TEST_F(BadCheckpointTest, Truncated) {
  Rewrite("model.safetensors", [](std::string& b) { b.resize(b.size() - 5); });
  ExpectRefused(absl::StatusCode::kDataLoss, "model.safetensors: ");
  ExpectRefused(absl::StatusCode::kDataLoss, "(truncated?)");
}

TEST_F(BadCheckpointTest, CorruptByte) {
  Rewrite("model.safetensors", [](std::string& b) { b[b.size() - 3] ^= 0x10; });
  ExpectRefused(absl::StatusCode::kDataLoss, "does not match the manifest's");
}

TEST_F(BadCheckpointTest, MissingFile) {
  fs::remove(path_ + "/model.safetensors");
  ExpectRefused(absl::StatusCode::kDataLoss, "ckpt-000000000002/model.safetensors is missing");
}

TEST_F(BadCheckpointTest, CorruptManifest) {
  Rewrite("manifest.json", [](std::string& b) { b.resize(b.size() / 2); });
  ExpectRefused(absl::StatusCode::kDataLoss, "manifest.json: not a JSON object");
}

TEST_F(BadCheckpointTest, OtherFormatVersion) {
  Rewrite("manifest.json", [](std::string& b) {
    const size_t at = b.find("\"format_version\": 1");
    ASSERT_NE(at, std::string::npos) << b;
    b.replace(at, 19, "\"format_version\": 9");
  });
  ExpectRefused(absl::StatusCode::kFailedPrecondition, "checkpoint format version 9");
}

// Integers past their fields' ranges are refused, not wrapped: a format version of
// 2^32 + 1 read as 1, and a crc32 of the right checksum + 2^32 matched.
TEST_F(BadCheckpointTest, IntegersPastTheirRange) {
  Rewrite("manifest.json", [](std::string& b) {
    const size_t at = b.find("\"format_version\": 1");
    ASSERT_NE(at, std::string::npos) << b;
    b.replace(at, 19, "\"format_version\": 4294967297");
  });
  ExpectRefused(absl::StatusCode::kFailedPrecondition, "checkpoint format version 4294967297");
}

TEST_F(BadCheckpointTest, ACrcPast32Bits) {
  Rewrite("manifest.json", [](std::string& b) {
    const size_t at = b.find("\"crc32\": ");
    ASSERT_NE(at, std::string::npos) << b;
    const size_t begin = at + 9, end = b.find_first_not_of("0123456789", begin);
    const uint64_t crc = std::stoull(b.substr(begin, end - begin));
    b.replace(begin, end - begin, std::to_string(crc + (uint64_t{1} << 32)));
  });
  ExpectRefused(absl::StatusCode::kDataLoss, "crc32 of model.safetensors is past 32 bits");
}

TEST_F(BadCheckpointTest, OtherShapes) {
  Model wider(/*hidden=*/kHidden + 1);
  ExpectRefused(absl::StatusCode::kInvalidArgument, "variable '", &wider);
  ExpectRefused(absl::StatusCode::kInvalidArgument, "is f32[7,6] but its tensor is f32[7,5]",
                &wider);
}

TEST_F(BadCheckpointTest, OtherDTypes) {
  Model f64(kHidden, DType::kF64);
  ExpectRefused(absl::StatusCode::kInvalidArgument,
                "variable 'w1' is f64[7,5] but its tensor is f32[7,5]", &f64);
}

TEST_F(BadCheckpointTest, MissingVariable) {
  Model extra;
  Variable(extra.g, HostTensor::Scalar(1.0f), "not_saved");
  ExpectRefused(absl::StatusCode::kInvalidArgument, "no tensor for variable 'not_saved'", &extra);
}

// Weights written by another tool (here: only the weights, no optimizer state) load into
// the variables of the same names; the rest keep their values.
TEST(CheckpointTest, LoadsWeightsFromAPlainSafetensorsFileByName) {
  Model m;
  Session s(m.g);
  const VariableSet vars = SessionVariables(s);
  TensorMap weights;
  weights["w1"] = HostTensor::RandomNormal(DType::kF32, {kIn, kHidden}, 77);
  weights["w2"] = HostTensor::RandomNormal(DType::kF32, {kHidden, kOut}, 78);
  const std::string path = NewDir("plain") + ".safetensors";
  ASSERT_TRUE(WriteSafetensors(path, weights).ok());
  absl::StatusOr<SafetensorsContents> file = ReadSafetensors(path);
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_EQ(LoadVariables(vars, file->tensors).status().code(), absl::StatusCode::kInvalidArgument);
  const HostTensor b1 = *s.VariableValue(*m.g.FindTensor("b1"));
  absl::StatusOr<int> loaded = LoadVariables(vars, file->tensors, {/*allow_missing=*/true});
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_EQ(*loaded, 2);
  ExpectSameBits(*s.VariableValue(*m.g.FindTensor("w1")), weights["w1"], "w1");
  ExpectSameBits(*s.VariableValue(*m.g.FindTensor("b1")), b1, "b1");
  weights["unknown"] = HostTensor::Scalar(1.0f);
  EXPECT_THAT(LoadVariables(vars, weights, {true}).status().message(),
              HasSubstr("tensor 'unknown' f32[] names no variable"));
  EXPECT_TRUE(LoadVariables(vars, weights, {true, /*allow_unused=*/true}).ok());
}

// braze::Function: the variables its traces share (slots created by the first trace
// included) are saved and restored through ReadVariable / AssignVariable.
TEST(CheckpointTest, FunctionVariables) {
  Graph g;
  Tensor w = Variable(g, HostTensor::RandomNormal(DType::kF32, {4}, 5), "w");
  FunctionOptions options;
  options.graph = &g;
  Function step(
      [w](Graph&, const std::vector<Tensor>& a) -> std::vector<Tensor> {
        Tensor loss = Sum(Square(w - a[0]));
        std::vector<Tensor> out = *Minimize(Optimizer::Adam(0.1), loss, {w});
        out.insert(out.begin(), loss);
        return {out[0]};
      },
      options);
  const HostTensor target = HostTensor::RandomUniform(DType::kF32, {4}, 6);
  ASSERT_TRUE(step({target}).ok());
  const VariableSet vars = FunctionVariables(g);
  ASSERT_EQ(vars.variables.size(), 4u);  // w, its m and v, Adam's step
  const std::string dir = NewDir("function");
  CheckpointManager ckpt(dir);
  ASSERT_TRUE(ckpt.Save(vars, 1).ok());
  const HostTensor loss2 = (*step({target}))[0];
  ASSERT_TRUE(ckpt.RestoreLatest(vars).ok());
  ExpectSameBits((*step({target}))[0], loss2, "the second step's loss, replayed");
}

// A resumed run declares its variables without values (the checkpoint has them):
// restoring assigns them. It failed reading their old values ("uninitialized").
TEST(CheckpointTest, RestoresIntoVariablesDeclaredWithoutAValue) {
  const std::string dir = NewDir("uninitialized");
  const HostTensor w_saved = HostTensor::RandomUniform(DType::kF32, {3, 2}, 7);
  {
    Graph g;
    Variable(g, w_saved, "w");
    Variable(g, HostTensor::Scalar(4.0f), "b");
    Session s(g);
    ASSERT_TRUE(CheckpointManager(dir).Save(s, 1).ok());
  }
  Graph g;
  Tensor w = Variable(g, DType::kF32, {3, 2}, "w");
  Tensor b = Variable(g, HostTensor::Scalar(-1.0f), "b");  // one with a value, too
  Tensor y = Sum(w) + b;
  Session s(g);
  ASSERT_FALSE(s.Run({}, {y}).ok());  // uninitialized
  absl::StatusOr<CheckpointInfo> info = CheckpointManager(dir).RestoreLatest(s);
  ASSERT_TRUE(info.ok()) << info.status();
  ExpectSameBits(*s.VariableValue(w), w_saved, "w");
  EXPECT_EQ(s.VariableValue(b)->ToVector<float>(), std::vector<float>{4.0f});
  absl::StatusOr<std::vector<HostTensor>> out = s.Run({}, {y});
  ASSERT_TRUE(out.ok()) << out.status();
  // The same through braze::Function's variables.
  Graph fg;
  Tensor fw = Variable(fg, DType::kF32, {3, 2}, "w");
  Variable(fg, DType::kF32, {}, "b");
  ASSERT_TRUE(CheckpointManager(dir).RestoreLatest(FunctionVariables(fg)).ok());
  ExpectSameBits(*ReadVariable(fw), w_saved, "w of the Function graph");
}

// A moved-from HostTensor holds no values; its type (f32[]) is a scalar variable's, so
// the type checks let it through: a scalar variable assigned it read nothing (a Run then
// computed with 0). Every way of assigning a variable refuses it, naming the variable.
TEST(CheckpointTest, AMovedFromTensorIsAssignedToNoVariable) {
  Graph g;
  Tensor a = Variable(g, HostTensor::Scalar(2.0f), "a");
  Tensor y = a * 3.0;
  Session s(g);
  HostTensor moved = HostTensor::Scalar(5.0f);
  const HostTensor keep = std::move(moved);
  absl::Status assigned = s.AssignVariable(a, moved);
  EXPECT_EQ(assigned.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(assigned.message()), HasSubstr("node 'a'"));
  EXPECT_THAT(std::string(assigned.message()), HasSubstr("moved-from"));
  absl::StatusOr<int> loaded = LoadVariables(SessionVariables(s), {{"a", moved}});
  EXPECT_EQ(loaded.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(loaded.status().message()), HasSubstr("variable 'a'"));
  EXPECT_EQ((*s.Run({}, {y}))[0].ToVector<float>(), std::vector<float>{6.0f});
  Graph fg;
  Tensor fa = Variable(fg, HostTensor::Scalar(2.0f), "fa");
  absl::Status f_assigned = AssignVariable(fa, moved);
  EXPECT_EQ(f_assigned.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(f_assigned.message()), HasSubstr("variable 'fa'"));
  EXPECT_EQ(ReadVariable(fa)->ToVector<float>(), std::vector<float>{2.0f});
  Graph vg;
  Variable(vg, moved, "v");
  EXPECT_EQ(vg.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(vg.status().message()), HasSubstr("node 'v'"));
}

}  // namespace
}  // namespace braze
