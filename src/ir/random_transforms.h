// The constants of the transforms from Philox words to uniform and normal numbers
// (docs/RANDOM.md), shared by the reference kernels (src/reference/random.cc) and the
// Halide lowering (src/lower/philox.cc), which must compute the same bits.
#ifndef BRAZE_IR_RANDOM_TRANSFORMS_H_
#define BRAZE_IR_RANDOM_TRANSFORMS_H_

#include <cstdint>

namespace braze {
namespace random_transforms {

// u1 = ((x0 >> 1) + 1) 2^-31 = f 2^(e - 31) with f's 24-bit significand `mant` (m's top
// bits); f in [sqrt(2), 2) is halved: mant > kSqrt2Mant (sqrt(2) 2^23 = 11863283.2).
inline constexpr uint32_t kSqrt2Mant = 11863283u;
// ln 2 split so that k * kLn2Hi is exact in f64 for 0 <= k < 2^8 (45 significant bits)
// and k * kLn2Lo is exact too (an f32).
inline constexpr double kLn2Hi = 0x1.62e42fefa39p-1;
inline constexpr float kLn2Lo = static_cast<float>(0.69314718055994530942 - kLn2Hi);
// ln f = 2 s P(s^2), s = (f - 1) / (f + 1), P's coefficients 1 / (2k + 1), k = 0..5
// (|s| <= 0.1716: the first term left out is below 5e-11 of the sum).
inline constexpr int kLogTerms = 6;
inline constexpr float kLogCoeffs[kLogTerms] = {1.0f,        1.0f / 3.0f, 1.0f / 5.0f,
                                                1.0f / 7.0f, 1.0f / 9.0f, 1.0f / 11.0f};
// sin(pi g / 4) = g S(g^2) and cos(pi g / 4) = C(g^2) for g in (0, 1): Taylor
// coefficients (pi/4)^(2k+1) / (2k+1)! and (pi/4)^(2k) / (2k)!, signs alternating, as
// f32 (the first terms left out are below 1e-11 and 5e-13).
inline constexpr int kSinTerms = 6;
inline constexpr float kSinCoeffs[kSinTerms] = {0.7853981633974483f,   -0.08074551218828077f,
                                                0.00249039457019272f,  -3.657620418217724e-05f,
                                                3.13361689037812e-07f, -1.7572476734434003e-09f};
inline constexpr int kCosTerms = 7;
inline constexpr float kCosCoeffs[kCosTerms] = {1.0f,
                                                -0.30842513753404244f,
                                                0.0158543442438155f,
                                                -0.00032599188692738996f,
                                                3.590860448591509e-06f,
                                                -2.461136950494199e-08f,
                                                1.1501159127974046e-10f};

}  // namespace random_transforms
}  // namespace braze

#endif  // BRAZE_IR_RANDOM_TRANSFORMS_H_
