"""Counted loops too long to unroll whole (src/passes/unroll.h): each workload compiled with
JAXMLX_UNROLL at its default (partly unrolled: k body copies per iteration) and at 0 (a loop
replayed once per step), alternating twice in one process; median of 5 waited calls each.

  .venv/bin/python bench/long_loops.py

Workloads: a fori_loop of 10007 tanh steps on 256 floats (an ODE solver's shape); an RNN scan
of 2048 steps (hidden 256, batch 16) with its gradient.
"""

from __future__ import annotations

import os
import time


def main() -> None:
  os.environ.setdefault("JAX_PLATFORMS", "cpu,mlx")
  import jax
  import jax.numpy as jnp
  import numpy as np

  mlx = jax.devices("mlx")[0]
  rng = np.random.default_rng(0)
  x = jax.device_put(np.ones(256, np.float32), mlx)
  w = jax.device_put((rng.standard_normal((256, 256)) / 16).astype(np.float32), mlx)
  xs = jax.device_put(rng.standard_normal((2048, 16, 256)).astype(np.float32), mlx)

  def ode(x):
    return jax.lax.fori_loop(
        0, 10007, lambda i, c: jnp.tanh(c * 0.9999) + i.astype(jnp.float32) * 1e-7, x)

  def rnn_loss(w, xs):
    h0 = jnp.zeros((16, 256), jnp.float32)
    _, hs = jax.lax.scan(lambda h, x: (jnp.tanh(h @ w + x),) * 2, h0, xs)
    return jnp.mean(hs ** 2)

  cases = [("ode fori_loop 10007", ode, (x,)), ("rnn scan 2048 + grad", jax.grad(rnn_loss), (w, xs))]
  for name, fn, args in cases:
    for unroll in ["", "0", "", "0"]:
      os.environ["JAXMLX_UNROLL"] = unroll  # read at each compile; "" is the default
      f = jax.jit(lambda *a, fn=fn: fn(*a))  # a new function: compiled again
      t = time.perf_counter()
      jax.block_until_ready(f(*args))
      first = time.perf_counter() - t
      times = []
      for _ in range(5):
        t = time.perf_counter()
        jax.block_until_ready(f(*args))
        times.append(time.perf_counter() - t)
      label = "default" if unroll == "" else "0"
      print(f"{name}: JAXMLX_UNROLL={label} first call {first:.2f} s, "
            f"median {sorted(times)[2] * 1e3:.1f} ms", flush=True)


if __name__ == "__main__":
  main()
