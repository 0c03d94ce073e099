// norms: jax's layer norm and RMS norm chains (f32, over the last dim) become one custom call,
// which lower/norms.cc runs as MLX's fused normalization kernels on a GPU.
//
//   MEAN(v) = divide(K(reduce(v init: +0) applies add across dimensions = [last]), N)
//             (jnp.mean(v, -1, keepdims=True): K a broadcast_in_dim / reshape to the keepdims
//             shape, N a splat of the last dim's size)
//   PARAM(p) = BACK of a 1-D f32 %p of the last dim's size along the last dim (a scale or bias)
//
//   layer norm:  %m = MEAN(%x)
//                %c = subtract(%x, BACK(%m))          (jax emits `x - mean` twice: either copy)
//                %r = rsqrt(add(MEAN(multiply(%c, %c)), eps))
//                %y = multiply(%c, BACK(%r))   [multiply(%y, PARAM(%scale))]   [add(%y, PARAM(%bias))]
//             or %y = multiply(%c, multiply(BACK(%r), PARAM(%scale)))   [add(%y, PARAM(%bias))]
//                (flax's order: the scale times the reciprocal first)
//     ==> custom_call @jaxmlx.layer_norm(%x[, %scale][, %bias]) {epsilon, has_scale, has_bias}
//   RMS norm:    %r = rsqrt(add(MEAN(multiply(%x, %x)), eps))
//                %y = multiply(%x, BACK(%r))   [multiply(%y, PARAM(%scale))]
//     ==> custom_call @jaxmlx.rms_norm(%x[, %scale]) {epsilon, has_scale}
//   bf16/f16 RMS norm computed in f32 (Llama's):
//                %z = the f32 RMS norm above (unscaled) of convert(%x)
//                %y = convert(%z) to %x's type   [multiply(%y, PARAM(%scale))]
//     ==> custom_call @jaxmlx.rms_norm(%x[, %scale]) {epsilon, has_scale}   (MLX's kernel rounds
//         the f32 product to the type, then multiplies by the scale: the same computation)
//
// Multiplies and adds match in either operand order; BACK is a keepdims broadcast chain
// (chain_match.h) checked dim by dim. A chain whose intermediates are read outside it is left
// alone (training: the backward pass reads the mean, the reciprocal, the centred values), and so
// is flax's fast variance (E[x^2] - E[x]^2, another computation).
//
// Semantics: the layer norm is the two-pass one (the variance of the centred values), as jax
// computes it, and so are MLX's kernels and their VJPs on Metal and CUDA (since MLX 0.26.2: the
// mean, then the mean of the squares of x less it, in one kernel). They differ in rounding only
// (sums in another order, a product by the reciprocal): results within f32's few-ULP tolerance.
//
// Why: a layer norm is ~17 primitives (two reductions, five broadcasts), each one kernel launch
// on a GPU, where MLX's layer_norm / rms_norm are one kernel; a transformer runs two per layer.
// On the CPU MLX has no such kernel (it composes the same primitives), so the pass runs only
// where fast_kernels_enabled() (chain_match.h) says.
#pragma once

#include "base/status.h"
#include "ir/module.h"

namespace jaxmlx::passes {

inline constexpr char kLayerNormTarget[] = "jaxmlx.layer_norm";
inline constexpr char kRmsNormTarget[] = "jaxmlx.rms_norm";

// Rewrites every matching chain of every func (nested regions included).
Status recognize_norms(ir::Module& m);

}  // namespace jaxmlx::passes
