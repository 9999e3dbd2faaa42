#include "compile/codegen_workarounds.h"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "lower/lowering.h"

namespace braze {
namespace {

using Halide::Expr;
using Halide::Internal::IRMutator;
using Halide::Internal::Load;
using Halide::Internal::ModulusRemainder;
using Halide::Internal::Ramp;

class UnalignConstantStrides : public IRMutator {
  using IRMutator::visit;

  Expr visit(const Load* op) override {
    const Ramp* ramp = op->index.as<Ramp>();
    const bool constant_base = ramp != nullptr && Halide::Internal::is_const(ramp->base);
    const bool unit_stride = ramp != nullptr && Halide::Internal::is_const_one(ramp->stride);
    if (!constant_base || unit_stride || op->alignment.modulus != 0) {
      return IRMutator::visit(op);
    }
    return Load::make(op->type, op->name, mutate(op->index), op->image, op->param,
                      mutate(op->predicate), ModulusRemainder());
  }
};

// A vector load with stride 2 to 4 whose base is `e + c` (c not a multiple of the
// stride) gets its base through a Let: Halide's code generator then sees a variable, not
// the constant it would subtract (CodeGen_LLVM's "offset"), and loads from the base
// itself. Alignment is kept: where it gives the offset, the shifted base stays >= 0.
class StridedLoadsFromTheirBase : public IRMutator {
  using IRMutator::visit;

  Expr visit(const Load* op) override {
    const Ramp* ramp = op->index.as<Ramp>();
    const Halide::Internal::IntImm* stride =
        ramp != nullptr ? ramp->stride.as<Halide::Internal::IntImm>() : nullptr;
    const Halide::Internal::Add* add =
        ramp != nullptr ? ramp->base.as<Halide::Internal::Add>() : nullptr;
    const Halide::Internal::IntImm* c =
        add != nullptr ? add->b.as<Halide::Internal::IntImm>() : nullptr;
    if (stride == nullptr || stride->value < 2 || stride->value > 4 || c == nullptr ||
        Halide::Internal::mod_imp(c->value, stride->value) == 0) {
      return IRMutator::visit(op);
    }
    const std::string name = Halide::Internal::unique_name("braze_strided_base");
    const Expr base = mutate(ramp->base);
    const Expr index =
        Ramp::make(Halide::Internal::Variable::make(base.type(), name), ramp->stride, ramp->lanes);
    return Halide::Internal::Let::make(name, base,
                                       Load::make(op->type, op->name, index, op->image, op->param,
                                                  mutate(op->predicate), op->alignment));
  }
};

// A float vector of two lanes that Halide 14's simplifier wrote as ramp(a, b - a, 2)
// (a concat of two scalars turned into a ramp, the stride their difference: exact for
// integers only). Lane 1 is then a + (b - a): NaN where a is inf or NaN, and rounded
// otherwise (braze-fuzz seed 13310072: an NCHW Conv2DBackpropInput, W tiled by 2, NaN
// where b is 0). The repair writes the lanes back as a concat of a and b; any other
// float ramp as a concat of its lanes, which is what the ramp means.
class FloatRampsAsLanes : public IRMutator {
  using IRMutator::visit;

  static Expr Unwrapped(const Expr& e) {
    const auto* call = e.as<Halide::Internal::Call>();
    if (call != nullptr && call->is_intrinsic(Halide::Internal::Call::strict_float)) {
      return call->args[0];
    }
    return e;
  }

