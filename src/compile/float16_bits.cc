#include "compile/float16_bits.h"

#include <mutex>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "braze/dtype.h"
#include "ir/logging.h"
#include "lower/lower_float16.h"

namespace braze {
namespace {

using Halide::Expr;
using Halide::Type;
using Halide::Internal::Call;
using Halide::Internal::IRMutator;
using Halide::Internal::Stmt;

class Float16ToBits : public IRMutator {
 public:
  explicit Float16ToBits(bool f16_too) : f16_too_(f16_too) {}

 private:
  using IRMutator::visit;

  // Whether values of type `t` become their bits.
  bool Converted(const Type& t) const {
    return t.bits() == 16 && (t.is_bfloat() || (f16_too_ && t.code() == Type::Float));
  }
  static Type Bits(const Type& t) { return Halide::UInt(16, t.lanes()); }

  // The f32 value of `bits`, the converted form of a value of type `original`.
  static Expr BitsToF32(const Expr& bits, const Type& original) {
    return original.is_bfloat() ? lower::BF16BitsToF32(bits) : lower::F16BitsToF32(bits);
  }
  // `f` (Float(32)) rounded to the bits of the 16-bit type `to`.
  static Expr F32ToBits(const Expr& f, const Type& to) {
    return to.is_bfloat() ? lower::F32ToBF16Bits(f) : lower::F32ToF16Bits(f);
  }
  // An operand of an op computed in f32: converted values widened from their bits.
  Expr Operand(const Expr& e) {
    const Expr m = mutate(e);
    return Converted(e.type()) ? BitsToF32(m, e.type()) : m;
  }

  Expr visit(const Halide::Internal::FloatImm* op) override {
    if (!Converted(op->type)) return op;
    const float v = static_cast<float>(op->value);  // exact: the value has the 16-bit type
    return Halide::Internal::make_const(
        Bits(op->type), op->type.is_bfloat() ? FloatToBF16Bits(v) : FloatToF16Bits(v));
  }

  // Through f32, as the reference converts (an f64 or an integer rounds to f32 first).
  Expr visit(const Halide::Internal::Cast* op) override {
    const Type from = op->value.type(), to = op->type;
    if (!Converted(from) && !Converted(to)) return IRMutator::visit(op);
    Expr v = Operand(op->value);
    if (Converted(to)) {
      const Type f32 = Halide::Float(32, to.lanes());
      return F32ToBits(v.type() == f32 ? v : Halide::cast(f32, v), to);
    }
    return v.type() == to ? v : Halide::cast(to, v);
  }

  Expr visit(const Halide::Internal::Variable* op) override {
    if (!Converted(op->type)) return op;
    if (bound_.contains(op->name))
      return Halide::Internal::Variable::make(Bits(op->type), op->name);
    // A parameter: its bits where it is read.
    return Halide::reinterpret(Bits(op->type), op);
  }

  template <typename LetOrLetStmt>
  auto VisitLet(const LetOrLetStmt* op) {
    const auto value = mutate(op->value);
    const bool converted = Converted(op->value.type());
    if (converted) bound_.push(op->name);
    const auto body = mutate(op->body);
    if (converted) bound_.pop(op->name);
    return LetOrLetStmt::make(op->name, value, body);
  }
  Expr visit(const Halide::Internal::Let* op) override { return VisitLet(op); }
  Stmt visit(const Halide::Internal::LetStmt* op) override { return VisitLet(op); }

  // Says once per process (verbosity 1) how this OpenCL device stores 16-bit floats.
  void Note(const Type& t) const {
    if (!Converted(t)) return;
    static std::once_flag once;
    std::call_once(once, [f16 = f16_too_] {
      LogInfo(1, absl::StrCat("OpenCL: bf16", f16 ? " and f16" : "",
                              " values are stored as their 16-bit patterns (ushort) in the "
                              "kernels and converted with integer code",
                              f16 ? " (the device lacks cl_khr_fp16)"
                                  : "; f16 values are half (cl_khr_fp16)",
                              ": docs/OPENCL.md"));
    });
  }

  Stmt visit(const Halide::Internal::Store* op) override {
    Note(op->value.type());
    // An atomic update of the bits would add integers (Halide's OpenCL atomics are
    // typed by the store). Braze's 16-bit values are never updated in place (their sums
    // accumulate in f32), so this is refused rather than supported.
    if (atomic_ > 0 && Converted(op->value.type())) {
      throw Halide::CompileError("an atomic update of a 16-bit float (" + op->name +
                                 ") cannot be stored as its bits for OpenCL "
                                 "(compile/float16_bits.h)");
    }
    return IRMutator::visit(op);
  }

  Stmt visit(const Halide::Internal::Atomic* op) override {
    ++atomic_;
    Stmt s = IRMutator::visit(op);
    --atomic_;
    return s;
  }

