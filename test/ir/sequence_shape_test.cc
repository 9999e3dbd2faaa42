// Shape inference of the sequence ops (Gather, UnsortedSegmentSum, Iota, Sin, Cos): their
// shapes, -1 dims carried through (a symbolic batch, a symbolic sequence length), and
// every bad attribute or operand an InvalidArgument naming the node (docs/BAD_INPUT.md).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <functional>

#include "braze/ops.h"

namespace braze {
namespace {

using ::testing::HasSubstr;

const DType f32 = DType::kF32;
const DType i32 = DType::kI32;

TEST(SequenceShapes, GatherSegmentSumIotaSinCos) {
  Graph g;
  Tensor table = Placeholder(g, f32, {29, 8});
  Tensor ids = Placeholder(g, i32, {-1, 7});
  EXPECT_EQ(Gather(table, ids).shape(), (Shape{-1, 7, 8}));
  EXPECT_EQ(Gather(table, ids, 1).shape(), (Shape{29, -1, 7}));
  EXPECT_EQ(Gather(table, ids, -1).shape(), (Shape{29, -1, 7}));
  EXPECT_EQ(Gather(table, Placeholder(g, i32, {})).shape(), (Shape{8}));
  Tensor dy = Placeholder(g, f32, {-1, 7, 8});
  EXPECT_EQ(UnsortedSegmentSum(dy, ids, 29).shape(), (Shape{29, 8}));
  Tensor x = Placeholder(g, f32, {3, -1, 7});
  // -1: the output's last axis, so the ids align with x's trailing dims.
  EXPECT_EQ(UnsortedSegmentSum(x, ids, 5, 1).shape(), (Shape{3, 5}));
  EXPECT_EQ(UnsortedSegmentSum(x, ids, 5, -1).shape(), (Shape{3, 5}));
  EXPECT_EQ(UnsortedSegmentSum(x, Placeholder(g, i32, {}), 4, 2).shape(), (Shape{3, -1, 4, 7}));
  EXPECT_EQ(Iota(x, 1).shape(), (Shape{-1}));
  EXPECT_EQ(Iota(x, -1, DType::kF64).dtype(), DType::kF64);
  EXPECT_EQ(Iota(x, -1).shape(), (Shape{7}));
  EXPECT_EQ(Sin(x).shape(), x.shape());
  EXPECT_EQ(Cos(Placeholder(g, DType::kF64, {2})).dtype(), DType::kF64);
  EXPECT_TRUE(g.status().ok()) << g.status();
}

struct ErrorCase {
  const char* name;
  std::function<void(Graph&)> build;
  const char* node;
  const char* message;
};
void PrintTo(const ErrorCase& c, std::ostream* os) { *os << c.name; }

class SequenceBuildErrors : public ::testing::TestWithParam<ErrorCase> {};

TEST_P(SequenceBuildErrors, NamesTheNode) {
  Graph g;
  GetParam().build(g);
  ASSERT_FALSE(g.status().ok());
  EXPECT_EQ(g.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(g.status().message()), HasSubstr(GetParam().node));
  EXPECT_THAT(std::string(g.status().message()), HasSubstr(GetParam().message));
}

INSTANTIATE_TEST_SUITE_P(
    All, SequenceBuildErrors,
    ::testing::Values(
        ErrorCase{"gather_axis",
                  [](Graph& g) {
                    Gather(Placeholder(g, f32, {3, 4}), Placeholder(g, i32, {2}), 2);
                  },
                  "'Gather'", "Gather axis 2 out of range"},
        ErrorCase{"gather_scalar_params",
                  [](Graph& g) { Gather(Placeholder(g, f32, {}), Placeholder(g, i32, {2})); },
                  "'Gather'", "out of range for params f32[]"},
        ErrorCase{"gather_float_indices",
                  [](Graph& g) { Gather(Placeholder(g, f32, {3}), Placeholder(g, f32, {2})); },
                  "'Gather'", "indices must be i32"},
        ErrorCase{"segment_ids_dtype",
                  [](Graph& g) {
                    UnsortedSegmentSum(Placeholder(g, f32, {3}), Placeholder(g, f32, {3}), 2);
                  },
                  "'UnsortedSegmentSum'", "segment_ids must be i32"},
        ErrorCase{"segment_ids_shape",
                  [](Graph& g) {
                    UnsortedSegmentSum(Placeholder(g, f32, {3, 4}), Placeholder(g, i32, {4}), 2);
                  },
                  "'UnsortedSegmentSum'", "do not match data"},
        ErrorCase{"segment_negative_count",
                  [](Graph& g) {
                    UnsortedSegmentSum(Placeholder(g, f32, {3}), Placeholder(g, i32, {3}), -1);
                  },
                  "'UnsortedSegmentSum'", "num_segments must be >= 0"},
        ErrorCase{"segment_axis",
                  [](Graph& g) {
                    UnsortedSegmentSum(Placeholder(g, f32, {3, 4}), Placeholder(g, i32, {4}), 2, 2);
                  },
                  "'UnsortedSegmentSum'", "does not fit data"},
        ErrorCase{"segment_bool_data",
                  [](Graph& g) {
                    UnsortedSegmentSum(Placeholder(g, DType::kBool, {3}), Placeholder(g, i32, {3}),
                                       2);
                  },
                  "'UnsortedSegmentSum'", "does not support dtype bool"},
        ErrorCase{"iota_axis",
                  [](Graph& g) {
                    Iota(Placeholder(g, f32, {3, 4}), 2);
                  },
                  "'Iota'", "Iota axis 2 out of range"},
        ErrorCase{"iota_bool", [](Graph& g) { Iota(Placeholder(g, f32, {3}), 0, DType::kBool); },
                  "'Iota'", "Iota does not support dtype bool"},
        ErrorCase{"sin_int", [](Graph& g) { Sin(Placeholder(g, i32, {3})); }, "'Sin'",
                  "Sin does not support dtype i32"},
        ErrorCase{"cos_bool", [](Graph& g) { Cos(Placeholder(g, DType::kBool, {3})); }, "'Cos'",
                  "Cos does not support dtype bool"}),
    [](const ::testing::TestParamInfo<ErrorCase>& info) { return info.param.name; });

}  // namespace
}  // namespace braze