  Expr visit(const Ramp* op) override {
    if (!op->type.is_float()) return IRMutator::visit(op);
    const Expr base = mutate(op->base), stride = mutate(op->stride);
    const auto* diff = Unwrapped(stride).as<Halide::Internal::Sub>();
    if (op->lanes == 2 && diff != nullptr && Halide::Internal::equal(diff->b, base)) {
      return Halide::Internal::Shuffle::make_concat({base, diff->a});
    }
    std::vector<Expr> lanes{base};
    for (int i = 1; i < op->lanes; ++i) lanes.push_back(lanes.back() + stride);
    return Halide::Internal::Shuffle::make_concat(lanes);
  }
};

// True for a load of the opaque zero, or a variable in `vars` (Lets bound to one), under
// casts, broadcasts and strict_float.
bool IsOpaqueZero(Expr e, const Halide::Internal::Scope<>* vars = nullptr) {
  while (true) {
    if (const auto* cast = e.as<Halide::Internal::Cast>()) {
      e = cast->value;
    } else if (const auto* broadcast = e.as<Halide::Internal::Broadcast>()) {
      e = broadcast->value;  // a vectorized term's x8(float32(zero[0]))
    } else if (const auto* call = e.as<Halide::Internal::Call>();
               call != nullptr && call->is_intrinsic(Halide::Internal::Call::strict_float)) {
      e = call->args[0];
    } else {
      break;
    }
  }
  if (const auto* var = e.as<Halide::Internal::Variable>(); var != nullptr && vars != nullptr) {
    return vars->contains(var->name);
  }
  const Load* load = e.as<Load>();
  return load != nullptr && load->name == lower::kOpaqueZeroBuffer;
}

// `x + zero` -> x (exact where Braze adds it: sums that start at +0, matmul operands);
// any other read of the zero -> 0.
class DropOpaqueZeros : public IRMutator {
  using IRMutator::visit;

  // Halide's common-subexpression elimination binds a zero read more than once to a Let,
  // and may bind a whole `zero + term` too: both are followed in their Let's body.
  template <typename LetOrLetStmt>
  auto VisitLet(const LetOrLetStmt* op) {
    const bool zero = IsOpaqueZero(op->value, &zero_vars_);
    const bool term = !zero && op->value.type().is_float() && ZeroedTerm(op->value).defined();
    if (zero) zero_vars_.push(op->name);
    if (term) term_vars_.push(op->name);
    auto result = IRMutator::visit(op);
    if (zero) zero_vars_.pop(op->name);
    if (term) term_vars_.pop(op->name);
    return result;
  }
  Halide::Internal::Stmt visit(const Halide::Internal::LetStmt* op) override {
    return VisitLet(op);
  }
  Expr visit(const Halide::Internal::Let* op) override { return VisitLet(op); }

  Expr visit(const Halide::Internal::Add* op) override {
    if (IsOpaqueZero(op->b, &zero_vars_)) return mutate(op->a);
    if (IsOpaqueZero(op->a, &zero_vars_)) return mutate(op->b);
    // `acc + (zero + term)`, a float sum's update (lower_reduce.cc), in either order: the
    // addition becomes strict, the term bound to a Let outside it. With LLVM's no-NaNs
    // flag on it, LLVM took a term that is 0 or NaN (x - x) as 0 and dropped it:
    // Mean(Concat({v, v - v})) was 0 where v is NaN (braze-fuzz seed 11101870).
    if (op->type.is_float()) {
      if (const Expr term = ZeroedTerm(op->b); term.defined()) return Accumulate(op->a, term, true);
      if (const Expr term = ZeroedTerm(op->a); term.defined()) {
        return Accumulate(op->b, term, false);
      }
      if (IsTermVar(op->b)) return Halide::strict_float(mutate(op->a) + op->b);
      if (IsTermVar(op->a)) return Halide::strict_float(op->a + mutate(op->b));
    }
    return IRMutator::visit(op);
  }

  // t for `zero + t` or `t + zero`, else undefined. A term the update's vector does not
  // vary along is one broadcast, x8(zero + t): then x8(t) (the Mean of an empty batch's
  // NaN, braze-fuzz seed 62701289, was such a term and its addition stayed fast-math).
  Expr ZeroedTerm(const Expr& e) const {
    if (const auto* broadcast = e.as<Halide::Internal::Broadcast>()) {
      const Expr t = ZeroedTerm(broadcast->value);
      return t.defined() ? Halide::Internal::Broadcast::make(t, broadcast->lanes) : Expr();
    }
    const auto* add = e.as<Halide::Internal::Add>();
    if (add == nullptr) return Expr();
    if (IsOpaqueZero(add->a, &zero_vars_)) return add->b;
    if (IsOpaqueZero(add->b, &zero_vars_)) return add->a;
    return Expr();
  }

  bool IsTermVar(const Expr& e) const {
    const auto* var = e.as<Halide::Internal::Variable>();
    return var != nullptr && term_vars_.contains(var->name);
  }

