// The lowered-code checks as a custom lowering pass; see AddLoweredCheckPass in
// lowered_check.h.
#include <chrono>
#include <map>
#include <memory>
#include <string>
#include <utility>

#include "schedule/lowered_check.h"

namespace braze {
namespace schedule {
namespace {

using namespace Halide::Internal;  // IR node types, in this file only

// The constant buffers a statement reads (a Const's data), by name: what a module
// compiled ahead of time embeds, and CheckLoweredModule takes the shapes of.
class ConstantBuffers : public IRGraphVisitor {
 public:
  std::map<std::string, Halide::Buffer<>> found;

 private:
  using IRGraphVisitor::visit;
  void Note(const Halide::Buffer<>& b) {
    if (b.defined()) found.emplace(b.name(), b);
  }
  void visit(const Load* op) override {
    Note(op->image);
    IRGraphVisitor::visit(op);
  }
  void visit(const Call* op) override {
    Note(op->image);
    IRGraphVisitor::visit(op);
  }
  void visit(const Variable* op) override { Note(op->image); }
};

// Runs the checks on the statement it is given and returns it unchanged. Halide calls a
// custom pass's mutate once, on the whole statement.
class LoweredCheckPass : public IRMutator {
 public:
  LoweredCheckPass(const Halide::Target& target, LoweredCheckInputs inputs,
                   std::shared_ptr<LoweredCheckState> state)
      : target_(target), inputs_(std::move(inputs)), state_(std::move(state)) {}

  using IRMutator::mutate;
  Stmt mutate(const Stmt& s) override {
    if (state_->passed) return s;
    const auto start = std::chrono::steady_clock::now();
    // The checks read modules: this one holds the statement as its only function.
    Halide::Module module("braze_check", target_);
    module.append(LoweredFunc("braze_check", std::vector<LoweredArgument>(), s,
                              Halide::LinkageType::External));
    ConstantBuffers constants;
    s.accept(&constants);
    for (const auto& [name, buffer] : constants.found) module.append(buffer);
    std::string problem = CheckLoweredModule(module, inputs_.output_sizes, inputs_.known_values);
    if (problem.empty()) problem = FindUnwrittenBuffer(module, inputs_.outputs);
    std::string loop;
    if (problem.empty()) loop = FindStridedReadModifyWriteLoop(module);
    state_->check_ms +=
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    // No exception here (lowered_check.h): an empty statement, quick to generate code for,
    // that the caller throws away.
    if (!problem.empty()) {
      state_->problem = problem;
      return Evaluate::make(0);
    }
    if (!loop.empty()) {
      state_->llvm_loop = loop;
      if (!state_->loop_opt_off) {
        state_->needs_loop_opt_off = true;
        return Evaluate::make(0);
      }
    }
    return s;
  }

 private:
  const Halide::Target target_;
  const LoweredCheckInputs inputs_;
  const std::shared_ptr<LoweredCheckState> state_;
};

}  // namespace

void AddLoweredCheckPass(Halide::Pipeline& pipeline, const Halide::Target& target,
                         LoweredCheckInputs inputs, std::shared_ptr<LoweredCheckState> state) {
  IRMutator* pass = new LoweredCheckPass(target, std::move(inputs), std::move(state));
  pipeline.add_custom_lowering_pass(pass, [pass] { delete pass; });
}

}  // namespace schedule
}  // namespace braze