  Expr visit(const Halide::Internal::Load* op) override {
    Note(op->type);
    if (!Converted(op->type)) return IRMutator::visit(op);
    return Halide::Internal::Load::make(Bits(op->type), op->name, mutate(op->index), op->image,
                                        op->param, mutate(op->predicate), op->alignment);
  }

  Stmt visit(const Halide::Internal::Allocate* op) override {
    if (!Converted(op->type)) return IRMutator::visit(op);
    std::vector<Expr> extents;
    for (const Expr& e : op->extents) extents.push_back(mutate(e));
    return Halide::Internal::Allocate::make(
        op->name, Bits(op->type), op->memory_type, extents, mutate(op->condition), mutate(op->body),
        op->new_expr.defined() ? mutate(op->new_expr) : Expr(), op->free_function);
  }

  // A float ramp's lanes are base + i * stride: computed in f32, rounded per lane.
  Expr visit(const Halide::Internal::Ramp* op) override {
    if (!Converted(op->type)) return IRMutator::visit(op);
    return F32ToBits(
        Halide::Internal::Ramp::make(Operand(op->base), Operand(op->stride), op->lanes), op->type);
  }

  Expr visit(const Halide::Internal::VectorReduce* op) override {
    if (!Converted(op->type)) return IRMutator::visit(op);
    return F32ToBits(
        Halide::Internal::VectorReduce::make(op->op, Operand(op->value), op->type.lanes()),
        op->type);
  }

  // Arithmetic on 16-bit values: in f32, rounded once.
  template <typename Op>
  Expr Arithmetic(const Op* op) {
    if (!Converted(op->type)) return IRMutator::visit(op);
    return F32ToBits(Op::make(Operand(op->a), Operand(op->b)), op->type);
  }
  Expr visit(const Halide::Internal::Add* op) override { return Arithmetic(op); }
  Expr visit(const Halide::Internal::Sub* op) override { return Arithmetic(op); }
  Expr visit(const Halide::Internal::Mul* op) override { return Arithmetic(op); }
  Expr visit(const Halide::Internal::Div* op) override { return Arithmetic(op); }
  Expr visit(const Halide::Internal::Mod* op) override { return Arithmetic(op); }
  Expr visit(const Halide::Internal::Min* op) override { return Arithmetic(op); }
  Expr visit(const Halide::Internal::Max* op) override { return Arithmetic(op); }

  // Comparisons of 16-bit values: of their exact f32 values.
  template <typename Op>
  Expr Comparison(const Op* op) {
    if (!Converted(op->a.type())) return IRMutator::visit(op);
    return Op::make(Operand(op->a), Operand(op->b));
  }
  Expr visit(const Halide::Internal::EQ* op) override { return Comparison(op); }
  Expr visit(const Halide::Internal::NE* op) override { return Comparison(op); }
  Expr visit(const Halide::Internal::LT* op) override { return Comparison(op); }
  Expr visit(const Halide::Internal::LE* op) override { return Comparison(op); }
  Expr visit(const Halide::Internal::GT* op) override { return Comparison(op); }
  Expr visit(const Halide::Internal::GE* op) override { return Comparison(op); }

  Expr visit(const Call* op) override {
    bool touches = Converted(op->type);
    for (const Expr& a : op->args) touches = touches || Converted(a.type());
    if (!touches) return IRMutator::visit(op);
    const Type type = Converted(op->type) ? Bits(op->type) : op->type;
    if (op->is_intrinsic(Call::reinterpret)) {
      const Expr a = mutate(op->args[0]);
      return a.type() == type ? a : Halide::reinterpret(type, a);
    }
    // Calls that pass a value through (or choose one): the bits pass as well.
    if (op->is_intrinsic({Call::likely, Call::likely_if_innermost, Call::strict_float,
                          Call::promise_clamped, Call::unsafe_promise_clamped, Call::if_then_else,
                          Call::return_second})) {
      std::vector<Expr> args;
      for (const Expr& a : op->args) args.push_back(mutate(a));
      return Call::make(type, op->name, args, op->call_type, op->func, op->value_index, op->image,
                        op->param);
    }
    throw Halide::CompileError("a 16-bit float in a call of " + op->name +
                               " cannot be stored as its bits for OpenCL (compile/float16_bits.h)");
  }

  const bool f16_too_;
  Halide::Internal::Scope<> bound_;  // Lets whose values were converted
  int atomic_ = 0;                   // Atomic nodes around the current statement
};

}  // namespace

bool StoresFloat16AsBits(const Halide::Target& target) {
  return target.has_feature(Halide::Target::OpenCL);
}

Stmt Float16AsBits(const Stmt& s, bool f16_too) { return Float16ToBits(f16_too).mutate(s); }

void InstallFloat16AsBits(Halide::Pipeline& pipeline, const Halide::Target& target) {
  if (!StoresFloat16AsBits(target)) return;
  pipeline.add_custom_lowering_pass(new Float16ToBits(!target.has_feature(Halide::Target::CLHalf)));
}

}  // namespace braze
