"""GPU fusion (JAXMLX_GPU_FUSION, src/runtime/gpu_fusion.h) on MLX's CUDA backend: elementwise
chains become MLX's fused kernels, built by NVRTC, whose compiler contracts a multiply feeding an
add into one FMA unless the kernel's f32 arithmetic is our rounded functors
(src/runtime/rounded_ops.h). The same programs, compiled with the fusion off and on, must give
the same bytes, and the fused ones must hold fused kernels. On MLX's CPU, JAXMLX_GPU_FUSION=1
runs the same rewrite in place of the CPU's own fusion (src/runtime/cpu_fusion.h), its kernels
built by the host compiler: x86-64's baseline has no FMA, so there the bytes check the rewrite's
chains and wiring, not the contraction it avoids (gpu_fusion_test.cc checks kernels one by one).

Each setting runs in a child (the variables are read at compile time; the child saves its
results), the fused one with JAXMLX_GRAPH_STATS to count what each run launched."""

from __future__ import annotations

import collections
import os
import subprocess
import sys

import numpy as np
import pytest

from tests.stats_log import last_run_counts

CHILD = r"""
import os, sys
import jax, jax.numpy as jnp, numpy as np
mlx = jax.devices("mlx")[0]
rng = np.random.default_rng(0)
f32 = lambda *s: rng.standard_normal(s).astype(np.float32)
x, y, z = f32(64, 96), f32(64, 96), f32(64, 96)
w1, w2, gw = f32(96, 128) * 0.1, f32(128, 10) * 0.1, f32(96, 128)
lab = rng.integers(0, 10, (64,)).astype(np.int32)
bits = rng.integers(0, 2**32, (64, 96), dtype=np.uint64).astype(np.uint32)

def transcendental(x, y, z):
  return (jnp.tanh(x * y + z) * jnp.exp(x - y) + jax.nn.sigmoid(x) * 0.5
          - jnp.log(jnp.abs(y) + 1e-3) + jnp.sqrt(jnp.abs(z)) / (1.0 + x * x))

def adam(p, g, m, v):
  m = 0.9 * m + 0.1 * g
  v = 0.999 * v + 0.001 * g * g
  return p - 1e-3 * (m / 0.19) / (jnp.sqrt(v / 0.0199) + 1e-8), m, v

def mlp_grads(w1, w2, x, lab):
  def loss(w1, w2):
    h = jax.nn.gelu(x @ w1)
    logits = h @ w2
    mean = logits.mean(-1, keepdims=True)
    c = logits - mean
    n = c * jax.lax.rsqrt((c * c).mean(-1, keepdims=True) + 1e-5)
    return -jnp.mean(jnp.take_along_axis(jax.nn.log_softmax(n), lab[:, None], 1))
  return jax.grad(loss, argnums=(0, 1))(w1, w2)

def random_draws(key):
  k1, k2, k3 = jax.random.split(key, 3)
  return (jax.random.normal(k1, (64, 96)), jax.random.uniform(k2, (64, 96)),
          jax.random.bernoulli(k3, 0.3, (64, 96)))

def integers(bits, x):
  a = (bits << 13) ^ (bits >> 19)
  f = (a >> 9).astype(jnp.float32) * (1.0 / 8388608.0) - 0.5
  return jnp.where(f > 0.25, f * x + 1.0, -f), (a | 1).astype(jnp.int32) % 7

def bias_corrections(count, b):  # optax's 1 - b ** t over an integer step count
  t = (count + 1).astype(jnp.float32)
  return 1.0 - 0.9 ** t, 1.0 - 0.999 ** t, t ** b, (-b) ** t

steps = np.arange(-40, 152, dtype=np.int32).reshape(2, 96)

def logsumexp_grad(a, ct):  # jax's own op chain (compiled with the recognizers off, below)
  v, f = jax.vjp(lambda a: jax.nn.logsumexp(a, axis=0), a)
  return v, f(ct)[0]

def label_pick_grad(logits, lab):  # a mean cross-entropy's gradient: -1/64 scattered per row
  def loss(l):
    picked = jnp.take_along_axis(l, lab[:, None], axis=-1)[:, 0]
    return (jax.nn.logsumexp(l, axis=-1) - picked).mean()
  return jax.grad(loss)(logits)

rows = f32(3, 5, 7) * 4.0
rows[:, 1, :] = -np.inf

out = {}
for f, args in [(transcendental, (x, y, z)), (adam, (w1, gw, w1 * 0.5, w1 * w1)),
                (bias_corrections, (steps, x[:2] * 3.0)),
                (mlp_grads, (w1, w2, x, lab)), (random_draws, (jax.random.key(7),)),
                (integers, (bits, x)), (label_pick_grad, (f32(64, 10), lab)),
                (logsumexp_grad, (rows, f32(5, 7)))]:
  if f is logsumexp_grad:
    os.environ["JAXMLX_RECOGNIZE"] = "0"
  g = jax.jit(f)
  for _ in range(2):  # the first call traces, the second replays
    res = jax.tree_util.tree_leaves(g(*jax.device_put(args, mlx)))
  for i, r in enumerate(res):
    out[f"{f.__name__}.{i}"] = np.asarray(r)
np.savez(sys.argv[1], **out)
"""


