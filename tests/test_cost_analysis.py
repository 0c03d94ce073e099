"""`compiled.cost_analysis()` (PJRT_Executable_GetCostAnalysis, src/ir/cost.h) against jax's CPU
backend on the same programs: flops and transcendentals as XLA's HloCostAnalysis counts them.

Programs of one kind of op each (where XLA's optimizations leave the count alone) must match
exactly; a training step within a few percent (XLA's simplifier drops a multiply by ones).
"bytes accessed" is counted before fusion by us and after it by XLA: equal for a single op,
larger for a chain."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax

X = np.ones((8, 16), np.float32)
Y = np.ones((16, 4), np.float32)
IDX = np.array([0, 3, 7, 2, 5], np.int32)
IMG = np.ones((2, 8, 8, 3), np.float32)
KER = np.ones((3, 3, 3, 4), np.float32)
NHWC = ("NHWC", "HWIO", "NHWC")


def cost(f, platform, *args):
  dev = jax.devices(platform)[0]
  compiled = jax.jit(f).lower(*[jax.device_put(a, dev) for a in args]).compile()
  c = compiled.cost_analysis()
  if isinstance(c, list):  # older jax: one dict per program
    c = c[0]
  return c


EXACT = {
    "matmul": (lambda x, y: x @ y, X, Y),
    "batched_dot": (lambda a, b: jnp.einsum("bij,bjk->bik", a, b),
                    np.ones((3, 4, 5), np.float32), np.ones((3, 5, 6), np.float32)),
    "dot_tanh_sum": (lambda x, y: jnp.tanh(x @ y).sum() + 1.0, X, Y),
    "exp_log": (lambda x: jnp.log(jnp.exp(x) + 1), X),
    "sqrt_rsqrt": (lambda x: jnp.sqrt(x) + lax.rsqrt(x), X),
    "integer_ops": (lambda a: (a * 3 + 1) >> 2, np.ones((8, 16), np.int32)),
    "compare_select": (lambda x, y: jnp.where(x > y, x, y), X, X * 2),
    "sum_axis": (lambda x: x.sum(0), X),
    "max_axis": (lambda x: x.max(1), X),
    "argmax": (lambda x: jnp.argmax(x, 1), X),
    "sort": (lambda x: jnp.sort(x, 1), X),
    "scatter_add": (lambda x, i: x.at[i].add(1.0), X, IDX),
    "maxpool": (lambda x: lax.reduce_window(x, -jnp.inf, lax.max, (2, 2), (2, 2), "VALID"), X),
    "cumsum": (lambda x: jnp.cumsum(x, 1), X),
    "sigmoid": (jax.nn.sigmoid, X),
    "softmax": (jax.nn.softmax, X),
    "cond": (lambda x: lax.cond(x[0, 0] > 0, jnp.exp, lambda a: a * 2 + 1, x), X),
    "fori_loop": (lambda x: lax.fori_loop(0, 10, lambda i, a: a * 2.0 + 1.0, x), X),
    "conv_same": (lambda a, b: lax.conv_general_dilated(a, b, (1, 1), "SAME",
                                                        dimension_numbers=NHWC), IMG, KER),
    "conv_strided": (lambda a, b: lax.conv_general_dilated(a, b, (2, 2), "SAME",
                                                           dimension_numbers=NHWC), IMG, KER),
    "conv_input_dilated": (lambda a, b: lax.conv_general_dilated(
        a, b, (1, 1), ((1, 1), (1, 1)), lhs_dilation=(2, 2), dimension_numbers=NHWC), IMG, KER),
    "conv_groups": (lambda a, b: lax.conv_general_dilated(
        a, b, (1, 1), "VALID", feature_group_count=2, dimension_numbers=NHWC),
        np.ones((2, 8, 8, 4), np.float32), np.ones((3, 3, 2, 6), np.float32)),
}


@pytest.mark.parametrize("name", EXACT)
def test_flops_and_transcendentals_as_xla_counts_them(name):
  f, *args = EXACT[name]
  want, got = cost(f, "cpu", *args), cost(f, "mlx", *args)
  assert want.get("flops", 0.0) > 0 or want.get("transcendentals", 0.0) > 0, want
  for key in ("flops", "transcendentals"):
    assert got[key] == want.get(key, 0.0), (key, got, want)


def test_training_step_flops_within_a_few_percent():
  def loss(w, x):
    return jnp.mean((jnp.tanh(x @ w["a"]) @ w["b"]) ** 2)

  w = {"a": np.ones((16, 32), np.float32), "b": np.ones((32, 4), np.float32)}
  step = jax.grad(loss)
  want, got = cost(step, "cpu", w, X), cost(step, "mlx", w, X)
  assert got["flops"] == pytest.approx(want["flops"], rel=0.05), (got, want)
  assert got["transcendentals"] == want["transcendentals"], (got, want)


def test_bytes_accessed_of_single_ops():
  # One op each: what it reads and writes, as XLA counts it.
  for f, *args in ((lambda x, y: x @ y, X, Y), (lambda x, y: x + y, X, X),
                   (lambda x: x.sum(0), X)):
    want, got = cost(f, "cpu", *args), cost(f, "mlx", *args)
    assert got["bytes accessed"] == want["bytes accessed"], (got, want)


def test_mfu_style_use():
  # What a training script does with it: flops of the step over its time.
  analysis = cost(lambda x, y: x @ y, "mlx", X, Y)
  assert analysis["flops"] == 2 * 8 * 16 * 4
  assert set(analysis) == {"flops", "transcendentals", "bytes accessed"}
