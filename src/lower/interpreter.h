// Interpreter: the LowerContext that walks our IR and calls the lowering rules.
//
// One Interpreter lowers one run of a program: it binds the entry func's arguments, walks its
// ops in order, looks each one up in the Registry, hands the rule its operand arrays and binds
// the arrays it returns (after checking their count, dtype and shape against the op's result
// types: a mismatch is an INTERNAL error naming the op, i.e. a rule bug). Values live in one
// slot per SSA id of the current func (ids are unique per func, regions included), so regions
// see the values of their enclosing blocks.
//
// Modes: kExecute really runs (while/case read conditions on the host); kTrial is the compile
// time check with placeholder inputs (every region is traced once, nothing is evaluated); kTrace
// runs inside mx::compile (no host reads: eval() fails).
//
// Not thread-safe; runs on the device worker. MLX exceptions thrown by rules are turned into
// errors naming the op and its source location.
#pragma once

#include <optional>
#include <unordered_map>
#include <vector>

#include "lower/lowering.h"

namespace jaxmlx::lower {

enum class RunMode { kExecute, kTrial, kTrace };

// Facts about a program computed once (after passes) and shared by all its runs.
struct ProgramInfo {
  const ir::Module* module = nullptr;
  const ir::Func* entry = nullptr;
  // Every stablehlo.constant of every func (regions included), in walk order, and every op
  // whose value depends on constants alone (hoisted: a broadcast of a constant, an iota, a mask
  // compared from them...), after its operands. The executor computes them once; each run then
  // reads them instead of building those ops again (on MLX's CPU each op costs a few us).
  std::vector<const ir::Op*> constant_ops;
  std::unordered_map<const ir::Op*, size_t> constant_index;
  struct Hoisted {
    const ir::Func* func = nullptr;
    std::vector<size_t> operands;  // indices into constant_ops
  };
  std::unordered_map<const ir::Op*, Hoisted> hoisted;
  // For each func, the op defining each value id (null for block arguments).
  std::unordered_map<const ir::Func*, std::vector<const ir::Op*>> defs;
  // For each block, per op index: the ids defined in that block whose last use is that op (a
  // use inside an op's regions counts as a use by the op); run_block drops them afterwards so
  // MLX can free intermediates during evaluation.
  std::unordered_map<const ir::Block*, std::vector<std::vector<uint32_t>>> releases;
  // True when no op of the entry func (regions included) needs a host read or a call:
  // no while / case / if / func.call / custom calls with host effects.
  bool straight_line = true;
};

ProgramInfo analyze_program(const ir::Module& m, const ir::Func& entry);

// An array of `shape` (some dimension 0) with no primitive: evaluating it runs no kernel.
mx::array empty_array(const mx::Shape& shape, mx::Dtype dtype);

// Names every op (regions included) of the funcs reachable from `entry` that has no rule in
// `registry`; empty when all can be lowered. Each entry: "stablehlo.fft at jit(f)/fft  f.py:3:4".
std::vector<std::string> find_unlowerable(const ir::Module& m, const ir::Func& entry,
                                          const Registry& registry);

// Ops (and @main's arguments) of `entry` and the funcs it calls whose static shape has a
// dimension MLX cannot hold (its shapes are int32: at most 2^31 - 1 per dimension), one line
// each: the op, where, and the dimension. Empty when every shape fits.
std::vector<std::string> find_oversized_dims(const ir::Module& m, const ir::Func& entry);

class Interpreter;

// A hook through which the executor replays loop regions as compiled MLX graphs.
class RegionRunner {
 public:
  virtual ~RegionRunner() = default;
  // Runs `region` (a while cond or body of the func `interp` is running) on `args`, or returns
  // nullopt to let the interpreter walk it.
  virtual std::optional<StatusOr<Values>> run(Interpreter& interp, const ir::Region& region,
                                              const Values& args) = 0;
};

class Interpreter : public LowerContext {
 public:
  // `constants` (optional, same order as info.constant_ops) replaces the constant rule: the
  // executor creates them once and passes them in (as compile inputs when tracing).
  Interpreter(const ProgramInfo& info, const Registry& registry, RunMode mode,
              const Values* constants = nullptr);

  StatusOr<Values> run(const ir::Func& f, const Values& args);
  // Runs `region` of `f` in a fresh frame where `bound` values (ids of f) are already set.
  StatusOr<Values> run_region(const ir::Func& f, const ir::Region& region,
                              const std::vector<std::pair<uint32_t, mx::array>>& bound,
                              const Values& args);

  void set_region_runner(RegionRunner* runner) { runner_ = runner; }
  // call_region, through the RegionRunner when one is set (loop bodies and conditions).
  StatusOr<Values> call_loop_region(const ir::Region& region, const Values& args);
  const ir::Func* current_func() const { return frames_.empty() ? nullptr : frames_.back().func; }
  // The current value of id in the running frame.
  StatusOr<mx::array> value(uint32_t id) const { return get(ir::Value{id, nullptr}); }

  StatusOr<Values> call_region(const ir::Region& region, const Values& args) override;
  StatusOr<Values> call_func(std::string_view name, const Values& args) override;
  Status eval(const Values& arrays) override;
  const ir::Module& module() const override { return *info_.module; }

  RunMode mode() const { return mode_; }
  // The op defining `v` in the func being run (null for block arguments).
  const ir::Op* def(ir::Value v) const;
  // The value of `v` when it is an integer scalar defined by a stablehlo.constant.
  std::optional<int64_t> constant_int(ir::Value v) const;
  // Evaluates a scalar (integer or bool) array and reads it on the host.
  StatusOr<int64_t> read_scalar(const mx::array& a);
  // Runs the rule of one op (no constant table) and checks what it returns; binds nothing.
  // Needs a current frame for ops that read values of the func (none for constants).
  StatusOr<Values> lower_op(const ir::Op& op, const Values& in);
  // lower_op for an op of `f` outside any run (the executor's hoisted constants).
  StatusOr<Values> lower_op_in(const ir::Func& f, const ir::Op& op, const Values& in);

 private:
  struct Frame {
    const ir::Func* func;
    std::vector<std::optional<mx::array>> env;
  };

  Status run_block(const ir::Block& block, Values* results);
  Status run_op(const ir::Op& op);
  StatusOr<mx::array> get(ir::Value v) const;
  Status check_results(const ir::Op& op, const Values& out) const;

  const ProgramInfo& info_;
  const Registry& registry_;
  RunMode mode_;
  const Values* constants_;
  RegionRunner* runner_ = nullptr;
  std::vector<Frame> frames_;
};

}  // namespace jaxmlx::lower
