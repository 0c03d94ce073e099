"""Counted loops unrolled into straight-line code (src/passes/unroll.h): which loops a compile
unrolls (jaxmlx-dump --passes=gpu on jax's own program) and that unrolled programs compute what
jax's CPU backend does and, bit for bit, what the same program run as a loop computes
(JAXMLX_UNROLL=0). The loops' own semantics with and without unrolling: tests/test_execute.py.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from tests.ops.harness import assert_same, check, run_on
from tests.ops.rewrites import rewritten

RNG = np.random.default_rng(7)


def f32(*shape):
  return RNG.standard_normal(shape).astype(np.float32)


def loops_in(fn, *args) -> int:
  return rewritten(fn, *args).count("stablehlo.while")


def same_as_looped(fn, *args, monkeypatch, rtol=None):
  """fn on mlx unrolled and kept a loop: the same bits; and against jax's CPU backend."""
  got = check(fn, *args, rtol=rtol)
  monkeypatch.setenv("JAXMLX_UNROLL", "0")
  looped = run_on(jax.devices("mlx")[0], lambda *a: fn(*a), *args)
  monkeypatch.delenv("JAXMLX_UNROLL")
  assert_same(got, looped, exact=True)


def gru_loss(p, xs):
  h = p["wh"].shape[0]

  def cell(hid, x):
    hp = hid @ p["wh"]
    r, z = jnp.split(jax.nn.sigmoid(x[:, :2 * h] + hp[:, :2 * h]), 2, axis=-1)
    n = jnp.tanh(x[:, 2 * h:] + r * (hp[:, 2 * h:] + p["bhn"]))
    hid = (1 - z) * n + z * hid
    return hid, hid

  _, hs = jax.lax.scan(cell, jnp.zeros((xs.shape[1], h), jnp.float32), xs @ p["wx"])
  return jnp.mean(hs ** 2)


def gru_params(d=8, h=16):
  s = 1 / np.sqrt(h)
  return {"wx": f32(d, 3 * h) * s, "wh": f32(h, 3 * h) * s, "bhn": f32(h) * s}


# --- which loops are unrolled -------------------------------------------------------------------

def test_scan_fori_and_reverse_scan_are_unrolled():
  xs, h = f32(6, 4), f32(4)
  assert loops_in(lambda h, xs: jax.lax.scan(lambda c, x: (c * x, c + x), h, xs), h, xs) == 0
  assert loops_in(lambda h, xs: jax.lax.scan(lambda c, x: (c * x, c), h, xs, reverse=True),
                  h, xs) == 0
  assert loops_in(lambda x: jax.lax.fori_loop(3, 9, lambda i, c: c * 2 + i, x), h) == 0
  # A scan's gradient: the forward scan and the backward one.
  assert loops_in(jax.grad(gru_loss), gru_params(), f32(5, 2, 8)) == 0


def test_nested_counted_loops_are_unrolled_inner_first():
  def f(x):
    def outer(i, acc):
      return jax.lax.fori_loop(0, 3, lambda j, a: a * 0.5 + j, acc) + i
    return jax.lax.fori_loop(0, 4, outer, x)
  assert loops_in(f, f32(3)) == 0


def test_loops_that_stay_loops():
  x = f32(4)
  # The trip count is known only when the program runs.
  assert loops_in(lambda x, n: jax.lax.fori_loop(0, n, lambda i, c: c + i, x), x, np.int32(5)) == 1
  # The condition reads the carry.
  assert loops_in(lambda x: jax.lax.while_loop(lambda c: jnp.sum(c) < 100, lambda c: c * 2, x),
                  x) == 1
  # A branch, a host callback in the body.
  assert loops_in(lambda x: jax.lax.fori_loop(
      0, 4, lambda i, c: jax.lax.cond(i % 2 == 0, jnp.sin, jnp.cos, c), x), x) == 1
  assert loops_in(lambda x: jax.lax.fori_loop(
      0, 4, lambda i, c: jax.pure_callback(np.sin, c, c), x), x) == 1


def test_the_limit_counts_the_unrolled_ops(monkeypatch):
  def f(x):
    return jax.lax.fori_loop(0, 50, lambda i, c: jnp.sin(c) * 0.5 + i, x)
  assert loops_in(f, f32(4)) == 0
  monkeypatch.setenv("JAXMLX_UNROLL", "100")  # 50 trips of ~6 ops: over the limit
  assert loops_in(f, f32(4)) == 1
  monkeypatch.setenv("JAXMLX_UNROLL", "0")
  assert loops_in(f, f32(4)) == 1


