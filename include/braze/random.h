// Counter-based random numbers (docs/RANDOM.md): the Philox-4x32-10 block function and
// how Braze's random ops key it. Host code, no Halide: the reference kernels, the
// lowering (which bakes the derived key into a kernel as constants) and tests share it.
//
// An element's bits are Philox4x32_10(counter, key) with
//   key     = RandomKey(seed, op_key)
//   counter = {index lo, index hi, step lo, step hi}
// where index is the element's row-major flat index in the op's output and step the
// value of the op's `step` input (an i32 step is sign-extended to 64 bits).
#ifndef BRAZE_RANDOM_H_
#define BRAZE_RANDOM_H_

#include <array>
#include <cstdint>
#include <string_view>

namespace braze {

using PhiloxCounter = std::array<uint32_t, 4>;
using PhiloxKey = std::array<uint32_t, 2>;

// Philox-4x32 with 10 rounds (Salmon et al., "Parallel random numbers: as easy as 1, 2,
// 3", SC 2011), the Random123 library's philox4x32_10: bit for bit its known answers.
PhiloxCounter Philox4x32_10(PhiloxCounter counter, PhiloxKey key);

// The 64-bit Philox key of a random op: the first two words of
// Philox4x32_10({op_key lo, op_key hi, 0, 0}, {seed lo, seed hi}). For one seed, two op
// keys give two different 128-bit blocks (a block function is a bijection of counters),
// so two ops' keys collide only by a 64-bit chance; the seed and the op key never mix
// linearly (seed 1 with op 0 is not seed 0 with op 1).
PhiloxKey RandomKey(uint64_t seed, uint64_t op_key);

// The default op key of a random op named `name`: FNV-1a 64 of the name's bytes, stable
// across processes, builds and platforms (the graph's names are: "RandomUniform_2",
// "dropout/RandomUniform").
uint64_t RandomOpKeyOf(std::string_view name);

}  // namespace braze

#endif  // BRAZE_RANDOM_H_
