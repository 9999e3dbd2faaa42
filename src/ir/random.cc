// Philox-4x32-10 on the host and the keying of Braze's random ops (braze/random.h).
#include "braze/random.h"

namespace braze {
namespace {

// The multipliers and Weyl key increments of Philox-4x32 (Random123's
// PHILOX_M4x32_0/1 and PHILOX_W32_0/1).
constexpr uint32_t kM0 = 0xD2511F53u;
constexpr uint32_t kM1 = 0xCD9E8D57u;
constexpr uint32_t kW0 = 0x9E3779B9u;
constexpr uint32_t kW1 = 0xBB67AE85u;

PhiloxCounter Round(const PhiloxCounter& c, const PhiloxKey& k) {
  const uint64_t p0 = static_cast<uint64_t>(kM0) * c[0];
  const uint64_t p1 = static_cast<uint64_t>(kM1) * c[2];
  const uint32_t hi0 = static_cast<uint32_t>(p0 >> 32);
  const uint32_t lo0 = static_cast<uint32_t>(p0);
  const uint32_t hi1 = static_cast<uint32_t>(p1 >> 32);
  const uint32_t lo1 = static_cast<uint32_t>(p1);
  return {hi1 ^ c[1] ^ k[0], lo1, hi0 ^ c[3] ^ k[1], lo0};
}

}  // namespace

PhiloxCounter Philox4x32_10(PhiloxCounter counter, PhiloxKey key) {
  for (int r = 0; r < 10; ++r) {
    if (r > 0) key = {key[0] + kW0, key[1] + kW1};
    counter = Round(counter, key);
  }
  return counter;
}

PhiloxKey RandomKey(uint64_t seed, uint64_t op_key) {
  const PhiloxCounter block =
      Philox4x32_10({static_cast<uint32_t>(op_key), static_cast<uint32_t>(op_key >> 32), 0, 0},
                    {static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32)});
  return {block[0], block[1]};
}

uint64_t RandomOpKeyOf(std::string_view name) {
  uint64_t h = 0xCBF29CE484222325ull;  // FNV-1a 64's offset basis and prime
  for (const char c : name) {
    h ^= static_cast<unsigned char>(c);
    h *= 0x100000001B3ull;
  }
  return h;
}

}  // namespace braze
