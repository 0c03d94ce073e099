"""Asynchronous errors, driven by fault injection (docs/errors.md, JAXMLX_FAULT).

A run fails on the device after Execute returned: that call's outputs carry the error, reading
them (block_until_ready, np.asarray) raises it in Python naming the program (and, for a host
callback, the op and the user's source line), later runs work normally, and nothing leaks.
Real Python exceptions raised by host callbacks are covered by tests/test_callbacks.py.
"""

from __future__ import annotations

import gc
import os
import re
import subprocess
import sys
import threading

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jax_plugins.mlx import faults
from tests.ops.harness import assert_same

RuntimeErrors = (jax.errors.JaxRuntimeError, RuntimeError)


@pytest.fixture(autouse=True)
def _no_fault_left_behind():
  yield
  faults.set_fault(None)


def _on(device, fn, *args):
  return jax.jit(fn)(*[jax.device_put(a, device) for a in args])


def _baseline(mlx_device):
  gc.collect()
  return (len(jax.live_arrays("mlx")), mlx_device.memory_stats()["bytes_in_use"])


def _hold_the_worker():
  """Runs a program whose host callback blocks the device worker until the returned gate is
  set, so that what is dispatched meanwhile only runs after Execute has returned."""
  started, gate = threading.Event(), threading.Event()

  def blocker(x):
    started.set()
    gate.wait(60)
    return np.asarray(x)

  fn = jax.jit(lambda x: jax.pure_callback(blocker, jax.ShapeDtypeStruct(x.shape, x.dtype), x))
  held = fn(jax.device_put(np.zeros(2, np.float32), jax.devices("mlx")[0]))
  assert started.wait(60), "the blocking callback never started"
  return gate, held


def sine_and_square(x):
  return jnp.sin(x) * 2.0, x * x


@pytest.mark.parametrize("mode", ["0", "replay", "1"], ids=["eager", "replay", "fused"])
def test_run_error_after_execute_returned_marks_that_calls_outputs(mlx_device, cpu_device,
                                                                    monkeypatch, mode):
  monkeypatch.setenv("JAXMLX_COMPILE", mode)
  fn = jax.jit(sine_and_square)
  host = np.linspace(-3, 3, 7, dtype=np.float32)
  x = jax.device_put(host, mlx_device)
  jax.block_until_ready(fn(x))  # compiled and run once: the baseline includes its constants
  before = _baseline(mlx_device)

  gate, held = _hold_the_worker()
  faults.set_fault("execute:1")  # the first run that starts from now on
  a, b = fn(x)
  assert not a.is_ready() and not b.is_ready(), "the run must still be queued"
  gate.set()
  jax.block_until_ready(held)
  for out in (a, b):  # every output of the failed call carries its error
    with pytest.raises(RuntimeErrors) as info:
      out.block_until_ready()
    message = str(info.value)
    assert "while running jit_sine_and_square" in message, message
    assert "fault injected by JAXMLX_FAULT=execute:1 (execute #1)" in message, message
    with pytest.raises(RuntimeErrors, match="while running jit_sine_and_square"):
      np.asarray(out)

  # The next run of the same executable works and matches the CPU backend.
  got = fn(x)
  want = _on(cpu_device, sine_and_square, host)
  for g, w in zip(got, want):
    assert_same(np.asarray(g), np.asarray(w))
  del a, b, out, got, g, held, info
  assert _baseline(mlx_device) == before


def test_a_failed_runs_outputs_fail_the_runs_that_read_them(mlx_device, cpu_device):
  first = jax.jit(lambda v: v + 1.0)
  second = jax.jit(lambda v: v * 3.0)
  x = jax.device_put(np.arange(4, dtype=np.float32), mlx_device)
  jax.block_until_ready(second(first(x)))
  with faults.injected("execute:1"):
    y = first(x)
    z = second(y)  # queued behind the failing run; its input is the failed output
    with pytest.raises(RuntimeErrors, match="execute #1"):
      z.block_until_ready()
  assert_same(np.asarray(second(first(x))), np.arange(4, dtype=np.float32) * 3 + 3, exact=True)


