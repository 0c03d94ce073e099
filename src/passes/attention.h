// attention: jax's scaled dot-product attention chain becomes one custom call, which
// lower/attention.cc runs as MLX's fused attention kernel (mx::fast::scaled_dot_product_attention)
// on a GPU. Runs after passes/softmax.h (it matches the softmax call) and passes/dce.h.
//
//   %s = dot_general(%q, %k)    batching dims paired, one contracting dim each (D); %k has one
//                               free dim (S), %q any number (flattened into MLX's query dim)
//   [%s = multiply(%s, SPLAT(c))  |  %s = divide(%s, SPLAT(c))]     (the scale; else 1)
//   [%s = add(%s, %bias)]                     (an additive mask or bias of %s's shape)
//   [%s = select(%pred, %s, SPLAT(F))  |  %s = select(%pred, SPLAT(F), %s)]   (F <= -1e9)
//   %p = custom_call @jaxmlx.softmax(%s) {dimensions = [last]}
//   %o = dot_general(%p, %v)    %p's batch dims (its leading ones) with %v's, %p's last dim with
//                               one dim of %v; %v's other dims are the value features
//   ==> %o = custom_call @jaxmlx.attention(%q, %k, %v[, %pred][, %bias])
//
// The call's attributes: `scale` (f32), `has_mask`, `mask_keeps` (the select keeps %s where
// %pred is true), `fill` (F), `has_bias`, `scores` (%s's dims where the mask and bias apply:
// jnp.matmul's products drop size-1 batch dims, and those views are part of the chain), and the operand dims in MLX's order: `q_dims` (batch..., free...,
// contracting), `k_dims` (batch..., free, contracting), `v_dims` (batch..., contracting,
// free...), with `batch` and `q_free` counts, and `mask_dims` when %pred is the value before
// jax's broadcast_in_dim of it (its broadcast_dimensions). Every value is f32 (bf16 attention is
// left alone: MLX's composed fallback, on the CPU or for head sizes its kernels lack, would round
// the scores to bf16 where jax keeps them f32). Every intermediate value is read only by the
// chain (training keeps the probabilities for the backward pass: no match).
//
// Semantics kept: the select's fill F is effectively -inf for the softmax (F <= -1e9: masked
// scores contribute exp(F - max) = 0 exactly, as on jax's side), and a row whose every score is
// masked averages all values uniformly, as jax's softmax of equal fills does. The lowering adds
// -2^100 where the mask drops a score (s + -2^100 is -2^100 exactly for any |s| < 2^75), which
// keeps both facts through MLX's kernels, whose bool masks skip a dropped key (Metal's vector
// kernel: an all-masked row gives 0), turn into -inf (CUDA: NaN) or are scaled by log2(e)
// (finfo.min would overflow to -inf). MLX multiplies %q by the scale before the product and
// accumulates in its own order: results within f32's tolerance of XLA's.
//
// Why: on a GPU attention is ~6 kernels that write the [.., T, S] scores to memory three times;
// MLX's kernels (Metal's vector and tiled attention, CUDA's vector kernel and cuDNN) are one pass.
// On the CPU MLX composes the same primitives, so the pass runs where fast_kernels_enabled()
// (chain_match.h) says.
#pragma once

#include "base/status.h"
#include "ir/module.h"

namespace jaxmlx::passes {

inline constexpr char kAttentionTarget[] = "jaxmlx.attention";

// Rewrites every matching chain of every func (nested regions included).
Status recognize_attention(ir::Module& m);

}  // namespace jaxmlx::passes
