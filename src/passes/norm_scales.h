// norm_scales: in training, a norm's scale (and a layer norm's bias) goes into MLX's kernels
// with the norm, and their gradients into the norm's VJP. Runs after norms.h (whose calls it
// reads), where fast_kernels_enabled.
//
// When the backward pass reads the normalized values (the scale's gradient does), norms.h
// leaves the scale product and the bias outside the call, and norm_grads.h's call gets the
// cotangent the scale product already made:
//   %n  = custom_call @jaxmlx.layer_norm(%x) {epsilon}            (or @jaxmlx.rms_norm)
//   %y  = multiply(%n, PARAM(%g))   [add(%y, PARAM(%b))]           (a layer norm's bias)
//   %p  = multiply(%n, %dy)                                        (the scale's gradient:)
//   %dg = reduce(%p) add over every dim but the last               (%g's shape)
//   [%db = reduce(%dy) add over every dim but the last]            (with %b: its gradient)
//   %h  = multiply(%dy, PARAM(%g))                                 (another broadcast of %g, or
//   %dx = custom_call @jaxmlx.layer_norm_dx(%x, %h) {epsilon}       the forward's)
//   ==> %y              = custom_call @jaxmlx.layer_norm(%x, %g[, %b]) {epsilon, has_scale,
//                                                                    has_bias}
//       %dx, %dg[, %db] = custom_call @jaxmlx.layer_norm_dx(%x, %dy, %g[, %b]) {epsilon,
//                                                                    has_scale, has_bias}
// in the place of the first of %dx's, %dg's and %db's ops (whose operands must be defined before
// it: jax's scale and bias are, as arguments or in the forward pass). %n is read only by %p and
// the scale product (or only by %p, where the forward values are not used: jax.vjp's backward
// alone; the forward is then left as it is), %p and %h only by %dg and %dx; every multiply and
// add matches in either operand order, and all of these ops lie in one block (a scan's forward
// and backward bodies are not matched across). Without norm_grads.h's call (rows with a size-1
// dim, such as [2, 1, 3, D], are not matched there) nothing is.
//
// Semantics: the same values as MLX computes them: its kernel's normalized values times the
// scale plus the bias in one pass (results within f32's few-ULP tolerance of jax's products),
// and the VJP's scale gradient, the rows' dy * normalized x (recomputed from x) summed down the
// rows, and bias gradient, dy summed down the rows, within the same tolerance of jax's sums.
//
// Why: the normalized values are then not kept from the forward pass to the backward one (a
// full activation per norm, two norms per transformer layer), and the scale product, the bias
// add, the scale's gradient product, the two row sums and the cotangent's scaling are not
// primitives of their own (on an H200 MLX keeps every temporary of a CUDA graph until the graph
// has run, so each is memory at the step's peak too).
#pragma once

#include "base/status.h"
#include "ir/module.h"

namespace jaxmlx::passes {

// Rewrites every match of every func (nested regions included). Leaves the replaced ops dead in
// place: drop_dead_ops (dce.h) removes them.
Status fold_norm_scales(ir::Module& m);

}  // namespace jaxmlx::passes
