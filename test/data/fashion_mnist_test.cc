// Tests for the IDX reader and the Fashion-MNIST loader: the real Debian files
// (dataset-fashion-mnist, installed by tools/setup.sh), and hand-made good and broken
// files in a temp dir for every error path.
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "braze/data.h"
#include "gtest/gtest.h"

namespace braze {
namespace {

namespace fs = std::filesystem;

// Passes when `status` has `code` and its message contains every one of `parts`.
::testing::AssertionResult IsError(const absl::Status& status, absl::StatusCode code,
                                   std::initializer_list<std::string> parts) {
  if (status.code() != code) {
    return ::testing::AssertionFailure()
           << "expected code " << absl::StatusCodeToString(code) << ", got " << status;
  }
  for (const std::string& part : parts) {
    if (!absl::StrContains(status.message(), part)) {
      return ::testing::AssertionFailure()
             << "message \"" << status.message() << "\" lacks \"" << part << "\"";
    }
  }
  return ::testing::AssertionSuccess();
}

std::string DataFile(const std::string& name) { return std::string(kFashionMnistDir) + "/" + name; }

// The whole decompressed contents of a (.gz or raw) file.
std::vector<uint8_t> Inflate(const std::string& path) {
  std::vector<uint8_t> out;
  gzFile f = gzopen(path.c_str(), "rb");
  if (f == nullptr) {
    ADD_FAILURE() << "cannot open " << path;
    return out;
  }
  uint8_t buf[1 << 16];
  int got;
  while ((got = gzread(f, buf, sizeof(buf))) > 0) out.insert(out.end(), buf, buf + got);
  gzclose(f);
  return out;
}

std::vector<uint8_t> ReadBytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(in), {});
}

void WriteBytes(const std::string& path, const std::vector<uint8_t>& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(bytes.data()), bytes.size());
  ASSERT_TRUE(out.good()) << path;
}

void WriteGz(const std::string& path, const std::vector<uint8_t>& bytes) {
  gzFile f = gzopen(path.c_str(), "wb");
  ASSERT_NE(f, nullptr) << path;
  ASSERT_EQ(gzwrite(f, bytes.data(), bytes.size()), static_cast<int>(bytes.size()));
  ASSERT_EQ(gzclose(f), Z_OK);
}

// A u8 IDX file image: magic, big-endian dims, then `data`.
std::vector<uint8_t> MakeIdx(const std::vector<uint32_t>& dims, const std::vector<uint8_t>& data) {
  std::vector<uint8_t> out = {0, 0, 0x08, static_cast<uint8_t>(dims.size())};
  for (uint32_t d : dims) {
    out.push_back(d >> 24);
    out.push_back((d >> 16) & 0xff);
    out.push_back((d >> 8) & 0xff);
    out.push_back(d & 0xff);
  }
  out.insert(out.end(), data.begin(), data.end());
  return out;
}

class TempDirTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = fs::path(::testing::TempDir()) /
           (std::string("braze_data_") + info->name() + "_" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string Path(const std::string& name) const { return (dir_ / name).string(); }

  fs::path dir_;
};

void ExpectSplit(const MnistSplit& split, int64_t n) {
  ASSERT_EQ(split.images.dtype(), DType::kF32);
  ASSERT_EQ(split.images.shape(), (Shape{n, 784}));
  ASSERT_EQ(split.labels.dtype(), DType::kI32);
  ASSERT_EQ(split.labels.shape(), (Shape{n}));

  // Fashion-MNIST is balanced: every class has exactly n/10 examples.
  std::vector<int64_t> per_class(10, 0);
  const int32_t* labels = split.labels.data<int32_t>();
  for (int64_t i = 0; i < n; ++i) {
    ASSERT_GE(labels[i], 0) << i;
    ASSERT_LE(labels[i], 9) << i;
    ++per_class[labels[i]];
  }
  for (int c = 0; c < 10; ++c) EXPECT_EQ(per_class[c], n / 10) << "class " << c;

  const float* px = split.images.data<float>();
  const int64_t count = split.images.num_elements();
  const auto [lo, hi] = std::minmax_element(px, px + count);
  EXPECT_EQ(*lo, 0.0f);
  EXPECT_EQ(*hi, 1.0f);  // some pixel is 255: the scale is /255, not /256
  double sum = 0;
  for (int64_t i = 0; i < count; ++i) sum += px[i];
  // The well-known Fashion-MNIST pixel mean is 0.286.
  EXPECT_NEAR(sum / count, 0.286, 0.005);
}

