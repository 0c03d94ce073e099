// logsumexp: jax.nn.logsumexp's f32 chain (what optax's cross-entropy losses compute) becomes one
// custom call, and so does its gradient.
//
//   %r  = reduce(%x init: -inf) applies maximum across dimensions = D   [maximum(-inf, %r)]
//   %m  = select(is_finite(%r), %r, 0)
//   %e  = exponential(subtract(%x, BACK(%m)))
//   %s  = reduce(%e init: +0) applies add across dimensions = D
//   %l  = add(log(abs(%s)), %m)                          (either order)
//   ==>  %l = custom_call @jaxmlx.logsumexp(%x) {dimensions = D}
//
//   %dx = multiply(BACK(%t), %e)                         (either order; the backward pass)
//   %t  = add(select(%c, %q, 0), negate(select(%c, 0, %q)))   (abs's transpose, either order)
//   %c  = compare GE (%s, 0),  %q = divide(%ct, abs(%s))      (log's transpose)
//   ==>  %dx = custom_call @jaxmlx.logsumexp_dx(%x, %ct) {dimensions = D}
//
// BACK: broadcasts and reshapes taking each row value to the reduced dims (chain_match.h). The
// gradient is the softmax of %x times %ct (e / s = softmax, s > 0), lowered as MLX's softmax
// kernel; the forward as MLX's logsumexp.
//
// Semantics: rows of finite values, -inf (masked out, all -inf: -inf and a NaN gradient on both
// sides) and NaN agree with jax to f32 rounding. A row holding +inf: the value is +inf on both
// sides; its gradient is NaN over the row here, where jax's is NaN at the +inf and 0 (or NaN
// where exp(x) overflows) elsewhere: its max is not finite, so jax subtracts 0.
//
// Why: jax's chain is ~10 MLX primitives (the exact max alone five) and its gradient two more,
// once per step of every classifier trained with a softmax cross-entropy; MLX's logsumexp and
// softmax are one kernel each.
#pragma once

#include "base/status.h"
#include "ir/module.h"

namespace jaxmlx::passes {

inline constexpr char kLogSumExpTarget[] = "jaxmlx.logsumexp";
inline constexpr char kLogSumExpGradTarget[] = "jaxmlx.logsumexp_dx";

// Rewrites every matching chain and gradient of every func (nested regions included).
Status recognize_logsumexp(ir::Module& m);

}  // namespace jaxmlx::passes
