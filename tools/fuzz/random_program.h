// Random programs for differential testing: a graph of random ops, kept as data so it
// can be rebuilt (with fewer ops, for minimizing a failure) and printed as C++.
//
// A program has 1-3 inputs (placeholders of random rank 0-4, odd, prime and tiny
// extents, sometimes large enough for the parallel paths, sometimes f64 or i32, dim 0
// sometimes declared -1) and a few to a few dozen ops drawn from every op family:
// unary and binary elementwise with broadcasting, comparisons and Select, reductions
// over random axes with and without keep_dims, ArgMax, MatMul and BatchMatMul with
// transposes, every layout op on every axis (Reshape, Transpose, BroadcastTo, Concat,
// Slice, Pad, OneHot), Cast between f32, f64, i32 and bool, the composites (Softmax,
// LogSoftmax, cross entropy, LayerNorm, Gelu, Dense, BatchNorm, GlobalAvgPool) and the
// window ops (Conv2D, MaxPool, AvgPool and their gradient ops, in image-shaped programs
// and on any rank-4 value: random_program_window.cc). Values feed later ops
// in any combination (a reduction broadcast back into its input, say). Several values
// are fetched, intermediates included, so clusters have several outputs; with
// `gradients`, the gradients of the fetches with respect to the f32 inputs are fetched
// too.
//
// Used by tools/braze-fuzz (at scale) and test/e2e/random_graph_test.cc (a quick slice).
// Drawn in random_program.cc (the window ops in random_program_window.cc, the sequence
// ops in random_program_sequence.cc, the random ops in random_program_random.cc,
// attention in random_program_attention.cc); built, fed and
// printed in random_program_build.cc.
#ifndef BRAZE_TOOLS_FUZZ_RANDOM_PROGRAM_H_
#define BRAZE_TOOLS_FUZZ_RANDOM_PROGRAM_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "braze/graph.h"
#include "braze/host_tensor.h"

