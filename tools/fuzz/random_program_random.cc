// Random programs, the random ops (GenerateOptions::random_probability; docs/RANDOM.md):
// RandomUniform (f32, f64) and RandomNormal of any value's shape (odd, rank 0, a -1
// batch; the value's dtype and contents do not matter), by a constant step (0, odd,
// negative, INT32_MAX) or by a step computed at run time (an i32 sum), seeds and op
// keys drawn; each such value is fetched and compared with the reference's bits exactly
// (Drawer::MarkBitExact). Dropout of float values and noise added to them are drawn as
// well (compared at the usual tolerance, as their arithmetic is).
// random_program.cc's Generator calls DrawRandomOp through the Drawer interface
// (random_program_internal.h), from a random stream of its own.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "braze/ops.h"
#include "tools/fuzz/random_program_internal.h"

namespace braze {
namespace fuzz {
namespace internal {
namespace {

constexpr int64_t kMaxElements = 50000;  // a dynamic dim counted as 40

int64_t Elements(const Shape& s) {
  int64_t n = 1;
  for (int64_t d : s) n *= d < 0 ? 40 : d;
  return n;
}

template <typename T>
T PickOf(Drawer& d, const std::vector<T>& from) {
  return from[d.Uniform(static_cast<int>(from.size()))];
}

// The step: a constant, or (30%) the wrapping i32 sum of an earlier i32 value, read at
// run time. `operands` gets the value it reads, if any; `code` its C++ spelling.
struct Step {
  int value = -1;  // an operand index in the op's operand list, or -1 for a constant
  int32_t constant = 0;
  std::string code;
};
Step DrawStep(Drawer& d, std::vector<int>* operands) {
  Step s;
  if (d.Chance(0.3)) {
    const int v = d.Pick([](const Tensor& t) { return t.dtype() == DType::kI32; });
    if (v >= 0) {
      operands->push_back(v);
      s.value = static_cast<int>(operands->size()) - 1;
      s.code = absl::StrCat("Sum($", s.value, ")");
      return s;
    }
  }
  s.constant = PickOf<int32_t>(d, {0, 1, 7, -3, 123456, 2147483647});
  s.code = absl::StrCat("ScalarConst(g, ", s.constant, ", DType::kI32)");
  return s;
}
Tensor BuildStep(Graph& g, const Step& s, const std::vector<Tensor>& v) {
  return s.value >= 0 ? Sum(v[s.value]) : ScalarConst(g, s.constant, DType::kI32);
}

// A raw draw: its bits are checked exactly.
bool DrawRandomValue(Drawer& d) {
  const bool dynamic = d.Chance(0.4);
  int like = -1;
  if (dynamic) like = d.Pick([](const Tensor& t) { return t.rank() >= 1 && t.shape()[0] < 0; });
  if (like < 0) like = d.Pick([](const Tensor&) { return true; });
  if (like < 0 || Elements(d.value(like).shape()) > kMaxElements) return false;
  std::vector<int> operands = {like};
  const Step step = DrawStep(d, &operands);
  const uint64_t seed = PickOf<uint64_t>(d, {0, 1, 42, 0xFFFFFFFFFFFFFFFFull, 1234567890123ull});
  const int kind = d.Uniform(3);      // 0: uniform f32, 1: uniform f64, 2: normal
  const bool pinned = d.Chance(0.2);  // an explicit op key instead of the node name's
  const uint64_t key = static_cast<uint64_t>(d.Uniform(1000)) * 0x9E3779B97F4A7C15ull;
  const std::string key_code = pinned ? absl::StrCat(", ", key, "ull") : "";
  std::string code;
  if (kind == 2) {
    code = absl::StrCat("RandomNormal($0, ", step.code, ", ", seed, "ull", key_code, ")");
  } else {
    code = absl::StrCat("RandomUniform($0, ", step.code, ", ", seed, "ull, ",
                        kind == 1 ? "DType::kF64" : "DType::kF32", key_code, ")");
  }
  const int v = d.Push(
      operands,
      [=](Graph& g, const std::vector<Tensor>& in) {
        const Tensor s = BuildStep(g, step, in);
        const std::optional<uint64_t> k = pinned ? std::optional<uint64_t>(key) : std::nullopt;
        if (kind == 2) return RandomNormal(in[0], s, seed, k);
        return RandomUniform(in[0], s, seed, kind == 1 ? DType::kF64 : DType::kF32, k);
      },
      code);
  d.MarkBitExact(v);
  return true;
}

// Dropout of a float value, or noise added to it.
bool DrawDropoutOrNoise(Drawer& d) {
  const int x = d.Pick([](const Tensor& t) { return IsFloating(t.dtype()); });
  if (x < 0 || Elements(d.value(x).shape()) > kMaxElements) return false;
  std::vector<int> operands = {x};
  const Step step = DrawStep(d, &operands);
  const uint64_t seed = static_cast<uint64_t>(d.Uniform(100));
  if (d.Chance(0.6)) {
    const double rate = PickOf<double>(d, {0, 0.1, 0.5, 0.9, 0.999});
    d.Push(
        operands,
        [=](Graph& g, const std::vector<Tensor>& in) {
          return Dropout(in[0], rate, BuildStep(g, step, in), seed);
        },
        absl::StrCat("Dropout($0, ", rate, ", ", step.code, ", ", seed, ")"));
    return true;
  }
  const double scale = PickOf<double>(d, {0.5, 0.1, 2});
  d.Push(
      operands,
      [=](Graph& g, const std::vector<Tensor>& in) {
        const Tensor n = RandomNormal(in[0], BuildStep(g, step, in), seed);
        return in[0] + (in[0].dtype() == DType::kF64 ? Cast(n, DType::kF64) : n) * scale;
      },
      absl::StrCat("$0 + Cast(RandomNormal($0, ", step.code, ", ", seed, "), $0.dtype()) * ",
                   scale));
  return true;
}

}  // namespace

bool DrawRandomOp(Drawer& d) { return d.Chance(0.5) ? DrawRandomValue(d) : DrawDropoutOrNoise(d); }

}  // namespace internal
}  // namespace fuzz
}  // namespace braze
