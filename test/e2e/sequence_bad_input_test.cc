// Bad input to the sequence ops (rows of docs/BAD_INPUT.md): an out-of-range index is
// data, not a shape, so it cannot be a build error and a compiled kernel has no Status
// to return for it; Braze's rule is the same answer everywhere: Gather reads zeros and
// UnsortedSegmentSum drops the slice, in the reference, fused and strict sessions alike,
// and never a read outside the table. Shapes that disagree at run time name the node.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <limits>
#include <vector>

#include "braze/gradients.h"
#include "braze/jit_scope.h"
#include "braze/ops.h"
#include "braze/session.h"

namespace braze {
namespace {

using ::testing::HasSubstr;

std::vector<SessionOptions> AllModes() {
  SessionOptions reference, fused, strict;
  reference.reference_only = true;
  strict.strict = true;
  return {reference, fused, strict};
}

TEST(SequenceBadInput, OutOfRangeIdsReadZerosAndAreDroppedInEveryMode) {
  Graph g;
  Tensor table = Placeholder(g, DType::kF32, {5, 3}, "table");
  Tensor ids = Placeholder(g, DType::kI32, {-1}, "ids");
  Tensor y, s, dtable;
  {
    JitScope scope(g);
    y = Gather(table * 2.0, ids) + 1.0;
    s = UnsortedSegmentSum(Reshape(Gather(table, ids), {-1, 3}) * 3.0, ids, 5);
    auto grads = Gradients({Sum(Square(y))}, {table});
    ASSERT_TRUE(grads.ok()) << grads.status();
    dtable = (*grads)[0];
  }
  const int32_t kMax = std::numeric_limits<int32_t>::max();
  const int32_t kMin = std::numeric_limits<int32_t>::min();
  const HostTensor id_values = HostTensor::Vector<int32_t>({4, -1, 5, kMax, kMin, 0, 4});
  const HostTensor table_values = HostTensor::RandomUniform(DType::kF32, {5, 3}, 1, 1, 2);
  std::vector<std::vector<HostTensor>> results;
  for (const SessionOptions& o : AllModes()) {
    Session session(g, o);
    auto r = session.Run({{table, table_values}, {ids, id_values}}, {y, s, dtable});
    ASSERT_TRUE(r.ok()) << r.status();
    // Rows 1 to 4 of y are out of range: 0 * 2 + 1.
    for (int row = 1; row <= 4; ++row) {
      for (int c = 0; c < 3; ++c) EXPECT_EQ((*r)[0].GetDouble(row * 3 + c), 1.0) << row;
    }
    results.push_back(*std::move(r));
  }
  for (size_t m = 1; m < results.size(); ++m) {
    for (size_t k = 0; k < results[0].size(); ++k) {
      std::string why;
      EXPECT_TRUE(AllClose(results[m][k], results[0][k], 1e-6, 1e-6, &why)) << m << " " << k << why;
    }
  }
  // Row 4 of the table appears twice: its gradient is twice a row's; rows 1-3 none.
  const HostTensor& d = results[0][2];
  for (int c = 0; c < 3; ++c) {
    EXPECT_EQ(d.GetDouble(3 + c), 0);
    const double row4 = 2 * (2 * table_values.GetDouble(12 + c) + 1) * 2;
    EXPECT_NEAR(d.GetDouble(12 + c), 2 * row4, 1e-4);
  }
}

TEST(SequenceBadInput, SegmentIdsThatDisagreeWithTheDataAtRunTimeNameTheNode) {
  Graph g;
  Tensor data = Placeholder(g, DType::kF32, {-1, 3}, "data");
  Tensor ids = Placeholder(g, DType::kI32, {-1}, "ids");
  Tensor s;
  {
    JitScope scope(g);
    s = UnsortedSegmentSum(data * 2.0, ids, 4);
  }
  for (const SessionOptions& o : AllModes()) {
    Session session(g, o);
    auto r = session.Run(
        {{data, HostTensor(DType::kF32, {4, 3})}, {ids, HostTensor::Vector<int32_t>({0, 1, 2})}},
        {s});
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(r.status().message()), HasSubstr("node 'UnsortedSegmentSum'"));
  }
}

}  // namespace
}  // namespace braze