def test_a_counter_that_would_wrap_stays_a_loop():
  def f(x):  # int8 counter 100, 110, 120: the add after 120 wraps (the dynamic loop's semantics)
    return jax.lax.while_loop(lambda c: c[0] < jnp.int8(125),
                              lambda c: (c[0] + jnp.int8(10), c[1] * 2), (jnp.int8(100), x))
  assert loops_in(f, f32(2)) == 1


def test_loop_invariant_ops_are_emitted_once():
  w = f32(4, 4)

  def f(x, w):  # sin(w) reads no carry value: one sine, not twelve
    return jax.lax.fori_loop(0, 12, lambda i, c: c @ jnp.sin(w) + jnp.cos(c), x)
  text = rewritten(f, f32(4), w)
  assert text.count("stablehlo.sine") == 1, text
  assert text.count("stablehlo.cosine") == 12, text


# --- values -------------------------------------------------------------------------------------

def test_scan_values(monkeypatch):
  def f(h, xs):
    def step(c, x):
      c = jnp.tanh(c * 0.5 + x)
      return c, c * 2
    return jax.lax.scan(step, h, xs)
  same_as_looped(f, f32(3), f32(9, 3), monkeypatch=monkeypatch)


def test_reverse_scan_and_counter_values(monkeypatch):
  def f(xs):
    def step(c, x):
      return c + x, c * x
    return jax.lax.scan(step, jnp.float32(0), xs, reverse=True)
  same_as_looped(f, f32(17), monkeypatch=monkeypatch)

  def g(x):  # the counter read as a value, and the final counter returned by while_loop
    return jax.lax.while_loop(lambda c: c[0] < 23, lambda c: (c[0] + 4, c[1] * 3 + c[0]),
                              (jnp.int32(-5), x))
  same_as_looped(g, np.arange(5, dtype=np.int32), monkeypatch=monkeypatch)


def test_unsigned_and_empty_loops(monkeypatch):
  def f(x):
    return jax.lax.while_loop(lambda c: c[0] < jnp.uint32(9),
                              lambda c: (c[0] + jnp.uint32(2), c[1] ^ (c[1] >> 1) ^ c[0]),
                              (jnp.uint32(0), x))
  same_as_looped(f, np.arange(6, dtype=np.uint32) * 2654435761, monkeypatch=monkeypatch)

  def empty(x):  # no trip: the carry comes through unchanged
    return jax.lax.fori_loop(5, 5, lambda i, c: c * 0 + i, x)
  same_as_looped(empty, f32(3), monkeypatch=monkeypatch)


def test_gru_gradient(monkeypatch):
  same_as_looped(jax.grad(gru_loss), gru_params(), f32(12, 3, 8), monkeypatch=monkeypatch)


def test_nested_loops_with_random_draws(monkeypatch):
  def f(key, x):  # threefry in the body: the same bits as the CPU backend's
    def outer(i, c):
      k = jax.random.fold_in(key, i)
      return jax.lax.fori_loop(0, 3, lambda j, a: a + jax.random.uniform(
          jax.random.fold_in(k, j), a.shape), c)
    return jax.lax.fori_loop(0, 4, outer, x)
  key = jax.random.key_data(jax.random.key(3))
  same_as_looped(lambda k, x: f(jax.random.wrap_key_data(k), x), np.asarray(key), f32(5),
                 monkeypatch=monkeypatch)


def test_a_loop_over_constants_only(monkeypatch):
  def f():  # every iteration's value is a constant: hoisted, within the executable's budget
    return jax.lax.fori_loop(0, 40, lambda i, c: c * 1.5 + i, jnp.ones((256, 256), jnp.float32))
  same_as_looped(f, monkeypatch=monkeypatch)


@pytest.mark.parametrize("steps", [1, 2, 64])
def test_scan_lengths(steps, monkeypatch):
  def f(xs):
    return jax.lax.scan(lambda c, x: (jnp.sin(c) + x, c), jnp.zeros(3, jnp.float32), xs)
  same_as_looped(f, f32(steps, 3), monkeypatch=monkeypatch)


# --- reads of updated rows (src/passes/static_slices.h) -----------------------------------------

