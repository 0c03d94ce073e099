"""Runs on the calling thread (DeviceWorker::run_here_if_idle, JAXMLX_CALLER_RUNS).

On MLX's CPU, a small replayed program (and a small device_put) is run by the thread that calls
Execute when the device worker is idle, instead of being handed to the worker; on CUDA, any
replayed program, whose kernels the caller issues and our completion thread waits for
(tests/test_completion_thread.py runs these tests through that thread on MLX's CPU). These tests
drive that path the way jax does -- repeated calls of the same small programs, from several
threads, with donation, deletion, recompilation and injected failures -- and compare every result
with numpy or with jax's CPU backend, bit for bit. The mechanism itself (who runs what, in which order) is
tested in src/runtime/device_worker_test.cc.
"""

from __future__ import annotations

import gc
import os
import subprocess
import sys
import threading

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jax_plugins.mlx import faults

RuntimeErrors = (jax.errors.JaxRuntimeError, RuntimeError)


@pytest.fixture(autouse=True)
def _no_fault_left_behind():
  yield
  faults.set_fault(None)


def test_repeated_small_calls_match_numpy(mlx_device):
  f = jax.jit(lambda x, y: (x * 3 + y, jnp.sum(x ^ y)))
  rng = np.random.default_rng(0)
  for _ in range(50):
    x = rng.integers(-2**31, 2**31, 16, dtype=np.int64).astype(np.int32)
    y = rng.integers(-2**31, 2**31, 16, dtype=np.int64).astype(np.int32)
    a, s = f(jax.device_put(x, mlx_device), jax.device_put(y, mlx_device))
    with np.errstate(over="ignore"):
      np.testing.assert_array_equal(np.asarray(a), x * np.int32(3) + y)
      assert int(s) == int(np.sum(x ^ y, dtype=np.int32))


def test_chained_calls_without_waiting(mlx_device):
  # Each call reads the previous call's output, which may still be computing on MLX's stream.
  step = jax.jit(lambda x: x * 1.5 - 0.25)
  x = jax.device_put(np.arange(16, dtype=np.float32), mlx_device)
  expected = np.arange(16, dtype=np.float32)
  for _ in range(200):
    x = step(x)
    expected = expected * np.float32(1.5) - np.float32(0.25)
  np.testing.assert_array_equal(np.asarray(x), expected)


def test_donated_state_updates(mlx_device):
  update = jax.jit(lambda s, g: (s - 0.5 * g, jnp.sum(s)), donate_argnums=0)
  s = jax.device_put(np.ones((8, 8), np.float32), mlx_device)
  g = jax.device_put(np.full((8, 8), 0.25, np.float32), mlx_device)
  expected = np.ones((8, 8), np.float32)
  for _ in range(100):
    old = s
    s, total = update(s, g)
    assert old.is_deleted()
    assert float(total) == float(np.sum(expected))
    expected = expected - np.float32(0.5) * np.float32(0.25)
  np.testing.assert_array_equal(np.asarray(s), expected)


def test_programs_that_compute_nothing(mlx_device):
  ident = jax.jit(lambda x, y: (y, x))
  x = jax.device_put(np.arange(4, dtype=np.int32), mlx_device)
  y = jax.device_put(np.arange(4, 8, dtype=np.uint8), mlx_device)
  for _ in range(20):
    x, y = ident(x, y)
  np.testing.assert_array_equal(np.asarray(x), np.arange(4, dtype=np.int32))
  np.testing.assert_array_equal(np.asarray(y), np.arange(4, 8, dtype=np.uint8))
  # Its input still being computed: the output is ready when that is, not before.
  slow = jax.jit(lambda a: jnp.cumsum(jnp.sin(a) @ a.T, axis=0))
  big = jax.device_put(np.ones((256, 256), np.float32), mlx_device)
  pending = slow(big)
  same = jax.jit(lambda a: a)(pending)
  np.testing.assert_array_equal(np.asarray(same), np.asarray(pending))


