"""Layer norms and RMS norms (src/passes/norms.cc: jax's f32 chains over the last dim become
MLX's fused normalization kernels, src/lower/norms.cc) against jax's CPU backend.

The pass runs by default on a GPU only (MLX has no CPU kernel for them), so every case runs with
JAXMLX_FAST_KERNELS=1 (the rewrite, on whatever device this is), =0 (jax's own chain) and with
every recognizer off (JAXMLX_RECOGNIZE=0: jax's own chain though the kernels are asked for). The
rows: moderate values, a NaN, a constant row (zero variance: the result is the bias), a mean 30x
the spread, values whose squares overflow (variance +inf), zeros.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from tests.ops.edge_values import rand
from tests.ops.harness import check

D = 64


@pytest.fixture(params=["1", "0", "off"], ids=["fast", "chain", "unrecognized"], autouse=True)
def fast_norms(request, monkeypatch):
  if request.param == "off":  # every recognizer off, the norm kernels asked for
    monkeypatch.setenv("JAXMLX_RECOGNIZE", "0")
  monkeypatch.setenv("JAXMLX_FAST_KERNELS", "1" if request.param == "off" else request.param)
  return request.param


def rows():
  x = rand(np.float32, (3, 6, D), 60, scale=3.0)
  x[0, 1, 5] = np.nan
  x[0, 2, :] = 0.75
  x[1, 3, :] += 90.0
  x[1, 4, ::2] = 1e20
  x[1, 4, 1::2] = -3e20
  x[2, 5, :] = 0.0
  return x


def params():
  return rand(np.float32, (D,), 61, scale=2.0), rand(np.float32, (D,), 62)


# The forms users write (each a fresh function per call: jit caches per function, and the
# environment is read at compile time).
def layer_norm(x, g, b):  # bench/workloads/transformer.py's
  mean = x.mean(-1, keepdims=True)
  var = ((x - mean) ** 2).mean(-1, keepdims=True)
  return (x - mean) * jax.lax.rsqrt(var + 1e-5) * g + b


def flax_layer_norm(x, g, b):  # flax.linen.LayerNorm(use_fast_variance=False)'s order
  mean = jnp.mean(x, -1, keepdims=True)
  var = jnp.mean(jnp.square(x - mean), -1, keepdims=True)
  mul = jax.lax.rsqrt(var + 1e-6) * g
  return (x - mean) * mul + b


def rms_norm(x, w):  # Llama's
  return x * jax.lax.rsqrt(jnp.mean(jnp.square(x), -1, keepdims=True) + 1e-6) * w


def test_layer_norm():
  g, b = params()
  check(lambda x, g, b: layer_norm(x, g, b), rows(), g, b, rtol=1e-5, atol=3e-5)
  check(lambda x, g, b: flax_layer_norm(x, g, b), rows(), g, b, rtol=1e-5, atol=3e-5)
  check(lambda x: layer_norm(x, 1.0, 0.0), rows(), rtol=1e-5, atol=3e-5)


def test_rms_norm():
  g, _ = params()
  check(lambda x, w: rms_norm(x, w), rows(), g, rtol=1e-5, atol=3e-5)
  check(lambda x: rms_norm(x, 1.0), rows(), rtol=1e-5, atol=3e-5)


@pytest.mark.parametrize("dtype", [jnp.bfloat16, np.float16], ids=["bf16", "f16"])
def test_low_precision_rms_norm_computed_in_f32(dtype):
  # Llama's: the f32 norm rounded to the input's type, times the scale (MLX's kernel too).
  def llama_rms(x, w):
    x32 = x.astype(jnp.float32)
    y = x32 * jax.lax.rsqrt(jnp.mean(jnp.square(x32), -1, keepdims=True) + 1e-5)
    return y.astype(x.dtype) * w

  x = rows()
  x[1, 4, :] = 3e4  # squares overflow f16 but not the f32 they are computed in
  x = x.astype(dtype)
  w = params()[0].astype(dtype)
  check(lambda x, w: llama_rms(x, w), x, w)
  check(lambda x: llama_rms(x, jnp.ones((), x.dtype)).astype(jnp.float32), x)


@pytest.mark.parametrize("shape", [(D,), (1, D), (2, 1, 3, D)], ids=str)
def test_norm_shapes(shape):
  x = rand(np.float32, shape, 63, scale=2.0)
  g, b = params()
  check(lambda x, g, b: (layer_norm(x, g, b), rms_norm(x, g)), x, g, b, rtol=1e-5, atol=3e-5)


def test_norm_lookalikes_keep_their_own_meaning():
  # One step away from a norm: the sample variance (ddof=1), a norm over the first axis, flax's
  # fast variance (E[x^2] - E[x]^2), the mean also returned, a bfloat16 norm.
  x = rows()
  x[np.isnan(x)] = 1.0
  x[np.abs(x) > 1e10] = 2.0
  x[1, 3, :] -= 90.0  # E[x^2] - E[x]^2 loses the digits that sum orders differ in
  g, b = params()

  def ddof1(x):
    mean = x.mean(-1, keepdims=True)
    return (x - mean) * jax.lax.rsqrt(x.var(-1, ddof=1, keepdims=True) + 1e-5)

  def first_axis(x):
    mean = x.mean(0, keepdims=True)
    var = ((x - mean) ** 2).mean(0, keepdims=True)
    return (x - mean) * jax.lax.rsqrt(var + 1e-5)

  def fast_variance(x):
    mean = x.mean(-1, keepdims=True)
    var = jnp.maximum(0.0, (x * x).mean(-1, keepdims=True) - mean * mean)
    return (x - mean) * jax.lax.rsqrt(var + 1e-5)

  def with_mean(x, g, b):  # the norm's own mean is a result too
    mean = x.mean(-1, keepdims=True)
    var = ((x - mean) ** 2).mean(-1, keepdims=True)
    return (x - mean) * jax.lax.rsqrt(var + 1e-5) * g + b, mean

  check(lambda x: (ddof1(x), first_axis(x), fast_variance(x)), x, rtol=1e-5, atol=3e-5)
  check(lambda x, g, b: with_mean(x, g, b), x, g, b, rtol=1e-5, atol=3e-5)
  check(lambda x, g, b: layer_norm(x.astype(jnp.bfloat16), g.astype(jnp.bfloat16),
                                   b.astype(jnp.bfloat16)), x, g, b)


def test_pre_norm_block_and_its_gradient():
  # A pre-LN residual block, inferred (the norms become calls) and trained (the backward pass
  # reads the norms' intermediates, so the chains stay).
  g, b = params()
  p = {"g1": g, "b1": b, "w": rand(np.float32, (D, D), 65, scale=0.125), "g2": g[::-1].copy()}
  x = rand(np.float32, (2, 5, D), 64, scale=2.0)

  def block(p, x):
    h = x + jax.nn.gelu(layer_norm(x, p["g1"], p["b1"]) @ p["w"])
    return rms_norm(h, p["g2"])

  check(lambda p, x: block(p, x), p, x, rtol=2e-5)
  check(lambda p, x: jax.grad(lambda p: block(p, x).sum())(p), p, x, rtol=2e-5, atol=2e-5)