def updates_and_reads(buf, u, w):
  b = jax.lax.dynamic_update_slice(buf, u, (1, 0))  # rows 1-2
  b = jax.lax.dynamic_update_slice(b, w, (5, 0))  # start clamped to 4: rows 4-5
  return (jax.lax.dynamic_slice(b, (1, 0), (2, 3)),  # exactly u
          jax.lax.dynamic_slice(b, (9, 0), (2, 3)),  # clamped to 4: exactly w
          jax.lax.dynamic_slice(b, (2, 0), (2, 3)),  # u's last row and row 3: reads b before w
          b[3], b[0:1])  # rows no update wrote: read from buf


def test_a_read_of_updated_rows_is_the_update():
  args = f32(6, 3), f32(2, 3), f32(2, 3)
  text = rewritten(updates_and_reads, *args)
  assert text.count("stablehlo.dynamic_update_slice") == 1, text  # w's update is read by none
  assert text.count("stablehlo.dynamic_slice") == 1, text
  check(updates_and_reads, *args, exact=True)


def test_index_arithmetic_of_constants_is_folded():
  def f(buf, u):  # jax wraps a negative index (select(i < 0, i + n, i)), then clamps
    b = jax.lax.dynamic_update_slice(buf, u, (jnp.int32(-2), jnp.int32(0)))
    return (jax.lax.dynamic_slice(b, (jnp.int32(-2), jnp.int32(0)), (2, 3)),
            jax.lax.dynamic_slice(b, (jnp.uint32(4), jnp.uint32(7)), (2, 3)),
            jax.lax.dynamic_slice(b, (jnp.int8(-128), jnp.int8(0)), (2, 3)))  # -122: rows 0-1
  args = f32(6, 3), f32(2, 3)
  assert rewritten(f, *args).count("stablehlo.dynamic_slice") == 1  # the rows u did not write
  check(f, *args, exact=True)


def test_a_long_loop_of_small_steps(monkeypatch):
  # 2000 steps: a graph thousands of primitives deep, traced (mx.compile walks it
  # recursively on the device worker's stack: base/thread.h) and replayed as one.
  def f(x):
    return jax.lax.fori_loop(0, 2000, lambda i, c: c * 0.999 + 1e-3, x)
  assert loops_in(f, f32(4)) == 0
  # jax's CPU contracts each step's multiply-add (README, known differences): 2000 roundings.
  same_as_looped(f, f32(4), monkeypatch=monkeypatch, rtol=2e-4)


@pytest.mark.parametrize("mode", ["0", "replay", "1"], ids=["eager", "replay", "fused"])
def test_an_unrolled_scan_in_every_graph_mode(mode, monkeypatch):
  # JAXMLX_COMPILE (read at each compile): eager lowers the unrolled program on every call,
  # replay traces it once, fused hands it to MLX's own kernel fusion (Metal's default; on the
  # CPU each fused kernel is built by the host compiler, so the program is small).
  monkeypatch.setenv("JAXMLX_COMPILE", mode)

  def f(h, xs):
    return jax.lax.scan(lambda c, x: (jnp.tanh(c * 0.5 + x), c * x), h, xs)
  assert loops_in(f, f32(3), f32(4, 3)) == 0
  fn = jax.jit(f)
  mlx = jax.devices("mlx")[0]
  h, xs = f32(3), f32(4, 3)
  want = run_on(jax.devices("cpu")[0], f, h, xs)
  for _ in range(3):  # the first call traces; later ones replay
    got = jax.tree_util.tree_map(np.asarray, fn(jax.device_put(h, mlx), jax.device_put(xs, mlx)))
    assert_same(got, want)


def test_a_loop_too_long_to_unroll_runs_chunks(monkeypatch):
  # 10007 steps (a prime: 10007 % k steps are peeled off in front), then a loop of k steps per
  # iteration: one while left, with far fewer iterations.
  def f(x):
    return jax.lax.fori_loop(0, 10007, lambda i, c: c * 0.9999 + i.astype(jnp.float32) * 1e-7, x)
  text = rewritten(f, f32(4))
  assert text.count("stablehlo.while") == 1, text
  assert text.count("stablehlo.multiply") > 20, text  # k copies in the body
  same_as_looped(f, f32(4), monkeypatch=monkeypatch, rtol=2e-3)

  def g(h, xs):  # a scan: each copy of the chunk reads its own row
    return jax.lax.scan(lambda c, x: (jnp.sin(c) + x, c), h, xs)
  assert loops_in(g, f32(3), f32(3001, 3)) == 1
  same_as_looped(g, f32(3), f32(3001, 3), monkeypatch=monkeypatch)
