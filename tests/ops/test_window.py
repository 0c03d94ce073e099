"""Differential tests of stablehlo.reduce_window and stablehlo.select_and_scatter
(src/lower/window.cc) against jax's CPU backend.

reduce_window with add/max/min/mul monoids and general bodies (bool and/or, bitwise, variadic
argmax), window dims, strides, base and window dilation, padding (including negative), and a
non-identity init value with padding (XLA skips padding and dilation holes, the init value is
folded in once); windows larger than the direct-fold limit (the dim-by-dim doubling path);
avg_pool / max_pool / min_pool and their gradients (max-pool's gradient is
select_and_scatter); jvp of max-pool (a variadic reduce_window); cumulative sums, products,
maxima and minima (reduce_window on this platform). select_and_scatter directly with GE/GT/LE
selects and add/max/mul scatters, ties (the first element in window order wins for GE); with
padding the reference pads explicitly (as jax does for XLA's CPU, whose padded
select_and_scatter selects wrong elements).

Integers and bools compare bit for bit. Float window sums with up to 64 elements fold in XLA's
order; larger windows (and cumulative sums over long axes) reduce in a different order, so
those tests pass SUM_TOL: a few ULP of the largest partial sum, not of the result.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax
from jax._src.lax import windowed_reductions as wr

from tests.ops.edge_values import rand, values
from tests.ops.harness import assert_same, check, run_on

INTS = [np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32, np.uint64]
FLOATS = [np.float16, jnp.bfloat16, np.float32]
SUM_TOL = dict(rtol=1e-5, atol=1e-5)


def ids(dts):
  return [np.dtype(d).name for d in dts]


def small_ints(dt, shape, seed=0, lo=-4, hi=5):
  rng = np.random.default_rng(seed)
  lo = 0 if np.dtype(dt).kind == "u" else lo
  return rng.integers(lo, hi, shape).astype(dt)


MONOIDS = {
    "add": (lax.add, lambda dt: np.array(0, dt)),
    "max": (lax.max, lambda dt: np.array(-np.inf if np.dtype(dt).kind == "f" or dt == jnp.bfloat16
                                         else np.iinfo(dt).min, dt)),
    "min": (lax.min, lambda dt: np.array(np.inf if np.dtype(dt).kind == "f" or dt == jnp.bfloat16
                                         else np.iinfo(dt).max, dt)),
    "mul": (lax.mul, lambda dt: np.array(1, dt)),
}

WINDOWS = [
    dict(window_dimensions=(2, 2), window_strides=(2, 2), padding="VALID"),
    dict(window_dimensions=(3, 3), window_strides=(1, 1), padding="SAME"),
    dict(window_dimensions=(3, 2), window_strides=(2, 1), padding=((1, 2), (0, 1))),
    dict(window_dimensions=(1, 3), window_strides=(1, 2), padding=((0, 0), (-1, 2))),
    dict(window_dimensions=(2, 2), window_strides=(1, 1), padding=((1, 0), (0, 1)),
         base_dilation=(2, 1), window_dilation=(1, 2)),
]


def rw(op, init, **kw):
  return lambda x: lax.reduce_window(x, init, op, **kw)


# ---- monoids over dtypes x windows ------------------------------------------------------------


def check_monoid(name, dt, win):
  op, ident = MONOIDS[name]
  x = values(dt, (5, 6), 3) if name != "add" else small_ints(dt, (5, 6), 1)
  check(rw(op, ident(dt), **WINDOWS[win]), x)


@pytest.mark.parametrize("win", [2, 4])
@pytest.mark.parametrize("dt", INTS + FLOATS, ids=ids(INTS + FLOATS))
@pytest.mark.parametrize("name", ["add", "max", "min"])
def test_monoid(name, dt, win):
  check_monoid(name, dt, win)


@pytest.mark.parametrize("win", [0, 1, 3])
@pytest.mark.parametrize("dt", [np.int32, np.float32], ids=ids([np.int32, np.float32]))
@pytest.mark.parametrize("name", ["add", "max", "min"])
def test_monoid_windows(name, dt, win):
  check_monoid(name, dt, win)


@pytest.mark.parametrize("dt", [np.int32, np.uint8, np.int64, np.float32, np.float16],
                         ids=ids([np.int32, np.uint8, np.int64, np.float32, np.float16]))
@pytest.mark.parametrize("win", [0, 2, 4])
def test_mul(dt, win):
  x = small_ints(dt, (5, 6), 2, -3, 4)
  check(rw(lax.mul, np.array(1, dt), **WINDOWS[win]), x)


@pytest.mark.parametrize("dt", INTS, ids=ids(INTS))
def test_int_sum_wraps(dt):
  check(rw(lax.add, np.array(0, dt), window_dimensions=(3, 3), window_strides=(1, 1),
           padding="SAME"), values(dt, (4, 5), 0))


def test_float_sum_general_values():
  x = rand(np.float32, (6, 7), 3)
  check(rw(lax.add, np.float32(0), window_dimensions=(3, 4), window_strides=(1, 2),
           padding="SAME"), x)


def test_max_nan_and_signed_zeros():
  x = values(np.float32, (6, 8), 0)  # holds NaN, +-inf, +-0
  check(rw(lax.max, np.float32(-np.inf), window_dimensions=(2, 3), window_strides=(1, 1),
           padding="SAME"), x)
  check(rw(lax.min, np.float32(np.inf), window_dimensions=(2, 3), window_strides=(1, 1),
           padding="SAME"), x)


@pytest.mark.parametrize("name", ["add", "max"])
def test_non_identity_init_with_padding(name):
  # XLA skips padding and base-dilation holes: the init value is folded in once per window.
  op = MONOIDS[name][0]
  x = small_ints(np.int32, (5, 4), 4)
  check(rw(op, np.int32(7), window_dimensions=(3, 2), window_strides=(1, 1),
           padding=((1, 2), (1, 0)), base_dilation=(2, 1)), x)


@pytest.mark.parametrize("shape,win", [((), ()), ((0,), (1,)), ((0, 3), (1, 2)),
                                       ((2, 3), (3, 1)), ((7,), (7,))], ids=str)
def test_degenerate_shapes(shape, win):
  x = small_ints(np.int32, shape, 5)
  check(rw(lax.add, np.int32(0), window_dimensions=win, window_strides=(1,) * len(win),
           padding="VALID"), x)


@pytest.mark.parametrize("rank", [1, 3, 4])
def test_ranks(rank):
  shape = (7, 4, 5, 3)[:rank]
  x = small_ints(np.float32, shape, 6)
  dims = (3, 2, 2, 1)[:rank]
  strides = (2, 1, 2, 1)[:rank]
  check(rw(lax.max, np.float32(-np.inf), window_dimensions=dims, window_strides=strides,
           padding="SAME"), x)
  check(rw(lax.add, np.float32(0), window_dimensions=dims, window_strides=strides,
           padding="VALID"), x)


# ---- large windows: the dim-by-dim doubling path ----------------------------------------------


@pytest.mark.parametrize("cfg", [
    dict(window_dimensions=(9, 9), window_strides=(1, 1), padding="SAME"),
    dict(window_dimensions=(10, 7), window_strides=(3, 2), padding=((4, 5), (0, 3))),
    dict(window_dimensions=(12, 1), window_strides=(1, 1), padding=((11, 0), (0, 0))),
    dict(window_dimensions=(5, 20), window_strides=(2, 5), padding=((2, 2), (-1, 4)),
         window_dilation=(2, 1)),
    dict(window_dimensions=(8, 9), window_strides=(1, 1), padding=((0, 0), (3, 3)),
         base_dilation=(2, 3)),
], ids=str)
@pytest.mark.parametrize("name", ["add", "max", "min"])
@pytest.mark.parametrize("dt", [np.int32, np.uint8, np.float32], ids=ids([np.int32, np.uint8,
                                                                          np.float32]))
def test_large_windows(cfg, name, dt):
  op, ident = MONOIDS[name]
  x = small_ints(dt, (13, 21), 7) if name == "add" else values(dt, (13, 21), 1)
  check(rw(op, ident(dt), **cfg), x)


def test_large_window_non_identity_init():
  x = small_ints(np.int64, (12, 20), 8)
  check(rw(lax.add, np.int64(-5), window_dimensions=(9, 10), window_strides=(2, 3),
           padding=((3, 4), (5, 0)), base_dilation=(1, 2)), x)


# ---- general bodies -------------------------------------------------------------------------


@pytest.mark.parametrize("op,init", [(lax.bitwise_or, False), (lax.bitwise_and, True)],
                         ids=["or", "and"])
@pytest.mark.parametrize("win", [1, 2, 4])
def test_bool(op, init, win):
  x = np.random.default_rng(9).random((5, 6)) < 0.3
  check(rw(op, np.bool_(init), **WINDOWS[win]), x)


@pytest.mark.parametrize("dt", [np.int32, np.uint16, np.int8], ids=ids([np.int32, np.uint16,
                                                                        np.int8]))
@pytest.mark.parametrize("op", [lax.bitwise_xor, lax.bitwise_or], ids=["xor", "or"])
def test_bitwise_body(dt, op):
  x = values(dt, (6, 5), 4)
  check(rw(op, np.array(0, dt), window_dimensions=(2, 3), window_strides=(1, 1),
           padding="SAME"), x)


def test_custom_body_max_abs():
  # A body jax cannot match to a monoid: max(|a|, |b|) over windows.
  x = small_ints(np.int32, (6, 6), 10, -9, 9)
  body = lambda a, b: jnp.maximum(jnp.abs(a), jnp.abs(b))
  check(rw(body, np.int32(0), window_dimensions=(3, 2), window_strides=(2, 1),
           padding=((1, 1), (0, 1))), x)


# jvp of a reduce_window with a body jax does not recognize as a monoid: jax differentiates the
# body, and the tangent body's constants reach the region as values defined outside it.
CUSTOM_JVP = [
    ("max", lambda a, b: jnp.maximum(a, b), -np.inf),
    ("min", lambda a, b: jnp.minimum(a, b), np.inf),
    ("add", lambda a, b: a + b, 0.0),
]


@pytest.mark.parametrize("cfg", [
    dict(window_dimensions=(2, 1), window_strides=(1, 1), padding="VALID"),
    dict(window_dimensions=(1, 2), window_strides=(2, 1), padding=((0, 3), (1, 2)),
         base_dilation=(2, 3), window_dilation=(1, 2)),
    dict(window_dimensions=(2, 2), window_strides=(1, 2), padding="SAME"),
], ids=str)
@pytest.mark.parametrize("name,body,init", CUSTOM_JVP, ids=[c[0] for c in CUSTOM_JVP])
def test_custom_body_jvp(name, body, init, cfg):
  x = rand(np.float32, (4, 6), 30)
  t = rand(np.float32, (4, 6), 31)
  f = lambda a: lax.reduce_window(a, np.float32(init), body, **cfg)
  check(lambda a, b: jax.jvp(f, (a,), (b,)), x, t, **SUM_TOL)


# A body that reads values defined outside its region: XLA cannot export such a region, so the
# reference is the same program with the values defined inside the body instead.
CAPTURE_TEXT = """
func.func @main(%x: tensor<5x6xi32>, %s: tensor<i32>) -> tensor<4x3xi32> {{
  %init = stablehlo.constant dense<1> : tensor<i32>
  {outer}
  %0 = "stablehlo.reduce_window"(%x, %init) ({{
  ^bb0(%a: tensor<i32>, %b: tensor<i32>):
    {inner}
    %m = stablehlo.multiply %b, %scale : tensor<i32>
    %n = stablehlo.add %a, %m : tensor<i32>
    %p = stablehlo.xor %n, %mask : tensor<i32>
    stablehlo.return %p : tensor<i32>
  }}) {{window_dimensions = array<i64: 2, 3>, window_strides = array<i64: 1, 2>,
       padding = dense<[[0, 0], [1, 1]]> : tensor<2x2xi64>}}
     : (tensor<5x6xi32>, tensor<i32>) -> tensor<4x3xi32>
  return %0 : tensor<4x3xi32>
}}"""


CAPTURE_CONSTS = ("%scale = stablehlo.constant dense<-7> : tensor<i32>\n"
                  "%mask = stablehlo.constant dense<85> : tensor<i32>")


@pytest.mark.parametrize("captured", ["constants", "argument"])
def test_body_captures_outer_values(captured):
  from tests.stablehlo_text import run_stablehlo
  x = small_ints(np.int32, (5, 6), 32, -50, 50)
  s = np.int32(-7)
  scale = "%scale = stablehlo.constant dense<-7> : tensor<i32>"
  mask = "%mask = stablehlo.constant dense<85> : tensor<i32>"
  if captured == "argument":  # %scale computed from the function's argument %s (-7)
    scale = ("%zero = stablehlo.constant dense<0> : tensor<i32>\n"
             "%scale = stablehlo.add %s, %zero : tensor<i32>")
  want = run_stablehlo(CAPTURE_TEXT.format(outer="", inner=CAPTURE_CONSTS), "cpu", x, s)
  got = run_stablehlo(CAPTURE_TEXT.format(outer=scale + "\n" + mask, inner=""), "mlx", x, s)
  np.testing.assert_array_equal(got[0], want[0])


def argmax_pool(x, idx, dims, strides, padding):
  def body(a, b):
    av, ai = a
    bv, bi = b
    pick_a = (av > bv) | ((av == bv) & (ai < bi))
    return jnp.where(pick_a, av, bv), jnp.where(pick_a, ai, bi)
  return lax.reduce_window((x, idx), (np.float32(-np.inf), np.int32(2**31 - 1)), body, dims,
                           strides, padding)


@pytest.mark.parametrize("padding", ["VALID", "SAME"])
@pytest.mark.parametrize("dims", [(2, 2), (3, 3), (9, 9)], ids=str)
def test_variadic_argmax(padding, dims):
  x = small_ints(np.float32, (8, 10), 11)  # many ties
  idx = np.arange(80, dtype=np.int32).reshape(8, 10)
  check(lambda a, i: argmax_pool(a, i, dims, (1, 2), padding), x, idx)


# ---- pooling and gradients ------------------------------------------------------------------


def max_pool(x, dims, strides, padding):
  return lax.reduce_window(x, -jnp.inf, lax.max, dims, strides, padding)


def min_pool(x, dims, strides, padding):
  return lax.reduce_window(x, jnp.inf, lax.min, dims, strides, padding)


def avg_pool(x, dims, strides, padding):
  return lax.reduce_window(x, 0.0, lax.add, dims, strides, padding) / np.prod(dims)


POOLS = [((1, 2, 2, 1), (1, 2, 2, 1), "VALID"), ((1, 3, 3, 1), (1, 2, 2, 1), "SAME"),
         ((1, 3, 3, 1), (1, 1, 1, 1), "SAME"), ((1, 2, 3, 1), (1, 1, 2, 1), "VALID"),
         ((1, 3, 2, 1), (1, 2, 1, 1), ((0, 0), (1, 1), (0, 1), (0, 0)))]


@pytest.mark.parametrize("pool", range(len(POOLS)))
@pytest.mark.parametrize("fn", [max_pool, min_pool, avg_pool], ids=["max", "min", "avg"])
def test_pool_grad(fn, pool):
  dims, strides, padding = POOLS[pool]
  x = small_ints(np.float32, (2, 7, 6, 3), 12)  # integer values: ties in most windows
  ct = rand(np.float32, (2, 7, 6, 3), 13)

  def loss(a):
    y = fn(a, dims, strides, padding)
    return jnp.sum(y * ct[tuple(slice(0, s) for s in y.shape)])

  check(jax.grad(loss), x)
  check(lambda a: fn(a, dims, strides, padding), x)


@pytest.mark.parametrize("dt", [np.float16, jnp.bfloat16], ids=ids([np.float16, jnp.bfloat16]))
def test_max_pool_grad_half(dt):
  x = small_ints(np.float32, (1, 6, 6, 2), 14).astype(dt)
  check(jax.grad(lambda a: jnp.sum(max_pool(a, (1, 3, 3, 1), (1, 2, 2, 1), "SAME")
                                   .astype(jnp.float32) ** 2)), x)


@pytest.mark.parametrize("pool", [0, 1, 4])
def test_max_pool_jvp(pool):
  # The jvp is select_and_gather_add: a variadic (value, tangent) reduce_window.
  dims, strides, padding = POOLS[pool]
  # Distinct values: with ties the tangent picked depends on the order XLA's CPU visits the
  # window in, which varies with the window shape (the body is not commutative on ties).
  x = np.random.default_rng(15).permutation(2 * 7 * 6 * 3).reshape(2, 7, 6, 3).astype(np.float32)
  t = rand(np.float32, (2, 7, 6, 3), 16)
  check(lambda a, b: jax.jvp(lambda z: max_pool(z, dims, strides, padding), (a,), (b,)), x, t)


def test_cnn_with_pooling_grad():
  x = rand(np.float32, (2, 8, 8, 3), 17)
  w = rand(np.float32, (3, 3, 3, 4), 18)

  def loss(a, k):
    y = lax.conv_general_dilated(a, k, (1, 1), "SAME",
                                 dimension_numbers=("NHWC", "HWIO", "NHWC"))
    y = max_pool(jax.nn.relu(y), (1, 2, 2, 1), (1, 2, 2, 1), "VALID")
    y = avg_pool(y, (1, 2, 2, 1), (1, 1, 1, 1), "SAME")
    return jnp.sum(jnp.tanh(y))

  check(jax.grad(loss, argnums=(0, 1)), x, w, **SUM_TOL)


# ---- select_and_scatter directly --------------------------------------------------------------


def sas(select, scatter, dims, strides, padding):
  def f(operand, source, init):
    return wr._select_and_scatter(operand, select, dims, strides, padding, source, init, scatter)
  return f


def sas_padded_explicitly(select, scatter, dims, strides, padding, dt):
  """The same select_and_scatter with the padding done by lax.pad, filled with a value the
  select never prefers: jax itself lowers padded select_and_scatter this way for XLA's CPU,
  whose padded select_and_scatter is broken (b/161704903: it selects wrong elements)."""
  prefers_max = select in (lax.ge, lax.gt)
  if np.dtype(dt).kind == "f":
    fill = -np.inf if prefers_max else np.inf
  else:
    fill = np.iinfo(dt).min if prefers_max else np.iinfo(dt).max

  def f(operand, source, init):
    padded = lax.pad(operand, np.array(fill, dt), [(lo, hi, 0) for lo, hi in padding])
    out = wr._select_and_scatter(padded, select, dims, strides, [(0, 0)] * len(dims), source,
                                 init, scatter)
    return out[tuple(slice(lo, lo + n) for (lo, _), n in zip(padding, operand.shape))]
  return f


def check_sas(select, scatter, case, x, src, init, **kw):
  dims, strides, padding = SAS_CASES[case]
  got = run_on(jax.devices("mlx")[0], sas(select, scatter, dims, strides, padding), x, src, init)
  ref = sas_padded_explicitly(select, scatter, dims, strides, padding, x.dtype)
  want = run_on(jax.devices("cpu")[0], ref, x, src, init)
  assert_same(got, want, **kw)


SAS_CASES = [((2, 2), (2, 2), ((0, 0), (0, 0))), ((3, 3), (1, 1), ((1, 1), (1, 1))),
             ((3, 2), (2, 1), ((1, 0), (0, 1))), ((2, 3), (1, 2), ((0, 0), (0, 0))),
             ((2, 2), (1, 3), ((0, 1), (2, 0)))]


def sas_source(case, shape, dt, seed):
  dims, strides, padding = SAS_CASES[case]
  out = [(s + lo + hi - d) // st + 1 for s, d, st, (lo, hi) in zip(shape, dims, strides, padding)]
  return small_ints(dt, tuple(out), seed, 1, 6)


def tie_values(dt, shape, seed):
  """Values 1..3 (ties everywhere), never the padding fill of sas_padded_explicitly."""
  return (np.random.default_rng(seed).integers(0, 3, shape) + 1).astype(dt)


@pytest.mark.parametrize("case", range(len(SAS_CASES)))
@pytest.mark.parametrize("select", [lax.ge, lax.gt, lax.le, lax.lt], ids=["ge", "gt", "le", "lt"])
@pytest.mark.parametrize("dt", [np.int32, np.float32, np.uint8], ids=ids([np.int32, np.float32,
                                                                          np.uint8]))
def test_select_and_scatter(dt, select, case):
  x = tie_values(dt, (6, 7), 19)
  check_sas(select, lax.add, case, x, sas_source(case, x.shape, dt, 20), np.array(0, dt))


@pytest.mark.parametrize("scatter,init", [(lax.max, 1), (lax.mul, 2), (lax.add, 5)],
                         ids=["max", "mul", "add_init5"])
@pytest.mark.parametrize("case", [1, 2])
def test_select_and_scatter_bodies(scatter, init, case):
  x = tie_values(np.int32, (6, 6), 21)
  check_sas(lax.ge, scatter, case, x, sas_source(case, x.shape, np.int32, 22), np.int32(init))


def test_select_and_scatter_float_order():
  # Overlapping windows add several float sources into one element: XLA's order is kept.
  x = np.ones((5, 5), np.float32)  # every window ties: GE selects its first element
  src = rand(np.float32, (5, 5), 23) * 1e3
  check_sas(lax.ge, lax.add, 1, x, src, np.float32(0.1), exact=True)


def test_select_and_scatter_nan():
  x = values(np.float32, (6, 6), 4)  # NaN and infinities
  src = rand(np.float32, (3, 3), 24)
  check(sas(lax.ge, lax.add, (2, 2), (2, 2), ((0, 0), (0, 0))), x, src, np.float32(0))


@pytest.mark.parametrize("dt", [np.int8, np.int64, np.uint32], ids=ids([np.int8, np.int64,
                                                                        np.uint32]))
def test_select_and_scatter_add_int(dt):
  x = values(dt, (6, 5), 2)
  src = values(dt, (5, 4), 6)  # sums wrap
  f = lambda a, s: wr._select_and_scatter_add(s, a, lax.ge_p, (2, 2), (1, 1), ((0, 0), (0, 0)))
  check(f, x, src)


# ---- cumulative reductions (reduce_window on this platform) -----------------------------------


@pytest.mark.parametrize("n", [1, 7, 33, 100])
@pytest.mark.parametrize("fn", [lax.cumsum, lax.cumprod, lax.cummax, lax.cummin],
                         ids=["cumsum", "cumprod", "cummax", "cummin"])
@pytest.mark.parametrize("reverse", [False, True])
def test_cumulative(fn, n, reverse):
  x = small_ints(np.int32, (3, n), 25, -3, 4)
  check(lambda a: fn(a, axis=1, reverse=reverse), x)


@pytest.mark.parametrize("dt", [np.float32, np.int64, np.uint8], ids=ids([np.float32, np.int64,
                                                                         np.uint8]))
def test_jnp_cumsum(dt):
  x = rand(dt, (4, 50), 26)
  tol = SUM_TOL if dt == np.float32 else {}
  check(lambda a: (jnp.cumsum(a, axis=1, dtype=a.dtype), jnp.cumsum(a, axis=0, dtype=a.dtype)),
        x, **tol)
