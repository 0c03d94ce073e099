"""Gradients of layer norms and RMS norms (src/passes/norm_grads.cc: the input gradient jax's
autodiff writes becomes MLX's normalization VJP, src/lower/norms.cc; src/passes/norm_scales.cc:
in training the scale and bias go into the kernel, their gradients into the VJP) against
jax's CPU backend,
and which programs the rewrite takes (jaxmlx-dump --passes=gpu: the rewrites of a GPU compile,
on jax's own serialized program).

Values run with JAXMLX_FAST_KERNELS=1 (the rewrite, on whatever device this is), =0 (jax's own
chain) and with every recognizer off, as tests/ops/test_norms.py does; its rows (moderate
values, a NaN, a constant row, a mean 30x the spread, zeros), with the row whose squares
overflow f32 made one whose squares nearly do: past that, jax's gradient is 0 and MLX's CUDA
RMS-norm VJP NaN (passes/norm_grads.h).
"""

from __future__ import annotations

import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from tests.ops.edge_values import rand
from tests.ops.harness import check
from tests.ops.rewrites import calls, rewritten
from tests.ops.test_norms import D, flax_layer_norm, layer_norm, params, rms_norm, rows


@pytest.fixture(params=["1", "0", "off"], ids=["fast", "chain", "unrecognized"])
def fast_norms(request, monkeypatch):
  if request.param == "off":
    monkeypatch.setenv("JAXMLX_RECOGNIZE", "0")
  monkeypatch.setenv("JAXMLX_FAST_KERNELS", "1" if request.param == "off" else request.param)
  return request.param


def centred_once(x, g, b):  # `x - mean` written once, jnp.square
  c = x - jnp.mean(x, -1, keepdims=True)
  return c * jax.lax.rsqrt(jnp.mean(jnp.square(c), -1, keepdims=True) + 1e-5) * g + b


def pre_norm_block(p, x):  # two norms on a residual stream: their gradients share one add tree
  h = x + jnp.tanh(layer_norm(x, p["g1"], p["b1"]) @ p["w"])
  return h + jax.nn.gelu(layer_norm(h, p["g2"], p["b2"]) @ p["w"])


def block_params():
  g, b = params()
  return {"g1": g, "b1": b, "g2": g[::-1].copy(), "b2": b[::-1].copy(),
          "w": rand(np.float32, (D, D), 65, scale=0.125)}


def grad_rows():
  x = rows()
  x[1, 4, ::2] = 1e17
  x[1, 4, 1::2] = -3e17
  return x


def cotangent(shape):
  return rand(np.float32, shape, 66, scale=1.5)


def vjp(f):
  """x, dy -> the gradient of f at x for the cotangent dy (f's other inputs fixed)."""
  return lambda x, dy, *rest: jax.vjp(lambda x: f(x, *rest), x)[1](dy)[0]


def test_layer_norm_input_gradient(fast_norms):
  g, b = params()
  x = grad_rows()
  dy = cotangent(x.shape)
  for f in (layer_norm, centred_once, flax_layer_norm):
    check(vjp(f), x, dy, g, b, rtol=2e-5, atol=1e-4)
  check(vjp(lambda x: layer_norm(x, 1.0, 0.0)), x, dy, rtol=2e-5, atol=1e-4)


def test_rms_norm_input_gradient(fast_norms):
  g, _ = params()
  x = grad_rows()
  check(vjp(rms_norm), x, cotangent(x.shape), g, rtol=2e-5, atol=1e-4)


def scale_rows(shape=(3, 6, D)):
  """grad_rows' kinds of rows without its NaN (which would make every scale gradient NaN)."""
  x = grad_rows()
  x[0, 1, 5] = 2.5
  return np.resize(x, shape).astype(np.float32)


