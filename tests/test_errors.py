"""Programs the plugin cannot run fail at compile time with an error naming the op and the
user's source line — never a crash, never a silent CPU fallback."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest


def _unsupported_program(x):
  # A foreign-function call to a target nobody registered: a custom call the plugin cannot run
  # (any op without a rule takes the same path).
  return jax.ffi.ffi_call("no_such_ffi_target", jax.ShapeDtypeStruct(x.shape, x.dtype))(x)


def test_unsupported_op_is_a_compile_error_naming_op_and_line(mlx_device):
  x = jax.device_put(np.ones(8, np.complex64), mlx_device)
  with pytest.raises(Exception) as info:
    jax.jit(_unsupported_program)(x)
  message = str(info.value)
  assert "UNIMPLEMENTED" in message
  assert "stablehlo.custom_call" in message and "no_such_ffi_target" in message, message
  assert "test_errors.py" in message, message  # the user's source line survives


def test_process_still_works_after_a_compile_error(mlx_device):
  x = jax.device_put(np.ones(8, np.complex64), mlx_device)
  with pytest.raises(Exception):
    jax.jit(_unsupported_program)(x)
  y = jax.device_put(np.arange(5, dtype=np.int32), mlx_device)
  np.testing.assert_array_equal(np.asarray(y), np.arange(5, dtype=np.int32))


def test_float64_compute_is_refused_not_downgraded(mlx_device):
  with jax.enable_x64(True):
    x = jax.device_put(np.ones(4, np.float64), mlx_device)
    with pytest.raises(Exception) as info:
      jax.jit(lambda v: v * 2.0)(x)
    assert "f64" in str(info.value) or "float64" in str(info.value)