  // let s = term in strict_float(acc + s) (or s + acc: `term_second` false).
  Expr Accumulate(const Expr& acc, const Expr& term, bool term_second) {
    const Expr a = mutate(acc), t = mutate(term);
    const std::string name = Halide::Internal::unique_name("braze_sum_term");
    const Expr s = Halide::Internal::Variable::make(t.type(), name);
    return Halide::Internal::Let::make(name, t, Halide::strict_float(term_second ? a + s : s + a));
  }

  Halide::Internal::Scope<> zero_vars_;  // Lets bound to the zero
  Halide::Internal::Scope<> term_vars_;  // Lets bound to `zero + term`

  Expr visit(const Load* op) override {
    if (op->name == lower::kOpaqueZeroBuffer) return Halide::Internal::make_zero(op->type);
    return IRMutator::visit(op);
  }
};

// Finds a Load anywhere in an Expr.
class ReadsABuffer : public Halide::Internal::IRVisitor {
 public:
  bool found = false;

 private:
  using IRVisitor::visit;
  void visit(const Load* op) override { found = true; }
};

// An IRMutator that knows whether it is inside a GPU loop (device code) or on the host.
class DeviceAwareMutator : public IRMutator {
 protected:
  using IRMutator::visit;
  bool on_device() const { return device_loops_ > 0; }

  // A GPU loop's min and extent are evaluated on the host (the launch's dimensions);
  // only its body is device code.
  Halide::Internal::Stmt visit(const Halide::Internal::For* op) override {
    const bool device =
        op->device_api != Halide::DeviceAPI::None && op->device_api != Halide::DeviceAPI::Host;
    const Expr min = mutate(op->min), extent = mutate(op->extent);
    device_loops_ += device;
    const Halide::Internal::Stmt body = mutate(op->body);
    device_loops_ -= device;
    if (min.same_as(op->min) && extent.same_as(op->extent) && body.same_as(op->body)) return op;
    return Halide::Internal::For::make(op->name, min, extent, op->for_type, op->device_api, body);
  }

 private:
  int device_loops_ = 0;
};

class ComputeSkippableStages : public DeviceAwareMutator {
  using DeviceAwareMutator::visit;

  Halide::Internal::Stmt visit(const Halide::Internal::IfThenElse* op) override {
    if (!on_device() && !op->else_case.defined()) {
      ReadsABuffer reads;
      op->condition.accept(&reads);
      if (reads.found) return mutate(op->then_case);
    }
    return IRMutator::visit(op);
  }
};

class ExactDoubleConstants : public DeviceAwareMutator {
  using DeviceAwareMutator::visit;

  Expr visit(const Halide::Internal::FloatImm* op) override {
    if (!on_device() || op->type.bits() != 64) return op;
    uint64_t bits;
    static_assert(sizeof(bits) == sizeof(op->value));
    std::memcpy(&bits, &op->value, sizeof(bits));
    return Halide::reinterpret(
        op->type, Halide::Internal::make_const(Halide::UInt(64, op->type.lanes()), bits));
  }
};

// Calls of the NVVM intrinsics that CUDA lowering uses (lower_elementwise.cc) where they
// run on the host: there the x86 back end cannot select them. exp2 becomes libm's exp
// of the widened x ln 2 (exact to the f32 result over the whole range, infinities and
// NaN included: CUDA's forms pass arguments down to -150 and rely on ex2(-inf) = 0) and
// the approximate division an IEEE one.
class HostFormsOfNvvmMath : public DeviceAwareMutator {
  using DeviceAwareMutator::visit;