TEST(FashionMnistTest, LoadsTrainSplit) {
  absl::StatusOr<MnistSplit> train = LoadFashionMnist("train");
  ASSERT_TRUE(train.ok()) << train.status() << " (install dataset-fashion-mnist: tools/setup.sh)";
  ExpectSplit(*train, 60000);
  // The first training labels, from the published files: ankle boot, t-shirt, t-shirt.
  EXPECT_EQ(train->labels.data<int32_t>()[0], 9);
  EXPECT_EQ(train->labels.data<int32_t>()[1], 0);
  EXPECT_EQ(train->labels.data<int32_t>()[3], 3);
}

TEST(FashionMnistTest, LoadsTestSplit) {
  absl::StatusOr<MnistSplit> test = LoadFashionMnist("t10k", kFashionMnistDir);
  ASSERT_TRUE(test.ok()) << test.status();
  ExpectSplit(*test, 10000);
  EXPECT_EQ(test->labels.data<int32_t>()[0], 9);
  EXPECT_EQ(test->labels.data<int32_t>()[1], 2);
}

TEST(FashionMnistTest, ImagesArePixelsOver255) {
  // Cross-check the loader against the raw bytes of the same file.
  const std::vector<uint8_t> raw = Inflate(DataFile("t10k-images-idx3-ubyte.gz"));
  ASSERT_EQ(raw.size(), 16u + 10000u * 784u);
  absl::StatusOr<MnistSplit> test = LoadFashionMnist("t10k");
  ASSERT_TRUE(test.ok()) << test.status();
  const float* px = test->images.data<float>();
  for (int64_t i : {int64_t{0}, int64_t{400}, int64_t{784 * 5000 + 391}, int64_t{7839999}}) {
    EXPECT_FLOAT_EQ(px[i], raw[16 + i] / 255.0f) << i;
  }
}

TEST(FashionMnistTest, UnknownSplitIsInvalidArgument) {
  absl::StatusOr<MnistSplit> s = LoadFashionMnist("validation");
  EXPECT_TRUE(IsError(s.status(), absl::StatusCode::kInvalidArgument, {"validation", "t10k"}));
}

TEST(FashionMnistTest, MissingDirNamesThePath) {
  absl::StatusOr<MnistSplit> s = LoadFashionMnist("train", "/nonexistent/braze");
  EXPECT_TRUE(IsError(s.status(), absl::StatusCode::kNotFound,
                      {"/nonexistent/braze/train-images-idx3-ubyte.gz"}));
}

TEST(IdxTest, ReadsRealLabelFile) {
  absl::StatusOr<HostTensor> t = ReadIdxFile(DataFile("train-labels-idx1-ubyte.gz"));
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->dtype(), DType::kI32);
  EXPECT_EQ(t->shape(), (Shape{60000}));
}

TEST(IdxTest, ReadsRealImageFileWithIdxDims) {
  absl::StatusOr<HostTensor> t = ReadIdxFile(DataFile("t10k-images-idx3-ubyte.gz"));
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->shape(), (Shape{10000, 28, 28}));
  const int32_t* v = t->data<int32_t>();
  EXPECT_EQ(*std::max_element(v, v + t->num_elements()), 255);
}

TEST(IdxTest, MissingFileIsNotFound) {
  absl::StatusOr<HostTensor> t = ReadIdxFile("/nonexistent/braze/x-idx1-ubyte.gz");
  EXPECT_TRUE(
      IsError(t.status(), absl::StatusCode::kNotFound, {"/nonexistent/braze/x-idx1-ubyte.gz"}));
}

TEST_F(TempDirTest, RawAndGzipReadTheSameValues) {
  const std::vector<uint8_t> idx = MakeIdx({2, 3}, {0, 1, 2, 127, 128, 255});
  WriteBytes(Path("raw"), idx);
  WriteGz(Path("packed.gz"), idx);
  for (const std::string name : {"raw", "packed.gz"}) {
    absl::StatusOr<HostTensor> t = ReadIdxFile(Path(name));
    ASSERT_TRUE(t.ok()) << name << ": " << t.status();
    EXPECT_EQ(t->shape(), (Shape{2, 3})) << name;
    EXPECT_EQ(t->ToVector<int32_t>(), (std::vector<int32_t>{0, 1, 2, 127, 128, 255})) << name;
  }
}

