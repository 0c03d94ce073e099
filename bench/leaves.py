"""Cost per argument of a call: a jitted update of N donated f32[16] leaves (each leaf plus one,
and the first leaf's sum as the value waited for), as a training step passes its parameters and
optimizer state. Ours beside jax's CPU backend and the same update under native MLX's
mx.compile, µs per call, medians over --seconds of calls after a warm-up, one process.

  python3 bench/leaves.py --leaves 1 --leaves 60 --leaves 240

The per-leaf slope is what jax's dispatch, our PJRT calls and MLX's graph replay add for each
argument and result. Each leaf's add is also one kernel (one MLX task on the CPU), so the slope
holds MLX's issue too; compare ours with native MLX for what is ours.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

os.environ.setdefault("JAX_PLATFORMS", "cpu,mlx")


def timed(call, seconds: float) -> tuple[float, int]:
  for _ in range(20):
    call()
  times = []
  end = time.perf_counter() + seconds
  while time.perf_counter() < end:
    t = time.perf_counter()
    call()
    times.append(time.perf_counter() - t)
  return statistics.median(times) * 1e6, len(times)


def jax_column(platform: str, n: int, seconds: float) -> tuple[float, int]:
  import jax
  import jax.numpy as jnp
  device = jax.devices(platform)[0]
  state = [[jax.device_put(jnp.full((16,), i, jnp.float32), device) for i in range(n)]]
  f = jax.jit(lambda s: ([x + 1 for x in s], s[0].sum()), donate_argnums=0)

  def call():
    state[0], total = f(state[0])
    total.block_until_ready()

  return timed(call, seconds)


def native_column(n: int, seconds: float) -> tuple[float, int]:
  import mlx.core as mx
  state = [mx.full((16,), i, mx.float32) for i in range(n)]
  mx.eval(state)
  f = mx.compile(lambda *s: ([x + 1 for x in s], s[0].sum()))

  def call():
    new, total = f(*state)
    state[:] = new
    mx.eval(total, state)

  return timed(call, seconds)


def main() -> None:
  ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  ap.add_argument("--leaves", type=int, action="append", help="leaves per call (repeatable)")
  ap.add_argument("--seconds", type=float, default=2.0, help="timed seconds per column")
  args = ap.parse_args()
  for n in args.leaves or [1, 60, 240]:
    ours, calls = jax_column("mlx", n, args.seconds)
    cpu, _ = jax_column("cpu", n, args.seconds)
    native, _ = native_column(n, args.seconds)
    print(f"{n:5d} leaves: ours {ours:8.1f} us/call ({calls} calls), jax cpu {cpu:8.1f}, "
          f"native mlx {native:8.1f}; ours / native {ours / native:.2f}", flush=True)


if __name__ == "__main__":
  main()
