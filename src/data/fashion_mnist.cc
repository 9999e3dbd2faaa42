// IDX reader and Fashion-MNIST loader (braze/data.h).
//
// IDX (http://yann.lecun.com/exdb/mnist/): a 4-byte magic 0x0000TTRR (TT = element type,
// RR = rank), RR big-endian u32 dims, then the elements row-major. Debian ships the files
// gzip-compressed; zlib's gzread reads .gz and raw files alike, so one path serves both.
#include <sys/stat.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "braze/data.h"
#include "braze/status.h"

namespace braze {
namespace {

constexpr int kIdxTypeU8 = 0x08;
constexpr int kMaxIdxRank = 4;
// Corrupt headers can claim absurd sizes; nothing real is near this (60000*28*28 = 47M).
constexpr int64_t kMaxIdxElements = int64_t{1} << 32;
constexpr int kNumClasses = 10;
constexpr int64_t kImageSide = 28;

// Closes the gzFile on every return path.
class GzFile {
 public:
  explicit GzFile(gzFile f) : f_(f) {}
  ~GzFile() {
    if (f_ != nullptr) gzclose(f_);
  }
  GzFile(const GzFile&) = delete;
  GzFile& operator=(const GzFile&) = delete;
  gzFile get() const { return f_; }

 private:
  gzFile f_;
};

// The raw contents of a u8 IDX file.
struct IdxBytes {
  Shape shape;
  std::vector<uint8_t> data;
};

// zlib's own description of the stream's last error, or "" when there is none. A
// truncated .gz shows up here as "unexpected end of file".
std::string GzErrorSuffix(gzFile f) {
  int errnum = Z_OK;
  const char* msg = gzerror(f, &errnum);
  if (errnum == Z_OK || msg == nullptr || *msg == '\0') return "";
  return absl::StrCat(" (zlib: ", msg, ")");
}

// Reads up to `n` bytes. Returns how many were read; fewer than `n` means end of data
// (or a decompression error, which the caller reports through GzErrorSuffix).
absl::StatusOr<size_t> ReadUpTo(gzFile f, const std::string& path, uint8_t* out, size_t n) {
  size_t total = 0;
  while (total < n) {
    // gzread takes an unsigned count but returns int: read in chunks below INT_MAX.
    const unsigned chunk = static_cast<unsigned>(std::min<size_t>(n - total, 1u << 24));
    const int got = gzread(f, out + total, chunk);
    if (got < 0) {
      return absl::DataLossError(absl::StrCat(path, ": read error", GzErrorSuffix(f)));
    }
    if (got == 0) break;
    total += static_cast<size_t>(got);
  }
  return total;
}

absl::StatusOr<IdxBytes> ReadIdxBytes(const std::string& path) {
  // gzopen opens a directory, whose first read fails: that was DataLoss, which says the
  // file is damaged (ReadSafetensors says this, with this code).
  struct stat st;
  if (stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) {
    return absl::FailedPreconditionError(absl::StrCat("cannot read ", path, ": Is a directory"));
  }
  errno = 0;
  GzFile file(gzopen(path.c_str(), "rb"));
  if (file.get() == nullptr) {
    const int err = errno;
    const std::string why = err != 0 ? std::strerror(err) : "cannot open";
    if (err == ENOENT) return absl::NotFoundError(absl::StrCat(path, ": ", why));
    if (err == EACCES) return absl::PermissionDeniedError(absl::StrCat(path, ": ", why));
    return absl::UnavailableError(absl::StrCat(path, ": ", why));
  }
  gzFile f = file.get();
  // Fewer, larger reads than zlib's default 8 KiB buffer for the 26 MB training images.
  gzbuffer(f, 1 << 20);

  uint8_t magic[4];
  BRAZE_ASSIGN_OR_RETURN(size_t got, ReadUpTo(f, path, magic, sizeof(magic)));
  if (got < sizeof(magic)) {
    return absl::DataLossError(
        absl::StrFormat("%s: truncated header: expected a 4-byte IDX magic, got %d bytes%s", path,
                        got, GzErrorSuffix(f)));
  }
  const int rank = magic[3];
  if (magic[0] != 0 || magic[1] != 0 || magic[2] != kIdxTypeU8 || rank < 1 || rank > kMaxIdxRank) {
    return absl::DataLossError(absl::StrFormat(
        "%s: bad IDX magic 0x%02x%02x%02x%02x: expected 0x000008NN (u8 data, rank NN in "
        "1..%d), e.g. 0x00000801 for labels or 0x00000803 for images",
        path, magic[0], magic[1], magic[2], magic[3], kMaxIdxRank));
  }

  uint8_t dims[4 * kMaxIdxRank];
  const size_t dims_bytes = 4 * static_cast<size_t>(rank);
  BRAZE_ASSIGN_OR_RETURN(got, ReadUpTo(f, path, dims, dims_bytes));
  if (got < dims_bytes) {
    return absl::DataLossError(
        absl::StrFormat("%s: truncated header: expected %d bytes of dims, got %d%s", path,
                        dims_bytes, got, GzErrorSuffix(f)));
  }
  IdxBytes out;
  for (int i = 0; i < rank; ++i) {
    const uint8_t* d = dims + 4 * i;
    out.shape.push_back((int64_t{d[0]} << 24) | (int64_t{d[1]} << 16) | (int64_t{d[2]} << 8) |
                        int64_t{d[3]});
  }
  int64_t count = 1;
  for (int64_t dim : out.shape) {
    // Checked before multiplying: two 32-bit dims can overflow int64.
    if (dim != 0 && count > kMaxIdxElements / dim) {
      return absl::DataLossError(
          absl::StrFormat("%s: implausible IDX dims %s (more than %d elements)", path,
                          ShapeString(out.shape), kMaxIdxElements));
    }
    count *= dim;
  }

  // Grow the buffer as data arrives instead of trusting the header up front, so a
  // corrupt header that claims gigabytes fails as "truncated", not as an allocation.
  const size_t expected = static_cast<size_t>(count);
  size_t have = 0;
  while (have < expected) {
    const size_t want = std::min(expected - have, std::max<size_t>(have, 1 << 20));
    out.data.resize(have + want);
    BRAZE_ASSIGN_OR_RETURN(got, ReadUpTo(f, path, out.data.data() + have, want));
    have += got;
    if (got < want) break;
  }
  if (have < expected) {
    return absl::DataLossError(absl::StrFormat("%s: truncated: expected %d bytes of data, got %d%s",
                                               path, expected, have, GzErrorSuffix(f)));
  }
  uint8_t extra;
  BRAZE_ASSIGN_OR_RETURN(got, ReadUpTo(f, path, &extra, 1));
  if (got != 0) {
    // Trailing bytes mean the header does not describe the file: a corrupt header or
    // two files concatenated. Either way the data cannot be trusted.
    return absl::DataLossError(
        absl::StrFormat("%s: trailing data after the %d bytes that dims %s describe", path,
                        expected, ShapeString(out.shape)));
  }
  return out;
}

// Prefers `<dir>/<name>.gz` (what Debian ships) and falls back to a decompressed
// `<dir>/<name>`; when neither exists the error names the .gz path.
std::string ResolveIdxPath(const std::string& dir, const std::string& name) {
  const std::string base = dir.empty() ? name : absl::StrCat(dir, "/", name);
  const std::string gz = absl::StrCat(base, ".gz");
  if (FILE* f = std::fopen(gz.c_str(), "rb")) {
    std::fclose(f);
    return gz;
  }
  if (FILE* f = std::fopen(base.c_str(), "rb")) {
    std::fclose(f);
    return base;
  }
  return gz;
}

}  // namespace

absl::StatusOr<HostTensor> ReadIdxFile(const std::string& path) {
  BRAZE_ASSIGN_OR_RETURN(IdxBytes idx, ReadIdxBytes(path));
  HostTensor t(DType::kI32, idx.shape);
  int32_t* dst = t.data<int32_t>();
  for (size_t i = 0; i < idx.data.size(); ++i) dst[i] = idx.data[i];
  return t;
}

absl::StatusOr<MnistSplit> LoadFashionMnist(const std::string& split, const std::string& dir) {
  if (split != "train" && split != "t10k") {
    return absl::InvalidArgumentError(absl::StrCat("unknown Fashion-MNIST split \"", split,
                                                   "\": expected \"train\" or \"t10k\""));
  }
  const std::string images_path = ResolveIdxPath(dir, split + "-images-idx3-ubyte");
  const std::string labels_path = ResolveIdxPath(dir, split + "-labels-idx1-ubyte");

  BRAZE_ASSIGN_OR_RETURN(IdxBytes images, ReadIdxBytes(images_path));
  if (images.shape.size() != 3 || images.shape[1] != kImageSide || images.shape[2] != kImageSide) {
    return absl::DataLossError(absl::StrFormat("%s: expected images of shape [N,28,28], got %s",
                                               images_path, ShapeString(images.shape)));
  }
  BRAZE_ASSIGN_OR_RETURN(IdxBytes labels, ReadIdxBytes(labels_path));
  if (labels.shape.size() != 1) {
    return absl::DataLossError(absl::StrFormat("%s: expected labels of shape [N], got %s",
                                               labels_path, ShapeString(labels.shape)));
  }
  const int64_t n = images.shape[0];
  if (labels.shape[0] != n) {
    return absl::DataLossError(
        absl::StrFormat("Fashion-MNIST %s: %d images in %s but %d labels in %s", split, n,
                        images_path, labels.shape[0], labels_path));
  }

  MnistSplit out;
  out.labels = HostTensor(DType::kI32, Shape{n});
  int32_t* label_dst = out.labels.data<int32_t>();
  for (int64_t i = 0; i < n; ++i) {
    if (labels.data[i] >= kNumClasses) {
      return absl::DataLossError(absl::StrFormat("%s: label %d at index %d is outside 0..%d",
                                                 labels_path, labels.data[i], i, kNumClasses - 1));
    }
    label_dst[i] = labels.data[i];
  }
  const int64_t pixels = kImageSide * kImageSide;
  out.images = HostTensor(DType::kF32, Shape{n, pixels});
  float* image_dst = out.images.data<float>();
  for (size_t i = 0; i < images.data.size(); ++i) image_dst[i] = images.data[i] / 255.0f;
  return out;
}

}  // namespace braze
