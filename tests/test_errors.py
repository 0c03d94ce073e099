"""Programs the plugin cannot run fail at compile time with an error naming the op and the
user's source line — never a crash, never a silent CPU fallback."""

from __future__ import annotations

import os

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


def test_a_dimension_past_int32_is_refused_at_compile_time(mlx_device):
  # MLX's shapes are int32: a broadcast to 2^31 + 40 elements used to fail at run time with
  # MLX's "[broadcast_to] Negative dimensions not allowed". Compiling allocates nothing.
  n = 2**31 + 40
  x = jax.device_put(np.int8(7), mlx_device)
  with pytest.raises(Exception) as info:
    jax.jit(lambda v: jnp.broadcast_to(v, (n,))[n - 5:]).lower(x).compile()
  message = str(info.value)
  assert "UNIMPLEMENTED" in message and "2^31 - 1" in message, message
  assert "stablehlo.broadcast_in_dim" in message and f"dimension {n}" in message, message
  assert "test_errors.py" in message, message
  # An argument of that size is named as the argument.
  with pytest.raises(Exception) as info:
    on_mlx = jax.sharding.SingleDeviceSharding(mlx_device)
    huge = jax.ShapeDtypeStruct((3, n), jnp.int8, sharding=on_mlx)
    jax.jit(lambda v: v[:, :3]).lower(huge).compile()
  assert "argument 0" in str(info.value) and f"dimension {n}" in str(info.value), info.value


# ---- bad input at the PJRT boundary, from Python (the C ABI side: src/pjrt/client_test.cc) -------
# jax checks most of these before calling the plugin; either way the result is an exception and
# a process that keeps working, never a crash.


@pytest.mark.parametrize("where", ["jit", "device_put"])
def test_a_column_major_result_is_refused_not_ignored(mlx_device, where):
  # jax's Format(Layout(...)) reaches the program as mhlo.layout_mode; arrays here are row-major
  # only, so a result asked in another layout is a compile error naming it (before, it came back
  # row-major without a word).
  from jax.experimental.layout import Format, Layout
  sharding = jax.sharding.SingleDeviceSharding(mlx_device)
  x = np.arange(24, dtype=np.float32).reshape(4, 6)
  column_major = Format(Layout(major_to_minor=(1, 0)), sharding)
  with pytest.raises(Exception, match=r"keeps arrays row-major.*\n  result 0: layout \{0,1\}"):
    if where == "jit":
      jax.jit(lambda a: a + 1, out_shardings=column_major)(jax.device_put(x, mlx_device))
    else:
      jax.device_put(x, column_major)


def test_row_major_automatic_and_argument_layouts_run(mlx_device):
  from jax.experimental.layout import Format, Layout
  sharding = jax.sharding.SingleDeviceSharding(mlx_device)
  x = jax.device_put(np.arange(24, dtype=np.float32).reshape(4, 1, 6), mlx_device)
  for layout in [Layout(major_to_minor=(0, 1, 2)), Layout(major_to_minor=(1, 0, 2)),
                 Layout.AUTO]:  # a size-1 dim may sit anywhere: the same bytes
    out = jax.jit(lambda a: a * 2, out_shardings=Format(layout, sharding))(x)
    np.testing.assert_array_equal(np.asarray(out), np.asarray(x) * 2)
  # An argument asked column-major: the program's parameters are row-major, and jax passes its
  # arguments so (jax's layout_test.py, test_in_layouts_jit_jnp_input).
  f = jax.jit(lambda a: a + 1, in_shardings=Format(Layout(major_to_minor=(1, 0)), sharding))
  y = np.arange(24, dtype=np.float32).reshape(4, 6)
  for _ in range(2):  # the second call through jax's C++ dispatch
    np.testing.assert_array_equal(np.asarray(f(y)), y + 1)


def test_donated_buffer_cannot_be_used_again(mlx_device):
  step = jax.jit(lambda v: v + 1, donate_argnums=0)
  x = jax.device_put(np.arange(4, dtype=np.int32), mlx_device)
  y = step(x)
  assert x.is_deleted()
  # As on jax's CPU backend: for the program that took it, INVALID_ARGUMENT from Execute (a
  # ValueError) on jax 0.10/0.11, jax's own RuntimeError on 0.12 (it checks first); elsewhere
  # jax's RuntimeError.
  with pytest.raises((ValueError, RuntimeError), match="deleted"):
    step(x)
  with pytest.raises(RuntimeError, match="deleted"):
    jax.jit(lambda v: v * 3)(x)
  with pytest.raises(RuntimeError, match="deleted"):
    np.asarray(x)
  np.testing.assert_array_equal(np.asarray(step(y)), np.arange(4, dtype=np.int32) + 2)


