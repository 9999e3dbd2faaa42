#include "compile/codegen_workarounds.h"

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

}  // namespace

Halide::Internal::Stmt UnalignConstantStridedLoads(const Halide::Internal::Stmt& s) {
  return UnalignConstantStrides().mutate(s);
}

void InstallCodegenWorkarounds(Halide::Pipeline& pipeline) {
  pipeline.add_custom_lowering_pass(new UnalignConstantStrides);
}

}  // namespace braze
