"""jax's lax.dce_sink (src/lower/dce_sink.cc): a side-effecting custom call with operands and no
results, which must compile and leave the program's results as jax's CPU computes them."""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax

from tests.ops.edge_values import dtype_id, values
from tests.ops.harness import check


@pytest.mark.parametrize("shape", [(), (0,), (3, 4)], ids=str)
@pytest.mark.parametrize("dt", [np.float32, np.int8, np.uint64, np.bool_], ids=dtype_id)
def test_dce_sink_keeps_results(dt, shape):
  def f(x):
    y = x + x if dt != np.bool_ else ~x
    lax.dce_sink(y, prevent_mlir_dce=True)
    return x, jnp.sum(x.astype(np.int32))
  check(f, values(dt, shape, 1))


def test_dce_sink_pytree_of_operands():
  def f(x, i):
    lax.dce_sink({"a": x * 2, "b": (i, i + 1)}, prevent_mlir_dce=True)
    lax.dce_sink(x)  # default: jax's own DCE removes it before we see it
    return x - 1
  check(f, values(np.float32, (5,), 2), values(np.int32, (2, 2), 3))
