// Tests for the fortunes corpus loader: the split rule on hand-made files in a temp dir,
// every error path, and the real Debian corpus (the fortunes package, installed by
// tools/setup.sh).
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "braze/data.h"
#include "gtest/gtest.h"

namespace braze {
namespace {

namespace fs = std::filesystem;

class FortunesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("braze_fortunes_" + std::to_string(getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  void Write(const std::string& name, const std::string& text) {
    std::ofstream(dir_ / name, std::ios::binary) << text;
  }
  fs::path dir_;
};

// Twelve fortunes over two files (in name order, whatever order they were written in):
// the tenth (k = 9) is the only validation one.
TEST_F(FortunesTest, SplitsEveryTenthFortuneToValidation) {
  std::string b, a;
  for (int k = 0; k < 5; ++k) a += "a" + std::to_string(k) + "\n%\n";
  for (int k = 5; k < 12; ++k) b += "b" + std::to_string(k) + "\nline two\n%\n";
  Write("bfile", b);
  Write("afile", a);
  Write("afile.dat", "binary index, skipped");
  fs::create_symlink(dir_ / "afile", dir_ / "afile.u8");
  fs::create_directories(dir_ / "off");
  absl::StatusOr<TextCorpus> corpus = LoadFortunes(dir_.string());
  ASSERT_TRUE(corpus.ok()) << corpus.status();
  EXPECT_EQ(DecodeText(corpus->vocab, corpus->validation), "b9\nline two\n%\n");
  const std::string train = DecodeText(corpus->vocab, corpus->train);
  EXPECT_TRUE(absl::StartsWith(train, "a0\n%\na1\n%\n")) << train;
  EXPECT_TRUE(absl::EndsWith(train, "b8\nline two\n%\nb10\nline two\n%\nb11\nline two\n%\n"))
      << train;
  EXPECT_FALSE(absl::StrContains(train, "binary")) << train;
  // The vocabulary: each distinct byte once, ascending.
  EXPECT_EQ(corpus->vocab, "\n %0123456789abeilnotw");
}

TEST_F(FortunesTest, ALastFortuneWithoutPercentCountsAndEmptyOnesDoNot) {
  std::string text = "%\n%\n";  // two empty fortunes first
  for (int k = 0; k < 9; ++k) text += "x\n%\n";
  text += "last\n";  // k = 9, no trailing "%"
  Write("f", text);
  absl::StatusOr<TextCorpus> corpus = LoadFortunes(dir_.string());
  ASSERT_TRUE(corpus.ok()) << corpus.status();
  EXPECT_EQ(DecodeText(corpus->vocab, corpus->validation), "last\n%\n");
  EXPECT_EQ(corpus->train.size(), 9u * 4);
}

TEST_F(FortunesTest, ErrorsNameTheDirectory) {
  absl::StatusOr<TextCorpus> missing = LoadFortunes((dir_ / "nope").string());
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(absl::StrContains(missing.status().message(), "nope")) << missing.status();
  Write("one", "only one\n%\n");
  absl::StatusOr<TextCorpus> few = LoadFortunes(dir_.string());
  EXPECT_EQ(few.status().code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(absl::StrContains(few.status().message(), "1 fortunes")) << few.status();
}

TEST(FortunesCorpus, TheDebianCorpusSplitsNinetyTen) {
  if (!fs::exists(kFortunesDir)) GTEST_SKIP() << kFortunesDir << " missing: run tools/setup.sh";
  absl::StatusOr<TextCorpus> corpus = LoadFortunes();
  ASSERT_TRUE(corpus.ok()) << corpus.status();
  const double n = corpus->train.size() + corpus->validation.size();
  EXPECT_GT(n, 1e6);
  EXPECT_NEAR(corpus->validation.size() / n, 0.1, 0.02);
  EXPECT_GT(corpus->vocab.size(), 60u);
  EXPECT_LE(corpus->vocab.size(), 256u);
}

}  // namespace
}  // namespace braze
