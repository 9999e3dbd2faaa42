// The safetensors format (braze/safetensors.h): round trips of every dtype and odd
// shapes, bytes laid out as the format says (checked by hand here and by Python's json
// and struct modules), a file written by another writer (Python) read back, and every
// kind of malformed file refused with a DataLoss naming the file or tensor.
#include "braze/safetensors.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace braze {
namespace {

using ::testing::HasSubstr;

// Bit-exact equality (NaN payloads and signed zeros included).
void ExpectSameBits(const HostTensor& a, const HostTensor& b, const std::string& what) {
  ASSERT_EQ(a.dtype(), b.dtype()) << what;
  ASSERT_EQ(a.shape(), b.shape()) << what;
  EXPECT_EQ(std::memcmp(a.raw_data(), b.raw_data(), a.num_bytes()), 0) << what;
}

TensorMap SampleTensors() {
  TensorMap t;
  t["layer1/w"] = HostTensor::RandomNormal(DType::kF32, {7, 13}, 11);
  t["layer1/b"] = HostTensor::RandomUniform(DType::kF32, {13}, 12);
  t["Adam/step"] = HostTensor::Scalar(3.0);
  t["f64/odd"] = HostTensor::RandomNormal(DType::kF64, {1, 3, 5}, 13);
  t["i32"] = HostTensor::RandomUniform(DType::kI32, {2, 2}, 14, -1000, 1000);
  t["mask"] = HostTensor::RandomUniform(DType::kBool, {11}, 15);
  t["bf16"] = HostTensor::RandomNormal(DType::kBF16, {3, 5}, 16);
  t["f16/odd"] = HostTensor::RandomNormal(DType::kF16, {7}, 17);
  t["empty"] = HostTensor(DType::kF32, {0, 4});
  return t;
}

std::string TempDir() {
  std::string dir = ::testing::TempDir() + "safetensors_test_" + std::to_string(getpid());
  std::filesystem::create_directories(dir);
  return dir;
}

TEST(SafetensorsTest, RoundTripsEveryDTypeAndShape) {
  const TensorMap tensors = SampleTensors();
  const StringMap metadata = {{"step", "42"}, {"note", "caf\xc3\xa9"}};
  absl::StatusOr<std::string> bytes = EncodeSafetensors(tensors, metadata);
  ASSERT_TRUE(bytes.ok()) << bytes.status();
  absl::StatusOr<SafetensorsContents> back = DecodeSafetensors(*bytes, "mem");
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->metadata, metadata);
  ASSERT_EQ(back->tensors.size(), tensors.size());
  for (const auto& [name, t] : tensors) ExpectSameBits(back->tensors.at(name), t, name);
}

TEST(SafetensorsTest, LayoutFollowsTheFormat) {
  TensorMap tensors;
  tensors["b"] = HostTensor::From<int32_t>({1, -2, 3}, {3});
  tensors["a"] = HostTensor::From<float>({1.5f, -0.25f}, {2, 1});
  absl::StatusOr<std::string> bytes = EncodeSafetensors(tensors);
  ASSERT_TRUE(bytes.ok()) << bytes.status();
  uint64_t n = 0;
  for (int i = 0; i < 8; ++i) n |= uint64_t{static_cast<uint8_t>((*bytes)[i])} << (8 * i);
  EXPECT_EQ(n % 8, 0u) << "header padded to 8 bytes";
  ASSERT_EQ(bytes->size(), 8 + n + 8 + 12);
  const std::string header = bytes->substr(8, n);
  // Names in order, data in that order: a (8 bytes) then b (12).
  EXPECT_THAT(header,
              HasSubstr("\"a\":{\"data_offsets\":[0,8],\"dtype\":\"F32\",\"shape\":[2,1]}"));
  EXPECT_THAT(header, HasSubstr("\"b\":{\"data_offsets\":[8,20],\"dtype\":\"I32\",\"shape\":[3]}"));
  float a1;
  std::memcpy(&a1, bytes->data() + 8 + n + 4, 4);
  EXPECT_EQ(a1, -0.25f);
  int32_t b1;
  std::memcpy(&b1, bytes->data() + 8 + n + 8 + 4, 4);
  EXPECT_EQ(b1, -2);
}