def test_deleted_buffer_is_an_error_as_input(mlx_device):
  fn = jax.jit(lambda v: v * 2)
  x = jax.device_put(np.ones(3, np.float32), mlx_device)
  x.delete()
  with pytest.raises(RuntimeError, match="deleted"):
    fn(x)
  np.testing.assert_array_equal(np.asarray(fn(jnp.ones(3, np.float32, device=mlx_device))),
                                [2.0, 2.0, 2.0])


@pytest.mark.parametrize("bad", [np.ones((3,), np.int32), np.ones((4,), np.float32),
                                 np.ones((3, 1), np.float32)], ids=["dtype", "shape", "rank"])
def test_compiled_program_refuses_wrong_argument_types(mlx_device, bad):
  compiled = jax.jit(lambda v: v * 2).lower(
      jax.device_put(np.ones(3, np.float32), mlx_device)).compile()
  with pytest.raises(TypeError, match="Argument types differ|argument"):
    compiled(jax.device_put(bad, mlx_device))
  with pytest.raises(TypeError):
    compiled(jax.device_put(np.ones(3, np.float32), mlx_device), jax.device_put(bad, mlx_device))
  np.testing.assert_array_equal(
      np.asarray(compiled(jax.device_put(np.ones(3, np.float32), mlx_device))), [2.0, 2.0, 2.0])


def test_arrays_of_a_replaced_client_stay_usable_and_mixing_clients_is_an_error():
  # clear_backends() makes jax create a new client; arrays of the old one keep it alive. Run in
  # a subprocess: the old client must not disturb the other tests' devices.
  import subprocess
  import sys

  code = (
      "import jax, numpy as np\n"
      "from jax.extend import backend\n"
      "x = jax.device_put(np.arange(4, dtype=np.float32), jax.devices('mlx')[0])\n"
      "backend.clear_backends()\n"
      "y = jax.device_put(np.arange(4, dtype=np.float32), jax.devices('mlx')[0])\n"
      "f = jax.jit(lambda v: v * 2)\n"
      "print('old', np.asarray(f(x)).tolist(), 'new', np.asarray(f(y)).tolist())\n"
      "try:\n"
      "  x + y\n"
      "except ValueError as e:\n"
      "  print('mixed refused:', 'incompatible devices' in str(e))\n")
  env = dict(os.environ, JAX_PLATFORMS="cpu,mlx")
  proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                        timeout=300)
  assert proc.returncode == 0, proc.stderr[-3000:]
  assert "old [0.0, 2.0, 4.0, 6.0] new [0.0, 2.0, 4.0, 6.0]" in proc.stdout, proc.stdout
  assert "mixed refused: True" in proc.stdout, proc.stdout


def test_donating_a_buffer_passed_twice_is_an_error_and_keeps_it(mlx_device):
  # As with XLA's clients (jax's test_double_donation): donating x while also passing it as
  # another argument is refused before anything runs, and x stays usable.
  f = jax.jit(lambda x, y: x + y, donate_argnums=(0,))
  x = jax.device_put(np.arange(10, dtype=np.float32), mlx_device)
  with pytest.raises(Exception, match="donated and also passed"):
    f(x, x).block_until_ready()
  np.testing.assert_array_equal(np.asarray(x), np.arange(10, dtype=np.float32))
  y = jax.device_put(np.ones(10, np.float32), mlx_device)
  np.testing.assert_array_equal(np.asarray(f(x, y)), np.arange(10, dtype=np.float32) + 1)


@pytest.mark.parametrize("donated,other", [(37, 3), (3, 37)])
def test_a_donated_buffer_passed_again_is_found_among_many_arguments(mlx_device, donated, other):
  # Found by sorting the arguments (a training step passes hundreds of donated buffers): the
  # error names the donated one and its other use, whichever comes first.
  n = 48
  f = jax.jit(lambda *xs: sum(xs), donate_argnums=(donated,))
  xs = [jax.device_put(np.full(4, i, np.float32), mlx_device) for i in range(n)]
  args = list(xs)
  args[donated] = xs[other]
  with pytest.raises(Exception, match=f"argument {donated} is donated and also passed as "
                                      f"argument {other}"):
    f(*args).block_until_ready()
  np.testing.assert_array_equal(np.asarray(xs[other]), np.full(4, other, np.float32))
  total = sum(range(n))
  np.testing.assert_array_equal(np.asarray(f(*xs)), np.full(4, total, np.float32))
