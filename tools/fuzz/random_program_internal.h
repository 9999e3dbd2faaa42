// What the two halves of the random-program code share (random_program.h is their public
// face): random_program.cc draws programs (the Generator), random_program_build.cc builds
// them into graphs, makes their feeds and prints them as C++. An op drawn by the one is
// built by the other, so its constants' values and its C++ spelling come from here.
#ifndef BRAZE_TOOLS_FUZZ_RANDOM_PROGRAM_INTERNAL_H_
#define BRAZE_TOOLS_FUZZ_RANDOM_PROGRAM_INTERNAL_H_

#include <cmath>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "braze/dtype.h"
#include "braze/graph.h"
#include "braze/host_tensor.h"

namespace braze {
namespace fuzz {
namespace internal {

// C++ spellings for ProgramOp::code and ProgramToCpp: "{1, 2, 3}", "DType::kF32".
std::string Ints(const std::vector<int64_t>& v);
std::string Ints(const std::vector<int>& v);
std::string DTypeCode(DType d);
// Whether an op (by its C++ code) computes its float result bit for bit from equal
// inputs in both implementations (random_program_build.cc).
bool ExactOpCode(const std::string& code);

// A constant's values (a drawn Const op's, by its seed), moved as BuildProgram's
// `perturb` asks while it builds the program (PerturbValues), else as drawn; `grid`:
// rounded to multiples of 1/8 first (OnGrid).
HostTensor ConstValues(DType dtype, const Shape& shape, uint64_t seed, bool grid = false);

// A drawn value attribute (Pad's value, OneHot's on and off values) made a value of
// `dtype`, which the op requires: an i32's truncated toward zero and a bool's 0 or 1, as
// the op stored them before other values were an error (a seed draws the program and
// results it drew then, from the same random numbers).
inline double ValueOf(DType dtype, double v) {
  if (dtype == DType::kI32) return std::trunc(v);
  if (dtype == DType::kBool) return v != 0 ? 1 : 0;
  return v;
}

// Float values rounded to multiples of 1/8 (ProgramInput::grid).
HostTensor OnGrid(HostTensor t);
extern const char kOnGridSource[];  // its C++ text, for ProgramToCpp

// What is known of a float value's binary form: every element a multiple of 2^lsb of
// magnitude at most `max` (values on the grid, and sums and products of them). While
// max / 2^lsb < 2^(mantissa bits), every partial sum in any order is exactly
// representable, so any two implementations compute the value bit for bit (FMA
// contractions and reassociated sums included): a convolution of grid values is exact,
// and so is what MaxPool routes its gradient by.
struct Grid {
  bool on = false;
  int lsb = 0;
  double max = 0;
  bool ExactIn(DType dtype) const;
};

// An op's construction from its operands' tensors, in a graph.
using BuildFn = std::function<Tensor(Graph&, const std::vector<Tensor>&)>;

// A Sum, Max, Min or Mean of v[0] over `axes` (empty: every axis): its build function
// and its code, one spelling for every family that draws reductions.
enum class ReduceKind { kSum, kMax, kMin, kMean };
BuildFn ReductionBuild(ReduceKind r, std::vector<int> axes, bool keep);
std::string ReductionCode(ReduceKind r, const std::vector<int>& axes, bool keep);

// The generator's services to op families drawn outside random_program.cc (the window
// ops: random_program_window.cc). Values are indices into the program's pool (inputs
// first, then ops).
class Drawer {
 public:
  virtual ~Drawer() = default;
  virtual int Uniform(int n) = 0;  // [0, n)
  virtual bool Chance(double p) = 0;
  virtual Tensor value(int i) const = 0;
  virtual bool exact(int i) const = 0;  // computed bit for bit by both implementations
  virtual Grid grid(int i) const = 0;
  // A random earlier value satisfying `ok` (exact ones only with `exact_only`), or -1.
  virtual int Pick(const std::function<bool(const Tensor&)>& ok, bool exact_only = false) = 0;
  // Records an op (built in the scratch graph at once) and returns its value. `grid`:
  // what is known of its binary form when the generic rules (by its code) know nothing.
  virtual int Push(std::vector<int> operands, BuildFn build, std::string code, Grid grid = {}) = 0;
  virtual int AddConst(DType dtype, const Shape& shape, bool grid = false) = 0;
  // Value `i` (an op's) is computed bit for bit by both implementations whatever its
  // operands are (a random op reads only its like's shape): it is fetched and compared
  // with no tolerance (ProgramOp::bit_exact).
  virtual void MarkBitExact(int i) = 0;
  // Value `i` (an op's) is a collective: how the reference computes it (ProgramOp::simulate).
  virtual void SetSimulate(
      int i, std::function<Tensor(Graph&, const std::vector<Tensor>&, int)> simulate) = 0;
};

// The format of an image-shaped program (GenerateOptions::window_probability): its
// first input's layout; window ops on its values use it most of the time.
struct WindowContext {
  bool image = false;
  DataFormat format = DataFormat::kNHWC;
};

// An image-shaped first input: [N, H, W, C] or [N, C, H, W], small (N 1-3, H and W
// 1-13, C 1-8).
Shape DrawImageShape(Drawer& d, DataFormat format);
// A filter for an image of `channels` channels: [KH, KW, channels, C_out].
Shape DrawFilterShape(Drawer& d, int64_t channels);
// A window op on a rank-4 float value, often with what surrounds it in a network (a bias
// add, ReLU, a residual add, BatchNorm, a pooling or reduction after); gradient ops
// drawn as ops of their own too. False when no value fits.
bool DrawWindowOp(Drawer& d, const WindowContext& context);
// A sequence op (Gather, UnsortedSegmentSum, Iota, Sin, Cos; random_program_sequence.cc).
// False when no value fits.
bool DrawSequenceOp(Drawer& d);
// A random op (RandomUniform, RandomNormal, Dropout; random_program_random.cc). False
// when no value fits.
bool DrawRandomOp(Drawer& d);
// An attention op (ScaledDotProductAttention; random_program_attention.cc). False when no
// value fits.
bool DrawAttentionOp(Drawer& d);
// A bf16 or f16 op (random_program_float16.cc). False when no value fits.
bool DrawFloat16Op(Drawer& d);
// A collective (AllReduce, Broadcast, AllGather; random_program_collective.cc). False when
// no value fits.
bool DrawCollectiveOp(Drawer& d);
// A Cond, Scan or bounded While around a random body (random_program_control_flow.cc;
// cf, issue 40). False when no value fits.
bool DrawControlFlowOp(Drawer& d);
// What the other families seldom or never draw (random_program_edges.cc): casts between
// every pair of dtypes, comparisons and selects of every dtype, reductions over negative
// axes, values with no elements, values of rank 5 and 6, ... False when no value fits.
bool DrawEdgeOp(Drawer& d);

}  // namespace internal
}  // namespace fuzz
}  // namespace braze

#endif  // BRAZE_TOOLS_FUZZ_RANDOM_PROGRAM_INTERNAL_H_
