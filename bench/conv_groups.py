"""Grouped and depthwise convolutions, forward and both gradients, ms per call (bench/README
"Feature groups on the CPU").

  JAX_MLX_LIBRARY_PATH=... .venv/bin/python bench/conv_groups.py [--device mlx|cpu] [--reps N]

MLX's CPU convolves feature groups in a naive loop; our lowering takes depthwise convolutions as
sums of shifted inputs and other groups as one patch matmul per group (src/lower/convolution.cc).
Shapes: NHWC 8x28x28 inputs, SAME padding, stride 1.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

import numpy as np

CASES = {  # name: (channels, kernel size, groups)
    "depthwise 7x7, 96 features": (96, 7, 96),
    "depthwise 3x3, 64 features": (64, 3, 64),
    "3x3, 64 features in 4 groups": (64, 3, 4),
}


def main() -> None:
  ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
  ap.add_argument("--device", default="mlx")
  ap.add_argument("--reps", type=int, default=5)
  args = ap.parse_args()
  os.environ.setdefault("JAX_PLATFORMS", "cpu,mlx")
  import jax
  import jax.numpy as jnp
  from jax import lax
  dev = jax.devices(args.device)[0]
  rng = np.random.default_rng(0)
  dn = ("NHWC", "HWIO", "NHWC")
  for name, (c, k, g) in CASES.items():
    x = jax.device_put(rng.standard_normal((8, 28, 28, c)).astype(np.float32), dev)
    w = jax.device_put((rng.standard_normal((k, k, c // g, c)) * 0.1).astype(np.float32), dev)

    def conv(x, w, g=g):
      return lax.conv_general_dilated(x, w, (1, 1), "SAME", dimension_numbers=dn,
                                      feature_group_count=g)

    fns = {"forward": jax.jit(conv),
           "gradients": jax.jit(jax.grad(lambda x, w: jnp.sum(jnp.tanh(conv(x, w))),
                                         argnums=(0, 1)))}
    cols = []
    for label, f in fns.items():
      for _ in range(2):
        jax.block_until_ready(f(x, w))
      ts = []
      for _ in range(args.reps):
        t = time.perf_counter()
        jax.block_until_ready(f(x, w))
        ts.append((time.perf_counter() - t) * 1e3)
      cols.append(f"{label} {statistics.median(ts):7.1f} ms")
    print(f"{args.device:>4} {name:<30} " + "  ".join(cols))


if __name__ == "__main__":
  main()
