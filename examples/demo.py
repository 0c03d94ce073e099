"""`make demo`: what runs where, on the mlx platform next to jax's CPU backend.

Puts arrays on the MLX device and reads them back, then trains the same small linear model with
the same data on jax's CPU backend and on the mlx platform, printing both loss curves, the
milliseconds per step and the largest relative difference between the curves.
"""

from __future__ import annotations

import os
import time

os.environ.setdefault("JAX_PLATFORMS", "cpu,mlx")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402


def train(device, steps=50):
  rng = np.random.default_rng(0)
  x = rng.standard_normal((256, 8)).astype(np.float32)
  w_true = rng.standard_normal((8, 1)).astype(np.float32)
  y = x @ w_true + 0.01 * rng.standard_normal((256, 1)).astype(np.float32)
  x, y = jax.device_put(x, device), jax.device_put(y, device)
  w = jax.device_put(np.zeros((8, 1), np.float32), device)

  @jax.jit
  def step(w, x, y):
    loss, g = jax.value_and_grad(lambda w: jnp.mean((x @ w - y) ** 2))(w)
    return w - 0.1 * g, loss

  losses = []
  w, loss = step(w, x, y)  # compile
  jax.block_until_ready(w)
  start = time.perf_counter()
  for _ in range(steps):
    w, loss = step(w, x, y)
    losses.append(float(loss))
  ms = (time.perf_counter() - start) * 1e3 / steps
  return losses, ms


def main():
  mlx = jax.devices("mlx")[0]
  cpu = jax.devices("cpu")[0]
  print(f"jax {jax.__version__}; default backend: {jax.default_backend()}")
  print(f"mlx device: {mlx!r}  kind: {mlx.device_kind!r}  memories: "
        f"{[m.kind for m in mlx.addressable_memories()]}")

  x = np.arange(12, dtype=np.float32).reshape(3, 4)
  on_mlx = jax.device_put(x, mlx)
  print(f"device_put -> {on_mlx.devices()}; round trip exact: {np.array_equal(np.asarray(on_mlx), x)}")

  cpu_losses, cpu_ms = train(cpu)
  print("loss curve (every 10th step):")
  print("  cpu : " + " ".join(f"{v:.5f}" for v in cpu_losses[::10]))
  try:
    mlx_losses, mlx_ms = train(mlx)
  except Exception as e:  # noqa: BLE001 - the demo reports whatever the plugin says
    first_line = str(e).strip().splitlines()[0]
    print(f"mlx : training not available yet: {type(e).__name__}: {first_line}")
    return
  print("  mlx : " + " ".join(f"{v:.5f}" for v in mlx_losses[::10]))
  print(f"ms/step: cpu {cpu_ms:.3f}, mlx {mlx_ms:.3f}")
  worst = max(abs(a - b) / max(abs(b), 1e-12) for a, b in zip(mlx_losses, cpu_losses))
  print(f"largest relative loss difference vs cpu: {worst:.2e}")


if __name__ == "__main__":
  main()