TEST_F(TempDirTest, TruncatedRawFileGivesExpectedAndGotCounts) {
  // The decompressed real test labels: 8 header bytes then 10000 labels; keep 1234.
  std::vector<uint8_t> idx = Inflate(DataFile("t10k-labels-idx1-ubyte.gz"));
  ASSERT_EQ(idx.size(), 8u + 10000u);
  idx.resize(8 + 1234);
  const std::string path = Path("t10k-labels-idx1-ubyte");
  WriteBytes(path, idx);
  absl::StatusOr<HostTensor> t = ReadIdxFile(path);
  EXPECT_TRUE(IsError(t.status(), absl::StatusCode::kDataLoss,
                      {path, "truncated: expected 10000 bytes of data, got 1234"}));
}

TEST_F(TempDirTest, TruncatedImagesFailTheSplitLoad) {
  // Real images with the last row cut off, next to intact labels.
  std::vector<uint8_t> images = Inflate(DataFile("t10k-images-idx3-ubyte.gz"));
  images.resize(images.size() - 784);
  WriteBytes(Path("t10k-images-idx3-ubyte"), images);
  WriteBytes(Path("t10k-labels-idx1-ubyte"),
             ReadBytes(DataFile("t10k-labels-idx1-ubyte.gz")));  // gz under a raw name
  absl::StatusOr<MnistSplit> s = LoadFashionMnist("t10k", dir_.string());
  EXPECT_TRUE(IsError(
      s.status(), absl::StatusCode::kDataLoss,
      {Path("t10k-images-idx3-ubyte"), "truncated: expected 7840000 bytes of data, got 7839216"}));
}

TEST_F(TempDirTest, TruncatedGzipIsReportedAsTruncated) {
  // Cut the compressed stream in half: inflation stops early, mid-data.
  std::vector<uint8_t> gz = ReadBytes(DataFile("t10k-labels-idx1-ubyte.gz"));
  ASSERT_GT(gz.size(), 1000u);
  gz.resize(gz.size() / 2);
  const std::string path = Path("t10k-labels-idx1-ubyte.gz");
  WriteBytes(path, gz);
  absl::StatusOr<HostTensor> t = ReadIdxFile(path);
  EXPECT_TRUE(IsError(t.status(), absl::StatusCode::kDataLoss,
                      {path, "truncated: expected 10000 bytes of data"}));
}

TEST_F(TempDirTest, TruncatedHeader) {
  WriteBytes(Path("short"), {0, 0, 8, 3, 0, 0});
  absl::StatusOr<HostTensor> t = ReadIdxFile(Path("short"));
  EXPECT_TRUE(
      IsError(t.status(), absl::StatusCode::kDataLoss, {Path("short"), "truncated header"}));
}

TEST_F(TempDirTest, EmptyFile) {
  WriteBytes(Path("empty"), {});
  absl::StatusOr<HostTensor> t = ReadIdxFile(Path("empty"));
  EXPECT_TRUE(IsError(t.status(), absl::StatusCode::kDataLoss, {"truncated header"}));
}

TEST_F(TempDirTest, BadMagic) {
  WriteBytes(Path("png"), {0x89, 'P', 'N', 'G', 0, 0, 0, 1, 0});
  absl::StatusOr<HostTensor> t = ReadIdxFile(Path("png"));
  EXPECT_TRUE(
      IsError(t.status(), absl::StatusCode::kDataLoss, {Path("png"), "bad IDX magic 0x89504e47"}));
}

TEST_F(TempDirTest, NonU8ElementTypeIsRejected) {
  // 0x0D is IDX's float type: valid IDX, but not what Fashion-MNIST holds.
  WriteBytes(Path("float"), {0, 0, 0x0D, 1, 0, 0, 0, 1, 0, 0, 0, 0});
  absl::StatusOr<HostTensor> t = ReadIdxFile(Path("float"));
  EXPECT_TRUE(IsError(t.status(), absl::StatusCode::kDataLoss, {"bad IDX magic 0x00000d01"}));
}

