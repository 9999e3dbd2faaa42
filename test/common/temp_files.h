// Files for tests that write and read directories: dumps, stored schedules, tuner output.
#ifndef BRAZE_TEST_COMMON_TEMP_FILES_H_
#define BRAZE_TEST_COMMON_TEMP_FILES_H_

#include <stdlib.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace braze {
namespace testing_util {

// A new empty directory under /tmp ("/tmp/<prefix>XXXXXX"); "" if none can be made.
inline std::string MakeTempDir(const std::string& prefix) {
  std::string tmpl = "/tmp/" + prefix + "XXXXXX";
  return mkdtemp(tmpl.data()) != nullptr ? tmpl : std::string();
}

inline std::string ReadFile(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

inline void WriteFile(const std::filesystem::path& path, const std::string& text) {
  std::ofstream(path, std::ios::binary) << text;
}

// The names (not paths) of the files in `dir` ending in `suffix`, sorted.
inline std::vector<std::string> FilesIn(const std::filesystem::path& dir,
                                        const std::string& suffix) {
  std::vector<std::string> names;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    if (name.size() >= suffix.size() &&
        name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0) {
      names.push_back(name);
    }
  }
  std::sort(names.begin(), names.end());
  return names;
}

}  // namespace testing_util
}  // namespace braze

#endif  // BRAZE_TEST_COMMON_TEMP_FILES_H_