// Bytes built by hand from the format's description (not by EncodeSafetensors): a header
// without padding, with whitespace, keys in another order and no metadata.
TEST(SafetensorsTest, ReadsAnotherWritersBytes) {
  const std::string header =
      R"({ "w" : {"shape": [2], "dtype": "F64", "data_offsets": [4, 20]},
          "m": {"dtype":"BOOL","shape":[4],"data_offsets":[0,4]} })";
  std::string bytes;
  const uint64_t n = header.size();
  for (int i = 0; i < 8; ++i) bytes.push_back(static_cast<char>(n >> (8 * i)));
  bytes += header;
  bytes += std::string("\x01\x00\x00\x01", 4);
  const double w[2] = {0.1, -7.0};
  bytes.append(reinterpret_cast<const char*>(w), sizeof(w));
  absl::StatusOr<SafetensorsContents> back = DecodeSafetensors(bytes, "by_hand");
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->tensors.at("w").ToVector<double>(), (std::vector<double>{0.1, -7.0}));
  EXPECT_EQ(back->tensors.at("m").ToVector<int>(), (std::vector<int>{1, 0, 0, 1}));
  EXPECT_TRUE(back->metadata.empty());
}

absl::Status DecodeStatus(const std::string& bytes) {
  return DecodeSafetensors(bytes, "bad.safetensors").status();
}

std::string WithHeader(const std::string& header, const std::string& data) {
  std::string bytes;
  const uint64_t n = header.size();
  for (int i = 0; i < 8; ++i) bytes.push_back(static_cast<char>(n >> (8 * i)));
  return bytes + header + data;
}

TEST(SafetensorsTest, RefusesMalformedFiles) {
  const std::string good = *EncodeSafetensors(SampleTensors());
  // Truncated anywhere: in the length, in the header, in the data.
  for (size_t keep : {size_t{0}, size_t{5}, size_t{40}, good.size() - 1}) {
    absl::Status s = DecodeStatus(good.substr(0, keep));
    EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss) << keep << ": " << s;
    EXPECT_THAT(s.message(), HasSubstr("bad.safetensors")) << keep;
  }
  EXPECT_THAT(DecodeStatus(good + "x").message(), HasSubstr("trailing"));
  EXPECT_THAT(DecodeStatus(WithHeader("{not json", "")).message(), HasSubstr("not a JSON object"));
  const std::string f32x2(8, '\0');
  EXPECT_THAT(
      DecodeStatus(WithHeader(R"({"t":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", f32x2))
          .message(),
      HasSubstr("tensor 't': shape [3] of F32 needs 3 elements but data_offsets hold 8"));
  EXPECT_THAT(DecodeStatus(WithHeader(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
                                      R"("b":{"dtype":"F32","shape":[1],"data_offsets":[2,6]}})",
                                      f32x2))
                  .message(),
              HasSubstr("overlap or leave a gap"));
  EXPECT_THAT(
      DecodeStatus(WithHeader(R"({"t":{"dtype":"F32","shape":[-1],"data_offsets":[0,4]}})", f32x2))
          .message(),
      HasSubstr("tensor 't'"));
  EXPECT_THAT(
      DecodeStatus(WithHeader(R"({"t":{"dtype":"BOOL","shape":[1],"data_offsets":[0,1]}})", "\x07"))
          .message(),
      HasSubstr("neither 0 nor 1"));
  absl::Status f8 = DecodeStatus(
      WithHeader(R"({"h":{"dtype":"F8_E4M3","shape":[8],"data_offsets":[0,8]}})", f32x2));
  EXPECT_EQ(f8.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(f8.message(), HasSubstr("tensor 'h' has dtype F8_E4M3"));
  EXPECT_THAT(DecodeStatus(WithHeader(R"({"__metadata__":{"k":3}})", "")).message(),
              HasSubstr("metadata 'k' is not a string"));
  // A header length far beyond the file (a flipped high byte) is refused, not allocated.
  std::string huge = good;
  huge[6] = '\x7f';
  EXPECT_THAT(DecodeStatus(huge).message(), HasSubstr("truncated or corrupt: header length"));
}

// Random damage (bytes changed, truncation) to a valid file: every decode returns, OK
// or with a Status; under ASan (tools/sanitize.sh) no read goes out of bounds.
TEST(SafetensorsTest, RandomDamageNeverCrashes) {
  const std::string good = *EncodeSafetensors(SampleTensors(), {{"k", "v"}});
  std::mt19937_64 rng(5);
  int refused = 0;
  for (int i = 0; i < 3000; ++i) {
    std::string bad = good;
    const int flips = 1 + static_cast<int>(rng() % 4);
    for (int f = 0; f < flips; ++f) {
      // Mostly in the length and the header, where the structure is.
      const size_t limit = rng() % 4 == 0 ? bad.size() : std::min<size_t>(bad.size(), 400);
      bad[rng() % limit] = static_cast<char>(rng());
    }
    if (rng() % 5 == 0) bad.resize(rng() % bad.size());
    refused += !DecodeSafetensors(bad, "damaged").ok();
  }
  EXPECT_GT(refused, 1000);
}