TEST_F(TempDirTest, HugeClaimedSizeFailsWithoutAllocatingIt) {
  // The header claims 4G x 4G elements; the reader must refuse, not try to allocate.
  WriteBytes(Path("huge"), MakeIdx({0xffffffffu, 0xffffffffu}, {1, 2, 3}));
  absl::StatusOr<HostTensor> t = ReadIdxFile(Path("huge"));
  EXPECT_TRUE(IsError(t.status(), absl::StatusCode::kDataLoss, {"implausible"}));

  // Large but representable: fails as truncated after reading the 3 bytes present.
  WriteBytes(Path("big"), MakeIdx({1u << 30}, {1, 2, 3}));
  t = ReadIdxFile(Path("big"));
  EXPECT_TRUE(IsError(t.status(), absl::StatusCode::kDataLoss,
                      {"truncated: expected 1073741824 bytes of data, got 3"}));
}

TEST_F(TempDirTest, TrailingBytesAreRejected) {
  WriteBytes(Path("long"), MakeIdx({2}, {1, 2, 3}));
  absl::StatusOr<HostTensor> t = ReadIdxFile(Path("long"));
  EXPECT_TRUE(IsError(t.status(), absl::StatusCode::kDataLoss, {"trailing data"}));
}

TEST_F(TempDirTest, LoadsRawSplitAndScalesPixels) {
  // Two 28x28 images; a few known pixels. Raw (not .gz) names exercise the fallback.
  std::vector<uint8_t> pixels(2 * 784, 0);
  pixels[0] = 255;
  pixels[1] = 51;
  pixels[784 + 783] = 102;
  WriteBytes(Path("train-images-idx3-ubyte"), MakeIdx({2, 28, 28}, pixels));
  WriteBytes(Path("train-labels-idx1-ubyte"), MakeIdx({2}, {7, 0}));
  absl::StatusOr<MnistSplit> s = LoadFashionMnist("train", dir_.string());
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->images.shape(), (Shape{2, 784}));
  const float* px = s->images.data<float>();
  EXPECT_EQ(px[0], 1.0f);
  EXPECT_FLOAT_EQ(px[1], 0.2f);
  EXPECT_EQ(px[2], 0.0f);
  EXPECT_FLOAT_EQ(px[784 + 783], 0.4f);
  EXPECT_EQ(s->labels.ToVector<int32_t>(), (std::vector<int32_t>{7, 0}));
}

TEST_F(TempDirTest, ImageLabelCountMismatch) {
  WriteBytes(Path("t10k-images-idx3-ubyte"), MakeIdx({3, 28, 28}, std::vector<uint8_t>(3 * 784)));
  WriteGz(Path("t10k-labels-idx1-ubyte.gz"), MakeIdx({2}, {1, 2}));
  absl::StatusOr<MnistSplit> s = LoadFashionMnist("t10k", dir_.string());
  EXPECT_TRUE(IsError(s.status(), absl::StatusCode::kDataLoss,
                      {"3 images", "2 labels", Path("t10k-labels-idx1-ubyte.gz")}));
}

TEST_F(TempDirTest, LabelOutOfRange) {
  WriteBytes(Path("t10k-images-idx3-ubyte"), MakeIdx({2, 28, 28}, std::vector<uint8_t>(2 * 784)));
  WriteBytes(Path("t10k-labels-idx1-ubyte"), MakeIdx({2}, {3, 10}));
  absl::StatusOr<MnistSplit> s = LoadFashionMnist("t10k", dir_.string());
  EXPECT_TRUE(IsError(s.status(), absl::StatusCode::kDataLoss, {"label 10 at index 1"}));
}

TEST_F(TempDirTest, WrongImageShape) {
  WriteBytes(Path("t10k-images-idx3-ubyte"), MakeIdx({2, 784}, std::vector<uint8_t>(2 * 784)));
  WriteBytes(Path("t10k-labels-idx1-ubyte"), MakeIdx({2}, {3, 1}));
  absl::StatusOr<MnistSplit> s = LoadFashionMnist("t10k", dir_.string());
  EXPECT_TRUE(
      IsError(s.status(), absl::StatusCode::kDataLoss, {"expected images of shape [N,28,28]"}));
}

}  // namespace
}  // namespace braze
