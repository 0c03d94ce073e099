"""Attention as jax writes it, with and without its recognition (src/passes/attention.h).

  .venv/bin/python bench/attention.py [--reps N] [--small]

Each line: a shape, then ms per call (median of N, each waited for) of the jitted jax chain
`softmax(q @ k^T * scale [masked]) @ v` on our platform with the recognition on
(JAXMLX_FAST_KERNELS=1: MLX's fused attention kernel where it has one), off (=0: jax's own chain
of products, softmax and select), native MLX's `mx.fast.scaled_dot_product_attention` (with
`mx.compile`), and jax's CPU backend. On MLX's CPU the kernel is composed from the same primitives
(no gain expected); on a GPU it is one kernel. --small: shapes for a 2-core CPU.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

import numpy as np

os.environ.setdefault("JAX_PLATFORMS", "cpu,mlx")


def main() -> None:
  ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
  ap.add_argument("--reps", type=int, default=20)
  ap.add_argument("--small", action="store_true")
  args = ap.parse_args()
  import jax
  import jax.numpy as jnp
  import mlx.core as mx

  mlx_dev, cpu = jax.devices("mlx")[0], jax.devices("cpu")[0]
  # (name, batch, heads, queries, keys, head size, masked)
  shapes = [("decode", 1, 32, 1, 2048, 128, True), ("decode, no mask", 1, 32, 1, 2048, 128, False),
            ("prefill", 1, 32, 512, 512, 64, True), ("prefill, no mask", 1, 32, 512, 512, 64, False)]
  if args.small:
    shapes = [(n, b, h // 4, t if t == 1 else t // 4, s // 8, d, m) for n, b, h, t, s, d, m in shapes]

  def timed(call, sync) -> float:
    for _ in range(3):
      sync(call())
    ts = []
    for _ in range(args.reps):
      t = time.perf_counter()
      sync(call())
      ts.append((time.perf_counter() - t) * 1e3)
    return statistics.median(ts)

  print(f"{'case':>18} {'B x H x T x S x D':>22}  {'ours':>8} {'ours, off':>9} {'native':>8} "
        f"{'jax cpu':>8}  (ms; MLX {mx.__version__}, {mx.default_device()})")
  rng = np.random.default_rng(0)
  for name, b, h, t, s, d, masked in shapes:
    q = rng.standard_normal((b, h, t, d)).astype(np.float32)
    k = rng.standard_normal((b, h, s, d)).astype(np.float32)
    v = rng.standard_normal((b, h, s, d)).astype(np.float32)
    mask = np.arange(s) <= np.arange(t)[:, None] + (s - t)  # causal, bottom-right aligned
    scale = d ** -0.5

    def attend(q, k, v, m):
      sc = (q @ k.transpose(0, 1, 3, 2)) * scale
      if masked:
        sc = jnp.where(m, sc, jnp.finfo(sc.dtype).min)
      return jax.nn.softmax(sc, axis=-1) @ v

    cols = []
    for dev, fast in ((mlx_dev, "1"), (mlx_dev, "0"), (cpu, None)):
      if fast is not None:
        os.environ["JAXMLX_FAST_KERNELS"] = fast  # read when the program is compiled
      f = jax.jit(lambda *a: attend(*a))  # a fresh function: compiled anew
      placed = jax.device_put((q, k, v, mask), dev)
      cols.append(timed(lambda: f(*placed), lambda o: o.block_until_ready()))
    mq, mk, mv, mm = (mx.array(a) for a in (q, k, v, mask))
    native = mx.compile(lambda q, k, v, m: mx.fast.scaled_dot_product_attention(
        q, k, v, scale=scale, mask=m if masked else None))
    cols.insert(2, timed(lambda: native(mq, mk, mv, mm), mx.eval))
    print(f"{name:>18} {f'{b} x {h} x {t} x {s} x {d}':>22}  " +
          " ".join(f"{c:8.3f}" for c in cols))


if __name__ == "__main__":
  main()