def test_many_threads_with_transfers_and_deletions(mlx_device):
  programs = [jax.jit(lambda x, k=k: (x + k) * (k + 1)) for k in range(4)]
  errors = []

  def worker(t):
    try:
      rng = np.random.default_rng(t)
      f = programs[t]
      for _ in range(150):
        host = rng.integers(-1000, 1000, 32).astype(np.int32)
        x = jax.device_put(host, mlx_device)
        y = f(x)
        x.delete()
        got = np.asarray(y)
        want = (host + t) * (t + 1)
        if not np.array_equal(got, want):
          errors.append((t, got, want))
          return
    except Exception as e:  # reported below, with its thread
      errors.append((t, repr(e)))

  threads = [threading.Thread(target=worker, args=(t,)) for t in range(4)]
  for th in threads:
    th.start()
  for th in threads:
    th.join(120)
  assert not any(th.is_alive() for th in threads), "a thread hung"
  assert not errors, errors[:2]


def test_recompiled_programs_replay_their_own_graph(mlx_device):
  # Executables die and new ones of the same signature take their place: none may be handed a
  # graph traced for another (each thread keeps its own compile cache in MLX).
  # (Constants are inputs of a traced graph: the programs must differ in their ops.)
  ops = ["add", "multiply", "subtract", "maximum", "minimum"]
  host = np.arange(8, dtype=np.float32)
  x = jax.device_put(host, mlx_device)
  for k in range(25):
    op = ops[k % len(ops)]
    f = jax.jit(lambda v, op=op, k=k: getattr(jnp, op)(v, np.float32(k)))
    for _ in range(3):
      np.testing.assert_array_equal(np.asarray(f(x)), getattr(np, op)(host, np.float32(k)))
    del f
    jax.clear_caches()
    gc.collect()


def test_a_failed_run_on_the_caller_fails_its_outputs_only(mlx_device):
  f = jax.jit(lambda x: x * 2.0)
  x = jax.device_put(np.arange(4, dtype=np.float32), mlx_device)
  for _ in range(3):
    jax.block_until_ready(f(x))  # traced on the worker; later runs may be made here
  faults.set_fault("execute:1")
  bad = f(x)
  with pytest.raises(RuntimeErrors, match="jit_<lambda>|injected"):
    np.asarray(bad)
  faults.set_fault(None)
  np.testing.assert_array_equal(np.asarray(f(x)), np.arange(4, dtype=np.float32) * 2)


def test_mlx_streams_of_the_calling_thread_are_kept(mlx_device):
  mx = pytest.importorskip("mlx.core")
  kinds = [k for k in (mx.cpu, mx.gpu) if mx.is_available(k)]
  f = jax.jit(lambda x: x + 1)
  x = jax.device_put(np.zeros(4, np.float32), mlx_device)
  mine = [mx.default_stream(k) for k in kinds]
  for _ in range(5):
    jax.block_until_ready(f(x))
  assert [mx.default_stream(k) for k in kinds] == mine
  np.testing.assert_array_equal(np.array(mx.array([1, 2]) + 1), [2, 3])

  seen = {}

  def fresh_thread():  # never used MLX before: it gets streams of its own afterwards
    for _ in range(5):
      jax.block_until_ready(f(x))
    seen["streams"] = [mx.default_stream(k) for k in kinds]
    seen["value"] = np.array(mx.array([3.0]) * 2)

  th = threading.Thread(target=fresh_thread)
  th.start()
  th.join(60)
  np.testing.assert_array_equal(seen["value"], [6.0])
  assert all(theirs != ours for theirs, ours in zip(seen["streams"], mine))


_CHILD = r"""
import os, sys
os.environ["JAX_PLATFORMS"] = "cpu,mlx"
import jax, jax.numpy as jnp, numpy as np
d = jax.devices("mlx")[0]
key = jax.device_put(jax.random.key_data(jax.random.key(7)), d)
bits = jax.jit(lambda k: jax.random.bits(jax.random.wrap_key_data(k), (64,)))
mix = jax.jit(lambda a, b: (a @ b, jnp.tanh(a) - b, jnp.argmax(a, axis=1)))
a = jax.device_put(np.linspace(-2, 2, 64, dtype=np.float32).reshape(8, 8), d)
outs = []
for _ in range(3):
  outs.append(np.asarray(bits(key)).view(np.uint8))
  for o in mix(a, a.T):
    outs.append(np.asarray(o).view(np.uint8))
sys.stdout.write(np.concatenate([o.ravel() for o in outs]).tobytes().hex())
"""


def test_same_bits_with_caller_runs_off():
  def run(flag):
    env = dict(os.environ, JAXMLX_CALLER_RUNS=flag)
    r = subprocess.run([sys.executable, "-c", _CHILD], env=env, capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    return r.stdout

  on, off = run("1"), run("0")
  assert on and on == off
