"""Several Python threads using the mlx platform at once: compiling and running different programs,
one executable from many threads, transfers and deletions racing with runs, host callbacks and
donation. Results must equal jax's CPU backend, and a deadlock must fail the test, never hang
the run: every thread is a daemon joined with a timeout.
"""

from __future__ import annotations

import threading
import time

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from tests.ops.harness import assert_same

TIMEOUT_S = 240.0


def run_threads(fns, timeout_s=TIMEOUT_S):
  """Runs each fn on its own daemon thread; re-raises the first failure, fails on a deadlock."""
  errors = []
  start = threading.Barrier(len(fns))

  def body(fn):
    try:
      start.wait(timeout_s)  # maximise overlap
      fn()
    except BaseException as e:  # noqa: BLE001 (reported below)
      errors.append(e)

  threads = [threading.Thread(target=body, args=(fn,), daemon=True) for fn in fns]
  for t in threads:
    t.start()
  deadline = time.monotonic() + timeout_s
  for t in threads:
    t.join(max(0.0, deadline - time.monotonic()))
  stuck = sum(t.is_alive() for t in threads)
  if stuck:
    pytest.fail(f"deadlock: {stuck} of {len(threads)} threads still running after {timeout_s} s")
  if errors:
    raise errors[0]


def on_cpu(fn, *args):
  cpu = jax.devices("cpu")[0]
  return jax.jit(fn)(*[jax.device_put(a, cpu) for a in args])


