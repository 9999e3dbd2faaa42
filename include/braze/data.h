// The datasets the examples train on, as Debian ships them: Fashion-MNIST (IDX files,
// gzip-compressed; package dataset-fashion-mnist) and the text of the fortunes package.
#ifndef BRAZE_DATA_H_
#define BRAZE_DATA_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "braze/host_tensor.h"

namespace braze {

inline constexpr char kFashionMnistDir[] = "/usr/share/datasets/fashion-mnist";

// Reads one IDX file (.gz or raw). u8 data becomes i32; the shape is the IDX dims.
absl::StatusOr<HostTensor> ReadIdxFile(const std::string& path);

struct MnistSplit {
  HostTensor images;  // f32 [N, 784], pixel / 255
  HostTensor labels;  // i32 [N], 0..9
};
// split: "train" or "t10k". Missing or truncated files give a clear error naming the path.
absl::StatusOr<MnistSplit> LoadFashionMnist(const std::string& split,
                                            const std::string& dir = kFashionMnistDir);

inline constexpr char kFortunesDir[] = "/usr/share/games/fortunes";

// A character-level corpus: ids index `vocab`, the distinct bytes of the whole corpus
// in ascending order (so the vocabulary does not depend on the split).
struct TextCorpus {
  std::string vocab;
  std::vector<int32_t> train;
  std::vector<int32_t> validation;
};

// The fortunes package's text (Debian `fortunes`, `fortunes-min`), split by a fixed rule:
// the regular files of `dir` whose names have no '.' (not the .dat indexes nor the .u8
// links), in name order, are cut into fortunes at lines that are exactly "%"; fortune k
// (counting from 0 over all files) goes to validation when k % 10 == 9, else to train.
// Each split is its fortunes' text in order, each followed by "%\n" as in the files.
// Empty fortunes are skipped. Errors name the directory or file: missing, unreadable,
// or no fortunes at all.
absl::StatusOr<TextCorpus> LoadFortunes(const std::string& dir = kFortunesDir);

// The bytes of `ids` under `vocab` (ids outside it become '?').
std::string DecodeText(const std::string& vocab, const std::vector<int32_t>& ids);

}  // namespace braze

#endif  // BRAZE_DATA_H_
