"""Canaries for MLX's command-buffer splits (../shared/PITFALLS.md: "command-buffer split
corruption"), run on every backend we have.

On Metal, MLX cuts a command buffer every MLX_MAX_OPS_PER_BUFFER ops / MLX_MAX_MB_PER_BUFFER
(element) budget; at MLX's defaults earlier MLX-based backends returned silently wrong values
where a graph was split. The plugin sets 800 / 512 before MLX starts (src/runtime/
metal_settings.h). These programs are long and wide enough to be split several times at those
values, and their integer results must equal jax's CPU backend's bit for bit. On the CPU and CUDA
backends they check the same graphs through MLX's other schedulers (CUDA cuts its graphs by the
same two variables, at MLX's own defaults there: the plugin sets them on macOS only).
"""

from __future__ import annotations

import ctypes
import os
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from tests.ops.harness import check


def _c_getenv(name: str) -> str | None:
  # The plugin sets these with setenv() in C; os.environ is Python's copy from startup.
  libc = ctypes.CDLL(None)
  libc.getenv.restype = ctypes.c_char_p
  v = libc.getenv(name.encode())
  return v.decode() if v is not None else None


@pytest.mark.skipif(sys.platform != "darwin", reason="Metal's budgets are set on macOS only")
def test_settings_are_applied_before_mlx_starts(mlx_device):
  for name, ours in [("MLX_MAX_OPS_PER_BUFFER", "800"), ("MLX_MAX_MB_PER_BUFFER", "512")]:
    v = _c_getenv(name)
    assert v is not None, f"{name} was not set"
    assert v == ours or v == os.environ.get(name), (name, v)


@pytest.mark.skipif(sys.platform == "darwin", reason="on macOS the plugin sets them")
def test_settings_are_left_to_mlx_off_macos(mlx_device):
  # MLX's CUDA backend reads the same variables as its CUDA-graph size (H200 default: 100 nodes);
  # the Metal budget there held every temporary of an 800-node graph until it had run.
  for name in ("MLX_MAX_OPS_PER_BUFFER", "MLX_MAX_MB_PER_BUFFER"):
    assert _c_getenv(name) == os.environ.get(name), name


def _lcg_chain(x, steps):
  # Each step depends on the last: a split anywhere that loses or reorders work changes the bits.
  for i in range(steps):
    x = (x * jnp.uint32(1103515245) + jnp.uint32(12345 + i)) ^ (x >> jnp.uint32(7))
  return x


@pytest.mark.parametrize("steps", [300, 1200])
def test_long_dependent_chain_is_bit_exact(steps):
  x = np.arange(4099, dtype=np.uint32) * np.uint32(2654435761)
  check(lambda x: _lcg_chain(x, steps), x)


def test_wide_graph_of_many_independent_outputs_is_bit_exact():
  # ~2,000 ops whose results are all live at the end (no chain to keep them ordered).
  x = np.arange(1 << 12, dtype=np.int32)
  def f(x):
    outs = [(x * np.int32(k) + np.int32(k * k)) ^ (x >> (k % 31)) for k in range(500)]
    return jnp.stack(outs).sum(axis=0, dtype=jnp.int32)
  check(f, x)


def test_large_arrays_through_many_ops_are_bit_exact():
  # Element counts past MLX's default "MB" budget (40) per buffer, many times over.
  x = np.arange(1 << 22, dtype=np.int32)
  def f(x):
    for i in range(40):
      x = x * np.int32(3) + np.int32(i) ^ (x >> 3)
    return x
  check(f, x)


def test_replayed_program_gives_the_same_bits_every_time(mlx_device):
  # Compiled replays were where the corruption showed first: run one program many times.
  f = jax.jit(lambda x: _lcg_chain(x, 400))
  x = np.arange(2048, dtype=np.uint32)
  want = np.asarray(f(jax.device_put(x, jax.devices("cpu")[0])))
  xd = jax.device_put(x, mlx_device)
  for _ in range(20):
    np.testing.assert_array_equal(np.asarray(f(xd)), want)