# Distinct programs (different ops, dtypes and shapes): each thread compiles its own.
PROGRAMS = [
    (lambda x: jnp.sin(x) * 2 + 1, np.float32, (17,)),
    (lambda x: jnp.cumsum(x, axis=0), np.int32, (5, 3)),
    (lambda x: x @ x.T, np.float32, (6, 4)),
    (lambda x: jnp.sort(x)[::-1], np.float32, (31,)),
    (lambda x: jnp.where(x > 3, x // 2, x * 3), np.int64, (9,)),
    (lambda x: jax.lax.fori_loop(0, 5, lambda i, c: c * 2 + i, x), np.int32, (4,)),
    (lambda x: jnp.max(x, axis=1) - jnp.min(x, axis=1), np.float32, (3, 8)),
    (lambda x: jnp.logical_xor(x, x[::-1]), np.bool_, (10,)),
]


def _inputs(dtype, shape, seed):
  rng = np.random.default_rng(seed)
  if dtype == np.bool_:
    return rng.integers(0, 2, shape).astype(bool)
  if np.issubdtype(dtype, np.integer):
    return rng.integers(-20, 20, shape).astype(dtype)
  return rng.standard_normal(shape).astype(dtype)


def test_threads_compile_and_run_different_programs(mlx_device):
  def work(k):
    fn, dtype, shape = PROGRAMS[k]
    def go():
      jitted = jax.jit(fn)  # a fresh jit per thread: every thread compiles
      for i in range(4):
        host = _inputs(dtype, shape, seed=100 * k + i)
        got = jitted(jax.device_put(host, mlx_device))
        assert_same(np.asarray(got), np.asarray(on_cpu(fn, host)),
                    exact=not np.issubdtype(dtype, np.floating))
    return go

  run_threads([work(k) for k in range(len(PROGRAMS))])


def test_one_executable_from_many_threads(mlx_device):
  def step(w, x):
    return jnp.tanh(x @ w).sum(axis=1), jnp.argmax(x, axis=1)

  fn = jax.jit(step)
  w = np.random.default_rng(0).standard_normal((8, 5)).astype(np.float32)
  w_dev = jax.device_put(w, mlx_device)
  jax.block_until_ready(fn(w_dev, jax.device_put(np.ones((3, 8), np.float32), mlx_device)))

  def work(seed):
    def go():
      for i in range(25):
        x = np.random.default_rng(seed * 1000 + i).standard_normal((3, 8)).astype(np.float32)
        got = fn(w_dev, jax.device_put(x, mlx_device))
        want = on_cpu(step, w, x)
        assert_same(np.asarray(got[0]), np.asarray(want[0]))
        assert_same(np.asarray(got[1]), np.asarray(want[1]), exact=True)
    return go

  run_threads([work(s) for s in range(8)])


def test_transfers_and_deletes_race_with_runs(mlx_device):
  fn = jax.jit(lambda a, b: a * b + a)
  jax.block_until_ready(fn(*[jax.device_put(np.ones(64, np.int32), mlx_device)] * 2))

  def runner(seed):
    def go():
      rng = np.random.default_rng(seed)
      for _ in range(30):
        a, b = (rng.integers(-1000, 1000, 64).astype(np.int32) for _ in range(2))
        da, db = jax.device_put(a, mlx_device), jax.device_put(b, mlx_device)
        out = fn(da, db)
        da.delete()  # while the run may still be queued: it holds its own reference
        db.delete()
        np.testing.assert_array_equal(np.asarray(out), a * b + a)
    return go

  def churner(seed):
    def go():
      rng = np.random.default_rng(seed)
      for _ in range(60):
        host = rng.standard_normal((rng.integers(0, 50), 3)).astype(np.float32)
        d = jax.device_put(host, mlx_device)
        if rng.integers(0, 2):
          np.testing.assert_array_equal(np.asarray(d), host)
        d.delete()
        with pytest.raises(RuntimeError, match="deleted"):
          np.asarray(d)
    return go

  run_threads([runner(s) for s in range(4)] + [churner(s) for s in range(4, 8)])


def test_donation_from_many_threads(mlx_device):
  step = jax.jit(lambda state, x: state * 0.5 + x, donate_argnums=0)

  def work(seed):
    def go():
      rng = np.random.default_rng(seed)
      host = rng.standard_normal(16).astype(np.float32)
      state = jax.device_put(host, mlx_device)
      for _ in range(20):
        x = rng.standard_normal(16).astype(np.float32)
        donated, state = state, step(state, jax.device_put(x, mlx_device))
        assert donated.is_deleted()
        host = host * np.float32(0.5) + x
      np.testing.assert_allclose(np.asarray(state), host, rtol=1e-6, atol=1e-6)
    return go

  run_threads([work(s) for s in range(6)])


def test_host_callbacks_from_many_threads(mlx_device):
  # Callbacks need the GIL on the device worker while other threads dispatch (holding it).
  def host_fn(x):
    time.sleep(0.001)
    return np.asarray(x) * 3

  fn = jax.jit(lambda x: jax.pure_callback(host_fn, jax.ShapeDtypeStruct(x.shape, x.dtype), x) + 1)

  def work(seed):
    def go():
      for i in range(15):
        x = np.arange(seed, seed + 5, dtype=np.int32) + i
        np.testing.assert_array_equal(np.asarray(fn(jax.device_put(x, mlx_device))), x * 3 + 1)
        if i % 5 == 0:  # and compile something new meanwhile
          g = jax.jit(lambda v, k=seed * 100 + i: v - k)
          np.testing.assert_array_equal(np.asarray(g(jax.device_put(x, mlx_device))),
                                        x - (seed * 100 + i))
    return go

  run_threads([work(s) for s in range(6)])


def test_many_threads_wait_on_one_result(mlx_device):
  fn = jax.jit(lambda x: jax.lax.fori_loop(0, 200, lambda i, c: jnp.sin(c) + 1.0, x))
  host = np.linspace(0, 1, 1000, dtype=np.float32)
  out = fn(jax.device_put(host, mlx_device))
  want = np.asarray(on_cpu(lambda x: jax.lax.fori_loop(0, 200, lambda i, c: jnp.sin(c) + 1.0, x),
                           host))

  def reader():
    out.block_until_ready()
    assert_same(np.asarray(out), want)

  run_threads([reader for _ in range(8)])


def test_errors_in_some_threads_do_not_disturb_the_others(mlx_device):
  fn = jax.jit(lambda x: x * 2 + 1)
  jax.block_until_ready(fn(jax.device_put(np.zeros(4, np.int32), mlx_device)))
  failures = []

  def failing_callback(x):
    raise ValueError("this thread's callback fails")

  bad = jax.jit(lambda x: jax.pure_callback(failing_callback,
                                            jax.ShapeDtypeStruct(x.shape, x.dtype), x))

  def good(seed):
    def go():
      for i in range(30):
        x = np.full(4, seed * 100 + i, np.int32)
        np.testing.assert_array_equal(np.asarray(fn(jax.device_put(x, mlx_device))), x * 2 + 1)
    return go

  def failing():
    for _ in range(30):
      with pytest.raises(RuntimeError, match="this thread's callback fails"):
        np.asarray(bad(jax.device_put(np.ones(4, np.int32), mlx_device)))
      failures.append(1)

  run_threads([good(s) for s in range(4)] + [failing])
  assert len(failures) == 30


def test_host_callback_that_compiles_and_runs_on_the_device(mlx_device):
  # The callback runs on the device worker, so the program it compiles and runs there runs
  # inline: it must wait neither for the queue it is blocking nor for a compile-time check
  # queued behind it (that used to hang forever).
  def nested(x):
    inner = jax.jit(lambda v: v * 2 + 1)  # a new program each call: compiled right here
    return np.asarray(inner(jax.device_put(np.asarray(x), mlx_device)))

  fn = jax.jit(lambda x: jax.pure_callback(nested, jax.ShapeDtypeStruct(x.shape, x.dtype), x) - 1)
  results = []

  def go():
    for i in range(3):
      x = np.arange(5, dtype=np.int32) + i
      results.append((x, np.asarray(fn(jax.device_put(x, mlx_device)))))

  run_threads([go], timeout_s=120)
  for x, got in results:
    np.testing.assert_array_equal(got, x * 2)
  assert len(results) == 3


def test_callback_waiting_for_work_queued_after_its_run_fails_instead_of_hanging(mlx_device):
  # The worker runs the callback, so work queued behind its run cannot start until it returns:
  # block_until_ready on such an array from the callback is an error, not a hang.
  started, box = threading.Event(), {}

  def hold(x):
    started.set()
    time.sleep(0.3)
    return np.asarray(x)

  def waits_for_later_work(x):
    box["later"].block_until_ready()
    return np.asarray(x)

  holder = jax.jit(lambda x: jax.pure_callback(hold, jax.ShapeDtypeStruct(x.shape, x.dtype), x))
  fn = jax.jit(lambda x: jax.pure_callback(waits_for_later_work,
                                           jax.ShapeDtypeStruct(x.shape, x.dtype), x))
  later = jax.jit(lambda x: x * 10)
  x = jax.device_put(np.ones(3, np.float32), mlx_device)
  jax.block_until_ready(later(x))
  outcome = {}

  def go():
    held = holder(x)  # keeps the worker busy while the next two calls are queued
    started.wait(60)
    y = fn(x)
    box["later"] = later(x)  # queued after y's run
    try:
      np.asarray(y)
      outcome["result"] = "no error"
    except RuntimeError as e:
      outcome["result"] = str(e)
    np.asarray(held)

  run_threads([go], timeout_s=120)
  assert "waits_for_later_work" in outcome["result"], outcome
  assert "queued after its own run" in outcome["result"], outcome
  np.testing.assert_array_equal(np.asarray(box["later"]), [10.0, 10.0, 10.0])
