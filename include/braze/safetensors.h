// Tensors in the safetensors format, which PyTorch (safetensors.torch), JAX, NumPy and
// Hugging Face tools read and write, so weights trained by Braze can be used elsewhere
// and weights from elsewhere loaded into Braze (braze/checkpoint.h, LoadVariables).
//
// A file is: an 8-byte little-endian unsigned header length N; N bytes of a UTF-8 JSON
// object (padded with spaces to a multiple of 8 when Braze writes it)
//   {"<name>": {"dtype": "F32", "shape": [2, 3], "data_offsets": [begin, end]}, ...,
//    "__metadata__": {"<key>": "<string value>", ...}}
// then the tensors' raw little-endian row-major bytes, `data_offsets` counting from the
// first byte after the header. Braze's dtypes map to "F32", "F64", "BF16", "F16", "I32" and "BOOL"
// (one byte, 0 or 1); any other dtype in a file read is InvalidArgument naming the tensor. Braze
// writes tensors in name order, contiguous, and reading checks what the format requires: offsets
// within the data, no overlap and no gap, every byte covered, each tensor's byte count equal to its
// shape times its dtype's size (docs/CHECKPOINTS.md).
#ifndef BRAZE_SAFETENSORS_H_
#define BRAZE_SAFETENSORS_H_

#include <map>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "braze/host_tensor.h"

namespace braze {

using TensorMap = std::map<std::string, HostTensor>;
using StringMap = std::map<std::string, std::string>;

struct SafetensorsContents {
  TensorMap tensors;
  StringMap metadata;  // the header's "__metadata__" (empty when it has none)
};

// The bytes of a safetensors file holding `tensors` and `metadata`. InvalidArgument for a
// name that is empty, "__metadata__" or not valid UTF-8, or a tensor without values.
absl::StatusOr<std::string> EncodeSafetensors(const TensorMap& tensors,
                                              const StringMap& metadata = {});

// Parses safetensors bytes. `source` (a file name) starts every error message. DataLoss
// for a truncated or malformed file (header length past the end, invalid JSON, offsets
// outside the data or overlapping or leaving gaps, a byte count that does not match the
// shape, a BOOL byte other than 0 or 1); InvalidArgument for a dtype Braze lacks.
absl::StatusOr<SafetensorsContents> DecodeSafetensors(std::string_view bytes,
                                                      std::string_view source = "safetensors");

// Writes a safetensors file: to a temporary name in the same directory, fsynced, then
// renamed over `path`, so a reader (or a crash) sees the old file or the new one whole.
absl::Status WriteSafetensors(const std::string& path, const TensorMap& tensors,
                              const StringMap& metadata = {});
// Reads a whole safetensors file. NotFound when it does not exist.
absl::StatusOr<SafetensorsContents> ReadSafetensors(const std::string& path);

// File helpers the checkpoints share (durable writes, whole-file reads).
// Writes `bytes` to `path` (created or truncated) and fsyncs it.
absl::Status WriteFileDurably(const std::string& path, std::string_view bytes);
// fsyncs a directory, so the entries created or renamed in it survive a crash.
absl::Status SyncDirectory(const std::string& path);
absl::StatusOr<std::string> ReadWholeFile(const std::string& path);

}  // namespace braze

#endif  // BRAZE_SAFETENSORS_H_
