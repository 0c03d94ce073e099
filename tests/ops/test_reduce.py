"""Differential tests of stablehlo.reduce (src/lower/reduce.cc) against jax's CPU backend.

sum/prod/max/min/any/all over axes and keepdims on every dtype; empty reductions (result =
init); non-identity init values; integer sums and products that wrap; NaN propagation in
max/min; argmax/argmin with NaN (NaN wins) and ties (smallest index); bitwise and/or/xor
reductions and custom variadic bodies (the tree-reduction path).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax

from tests.ops.edge_values import values
from tests.ops.edge_values import rand as edge_rand
from tests.ops.harness import check
from tests.ops.rewrites import calls, rewritten

INTS = [np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32, np.uint64]
FLOATS = [np.float16, jnp.bfloat16, np.float32]
NUMERIC = INTS + FLOATS + [np.complex64]
AXES = [None, 0, 1, 2, (0, 2), (1, 2), ()]


def ids(dts):
  return [np.dtype(d).name for d in dts]


def up(f):
  """Returns bf16 results as f32 (exact): the harness compares bf16 bit for bit, but XLA's CPU
  rounds bf16 sums to bf16 after every add while we round once, so sums differ by a few ULP."""
  def g(*args):
    return jax.tree_util.tree_map(
        lambda r: r.astype(jnp.float32) if r.dtype == jnp.bfloat16 else r, f(*args))
  return g



def rand(dt, shape, seed=0, lo=-8, hi=9):
  """Moderate values (no overflow in floats), positive-only for unsigned types."""
  return edge_rand(dt, shape, seed, lo, hi, scale=2.0)


# ---- the common reductions over axes ----------------------------------------------------------


@pytest.mark.parametrize("axis", AXES, ids=str)
@pytest.mark.parametrize("dt", NUMERIC, ids=ids(NUMERIC))
def test_sum(dt, axis):
  x = rand(dt, (3, 4, 5))
  # Keep the result dtype equal to the input's (jnp.sum would widen small ints).
  # XLA's CPU rounds half-float sums to the half type after every add; we accumulate in f32
  # and round once, so half-float sums may differ by a few ULP of the result.
  loose = {jnp.bfloat16: 5e-2, np.float16: 5e-3}.get(dt)
  check(up(lambda a: jnp.sum(a, axis=axis, dtype=a.dtype)), x, rtol=loose, atol=loose)


@pytest.mark.parametrize("axis", [None, 0, (1, 2)], ids=str)
@pytest.mark.parametrize("dt", NUMERIC, ids=ids(NUMERIC))
def test_prod(dt, axis):
  x = rand(dt, (3, 4, 5), 1, -2, 3)
  if np.dtype(dt).kind in "fc":
    x = (1 + x / 8).astype(dt)
  bf16 = dt == jnp.bfloat16
  check(up(lambda a: jnp.prod(a, axis=axis, dtype=a.dtype)), x, rtol=2e-2 if bf16 else None,
        atol=5e-2 if bf16 else None)


@pytest.mark.parametrize("axis", [None, 0, 2, (0, 1)], ids=str)
@pytest.mark.parametrize("dt", INTS + FLOATS + [np.bool_], ids=ids(INTS + FLOATS + [np.bool_]))
def test_max_min(dt, axis):
  x = values(dt, (3, 4, 5), 2)
  # Compared through f32 for bf16: XLA and MLX may pick either of max(-0.0, +0.0).
  check(up(lambda a: (jnp.max(a, axis=axis), jnp.min(a, axis=axis))), x)


@pytest.mark.parametrize("axis", [None, 0, 1, (0, 1)], ids=str)
def test_any_all(axis):
  x = rand(np.bool_, (4, 6))
  x[2] = True
  x[:, 3] = False
  check(lambda a: (jnp.any(a, axis=axis), jnp.all(a, axis=axis)), x)


@pytest.mark.parametrize("fn", ["sum", "max", "min", "prod", "any"])
def test_keepdims(fn):
  x = rand(np.float32, (2, 3, 4)) if fn != "any" else rand(np.bool_, (2, 3, 4))
  f = getattr(jnp, fn)
  check(lambda a: (f(a, axis=1, keepdims=True), f(a, axis=(0, 2), keepdims=True),
                   f(a, keepdims=True)), x)


def test_mean():
  x = rand(np.float32, (5, 7))
  check(lambda a: (jnp.mean(a, 0), jnp.mean(a, 1, keepdims=True)), x, rtol=1e-5)


# ---- empty reductions, init values -----------------------------------------------------------


@pytest.mark.parametrize("dt", [np.float32, np.int32, np.uint8, jnp.bfloat16],
                         ids=ids([np.float32, np.int32, np.uint8, jnp.bfloat16]))
def test_empty_reductions(dt):
  x = np.zeros((0, 3), dt)
  check(lambda a: (jnp.sum(a, 0, dtype=a.dtype), jnp.prod(a, 0, dtype=a.dtype),
                   jnp.max(a, 0, initial=np.array(5, dt)), jnp.min(a, 0, initial=np.array(3, dt)),
                   jnp.sum(a, (0, 1), dtype=a.dtype)), x)


def test_empty_bool_and_argmax_free_axis():
  check(lambda a: (jnp.any(a, 0), jnp.all(a, 0), jnp.sum(a.astype(jnp.int32), 1)),
        np.zeros((0, 4), bool))


@pytest.mark.parametrize("init", [0.0, 5.0, -0.0, np.inf, np.nan])
def test_add_init(init):
  x = rand(np.float32, (4, 5))
  check(lambda a: lax.reduce(a, np.float32(init), lax.add, (0,)), x)


@pytest.mark.parametrize("init", [7, -3])
def test_int_inits(init):
  x = rand(np.int32, (4, 5))
  check(lambda a: (lax.reduce(a, np.int32(init), lax.add, (1,)),
                   lax.reduce(a, np.int32(init), lax.max, (0,)),
                   lax.reduce(a, np.int32(init), lax.min, (0, 1)),
                   lax.reduce(a, np.int32(init), lax.mul, (1,))), x)


def test_max_with_initial():
  x = rand(np.float32, (3, 4))
  check(lambda a: (jnp.max(a, 0, initial=1.0), jnp.min(a, 1, initial=-1.0)), x)


def test_reduce_no_axes():
  x = rand(np.float32, (3, 4))
  check(lambda a: (lax.reduce(a, np.float32(1), lax.add, ()),
                   lax.reduce(a, np.float32(0), lax.max, ())), x)


# ---- integer wrap-around ------------------------------------------------------------------


@pytest.mark.parametrize("dt", INTS, ids=ids(INTS))
def test_int_sum_wraps(dt):
  info = np.iinfo(dt)
  x = np.full((7, 3), info.max, dt)
  x[0] = info.min
  x[1] = info.max // 3
  check(lambda a: (lax.reduce(a, dt(0), lax.add, (0,)), lax.reduce(a, dt(0), lax.add, (0, 1)),
                   lax.reduce(a, dt(1), lax.mul, (0,))), x)


def test_int32_sum_large():
  x = np.full((1000,), 2**30, np.int32)
  check(lambda a: (lax.reduce(a, np.int32(0), lax.add, (0,)), jnp.sum(a, dtype=jnp.int32),
                   jnp.sum(a)), x)


# ---- NaN, inf, signed zero ------------------------------------------------------------------


@pytest.mark.parametrize("dt", FLOATS, ids=ids(FLOATS))
def test_nan_propagation(dt):
  x = rand(dt, (4, 5))
  x[1, 2] = np.nan
  x[3, 0] = np.inf
  x[0, 4] = -np.inf
  bf16 = dt == jnp.bfloat16
  check(up(lambda a: (jnp.max(a, 0), jnp.min(a, 0), jnp.max(a, 1), jnp.min(a, 1), jnp.sum(a, 0),
                      jnp.prod(a, 1), jnp.max(a), jnp.min(a))), x,
        rtol=2e-2 if bf16 else None, atol=5e-2 if bf16 else None)


def test_all_nan_and_inf():
  x = np.array([[np.nan, np.nan], [np.inf, -np.inf], [-0.0, 0.0]], np.float32)
  check(lambda a: (jnp.max(a, 1), jnp.min(a, 1), jnp.sum(a, 1), jnp.max(a, 0)), x)


# ---- argmax / argmin ------------------------------------------------------------------------

ARG_DTS = [np.float32, np.float16, jnp.bfloat16, np.int32, np.uint8, np.int64, np.bool_]


@pytest.mark.parametrize("axis", [None, 0, 1])
@pytest.mark.parametrize("dt", ARG_DTS, ids=ids(ARG_DTS))
def test_argmax_argmin(dt, axis):
  x = rand(dt, (5, 6), 3, -3, 3)  # small range: many ties
  check(lambda a: (jnp.argmax(a, axis=axis), jnp.argmin(a, axis=axis)), x)


@pytest.fixture(params=["on", "off"])
def recognizers(request, monkeypatch):
  """Runs a test with the recognizers (passes/argminmax, softmax, norms) on and with
  JAXMLX_RECOGNIZE=0 (jax's literal op chains)."""
  if request.param == "off":
    monkeypatch.setenv("JAXMLX_RECOGNIZE", "0")
  return request.param


@pytest.mark.parametrize("axis", [0, 1])
def test_argmax_nan_wins(axis, recognizers):
  x = np.array([[1.0, np.nan, 3.0, np.nan], [np.inf, 2.0, np.inf, -np.inf],
                [-np.inf, -np.inf, -np.inf, -np.inf], [np.nan, 0.0, -0.0, 0.0],
                [5.0, 5.0, np.nan, 5.0]], np.float32)
  check(lambda a: (jnp.argmax(a, axis=axis), jnp.argmin(a, axis=axis)), x)


@pytest.mark.parametrize("dt", [np.float32, np.float16, jnp.bfloat16],
                         ids=ids([np.float32, np.float16, jnp.bfloat16]))
def test_argmax_signed_zero_ties_and_nans(dt, recognizers):
  # The recognized argmax orders integer keys (lower/reduce.cc, argminmax_keys): -0 and +0 are
  # one key (the first zero is the extreme, as jax compares them equal), a NaN of either sign
  # wins both ways, -inf and +inf and the values next to zero keep their order (f16's smallest
  # subnormal; f32's smallest normal for f32 and bf16, whose denormals jax's CPU flushes).
  tiny = np.finfo(np.float16).smallest_subnormal if dt == np.float16 else np.finfo(np.float32).tiny
  x = np.array([[-0.0, 0.0, -1.0, -0.0], [0.0, -0.0, 1.0, 0.0], [-0.0, -0.0, -0.0, 0.0],
                [-np.inf, np.inf, -np.nan, np.inf], [tiny, -tiny, 0.0, -0.0],
                [-3.0, -3.0, -np.inf, np.nan]], np.float32).astype(dt)
  check(lambda a: (jnp.argmax(a, axis=1), jnp.argmin(a, axis=1), jnp.argmax(a, axis=0),
                   jnp.argmin(a, axis=0), jnp.max(a, axis=1)), x)


@pytest.mark.parametrize("n", [1, 2, 3, 7, 8, 9, 33, 1000])
def test_argmax_lengths(n):
  x = rand(np.float32, (n,), n)
  x[n // 2] = 10.0
  x[-1] = 10.0
  check(lambda a: (jnp.argmax(a), jnp.argmin(a), jnp.argmax(-jnp.abs(a))), x)


def test_argmax_edge_values(recognizers):
  x = values(np.float32, (4, 26), 0)
  check(lambda a: (jnp.argmax(a, 1), jnp.argmin(a, 1), jnp.argmax(a, 0), jnp.argmin(a, 0)), x)


# ---- bitwise and custom bodies (tree reduction) ---------------------------------------------


@pytest.mark.parametrize("dt", [np.int8, np.uint16, np.int32, np.uint64],
                         ids=ids([np.int8, np.uint16, np.int32, np.uint64]))
def test_bitwise_reductions(dt):
  x = values(dt, (5, 7), 1)
  info = np.iinfo(dt)
  ones = dt(-1) if info.min < 0 else dt(info.max)
  check(lambda a: (lax.reduce(a, dt(0), lax.bitwise_or, (0,)),
                   lax.reduce(a, ones, lax.bitwise_and, (1,)),
                   lax.reduce(a, dt(0), lax.bitwise_xor, (0, 1))), x)


def test_bool_xor_and_reductions():
  x = rand(np.bool_, (5, 7), 9)
  check(lambda a: (lax.reduce(a, False, lax.bitwise_xor, (0,)),
                   lax.reduce(a, True, lax.bitwise_and, (1,)),
                   lax.reduce(a, False, lax.bitwise_or, (0, 1))), x)


def test_custom_body():
  x = rand(np.float32, (6, 5))
  # max of |x|: not a single-op body, goes through the tree.
  body = lambda acc, v: jnp.maximum(jnp.abs(acc), jnp.abs(v))
  check(lambda a: lax.reduce(a, np.float32(0), body, (0,)), x)


def test_variadic_min_with_index():
  x = rand(np.int32, (4, 9), 4, -2, 2)
  idx = np.broadcast_to(np.arange(9, dtype=np.int32), (4, 9)).copy()

  def body(a, b):
    av, ai = a
    bv, bi = b
    take_a = (av < bv) | ((av == bv) & (ai < bi))
    return jnp.where(take_a, av, bv), jnp.where(take_a, ai, bi)

  check(lambda v, i: lax.reduce((v, i), (np.int32(2**31 - 1), np.int32(0)), body, (1,)), x, idx)


def test_variadic_complex128_carried_beside_an_index():
  # c128 has a trailing storage dim that the index operand lacks: the tree path permutes each
  # operand by its own rank (it once applied the c128 operand's permutation to both).
  x = (rand(np.float64, (3, 5), 7) + 1j * rand(np.float64, (3, 5), 8)).astype(np.complex128)
  idx = np.broadcast_to(np.arange(5, dtype=np.int32), (3, 5)).copy()

  def body(a, b):
    take_a = a[1] >= b[1]
    return jnp.where(take_a, a[0], b[0]), jnp.where(take_a, a[1], b[1])

  check(lambda v, i: lax.reduce((v, i), (np.complex128(0), np.int32(-1)), body, (1,)), x, idx)


def test_complex_sum_prod():
  x = rand(np.complex64, (3, 4), 5)
  check(lambda a: (jnp.sum(a, 0), jnp.prod(a, 1), jnp.sum(a)), x)


def test_count_nonzero_and_logsumexp():
  x = rand(np.float32, (4, 6), 6)
  check(lambda a: (jnp.count_nonzero(a > 0, 0), jax_logsumexp(a)), x, rtol=1e-5)


def jax_logsumexp(a):
  from jax.scipy.special import logsumexp
  return logsumexp(a, axis=1)


ZERO_ROWS = [[-0.0, 0.0], [0.0, -0.0], [-0.0, -0.0], [0.0, 0.0], [-0.0, 0.0, -0.0, -1.0],
             [0.0, -0.0, 1.0, 0.0]]


@pytest.mark.parametrize("row", ZERO_ROWS, ids=str)
@pytest.mark.parametrize("dt", FLOATS, ids=ids(FLOATS))
def test_signed_zero_max_min(dt, row):
  # spec: maximum/minimum follow IEEE-754 maximum: +0 > -0, whatever the order.
  x = np.array(row, dt)
  check(lambda a: (jnp.max(a), jnp.min(a), lax.reduce(a, dt(-0.0), lax.max, (0,)),
                   lax.reduce(a, dt(0.0), lax.min, (0,))), x, exact=True)


@pytest.mark.parametrize("dt", FLOATS, ids=ids(FLOATS))
def test_signed_zero_rows_at_once(dt):
  # Each row of one array has its own zero answer (the fix-up is per result element), next to
  # inits that are the identity (+-inf: nothing folded in) and that are not (+-0).
  width = max(len(r) for r in ZERO_ROWS)
  x = np.array([r + [r[0]] * (width - len(r)) for r in ZERO_ROWS], dt)
  check(lambda a: (jnp.max(a, 1), jnp.min(a, 1), jnp.max(a, 0), jnp.min(a, 0),
                   lax.reduce(a, dt(np.inf), lax.min, (1,)), lax.reduce(a, dt(-np.inf), lax.max, (1,)),
                   lax.reduce(a, dt(0.0), lax.max, (1,)), lax.reduce(a, dt(-0.0), lax.min, (1,))),
        x, exact=True)


@pytest.mark.parametrize("init", [0.0, -0.0])
def test_sum_of_negative_zeros(init):
  # XLA adds into its init: +0 + -0 = +0, while -0 + -0 = -0. MLX's sum starts from +0 itself,
  # so a +0 init is folded in by not adding it at all.
  x = np.full((3, 4), -0.0, np.float32)
  check(lambda a: (lax.reduce(a, np.float32(init), lax.add, (1,)), jnp.sum(a, 0)), x, exact=True)


def jax_argmax_body(a, b):
  """The comparator jnp.argmax reduces with (jax/_src/lax/lax.py, _compute_argminmax)."""
  av, ai = a
  bv, bi = b
  pick_a = (av > bv) | (av != av)
  pick_ai = pick_a | ((av == bv) & (ai < bi))
  return lax.select(pick_a, av, bv), lax.select(pick_ai, ai, bi)


def test_argmax_reduce_value_result():
  # The values jnp.argmax throws away: the element at the index (a NaN where NaN wins).
  x = rand(np.float32, (5, 9), 42, -2, 2).round()
  x[1, 3] = np.nan
  x[2, :] = -np.inf
  idx = lax.broadcasted_iota(np.int32, x.shape, 1)
  check(lambda v: lax.reduce((v, idx), (np.float32(-np.inf), np.int32(0)), jax_argmax_body, (1,)),
        x, exact=True)


def test_argmax_lookalikes_keep_their_own_meaning():
  # Bodies, inits and indices one step away from jnp.argmax's are other reductions: the plugin
  # must not take them for an argmax (passes/argminmax.cc); each must match jax's CPU backend.
  x = rand(np.int32, (4, 9), 43, -2, 2)  # many ties
  iota = lax.broadcasted_iota(np.int32, x.shape, 1)
  lo = np.int32(np.iinfo(np.int32).min)

  def last_on_ties(a, b):  # LE instead of LT on the indices: the last index of the max
    av, ai = a
    bv, bi = b
    pick_a = av > bv
    pick_ai = pick_a | ((av == bv) & (ai > bi))
    return lax.select(pick_a, av, bv), lax.select(pick_ai, ai, bi)

  check(lambda v: (lax.reduce((v, iota), (lo, np.int32(0)), last_on_ties, (1,)),
                   lax.reduce((v, iota), (np.int32(1), np.int32(0)), jax_argmax_body, (1,)),
                   lax.reduce((v, iota), (lo, np.int32(5)), jax_argmax_body, (1,)),
                   lax.reduce((v, 8 - iota), (lo, np.int32(0)), jax_argmax_body, (1,)),
                   lax.reduce((v, iota), (lo, np.int32(0)), jax_argmax_body, (1,))),
        x, exact=True)


def test_argmax_in_a_compiled_loop(monkeypatch):
  # With graph compilation on, a loop body holding the argmax call is still compiled.
  monkeypatch.setenv("JAXMLX_COMPILE", "1")
  x = rand(np.float32, (6, 16), 44)

  def f(a):
    return lax.fori_loop(0, 5, lambda i, c: c.at[i].set(jnp.argmax(a[i] * (i + 1) - c[i])),
                         jnp.zeros(6, jnp.int32))

  check(f, x, exact=True)


# ---- softmax (passes/softmax.cc: jax.nn.softmax's f32 chain becomes MLX's softmax) ----------


def softmax_rows():
  """f32 [3, 5, 7] with the rows a softmax must get right: a NaN, all -inf (masked out), a +inf,
  +0s, -0s, huge and tiny values."""
  x = edge_rand(np.float32, (3, 5, 7), 50, scale=6.0)
  x[0, 1, 2] = np.nan
  x[1, 2, :] = -np.inf
  x[2, 0, 3] = np.inf
  x[2, 1, :] = 0.0
  x[2, 2, :] = -0.0
  x[2, 3, :] = [1e30, -1e30, 3e38, 0.0, -3e38, 1e-30, 88.0]
  x[2, 4, :] = [-np.inf, 0.0, -np.inf, 1.0, -np.inf, -0.0, 2.0]  # a masked attention row
  return x


@pytest.mark.parametrize("axis", [-1, 0, 1, (0, 2), (1, 2), (0, 1, 2)], ids=str)
def test_softmax_every_axis(axis, recognizers):
  check(lambda a: jax.nn.softmax(a, axis=axis), softmax_rows())


def test_softmax_in_attention(recognizers):
  # Scores masked with -inf (jnp.where), softmax, then the weighted sum: a decoder step.
  q = rand(np.float32, (2, 4, 1, 8), 51)
  k = rand(np.float32, (2, 4, 6, 8), 52)
  v = rand(np.float32, (2, 4, 6, 8), 53)
  valid = np.arange(6) < 4

  def attend(q, k, v):
    s = jnp.einsum("bhqd,bhkd->bhqk", q, k) / np.sqrt(8).astype(np.float32)
    s = jnp.where(valid, s, -jnp.inf)
    return jnp.einsum("bhqk,bhkd->bhqd", jax.nn.softmax(s, axis=-1), v)

  check(attend, q, k, v, rtol=1e-5)


def test_softmax_lookalikes_keep_their_own_meaning():
  # One step away from jax.nn.softmax's chain: each stays what it is (the exponentials also
  # returned, a max from 0, a sum from 1, the sum taken over another axis, a half-float softmax).
  x = softmax_rows()
  x[np.isnan(x)] = 1.0

  def exp_too(a):
    e = jnp.exp(a - jnp.max(a, axis=-1, keepdims=True))
    return e / jnp.sum(e, axis=-1, keepdims=True), e

  def from_init(a, m0, s0):
    m = lax.reduce(a, np.float32(m0), lax.max, (2,))[..., None]
    e = jnp.exp(a - m)
    return e / (lax.reduce(e, np.float32(s0), lax.add, (2,))[..., None])

  def other_axis(a):
    e = jnp.exp(a - jnp.max(a, axis=-1, keepdims=True))
    return e / jnp.sum(e, axis=1, keepdims=True)

  check(lambda a: (exp_too(a), from_init(a, 0.0, 0.0), from_init(a, -np.inf, 1.0),
                   other_axis(a)), x)
  check(lambda a: jax.nn.softmax(a.astype(jnp.bfloat16), axis=-1), x)
  check(lambda a: jax.nn.softmax(a.astype(jnp.float16), axis=1), np.clip(x, -60000, 60000))


def test_softmax_and_its_gradient(recognizers):
  # Training: jax 0.10 differentiates the divide; the forward chain and its gradient become
  # jaxmlx.softmax and jaxmlx.softmax_dx together (passes/softmax.h).
  x = edge_rand(np.float32, (4, 9), 54, scale=3.0)
  w = rand(np.float32, (4, 9), 55)
  check(jax.value_and_grad(lambda a: (jax.nn.softmax(a) * w).sum()), x)


@pytest.mark.parametrize("axis", [-1, 0, 1, (1, 2)], ids=str)
def test_softmax_gradient_every_axis(axis, recognizers):
  x = softmax_rows()
  dy = edge_rand(np.float32, x.shape, 57, scale=2.0)
  check(lambda a, dy: jax.vjp(lambda a: jax.nn.softmax(a, axis=axis), a)[1](dy)[0], x, dy,
        rtol=1e-5, atol=1e-6)
  # The output and the gradient: the gradient reads the softmax call that replaced the divide.
  check(lambda a, dy: (lambda y, f: (y, f(dy)[0]))(*jax.vjp(
      lambda a: jax.nn.softmax(a, axis=axis), a)), x, dy, rtol=1e-5, atol=1e-6)


def test_softmax_gradient_with_the_custom_jvp(recognizers):
  # jax_softmax_custom_jvp on: the backward pass reads the softmax itself, so the forward chain
  # (whose -inf initial arrives through a convert) is the call and the gradient jax's own ops.
  from jax._src import config
  x = softmax_rows()
  dy = edge_rand(np.float32, x.shape, 60, scale=2.0)
  f = lambda a, dy: jax.vjp(lambda a: jax.nn.softmax(a, axis=-1), a)[1](dy)[0]  # noqa: E731
  with config.softmax_custom_jvp(True):
    check(f, x, dy, rtol=1e-5, atol=1e-6)
    assert calls(rewritten(f, np.zeros((2, 8), np.float32), np.zeros((2, 8), np.float32))) == {
        "jaxmlx.softmax": 1}


def test_softmax_gradients_become_calls():
  x = np.zeros((2, 4, 8, 8), np.float32)
  v = np.zeros((2, 4, 8, 16), np.float32)

  def attend_grad(s, v, ct):  # attention's softmax, differentiated as in training
    return jax.vjp(lambda s, v: jax.nn.softmax(s, axis=-1) @ v, s, v)[1](ct)

  assert calls(rewritten(attend_grad, x, v, v)) == {"jaxmlx.softmax": 1,
                                                    "jaxmlx.softmax_dx": 1}
  grad_only = lambda s, ct: jax.vjp(lambda s: jax.nn.softmax(s, axis=1), s)[1](ct)[0]  # noqa
  assert calls(rewritten(grad_only, x, x)) == {"jaxmlx.softmax": 1, "jaxmlx.softmax_dx": 1}

  def log_softmax_grad(s, ct):  # another function: stays jax's chain
    return jax.vjp(lambda s: jax.nn.log_softmax(s, axis=-1), s)[1](ct)[0]

  assert "jaxmlx.softmax_dx" not in calls(rewritten(log_softmax_grad, x, x))


def test_softmax_in_a_compiled_loop(monkeypatch):
  # With graph compilation on, a loop body holding the softmax call is still compiled.
  monkeypatch.setenv("JAXMLX_COMPILE", "1")
  x = edge_rand(np.float32, (6, 16), 56, scale=4.0)

  def f(a):
    return lax.fori_loop(0, 5, lambda i, c: c.at[i].set(jax.nn.softmax(a[i] * (i + 1) - c[i])),
                         jnp.zeros((6, 16), jnp.float32))

  check(f, x)


# ---- logsumexp and cross-entropy (passes/logsumexp.cc: jax.nn.logsumexp's chain and its
# gradient become MLX's logsumexp and softmax) -------------------------------------------------


def lse_rows():
  """f32 [3, 5, 7] rows a logsumexp must get right: moderate, all -inf (masked out), partly
  -inf, a NaN, huge negative and positive finite values, zeros. (+inf rows differ in the
  gradient by design: passes/logsumexp.h.)"""
  x = edge_rand(np.float32, (3, 5, 7), 58, scale=6.0)
  x[0, 1, :] = -np.inf
  x[0, 2, ::2] = -np.inf
  x[1, 0, 3] = np.nan
  x[1, 1, :] = [-1e30, 2.0, -3e38, 0.5, -1e30, 1.0, -1e30]
  x[1, 2, :] = [3e38, 1e30, 88.0, -88.0, 0.0, 1e-30, 3e38]
  x[2, 3, :] = 0.0
  return x


@pytest.mark.parametrize("axis", [-1, 0, (1, 2)], ids=str)
def test_logsumexp_and_its_gradient(axis, recognizers):
  x = lse_rows()
  ct = edge_rand(np.float32, np.asarray(jax.nn.logsumexp(x, axis=axis)).shape, 59, scale=2.0)
  check(lambda a, ct: (lambda v, f: (v, f(ct)[0]))(*jax.vjp(
      lambda a: jax.nn.logsumexp(a, axis=axis), a)), x, ct, rtol=1e-5, atol=1e-6)


def test_cross_entropy_and_its_gradient(recognizers):
  # optax's integer-label cross-entropy, as training loops compute it: value and gradient.
  import optax
  x = lse_rows()
  labels = np.array([[0, 3, 6, 1, 2], [5, 4, 0, 6, 3], [1, 1, 2, 3, 6]], np.int32)

  def loss(a, labels):
    return optax.softmax_cross_entropy_with_integer_labels(a, labels).mean()

  check(jax.value_and_grad(loss), x, labels, rtol=1e-5, atol=1e-6)
  check(jax.value_and_grad(loss), np.nan_to_num(x, nan=0.0, neginf=-50.0), labels, rtol=1e-5,
        atol=1e-6)


def test_logsumexp_rewrites():
  import optax
  x = np.zeros((4, 8, 32), np.float32)
  labels = np.zeros((4, 8), np.int32)
  ce = lambda a, y: optax.softmax_cross_entropy_with_integer_labels(a, y).mean()  # noqa: E731
  assert calls(rewritten(jax.value_and_grad(ce), x, labels)) == {
      "jaxmlx.logsumexp": 1, "jaxmlx.logsumexp_dx": 1}
  assert calls(rewritten(lambda a: jax.nn.logsumexp(a, axis=1), x)) == {"jaxmlx.logsumexp": 1}
  # Lookalikes: keepdims (the max kept as a [.., 1] value), a weighted sum (b=...), a plain
  # log-sum-exp without the max (another function for large values).
  assert calls(rewritten(lambda a: jax.nn.logsumexp(a, axis=-1, keepdims=True), x)) == {}
  assert calls(rewritten(lambda a: jax.nn.logsumexp(a, axis=-1, b=a), x)) == {}
  assert calls(rewritten(lambda a: jnp.log(jnp.sum(jnp.exp(a), -1)), x)) == {}


# ---- reductions in context (other families around them) --------------------------------------


def test_vmapped_argmax_and_softmax():
  x = rand(np.float32, (6, 5), 40)
  check(lambda a: (jax.vmap(jnp.argmax)(a), jax.nn.softmax(a, axis=1),
                   jax.nn.logsumexp(a, axis=0)), x, rtol=1e-5, atol=1e-6)


def test_one_hot_of_argmax():
  x = rand(np.float32, (4, 7), 41)
  check(lambda a: jax.nn.one_hot(jnp.argmax(a, 1), 7, dtype=jnp.float32), x)


# ---- a body that reads values defined outside it ------------------------------------------------
# XLA cannot export such a region, so the reference is the same program with the values
# defined inside the body (src/lower/window_util.cc reads captured values from the frame).
REDUCE_CAPTURE_TEXT = """
func.func @main(%x: tensor<6x5xi32>, %s: tensor<i32>) -> tensor<5xi32> {{
  %init = stablehlo.constant dense<3> : tensor<i32>
  {outer}
  %0 = stablehlo.reduce(%x init: %init) across dimensions = [0] : (tensor<6x5xi32>, tensor<i32>)
       -> tensor<5xi32>
    reducer(%a: tensor<i32>, %b: tensor<i32>) {{
      {inner}
      %k = stablehlo.and %a, %scale : tensor<i32>
      %m = stablehlo.and %b, %scale : tensor<i32>
      %n = stablehlo.xor %k, %m : tensor<i32>
      stablehlo.return %n : tensor<i32>
    }}
  return %0 : tensor<5xi32>
}}"""


@pytest.mark.parametrize("captured", ["constant", "argument"])
def test_body_captures_outer_values(captured):
  from tests.stablehlo_text import run_stablehlo
  x = np.random.default_rng(40).integers(-1000, 1000, (6, 5)).astype(np.int32)
  s = np.int32(0x3f0)  # the body (a & s) ^ (b & s) is associative, as XLA requires
  const = "%scale = stablehlo.constant dense<1008> : tensor<i32>"
  outer = const if captured == "constant" else (
      "%zero = stablehlo.constant dense<0> : tensor<i32>\n"
      "%scale = stablehlo.add %s, %zero : tensor<i32>")
  want = run_stablehlo(REDUCE_CAPTURE_TEXT.format(outer="", inner=const), "cpu", x, s)
  got = run_stablehlo(REDUCE_CAPTURE_TEXT.format(outer=outer, inner=""), "mlx", x, s)
  np.testing.assert_array_equal(got[0], want[0])


@pytest.mark.parametrize("dt", [np.float32, np.float16, np.int32, np.uint8],
                         ids=ids([np.float32, np.float16, np.int32, np.uint8]))
def test_reduce_over_dims_of_one_element_is_the_element(dt):
  # XLA's simplifier turns a reduce whose reduced dims have one element into a reshape, whatever
  # the init and the body (src/lower/reduce.cc): NaN payloads, -0 and infinities are kept and a
  # non-identity init is not folded in. Compared as bits.
  if np.dtype(dt).kind == "f":
    x = np.array([-0.0, 0.0, np.nan, np.inf, -np.inf, 1.5], dt).reshape(6, 1, 1)
    bits = np.uint32 if dt == np.float32 else np.uint16
  else:
    x = values(dt, (6, 1, 1), 3)
    bits = None
  as_bits = lambda r: r if bits is None else lax.bitcast_convert_type(r, bits)
  five = np.array(5, dt)
  fns = [lambda a: jnp.max(a, axis=(1, 2)), lambda a: jnp.min(a, axis=(1, 2)),
         lambda a: lax.reduce(a, five, lax.add, (1,)),
         lambda a: lax.reduce(a, five, lax.max, (1, 2))]
  if dt != np.float16:  # jnp.sum of f16 sums in f32: a NaN's f16 payload is convert's, not ours
    fns.append(lambda a: jnp.sum(a, axis=2))
  for f in fns:
    check(lambda a, f=f: as_bits(f(a)), x)


def test_and_or_over_dims_of_one_element():
  # jax's bounds checks reduce one-component index vectors with `and` from true; a non-identity
  # init is not folded in there either (XLA's reshape).
  x = np.array([[True], [False], [True]])
  for red in (jnp.all, jnp.any):
    check(lambda a, red=red: (red(a, axis=1), red(a, axis=0)), x)
  for body in (lax.bitwise_and, lax.bitwise_or):
    for init in (True, False):
      check(lambda a, body=body, init=init: (lax.reduce(a, init, body, (1,)),
                                             lax.reduce(a, init, body, (0,))), x)


# A sum of negations, as jax's gradients write it, is the negated sum (src/passes/negated_sum.h),
# as XLA's simplifier makes it: a zero sum is -0 on jax's CPU backend. Bit for bit (integer
# values, so that the summation order cannot show), the negation read elsewhere too or not.
SIGNED_ROWS = np.array([[0.0, -0.0, 0.0], [-0.0, -0.0, -0.0], [0.0, 0.0, 0.0], [1.0, -1.0, 0.0],
                        [2.0, 3.0, -0.5], [np.inf, 1.0, 2.0], [-np.inf, -0.0, 0.0]], np.float32)


@pytest.mark.parametrize("axis", [1, None, (0, 1)], ids=str)
def test_sum_of_negations_keeps_every_bit(axis):
  # Every bit but a NaN's payload: inf - inf and inf * 0 make a NaN, whose bits are the
  # hardware's (x86: 0xFFC00000, a CUDA GPU: 0x7FFFFFFF).
  check(lambda x: jnp.sum(-x, axis=axis), SIGNED_ROWS, exact=True, nan_payloads=False)
  check(lambda x, y: jnp.sum(-(x * y), axis=axis), SIGNED_ROWS, SIGNED_ROWS[::-1], exact=True,
        nan_payloads=False)

  def shared(x):  # one negation, summed and returned
    n = -x
    return jnp.sum(n, axis=axis), n

  check(shared, SIGNED_ROWS, exact=True, nan_payloads=False)


def test_sum_of_negations_with_nan_and_opposite_infinities():
  x = np.array([[np.nan, 1.0, 2.0], [np.inf, -np.inf, 1.0], [1.5, 2.25, -3.0]], np.float32)
  check(lambda x: jnp.sum(-x, axis=1), x)
  check(lambda x: -jnp.sum(-x, axis=0) + jnp.sum(-(x * x), axis=0), x)
