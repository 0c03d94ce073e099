"""jax.random's cost on our platform, two lines:
- langevin: Langevin dynamics (x += -eps x + sqrt(2 eps) N(0, 1)) for S steps of a fori_loop over
  n floats, one jitted call (native MLX: the same step with mx.random.normal, mx.compile'd, S
  calls evaluated once at the end): many small random draws, per-primitive cost;
- dropout: a dropout mask applied to an 8x256x384 activation (jax.random.bernoulli, jnp.where;
  native: mx.random.bernoulli): one large draw, per-element cost.
Each on our platform, jax's CPU backend and native MLX.

  .venv/bin/python bench/random_loop.py [--steps S] [--n N] [--reps R]

The loop body holds threefry (shifts, xors, adds on uint32 bits), the normal sampler (erf_inv's
polynomial) and, on our platform, the exact FMAs that make the samples equal jax's CPU bit for
bit (src/passes/contract_fma.h). Prints ms per call (median of R, each waited for) per column.
Native MLX draws other random numbers (its own generator): the same work, not the same values.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

os.environ.setdefault("JAX_PLATFORMS", "cpu,mlx")


def timed(fn, reps: int) -> float:
  fn()  # compile and warm up
  ts = []
  for _ in range(reps):
    t = time.perf_counter()
    fn()
    ts.append(time.perf_counter() - t)
  return 1e3 * statistics.median(ts)


def main() -> None:
  ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
  ap.add_argument("--steps", type=int, default=200)
  ap.add_argument("--n", type=int, default=256)
  ap.add_argument("--reps", type=int, default=7)
  args = ap.parse_args()
  import jax
  import jax.numpy as jnp
  import mlx.core as mx
  import numpy as np

  eps = 0.01

  def langevin(key, x):
    def body(i, c):
      key, x = c
      key, sub = jax.random.split(key)
      return key, x - eps * x + np.float32(np.sqrt(2 * eps)) * jax.random.normal(sub, x.shape)
    return jax.lax.fori_loop(0, args.steps, body, (key, x))[1]

  f = jax.jit(langevin)
  cols = {}
  for name in ("mlx", "cpu"):
    dev = jax.devices(name)[0]
    key, x = jax.device_put((jax.random.key(0), jnp.ones((args.n,), jnp.float32)), dev)
    cols["ours" if name == "mlx" else "jax cpu"] = timed(lambda: f(key, x).block_until_ready(),
                                                        args.reps)
  want = np.asarray(f(*jax.device_put((jax.random.key(0), jnp.ones((args.n,))),
                                      jax.devices("cpu")[0])))
  got = np.asarray(f(*jax.device_put((jax.random.key(0), jnp.ones((args.n,))),
                                     jax.devices("mlx")[0])))

  @mx.compile
  def step(key, x):
    key, sub = mx.random.split(key)
    return key, x - eps * x + float(np.sqrt(2 * eps)) * mx.random.normal(x.shape, key=sub)

  def native():
    key, x = mx.random.key(0), mx.ones((args.n,))
    for _ in range(args.steps):
      key, x = step(key, x)
    mx.eval(x)

  cols["native mlx"] = timed(native, args.reps)
  report(f"langevin, {args.steps} steps of {args.n} floats", cols,
         f"max |ours - cpu| {np.max(np.abs(got - want)):.1e}")

  def drop(key, x):
    return jnp.where(jax.random.bernoulli(key, 0.9, x.shape), x / 0.9, 0.0)

  g = jax.jit(drop)
  act = np.ones((8, 256, 384), np.float32)
  cols, outs = {}, {}
  for name in ("mlx", "cpu"):
    key, x = jax.device_put((jax.random.key(0), act), jax.devices(name)[0])
    cols["ours" if name == "mlx" else "jax cpu"] = timed(lambda: g(key, x).block_until_ready(),
                                                        args.reps)
    outs[name] = np.asarray(g(key, x))

  @mx.compile
  def mdrop(key, x):
    return mx.where(mx.random.bernoulli(0.9, x.shape, key=key), x / 0.9, 0.0)

  mkey, mact = mx.random.key(0), mx.array(act)
  cols["native mlx"] = timed(lambda: mx.eval(mdrop(mkey, mact)), args.reps)
  same = np.array_equal(outs["mlx"], outs["cpu"])
  report("dropout mask, 8x256x384", cols, "mask equal to jax cpu's" if same else "MISMATCH")


def report(what: str, cols: dict, check: str) -> None:
  print(f"{what}: " + ", ".join(f"{k} {v:.2f} ms" for k, v in cols.items()) +
        f"; ours / native {cols['ours'] / cols['native mlx']:.2f}x, ours / jax cpu "
        f"{cols['ours'] / cols['jax cpu']:.2f}x; {check}")


if __name__ == "__main__":
  main()
