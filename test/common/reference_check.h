// Compares a compiled Run's fetches with the reference executor's on the same feeds.
#ifndef BRAZE_TEST_COMMON_REFERENCE_CHECK_H_
#define BRAZE_TEST_COMMON_REFERENCE_CHECK_H_

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "braze/session.h"

namespace braze {
namespace testing_util {

inline void ExpectMatchesReference(const Graph& g, const Feeds& feeds,
                                   const std::vector<Tensor>& fetches,
                                   const std::vector<HostTensor>& got, double rtol = 1e-4,
                                   double atol = 1e-5) {
  SessionOptions ref_opts;
  ref_opts.reference_only = true;
  Session ref(g, ref_opts);
  auto want = ref.Run(feeds, fetches);
  ASSERT_TRUE(want.ok()) << want.status();
  ASSERT_EQ(want->size(), got.size());
  for (size_t i = 0; i < got.size(); ++i) {
    std::string why;
    EXPECT_TRUE(AllClose(got[i], (*want)[i], rtol, atol, &why))
        << "fetch " << i << " (" << fetches[i].name() << "): " << why;
  }
}

}  // namespace testing_util
}  // namespace braze

#endif  // BRAZE_TEST_COMMON_REFERENCE_CHECK_H_