def test_every_run_failing_leaks_nothing(mlx_device):
  fn = jax.jit(lambda v: jnp.exp(v) - v)
  x = jax.device_put(np.ones((64, 64), np.float32), mlx_device)
  jax.block_until_ready(fn(x))
  before = _baseline(mlx_device)
  with faults.injected("execute:1+"):
    for _ in range(50):
      with pytest.raises(RuntimeErrors, match="fault injected"):
        np.asarray(fn(x))
  assert _baseline(mlx_device) == before
  np.testing.assert_allclose(np.asarray(fn(x)), np.exp(1.0) - 1.0, rtol=1e-6)


def _assert_all_same(results, want):
  for got in results:
    for g, v in zip(got, want):
      assert_same(np.asarray(g), np.asarray(v))


def weighted_sum(x, w):
  return (x * w).sum(axis=0), jnp.abs(x)


@pytest.mark.parametrize("mode", ["0", "replay"], ids=["eager", "replay"])
def test_kernel_error_on_mlx_stream_marks_that_calls_outputs(mlx_device, cpu_device, monkeypatch,
                                                             mode):
  # On MLX's CPU device, without fused kernels, a run's kernels execute on MLX's stream after
  # the worker has moved on, and a completion task there sets the outputs' events: an error a
  # kernel leaves on the stream must fail exactly that call's outputs, naming the program.
  if mlx_device.device_kind != "MLX cpu":
    pytest.skip("runs complete on MLX's stream only on its CPU device")
  monkeypatch.setenv("JAXMLX_COMPILE", mode)
  fn = jax.jit(weighted_sum)
  x = jax.device_put(np.arange(12, dtype=np.float32).reshape(4, 3) - 5, mlx_device)
  w = jax.device_put(np.linspace(0, 1, 3, dtype=np.float32), mlx_device)
  jax.block_until_ready(fn(x, w))
  want = _on(cpu_device, weighted_sum, np.asarray(x), np.asarray(w))
  before = _baseline(mlx_device)
  with faults.injected("kernel:2"):
    first, second, third = fn(x, w), fn(x, w), fn(x, w)
    jax.block_until_ready(first)
    for out in second:
      with pytest.raises(RuntimeErrors) as info:
        out.block_until_ready()
      message = str(info.value)
      assert message.startswith("INTERNAL: execute: [scheduler] a kernel failed"), message
      assert "kernel #2" in message and "while running jit_weighted_sum" in message, message
    jax.block_until_ready(third)
  _assert_all_same([first, third], want)
  del first, second, third, out, info
  assert _baseline(mlx_device) == before


def gram(v):
  return v @ v.T


def test_out_of_memory_in_a_run_is_resource_exhausted(mlx_device):
  fn = jax.jit(gram)
  x = jax.device_put(np.eye(8, dtype=np.float32), mlx_device)
  jax.block_until_ready(fn(x))
  before = _baseline(mlx_device)
  with faults.injected("alloc:1"):
    y = fn(x)
    with pytest.raises(RuntimeErrors) as info:
      y.block_until_ready()
  message = str(info.value)
  assert "RESOURCE_EXHAUSTED" in message, message
  assert "out of device memory" in message and "limit" in message, message
  assert "while running jit_gram" in message, message
  del y, info
  assert _baseline(mlx_device) == before
  np.testing.assert_array_equal(np.asarray(fn(x)), np.eye(8, dtype=np.float32))


@pytest.mark.parametrize("shape", [(), (0,), (3, 5), (1000,)])
def test_out_of_memory_in_a_transfer_is_resource_exhausted(mlx_device, shape):
  host = np.arange(int(np.prod(shape)), dtype=np.int32).reshape(shape)
  before = _baseline(mlx_device)
  with faults.injected("alloc:1"):
    # Depending on jax's host-buffer semantics the transfer fails in device_put or when read.
    with pytest.raises(RuntimeErrors) as info:
      jax.device_put(host, mlx_device).block_until_ready()
  assert "RESOURCE_EXHAUSTED" in str(info.value), str(info.value)
  assert "alloc #1" in str(info.value), str(info.value)
  del info
  assert _baseline(mlx_device) == before
  np.testing.assert_array_equal(np.asarray(jax.device_put(host, mlx_device)), host)


