"""Edge-value inputs for the differential op tests (elementwise, compare, convert).

values(dtype, shape, offset) fills `shape` by cycling through the edge values of `dtype`
(starting at `offset`, so two operands of one test differ); pairs(dtype, dtype2) gives two 1-D
arrays covering every (a, b) pair of edge values.
"""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np

BOOL = [np.bool_]
SIGNED = [np.int8, np.int16, np.int32, np.int64]
UNSIGNED = [np.uint8, np.uint16, np.uint32, np.uint64]
INTS = SIGNED + UNSIGNED
FLOATS = [np.float16, jnp.bfloat16, np.float32]
COMPLEX = [np.complex64]
SHAPES = [(), (0,), (7,), (3, 5)]


def dtype_id(dt) -> str:
  return np.dtype(dt).name


def _int_edges(dt) -> list[int]:
  info = np.iinfo(dt)
  vals = [0, 1, -1, info.min, info.max, info.min + 1, info.max - 1, 2, -2, 3, -3, 7, -7, 100,
          -100, 12345, info.max // 3, 0x55, 1 << (info.bits - 1), (1 << (info.bits - 1)) + 1]
  mod = 1 << info.bits
  out = []
  for v in vals:
    v %= mod  # wrap negatives into unsigned types, then back to the signed range
    if info.min < 0 and v > info.max:
      v -= mod
    out.append(v)
  return out


def _float_edges(dt) -> list[float]:
  finfo = jnp.finfo(dt)
  vals = [0.0, -0.0, 1.0, -1.0, np.nan, np.inf, -np.inf, 0.5, -0.5, 1.5, 2.5, -2.5,
          float(finfo.tiny), float(finfo.max), -float(finfo.max), 3.7, -3.7, 1e-3, 100.0,
          -7.25, 0.1, 2.0, 64.0, 1000.5]
  # jax's CPU backend flushes f32/bf16 denormals to zero (inputs and results, FTZ/DAZ) while
  # MLX keeps them, so f32/bf16 tests use no denormal inputs; f16 ones XLA keeps (via f32).
  if np.dtype(dt) == np.float16:
    vals += [float(finfo.smallest_subnormal), -float(finfo.smallest_subnormal)]
  return vals


def edges(dt) -> np.ndarray:
  dt = np.dtype(dt)
  if dt == np.bool_:
    return np.array([False, True], dt)
  if dt.kind in "iu":
    return np.array(_int_edges(dt), dtype=object).astype(dt)
  if dt.kind == "c":
    # No FLT_MIN or FLT_MAX parts (1e30 instead): complex divide/power form denormal
    # intermediates from them (ratios like 1.5/FLT_MAX), which XLA's CPU backend flushes to
    # zero (then 0 * inf = NaN) and MLX keeps.
    f32 = jnp.finfo(np.float32)
    big = {float(f32.max): 1e30, -float(f32.max): -1e30}
    re = [big.get(v, v) for v in _float_edges(np.float32) if v != float(f32.tiny)]
    im = re[3:] + re[:3]
    out = np.zeros(len(re), dt)
    out.real, out.imag = re, im  # not re + 1j*im, which turns inf parts into NaN
    return out
  return np.array(_float_edges(dt), dtype=np.float64).astype(dt)


def values(dt, shape, offset: int = 0) -> np.ndarray:
  e = edges(dt)
  n = int(np.prod(shape, dtype=np.int64))
  idx = (np.arange(n) + offset) % len(e)
  return e[idx].reshape(shape)


def pairs(dt, dt2=None) -> tuple[np.ndarray, np.ndarray]:
  a, b = edges(dt), edges(dt2 if dt2 is not None else dt)
  aa, bb = np.meshgrid(np.arange(len(a)), np.arange(len(b)), indexing="ij")
  return a[aa.ravel()], b[bb.ravel()]


def rand(dt, shape, seed=0, lo=-8, hi=9, scale=1.0):
  """Seeded moderate values of dtype `dt`: ints in [lo, hi), unsigned in [0, hi), bools, floats
  and complex parts uniform in [-scale, scale] (no overflow)."""
  rng = np.random.default_rng(seed)
  dt = np.dtype(dt)
  if dt == np.bool_:
    return rng.random(shape) < 0.5
  if dt.kind == "u":
    return rng.integers(0, hi, shape).astype(dt)
  if dt.kind == "i":
    return rng.integers(lo, hi, shape).astype(dt)
  if dt.kind == "c":
    return (rng.uniform(-scale, scale, shape) + 1j * rng.uniform(-scale, scale, shape)).astype(dt)
  return rng.uniform(-scale, scale, shape).astype(dt)
