"""Differential tests of stablehlo.compare (src/lower/elementwise_compare.cc) against jax's CPU.

Every direction over every dtype, on all pairs of edge values (NaN, +-inf, -0.0 vs +0.0,
denormals, INT_MIN/INT_MAX, 2^(n-1) for unsigned types), plus small shapes.
"""

from __future__ import annotations

import numpy as np
import pytest
from jax import lax

from tests.ops.edge_values import BOOL, COMPLEX, FLOATS, INTS, dtype_id, pairs, values
from tests.ops.harness import check

DIRECTIONS = {"eq": lax.eq, "ne": lax.ne, "ge": lax.ge, "gt": lax.gt, "le": lax.le, "lt": lax.lt}


@pytest.mark.parametrize("dt", BOOL + INTS + FLOATS, ids=dtype_id)
@pytest.mark.parametrize("direction", list(DIRECTIONS))
def test_compare_pairs(direction, dt):
  check(DIRECTIONS[direction], *pairs(dt))


@pytest.mark.parametrize("dt", COMPLEX, ids=dtype_id)
@pytest.mark.parametrize("direction", ["eq", "ne"])
def test_compare_complex(direction, dt):
  check(DIRECTIONS[direction], *pairs(dt))


@pytest.mark.parametrize("dt", [np.bool_, np.int8, np.uint64, np.float16, np.float32],
                         ids=dtype_id)
@pytest.mark.parametrize("shape", [(), (0,), (3, 5)], ids=str)
@pytest.mark.parametrize("direction", list(DIRECTIONS))
def test_compare_shapes(direction, shape, dt):
  check(DIRECTIONS[direction], values(dt, shape, 0), values(dt, shape, 3))


@pytest.mark.parametrize("dt", [np.int32, np.float32], ids=dtype_id)
def test_compare_scalar_vs_array(dt):
  x = values(dt, (3, 5), 0)
  check(lambda x: (x < np.array(2, dt), x >= np.array(0, dt), x == x), x)
