// counted_loop: which stablehlo.while ops are counted loops, and how many times they run.
//
// A counted loop is what jax emits for lax.scan and lax.fori_loop with static bounds:
//
//   %r:n = stablehlo.while(%i = %init, ...)
//   cond { %b = ...; %p = stablehlo.compare LT (or LE), %i, %bound; stablehlo.return %p }
//   do   { ...; %next = stablehlo.add %i, %step (either order, step a positive constant);
//          stablehlo.return ..., %next, ... }
//
// with an integer scalar counter (not u64), a bound that is a constant or a carry element the
// body passes through unchanged, and a condition with no effect of its own (no custom call, no
// region). Such a loop runs its trip count without reading the condition. Both the executor's
// loop (lower/control_flow.cc, which reads a non-constant init or bound on the host) and the
// unrolling pass (unroll.h, constants only) use this.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>

#include "ir/module.h"

namespace jaxmlx::passes {

struct CountedLoop {
  size_t index = 0;  // the counter's position in the carry
  int64_t step = 0;
  bool inclusive = false;              // LE rather than LT
  std::optional<int64_t> bound_const;  // else the bound is carry element bound_index
  size_t bound_index = 0;
};

// The op defining a value (null for block arguments and unknown values).
using DefOf = std::function<const ir::Op*(ir::Value)>;

// The value of an integer scalar stablehlo.constant; nullopt for anything else.
std::optional<int64_t> constant_int(const ir::Op* def);

std::optional<CountedLoop> match_counted_loop(const ir::Op& while_op, const DefOf& def);

// How many times the body runs from `init` to `bound`, or nullopt when the counter (of type
// `counter`) would wrap around before the loop ends (then only the condition, read every
// iteration, gives the exact semantics).
std::optional<int64_t> counted_trips(const ir::Type* counter, int64_t init, int64_t bound,
                                     const CountedLoop& loop);

}  // namespace jaxmlx::passes
