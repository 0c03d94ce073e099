"""Differential tests of the elementwise family (src/lower/elementwise*.cc) against jax's CPU.

Each op runs over the dtypes it is defined for and over shapes (), (0,), (7,), (3, 5), plus a
"pairs" shape for binary ops: every pair of edge values (NaN, +-inf, -0.0, denormals, INT_MIN,
INT_MAX, divide by zero, shift by >= width, ...).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax

from tests.ops.edge_values import (BOOL, COMPLEX, FLOATS, INTS, SHAPES, SIGNED, UNSIGNED,
                                   dtype_id, pairs, values)
from tests.ops.harness import check
from tests.ops.tolerances import tolerance_for

BIN_SHAPES = [(), (0,), (3, 5), "pairs"]


def binary_args(dt, shape, dt2=None):
  if shape == "pairs":
    return pairs(dt, dt2)
  return values(dt, shape, 0), values(dt2 or dt, shape, 5)


def check_values(fn, *args, rtol=None, atol=None):
  """check(), comparing values part by part:
  - bfloat16 results go through an exact cast to f32 (with bf16's tolerance): harness.py
    compares numpy kind 'V' dtypes such as bfloat16 bit for bit, NaN sign included, and XLA and
    MLX disagree on the sign of the NaNs they produce;
  - complex results are split into (real, imag): the harness's complex tolerance uses |w|, so
    a 1-ULP difference in one part fails whenever the other part is inf."""
  has_bf16 = any(np.asarray(a).dtype == jnp.bfloat16 for a in args)

  def split(y):
    if y.dtype == jnp.bfloat16:
      return y.astype(jnp.float32)
    if jnp.iscomplexobj(y):
      return (lax.real(y), lax.imag(y))
    return y

  def wrapped(*xs):
    return jax.tree_util.tree_map(split, fn(*xs))

  if has_bf16 and rtol is None:
    rtol, atol = tolerance_for(jnp.bfloat16)
  return check(wrapped, *args, rtol=rtol, atol=atol)


# ---- binary arithmetic ------------------------------------------------------------------------
BINARY = {
    "add": (lax.add, INTS + FLOATS + COMPLEX),
    "sub": (lax.sub, INTS + FLOATS + COMPLEX),
    "mul": (lax.mul, INTS + FLOATS + COMPLEX),
    "div": (lax.div, INTS + FLOATS + COMPLEX),
    "rem": (lax.rem, INTS + FLOATS),
    "max": (lax.max, BOOL + INTS + FLOATS),
    "min": (lax.min, BOOL + INTS + FLOATS),
    "pow": (lax.pow, FLOATS + COMPLEX),
    "atan2": (lax.atan2, FLOATS),
    "and": (lax.bitwise_and, BOOL + INTS),
    "or": (lax.bitwise_or, BOOL + INTS),
    "xor": (lax.bitwise_xor, BOOL + INTS),
}


@pytest.mark.parametrize(
    "name,dt,shape",
    [pytest.param(n, d, s, id=f"{n}-{dtype_id(d)}-{s}")
     for n, (_, dts) in BINARY.items() for d in dts for s in BIN_SHAPES])
def test_binary(name, dt, shape):
  fn = BINARY[name][0]
  kw = {}
  if name == "pow" and dt == np.complex64:
    # Measured up to 2e-4 relative error (one part of one pair; 1.6e-5 elsewhere) on pairs like
    # (1000.5+1j)^(64-0j): the exponent amplifies the ~2 ULP errors of |x| and arg(x) 64-fold,
    # and a part much smaller than |result| carries that absolute error.
    kw = dict(rtol=3e-4)
  check_values(fn, *binary_args(dt, shape), **kw)


# ---- shifts -----------------------------------------------------------------------------------
SHIFTS = {"shl": lax.shift_left, "shr_logical": lax.shift_right_logical,
          "shr_arith": lax.shift_right_arithmetic}


def shift_amounts(dt) -> np.ndarray:
  w = np.iinfo(dt).bits
  amounts = [0, 1, 3, w - 1, w, w + 1, 2 * w, -1, -w, np.iinfo(dt).max, np.iinfo(dt).min]
  # Negative amounts wrap into unsigned types (a huge amount); signed ones stay negative.
  amounts = [a % (1 << w) for a in amounts]
  amounts = [a - (1 << w) if np.iinfo(dt).min < 0 and a > np.iinfo(dt).max else a
             for a in amounts]
  return np.array(amounts, dtype=object).astype(dt)


@pytest.mark.parametrize("name", list(SHIFTS))
@pytest.mark.parametrize("dt", INTS, ids=dtype_id)
def test_shift_all_amounts(name, dt):
  a = values(dt, (len(shift_amounts(dt)) * 3,), 0)
  b = np.tile(shift_amounts(dt), 3)
  check(SHIFTS[name], a, b)


@pytest.mark.parametrize("name", list(SHIFTS))
@pytest.mark.parametrize("dt", INTS, ids=dtype_id)
@pytest.mark.parametrize("k", ["0", "3", "width-1", "width", "width+1"])
def test_shift_constant_amount(name, dt, k):
  w = np.iinfo(dt).bits
  amount = {"0": 0, "3": 3, "width-1": w - 1, "width": w, "width+1": w + 1}[k]
  check(lambda x: SHIFTS[name](x, np.array(amount, dt)), values(dt, (3, 5)))


@pytest.mark.parametrize("name", list(SHIFTS))
@pytest.mark.parametrize("dt", [np.int8, np.uint32], ids=dtype_id)
@pytest.mark.parametrize("shape", [(), (0,)], ids=str)
def test_shift_shapes(name, dt, shape):
  check(SHIFTS[name], values(dt, shape, 3), values(dt, shape, 1))


# ---- unary ------------------------------------------------------------------------------------
def round_afz(x):
  return lax.round(x, lax.RoundingMethod.AWAY_FROM_ZERO)


def round_even(x):
  return lax.round(x, lax.RoundingMethod.TO_NEAREST_EVEN)


UNARY = {
    "neg": (lax.neg, INTS + FLOATS + COMPLEX),
    "abs": (lax.abs, SIGNED + FLOATS + COMPLEX),
    "sign": (lax.sign, INTS + FLOATS + COMPLEX),
    "not": (lax.bitwise_not, BOOL + INTS),
    "popcnt": (lax.population_count, INTS),
    "clz": (lax.clz, INTS),
    "exp": (lax.exp, FLOATS + COMPLEX),
    "expm1": (lax.expm1, FLOATS),
    "log": (lax.log, FLOATS + COMPLEX),
    "log1p": (lax.log1p, FLOATS),
    "logistic": (lax.logistic, FLOATS),
    "sqrt": (lax.sqrt, FLOATS + COMPLEX),
    "rsqrt": (lax.rsqrt, FLOATS),
    "cbrt": (lax.cbrt, FLOATS),
    "sin": (lax.sin, FLOATS + COMPLEX),
    "cos": (lax.cos, FLOATS + COMPLEX),
    "tan": (lax.tan, FLOATS + COMPLEX),
    "tanh": (lax.tanh, FLOATS + COMPLEX),
    "floor": (lax.floor, FLOATS),
    "ceil": (lax.ceil, FLOATS),
    "round_afz": (round_afz, FLOATS),
    "round_even": (round_even, FLOATS),
    "is_finite": (lax.is_finite, FLOATS),
    "real": (lax.real, COMPLEX),
    "imag": (lax.imag, COMPLEX),
}


@pytest.mark.parametrize(
    "name,dt,shape",
    [pytest.param(n, d, s, id=f"{n}-{dtype_id(d)}-{s}")
     for n, (_, dts) in UNARY.items() for d in dts for s in SHAPES])
def test_unary(name, dt, shape):
  check_values(UNARY[name][0], values(dt, shape, 1))


@pytest.mark.parametrize("dt", FLOATS, ids=dtype_id)
def test_round_halfway(dt):
  x = np.array([0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 0.49999997, -0.49999997, 8388609.0, -0.0,
                1e30, -3.5, 4.5], np.float32).astype(dt)
  check(lambda x: (round_afz(x), round_even(x), lax.floor(x), lax.ceil(x)), x, exact=True)


@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_complex_from_parts(shape):
  check(lax.complex, values(np.float32, shape, 0), values(np.float32, shape, 4))


def test_abs_int_min():
  check(lax.abs, np.array([np.iinfo(np.int32).min, -5, 5], np.int32))


# ---- select and clamp -------------------------------------------------------------------------
@pytest.mark.parametrize("dt", BOOL + INTS + FLOATS + COMPLEX, ids=dtype_id)
@pytest.mark.parametrize("shape", [(), (0,), (3, 5)], ids=str)
def test_select(dt, shape):
  pred = values(np.bool_, shape, 0)
  check(lax.select, pred, values(dt, shape, 0), values(dt, shape, 3))


@pytest.mark.parametrize("dt", [np.int32, np.float32], ids=dtype_id)
def test_select_scalar_pred(dt):
  a, b = values(dt, (3, 5), 0), values(dt, (3, 5), 2)
  check(lambda p, a, b: lax.select(jnp.broadcast_to(p, a.shape), a, b), np.bool_(True), a, b)
  check(lambda a, b: lax.select_n(np.bool_(False), a, b), a, b)


@pytest.mark.parametrize("dt", INTS + FLOATS, ids=dtype_id)
@pytest.mark.parametrize("shape", [(), (7,), (3, 5)], ids=str)
def test_clamp_scalar_bounds(dt, shape):
  lo, hi = (np.array(-3, dt), np.array(100, dt)) if np.dtype(dt).kind != "u" else (
      np.array(3, dt), np.array(100, dt))
  check(lax.clamp, lo, values(dt, shape, 0), hi)


@pytest.mark.parametrize("dt", INTS + FLOATS, ids=dtype_id)
def test_clamp_array_bounds(dt):
  x, lo = pairs(dt)
  hi = np.roll(x, 3)
  check(lax.clamp, lo, x, hi)


# ---- max / min against a constant ---------------------------------------------------------------
CONSTANT_SIDES = {
    "relu": lambda x: jnp.maximum(x, 0.0),
    "relu_left": lambda x: jnp.maximum(0.0, x),
    "max_neg_zero": lambda x: jnp.maximum(x, -0.0),   # the general route (-0 against +0)
    "min_zero": lambda x: jnp.minimum(x, 0.0),        # the general route
    "min_neg_zero": lambda x: jnp.minimum(x, -0.0),
    "clip": lambda x: jnp.clip(x, x.dtype.type(-1.5), x.dtype.type(2.0)),
    "max_neg": lambda x: jnp.maximum(x, -3.0),
    "min_inf": lambda x: jnp.minimum(np.inf, x),
}


@pytest.mark.parametrize("dt", [np.float32, np.float16, jnp.bfloat16], ids=dtype_id)
@pytest.mark.parametrize("name", list(CONSTANT_SIDES))
def test_max_min_with_a_constant_keep_the_bits(name, dt):
  # Against a constant, max / min take 3 ops (src/lower/elementwise.cc, beside_constant) where
  # the general route takes ~11; every edge value (±0, ±inf, subnormals) keeps its bits, compared
  # as integers, and NaN stays NaN (its f16 payload is MLX's f32 -> f16 conversion's, 0x7d00
  # where XLA's is 0x7e00, for every f16 op that makes a NaN).
  x = values(dt, (64,), 0)
  bits = np.uint32 if dt == np.float32 else np.uint16
  fn = CONSTANT_SIDES[name]

  def f(a):
    r = fn(a).astype(dt)
    nan = jnp.isnan(r)
    return nan, jnp.where(nan, bits(0), lax.bitcast_convert_type(r, bits))
  check(f, x)


# ---- NaN operands' bits (README, "Known differences") ------------------------------------------
def _f32(*bits):
  return np.array(bits, np.uint32).view(np.float32)


# One NaN operand: its bits, quieted, as XLA's CPU gives them. Two: XLA's CPU gives the first's.
# So do ours for sub and div; add and mul commute, and then ours carry whichever operand the C++
# compiler put first in the instruction (MLX's kernels: the second's). MLX's CPU only: a CUDA GPU
# makes its 0x7FFFFFFF of any NaN it computes (README).
NAN_A = _f32(0x7FC00000, 0xFFC00000, 0x7F800001, 0x3F800000, 0x3F800000,
             0xFFC00000, 0x7FC00000, 0x7FC00001, 0xFFC00003)
NAN_B = _f32(0x3F800000, 0x3F800000, 0x3F800000, 0xFFC00000, 0x7FC00005,
             0x7FC00000, 0xFFC00000, 0xFFC00002, 0x7F800004)
ONE_NAN, TWO_NANS = slice(0, 5), slice(5, None)


@pytest.mark.parametrize("name", ["sub", "div"])
def test_nan_operands_bits_exact(name, on_mlx_cpu):
  check(BINARY[name][0], NAN_A, NAN_B, exact=True)


@pytest.mark.parametrize("name", ["add", "mul"])
def test_nan_operands_bits_of_commuting_ops(name, on_mlx_cpu):
  got = check(BINARY[name][0], NAN_A, NAN_B, exact=True, nan_payloads=False).view(np.uint32)
  quiet_a, quiet_b = NAN_A.view(np.uint32) | 0x00400000, NAN_B.view(np.uint32) | 0x00400000
  np.testing.assert_array_equal(got[ONE_NAN], np.where(np.isnan(NAN_A), quiet_a, quiet_b)[ONE_NAN])
  either = (got[TWO_NANS] == quiet_a[TWO_NANS]) | (got[TWO_NANS] == quiet_b[TWO_NANS])
  assert either.all(), [hex(v) for v in got[TWO_NANS]]
