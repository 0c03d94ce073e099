// argminmax: jax's argmax / argmin reduce becomes one custom call.
//
//   %i = stablehlo.iota dim = d                      (the operand's shape, an integer type)
//   %v, %r = stablehlo.reduce(%x init: IDENTITY), (%i init: 0) across dimensions = [d]
//     reducer(%a, %b) (%ia, %ib) {
//       %p = or(compare GT %a, %b, compare NE %a, %a)       (LT for argmin; no NE for integers)
//       %q = or(%p, and(compare EQ %a, %b, compare LT %ia, %ib))
//       return select(%p, %a, %b), select(%q, %ia, %ib)
//     }
//   ==>  %v, %r = stablehlo.custom_call @jaxmlx.argmax(%x) {dimension = d}
//        (or %r = ... alone when nothing reads %v, as with jnp.argmax)
//
// IDENTITY is -inf / +inf for floats, the type's minimum / maximum for integers, false / true for
// bools. Semantics (what the body computes whatever the reduction order, as jax documents): the
// index of the first NaN if there is one, else the first index of the extreme; the value is the
// element at that index. Any other body, init or index operand keeps the generic reduce.
//
// Why: the generic variadic reduce runs the body as a tree of log2(n) rounds of ~8 ops each (a
// greedy decoder's argmax over a vocabulary of 1024: 149 MLX primitives per token); MLX's own
// argmax / argmin plus the NaN rule is ~6 (lower/reduce.cc).
#pragma once

#include "base/status.h"
#include "ir/module.h"

namespace jaxmlx::passes {

inline constexpr char kArgmaxTarget[] = "jaxmlx.argmax";
inline constexpr char kArgminTarget[] = "jaxmlx.argmin";

// Rewrites every matching reduce of every func (nested regions included).
Status recognize_argminmax(ir::Module& m);

}  // namespace jaxmlx::passes
