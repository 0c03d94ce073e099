// norm_grads: the input gradient jax's autodiff writes for a layer norm or an RMS norm (f32,
// over the last dim, the forms norms.h recognizes) becomes one custom call, which lower/norms.cc
// runs as MLX's fused normalization VJP kernels on a GPU.
//
// jax transposes the forward chain op by op. For a layer norm
//   %c = x - BACK(MEAN(x)),  %r = rsqrt(MEAN(%c * %c) + eps),  %y = %c * BACK(%r)
// and %dy the cotangent of %y (the scale already applied), the cotangent of x is a sum of terms:
//   P = multiply(%dy, BACK(%r))                                      (through %y's %c)
//   Q = multiply(BACK'(divide(%ce, N)), multiply(2, %c))             (through the square)
//       %ce = multiply(K, multiply(-0.5, divide(%r, %e)))            (%e = MEAN(..) + eps)
//       K   = KEEP(sum_last(multiply(%c, %dy)))                      (rsqrt's cotangent)
//   M = BACK'(divide(S, N)),  S = a sum of KEEP(sum_last(negate(T))) (the mean's)
//       where the T's, added up, are exactly P and Q
// and an RMS norm's (%c = x, no mean) is P + Q. BACK' is a keepdims broadcast chain, possibly
// through a sum over size-1 dims (a broadcast's transpose); KEEP a reshape to the keepdims shape;
// multiplies match in either operand order; %c may be any subtract of x and BACK(the one mean)
// (jax emits `x - mean` once per use); 2 * %c is the square's (x ** 2, jnp.square) derivative.
// The terms are found in an add tree (jax accumulates a value's cotangents with adds in the
// order they arrive): the tree rooted at an add, descending into adds read once, may hold other
// terms too (a residual connection's cotangent), and several norms' terms.
//
//   ==> %g = custom_call @jaxmlx.layer_norm_dx(x, %dy) {epsilon}   (or @jaxmlx.rms_norm_dx)
//       the add tree's other terms plus %g, in the root's place
//
// Every value of the replaced terms is read only inside them (no other reader of K, S, ...);
// the forward ops stay (the result of the norm still needs them, and the forward recognizer then
// sees them read only by the forward chain: run this pass, then drop the dead ops, then norms.h).
//
// Semantics: the same gradient, computed as MLX's kernels compute it (the row's mean, then the
// statistics of x less it, in one kernel); results within f32's few-ULP tolerance of XLA's on
// ordinary rows (closer to the exact gradient than jax's own order on the rows tried: a pre-norm
// block's parameter gradients within 7e-7 of float64's where jax's CPU backend is within 7e-6).
// A row whose squares overflow f32 (|x| above ~1.8e19) differs: jax's gradient is 0 there
// (rsqrt(inf) = 0 times finite values), MLX's CUDA RMS-norm VJP NaN (x * mean(x * dy)
// overflows before it meets the 0).
//
// Not matched: flax's order (the scale multiplied into the reciprocal: the cotangent does not
// pass through %y's BACK(%r)), `c * c` written out (its two product terms read one broadcast),
// jnp.var's own mean, the fast variance.
//
// Why: a layer norm's backward is ~20 MLX primitives (five row sums and their broadcasts, each
// kernel launch on a GPU); MLX's LayerNormVJP is one. A transformer trains two norms per layer.
// Runs where norms.h's pass runs (fast_kernels_enabled). In training, norm_scales.h then moves
// the scale product around these calls, and the scale's and bias's gradients, into them.
#pragma once

#include "base/status.h"
#include "ir/module.h"

namespace jaxmlx::passes {

inline constexpr char kLayerNormGradTarget[] = "jaxmlx.layer_norm_dx";
inline constexpr char kRmsNormGradTarget[] = "jaxmlx.rms_norm_dx";

// Rewrites every matching add tree of every func (nested regions included). Leaves the replaced
// ops dead in place: drop_dead_ops (dce.h) removes them.
Status recognize_norm_grads(ir::Module& m);

}  // namespace jaxmlx::passes
