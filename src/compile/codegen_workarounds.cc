#include "compile/codegen_workarounds.h"

#include <cstdint>
#include <cstring>

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

  Halide::Internal::Stmt visit(const Halide::Internal::For* op) override {
    const bool device =
        op->device_api != Halide::DeviceAPI::None && op->device_api != Halide::DeviceAPI::Host;
    device_loops_ += device;
    Halide::Internal::Stmt s = IRMutator::visit(op);
    device_loops_ -= device;
    return s;
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

}  // namespace

Halide::Internal::Stmt ComputeSkippableGpuStages(const Halide::Internal::Stmt& s) {
  return ComputeSkippableStages().mutate(s);
}

Halide::Internal::Stmt UnalignConstantStridedLoads(const Halide::Internal::Stmt& s) {
  return UnalignConstantStrides().mutate(s);
}

void InstallCodegenWorkarounds(Halide::Pipeline& pipeline, bool gpu) {
  pipeline.add_custom_lowering_pass(new UnalignConstantStrides);
  if (gpu) {
    pipeline.add_custom_lowering_pass(new ComputeSkippableStages);
    pipeline.add_custom_lowering_pass(new ExactDoubleConstants);
  }
}

}  // namespace braze