  Expr visit(const Halide::Internal::Call* op) override {
    if (on_device()) return IRMutator::visit(op);
    const bool ex2 = op->name == lower::kNvvmEx2 || op->name == lower::kNvvmEx2Ftz;
    const bool div = op->name == lower::kNvvmDiv || op->name == lower::kNvvmDivFtz;
    if (ex2 && op->args.size() == 1) {
      // exp_f64 as Halide::exp makes it, but of any width: lowered code may be
      // vectorized, and Halide::exp casts its argument to a scalar.
      const Halide::Type wide = Halide::Float(64, op->type.lanes());
      const Expr x = Halide::cast(wide, mutate(op->args[0]));
      const Expr e = Halide::Internal::Call::make(
          wide, "exp_f64", {x * Halide::Internal::make_const(wide, 0.693147180559945309)},
          Halide::Internal::Call::PureExtern);
      return Halide::strict_float(Halide::cast(op->type, e));
    }
    if (div && op->args.size() == 2) {
      return mutate(op->args[0]) / mutate(op->args[1]);
    }
    // libdevice's functions (__nv_erf, __nv_pow: lower_elementwise.cc) are linked into
    // the PTX only; on the host the JIT found no __nv_erf (braze-fuzz seed 13000051 on an
    // H200: an Erf of a constant, computed on the host). libm's function of the same
    // name and the same IEEE semantics takes its place (only these two, the ones CUDA
    // lowering calls: another would be left for GenerateCudaCode to reject).
    if ((op->name == "__nv_erf" || op->name == "__nv_pow") &&
        op->call_type == Halide::Internal::Call::PureExtern) {
      std::vector<Expr> args;
      for (const Expr& a : op->args) args.push_back(mutate(a));
      return Halide::Internal::Call::make(op->type, op->name.substr(5), args, op->call_type);
    }
    return IRMutator::visit(op);
  }
};

// Binds every non-finite float constant, host and device code alike, to a value LLVM
// cannot see (codegen_workarounds.h, "Non-finite constants"). One use per Stmt.
class NonFiniteConstantsAsOpaqueValues : public IRMutator {
 public:
  Halide::Internal::Stmt Rewrite(const Halide::Internal::Stmt& s) {
    Halide::Internal::Stmt body = mutate(s);
    // Each bit pattern once per pipeline run, from Braze's identity function, in host
    // code (the top of the pipeline): LLVM knows nothing of its result. Parallel loops
    // capture the variable, and a GPU loop that reads it gets it as a scalar kernel
    // argument (Halide's closure of the loop, OffloadGPULoops.cpp): the extern itself is
    // never called in device code.
    for (const auto& [bits, name] : names_) {
      const Expr value = Halide::Internal::Call::make(
          Halide::UInt(64), kOpaqueBitsSymbol,
          {Halide::Internal::make_const(Halide::UInt(64), bits)}, Halide::Internal::Call::Extern);
      body = Halide::Internal::LetStmt::make(name, value, body);
    }
    return body;
  }

 private:
  using IRMutator::visit;

  // `bits` as a scalar of the float type `type`, through the opaque identity. The
  // variable is 64 bits whatever the type: the kernel argument is then a plain integer
  // (a ulong in OpenCL C, where a half argument would need cl_khr_fp16 and a bf16 has no
  // type at all), narrowed and reinterpreted where it is read.
  Expr Opaque(const Halide::Type& type, uint64_t bits) {
    auto [it, added] = names_.emplace(bits, "");
    if (added) it->second = Halide::Internal::unique_name("braze_nonfinite");
    Expr e = Halide::Internal::Variable::make(Halide::UInt(64), it->second);
    if (type.bits() != 64) e = Halide::cast(Halide::UInt(type.bits()), e);
    return Halide::reinterpret(type.element_of(), e);
  }

  Expr visit(const Halide::Internal::FloatImm* op) override {
    if (std::isfinite(op->value)) return op;
    uint64_t bits;
    if (op->type.bits() == 64) {
      std::memcpy(&bits, &op->value, sizeof(bits));
    } else if (op->type.bits() == 32) {
      const float f = static_cast<float>(op->value);
      uint32_t b;
      std::memcpy(&b, &f, sizeof(b));
      bits = b;
    } else if (op->type.is_bfloat()) {
      bits = Halide::bfloat16_t(op->value).to_bits();
    } else {
      bits = Halide::float16_t(op->value).to_bits();
    }
    return Opaque(op->type, bits);
  }

