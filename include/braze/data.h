// Fashion-MNIST (IDX files, gzip-compressed), as shipped by Debian's
// dataset-fashion-mnist package.
#ifndef BRAZE_DATA_H_
#define BRAZE_DATA_H_

#include <string>

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

}  // namespace braze

#endif  // BRAZE_DATA_H_
