// softmax: jax.nn.softmax's f32 max / exp / sum / divide chain becomes one custom call, and so
// does its gradient.
//
//   %r  = stablehlo.reduce(%x init: -inf) applies maximum across dimensions = D
//   [%r = stablehlo.maximum(broadcast(-inf), %r)]         (jnp.max's `initial`, either order)
//   %e  = stablehlo.exponential(stablehlo.subtract(%x, BACK(%r)))
//   %s  = stablehlo.reduce(%e init: +0) applies add across dimensions = D
//   %y  = stablehlo.divide(%e, BACK(%s))
//   ==>  %y = stablehlo.custom_call @jaxmlx.softmax(%x) {dimensions = D}
//
// BACK(v) is a chain of broadcast_in_dim ops and reshapes that only add or drop size-1 dims,
// taking each element of v back to every position of the reduced dims (jax's keepdims
// broadcasts). Every value of the chain except %x is read only by the chain (%e: by the sum and
// the divide), so nothing else needs it; the dead ops are then dropped (passes/dce.h).
//
// f32 only. Semantics kept: max(-inf, r) = r; NaN or +inf in a row makes the row NaN on both
// sides, so does an all -inf row; x - (+0) and x - (-0) differ only in a zero's sign, and
// exp(+-0) = 1, so the signed zero of the max cannot show. MLX's kernel (lower/softmax.cc) sums
// in another order and multiplies by 1/sum: results within f32's few-ULP tolerance of XLA's.
//
// Training (jax 0.10's softmax, jax_softmax_custom_jvp off: jax differentiates the divide, so
// the backward pass reads %e and %s and the chain above is not read by itself only):
//
//   %dx = multiply(add(divide(%dy, BACK(%s)), BACK'(negate(KEEP(reduce(W) over D)))), %e)
//   W   = %dy * %e * BACK(divide(1, multiply(%S, %S)))   (any order and nesting; %S is %s
//         through reshapes and broadcasts that keep its elements' order)
//   ==>  %dx = stablehlo.custom_call @jaxmlx.softmax_dx(%y, %dy) {dimensions = D}
//        %y  = stablehlo.custom_call @jaxmlx.softmax(%x) {dimensions = D}
//
// %y replaces the forward divide (same value) where the block computes it before %dx, else is
// a new call. BACK' may pass through KEEP reshapes and sums over size-1 dims (transposed
// broadcasts). Math: e * (dy / s - sum(dy * e / s^2)) = y * (dy - sum(dy * y)), which the
// lowering computes (MLX's own softmax VJP); rounding differs from jax's order by a few ULPs. The
// custom-jvp softmax (jax_softmax_custom_jvp on, off by default through jax 0.11.2) needs
// nothing more: its backward reads only %y, and the forward chain is then matched as above (its
// -inf initial arrives through an f32 -> f32 convert, which f32_splat_bits looks through).
//
// Why: the chain is ~20 MLX primitives (the signed-zero-exact max alone is 12; two reductions,
// four broadcasts) where MLX's softmax is one fused kernel, on every backend: a transformer's
// attention runs it once per layer per token.
#pragma once

#include "base/status.h"
#include "ir/module.h"

namespace jaxmlx::passes {

inline constexpr char kSoftmaxTarget[] = "jaxmlx.softmax";
inline constexpr char kSoftmaxGradTarget[] = "jaxmlx.softmax_dx";

// Rewrites every matching divide and gradient of every func (nested regions included).
Status recognize_softmax(ir::Module& m);

}  // namespace jaxmlx::passes
