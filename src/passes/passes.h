// Module-level rewrites run before lowering (no MLX here): they make the IR the lowering rules
// see smaller and uniform.
//
//   recognize_threefry  calls of jax's threefry2x32 func become one custom call (threefry.h).
//   inline_calls      func.call of a func defined in the module is replaced by the callee's body
//                     (jax emits threefry, _where, _uniform, ... as private funcs); funcs no
//                     longer referenced are dropped.
//   drop_sharding     single-device sharding annotations become identities: sdy.sharding_constraint,
//                     sdy.reshard, sdy.propagation_barrier, custom_call @Sharding /
//                     @SPMDFullToShardShape / @SPMDShardToFullShape; sdy.manual_computation is
//                     replaced by its body.
//   inline_async_ops  stablehlo.async_start / async_done pairs (jax's psum_start(...).done() and
//                     the other asynchronous collectives): the body runs where it starts.
//
// Every pass keeps value ids unique per Func (inlined values get fresh ids past num_values) and
// leaves a Module that ir::verify accepts. Not thread-safe (mutates the Module).
#pragma once

#include <cstdint>
#include <functional>
#include <unordered_map>
#include <vector>

#include "base/status.h"
#include "ir/module.h"

namespace jaxmlx::passes {

struct PassOptions {
  bool drop_sharding = true;
  bool threefry = true;
  bool inline_calls = true;
};

// Runs the passes in order (drop_sharding, inline_async_ops, recognize_threefry, inline_calls).
Status run_passes(ir::Module& m, const PassOptions& opts = {});

Status inline_calls(ir::Module& m);
Status drop_sharding(ir::Module& m);
Status inline_async_ops(ir::Module& m);

// Replaces every use of value id k by subst[k] in `f` (nested regions included); chains
// (a -> b -> c) are followed.
void replace_uses(ir::Func& f, const std::unordered_map<uint32_t, ir::Value>& subst);

// Rewrites every value `op` reads or defines (operands, results, its regions' block arguments and
// ops) through `map`: how inlining and unrolling give a copied body fresh ids.
using ValueMap = std::function<ir::Value(ir::Value)>;
void remap_op(ir::Op& op, const ValueMap& map);

// How many operand slots read each value id in `r`, nested regions included (ids absent: 0).
using UseCounts = std::unordered_map<uint32_t, int>;
UseCounts count_uses(const ir::Region& r);

// Removes the ops of `b` whose entry in `drop` (one per op) is true, keeping the others' order.
void erase_ops(ir::Block& b, const std::vector<bool>& drop);

// Whether `op` has one region of one non-empty block whose arguments are typed as op's operands
// (sdy.manual_computation, stablehlo.async_start): its body can take op's place.
bool body_reads_operands(const ir::Op& op);
// Moves that body, without its terminator, to the end of `out`, its arguments mapped to op's
// operands in `subst`, and returns the values the terminator returned (body_reads_operands).
std::vector<ir::Value> splice_body(ir::Op& op, std::vector<ir::Op>& out,
                                   std::unordered_map<uint32_t, ir::Value>& subst);

}  // namespace jaxmlx::passes
