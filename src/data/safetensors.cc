// The safetensors format (braze/safetensors.h): the header is JSON handled by
// nlohmann::json, never a parser of our own; the checks on reading follow the format's
// rules (docs/CHECKPOINTS.md).
#include "braze/safetensors.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <limits>
#include <optional>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "braze/status.h"
#include "nlohmann/json.hpp"

// The tensor bytes are copied as they are: Braze runs on little-endian hosts only.
static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "safetensors data is little-endian");

namespace braze {
namespace {

using Json = nlohmann::json;

// The format's own cap on the header (the reference reader refuses larger ones): a
// corrupt length must not make us allocate gigabytes.
constexpr uint64_t kMaxHeaderBytes = 100'000'000;
constexpr char kMetadataKey[] = "__metadata__";

const char* SafetensorsDType(DType dtype) {
  switch (dtype) {
    case DType::kF32:
      return "F32";
    case DType::kF64:
      return "F64";
    case DType::kI32:
      return "I32";
    case DType::kBool:
      return "BOOL";
    case DType::kBF16:
      return "BF16";
    case DType::kF16:
      return "F16";
  }
  return "?";
}

std::optional<DType> BrazeDType(const std::string& name) {
  for (DType d : {DType::kF32, DType::kF64, DType::kI32, DType::kBool, DType::kBF16, DType::kF16}) {
    if (name == SafetensorsDType(d)) return d;
  }
  return std::nullopt;
}

// A file-system failure with its errno's code (NotFound, PermissionDenied, ...), `error`
// read right after the failing call: InternalError, which says Braze is wrong, was every
// such failure's code (a missing directory was Internal).
absl::Status FileError(int error, const std::string& what) {
  return absl::Status(absl::ErrnoToStatusCode(error),
                      absl::StrCat(what, ": ", std::strerror(error)));
}

// One header entry, checked against the data section's size.
struct Entry {
  std::string name;
  DType dtype;
  Shape shape;
  uint64_t begin, end;
};

absl::StatusOr<Entry> ParseEntry(const std::string& name, const Json& value, uint64_t data_bytes,
                                 const std::string& source) {
  auto bad = [&](const std::string& why) {
    return absl::DataLossError(absl::StrCat(source, ": tensor '", name, "': ", why));
  };
  if (!value.is_object()) return bad("header entry is not a JSON object");
  auto dtype_it = value.find("dtype");
  auto shape_it = value.find("shape");
  auto offsets_it = value.find("data_offsets");
  if (dtype_it == value.end() || !dtype_it->is_string()) return bad("no string \"dtype\"");
  if (shape_it == value.end() || !shape_it->is_array()) return bad("no \"shape\" array");
  if (offsets_it == value.end() || !offsets_it->is_array() || offsets_it->size() != 2 ||
      !(*offsets_it)[0].is_number_unsigned() || !(*offsets_it)[1].is_number_unsigned()) {
    return bad("\"data_offsets\" is not [begin, end] of two unsigned integers");
  }
  Entry e;
  e.name = name;
  const std::string dtype_name = dtype_it->get<std::string>();
  std::optional<DType> dtype = BrazeDType(dtype_name);
  if (!dtype) {
    return absl::InvalidArgumentError(
        absl::StrCat(source, ": tensor '", name, "' has dtype ", dtype_name,
                     ", which Braze does not have (it reads F32, F64, BF16, F16, I32 and BOOL)"));
  }
  e.dtype = *dtype;
  // Elements counted with overflow checks: a corrupt dim must not wrap around.
  uint64_t elements = 1;
  for (const Json& d : *shape_it) {
    if (!d.is_number_unsigned()) return bad("a dim of \"shape\" is not a non-negative integer");
    const uint64_t dim = d.get<uint64_t>();
    if (dim > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) ||
        (dim != 0 && elements > std::numeric_limits<uint64_t>::max() / dim)) {
      return bad("shape too large");
    }
    elements *= dim;
    e.shape.push_back(static_cast<int64_t>(dim));
  }
  e.begin = (*offsets_it)[0].get<uint64_t>();
  e.end = (*offsets_it)[1].get<uint64_t>();
  if (e.begin > e.end || e.end > data_bytes) {
    return bad(absl::StrCat("data_offsets [", e.begin, ", ", e.end, "] are outside the ",
                            data_bytes, " data bytes (truncated file?)"));
  }
  const uint64_t size = SizeOf(e.dtype);
  if (elements > std::numeric_limits<uint64_t>::max() / size ||
      elements * size != e.end - e.begin) {
    return bad(absl::StrCat("shape ", ShapeString(e.shape), " of ", dtype_name, " needs ", elements,
                            " elements but data_offsets hold ", e.end - e.begin, " bytes"));
  }
  return e;
}

absl::StatusOr<StringMap> ParseMetadata(const Json& value, const std::string& source) {
  if (!value.is_object()) {
    return absl::DataLossError(absl::StrCat(source, ": \"__metadata__\" is not a JSON object"));
  }
  StringMap metadata;
  for (auto it = value.begin(); it != value.end(); ++it) {
    if (!it.value().is_string()) {
      return absl::DataLossError(
          absl::StrCat(source, ": metadata '", it.key(), "' is not a string"));
    }
    metadata[it.key()] = it.value().get<std::string>();
  }
  return metadata;
}

// The format forbids holes and overlaps: sorted by offset, each tensor starts where the
// previous one ended, and the last one ends at the end of the file.
absl::Status CheckCoverage(std::vector<Entry>& entries, uint64_t data_bytes,
                           const std::string& source) {
  std::sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
  });
  uint64_t at = 0;
  for (const Entry& e : entries) {
    if (e.begin != at) {
      return absl::DataLossError(absl::StrCat(source, ": tensor '", e.name, "' starts at byte ",
                                              e.begin, " of the data, expected ", at,
                                              " (tensors overlap or leave a gap)"));
    }
    at = e.end;
  }
  if (at != data_bytes) {
    return absl::DataLossError(absl::StrCat(source, ": the tensors cover ", at, " of the ",
                                            data_bytes, " data bytes (trailing bytes)"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::string> EncodeSafetensors(const TensorMap& tensors, const StringMap& metadata) {
  Json header = Json::object();
  uint64_t offset = 0;
  for (const auto& [name, t] : tensors) {
    if (name.empty() || name == kMetadataKey) {
      return absl::InvalidArgumentError(
          absl::StrCat("safetensors: a tensor may not be named '", name, "'"));
    }
    if (t.num_elements() < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("safetensors: tensor '", name, "' holds no values (impossible shape)"));
    }
    header[name] = {{"dtype", SafetensorsDType(t.dtype())},
                    {"shape", t.shape()},
                    {"data_offsets", {offset, offset + t.num_bytes()}}};
    offset += t.num_bytes();
  }
  if (!metadata.empty()) header[kMetadataKey] = metadata;
  std::string text;
  try {
    text = header.dump();
  } catch (const Json::exception& e) {
    // dump() refuses strings that are not UTF-8: names and metadata must be text.
    return absl::InvalidArgumentError(
        absl::StrCat("safetensors: a tensor name or metadata string is not UTF-8: ", e.what()));
  }
  // Pad with spaces so the data starts 8-byte aligned (as the reference writer does).
  text.append((8 - text.size() % 8) % 8, ' ');
  std::string out;
  out.reserve(8 + text.size() + offset);
  const uint64_t n = text.size();
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>((n >> (8 * i)) & 0xff));
  out += text;
  for (const auto& [name, t] : tensors) {
    out.append(static_cast<const char*>(t.raw_data()), t.num_bytes());
  }
  return out;
}

absl::StatusOr<SafetensorsContents> DecodeSafetensors(std::string_view bytes,
                                                      std::string_view source_name) {
  // Abseil 20220623's StrCat takes absl::string_view, not std::string_view.
  const std::string source(source_name);
  if (bytes.size() < 8) {
    return absl::DataLossError(absl::StrCat(source, ": truncated: ", bytes.size(),
                                            " bytes, less than the 8-byte header length"));
  }
  uint64_t n = 0;
  for (int i = 0; i < 8; ++i) n |= static_cast<uint64_t>(static_cast<uint8_t>(bytes[i])) << (8 * i);
  if (n > kMaxHeaderBytes || n > bytes.size() - 8) {
    return absl::DataLossError(absl::StrCat(source, ": truncated or corrupt: header length ", n,
                                            " but the file has ", bytes.size(), " bytes"));
  }
  const std::string_view text = bytes.substr(8, n);
  const Json header = Json::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false);
  if (header.is_discarded() || !header.is_object()) {
    return absl::DataLossError(absl::StrCat(source, ": the header is not a JSON object"));
  }
  const std::string_view data = bytes.substr(8 + n);
  SafetensorsContents out;
  std::vector<Entry> entries;
  for (auto it = header.begin(); it != header.end(); ++it) {
    if (it.key() == kMetadataKey) {
      BRAZE_ASSIGN_OR_RETURN(out.metadata, ParseMetadata(it.value(), source));
      continue;
    }
    BRAZE_ASSIGN_OR_RETURN(Entry e, ParseEntry(it.key(), it.value(), data.size(), source));
    entries.push_back(std::move(e));
  }
  BRAZE_RETURN_IF_ERROR(CheckCoverage(entries, data.size(), source));
  for (const Entry& e : entries) {
    HostTensor t(e.dtype, e.shape);
    if (t.num_elements() < 0) {
      return absl::DataLossError(absl::StrCat(source, ": tensor '", e.name, "': shape ",
                                              ShapeString(e.shape), " is too large"));
    }
    std::memcpy(t.raw_data(), data.data() + e.begin, e.end - e.begin);
    if (e.dtype == DType::kBool) {
      const auto* b = static_cast<const uint8_t*>(t.raw_data());
      if (std::any_of(b, b + t.num_elements(), [](uint8_t v) { return v > 1; })) {
        return absl::DataLossError(
            absl::StrCat(source, ": tensor '", e.name, "': a BOOL byte is neither 0 nor 1"));
      }
    }
    out.tensors.emplace(e.name, std::move(t));
  }
  return out;
}

