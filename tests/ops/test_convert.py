"""Differential tests of stablehlo.convert and stablehlo.bitcast_convert (src/lower/convert.cc).

convert: every pair among bool, int8..uint64, f16, bf16, f32, complex64 on the source type's
edge values, plus values that probe int->float rounding and float->int saturation (NaN -> 0).
bitcast_convert: same-width pairs, and width changes (f32 -> 4 x u8 adds a trailing dim).
"""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax

from tests.ops.edge_values import BOOL, COMPLEX, FLOATS, INTS, dtype_id, edges, values
from tests.ops.harness import check

ALL = BOOL + INTS + FLOATS + COMPLEX


def convert_to(dt):
  return lambda x: lax.convert_element_type(x, dt)


@pytest.mark.parametrize("dst", ALL, ids=dtype_id)
@pytest.mark.parametrize("src", ALL, ids=dtype_id)
def test_convert_pair(src, dst):
  x = edges(src)
  if np.dtype(dst).kind not in "fc":
    check(convert_to(dst), x)
    return
  # Conversions are exact: no tolerance. NaN payloads may differ, so bits are compared only
  # on the values that are not NaN (that still checks the sign of zeros).
  check(convert_to(dst), x, rtol=0, atol=0)
  finite = x[~np.isnan(x.astype(np.complex64 if x.dtype.kind == "c" else np.float32))]
  check(convert_to(dst), finite, exact=True)


@pytest.mark.parametrize("dst", [np.int8, np.uint8, np.int32, np.float16, np.complex64],
                         ids=dtype_id)
@pytest.mark.parametrize("shape", [(), (0,), (3, 5)], ids=str)
def test_convert_shapes(shape, dst):
  check(convert_to(dst), values(np.float32, shape, 2))


SATURATION = [np.nan, -np.nan, np.inf, -np.inf, 1e10, -1e10, 2.0**31, -2.0**31, 2.0**31 - 128,
              2.0**32, 2.0**63, -2.0**63, 2.0**64, 2.0**63 - 2.0**39, 255.9, 256.0, -1.0, -0.9,
              127.9, 128.0, -128.9, -129.0, 65535.5, 65536.0, 32767.9, -32768.9, 0.999, -0.0]


@pytest.mark.parametrize("dst", INTS, ids=dtype_id)
@pytest.mark.parametrize("src", FLOATS, ids=dtype_id)
def test_float_to_int_saturates(src, dst):
  check(convert_to(dst), np.array(SATURATION, np.float64).astype(src))


ROUNDING = [2**24 + 1, 2**24 + 3, 2**25 + 3, 2**31 - 1, -2**31, 2**53 + 1, 2**63 - 1, -2**63,
            2**62 + 2**38 + 1, 2049, 2051, 65519, 65520, 257, 259, 33, 1023, 1025]


@pytest.mark.parametrize("dst", FLOATS, ids=dtype_id)
@pytest.mark.parametrize("src", [np.int32, np.int64, np.uint32, np.uint64], ids=dtype_id)
def test_int_to_float_rounds(src, dst):
  info = np.iinfo(src)
  vals = [v for v in ROUNDING if info.min <= v <= info.max] + [info.max, info.min]
  check(convert_to(dst), np.array(vals, dtype=object).astype(src))


@pytest.mark.parametrize("dst", [np.float16, jnp.bfloat16], ids=dtype_id)
def test_f32_to_half_rounds(dst):
  x = np.array([1.0009766, 1.0004883, 1.0014648, 65504.0, 65520.0, 65519.99, 6e-8, 3e-8,
                1.00390625, 1.001953125, 1.005859375, 3.4e38, -3.4e38, 1e-40], np.float32)
  check(convert_to(dst), x, exact=True)


def test_unsigned_signed_float_chain():
  # MLX #3338: compile miscompiles astype chains u32 -> s32 -> f32.
  x = np.array([0, 1, 2**31, 2**32 - 1, 2**31 + 5], np.uint32)
  check(lambda x: lax.convert_element_type(lax.convert_element_type(x, np.int32), np.float32), x)
  check(lambda x: lax.convert_element_type(lax.convert_element_type(x, np.int8), np.float32), x)
  y = np.array([-1, -128, 127, 5], np.int8)
  check(lambda y: lax.convert_element_type(lax.convert_element_type(y, np.uint32), np.float32),
        y)


# ---- bitcast_convert --------------------------------------------------------------------------
WIDTH_GROUPS = [[np.int8, np.uint8], [np.int16, np.uint16, np.float16, jnp.bfloat16],
                [np.int32, np.uint32, np.float32], [np.int64, np.uint64]]
SAME_WIDTH = [(a, b) for g in WIDTH_GROUPS for a in g for b in g]


@pytest.mark.parametrize("src,dst", [pytest.param(a, b, id=f"{dtype_id(a)}-{dtype_id(b)}")
                                     for a, b in SAME_WIDTH])
def test_bitcast_same_width(src, dst):
  check(lambda x: lax.bitcast_convert_type(x, dst), edges(src), exact=True)


NARROWING = [(np.float32, np.uint8), (np.float32, np.int16), (np.uint64, np.uint32),
             (np.int64, np.float32), (np.int32, np.int8), (np.float16, np.uint8),
             (np.uint64, np.int8)]


@pytest.mark.parametrize("src,dst", [pytest.param(a, b, id=f"{dtype_id(a)}-{dtype_id(b)}")
                                     for a, b in NARROWING])
@pytest.mark.parametrize("shape", [(), (3,), (2, 3)], ids=str)
def test_bitcast_narrowing(src, dst, shape):
  check(lambda x: lax.bitcast_convert_type(x, dst), values(src, shape, 1), exact=True)


@pytest.mark.parametrize("src,dst", [pytest.param(b, a, id=f"{dtype_id(b)}-{dtype_id(a)}")
                                     for a, b in NARROWING])
@pytest.mark.parametrize("shape", [(), (3,), (2, 3)], ids=str)
def test_bitcast_widening(src, dst, shape):
  ratio = np.dtype(dst).itemsize // np.dtype(src).itemsize
  check(lambda x: lax.bitcast_convert_type(x, dst), values(src, shape + (ratio,), 1),
        exact=True)