TEST(SafetensorsTest, RefusesBadNames) {
  TensorMap t;
  t["__metadata__"] = HostTensor::Scalar(1.0f);
  EXPECT_EQ(EncodeSafetensors(t).status().code(), absl::StatusCode::kInvalidArgument);
  TensorMap u;
  u["bad\xff"] = HostTensor::Scalar(1.0f);
  EXPECT_THAT(EncodeSafetensors(u).status().message(), HasSubstr("not UTF-8"));
}

TEST(SafetensorsTest, FilesAreWrittenWholeAndReadBack) {
  const std::string path = TempDir() + "/w.safetensors";
  ASSERT_TRUE(WriteSafetensors(path, SampleTensors(), {{"k", "v"}}).ok());
  absl::StatusOr<SafetensorsContents> back = ReadSafetensors(path);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->metadata.at("k"), "v");
  ExpectSameBits(back->tensors.at("layer1/w"), SampleTensors().at("layer1/w"), "layer1/w");
  EXPECT_EQ(ReadSafetensors(path + ".missing").status().code(), absl::StatusCode::kNotFound);
  // No temporary file left behind.
  int files = 0;
  for (const auto& e : std::filesystem::directory_iterator(TempDir())) files += !e.is_directory();
  EXPECT_EQ(files, 1);
}

bool HavePython() { return std::system("python3 -c 'import json, struct' >/dev/null 2>&1") == 0; }

// Python's json and struct modules (no safetensors package, no numpy) read what Braze
// wrote, and write a file Braze reads: the format, not Braze's own reader, is the oracle.
TEST(SafetensorsTest, PythonReadsAndWritesTheFormat) {
  if (!HavePython()) GTEST_SKIP() << "python3 (with its json and struct modules) not found";
  const std::string dir = TempDir();
  TensorMap tensors;
  tensors["w"] = HostTensor::From<float>({1.5f, -2.25f, 3.0f, 0.125f, -0.5f, 7.0f}, {2, 3});
  tensors["n"] = HostTensor::From<int32_t>({-5, 9}, {2});
  tensors["s"] = HostTensor::Scalar(0.1);
  ASSERT_TRUE(WriteSafetensors(dir + "/braze.safetensors", tensors, {{"step", "7"}}).ok());
  const std::string script = dir + "/check.py";
  std::ofstream(script) << R"PY(
import json, struct, sys
d = sys.argv[1]
b = open(d + "/braze.safetensors", "rb").read()
(n,) = struct.unpack("<Q", b[:8])
h = json.loads(b[8:8 + n])
data = b[8 + n:]
assert h["__metadata__"] == {"step": "7"}, h
fmt = {"F32": "f", "F64": "d", "I32": "i"}
def values(name):
    e = h[name]; lo, hi = e["data_offsets"]; c = fmt[e["dtype"]]
    return list(struct.unpack("<%d%s" % ((hi - lo) // struct.calcsize(c), c), data[lo:hi]))
assert h["w"]["shape"] == [2, 3] and values("w") == [1.5, -2.25, 3.0, 0.125, -0.5, 7.0]
assert h["n"]["dtype"] == "I32" and values("n") == [-5, 9]
assert h["s"]["shape"] == [] and values("s") == [0.1]
# A file of our own: keys unsorted, no padding, F64 then F32.
a = struct.pack("<3d", 0.5, -1.0, 2.0); c = struct.pack("<2f", 4.0, -8.0)
head = json.dumps({"c": {"dtype": "F32", "shape": [1, 2], "data_offsets": [24, 32]},
                   "a": {"dtype": "F64", "shape": [3], "data_offsets": [0, 24]},
                   "__metadata__": {"by": "python"}}).encode()
open(d + "/python.safetensors", "wb").write(struct.pack("<Q", len(head)) + head + a + c)
print("python ok")
)PY";
  ASSERT_EQ(std::system(("python3 " + script + " " + dir).c_str()), 0)
      << "Python could not read Braze's safetensors file";
  absl::StatusOr<SafetensorsContents> back = ReadSafetensors(dir + "/python.safetensors");
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->metadata.at("by"), "python");
  EXPECT_EQ(back->tensors.at("a").ToVector<double>(), (std::vector<double>{0.5, -1.0, 2.0}));
  EXPECT_EQ(back->tensors.at("c").shape(), (Shape{1, 2}));
  EXPECT_EQ(back->tensors.at("c").ToVector<float>(), (std::vector<float>{4.0f, -8.0f}));
}

}  // namespace
}  // namespace braze