namespace braze {
namespace fuzz {

struct ProgramInput {
  DType dtype = DType::kF32;
  Shape shape;            // the concrete shape of the first feed
  bool dynamic0 = false;  // dim 0 is declared -1 and fed with several sizes
  // GenerateOptions::dynamic_dims_probability: per dim, the symbol the dim is declared
  // -1 for (its sizes per feed run are Program::symbol_sizes[run][symbol]), or -1 for a
  // static dim. Empty when the program has no symbols (then dynamic0 alone says which
  // dim is -1). Symbol 0 is the batch: a dynamic0 input's dim 0 has it.
  std::vector<int> symbols;
  bool specials = false;  // some values are +-inf, NaN, +-0 or subnormal (floats only)
  // Values rounded to multiples of 1/8 (floats only; never with specials): sums and
  // products of a few of them are exact in any order, so a convolution of them is
  // computed bit for bit by both implementations (image-shaped programs).
  bool grid = false;
};

// One op: how to build it from earlier values, and the same as C++ for reports.
struct ProgramOp {
  std::vector<int> operands;  // value indices: inputs first, then ops in order
  std::function<Tensor(Graph& g, const std::vector<Tensor>& operands)> build;
  std::string code;  // a C++ expression; "$0", "$1", ... stand for the operands
  // Whether the value may carry f32 rounding: it, or a value it is computed from, is an
  // f32 value that the two implementations may round differently (not bit for bit, see
  // the generator's ExactOp). An f64 value without it is computed in f64 throughout (or
  // from exact f32, i32 and bool values) and is judged at f64's tolerance
  // (RunOptions::rtol_f64); with it, at f32's.
  bool f32_rounding = false;
  // Computed bit for bit by both implementations (a random op: docs/RANDOM.md): always
  // fetched, and compared with no tolerance at all.
  bool bit_exact = false;
  // Whether the value may carry bf16 or f16 rounding: it, or a value it is computed
  // from, is a 16-bit value the two implementations may round differently (each rounds
  // once per op from f32 results that may differ by an f32 ulp: an ulp of the 16-bit
  // type apart). Judged at RunOptions::rtol_16 (docs/MIXED_PRECISION.md).
  bool half_rounding = false;
  // A collective (AllReduce, Broadcast, AllGather; GenerateOptions::
  // collective_probability): how the reference builds rank `rank`'s value of it from its
  // operand's value on every rank (`per_rank`, in rank order), in a graph holding every
  // rank's copy of the program (BuildWorldProgram). Empty for other ops.
  std::function<Tensor(Graph& g, const std::vector<Tensor>& per_rank, int rank)> simulate;
};

struct Program {
  uint64_t seed = 0;
  std::vector<ProgramInput> inputs;
  std::vector<ProgramOp> ops;  // value i (i >= inputs.size()) is ops[i - inputs.size()]
  std::vector<int> fetches;    // value indices
  bool gradients = false;      // also fetch d(sum of the f32 fetches)/d(each f32 input)
  // The most multiply-adds (batch * m * n * k) of one MatMul or BatchMatMul of it: from
  // 2^18 (kLibraryGemmMinWork, docs/CPU_GEMM.md) an f32 or bf16 one calls oneDNN.
  int64_t max_matmul_work = 0;
  int64_t max_elements = 0;  // the most elements of one value (inputs and ops)
  bool image = false;        // image-shaped (GenerateOptions::window_probability)
  // Its dynamic inputs are fed 0 rows too, after their other sizes (MakeFeeds's
  // kEmptyBatch): half the programs that draw the edges (GenerateOptions::
  // edges_probability), from its stream.
  bool empty_batch = false;
  // GenerateOptions::dynamic_dims_probability: the size of each symbol (ProgramInput::
  // symbols) in each feed run after the first (the first feeds the inputs' shapes as
  // drawn): symbol_sizes[r - 1][k] is symbol k's size in run r. Every op of the program
  // was built at each run's shapes while it was drawn, so every run is valid. Empty: no
  // symbols (the feeds vary dim 0 of the dynamic0 inputs, Sizes in fuzz_runner.cc).
  std::vector<std::vector<int64_t>> symbol_sizes;
  int num_values() const { return static_cast<int>(inputs.size() + ops.size()); }
};

struct GenerateOptions {
  int min_ops = 3;
  int max_ops = 14;
  double large_probability = 0.12;  // an input big enough for the parallel paths
  // The chance a program is past the last-level cache (braze-fuzz --large): its first
  // input (and those drawn to broadcast with it) has 4.2M to 8.4M elements (16 to 34 MiB
  // of f32, kDramShapes in random_program.cc), so outputs of 32 MiB and more stream
  // (docs/STREAMING_STORES.md) and large loops split into parallel chunks. Memory and
  // time stay bounded: no value of such a program exceeds twice its largest input (an op
  // that would is drawn again), and no matmul does more than 2^26 multiply-adds (the
  // reference kernels are plain loops).
  double dram_probability = 0;
  // The chance a program is matmul-sized (braze-fuzz --gemm): its first input is an f32
  // matrix (or batch of them) of 32K to 66K elements, and its matmuls, Dense layers
  // included, draw their width so that each does 2^21 to 2^22 multiply-adds (where
  // oneDNN takes over at the default threshold, docs/CPU_GEMM.md).
  double gemm_probability = 0;
  double dynamic_probability = 0.15;  // an input with dim 0 declared -1
  // The chance an input declares -1 on dims of its own choice, several at once, any
  // dim (braze-fuzz --dynamic_dims): each such dim has a symbol, shared with other dims
  // of the same first size now and then, and each symbol its own sizes per feed run
  // (1, small primes, sizes >= 16; a symbol may follow another: its size is the other's
  // or 1 in each run, numpy broadcasting a 1 against a -1 of another input). Every op is
  // checked at every run's shapes while it is drawn (one that is invalid at any is drawn
  // again), so the feeds are valid for the whole program. Drawn from a stream of its
  // own: with 0 (the default) every seed's program is what it was before.
  double dynamic_dims_probability = 0;
  double gradients_probability = 0.3;  // fetch gradients too
  // The chance a float input has specials (ProgramInput::specials). Drawn from a stream
  // of its own: a seed gives the same ops with or without them.
  double specials_probability = 0;
  // The chance a program is image-shaped (braze-fuzz --window): its first input is an f32
  // [N, H, W, C] or [N, C, H, W] image (N 1-3, H and W 1-13, C 1-8; often on the grid,
  // ProgramInput::grid), sometimes with a filter-shaped second input, and 40% of its ops
  // are window ops: Conv2D (strides, dilations, VALID, SAME and explicit padding, groups,
  // depthwise, either format) with a bias, BatchNorm, ReLU or a residual add after it,
  // MaxPool and AvgPool, a reduction over H and W after them, and the gradient ops as ops
  // of their own. Any other program with a rank-4 float value draws a window op now and
  // then (8% of its ops). Drawn from a stream of their own: a program without window ops
  // is the one its seed drew before they existed. 0: none.
  double window_probability = 0.1;
  // The chance a program draws the sequence ops (braze-fuzz --sequence): then 35% of its
  // ops are embedding lookups (Gather) of odd vocabularies by ids with repeats and
  // out-of-range values, UnsortedSegmentSum (the lookup's gradient, as an op of its
  // own), positions from Iota (plain, a sinusoidal encoding, a causal mask; a -1 batch
  // too), Sin and Cos (random_program_sequence.cc). Drawn from a stream of its own, as
  // the window ops: with 0 (the default) every seed's program is what it was before.
  double sequence_probability = 0;
  // The chance a program draws the random ops (braze-fuzz --random): then 30% of its ops
  // are RandomUniform (f32, f64) and RandomNormal of any value's shape (odd, rank 0, a -1
  // batch), by a constant step or one computed at run time, their bits fetched and
  // compared with the reference's exactly, and Dropout of float values, noise added to
  // them (random_program_random.cc). Drawn from a stream of its own: with 0 (the
  // default) every seed's program is what it was before.
  double random_probability = 0;
  // The chance a program draws attention (braze-fuzz --attention): then 25% of its ops are
  // ScaledDotProductAttention (fused, sometimes the unfused composite) on q, k, v of odd,
  // prime and tiny lengths, Tq != Tk, odd widths, causal or not, dropout sometimes, -1
  // lengths under a dynamic input, f32 and f64, fed by earlier values and feeding later
  // ones; half such programs fetch their gradients (the attention backward ops)
  // (random_program_attention.cc). Drawn from a stream of its own: with 0 (the default)
  // every seed's program is what it was before.
  double attention_probability = 0;
  // The chance a program draws bf16 and f16 (braze-fuzz --float16): then 30% of its ops
  // cast float values to a 16-bit type or compute on 16-bit values (elementwise,
  // broadcasting binaries, reductions, matmuls, softmax, layer norm, casts between the
  // 16-bit types and back) (random_program_float16.cc). Drawn from a stream of its own:
  // with 0 (the default) every seed's program is what it was before.
  double float16_probability = 0;
  // The chance a program draws collectives (braze-fuzz-mpi, under mpirun): then 30% of
  // its ops are AllReduce (sum, and mean of floats), Broadcast (any root) and AllGather
  // of earlier values, f32, f64 and i32, feeding later ops (random_program_collective.cc).
  // Built for the world the generating process is in (InitDistributed). Drawn from a
  // stream of its own: with 0 (the default) every seed's program is what it was before.
  double collective_probability = 0;
  // cf (issue 40): the chance a program draws control flow (braze-fuzz --control_flow):
  // then 25% of its ops are Scans (forward or reversed, over a -1 length too), Conds and
  // statically bounded Whiles around random bodies (random_program_control_flow.cc).
  // Drawn from a stream of its own: with 0 (the default) every seed's program is what it
  // was before.
  double control_flow_probability = 0;
  // The chance a program draws the edges of the op set (braze-fuzz --edges): then 30% of
  // its ops are what the other families seldom or never draw (docs/FUZZING.md,
  // "Coverage"): casts between every pair of the six dtypes, comparisons and selects of
  // every dtype, Max, Min and ArgMax of 16-bit and i32 values, reductions, LogSoftmax,
  // Concat, Gather and UnsortedSegmentSum over negative axes, OneHot to every dtype,
  // values with no elements and ops on them, values of rank 5 and 6
  // (random_program_edges.cc). Drawn from a stream of its own: with 0 (the default)
  // every seed's program is what it was before.
  double edges_probability = 0;
  // Scales the share of the ops each family above draws in a program that draws it
  // (braze-fuzz --all_families: every family in every program, each with a third of its
  // usual share, so the generic ops keep half the program). 1: the shares as documented.
  double family_share = 1;
};

Program GenerateProgram(uint64_t seed, const GenerateOptions& options = {});
// braze-fuzz --all_families: every family (but the collectives, braze-fuzz-mpi's) in
// every program at a third of its share, up to 24 ops, image-shaped 30% of the time,
// matmul-sized 5%, 30% of the inputs with -1 dims of their own (dynamic_dims_probability;
// since 2026-12-01): programs that mix the families as an outside generator would.
GenerateOptions AllFamilies();

// The program's graph: placeholders (dim 0 -1 where dynamic), ops, and the fetches
// (then, with gradients, the gradients). Ops whose `keep` entry is false are left out,
// and so is every op that reads one left out; fetches of left-out values are dropped.
// An error when an op's builder rejects it; a Gradients() error is returned in
// BuiltProgram::gradients_status instead (the program itself was built).
struct BuiltProgram {
  std::vector<Tensor> placeholders;
  std::vector<Tensor> fetches;
  // Per fetch: the value index it fetches, or -1 for a gradient.
  std::vector<int> fetch_values;
  // Why Gradients() refused the program's gradients (OK when it has none, or they were
  // built): a failure of Braze, not of the program, so the fuzzer reports it as an error.
  absl::Status gradients_status;
};
// `perturb` (nonzero) moves every constant's values as PerturbValues(value, perturb, its
// seed) does: the fuzzer's conditioning check (fuzz_runner.h) runs the reference on it.
// `inputs` (one per program input, of InputSpecs' dtypes and shapes): the program is
// built on them (a Function's arguments) instead of on Placeholders of its own.
absl::StatusOr<BuiltProgram> BuildProgram(const Program& program, Graph& g,
                                          const std::vector<bool>& keep = {}, uint64_t perturb = 0,
                                          const std::vector<Tensor>* inputs = nullptr);
// The program inputs' dtypes and shapes as declared (-1 for a dynamic batch and for
// every dim with a symbol).
std::vector<TensorSpec> InputSpecs(const Program& program);
// One input's declared shape (InputSpecs).
Shape DeclaredShape(const ProgramInput& input);

// The feed runs of a program, each a `size0` for MakeFeeds: 0 (the inputs' shapes as
// drawn), then other sizes of dim 0 of the dynamic inputs, 1 included, and two of at
// least kMinSymbolicExtent (16) after them, so a symbolic kernel compiled for one size
// serves another (docs/SYMBOLIC_SHAPES.md); last, kEmptyBatch where the program asks for
// it (Program::empty_batch). For a program with symbols (Program::symbol_sizes) the runs
// are 0, 1, ... (an index into symbol_sizes, plus one) and kEmptyBatch.
std::vector<int64_t> FeedRuns(const Program& program);
// A run of FeedRuns for a failure's detail: "size0 7", "size0 0 (an empty batch)",
// "run 2 (s0=1 s1=17)".
std::string FeedRunName(const Program& program, int64_t size0);

// Every rank's copy of the program in one graph, with no collective in it: a collective's
// value is computed from the copies of its operand (ProgramOp::simulate: a sum, rank
// root's copy, a concatenation), so the reference kernels run a whole world in one
// process. Per rank, its placeholders (named in<i>_r<rank>) and fetches, in
// BuildProgram's order; with gradients, rank r's are those of the sum of every copy's
// f32 fetches with respect to copy r's f32 inputs, as the collectives' gradients define
// them on rank r (the gradient of the world's total).
absl::StatusOr<std::vector<BuiltProgram>> BuildWorldProgram(const Program& program, Graph& g,
                                                            int world);
// Rank `rank`'s feeds of a program run on several ranks: MakeFeeds of a seed of its own
// (rank 0's are MakeFeeds's).
std::vector<HostTensor> RankFeeds(const Program& program, int rank, int64_t size0 = 0);

// `t` with every finite float element scaled by 1 + u * 4 ulps (of its own dtype), u
// uniform in [-1, 1], drawn from `draw` (1, 2, ...) and `salt` (which tensor); other
// elements and dtypes unchanged.
HostTensor PerturbValues(HostTensor t, uint64_t draw, uint64_t salt);

// Feeds for the placeholders: seeded random values, never all zeros; an input with
// specials has about one value in 8 replaced by one of them (at least one). `size0` replaces
// dim 0 of dynamic inputs (0: their first shape); for a program with symbols, it is the
// run (FeedRuns): run r > 0 feeds each symbol's dims symbol_sizes[r - 1].
// kEmptyBatch as `size0`: dynamic inputs are fed 0 rows (Program::empty_batch); with
// symbols, the dims of symbol 0 and of the symbols that follow it at the last run.
inline constexpr int64_t kEmptyBatch = -1;
std::vector<HostTensor> MakeFeeds(const Program& program, int64_t size0 = 0);

// A self-contained C++ function that builds the program (ops in `keep`) and its feeds.
std::string ProgramToCpp(const Program& program, const std::vector<bool>& keep = {});

}  // namespace fuzz
}  // namespace braze

#endif  // BRAZE_TOOLS_FUZZ_RANDOM_PROGRAM_H_