absl::Status WriteFileDurably(const std::string& path, std::string_view bytes) {
  const int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return FileError(errno, absl::StrCat("cannot create ", path));
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int error = n < 0 ? errno : EIO;
      close(fd);
      return FileError(error, absl::StrCat("cannot write ", path));
    }
    done += static_cast<size_t>(n);
  }
  if (fsync(fd) != 0) {
    const int error = errno;
    close(fd);
    return FileError(error, absl::StrCat("cannot fsync ", path));
  }
  if (close(fd) != 0) return FileError(errno, absl::StrCat("cannot close ", path));
  return absl::OkStatus();
}

absl::Status SyncDirectory(const std::string& path) {
  const int fd = open(path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return FileError(errno, absl::StrCat("cannot open ", path));
  const int rc = fsync(fd);
  const int error = errno;
  close(fd);
  if (rc != 0) return FileError(error, absl::StrCat("cannot fsync ", path));
  return absl::OkStatus();
}

// open(2), not an ifstream: its failure's errno says why (a file unreadable for its
// permissions was NotFound), and a directory is refused by name (it read as a file of 0
// bytes: "truncated").
absl::StatusOr<std::string> ReadWholeFile(const std::string& path) {
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return FileError(errno, absl::StrCat("cannot open ", path));
  std::string out;
  char buffer[1 << 16];
  while (true) {
    const ssize_t n = read(fd, buffer, sizeof(buffer));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int error = errno;
      close(fd);
      return FileError(error, absl::StrCat("cannot read ", path));
    }
    if (n == 0) break;
    out.append(buffer, static_cast<size_t>(n));
  }
  close(fd);
  return out;
}

absl::Status WriteSafetensors(const std::string& path, const TensorMap& tensors,
                              const StringMap& metadata) {
  BRAZE_ASSIGN_OR_RETURN(std::string bytes, EncodeSafetensors(tensors, metadata));
  const std::string tmp = absl::StrCat(path, ".tmp.", getpid());
  absl::Status written = WriteFileDurably(tmp, bytes);
  if (written.ok() && std::rename(tmp.c_str(), path.c_str()) != 0) {
    written = FileError(errno, absl::StrCat("cannot rename ", tmp, " to ", path));
  }
  if (!written.ok()) {
    unlink(tmp.c_str());
    return written;
  }
  const size_t slash = path.rfind('/');
  return SyncDirectory(slash == std::string::npos ? "."
                                                  : path.substr(0, std::max<size_t>(slash, 1)));
}

absl::StatusOr<SafetensorsContents> ReadSafetensors(const std::string& path) {
  BRAZE_ASSIGN_OR_RETURN(std::string bytes, ReadWholeFile(path));
  return DecodeSafetensors(bytes, path);
}

}  // namespace braze