@pytest.mark.parametrize("shape", [(3, 6, D), (5, D), (2, 1, 3, D), (D,)], ids=str)
def test_scale_and_bias_gradients(fast_norms, shape):
  g, b = params()
  x = scale_rows(shape)
  dy = cotangent(shape)
  every = lambda f, *p: lambda x, dy: jax.vjp(f, x, *p)[1](dy)  # noqa: E731
  check(every(layer_norm, g, b), x, dy, rtol=2e-5, atol=1e-4)
  check(every(centred_once, g, b), x, dy, rtol=2e-5, atol=1e-4)
  check(every(rms_norm, g), x, dy, rtol=2e-5, atol=1e-4)
  # Training: the forward values are used too (the scale and bias go into the forward call).
  for f in (layer_norm, centred_once):
    loss = lambda x, g, b, dy: jnp.sum(jnp.sin(f(x, g, b)) * dy)  # noqa: E731
    check(jax.grad(loss, argnums=(0, 1, 2)), x, g, b, dy, rtol=2e-5, atol=1e-4)
  loss = lambda x, g, dy: jnp.sum(jnp.sin(rms_norm(x, g)) * dy)  # noqa: E731
  check(jax.grad(loss, argnums=(0, 1)), x, g, dy, rtol=2e-5, atol=1e-4)
  # Only the scale's gradient: no input gradient to fold it into.
  check(lambda x, dy: jax.vjp(lambda g: layer_norm(x, g, b), g)[1](dy), x, dy, rtol=2e-5,
        atol=1e-4)


def test_scale_gradients_of_norms_in_a_scan_and_sharing_a_scale(fast_norms):
  # Ordinary rows: through a constant row (variance 0) jax's own gradient is 1/sqrt(eps) times
  # its rounding, and three scan steps compound that.
  x = rand(np.float32, (4, 6, D), 67, scale=2.0)
  g, b = params()

  def scanned(g, x):  # the forward and backward norms in two loop bodies
    def body(h, _):
      h = h + jnp.tanh(layer_norm(h, g, b))
      return h, jnp.sum(h)
    return jax.lax.scan(body, x, None, length=3)[1].sum()

  def tied(g, x):  # two norms, one scale: its gradient is the sum of theirs
    h = jnp.sin(layer_norm(x, g, b))
    return jnp.sum(rms_norm(h, g) * h)

  for f in (scanned, tied):
    check(jax.grad(f, argnums=(0, 1)), g, x, rtol=2e-5, atol=2e-4)


def test_parameter_gradients_of_a_pre_norm_block(fast_norms):
  x = rand(np.float32, (2, 5, D), 64, scale=2.0)
  x[1, 2] += 40.0  # a row whose mean dwarfs its spread
  dy = cotangent(x.shape)
  loss = lambda p, x: jnp.sum(pre_norm_block(p, x) * dy)  # noqa: E731
  check(lambda p, x: jax.grad(loss, argnums=(0, 1))(p, x), block_params(), x, rtol=2e-5,
        atol=1e-4)


@pytest.mark.parametrize("shape", [(D,), (1, D), (2, 1, 3, D)], ids=str)
def test_norm_gradient_shapes(shape, monkeypatch):
  monkeypatch.setenv("JAXMLX_FAST_KERNELS", "1")
  g, b = params()
  x = rand(np.float32, shape, 63, scale=2.0)
  dy = cotangent(shape)
  check(lambda x, dy: (vjp(layer_norm)(x, dy, g, b), vjp(rms_norm)(x, dy, g)), x, dy,
        rtol=2e-5, atol=1e-4)


# ---- which programs are rewritten ---------------------------------------------------------------
def f32(*shape):
  return jnp.zeros(shape, jnp.float32)


def test_training_norms_become_the_kernels_and_their_gradients():
  x, dy, g, b = f32(2, 8, D), f32(2, 8, D), f32(D), f32(D)
  # The norm with its gradient: the forward chain is then read by itself only, so it is a call.
  text = rewritten(lambda x, g, b: jax.grad(lambda x, g, b: jnp.sum(layer_norm(x, g, b) ** 2),
                                            argnums=(0, 1, 2))(x, g, b), x, g, b)
  assert calls(text) == {"jaxmlx.layer_norm": 1, "jaxmlx.layer_norm_dx": 1}
  # The scale and bias went into the norm's call, their gradients into the VJP's, which reads
  # the cotangent before the scale (norm_scales.h)...
  assert "has_scale = true, has_bias = true} : (tensor<2x8x64xf32>, tensor<64xf32>, " in text
  assert re.search(r"%\d+, %\d+, %\d+ = stablehlo.custom_call\(%\d+, %\d+, %\d+, %\d+\) "
                   r'\{call_target_name = "jaxmlx.layer_norm_dx"', text)
  # ...so every sum of the backward pass went into the call, and no product of x-shaped values
  # is left but the loss's square and its derivative's two.
  assert "}) : (tensor<2x8x64xf32>, tensor<f32>)" not in text
  assert text.count("stablehlo.multiply") <= 3, text
  # An RMS norm's scale likewise.
  text = rewritten(lambda x, g: jax.grad(lambda x, g: jnp.sum(rms_norm(x, g) ** 2),
                                         argnums=(0, 1))(x, g), x, g)
  assert calls(text) == {"jaxmlx.rms_norm": 1, "jaxmlx.rms_norm_dx": 1}
  assert text.count("has_scale = true") == 2
  # The input gradient alone: nothing of the forward pass is left.
  assert calls(rewritten(vjp(centred_once), x, dy, g, b)) == {"jaxmlx.layer_norm_dx": 1}
  assert calls(rewritten(vjp(rms_norm), x, dy, g)) == {"jaxmlx.rms_norm_dx": 1}
  # Two norms on a residual stream: the second's gradient is one term of the stream's add tree.
  p = jax.tree.map(jnp.asarray, block_params())
  text = rewritten(lambda p, x: jax.grad(lambda p, x: jnp.sum(pre_norm_block(p, x)),
                                         argnums=(0, 1))(p, x), p, x)
  assert calls(text).get("jaxmlx.layer_norm_dx") == 2
  assert text.count("has_scale = true") == 4


