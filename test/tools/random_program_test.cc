// The fuzzer's program generator (tools/fuzz/random_program.h): programs stay small
// enough to run, broadcasts included.
#include "tools/fuzz/random_program.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "braze/graph.h"

namespace braze {
namespace fuzz {
namespace {

// Seed 11201698 (--max_ops=32 --dynamic=0.3 --specials=0.5) once paired a [40005, 1]
// value with a [40005] one in a Select: a 1.6e9-element outer product whose reference
// run the kernel's out-of-memory killer ended at 23 GiB. No value of these seeds, or of
// their neighbours, may exceed the generator's cap (50,000 elements, or the largest
// input: a broadcast partner never grows a value past that).
TEST(RandomProgram, BroadcastsStaySmall) {
  GenerateOptions options;
  options.max_ops = 32;
  options.dynamic_probability = 0.3;
  options.specials_probability = 0.5;
  for (uint64_t seed = 11201690; seed < 11201710; ++seed) {
    SCOPED_TRACE(seed);
    const Program program = GenerateProgram(seed, options);
    Graph g;
    auto built = BuildProgram(program, g);
    ASSERT_TRUE(built.ok()) << built.status();
    int64_t largest_input = 50000;
    for (const Tensor& p : built->placeholders) {
      Shape s = p.shape();
      for (auto& d : s) d = std::max<int64_t>(d, 1);
      largest_input = std::max(largest_input, NumElements(s));
    }
    for (const Tensor& t : built->fetches) {
      Shape s = t.shape();
      for (auto& d : s) d = std::max<int64_t>(d, 1);
      EXPECT_LE(NumElements(s), 4 * largest_input) << t.name();
    }
  }
}

}  // namespace
}  // namespace fuzz
}  // namespace braze
