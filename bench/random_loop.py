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

  def jax_columns(fn, inputs):
    """fn jitted on our platform and on jax's CPU: ms per call per column, and each's result."""
    g = jax.jit(fn)
    cols, outs = {}, {}
    for name, col in (("mlx", "ours"), ("cpu", "jax cpu")):
      xs = jax.device_put(inputs, jax.devices(name)[0])
      cols[col] = timed(lambda: g(*xs).block_until_ready(), args.reps)
      outs[col] = np.asarray(g(*xs))
    return cols, outs

  cols, outs = jax_columns(langevin, (jax.random.key(0), np.ones((args.n,), np.float32)))

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
         f"max |ours - cpu| {np.max(np.abs(outs['ours'] - outs['jax cpu'])):.1e}")

  def drop(key, x):
    return jnp.where(jax.random.bernoulli(key, 0.9, x.shape), x / 0.9, 0.0)

  act = np.ones((8, 256, 384), np.float32)
  cols, outs = jax_columns(drop, (jax.random.key(0), act))

  @mx.compile
  def mdrop(key, x):
    return mx.where(mx.random.bernoulli(0.9, x.shape, key=key), x / 0.9, 0.0)

  mkey, mact = mx.random.key(0), mx.array(act)
  cols["native mlx"] = timed(lambda: mx.eval(mdrop(mkey, mact)), args.reps)
  same = np.array_equal(outs["ours"], outs["jax cpu"])
  report("dropout mask, 8x256x384", cols, "mask equal to jax cpu's" if same else "MISMATCH")


def report(what: str, cols: dict, check: str) -> None:
  print(f"{what}: " + ", ".join(f"{k} {v:.2f} ms" for k, v in cols.items()) +
        f"; ours / native {cols['ours'] / cols['native mlx']:.2f}x, ours / jax cpu "
        f"{cols['ours'] / cols['jax cpu']:.2f}x; {check}")


if __name__ == "__main__":
  main()
