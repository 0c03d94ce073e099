"""Narrow types against jax's CPU backend, bit for bit: the float8 family and float4 (stored as
raw uint8 bits) and int4/uint4/int2/uint2 (int8/uint8 storage).

Converts run over every bit pattern of the narrow type (to every wider type and to every other
narrow type), and into the narrow types from f32/f16/bf16 values chosen to hit every rounding
case: each representable value, the midpoints between neighbours (ties to even), just above
and below them, overflow, inf, NaN and signed zeros. Arithmetic runs over every pair of bit
patterns (XLA's CPU computes these ops in f32 and rounds back, as src/lower/emulated_types.cc
does); sub-byte int arithmetic wraps in its width.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest
from jax import lax

from tests.ops.harness import check, run_on

_FLOAT_NAMES = ["float8_e4m3fn", "float8_e5m2", "float8_e4m3fnuz", "float8_e5m2fnuz",
                "float8_e4m3b11fnuz", "float8_e4m3", "float8_e3m4", "float8_e8m0fnu",
                "float4_e2m1fn"]
NARROW_FLOATS = [getattr(jnp, n) for n in _FLOAT_NAMES if hasattr(jnp, n)]
SUBBYTE_INTS = [jnp.int4, jnp.uint4, jnp.int2, jnp.uint2]
WIDE = [np.float32, np.float16, jnp.bfloat16, np.int32, np.uint8, np.int8, np.bool_,
        np.complex64]


def name(dt) -> str:
  return np.dtype(dt).name


def nbits(dt) -> int:
  return 4 if "float4" in name(dt) else 8


def all_patterns(dt) -> np.ndarray:
  """Every value of a narrow float type, as an array of that type."""
  return np.arange(1 << nbits(dt), dtype=np.uint8).view(dt)


def all_ints(dt) -> np.ndarray:
  info = ml_dtypes.iinfo(dt)
  return np.arange(int(info.min), int(info.max) + 1).astype(dt)


def rounding_cases(dt) -> np.ndarray:
  """f32 values exercising every rounding decision into `dt`."""
  vals = all_patterns(dt).astype(np.float32)
  finite = np.unique(vals[np.isfinite(vals)])
  mids = (finite[:-1].astype(np.float64) + finite[1:]) / 2
  mids = mids.astype(np.float32)
  around = np.concatenate([np.nextafter(mids, np.float32(np.inf)),
                           np.nextafter(mids, np.float32(-np.inf))])
  fmax = float(finite.max())
  big = np.array([fmax * 1.0625, fmax * 1.125, fmax * 1.5, fmax * 2, 1e30, np.inf, -np.inf,
                  np.nan, -np.nan, 0.0, -0.0, 3.0, 6.0, 12.0, 0.75, 1e-30], np.float32)
  out = np.concatenate([finite, mids, around, big, -big])
  # jax's CPU backend flushes f32 denormal inputs to zero; keep to normal f32 values.
  tiny = np.finfo(np.float32).tiny
  return out[~((np.abs(out) < tiny) & (out != 0))]


@pytest.mark.parametrize("to", WIDE, ids=name)
@pytest.mark.parametrize("dt", NARROW_FLOATS, ids=name)
def test_convert_from_every_pattern(dt, to):
  check(lambda x: x.astype(to), all_patterns(dt), exact=True)


@pytest.mark.parametrize("src", [np.float32, np.float16, jnp.bfloat16], ids=name)
@pytest.mark.parametrize("dt", NARROW_FLOATS, ids=name)
def test_convert_into_rounding(dt, src):
  x = rounding_cases(dt).astype(src)
  check(lambda x: x.astype(dt), x, exact=True)


@pytest.mark.parametrize("dt", NARROW_FLOATS, ids=name)
def test_convert_into_from_ints(dt):
  x = np.array([0, 1, -1, 2, 3, 5, 7, 9, 17, 100, 255, -255, 448, 480, 57344, 61440, 1 << 20,
                -(1 << 30), (1 << 31) - 1], np.int32)
  check(lambda x: x.astype(dt), x, exact=True)


@pytest.mark.parametrize("to", NARROW_FLOATS, ids=name)
@pytest.mark.parametrize("dt", NARROW_FLOATS, ids=name)
def test_convert_between_narrow_floats(dt, to):
  check(lambda x: x.astype(to), all_patterns(dt), exact=True)


def check_arith(fn, *args):
  """check(), bit-exact except that a NaN result may be any NaN: XLA's CPU itself gives NaNs
  of either sign depending on the op and on whether it upcasts to f16 or f32 (e5m2 results are
  always 0x7f, e4m3 max(NaN, x) is +NaN, add keeps the first operand's sign), and which NaN is
  not part of the contract for floats of any width (harness.py compares NaN positions)."""
  want = run_on(jax.devices("cpu")[0], fn, *args)
  got = run_on(jax.devices("mlx")[0], fn, *args)
  for g, w in zip(jax.tree_util.tree_leaves(got), jax.tree_util.tree_leaves(want)):
    assert g.dtype == w.dtype and g.shape == w.shape, (g.dtype, w.dtype, g.shape, w.shape)
    nan_g, nan_w = np.isnan(g.astype(np.float32)), np.isnan(w.astype(np.float32))
    np.testing.assert_array_equal(nan_g, nan_w, err_msg="NaN positions")
    u = np.dtype(f"u{g.dtype.itemsize}")
    np.testing.assert_array_equal(g.view(u)[~nan_w], w.view(u)[~nan_w])


def pair_grid(x):
  a, b = np.meshgrid(x, x)
  return a.reshape(-1), b.reshape(-1)


FLOAT_BINARY = {"add": lax.add, "sub": lax.sub, "mul": lax.mul, "div": lax.div,
                "max": lax.max, "min": lax.min}
FLOAT_UNARY = {"neg": lax.neg, "abs": lax.abs, "sqrt": lax.sqrt, "exp": lax.exp,
               "floor": lax.floor, "sign": lax.sign}


@pytest.mark.parametrize("op", list(FLOAT_BINARY))
@pytest.mark.parametrize("dt", NARROW_FLOATS, ids=name)
def test_float_binary_every_pair(dt, op):
  check_arith(FLOAT_BINARY[op], *pair_grid(all_patterns(dt)))


@pytest.mark.parametrize("dt", NARROW_FLOATS, ids=name)
def test_float_compare_every_pair(dt):
  a, b = pair_grid(all_patterns(dt))
  check(lambda a, b: (a < b, a == b, a >= b, a != b), a, b, exact=True)


@pytest.mark.parametrize("op", list(FLOAT_UNARY))
@pytest.mark.parametrize("dt", NARROW_FLOATS, ids=name)
def test_float_unary_every_pattern(dt, op):
  # exp/sqrt compute in f32 on both sides (MLX's and XLA's kernels may differ by an f32 ULP,
  # which the rounding to 3-4 mantissa bits absorbs except at exact ties).
  check_arith(FLOAT_UNARY[op], all_patterns(dt))


# (XLA's CPU rejects a float4 dot; e8m0 has no zero to fill with.)
@pytest.mark.parametrize("dt", [d for d in NARROW_FLOATS
                                if "e8m0" not in name(d) and "float4" not in name(d)], ids=name)
def test_float_dot_and_reduce(dt):
  x = all_patterns(dt)
  x = np.where(np.isfinite(x.astype(np.float32)), x, np.zeros_like(x))[: 1 << nbits(dt)]
  a = x[:48].reshape(6, 8) if x.size >= 48 else np.resize(x, (6, 8))
  # max and a dot with an f32 result are exact; a sum rounds to the narrow type at each step,
  # so it depends on the order (XLA's is sequential, ours a tree) unless the partial sums are
  # exact: small integers.
  ints = np.resize(np.array([0, 1, 2, -1, 3, -2], np.float32), (6, 8)).astype(dt)
  check_arith(lambda a, i: (jnp.max(a, axis=0), jnp.sum(i, axis=1),
                            lax.dot(a, a.T, preferred_element_type=jnp.float32)), a, ints)


# ---- sub-byte integers ------------------------------------------------------------------------
def check_ints(fn, *args):
  """check() on the values of sub-byte int results: our storage keeps them sign-extended in a
  byte (0xf8 for int4 -8, src/lower/dtypes.h) where jax's CPU leaves the high bits clear (0x08);
  both read back as the same int4 value, and the low bits are compared exactly."""
  def widen(y):
    if y.dtype in (jnp.int4, jnp.int2):
      return y.astype(jnp.int8)
    if y.dtype in (jnp.uint4, jnp.uint2):
      return y.astype(jnp.uint8)
    return y
  want = jax.tree_util.tree_map(widen, run_on(jax.devices("cpu")[0], fn, *args))
  got = run_on(jax.devices("mlx")[0], fn, *args)
  for g, w in zip(jax.tree_util.tree_leaves(got), jax.tree_util.tree_leaves(want)):
    if g.dtype in (jnp.int4, jnp.int2, jnp.uint4, jnp.uint2):
      bits = 4 if g.dtype in (jnp.int4, jnp.uint4) else 2
      mask = np.uint8((1 << bits) - 1)
      np.testing.assert_array_equal(g.view(np.uint8) & mask, w.view(np.uint8) & mask)
      np.testing.assert_array_equal(widen(g), w)
    else:
      check_same = np.testing.assert_array_equal
      assert g.dtype == w.dtype
      check_same(np.ascontiguousarray(g).view(np.uint8), np.ascontiguousarray(w).view(np.uint8))
INT_BINARY = {"add": lax.add, "sub": lax.sub, "mul": lax.mul, "div": lax.div, "rem": lax.rem,
              "max": lax.max, "min": lax.min, "and": lax.bitwise_and, "or": lax.bitwise_or,
              "xor": lax.bitwise_xor, "shl": lax.shift_left,
              "shr_logical": lax.shift_right_logical,
              "shr_arith": lax.shift_right_arithmetic}
# (jax refuses abs on sub-byte ints.)
INT_UNARY = {"neg": lax.neg, "not": lax.bitwise_not, "popcnt": lax.population_count,
             "clz": lax.clz, "sign": lax.sign}


@pytest.mark.parametrize("op", list(INT_BINARY))
@pytest.mark.parametrize("dt", SUBBYTE_INTS, ids=name)
def test_int_binary_every_pair(dt, op):
  check_ints(INT_BINARY[op], *pair_grid(all_ints(dt)))


@pytest.mark.parametrize("op", list(INT_UNARY))
@pytest.mark.parametrize("dt", SUBBYTE_INTS, ids=name)
def test_int_unary_every_value(dt, op):
  check_ints(INT_UNARY[op], all_ints(dt))


@pytest.mark.parametrize("dt", SUBBYTE_INTS, ids=name)
def test_int_compare_every_pair(dt):
  a, b = pair_grid(all_ints(dt))
  check_ints(lambda a, b: (a < b, a == b, a >= b), a, b)


@pytest.mark.parametrize("to", [np.int32, np.uint8, np.float32, np.bool_, jnp.int4, jnp.uint4,
                                jnp.int2, jnp.uint2, jnp.float8_e4m3fn], ids=name)
@pytest.mark.parametrize("dt", SUBBYTE_INTS, ids=name)
def test_int_convert_from(dt, to):
  check_ints(lambda x: x.astype(to), all_ints(dt))


@pytest.mark.parametrize("src", [np.int32, np.uint16, np.int8], ids=name)
@pytest.mark.parametrize("dt", SUBBYTE_INTS, ids=name)
def test_int_convert_into_wraps(dt, src):
  info = np.iinfo(src)
  x = np.arange(-40, 40).clip(info.min, info.max).astype(src)
  x = np.concatenate([x, np.array([info.min, info.max], src)])
  check_ints(lambda x: x.astype(dt), x)


@pytest.mark.parametrize("dt", SUBBYTE_INTS, ids=name)
def test_int_convert_from_float_saturates(dt):
  x = np.array([0.0, -0.0, 0.5, -0.5, 1.5, -1.5, 2.9, -2.9, 7.0, 7.9, 8.0, -8.0, -8.9, -9.0,
                15.0, 16.0, 100.0, -100.0, 1e30, np.inf, -np.inf, np.nan], np.float32)
  check_ints(lambda x: x.astype(dt), x)


@pytest.mark.parametrize("dt", SUBBYTE_INTS, ids=name)
def test_int_sum_and_dot_wrap(dt):
  x = np.resize(all_ints(dt), (5, 7))
  check_ints(lambda x: jnp.sum(x, axis=1, dtype=dt), x)
  if "2" not in name(dt):  # XLA's CPU has no 2-bit dot
    check_ints(lambda x: lax.dot(x, x.T), x)


# ---- bitcast_convert of sub-byte types ----------------------------------------------------------
# XLA packs sub-byte elements little-endian, element 0 in the least significant bits; every bit
# pattern of the narrow side goes through, packed into / unpacked from every wider type.
PACKED = SUBBYTE_INTS + [jnp.float4_e2m1fn]
# Wider sides: each width, signed, unsigned and float storage among them (the unpacking of a
# wide type views its bytes first, so one type per storage class and width suffices).
BYTE_AND_UP = [np.int8, np.uint8, jnp.float8_e5m2, np.uint16, jnp.bfloat16, np.int32,
               np.float32, np.uint64, np.float64, jnp.int4, jnp.uint4]


def bit_width(dt) -> int:
  if dt in SUBBYTE_INTS:
    return ml_dtypes.iinfo(dt).bits
  return 4 if "float4" in name(dt) else np.dtype(dt).itemsize * 8


def every_pattern(dt) -> np.ndarray:
  """Every bit pattern of a sub-byte type (as values of that type)."""
  return all_ints(dt) if dt in SUBBYTE_INTS else all_patterns(dt)


def random_bits(dt, shape, seed) -> np.ndarray:
  """Uniformly random bits (every byte value, NaN patterns included) viewed as `dt`."""
  n = int(np.prod(shape)) * np.dtype(dt).itemsize
  raw = np.random.default_rng(seed).integers(0, 256, n, dtype=np.uint8)
  return raw.view(np.dtype(dt)).reshape(shape)


# (narrow, wide) pairs whose widths divide: the narrow side packs into the wide one.
PACKED_PAIRS = [(a, b) for a in PACKED for b in BYTE_AND_UP
                if bit_width(b) > bit_width(a) and bit_width(b) % bit_width(a) == 0]


SAME_WIDTH_PACKED = [pytest.param(a, b, id=f"{name(a)}-{name(b)}") for a in PACKED
                     for b in PACKED if bit_width(a) == bit_width(b)]


@pytest.mark.parametrize("src,dst", SAME_WIDTH_PACKED)
def test_bitcast_subbyte_same_width(src, dst):
  check_ints(lambda x: lax.bitcast_convert_type(x, dst), every_pattern(src))


@pytest.mark.parametrize("src,dst", [pytest.param(a, b, id=f"{name(a)}-{name(b)}")
                                     for a, b in PACKED_PAIRS])
@pytest.mark.parametrize("lead", [(), (2, 3)], ids=str)
def test_bitcast_pack(src, dst, lead):
  # The last dim (width ratio) packs into one element; patterns cycle so each slot sees all.
  ratio = bit_width(dst) // bit_width(src)
  pats = every_pattern(src)
  n = int(np.prod(lead)) * ratio
  idx = (np.arange(n) * 7 + np.arange(n) // len(pats)) % len(pats)
  check_ints(lambda x: lax.bitcast_convert_type(x, dst), pats[idx].reshape(lead + (ratio,)))


@pytest.mark.parametrize("src,dst", [pytest.param(b, a, id=f"{name(b)}-{name(a)}")
                                     for a, b in PACKED_PAIRS])
@pytest.mark.parametrize("shape", [(), (2, 3), (0,)], ids=str)
def test_bitcast_unpack(src, dst, shape):
  if bit_width(src) < 8:
    pats = every_pattern(src)
    x = pats[np.arange(int(np.prod(shape))) % len(pats)].reshape(shape)
  else:
    x = random_bits(src, shape, 3)
  check_ints(lambda x: lax.bitcast_convert_type(x, dst), x)


@pytest.mark.parametrize("dt", PACKED, ids=name)
def test_bitcast_every_byte_round_trip(dt):
  # Every byte value unpacks to two (or four) elements and packs back unchanged.
  x = np.arange(256, dtype=np.uint8)
  check_ints(lambda x: lax.bitcast_convert_type(lax.bitcast_convert_type(x, dt), np.int8), x)
  check_ints(lambda x: lax.bitcast_convert_type(x, dt), x)


# ---- sort comparators and reduce_window bodies on narrow types ------------------------------------
# Region bodies compute through the same emulation as the top level (src/lower/emulated_types.h):
# jax's sort comparator canonicalizes NaN and -0 in the narrow type, then compares in XLA's
# total order (for the fnuz types, whose one NaN is 0x80, that NaN sorts lowest).


def shuffled(x, seed=0):
  return x[np.random.default_rng(seed).permutation(len(x))]


@pytest.mark.parametrize("descending", [False, True])
@pytest.mark.parametrize("dt", NARROW_FLOATS, ids=name)
def test_argsort_every_pattern(dt, descending):
  # Every bit pattern (NaNs, infinities, signed zeros): the stable order's indices, exactly.
  check(lambda a: jnp.argsort(a, descending=descending), shuffled(all_patterns(dt)))


@pytest.mark.parametrize("dt", NARROW_FLOATS, ids=name)
def test_sort_values(dt):
  # XLA's CPU sorts these in f16 and converts back, which quiets NaN payloads (e4m3 0x79 comes
  # back 0x7c): values are compared without NaNs, whose order test_argsort_every_pattern checks.
  x = all_patterns(dt)
  x = shuffled(x[~np.isnan(x.astype(np.float32))], 1)
  check(lambda a: (jnp.sort(a), lax.sort((a, np.arange(len(a), dtype=np.int32)), num_keys=1)),
        x)


@pytest.mark.parametrize("dt", SUBBYTE_INTS, ids=name)
def test_sort_subbyte_ints(dt):
  x = shuffled(np.resize(all_ints(dt), 40), 2)
  check_ints(lambda a: (jnp.sort(a), jnp.argsort(a), jnp.argsort(a, descending=True)), x)


@pytest.mark.parametrize("op", ["add", "max", "min", "mul"])
@pytest.mark.parametrize("dt", SUBBYTE_INTS, ids=name)
def test_reduce_window_subbyte_ints(dt, op):
  # Wrapping sums and products: XLA's CPU computes in 8 bits, the body here op by op in its
  # width; modular arithmetic makes them agree.
  fn = {"add": lax.add, "max": lax.max, "min": lax.min, "mul": lax.mul}[op]
  x = np.resize(all_ints(dt), (5, 7))
  init = np.array(1 if op == "mul" else 0, dt)
  check_ints(lambda a: lax.reduce_window(a, init, fn, (2, 3), (1, 2), ((1, 0), (0, 1))), x)


@pytest.mark.parametrize("dt", [jnp.float8_e4m3fn, jnp.float4_e2m1fn], ids=name)
def test_reduce_window_narrow_float_refused(dt):
  # XLA's CPU reduces a window of narrow floats in f16 and rounds once; emulating the body op
  # by op would round every step, so the op is refused at compile time, naming the type.
  x = all_patterns(dt)[:12].reshape(3, 4)
  f = jax.jit(lambda a: lax.reduce_window(a, np.array(0, dt), lax.add, (2, 2), (1, 1), "VALID"))
  with pytest.raises(Exception, match=r"stablehlo.reduce_window \(f\w+ \(XLA reduces windows"):
    f(jax.device_put(x, jax.devices("mlx")[0]))
