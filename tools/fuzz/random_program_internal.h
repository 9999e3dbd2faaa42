// What the two halves of the random-program code share (random_program.h is their public
// face): random_program.cc draws programs (the Generator), random_program_build.cc builds
// them into graphs, makes their feeds and prints them as C++. An op drawn by the one is
// built by the other, so its constants' values and its C++ spelling come from here.
#ifndef BRAZE_TOOLS_FUZZ_RANDOM_PROGRAM_INTERNAL_H_
#define BRAZE_TOOLS_FUZZ_RANDOM_PROGRAM_INTERNAL_H_

#include <cstdint>
#include <string>
#include <vector>

#include "braze/dtype.h"
#include "braze/host_tensor.h"

namespace braze {
namespace fuzz {
namespace internal {

// C++ spellings for ProgramOp::code and ProgramToCpp: "{1, 2, 3}", "DType::kF32".
std::string Ints(const std::vector<int64_t>& v);
std::string Ints(const std::vector<int>& v);
std::string DTypeCode(DType d);

// A constant's values (a drawn Const op's, by its seed), moved as BuildProgram's
// `perturb` asks while it builds the program (PerturbValues), else as drawn.
HostTensor ConstValues(DType dtype, const Shape& shape, uint64_t seed);

}  // namespace internal
}  // namespace fuzz
}  // namespace braze

#endif  // BRAZE_TOOLS_FUZZ_RANDOM_PROGRAM_INTERNAL_H_