def run_child(tmp_path, name: str, **env) -> tuple[dict[str, np.ndarray], dict[str, collections.Counter]]:
  """The results of CHILD under `env`, and each program's primitive counts of its last run."""
  log, saved = tmp_path / f"{name}.log", tmp_path / f"{name}.npz"
  env = dict(os.environ, JAXMLX_GRAPH_STATS=str(log), JAXMLX_COMPILE="replay", **env)
  r = subprocess.run([sys.executable, "-c", CHILD, str(saved)], capture_output=True, text=True,
                     env=env, timeout=600)
  assert r.returncode == 0, r.stderr[-3000:]
  with np.load(saved) as z:
    return {k: z[k] for k in z.files}, last_run_counts(log)


def fused_kernels(counts: collections.Counter) -> int:
  return sum(n for name, n in counts.items() if name.startswith("Compiled"))


def test_fused_kernels_keep_the_unfused_bits(tmp_path):
  # (JAXMLX_CPU_FUSION=0: on MLX's CPU the plain run is MLX's own primitives too.)
  plain, plain_counts = run_child(tmp_path, "plain", JAXMLX_GPU_FUSION="0", JAXMLX_CPU_FUSION="0")
  fused, fused_counts = run_child(tmp_path, "fused", JAXMLX_GPU_FUSION="1", JAXMLX_CPU_FUSION="0")
  assert plain.keys() == fused.keys()
  for k in plain:
    assert plain[k].dtype == fused[k].dtype, k
    differ = np.count_nonzero(plain[k].view(np.uint8) != fused[k].view(np.uint8))
    assert differ == 0, f"{k}: {differ} bytes differ"
  for program in ("jit_transcendental", "jit_adam", "jit_mlp_grads", "jit_integers",
                  "jit_bias_corrections", "jit_logsumexp_grad"):
    assert fused_kernels(fused_counts[program]) >= 1, (program, fused_counts[program])
    assert sum(fused_counts[program].values()) < sum(plain_counts[program].values()), program
  # The normalization's row mean and inverse deviation ([64, 1], read broadcast over [64, 10])
  # are computed in the kernels reading them, not in kernels of their own.
  for op in ("Divide", "Add", "Rsqrt", "Negative"):
    assert fused_counts["jit_mlp_grads"][op] == 0, fused_counts["jit_mlp_grads"]
  # The adam update (products and sums together) is one kernel: nothing of it is left unfused.
  assert fused_kernels(fused_counts["jit_adam"]) == 1, fused_counts["jit_adam"]
  for op in ("Multiply", "Add", "Subtract", "Divide", "Sqrt"):
    assert fused_counts["jit_adam"][op] == 0, fused_counts["jit_adam"]
  # The splat cotangent -1/64, broadcast and reshaped to [64, 1] by the scatter of the label
  # pick's transpose, is read by the kernel as the scalar it is: no broadcast or reshape of it
  # is left to run (gpu_fusion.cc, splat_scalar).
  pick = fused_counts["jit_label_pick_grad"]
  assert pick["Broadcast"] == 0 and pick["Reshape"] <= 1 and fused_kernels(pick) == 1, pick
  # Powers (pow is MLX's device library code) share kernels with what they read and feed; the
  # one left alone is t ** b, whose operands are both read from memory (a chain of one op).
  bc = fused_counts["jit_bias_corrections"]
  assert bc["Subtract"] == 0 and bc["AsType"] == 0 and bc["Power"] <= 1, bc
  assert fused_kernels(bc) == 3, bc
