// The streaming-stores rewrite; see stream_stores.h.
#include "schedule/stream_stores.h"

#include <set>
#include <utility>

namespace braze {
namespace schedule {
namespace {

using namespace Halide::Internal;  // IR node types, in this file only
using Halide::Expr;

// True when `e` loads from any buffer in `names`.
class LoadsFrom : public IRVisitor {
 public:
  explicit LoadsFrom(const std::set<std::string>& names) : names_(names) {}
  bool found = false;

 private:
  using IRVisitor::visit;
  void visit(const Load* op) override {
    found |= names_.count(op->name) > 0;
    IRVisitor::visit(op);
  }
  const std::set<std::string>& names_;
};

bool Reads(const Stmt& s, const std::set<std::string>& names) {
  LoadsFrom v(names);
  s.accept(&v);
  return v.found;
}

// Halide 14's largest stack allocation (runtime/constants.h).
constexpr int64_t kMaxTileBytes = 16384;

class StreamStores : public IRMutator {
 public:
  StreamStores(std::set<std::string> outputs, std::string copy_symbol, std::string fence_symbol,
               std::shared_ptr<int> rewritten)
      : outputs_(std::move(outputs)),
        copy_symbol_(std::move(copy_symbol)),
        fence_symbol_(std::move(fence_symbol)),
        rewritten_(std::move(rewritten)) {}

  // The whole pipeline (Halide calls this on the final loop nest; the recursion below
  // goes through IRMutator::mutate): ends with a fence when any tile was rewritten.
  using IRMutator::mutate;
  Stmt mutate(const Stmt& s) override {
    if (depth_ > 0) return IRMutator::mutate(s);
    copies_ = 0;
    serial_unfenced_ = false;
    parallel_depth_ = 0;
    ++depth_;
    Stmt result = IRMutator::mutate(s);
    --depth_;
    return copies_ > 0 ? Block::make(result, Fence()) : result;
  }

 private:
  using IRMutator::visit;

  // Non-temporal stores are weakly ordered. The copies leave them unfenced (a fence per
  // tile cost 150 ns, more than a 1 KiB tile's copy saves); each parallel task fences
  // once after its last copy, before the thread pool hears the task is done, and the
  // pipeline once before it returns, so whoever synchronizes with it reads the data.
  // Copies made outside any parallel loop are fenced before the next parallel loop
  // starts, whose workers might read them.
  Stmt visit(const For* op) override {
    Stmt tile = Rewrite(op);
    if (tile.defined()) return tile;
    const bool parallel = op->for_type == ForType::Parallel;
    const bool fence_before = parallel && parallel_depth_ == 0 && serial_unfenced_;
    if (fence_before) serial_unfenced_ = false;
    const int before = copies_;
    parallel_depth_ += parallel ? 1 : 0;
    Stmt s = IRMutator::visit(op);
    parallel_depth_ -= parallel ? 1 : 0;
    const For* loop = s.as<For>();
    if (parallel && copies_ != before && loop != nullptr) {
      s = For::make(loop->name, loop->min, loop->extent, loop->for_type, loop->device_api,
                    Block::make(loop->body, Fence()));
    }
    return fence_before ? Block::make(Fence(), s) : s;
  }

  Stmt Fence() const {
    return Evaluate::make(Call::make(Halide::Int(32), fence_symbol_, {}, Call::Extern));
  }

  // The rewritten loop, or an undefined Stmt when `op` is not of the form required.
  Stmt Rewrite(const For* op) {
    const int64_t* n = as_const_int(op->extent);
    if (op->for_type != ForType::Serial || op->device_api != Halide::DeviceAPI::None ||
        n == nullptr || *n < 1) {
      return Stmt();
    }
    std::vector<std::pair<std::string, Expr>> lets;
    Stmt body = op->body;
    while (const LetStmt* let = body.as<LetStmt>()) {
      lets.emplace_back(let->name, let->value);
      body = let->body;
    }
    const Store* store = body.as<Store>();
    if (store == nullptr || outputs_.count(store->name) == 0 || !is_const_one(store->predicate)) {
      return Stmt();
    }
    const Ramp* ramp = store->index.as<Ramp>();
    if (ramp == nullptr || !is_const_one(ramp->stride) || Reads(op->body, outputs_)) return Stmt();
    const int lanes = ramp->lanes;
    // The vector's first element as a function of the loop variable alone (the loop's
    // own lets substituted), which must be linear with step `lanes`.
    Expr base = ramp->base;
    for (auto it = lets.rbegin(); it != lets.rend(); ++it)
      base = substitute(it->first, it->second, base);
    const Expr v = Variable::make(Halide::Int(32), op->name);
    const Expr first = simplify(substitute(op->name, op->min, base));
    if (!is_const_zero(simplify(base - first - (v - op->min) * lanes))) return Stmt();

    const Halide::Type type = store->value.type().element_of();
    const int64_t elements = *n * lanes;
    // Halide 14 puts at most 16 KiB on the stack; a larger tile would be malloc'ed at
    // every use (and its size could outgrow the Int(32) extent below).
    if (elements * type.bytes() > kMaxTileBytes) return Stmt();
    const std::string tile = unique_name(store->name + "_stream_tile");
    Stmt compute = Store::make(tile, store->value, Ramp::make((v - op->min) * lanes, 1, lanes),
                               Halide::Internal::Parameter(), store->predicate,
                               Halide::Internal::ModulusRemainder());
    for (auto it = lets.rbegin(); it != lets.rend(); ++it) {
      compute = LetStmt::make(it->first, it->second, compute);
    }
    compute = For::make(op->name, op->min, op->extent, op->for_type, op->device_api, compute);
    const Expr bytes = Halide::Internal::make_const(Halide::Int(64), elements * type.bytes());
    const Expr copy = Call::make(
        Halide::Int(32), copy_symbol_,
        {Variable::make(Halide::Handle(), store->name),
         Halide::cast<int64_t>(first) * Halide::Internal::make_const(Halide::Int(64), type.bytes()),
         Variable::make(Halide::Handle(), tile), Halide::Internal::make_zero(Halide::Int(64)),
         bytes},
        Call::Extern);
    ++copies_;
    serial_unfenced_ |= parallel_depth_ == 0;
    if (rewritten_) ++*rewritten_;
    return Allocate::make(tile, type, Halide::MemoryType::Stack,
                          {Halide::Internal::make_const(Halide::Int(32), elements)},
                          Halide::Internal::const_true(),
                          Block::make(compute, Evaluate::make(copy)));
  }

  const std::set<std::string> outputs_;
  const std::string copy_symbol_;
  const std::string fence_symbol_;
  const std::shared_ptr<int> rewritten_;
  int copies_ = 0;  // loops rewritten so far in this lowering
  int depth_ = 0;
  int parallel_depth_ = 0;        // parallel loops around the statement visited
  bool serial_unfenced_ = false;  // a copy outside them since the last fence
};

}  // namespace

void AddStreamStoresPass(Halide::Pipeline& pipeline, const std::vector<std::string>& outputs,
                         const std::string& copy_symbol, const std::string& fence_symbol,
                         std::shared_ptr<int> rewritten) {
  IRMutator* pass = new StreamStores(std::set<std::string>(outputs.begin(), outputs.end()),
                                     copy_symbol, fence_symbol, std::move(rewritten));
  pipeline.add_custom_lowering_pass(pass, [pass] { delete pass; });
}

}  // namespace schedule
}  // namespace braze
