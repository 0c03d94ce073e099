"""Host callbacks on the mlx platform: jax.debug.print, jax.debug.callback, jax.pure_callback
(including vmap_method) and jax.experimental.io_callback (ordered and unordered).

Each behaviour is checked against jax's CPU backend running the same program: what the callbacks
saw and in which order, what they printed, and what the program computed from their results.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest
from jax import lax
from jax.experimental import io_callback

from tests.ops.harness import assert_same, check

DTYPES = [np.bool_, np.int8, np.int16, np.int32, np.uint8, np.uint32, np.float16,
          ml_dtypes.bfloat16, np.float32, np.complex64]
DTYPES_X64 = [np.int64, np.uint64, np.float64, np.complex128]
SHAPES = [(), (0,), (1,), (5,), (2, 3), (3, 0, 2)]


def _values(shape, dtype, seed=0):
  rng = np.random.default_rng(seed)
  dtype = np.dtype(dtype)
  if dtype == np.bool_:
    return rng.integers(0, 2, shape).astype(dtype)
  if dtype.kind in "iu":
    info = np.iinfo(dtype)
    return rng.integers(info.min, info.max, shape, dtype=dtype, endpoint=True)
  if dtype.kind == "c":
    return (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(dtype)
  return (rng.standard_normal(shape) * 4).astype(dtype)


def _on(device, fn, *args):
  """Runs jit(fn) with args placed on `device`; returns numpy results (waits for them)."""
  out = jax.jit(fn)(*[jax.device_put(a, device) for a in args])
  return jax.tree_util.tree_map(np.asarray, out)


def _both(make, *args):
  """Builds a fresh (fn, log) per backend with make() and runs it on cpu and on mlx; returns
  ((cpu result, cpu log), (mlx result, mlx log))."""
  runs = []
  for platform in ("cpu", "mlx"):
    fn, log = make()
    runs.append((_on(jax.devices(platform)[0], fn, *args), log))
  return runs


def _assert_logs_equal(got, want):
  assert len(got) == len(want), f"{len(got)} callback calls, expected {len(want)}"
  for g, w in zip(got, want):
    assert_same(g, w, exact=True)


# ---- pure_callback ------------------------------------------------------------------------------

@pytest.mark.parametrize("shape", SHAPES, ids=str)
@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
def test_pure_callback_round_trip(dtype, shape):
  # The operand reaches Python bit for bit; the result comes back bit for bit and is used.
  def make():
    log = []

    def host(x):
      log.append(np.asarray(x))
      return np.asarray(x)[::-1].copy() if np.ndim(x) else np.asarray(x)

    def fn(x):
      spec = jax.ShapeDtypeStruct(x.shape, x.dtype)
      y = jax.pure_callback(host, spec, x)
      return y, jnp.zeros_like(y) if y.dtype == jnp.bool_ else y + y
    return fn, log

  (want, want_log), (got, got_log) = _both(make, _values(shape, dtype))
  assert_same(got, want, exact=True)
  if 0 not in shape:  # XLA replaces a pure op with an empty result by a constant: no call
    _assert_logs_equal(got_log, want_log)


@pytest.mark.parametrize("dtype", DTYPES_X64, ids=lambda d: np.dtype(d).name)
def test_pure_callback_64bit(dtype):
  # f64 / c128 live as raw integer storage inside the plugin: the bytes must survive both ways.
  with jax.enable_x64(True):
    def make():
      log = []

      def host(x):
        log.append(np.asarray(x))
        return (np.asarray(x) * 3).astype(x.dtype)

      return (lambda x: jax.pure_callback(host, jax.ShapeDtypeStruct(x.shape, x.dtype), x)), log

    x = _values((2, 3), dtype)
    (want, want_log), (got, got_log) = _both(make, x)
    assert_same(got, want, exact=True)
    _assert_logs_equal(got_log, want_log)


def test_pure_callback_results_feed_compute():
  # Several operands and results of different types; results flow into further compute.
  def host(a, b):
    return np.sin(a).astype(np.float32), (b * 2 + 1).astype(np.int32), np.float32(a.sum())

  def fn(a, b):
    specs = (jax.ShapeDtypeStruct(a.shape, jnp.float32), jax.ShapeDtypeStruct(b.shape, jnp.int32),
             jax.ShapeDtypeStruct((), jnp.float32))
    s, t, total = jax.pure_callback(host, specs, a * 2, b - 1)
    return jnp.exp(s) * total, t.sum(), jnp.tanh(s) @ jnp.ones((a.shape[-1], 2), jnp.float32)

  check(fn, _values((3, 4), np.float32), _values((5,), np.int16) // 4)


def test_pure_callback_pytree_and_kwargs():
  def host(tree, *, scale):
    return {"u": tree["a"] * scale, "v": (tree["b"] + 1,)}

  def fn(a, b):
    specs = {"u": jax.ShapeDtypeStruct(a.shape, a.dtype),
             "v": (jax.ShapeDtypeStruct(b.shape, b.dtype),)}
    out = jax.pure_callback(host, specs, {"a": a, "b": b}, scale=np.float32(3))
    return out["u"] - 1, out["v"][0] * 2

  check(fn, _values((4,), np.float32), _values((2, 2), np.int32) // 8)


def test_pure_callback_without_operands_or_results():
  # No operands at all; and a callback whose result is unused (jax may drop it: both agree).
  def make():
    log = []

    def host():
      log.append(np.float32(len(log)))
      return np.arange(3, dtype=np.float32)

    def fn(x):
      return x + jax.pure_callback(host, jax.ShapeDtypeStruct((3,), jnp.float32))
    return fn, log

  (want, want_log), (got, got_log) = _both(make, np.ones(3, np.float32))
  assert_same(got, want, exact=True)
  _assert_logs_equal(got_log, want_log)


@pytest.mark.parametrize("vmap_method", ["sequential", "sequential_unrolled", "expand_dims",
                                         "broadcast_all"])
def test_pure_callback_vmap(vmap_method):
  # What the callback is called with (shapes, values) and what comes out must match the CPU.
  def make():
    log = []

    def host(x, y):
      log.append((np.asarray(x), np.asarray(y)))
      return (np.asarray(x) * 2 + np.asarray(y)).astype(np.float32)

    def one(x, y):
      shape = jnp.broadcast_shapes(x.shape, y.shape)
      return jax.pure_callback(host, jax.ShapeDtypeStruct(shape, jnp.float32), x, y,
                               vmap_method=vmap_method)

    def fn(xs, y):
      return jax.vmap(one, in_axes=(0, None))(xs, y) + 1
    return fn, log

  xs, y = _values((4, 3), np.float32), _values((3,), np.float32, seed=1)
  (want, want_log), (got, got_log) = _both(make, xs, y)
  assert_same(got, want, exact=True)
  _assert_logs_equal(got_log, want_log)


def test_pure_callback_in_scan_and_cond():
  # Inside loops and branches: only the taken branch calls back, once per iteration.
  def make():
    log = []

    def host(v):
      log.append(np.asarray(v))
      return np.asarray(v) * np.float32(0.5)

    def half(v):
      return jax.pure_callback(host, jax.ShapeDtypeStruct(v.shape, v.dtype), v)

    def fn(x):
      def body(c, i):
        c = lax.cond(i % 2 == 0, half, lambda v: v + 1, c)
        return c, c.sum()
      return lax.scan(body, x, jnp.arange(5))
    return fn, log

  (want, want_log), (got, got_log) = _both(make, _values((3,), np.float32))
  assert_same(got, want, exact=True)
  _assert_logs_equal(got_log, want_log)


@pytest.mark.parametrize("in_loop", [False, True], ids=["straight_line", "in_loop"])
def test_callback_runs_on_every_execution(monkeypatch, in_loop):
  # Graph compilation on (JAXMLX_COMPILE=1): a program (or loop body) with a callback must
  # still call Python on each run, with that run's values, never replay a captured result.
  # Compiling it calls nothing.
  monkeypatch.setenv("JAXMLX_COMPILE", "1")
  seen = []

  def host(x):
    seen.append(float(x[0]))
    return np.asarray(x) + np.float32(len(seen))

  def step(x):
    return jax.pure_callback(host, jax.ShapeDtypeStruct(x.shape, x.dtype), x * 2) * 3

  def fn(x):
    return lax.fori_loop(0, 2, lambda i, c: step(c), x) if in_loop else step(x)

  mlx = jax.devices("mlx")[0]
  args = [jax.device_put(np.full(2, k, np.float32), mlx) for k in range(3)]
  compiled = jax.jit(fn).lower(args[0]).compile()
  assert seen == []
  got = [np.asarray(compiled(a)) for a in args]
  want_seen, want = [], []
  for k in range(3):  # the same arithmetic in Python
    c = np.full(2, k, np.float32)
    for _ in range(2 if in_loop else 1):
      want_seen.append(float(c[0] * 2))
      c = (c * 2 + np.float32(len(want_seen))) * 3
    want.append(c)
  assert seen == want_seen
  assert_same(got, want, exact=True)


@pytest.mark.parametrize("ordered", [True, False], ids=["ordered", "unordered"])
@pytest.mark.parametrize("start", [5, 10])
def test_callback_in_a_counted_while_condition_runs_on_every_test(ordered, start):
  # `i < 10` with `i + 1` is a counted loop, whose condition the plugin need not read; with an
  # effect in it, it must still run once per test, as on the CPU backend (jax's
  # test_can_print_inside_while_loop_cond): an unordered one used to run never.
  seen = []

  def cond(x):
    jax.debug.callback(lambda v: seen.append(int(v)), x, ordered=ordered)
    return x < 10

  fn = jax.jit(lambda x: lax.while_loop(cond, lambda x: x + 1, x))
  out = fn(jax.device_put(np.int32(start), jax.devices("mlx")[0]))
  jax.effects_barrier()
  assert int(out) == 10
  assert seen == list(range(start, 11))


# ---- io_callback --------------------------------------------------------------------------------

@pytest.mark.parametrize("ordered", [True, False], ids=["ordered", "unordered"])
def test_io_callback_sequence_in_fori_loop(ordered):
  # Each iteration's call sees that iteration's carry, in order; results feed the loop.
  def make():
    log = []

    def host(i, c):
      log.append((np.asarray(i), np.asarray(c)))
      return (np.asarray(c) + i).astype(np.float32)

    def fn(x):
      def body(i, c):
        return io_callback(host, jax.ShapeDtypeStruct(c.shape, c.dtype), i, c,
                           ordered=ordered) * 2
      return lax.fori_loop(0, 6, body, x)
    return fn, log

  (want, want_log), (got, got_log) = _both(make, _values((3,), np.float32))
  assert_same(got, want, exact=True)
  _assert_logs_equal(got_log, want_log)
  assert [int(i) for i, _ in got_log] == list(range(6))


def test_io_callback_ordered_across_calls_and_callbacks():
  # Two ordered callbacks per program and several executions: one global order.
  events = []

  def first(x):
    events.append(("first", float(x)))
    return np.asarray(x)

  def second(x):
    events.append(("second", float(x)))
    return np.asarray(x)

  @jax.jit
  def fn(x):
    spec = jax.ShapeDtypeStruct((), jnp.float32)
    a = io_callback(first, spec, x, ordered=True)
    b = io_callback(second, spec, a + 1, ordered=True)
    return b + 1

  mlx = jax.devices("mlx")[0]
  outs = [fn(jax.device_put(np.float32(10 * k), mlx)) for k in range(3)]
  jax.block_until_ready(outs)
  assert [float(o) for o in outs] == [2.0, 12.0, 22.0]
  assert events == [(n, v) for k in range(3) for n, v in
                    (("first", 10.0 * k), ("second", 10.0 * k + 1))]


def test_io_callback_while_loop_dynamic_trip_count():
  # A data-dependent while loop whose condition depends on what the callback returns.
  def make():
    log = []

    def host(c):
      log.append(np.asarray(c))
      return np.asarray(c) * 3

    def fn(x):
      step = lambda c: io_callback(host, jax.ShapeDtypeStruct(c.shape, c.dtype), c,
                                   ordered=True)
      return lax.while_loop(lambda c: c < 500, step, x)
    return fn, log

  (want, want_log), (got, got_log) = _both(make, np.int32(2))
  assert_same(got, want, exact=True)
  _assert_logs_equal(got_log, want_log)


# ---- debug.print / debug.callback ---------------------------------------------------------------

def _printed(capsys, device, fn, *args):
  capsys.readouterr()
  jax.block_until_ready(jax.jit(fn)(*[jax.device_put(a, device) for a in args]))
  jax.effects_barrier()
  return capsys.readouterr().out


@pytest.mark.parametrize("shape", [(), (0,), (4,), (2, 3)], ids=str)
@pytest.mark.parametrize("dtype", [np.bool_, np.int8, np.uint32, np.float16, ml_dtypes.bfloat16,
                                   np.float32, np.complex64], ids=lambda d: np.dtype(d).name)
def test_debug_print_matches_cpu(capsys, dtype, shape):
  def fn(x):
    jax.debug.print("x={x} first={f}", x=x, f=x.reshape(-1)[:1])
    return x

  x = _values(shape, dtype)
  want = _printed(capsys, jax.devices("cpu")[0], fn, x)
  got = _printed(capsys, jax.devices("mlx")[0], fn, x)
  assert got == want
  assert got.startswith("x=")


@pytest.mark.parametrize("ordered", [True, False], ids=["ordered", "unordered"])
def test_debug_print_in_loop(capsys, ordered):
  def fn(x):
    def body(i, c):
      jax.debug.print("i={i} c={c}", i=i, c=c, ordered=ordered)
      return c * 2 + i
    return lax.fori_loop(0, 5, body, x)

  x = np.array([1, -2], np.int32)
  want = _printed(capsys, jax.devices("cpu")[0], fn, x)
  got = _printed(capsys, jax.devices("mlx")[0], fn, x)
  assert got == want
  assert got.count("\n") == 5


def test_debug_callback_sees_values():
  # An unordered and an ordered callback: their relative order is unspecified, so each
  # records under its own name.
  def make():
    log = {}

    def fn(x, y):
      jax.debug.callback(lambda a, b: log.setdefault("two", (np.asarray(a), np.asarray(b))),
                         x, y * 2)
      jax.debug.callback(lambda a: log.setdefault("one", np.asarray(a)), jnp.sin(x),
                         ordered=True)
      return x + 1
    return fn, log

  (want, want_log), (got, got_log) = _both(make, _values((3,), np.float32),
                                           _values((2,), np.int32) // 4)
  assert_same(got, want, exact=True)
  assert sorted(got_log) == sorted(want_log) == ["one", "two"]
  assert_same(got_log["two"], want_log["two"], exact=True)
  assert_same(got_log["one"], want_log["one"])


# ---- checkify's check in a jitted program -------------------------------------------------------

def _positive_check(debug):
  from jax.experimental import checkify
  assert_ = checkify.debug_check if debug else checkify.check

  def f(x):
    assert_(jnp.all(x > 0), "x must be positive: {x}", x=x)
    return x * 2
  return f


@pytest.mark.parametrize("values", [[1.0, 2.0], [1.0, -2.0]], ids=["holds", "fails"])
def test_debug_check_in_a_jitted_program_is_a_no_op_and_checkify_reports_it(values):
  # debug_check lowers to nothing (jax's rule for cpu and gpu, registered for ours); under
  # checkify.checkify it is a functionalized error, the same on both backends.
  from jax.experimental import checkify
  f = _positive_check(debug=True)
  x = np.array(values, np.float32)
  check(f, x, exact=True)
  got = []
  for platform in ("cpu", "mlx"):
    err, y = jax.jit(checkify.checkify(f))(jax.device_put(x, jax.devices(platform)[0]))
    got.append((err.get(), np.asarray(y)))
  assert got[1][0] == got[0][0], got
  assert (got[1][0] is None) == (values[1] > 0), got
  assert_same(got[1][1], got[0][1], exact=True)


def test_a_failed_check_fails_the_run_with_its_message_under_runtime_errors():
  # With jax_experimental_unsafe_xla_runtime_errors a check left in a jitted program is a host
  # callback that raises (jax's CPU and GPU backends do the same); without it jax refuses it.
  from jax._src import config as jax_config
  from jax.experimental import checkify
  f = jax.jit(_positive_check(debug=False))
  mlx = jax.devices("mlx")[0]
  bad = jax.device_put(np.array([1.0, -2.0], np.float32), mlx)
  good = jax.device_put(np.array([1.0, 2.0], np.float32), mlx)
  with pytest.raises(ValueError, match="Cannot abstractly evaluate a checkify.check"):
    f(good)
  with jax_config.xla_runtime_errors(True):
    with pytest.raises(Exception, match=r"checkify.check failed: .*x must be positive: "
                                        r"\[ 1. -2.\] \(`check` failed\)"):
      np.asarray(f(bad))
    np.testing.assert_array_equal(np.asarray(f(good)), [2.0, 4.0])
    err, y = jax.jit(checkify.checkify(f))(bad)  # functionalized: no callback
    assert "x must be positive" in err.get() and np.asarray(y).tolist() == [2.0, -4.0]


# ---- errors -------------------------------------------------------------------------------------

def test_callback_exception_names_it_and_next_call_works():
  state = {"fail": True}

  def flaky_callback(x):
    if state["fail"]:
      raise ValueError("deliberate failure")
    return np.asarray(x) + 1

  @functools.partial(jax.jit)
  def fn(x):
    return jax.pure_callback(flaky_callback, jax.ShapeDtypeStruct(x.shape, x.dtype), x) * 2

  x = jax.device_put(np.arange(3, dtype=np.float32), jax.devices("mlx")[0])
  with pytest.raises(Exception, match=r"flaky_callback.*ValueError: deliberate failure"):
    np.asarray(fn(x))
  state["fail"] = False
  np.testing.assert_array_equal(np.asarray(fn(x)), [2.0, 4.0, 6.0])


def test_ordered_callback_exception_does_not_poison_later_calls():
  state = {"fail": True}

  def ordered_flaky(x):
    if state["fail"]:
      raise RuntimeError("ordered failure")
    return np.asarray(x)

  @jax.jit
  def fn(x):
    return io_callback(ordered_flaky, jax.ShapeDtypeStruct(x.shape, x.dtype), x,
                       ordered=True) + 1

  x = jax.device_put(np.ones(2, np.float32), jax.devices("mlx")[0])
  with pytest.raises(Exception, match="ordered_flaky.*ordered failure"):
    np.asarray(fn(x))
  state["fail"] = False
  np.testing.assert_array_equal(np.asarray(fn(x)), [2.0, 2.0])
  np.testing.assert_array_equal(np.asarray(fn(x)), [2.0, 2.0])


@pytest.mark.parametrize("result, message", [
    (np.zeros(4, np.float32), r"Incorrect output shape for return value #0: Expected: \(3,\), "
                              r"Actual: \(4,\)"),
    (np.zeros(3, np.int32), r"Incorrect output dtype for return value #0: Expected: float32, "
                            r"Actual: int32"),
    ((np.zeros(3, np.float32), np.zeros(3, np.float32)),
     r"Mismatched number of outputs from callback. Expected: 1, Actual: 2"),
], ids=["shape", "dtype", "count"])
def test_wrong_result_is_a_clear_error(result, message):
  def bad_result_callback(x):
    return result

  @jax.jit
  def fn(x):
    return jax.pure_callback(bad_result_callback, jax.ShapeDtypeStruct((3,), jnp.float32), x)

  x = jax.device_put(np.ones(3, np.float32), jax.devices("mlx")[0])
  with pytest.raises(Exception, match="bad_result_callback") as info:
    np.asarray(fn(x))
  assert info.match(message)
  # The device keeps working.
  np.testing.assert_array_equal(np.asarray(jax.jit(lambda v: v * 2)(x)), [2.0, 2.0, 2.0])


def test_callback_dropped_executable_frees_registry_entry():
  # The callback entry lives as long as the compiled executable (and jax's caches of it), as
  # jax's own host callbacks do; then the registry forgets it.
  import gc

  from jax_plugins.mlx import callbacks

  def host(x):
    return np.asarray(x)

  def fn(x):
    return jax.pure_callback(host, jax.ShapeDtypeStruct(x.shape, x.dtype), x)

  x = jax.device_put(np.ones(2, np.float32), jax.devices("mlx")[0])
  before = set(callbacks._registry)
  compiled = jax.jit(fn).lower(x).compile()
  new = set(callbacks._registry) - before
  assert len(new) == 1
  np.testing.assert_array_equal(np.asarray(compiled(x)), [1.0, 1.0])
  del compiled
  jax.clear_caches()
  gc.collect()
  assert not (new & set(callbacks._registry))


def test_a_freed_executables_queued_run_still_calls_its_function(capsys):
  # jax.jit(jax.jit(f))(x) frees the outer executable when the call returns, while its run may
  # still be queued (jax's debugging_primitives_test.py, test_nested_jit_debug_print): the
  # callback stays registered until no run that may call one is pending, then goes.
  import gc

  from jax_plugins.mlx import callbacks

  def f(x):
    jax.debug.print("{}", x)
    return x

  x = jax.device_put(np.arange(8), jax.devices("mlx")[0])
  before = set(callbacks._registry)
  for _ in range(3):
    jax.jit(jax.jit(f))(x)
  jax.effects_barrier()
  assert capsys.readouterr().out == "[0 1 2 3 4 5 6 7]\n" * 3
  jax.clear_caches()
  gc.collect()
  callbacks._prune()
  assert not (set(callbacks._registry) - before)


# ---- the worker and Python's GIL ----------------------------------------------------------------

def test_compile_while_a_callback_is_running():
  # jaxlib compiles (and asks for memory stats) holding the GIL, which the callback running on
  # the device worker needs: compiling must not wait for the worker then.
  import threading
  import time

  started = threading.Event()

  def slow_callback(x):
    started.set()
    time.sleep(0.3)
    return np.asarray(x) + 1

  @jax.jit
  def fn(x):
    return jax.pure_callback(slow_callback, jax.ShapeDtypeStruct(x.shape, x.dtype), x)

  mlx = jax.devices("mlx")[0]
  x = jax.device_put(np.arange(3, dtype=np.float32), mlx)
  y = fn(x)
  started.wait(10)
  z = jax.jit(lambda v: v * 3 - 1)(x)  # a new program, compiled while the callback runs
  w = jax.jit(lambda v: jnp.sin(v) + 2)(y)  # and one that consumes the callback's result
  assert_same(np.asarray(z), np.arange(3, dtype=np.float32) * 3 - 1, exact=True)
  assert_same(np.asarray(w), _on(jax.devices("cpu")[0], lambda v: jnp.sin(v) + 2,
                                 np.arange(3, dtype=np.float32) + 1))


def test_exit_with_a_callback_in_flight():
  # Python finalizing while a callback still runs on the worker must wait for it, not abort.
  import os
  import subprocess
  import sys

  script = (
      "import time, jax, numpy as np\n"
      "def slow(x):\n"
      "  time.sleep(0.3)\n"
      "  print('callback done', flush=True)\n"
      "  return np.asarray(x)\n"
      "f = jax.jit(lambda x: jax.pure_callback(slow, jax.ShapeDtypeStruct(x.shape, x.dtype), x))\n"
      "y = f(jax.device_put(np.ones(2, np.float32), jax.devices('mlx')[0]))\n")
  env = dict(os.environ, JAX_PLATFORMS="cpu,mlx")
  proc = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True,
                        timeout=120)
  assert proc.returncode == 0, proc.stderr[-2000:]
  assert "callback done" in proc.stdout
