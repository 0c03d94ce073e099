"""ULP histograms of jax.random float samplers and f32 elementwise math: mlx vs jax's CPU backend.

  JAX_MLX_LIBRARY_PATH=build-r1/src/pjrt/libjax_mlx_pjrt.so .venv/bin/python tools/rng_ulp.py [N]

For each sampler draws N (default 1e6) f32 samples with the same key on both backends and prints
how many differ by 0, 1, 2, ... ULP (distance between the results' ordered integer encodings).
"""
from __future__ import annotations

import collections
import sys

import jax
import jax.numpy as jnp
import numpy as np


def ordered(x):
  x = np.asarray(x)
  bits = {4: (np.int32, 0x7FFFFFFF), 2: (np.int16, 0x7FFF)}[x.dtype.itemsize]
  i = x.view(bits[0]).astype(np.int64)
  return np.where(i < 0, -(i & bits[1]), i)


def ulp_hist(got, want):
  d = np.abs(ordered(got) - ordered(want))
  same_nan = np.isnan(got.astype(np.float32)) & np.isnan(want.astype(np.float32))
  d = np.where(same_nan, 0, d)
  # Buckets 0, 1, 2, 3, then powers of two: "<=8" counts 5..8 ULP.
  edges = [0, 1, 2, 3, 4, 8, 16, 64, 256, 1024, 2**31]
  labels = ["0", "1", "2", "3", "4", "<=8", "<=16", "<=64", "<=256", "<=1024", ">1024"]
  idx = np.searchsorted(edges, d, side="left")
  counts = np.bincount(idx, minlength=len(edges))
  return {labels[i]: int(c) for i, c in enumerate(counts) if c}


SAMPLERS = {
    "uniform": lambda k, n: jax.random.uniform(k, (n,)),
    "uniform(-2.5,7)": lambda k, n: jax.random.uniform(k, (n,), minval=-2.5, maxval=7.0),
    "normal": lambda k, n: jax.random.normal(k, (n,)),
    "truncated_normal(-1,2)": lambda k, n: jax.random.truncated_normal(k, -1.0, 2.0, (n,)),
    "exponential": lambda k, n: jax.random.exponential(k, (n,)),
    "gumbel": lambda k, n: jax.random.gumbel(k, (n,)),
    "laplace": lambda k, n: jax.random.laplace(k, (n,)),
    "logistic": lambda k, n: jax.random.logistic(k, (n,)),
    "cauchy": lambda k, n: jax.random.cauchy(k, (n,)),
    "gamma(2.5)": lambda k, n: jax.random.gamma(k, 2.5, (n // 10,)),
    "uniform(-2.5,7) f16": lambda k, n: jax.random.uniform(k, (n,), jnp.float16, -2.5, 7.0),
    "normal f16": lambda k, n: jax.random.normal(k, (n,), jnp.float16),
    "uniform(-2.5,7) bf16": lambda k, n: jax.random.uniform(k, (n,), jnp.bfloat16, -2.5, 7.0),
    "normal bf16": lambda k, n: jax.random.normal(k, (n,), jnp.bfloat16),
}

ELEMENTWISE = {
    "log": jnp.log, "exp": jnp.exp, "log1p": jnp.log1p, "expm1": jnp.expm1, "tanh": jnp.tanh,
    "erf": jax.scipy.special.erf, "erf_inv": jax.scipy.special.erfinv, "sqrt": jnp.sqrt,
    "logistic": jax.nn.sigmoid,
}


def main():
  n = int(float(sys.argv[1])) if len(sys.argv) > 1 else 1_000_000
  which = sys.argv[2:] or None
  for name, f in SAMPLERS.items():
    if which and name not in which:
      continue
    kd = np.asarray(jax.random.key_data(jax.random.key(0)))
    got, want = [], []
    for dev in ("mlx", "cpu"):
      k = jax.device_put(kd, jax.devices(dev)[0])
      r = np.asarray(jax.jit(lambda k: f(jax.random.wrap_key_data(k), n))(k))
      (got if dev == "mlx" else want).append(r)
    print(f"{name:24s} {ulp_hist(got[0], want[0])}", flush=True)
  rng = np.random.default_rng(0)
  x = np.concatenate([rng.uniform(-1, 1, n // 2), np.exp(rng.uniform(-80, 80, n // 2)) *
                      rng.choice([-1, 1], n // 2)]).astype(np.float32)
  for name, f in ELEMENTWISE.items():
    if which and name not in which:
      continue
    out = [np.asarray(jax.jit(f)(jax.device_put(x, jax.devices(d)[0]))) for d in ("mlx", "cpu")]
    print(f"elementwise {name:12s} {ulp_hist(out[0], out[1])}", flush=True)


if __name__ == "__main__":
  main()