def test_scale_lookalikes_keep_the_scale_outside():
  x, g, b = f32(2, 8, D), f32(D), f32(D)

  def forward_also_returned(x, g, b):  # the normalized values are read a third time
    def f(x, g):
      n = layer_norm(x, 1.0, 0.0)
      return jnp.sum(n * g + b), n
    return jax.grad(f, argnums=(0, 1), has_aux=True)(x, g)

  def scale_gradient_only(x, g, b):
    return jax.grad(lambda g: jnp.sum(layer_norm(x, g, b) ** 2))(g)

  def per_position_scale(x, g, b):  # a scale of [8, D]: not the norm's 1-D scale
    return jax.grad(lambda x, w: jnp.sum(layer_norm(x, w, b) ** 2), argnums=(0, 1))(
        x, jnp.broadcast_to(g, (8, D)))

  def scanned(x, g, b):  # forward and backward in two loop bodies
    def body(h, _):
      return h + jnp.tanh(layer_norm(h, g, b)), None
    return jax.grad(lambda g: jnp.sum(jax.lax.scan(body, x, None, length=2)[0]))(g)

  for f in (forward_also_returned, scale_gradient_only, per_position_scale, scanned):
    text = rewritten(f, x, g, b)
    assert "has_scale = true" not in text, f.__name__


def test_gradient_lookalikes_stay_as_jax_wrote_them():
  x, dy, g, b = f32(2, 8, D), f32(2, 8, D), f32(D), f32(D)

  def var_norm(x):  # jnp.var's own mean and its ddof select
    return (x - x.mean(-1, keepdims=True)) * jax.lax.rsqrt(jnp.var(x, -1, keepdims=True) + 1e-5)

  def times_itself(x):  # c * c: the product's two terms read one broadcast
    c = x - x.mean(-1, keepdims=True)
    return c * jax.lax.rsqrt((c * c).mean(-1, keepdims=True) + 1e-5)

  def first_axis(x):
    mean = x.mean(0, keepdims=True)
    return (x - mean) * jax.lax.rsqrt(((x - mean) ** 2).mean(0, keepdims=True) + 1e-5)

  def sample_variance(x):  # divides the squares' sum by N - 1: another function
    c = x - x.mean(-1, keepdims=True)
    return c * jax.lax.rsqrt(jnp.sum(c ** 2, -1, keepdims=True) / (D - 1) + 1e-5)

  for f in (var_norm, times_itself, first_axis, sample_variance):
    assert "_dx" not in str(calls(rewritten(vjp(lambda x: f(x)), x, dy))), f.__name__
  # flax's order (the scale inside the reciprocal): its cotangent never meets BACK(rsqrt) alone.
  assert "jaxmlx.layer_norm_dx" not in calls(rewritten(vjp(flax_layer_norm), x, dy, g, b))
  # The forward mean also returned: the gradient is still the call, the forward chain stays.
  def with_mean(x, dy):
    mean = x.mean(-1, keepdims=True)
    return vjp(lambda x: layer_norm(x, 1.0, 0.0))(x, dy), mean
  assert calls(rewritten(with_mean, x, dy)) == {"jaxmlx.layer_norm_dx": 1}