  // reinterpret(float type, integer constant): the lowering's NaN and infinities by bits.
  Expr visit(const Halide::Internal::Call* op) override {
    if (!op->is_intrinsic(Halide::Internal::Call::reinterpret) || !op->type.is_float() ||
        op->args.size() != 1) {
      return IRMutator::visit(op);
    }
    Expr arg = op->args[0];
    const auto* broadcast = arg.as<Halide::Internal::Broadcast>();
    if (broadcast != nullptr) arg = broadcast->value;
    const auto* u = arg.as<Halide::Internal::UIntImm>();
    const auto* i = arg.as<Halide::Internal::IntImm>();
    if (u == nullptr && i == nullptr) return IRMutator::visit(op);
    const int width = op->type.bits();
    const uint64_t bits = (u != nullptr ? u->value : static_cast<uint64_t>(i->value)) &
                          (width == 64 ? ~uint64_t{0} : (uint64_t{1} << width) - 1);
    // The exponent field all ones: an infinity or a NaN.
    const uint64_t exponent = op->type.is_bfloat() ? 0x7f80
                              : width == 16        ? 0x7c00
                              : width == 32        ? 0x7f800000
                                                   : 0x7ff0000000000000;
    if ((bits & exponent) != exponent) return op;
    Expr e = Opaque(op->type, bits);
    if (broadcast != nullptr) e = Halide::Internal::Broadcast::make(e, broadcast->lanes);
    return e;
  }

  std::map<uint64_t, std::string> names_;  // bit pattern -> its variable
};

// The pass object the pipeline owns: each lowering gets a fresh rewrite.
class NonFiniteConstantsPass : public IRMutator {
 public:
  Halide::Internal::Stmt mutate(const Halide::Internal::Stmt& s) override {
    return NonFiniteConstantsAsOpaqueValues().Rewrite(s);
  }
  using IRMutator::mutate;
};

// The identity behind kOpaqueBitsSymbol: a kernel calls it by address, never inlined.
uint64_t OpaqueBits(uint64_t bits) { return bits; }

}  // namespace

Halide::Internal::Stmt ComputeSkippableGpuStages(const Halide::Internal::Stmt& s) {
  return ComputeSkippableStages().mutate(s);
}

Halide::Internal::Stmt UnalignConstantStridedLoads(const Halide::Internal::Stmt& s) {
  return UnalignConstantStrides().mutate(s);
}

Halide::Internal::Stmt LoadStridedVectorsFromTheirBase(const Halide::Internal::Stmt& s) {
  return StridedLoadsFromTheirBase().mutate(s);
}

Halide::Internal::Stmt HostFormsOfDeviceMath(const Halide::Internal::Stmt& s) {
  return HostFormsOfNvvmMath().mutate(s);
}

Halide::Internal::Stmt DropOpaqueZeroLoads(const Halide::Internal::Stmt& s) {
  return DropOpaqueZeros().mutate(s);
}

Halide::Internal::Stmt NonFiniteConstantsAsOpaque(const Halide::Internal::Stmt& s) {
  return NonFiniteConstantsAsOpaqueValues().Rewrite(s);
}

void* OpaqueBitsAddress() { return reinterpret_cast<void*>(&OpaqueBits); }

void InstallCodegenWorkarounds(Halide::Pipeline& pipeline, bool gpu) {
  pipeline.add_custom_lowering_pass(new DropOpaqueZeros);
  pipeline.add_custom_lowering_pass(new UnalignConstantStrides);
  pipeline.add_custom_lowering_pass(new StridedLoadsFromTheirBase);
  pipeline.add_custom_lowering_pass(new FloatRampsAsLanes);
  if (gpu) {
    pipeline.add_custom_lowering_pass(new ComputeSkippableStages);
    pipeline.add_custom_lowering_pass(new ExactDoubleConstants);
    pipeline.add_custom_lowering_pass(new HostFormsOfNvvmMath);
  }
  // Last of these repairs: a constant another one makes (HostFormsOfNvvmMath's) is bound
  // too. The passes a caller adds after this function (Float16ToBits, streaming stores:
  // scheduler_chain.cc) make no float constant.
  pipeline.add_custom_lowering_pass(new NonFiniteConstantsPass);
  std::map<std::string, Halide::JITExtern> externs = pipeline.get_jit_externs();
  externs.emplace(kOpaqueBitsSymbol,
                  Halide::JITExtern(Halide::ExternCFunction(
                      OpaqueBitsAddress(),
                      Halide::ExternSignature(Halide::UInt(64), false, {Halide::UInt(64)}))));
  pipeline.set_jit_externs(externs);
}

}  // namespace braze