def test_injected_callback_failure_names_the_op_and_line_and_skips_the_callback(mlx_device):
  calls = []

  def record(x):
    calls.append(1)
    return np.asarray(x) * 2

  @jax.jit
  def fn(x):
    return jax.pure_callback(record, jax.ShapeDtypeStruct(x.shape, x.dtype), x) + 1

  x = jax.device_put(np.arange(3, dtype=np.float32), mlx_device)
  np.asarray(fn(x))
  calls.clear()
  with faults.injected("callback:1"):
    with pytest.raises(RuntimeErrors) as info:
      np.asarray(fn(x))
  message = str(info.value)
  assert calls == [], "an injected callback failure must not call the Python function"
  assert "stablehlo.custom_call @jaxmlx.host_callback" in message, message
  assert "test_faults.py" in message, message  # the line of the pure_callback call
  assert "fault injected by JAXMLX_FAULT=callback:1 (callback #1)" in message, message
  assert "while running jit_fn" in message, message
  np.testing.assert_array_equal(np.asarray(fn(x)), [1.0, 3.0, 5.0])
  assert calls == [1]


def test_raising_callback_names_the_line_of_its_call_and_leaks_nothing(mlx_device):
  def refuse(x):
    raise KeyError("no such entry")

  @jax.jit
  def fn(x):
    y = jnp.cos(x) * 4.0  # an intermediate computed before the callback fails
    return jax.pure_callback(refuse, jax.ShapeDtypeStruct(y.shape, y.dtype), y)

  x = jax.device_put(np.ones((32, 32), np.float32), mlx_device)
  with pytest.raises(RuntimeErrors):
    np.asarray(fn(x))
  before = _baseline(mlx_device)
  for _ in range(5):
    with pytest.raises(RuntimeErrors) as info:
      np.asarray(fn(x))
    message = str(info.value)
    line = re.search(r"test_faults\.py:(\d+)", message)
    assert line, message
    assert "jax.pure_callback 'test_raising_callback_names_the_line_of_its_call" in message, message
    assert "KeyError" in message, message
  del info
  assert _baseline(mlx_device) == before


def test_bad_fault_spec_is_a_value_error():
  with pytest.raises(ValueError, match=r"JAXMLX_FAULT \"exec:1\": unknown point \"exec\""):
    faults.set_fault("exec:1")
  with pytest.raises(ValueError, match="N >= 1"):
    faults.set_fault("execute:0")


def _subprocess(code, **env_vars):
  env = dict(os.environ, JAX_PLATFORMS="cpu,mlx", **env_vars)
  return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                        timeout=300)


def test_environment_variable_is_read_when_the_client_starts():
  code = (
      "import jax, numpy as np\n"
      "x = jax.device_put(np.ones(3, np.float32), jax.devices('mlx')[0])\n"
      "f = jax.jit(lambda v: v + 1)\n"
      "try:\n"
      "  np.asarray(f(x)); print('first ok')\n"
      "except Exception as e:\n"
      "  print('first failed:', e)\n"
      "print('second', np.asarray(f(x)).tolist())\n")
  proc = _subprocess(code, JAXMLX_FAULT="execute:1")
  assert proc.returncode == 0, proc.stderr[-3000:]
  assert "first failed:" in proc.stdout and "execute #1" in proc.stdout, proc.stdout
  assert "second [2.0, 2.0, 2.0]" in proc.stdout, proc.stdout


def test_unparsable_environment_variable_fails_the_client_clearly():
  code = (
      "import jax\n"
      "try:\n"
      "  jax.devices('mlx')\n"
      "except Exception as e:\n"
      "  print('refused:', e)\n")
  proc = _subprocess(code, JAXMLX_FAULT="execute:soon")
  assert proc.returncode == 0, proc.stderr[-3000:]
  assert "refused:" in proc.stdout, proc.stdout + proc.stderr[-3000:]
  assert 'JAXMLX_FAULT "execute:soon"' in proc.stdout + proc.stderr, proc.stdout + proc.stderr
