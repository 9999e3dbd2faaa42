// The fortunes corpus loader (braze/data.h): the split rule lives in the header.
#include <algorithm>
#include <array>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <system_error>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "braze/data.h"
#include "braze/status.h"

namespace braze {
namespace {

namespace fs = std::filesystem;

// The text files of the corpus, in name order.
absl::StatusOr<std::vector<fs::path>> CorpusFiles(const std::string& dir) {
  std::error_code ec;
  fs::directory_iterator it(dir, ec);
  if (ec) {
    // The errno's code: a file where the directory should be is FailedPrecondition, an
    // unreadable one PermissionDenied (each was NotFound).
    return absl::Status(absl::ErrnoToStatusCode(ec.value()),
                        absl::StrCat("fortunes: cannot read directory '", dir, "': ", ec.message(),
                                     " (is the fortunes package installed?)"));
  }
  std::vector<fs::path> files;
  for (const fs::directory_entry& e : it) {
    const std::string name = e.path().filename().string();
    if (name.find('.') != std::string::npos) continue;
    if (e.is_symlink(ec) || !e.is_regular_file(ec)) continue;
    files.push_back(e.path());
  }
  std::sort(files.begin(), files.end());
  return files;
}

absl::StatusOr<std::string> ReadFile(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  if (!in.good() && !in.eof()) {
    return absl::DataLossError(absl::StrCat("fortunes: cannot read '", path.string(), "'"));
  }
  return text.str();
}

// Cuts a fortune file at its "%" lines; a last fortune without a trailing "%" counts too.
std::vector<std::string> SplitFortunes(const std::string& text) {
  std::vector<std::string> fortunes;
  std::string current;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t end = text.find('\n', pos);
    const size_t next = end == std::string::npos ? text.size() : end + 1;
    const std::string line = text.substr(pos, next - pos);
    if (line == "%\n" || line == "%") {
      if (!current.empty()) fortunes.push_back(current);
      current.clear();
    } else {
      current += line;
    }
    pos = next;
  }
  if (!current.empty()) fortunes.push_back(current);
  return fortunes;
}

}  // namespace

absl::StatusOr<TextCorpus> LoadFortunes(const std::string& dir) {
  BRAZE_ASSIGN_OR_RETURN(std::vector<fs::path> files, CorpusFiles(dir));
  std::string train_text, validation_text;
  int64_t k = 0;
  for (const fs::path& file : files) {
    BRAZE_ASSIGN_OR_RETURN(std::string text, ReadFile(file));
    for (const std::string& fortune : SplitFortunes(text)) {
      std::string& split = k++ % 10 == 9 ? validation_text : train_text;
      split += fortune;
      split += "%\n";
    }
  }
  if (train_text.empty() || validation_text.empty()) {
    return absl::NotFoundError(absl::StrCat("fortunes: '", dir, "' holds ", k,
                                            " fortunes, too few for a train and validation split"));
  }
  std::array<bool, 256> seen{};
  for (unsigned char c : train_text) seen[c] = true;
  for (unsigned char c : validation_text) seen[c] = true;
  TextCorpus corpus;
  std::array<int32_t, 256> id{};
  for (int c = 0; c < 256; ++c) {
    if (!seen[c]) continue;
    id[c] = static_cast<int32_t>(corpus.vocab.size());
    corpus.vocab.push_back(static_cast<char>(c));
  }
  for (unsigned char c : train_text) corpus.train.push_back(id[c]);
  for (unsigned char c : validation_text) corpus.validation.push_back(id[c]);
  return corpus;
}

std::string DecodeText(const std::string& vocab, const std::vector<int32_t>& ids) {
  std::string text;
  text.reserve(ids.size());
  for (int32_t i : ids) {
    text.push_back(i >= 0 && i < static_cast<int32_t>(vocab.size()) ? vocab[i] : '?');
  }
  return text;
}

}  // namespace braze
