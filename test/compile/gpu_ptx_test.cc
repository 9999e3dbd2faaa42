// The CUDA path checked without a GPU: for every op with a Halide lowering and every
// composite, generate CUDA code with Braze's GPU heuristic, assemble the PTX with ptxas
// for sm_90, and check what can be checked statically: it assembles; elementwise and
// row-reduction kernels do not spill; row reductions are cooperative (shared memory and
// barriers, not a thread per row); every Func runs on the GPU; fused clusters are as few
// kernels as expected (a softmax is one). Li2018 runs on a few pipelines for comparison.
//
// Register counts are printed as a markdown table at the end (bench/CUDA_PTX.md).
// Without ptxas the code is still generated and checked; the ptxas part is skipped.
#include <unistd.h>

#include <functional>
#include <iostream>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "braze/ops.h"
#include "compile/cuda_codegen.h"
#include "compile/ptx_registers.h"
#include "gtest/gtest.h"
#include "lower/lower_test_util.h"
#include "passes/mark_for_compilation.h"
#include "schedule/lowered_check.h"

namespace braze {
namespace lowertest {
namespace {

// What a case's kernels must satisfy beyond assembling.
enum class Check {
  kElementwise,   // no spills
  kRowReduction,  // no spills, cooperative (shared memory, bar.sync)
  kSerial,        // no spills, reductions a thread per output (the serial plan)
  kAssembles,     // matmuls, column and full reductions: assembling is enough
};

struct GpuCase {
  std::string name;
  std::function<void(Case&)> build;
  Check check = Check::kElementwise;
  int max_kernels = 0;  // > 0: the cluster compiles to at most this many kernels
  Scheduler scheduler = Scheduler::kGpuFused;
  bool no_ftz = false;  // no flush-to-zero instruction at all (see GeneratesAndAssembles)
};

void PrintTo(const GpuCase& c, std::ostream* os) { *os << c.name; }

const Shape kOdd3d{17, 33, 65};
const Shape kTiny{7, 3};
const Shape kRows{256, 1024};
const Shape kColumns{1024, 33};

std::string ShapeName(const Shape& s) {
  std::vector<std::string> dims;
  for (int64_t d : s) dims.push_back(std::to_string(d));
  return absl::StrJoin(dims, "x");
}

GpuCase Unary(const std::string& name, Tensor (*fn)(Tensor), DType dtype = DType::kF32) {
  return {name, [=](Case& c) { c.outputs = {fn(c.Input(dtype, kOdd3d, 1, 0.1, 2))}; }};
}

// x op row, broadcasting the last dim.
GpuCase Binary(const std::string& name, Tensor (*fn)(Tensor, Tensor), DType dtype = DType::kF32) {
  return {name, [=](Case& c) {
            c.outputs = {fn(c.Input(dtype, kOdd3d, 2, 0.1, 2), c.Input(dtype, {65}, 3, 0.1, 2))};
          }};
}

// A reduction over the last axis at `shape`, or over the first axis and over every axis
// (column and full: two stages) when `columns`.
GpuCase Reduce(const std::string& name, Tensor (*fn)(Tensor, std::vector<int>, bool),
               const Shape& shape, bool columns, DType dtype = DType::kF32) {
  if (columns) {
    return {name + "_" + ShapeName(shape) + "_ColumnAndFull",
            [=](Case& c) {
              Tensor x = c.Input(dtype, shape, 4);
              c.outputs = {fn(x, {0}, false), fn(x, {}, false)};
            },
            Check::kAssembles, 4};
  }
  return {name + "_" + ShapeName(shape) + "_Rows",
          [=](Case& c) { c.outputs = {fn(c.Input(dtype, shape, 5), {-1}, true)}; },
          Check::kRowReduction, 1};
}

// The cases for one op; empty for ops without a Halide lowering. A switch with no
// default: a new op fails to compile here until it has a GPU case.
// An attention op at odd sizes, causal with Tq != Tk (its PTX and OpenCL runs are
// test/compile/attention_ptx_test.cc's and test/lower/attention_test.cc's).
GpuCase AttentionCase(OpKind op) {
  return {absl::StrCat(OpName(op), "_Causal_2x3x17x11x33"),
          [op](Case& c) {
            const DType f32 = DType::kF32;
            Tensor q = c.Input(f32, {2, 3, 17, 33}, 60), k = c.Input(f32, {2, 3, 11, 33}, 61);
            Tensor v = c.Input(f32, {2, 3, 11, 33}, 62);
            AttentionAttrs a;
            a.causal = true;
            a.scale = 0.17;
            if (op == OpKind::kAttention) {
              c.outputs = {Attention(q, k, v, a)};
            } else if (op == OpKind::kAttentionLogSumExp) {
              c.outputs = {AttentionLogSumExp(q, k, a)};
            } else {
              c.outputs = {AttentionGrad(op, q, k, v, c.Input(f32, {2, 3, 17, 33}, 63),
                                         c.Input(f32, {2, 3, 17}, 64), c.Input(f32, {2, 3, 17}, 65),
                                         a)};
            }
          },
          Check::kAssembles, 1};
}

std::vector<GpuCase> OpCases(OpKind op) {
  const DType f32 = DType::kF32;
  switch (op) {
    case OpKind::kPlaceholder:
    case OpKind::kVariable:
    case OpKind::kAssign:
    case OpKind::kAssignAdd:
    case OpKind::kAssignSub:
    case OpKind::kAllReduce:  // dp (issue 37): collective steps, never compiled
    case OpKind::kBroadcast:
    case OpKind::kAllGather:
    case OpKind::kCond:  // cf (issue 40): control-flow steps, never compiled
    case OpKind::kWhile:
    case OpKind::kScan:
    case OpKind::kHostCall:
      return {};
    case OpKind::kConst:
      return {{"Const", [](Case& c) {
                 Tensor k = Const(*c.graph, HostTensor::RandomUniform(DType::kF32, kTiny, 6));
                 c.outputs = {c.Input(DType::kF32, kTiny, 7) * k + 2.0};
               }}};
    case OpKind::kNeg:
      return {Unary("Neg", Neg)};
    case OpKind::kAbs:
      return {Unary("Abs", Abs)};
    case OpKind::kExp:
      return {Unary("Exp", Exp), Unary("ExpF64", Exp, DType::kF64)};
    case OpKind::kLog:
      return {Unary("Log", Log), Unary("LogF64", Log, DType::kF64)};
    case OpKind::kSqrt:
      return {Unary("Sqrt", Sqrt)};
    case OpKind::kRsqrt:
      return {Unary("Rsqrt", Rsqrt)};
    case OpKind::kTanh:
      return {Unary("Tanh", Tanh), Unary("TanhF64", Tanh, DType::kF64)};
    case OpKind::kSigmoid:
      return {Unary("Sigmoid", Sigmoid), Unary("SigmoidF64", Sigmoid, DType::kF64)};
    case OpKind::kRelu:
      return {Unary("Relu", Relu)};
    case OpKind::kSquare:
      return {Unary("SquareI32", Square, DType::kI32)};
    case OpKind::kReciprocal:
      return {Unary("Reciprocal", Reciprocal)};
    case OpKind::kSign:
      return {Unary("Sign", Sign)};
    case OpKind::kFloor: {
      GpuCase floor = Unary("Floor", Floor);
      floor.no_ftz = true;  // its cvt.rmi.ftz.f32 would make Floor(-1e-40) -0, not -1
      return {floor};
    }
    case OpKind::kErf:
      return {Unary("Erf", Erf), Unary("ErfF64", Erf, DType::kF64)};
    case OpKind::kSin:
      return {Unary("Sin", Sin), Unary("SinF64", Sin, DType::kF64)};
    case OpKind::kCos:
      return {Unary("Cos", Cos), Unary("CosF64", Cos, DType::kF64)};
    case OpKind::kStopGradient:
      return {Unary("StopGradient", StopGradient)};
    case OpKind::kCast:
      return {{"CastF32ToI32",
               [](Case& c) {
                 c.outputs = {Cast(c.Input(DType::kF32, kOdd3d, 8, -50, 50), DType::kI32)};
               }},
              {"CastF32ToBool", [](Case& c) {
                 c.outputs = {
                     Cast(Cast(c.Input(DType::kF32, kOdd3d, 9, -1, 1), DType::kBool), DType::kI32)};
               }}};
    case OpKind::kAdd:
      return {Binary("Add", Add)};
    case OpKind::kSub:
      return {Binary("Sub", Sub)};
    case OpKind::kMul:
      return {Binary("MulI32", Mul, DType::kI32)};
    case OpKind::kDiv:
      return {Binary("Div", Div), Binary("DivI32", Div, DType::kI32)};
    case OpKind::kMaximum:
      return {Binary("Maximum", Maximum)};
    case OpKind::kMinimum:
      return {Binary("Minimum", Minimum)};
    case OpKind::kPow:
      // f32 too is libdevice's f64 pow (__nv_powf's FTZ branch reads subnormal bases as
      // 0); its PTX keeps one rcp.approx.ftz, a first guess that it refines in f64.
      return {Binary("Pow", Pow), Binary("PowF64", Pow, DType::kF64)};
    case OpKind::kGreater:
      return {Binary("Greater", Greater)};
    case OpKind::kLess:
      return {Binary("Less", Less)};
    case OpKind::kEqual:
      return {Binary("EqualI32", Equal, DType::kI32)};
    case OpKind::kSelect:
      return {{"Select", [](Case& c) {
                 Tensor cond = c.Input(DType::kBool, kOdd3d, 9);
                 c.outputs = {Select(cond, c.Input(DType::kF32, kOdd3d, 10),
                                     c.Input(DType::kF32, {65}, 11))};
               }}};
    case OpKind::kSum:
      return {Reduce("Sum", Sum, kRows, false), Reduce("Sum", Sum, kTiny, false),
              Reduce("Sum", Sum, kColumns, true)};
    case OpKind::kMean:
      return {Reduce("Mean", Mean, kRows, false), Reduce("Mean", Mean, kColumns, true)};
    case OpKind::kMax:
      return {Reduce("Max", Max, kRows, false), Reduce("Max", Max, kTiny, false),
              Reduce("Max", Max, kColumns, true)};
    case OpKind::kMin:
      return {Reduce("MinI32", Min, kRows, false, DType::kI32), Reduce("Min", Min, kColumns, true),
              Reduce("MinF64", Min, kColumns, true, DType::kF64)};
    case OpKind::kSumToShapeOf:  // a column sum (like [1, 33]) and a leading-dim sum
      return {{"SumToShapeOf_1024x33_Columns",
               [](Case& c) {
                 c.outputs = {SumToShapeOf(c.Input(f32, kColumns, 16), c.Input(f32, {1, 33}, 17))};
               },
               Check::kAssembles},
              {"SumToShapeOf_256x1024_Leading",
               [](Case& c) {
                 c.outputs = {SumToShapeOf(c.Input(f32, kRows, 18), c.Input(f32, {1024}, 19))};
               },
               Check::kAssembles}};
    case OpKind::kArgMax:
      return {{"ArgMax_256x1024_Rows",
               [](Case& c) { c.outputs = {ArgMax(c.Input(f32, kRows, 12), -1)}; },
               Check::kRowReduction, 1},
              {"ArgMax_1024x33_Columns",
               [](Case& c) { c.outputs = {ArgMax(c.Input(f32, kColumns, 13), 0)}; },
               Check::kAssembles, 4}};  // max partials, max, index partials, index
    case OpKind::kMatMul:
      return {
          {"MatMul_64x96x80",
           [](Case& c) {
             c.outputs = {MatMul(c.Input(f32, {64, 96}, 14), c.Input(f32, {96, 80}, 15))};
           },
           Check::kAssembles, 1},
          {"MatMulTransposed_7x3x5",
           [](Case& c) {
             c.outputs = {MatMul(c.Input(f32, {3, 7}, 16), c.Input(f32, {5, 3}, 17), true, true)};
           },
           Check::kAssembles, 1}};
    case OpKind::kBatchMatMul:
      return {{"BatchMatMul_2x17x33x65",
               [](Case& c) {
                 c.outputs = {
                     BatchMatMul(c.Input(f32, {2, 17, 33}, 18), c.Input(f32, {2, 33, 65}, 19))};
               },
               Check::kAssembles, 1}};
    case OpKind::kReshape:
      return {{"Reshape", [](Case& c) {
                 c.outputs = {Reshape(c.Input(f32, kOdd3d, 20), {65, 33, 17})};
               }}};
    case OpKind::kTranspose:
      return {{"Transpose", [](Case& c) {
                 c.outputs = {Transpose(c.Input(f32, kOdd3d, 21), {2, 0, 1})};
               }}};
    case OpKind::kBroadcastTo:
      return {{"BroadcastTo", [](Case& c) {
                 c.outputs = {BroadcastTo(c.Input(f32, {33, 1}, 22), {17, 33, 65})};
               }}};
    case OpKind::kConcat:
      return {{"Concat", [](Case& c) {
                 c.outputs = {Concat({c.Input(f32, kOdd3d, 23), c.Input(f32, kOdd3d, 24)}, 2)};
               }}};
    case OpKind::kSlice:
      return {{"Slice", [](Case& c) {
                 c.outputs = {Slice(c.Input(f32, kOdd3d, 25), {1, 2, 3}, {15, -1, 60})};
               }}};
    case OpKind::kPad:
      return {{"Pad", [](Case& c) {
                 c.outputs = {Pad(c.Input(f32, kOdd3d, 26), {{1, 2}, {0, 0}, {3, 0}}, 1.5)};
               }}};
    case OpKind::kOneHot:
      return {{"OneHot", [](Case& c) {
                 c.outputs = {OneHot(c.Input(DType::kI32, {7, 3}, 27, -1, 6), 5)};
               }}};
    // An embedding lookup (an odd vocabulary, ids out of range at both ends) fused with
    // its neighbours, its gradient (each segment walks the ids in order: a thread per
    // output) and a causal mask from positions.
    case OpKind::kGather:
      return {{"Gather_Embedding", [](Case& c) {
                 Tensor table = c.Input(f32, {67, 33}, 40);
                 Tensor ids = c.Input(DType::kI32, {5, 7}, 41, -1, 68);
                 c.outputs = {Gather(table * 2.0, ids) + 1.0};
               }}};
    case OpKind::kUnsortedSegmentSum:
      return {{"UnsortedSegmentSum_EmbeddingGrad",
               [](Case& c) {
                 Tensor dy = c.Input(f32, {5, 7, 33}, 42);
                 Tensor ids = c.Input(DType::kI32, {5, 7}, 43, -1, 68);
                 c.outputs = {UnsortedSegmentSum(dy * 0.5, ids, 67)};
               },
               Check::kAssembles}};
    case OpKind::kIota:
      return {{"Iota_CausalMask", [](Case& c) {
                 Tensor scores = c.Input(f32, {3, 33, 33}, 44);
                 Tensor pos = Iota(scores, 1);
                 Tensor mask = Less(Reshape(pos, {-1, 1}), Reshape(pos, {1, -1}));
                 c.outputs = {Select(mask, ScalarConst(*c.graph, -1e9), scores)};
               }}};
    // Random numbers: a dropout and an additive noise on odd shapes (more checks of
    // their PTX in random_ptx_test.cc).
    case OpKind::kRandomUniform:
      return {{"RandomUniform_Dropout", [](Case& c) {
                 Tensor step = c.Input(HostTensor::Scalar<int32_t>(5));
                 c.outputs = {Dropout(c.Input(f32, kOdd3d, 45), 0.25, step, 7)};
               }}};
    case OpKind::kRandomNormal:
      return {{"RandomNormal_Noise", [](Case& c) {
                 Tensor x = c.Input(f32, kOdd3d, 46);
                 Tensor step = c.Input(HostTensor::Scalar<int32_t>(5));
                 c.outputs = {x + RandomNormal(x, step, 9) * 0.1};
               }}};
    // The window ops at the CNN example's second layer (NHWC, 3x3 SAME, 32 -> 64
    // channels, a small batch) and odd NCHW shapes with strides, padding and groups.
    case OpKind::kConv2D:
      return {{"Conv2D_NHWC_2x14x14x32to64",
               [](Case& c) {
                 c.outputs = {Conv2D(c.Input(f32, {2, 14, 14, 32}, 28),
                                     c.Input(f32, {3, 3, 32, 64}, 29), {1, 1}, Padding::kSame)};
               },
               Check::kAssembles, 1},
              {"Conv2D_NCHW_Strided_Groups",
               [](Case& c) {
                 c.outputs = {Conv2D(c.Input(f32, {2, 4, 9, 7}, 30), c.Input(f32, {3, 2, 2, 6}, 31),
                                     {2, 1}, Padding::kSame, DataFormat::kNCHW, {1, 2})};
               },
               Check::kAssembles, 1}};
    case OpKind::kConv2DBackpropInput:
      return {{"Conv2DBackpropInput_NHWC_Strided",
               [](Case& c) {
                 Window2D w;
                 w.stride_h = w.stride_w = 2;
                 w.padding = Padding::kSame;
                 c.outputs = {Conv2DBackpropInput({2, 9, 8, 6}, c.Input(f32, {3, 3, 6, 5}, 32),
                                                  c.Input(f32, {2, 5, 4, 5}, 33), w)};
               },
               Check::kAssembles, 2}};  // the repacked filter, dx
    case OpKind::kConv2DBackpropFilter:
      return {{"Conv2DBackpropFilter_NHWC_16x14x14x32to64",
               [](Case& c) {
                 Window2D w;
                 w.padding = Padding::kSame;
                 c.outputs = {Conv2DBackpropFilter(c.Input(f32, {16, 14, 14, 32}, 34),
                                                   {3, 3, 32, 64},
                                                   c.Input(f32, {16, 14, 14, 64}, 35), w)};
               },
               Check::kAssembles, 2}};  // the partial sums, their sum
    case OpKind::kMaxPool:
      return {{"MaxPool_NHWC_2x2", [](Case& c) {
                 c.outputs = {MaxPool(c.Input(f32, {2, 28, 28, 32}, 36), {2, 2}, {2, 2})};
               }}};
    case OpKind::kAvgPool:
      return {{"AvgPool_NCHW_3x3Same",
               [](Case& c) {
                 c.outputs = {AvgPool(c.Input(f32, {2, 3, 11, 9}, 37), {3, 3}, {2, 2},
                                      Padding::kSame, DataFormat::kNCHW)};
               }},
              {"AvgPool_NHWC_Global",
               [](Case& c) {
                 c.outputs = {AvgPool(c.Input(f32, {2, 12, 10, 8}, 38), {12, 10}, {1, 1})};
               },
               Check::kAssembles, 2}};
    case OpKind::kMaxPoolGrad:
      return {{"MaxPoolGrad_NHWC_3x3Same",
               [](Case& c) {
                 Pool2DAttrs a;
                 a.size_h = a.size_w = 3;
                 a.window.stride_h = a.window.stride_w = 2;
                 a.window.padding = Padding::kSame;
                 c.outputs = {MaxPoolGrad(c.Input(f32, {2, 11, 9, 5}, 39),
                                          c.Input(f32, {2, 6, 5, 5}, 40), a)};
               },
               Check::kAssembles, 2}};  // the argmax, dx
    case OpKind::kMaxPoolGradGrad:
      return {{"MaxPoolGradGrad_NCHW_2x2",
               [](Case& c) {
                 Pool2DAttrs a;
                 a.size_h = a.size_w = 2;
                 a.window.stride_h = a.window.stride_w = 2;
                 a.window.format = DataFormat::kNCHW;
                 c.outputs = {MaxPoolGradGrad(c.Input(f32, {2, 3, 8, 6}, 41),
                                              c.Input(f32, {2, 3, 8, 6}, 42), a)};
               },
               Check::kAssembles, 2}};
    case OpKind::kAttention:
    case OpKind::kAttentionLogSumExp:
    case OpKind::kAttentionGradQ:
    case OpKind::kAttentionGradK:
    case OpKind::kAttentionGradV:
      return {AttentionCase(op)};
    case OpKind::kAvgPoolGrad:
      return {{"AvgPoolGrad_NHWC_3x3Same", [](Case& c) {
                 Pool2DAttrs a;
                 a.size_h = a.size_w = 3;
                 a.window.stride_h = a.window.stride_w = 2;
                 a.window.padding = Padding::kSame;
                 c.outputs = {AvgPoolGrad({2, 11, 9, 5}, c.Input(f32, {2, 6, 5, 5}, 43), a)};
               }}};
  }
  return {};
}

GpuCase RowComposite(const std::string& name, const Shape& shape,
                     std::function<Tensor(Case&, Tensor, const Shape&)> fn) {
  return {name + "_" + ShapeName(shape),
          [=](Case& c) { c.outputs = {fn(c, c.Input(DType::kF32, shape, 30, -2, 2), shape)}; },
          Check::kRowReduction, 1};
}

GpuCase DenseCase(const std::string& name, Activation activation) {
  return {name + "_256x512x128",
          [=](Case& c) {
            c.outputs = {Dense(c.Input(DType::kF32, {256, 512}, 31),
                               c.Input(DType::kF32, {512, 128}, 32),
                               c.Input(DType::kF32, {128}, 33), activation)};
          },
          Check::kAssembles, 2};
}

std::vector<GpuCase> CompositeCases() {
  const auto softmax = [](Case&, Tensor x, const Shape&) { return Softmax(x); };
  const auto log_softmax = [](Case&, Tensor x, const Shape&) { return LogSoftmax(x); };
  const auto cross_entropy = [](Case& c, Tensor x, const Shape& s) {
    return SoftmaxCrossEntropyWithLogits(x, Softmax(c.Input(DType::kF32, s, 34)));
  };
  const auto layer_norm = [](Case& c, Tensor x, const Shape& s) {
    return LayerNorm(x, c.Input(DType::kF32, {s.back()}, 35, 0.5, 1.5),
                     c.Input(DType::kF32, {s.back()}, 36));
  };
  std::vector<GpuCase> cases;
  for (const Shape& s : {kRows, kTiny}) {
    cases.push_back(RowComposite("Softmax", s, softmax));
    cases.push_back(RowComposite("LogSoftmax", s, log_softmax));
    cases.push_back(RowComposite("SoftmaxCrossEntropy", s, cross_entropy));
    cases.push_back(RowComposite("LayerNorm", s, layer_norm));
  }
  // Odd 3-D rows (rows fused over two dims, guarded tails everywhere).
  cases.push_back(RowComposite("Softmax", kOdd3d, softmax));
  // Over the outer axis: column reductions in kernels of their own, then pointwise.
  cases.push_back({"SoftmaxAxis0_1024x33",
                   [](Case& c) { c.outputs = {Softmax(c.Input(DType::kF32, kColumns, 41), 0)}; },
                   Check::kAssembles, 5});
  // A row reduction read by two outputs: its own cooperative kernel, then two pointwise.
  cases.push_back({"RowMaxTwoConsumers_256x1024",
                   [](Case& c) {
                     Tensor x = c.Input(DType::kF32, kRows, 42);
                     Tensor m = Max(x, {-1}, true);
                     c.outputs = {x - m, Exp(x - m)};
                   },
                   Check::kRowReduction, 3});
  cases.push_back({"Gelu_256x1024",
                   [](Case& c) { c.outputs = {Gelu(c.Input(DType::kF32, kRows, 37, -4, 4))}; }});
  cases.push_back(DenseCase("Dense", Activation::kNone));
  cases.push_back(DenseCase("DenseRelu", Activation::kRelu));
  cases.push_back(DenseCase("DenseGelu", Activation::kGelu));
  // Attention's shape: the softmax is an operand of the matmul, materialized once
  // rather than recomputed in the k loop: row max, row sum, softmax, matmul kernels.
  cases.push_back({"SoftmaxMatMul_128x256x64",
                   [](Case& c) {
                     c.outputs = {MatMul(Softmax(c.Input(DType::kF32, {128, 256}, 38)),
                                         c.Input(DType::kF32, {256, 64}, 39))};
                   },
                   Check::kAssembles, 4});
  // Few long rows: two stages, each stage spread over many blocks.
  cases.push_back({"Sum_4x65536_Rows",
                   [](Case& c) {
                     c.outputs = {Sum(c.Input(DType::kF32, {4, 65536}, 40), {-1})};
                   },
                   Check::kAssembles, 2});
  return cases;
}

// Li2018 on a few pipelines, for comparison with the heuristic.
std::vector<GpuCase> Li2018Cases() {
  std::vector<GpuCase> cases = {
      RowComposite("Softmax", kRows, [](Case&, Tensor x, const Shape&) { return Softmax(x); }),
      RowComposite("LayerNorm", kRows,
                   [](Case& c, Tensor x, const Shape& s) {
                     return LayerNorm(x, c.Input(DType::kF32, {s.back()}, 35, 0.5, 1.5),
                                      c.Input(DType::kF32, {s.back()}, 36));
                   }),
      {"Gelu_256x1024",
       [](Case& c) { c.outputs = {Gelu(c.Input(DType::kF32, kRows, 37, -4, 4))}; }},
      DenseCase("DenseRelu", Activation::kRelu),
  };
  for (GpuCase& c : cases) {
    c.name = "Li2018_" + c.name;
    c.scheduler = Scheduler::kLi2018;
    c.check = Check::kAssembles;  // Li2018 is naive by design: no fusion or cooperation
    c.max_kernels = 0;
  }
  return cases;
}

// The heuristic's fallback plans, forced, on a few pipelines: every plan must work for
// every cluster, since each is the next one's only fallback.
std::vector<GpuCase> FallbackCases() {
  const auto layer_norm = [](Case& c, Tensor x, const Shape& s) {
    return LayerNorm(x, c.Input(DType::kF32, {s.back()}, 35, 0.5, 1.5),
                     c.Input(DType::kF32, {s.back()}, 36));
  };
  std::vector<GpuCase> base = {
      RowComposite("Softmax", kRows, [](Case&, Tensor x, const Shape&) { return Softmax(x); }),
      RowComposite("LayerNorm", kTiny, layer_norm),
      Reduce("Max", Max, kColumns, true),
      {"ArgMax_256x1024_Rows",
       [](Case& c) { c.outputs = {ArgMax(c.Input(DType::kF32, kRows, 12), -1)}; },
       Check::kRowReduction},
  };
  std::vector<GpuCase> cases;
  for (const GpuCase& b : base) {
    GpuCase separate = b;
    separate.name = "Separate_" + b.name;
    separate.scheduler = Scheduler::kGpuSeparate;
    separate.max_kernels = 0;
    cases.push_back(separate);
    GpuCase serial = b;
    serial.name = "Serial_" + b.name;
    serial.scheduler = Scheduler::kGpuSerial;
    serial.max_kernels = 0;
    if (serial.check == Check::kRowReduction) serial.check = Check::kSerial;
    cases.push_back(serial);
  }
  return cases;
}

std::vector<GpuCase> AllCases() {
  std::vector<GpuCase> cases;
  for (int i = 0; i < kNumOps; ++i) {
    for (GpuCase& c : OpCases(static_cast<OpKind>(i))) cases.push_back(std::move(c));
  }
  for (GpuCase& c : CompositeCases()) cases.push_back(std::move(c));
  for (GpuCase& c : Li2018Cases()) cases.push_back(std::move(c));
  for (GpuCase& c : FallbackCases()) cases.push_back(std::move(c));
  return cases;
}

// Rows of the register table, printed after the suite.
std::map<std::string, std::string>& TableRows() {
  static auto* rows = new std::map<std::string, std::string>();
  return *rows;
}

TEST(GpuPtxCoverage, EveryLoweredOpHasACase) {
  for (int i = 0; i < kNumOps; ++i) {
    const OpKind op = static_cast<OpKind>(i);
    EXPECT_EQ(OpCases(op).empty(), !OpIsCompilable(op)) << OpName(op);
  }
}

class GpuPtxTest : public ::testing::TestWithParam<GpuCase> {
 public:
  static void TearDownTestSuite() {
    if (TableRows().empty()) return;
    std::cout << "\n| case | schedule | kernels | registers | spill st/ld bytes | stack |\n"
              << "|---|---|---|---|---|---|\n";
    for (const auto& [name, row] : TableRows()) std::cout << row << "\n";
  }
};

TEST_P(GpuPtxTest, GeneratesAndAssembles) {
  const GpuCase& gc = GetParam();
  Case c;
  gc.build(c);
  ASSERT_TRUE(c.graph->status().ok()) << c.graph->status();
  const ClusterSpec spec = SpecOf(c, "gpu_" + gc.name);
  auto code = GenerateCudaCode(spec, gc.scheduler);
  ASSERT_TRUE(code.ok()) << code.status();
  SCOPED_TRACE(absl::StrCat(gc.name, " scheduled by ", code->scheduler, ":\n", code->schedule,
                            "failures: ", absl::StrJoin(code->scheduler_failures, "; ")));
  EXPECT_NE(code->target.find("cuda_capability_86"), std::string::npos) << code->target;
  ASSERT_FALSE(code->kernels.empty());
  EXPECT_NE(code->ptx.find(".target sm_86"), std::string::npos);
  // No shift-and-mask selected as a bit-field extract past its operand (an LLVM 14 NVPTX
  // miscompile an H200 ran: schedule/lowered_check.h).
  EXPECT_EQ(schedule::CheckPtxBitFieldExtracts(code->ptx), "");
  // No flush-to-zero instruction (libdevice's f32 functions, which Halide links in their
  // FTZ mode, read subnormals as 0: Floor(-1e-40) would be -0) but those that are
  // harmless: the floor of exp's x * log2(e) (a subnormal x still gives exp(x) = 1 + x),
  // the f32 reciprocal seed that libdevice's f64 log and pow refine, and Tanh's exp2 and
  // division of 2|x| (lower_elementwise.cc: no subnormal there changes a result).
  for (size_t at = code->ptx.find(".ftz"); at != std::string::npos;
       at = code->ptx.find(".ftz", at + 1)) {
    const size_t start = code->ptx.find_first_not_of(" \t", code->ptx.rfind('\n', at) + 1);
    const std::string op = code->ptx.substr(start, code->ptx.find_first_of(" \t", start) - start);
    EXPECT_TRUE(!gc.no_ftz && (op == "cvt.rmi.ftz.f32.f32" || op == "rcp.approx.ftz.f32" ||
                               op == "ex2.approx.ftz.f32" || op == "div.approx.ftz.f32"))
        << op;
  }
  EXPECT_EQ(code->launches, static_cast<int>(code->kernels.size()));
  EXPECT_EQ(ShuffleInConditional(code->ptx), "");
  if (gc.scheduler != Scheduler::kLi2018) {
    // The plan asked for works for every case here (no fall-through), and puts every
    // Func on the GPU.
    EXPECT_EQ(code->scheduler_used, gc.scheduler) << absl::StrJoin(code->scheduler_failures, "; ");
    EXPECT_EQ(code->host_loops, 0);
  } else if (code->scheduler_used != Scheduler::kLi2018) {
    // Li2018 may fail (it puts 8-bit atomics in a softmax's max); then the heuristic's
    // schedule is used and the failure says why.
    ASSERT_FALSE(code->scheduler_failures.empty());
    EXPECT_EQ(code->scheduler_failures[0].rfind("Li2018: ", 0), 0u) << code->scheduler_failures[0];
    std::cout << "[Li2018 failed] " << gc.name << ": " << code->scheduler_failures[0] << "\n";
  }
  if (gc.max_kernels > 0) {
    EXPECT_LE(static_cast<int>(code->kernels.size()), gc.max_kernels);
  }
  if (gc.check == Check::kRowReduction) {
    // Cooperative: threads of a block combine partials through shared memory.
    EXPECT_NE(code->schedule.find("cooperative"), std::string::npos);
    EXPECT_NE(code->ptx.find("bar.sync"), std::string::npos);
    EXPECT_NE(code->ptx.find(".shared"), std::string::npos);
  }
  if (gc.check == Check::kSerial) {
    EXPECT_EQ(code->schedule.find("cooperative"), std::string::npos);
    EXPECT_NE(code->schedule.find("serial"), std::string::npos);
  }

  if (!HavePtxas()) {
    GTEST_SKIP() << "ptxas not found at " << PtxasPath();
  }
  auto report = AssemblePtx(code->ptx, "sm_90");
  ASSERT_TRUE(report.ok()) << report.status();
  // Every block fits the register file (else it spills under the runtime's 64 cap).
  EXPECT_EQ(CheckRegistersPerBlock(*code, *report), "") << report->log;
  ASSERT_EQ(report->kernels.size(), code->kernels.size()) << report->log;
  std::vector<std::string> registers, spills, stack;
  for (const PtxasKernel& k : report->kernels) {
    registers.push_back(std::to_string(k.registers));
    spills.push_back(absl::StrCat(k.spill_store_bytes, "/", k.spill_load_bytes));
    stack.push_back(std::to_string(k.stack_bytes));
    EXPECT_GT(k.registers, 0) << k.name;
    if (gc.check != Check::kAssembles) {
      EXPECT_EQ(k.spill_store_bytes, 0) << k.name;
      EXPECT_EQ(k.spill_load_bytes, 0) << k.name;
    }
  }
  TableRows()[gc.name] =
      absl::StrCat("| ", gc.name, " | ", code->scheduler, " | ", report->kernels.size(), " | ",
                   absl::StrJoin(registers, ", "), " | ", absl::StrJoin(spills, ", "), " | ",
                   absl::StrJoin(stack, ", "), " |");
  std::cout << "[ptxas sm_90] " << gc.name << ": " << report->kernels.size()
            << " kernels, registers " << absl::StrJoin(registers, ", ") << ", spills "
            << absl::StrJoin(spills, ", ") << " (" << code->compile_ms << " ms codegen)\n";
}

INSTANTIATE_TEST_SUITE_P(Cuda, GpuPtxTest, ::testing::ValuesIn(AllCases()),
                         [](const ::testing::TestParamInfo<GpuCase>& info) {
                           return info.param.name;
                         });

}  // namespace
}  // namespace lowertest
}  // namespace braze
