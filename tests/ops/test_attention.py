"""Scaled dot-product attention (src/passes/attention.cc: jax's f32 chain of product, scale,
bias, mask, softmax and product becomes MLX's fused attention kernel, src/lower/attention.cc)
against jax's CPU backend.

The pass runs by default on a GPU only (on the CPU MLX composes the kernel from the same
primitives), so every case runs with JAXMLX_FAST_KERNELS=1 (the rewrite, on whatever device this
is), with it lowered as on MLX's CUDA backend (JAXMLX_ATTENTION=cuda: masked or other f32
operands as jax's chain over [B, N, T, D]), =0 (jax's own chain) and with every recognizer off.
src/passes/passes_test.cc checks which chains are rewritten; here each form users write must
give jax's values either way: masks that
drop a whole row (jax averages every value), fills of -1e9, finfo.min and -inf, masks that keep
or drop where true, biases, several batch and query dims, and the gradient (whose chain stays).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from tests.ops.edge_values import rand
from tests.ops.harness import check

TOL = dict(rtol=2e-5, atol=2e-6)


@pytest.fixture(params=["1", "cuda", "0", "off"], ids=["fast", "cuda", "chain", "unrecognized"],
                autouse=True)
def fast_attention(request, monkeypatch):
  if request.param == "off":
    monkeypatch.setenv("JAXMLX_RECOGNIZE", "0")
  if request.param == "cuda":  # the rewrite, lowered as on MLX's CUDA backend (attention.cc)
    monkeypatch.setenv("JAXMLX_ATTENTION", "cuda")
  monkeypatch.setenv("JAXMLX_FAST_KERNELS", "0" if request.param == "0" else "1")
  return request.param


def qkv(b, h, t, s, d, seed=0, scale=1.0):
  return (rand(np.float32, (b, h, t, d), seed, scale=scale),
          rand(np.float32, (b, h, s, d), seed + 1, scale=scale),
          rand(np.float32, (b, h, s, d), seed + 2, scale=scale))


def attend(q, k, v, mask, fill=None):  # bench/workloads/transformer.py's
  s = (q @ k.transpose(0, 1, 3, 2)) * (q.shape[-1] ** -0.5)
  s = jnp.where(mask, s, jnp.finfo(s.dtype).min if fill is None else fill)
  return jax.nn.softmax(s, axis=-1) @ v


def test_causal_prefill_and_decode_step():
  q, k, v = qkv(2, 4, 8, 8, 32, 10, scale=0.5)
  causal = np.tril(np.ones((8, 8), bool))[None, None]
  check(lambda q, k, v, m: attend(q, k, v, m), q, k, v, causal, **TOL)
  # One query against a cache of 16 of which the first `pos` + 1 are filled (decode).
  q1, kc, vc = qkv(1, 4, 1, 16, 32, 11)
  kc[:, :, 9:] = 1e3  # never attended (an unfilled cache of stale values): scores ~1e4 dropped
  vc[:, :, 9:] = -7.0
  for pos in (0, 8):
    visible = np.arange(16) <= pos
    check(lambda q, k, v, m: attend(q, k, v, m), q1, kc, vc, visible, **TOL)


@pytest.mark.parametrize("b,t", [(1, 1), (2, 1), (1, 3)])
def test_a_decode_step_with_heads_split_from_its_tokens(b, t):
  # bench/workloads/decode.py's step: q, k and v split from one projection, heads split by a
  # reshape and a transpose that only moves size-1 dims when b and t are 1, the cache written
  # at `pos`, jnp.matmul dropping the batch dim of size 1 and adding it back. The operands reach
  # MLX as one view each of the projection and the caches (lower/shape_util.h, permuted_view).
  from jax import lax
  h, d, s = 4, 8, 16

  def step(x, kc, vc, pos):
    q, k, v = (u.reshape(b, t, h, d).transpose(0, 2, 1, 3) for u in jnp.split(x, 3, axis=-1))
    kc = lax.dynamic_update_slice_in_dim(kc, k, pos, axis=2)
    vc = lax.dynamic_update_slice_in_dim(vc, v, pos, axis=2)
    o = attend(q, kc, vc, jnp.arange(s) <= pos + t - 1)
    return o.transpose(0, 2, 1, 3).reshape(b, t, h * d), kc, vc

  x = rand(np.float32, (b, t, 3 * h * d), 12, scale=0.5)
  _, kc, vc = qkv(b, h, 1, s, d, 13)
  for pos in (0, 5):
    check(step, x, kc, vc, np.int32(pos), **TOL)


def test_fills_and_mask_senses():
  q, k, v = qkv(2, 3, 5, 7, 16, 20)
  mask = rand(np.float32, (2, 1, 5, 7), 21) > 0
  mask[0, 0, 2, :] = False  # a row with nothing to attend: jax averages every value
  mask[1, 0, :, 0] = False
  for fill in (-1e9, float(np.finfo(np.float32).min), -0.7 * float(np.finfo(np.float32).max),
               -np.inf, -1e4):  # -inf: the empty row is NaN; -1e4: not -inf to the softmax
    check(lambda q, k, v, m: attend(q, k, v, m, fill), q, k, v, mask, **TOL)

  def drop_where_true(q, k, v, pad):  # jnp.where(pad, -1e9, s)
    s = jnp.einsum("bhtd,bhsd->bhts", q, k) / 4.0
    return jax.nn.softmax(jnp.where(pad, -1e9, s), axis=-1) @ v

  check(drop_where_true, q, k, v, ~mask, **TOL)


def test_jax_nn_dot_product_attention():
  b, t, s, n, h = 2, 6, 9, 4, 16
  q = rand(np.float32, (b, t, n, h), 30)
  k = rand(np.float32, (b, s, n, h), 31)
  v = rand(np.float32, (b, s, n, h), 32)
  mask = rand(np.float32, (b, 1, t, s), 33) > -0.5
  bias = rand(np.float32, (1, n, t, s), 34)
  f = jax.nn.dot_product_attention
  check(lambda q, k, v: f(q, k, v), q, k, v, **TOL)
  check(lambda q, k, v, m: f(q, k, v, mask=m), q, k, v, mask, **TOL)
  check(lambda q, k, v: f(q, k, v, is_causal=True, scale=0.3), q, k, v, **TOL)
  check(lambda q, k, v, bb: f(q, k, v, bias=bb), q, k, v, bias, **TOL)
  check(lambda q, k, v, bb, m: f(q, k, v, bias=bb, mask=m), q, k, v, bias, mask, **TOL)
  # Grouped queries: 4 query heads over 2 key/value heads.
  check(lambda q, k, v: f(q, k, v, is_causal=True), q, k[:, :, :2], v[:, :, :2], **TOL)


def test_flax_and_other_layouts():
  def flax_attention(q, k, v, mask):  # flax.linen.dot_product_attention's order
    q = q / np.float32(np.sqrt(q.shape[-1]))
    w = jnp.einsum("...qhd,...khd->...hqk", q, k)
    w = jnp.where(mask, w, jnp.finfo(w.dtype).min)
    return jnp.einsum("...hqk,...khd->...qhd", jax.nn.softmax(w), v)

  q = rand(np.float32, (2, 5, 3, 8), 40)
  k = rand(np.float32, (2, 7, 3, 8), 41)
  v = rand(np.float32, (2, 7, 3, 12), 42)  # value features differ from the key's
  mask = rand(np.float32, (2, 3, 5, 7), 43) > -1
  check(flax_attention, q, k, v, mask, **TOL)

  def no_batch(q, k, v):  # one head, no batch dims
    return jax.nn.softmax(q @ k.T * 0.25) @ v

  check(no_batch, rand(np.float32, (5, 8), 44), rand(np.float32, (7, 8), 45),
        rand(np.float32, (7, 3), 46), **TOL)

  def groups_as_queries(q, k, v):  # q [b, g, t, d] against shared k/v [b, s, d]
    s = jnp.einsum("bgtd,bsd->bgts", q, k) * 0.5
    return jnp.einsum("bgts,bsd->bgtd", jax.nn.softmax(s, axis=-1), v)

  check(groups_as_queries, rand(np.float32, (2, 3, 4, 8), 47), rand(np.float32, (2, 6, 8), 48),
        rand(np.float32, (2, 6, 8), 49), **TOL)

  def three_batch_dims(q, k, v):
    s = jnp.einsum("abhtd,abhsd->abhts", q, k)
    return jnp.einsum("abhts,abhsd->abhtd", jax.nn.softmax(s, axis=-1), v)

  check(three_batch_dims, rand(np.float32, (2, 2, 3, 4, 8), 50),
        rand(np.float32, (2, 2, 3, 5, 8), 51), rand(np.float32, (2, 2, 3, 5, 8), 52), **TOL)


def test_extreme_scores():
  q, k, v = qkv(1, 2, 4, 6, 8, 60)
  q[0, 0, 0] *= 300.0  # scores in the hundreds: one key takes all
  q[0, 1, 1, 0] = np.nan  # a NaN query row
  k[0, 0, 3] = np.inf
  mask = np.ones((1, 1, 4, 6), bool)
  check(lambda q, k, v, m: attend(q, k, v, m), q, k, v, mask, **TOL)


def test_lookalikes_and_gradient():
  q, k, v = qkv(2, 2, 5, 5, 8, 70)
  mask = np.tril(np.ones((5, 5), bool))[None, None]

  def probs_too(q, k, v, m):  # the probabilities are a result too
    s = jnp.where(m, q @ k.transpose(0, 1, 3, 2), -1e9)
    p = jax.nn.softmax(s, axis=-1)
    return p @ v, p

  def negative_scale(q, k, v, m):
    return attend(q, k, v, m) + jax.nn.softmax(q @ k.transpose(0, 1, 3, 2) * -0.5, axis=-1) @ v

  def softmax_over_queries(q, k, v):
    return jax.nn.softmax(q @ k.transpose(0, 1, 3, 2), axis=-2) @ v

  check(probs_too, q, k, v, mask, **TOL)
  check(negative_scale, q, k, v, mask, **TOL)
  check(softmax_over_queries, q, k, v, **TOL)
  check(jax.grad(lambda q, k, v, m: jnp.sum(attend(q, k, v, m) ** 2), argnums=(0, 1, 2)),
        q, k, v, mask, rtol=1e-4, atol=1e-5)
  check(jax.jit(jax.vmap(lambda q, k, v, m: attend(q, k, v, m), in_axes=(0, 0, 0, None))),
        q[None].repeat(2, 0), k[None].repeat(2, 0), v[None].repeat(2, 0), mask, **TOL)


@pytest.mark.parametrize("d", [64, 128])
@pytest.mark.parametrize("t", [1, 3, 12])
def test_head_sizes_the_kernels_take(t, d):
  # MLX's fused kernels take these head sizes (Metal: vector kernel under 9 queries, tiled
  # kernel above; CUDA: its f32 vector kernel without a mask, under 4 queries).
  q, k, v = qkv(2, 2, t, 24, d, 80 + t + d)
  check(lambda q, k, v: jax.nn.softmax(q @ k.transpose(0, 1, 3, 2) / 8.0, axis=-1) @ v,
        q, k, v, **TOL)
  mask = np.arange(24) <= np.arange(t)[:, None] + 12
  check(lambda q, k, v, m: attend(q, k, v, m), q, k, v, mask, **TOL)


def test_empty_operands():
  f = lambda q, k, v, m: attend(q, k, v, m)  # noqa: E731
  q, k, v = qkv(1, 2, 3, 4, 8, 90)
  check(f, q[:, :, :0], k, v, np.ones((1, 1, 0, 4), bool), **TOL)  # no queries
  check(f, q, k[:, :, :0], v[:, :, :0], np.ones((1, 1, 3, 0), bool), **TOL)  # no keys: zeros


def test_a_hand_written_call_without_its_attributes_is_an_error(fast_attention):
  # @jaxmlx.attention is ours; a program that calls it without the pass's attributes gets a
  # compile error naming it, not a crash.
  from tests.stablehlo_text import run_stablehlo
  text = """module @m {
    func.func public @main(%q: tensor<1x2x3x8xf32>, %k: tensor<1x2x4x8xf32>,
                           %v: tensor<1x2x4x8xf32>) -> tensor<1x2x3x8xf32> {
      %0 = stablehlo.custom_call @jaxmlx.attention(%q, %k, %v)
          : (tensor<1x2x3x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>) -> tensor<1x2x3x8xf32>
      return %0 : tensor<1x2x3x8xf32>
    }
  }"""
  q, k, v = qkv(1, 2, 3, 4, 8, 95)
  with pytest.raises(Exception, match="attention"):
    run_stablehlo(text, "mlx", q, k, v)
