// Random programs, drawn: the Generator picks each op, its operands and attributes from a
// seeded stream, building it in a scratch graph as it goes (an op the graph rejects is
// drawn again). random_program.h says what a program holds; random_program_build.cc
// builds a drawn program into a graph, makes its feeds and prints it as C++.
#include "tools/fuzz/random_program.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>

#include "absl/strings/str_cat.h"
#include "braze/ops.h"
#include "tools/fuzz/random_program_generator.h"

namespace braze {
namespace fuzz {

using internal::Generator;

GenerateOptions AllFamilies() {
  GenerateOptions o;
  o.max_ops = 24;
  o.window_probability = 0.3;
  o.gemm_probability = 0.05;
  o.sequence_probability = o.random_probability = o.attention_probability = 1;
  o.float16_probability = o.control_flow_probability = o.edges_probability = 1;
  o.dynamic_dims_probability = 0.3;
  o.family_share = 1.0 / 3;
  return o;
}

Program GenerateProgram(uint64_t seed, const GenerateOptions& options) {
  for (uint64_t attempt = 0;; ++attempt) {
    Generator gen(seed * 7919 + attempt, options);
    if (gen.Generate() || attempt >= 50) {
      Program p = gen.Take();
      p.seed = seed;
      std::mt19937_64 rng(seed * 104729 + 17);
      for (ProgramInput& in : p.inputs) {
        const double u = std::uniform_real_distribution<double>(0, 1)(rng);
        // Grid values stay on the grid (a subnormal would make their sums inexact).
        in.specials = IsFloating(in.dtype) && u < options.specials_probability && !in.grid;
      }
      return p;
    }
  }
}

}  // namespace fuzz
}  // namespace braze
