"""stablehlo.reduce_precision (src/lower/float_bits.cc, rule in convert.cc) bit for bit against
jax's CPU backend: mantissa rounding to nearest even (ties both ways, carries into the
exponent), exponent range clamping (overflow to inf, below-range to signed zero), NaN kept,
over f32/f16/bf16 and the (exponent_bits, mantissa_bits) of every common format.
"""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax

from tests.ops.edge_values import values
from tests.ops.harness import check

# (exponent_bits, mantissa_bits): bf16, f16, e4m3, e5m2, e8m0-like, e2m1, f32 (no-op), odd ones.
FORMATS = [(8, 7), (5, 10), (4, 3), (5, 2), (8, 0), (2, 1), (8, 23), (1, 0), (3, 12), (6, 5),
           (11, 52)]


def cases(dt) -> np.ndarray:
  """Bit patterns covering ties, near-ties, exponent boundaries and specials of dt."""
  rng = np.random.default_rng(0)
  if np.dtype(dt).itemsize == 2:
    bits = np.arange(1 << 16, dtype=np.uint16)  # every f16/bf16 value
    return bits.view(dt)
  b = rng.integers(0, 1 << 32, 20000, dtype=np.uint64).astype(np.uint32)
  # Low mantissa bits set to exact halves for common shifts (ties), and all-ones (carries).
  for k in [20, 13, 16, 23]:
    half = np.uint32(1 << (k - 1))
    b = np.concatenate([b, (b & ~np.uint32((1 << k) - 1)) | half,
                        b | np.uint32((1 << k) - 1)])
  x = b.view(np.float32)
  # jax's CPU backend flushes f32 denormal inputs to zero (DAZ); MLX keeps them.
  x = x[~((np.abs(x) < np.finfo(np.float32).tiny) & (x != 0))]
  return np.concatenate([x, values(np.float32, (24,))])


@pytest.mark.parametrize("fmt", FORMATS, ids=str)
@pytest.mark.parametrize("dt", [np.float32, np.float16, jnp.bfloat16],
                         ids=lambda d: np.dtype(d).name)
def test_reduce_precision(dt, fmt):
  e, m = fmt
  check(lambda x: lax.reduce_precision(x, exponent_bits=e, mantissa_bits=m), cases(dt),
        exact=True)


@pytest.mark.parametrize("shape", [(), (0,), (3, 5)], ids=str)
def test_shapes(shape):
  check(lambda x: lax.reduce_precision(x, 5, 10), values(np.float32, shape, 2), exact=True)


# jaxlib 0.11's XLA:CPU returns the canonical quiet NaN (sign kept) for bf16 NaNs even when the
# format keeps every bf16 bit; jaxlib 0.10's drops that reduce_precision and keeps the payload.
# The plugin follows JAXMLX_XLA_CPU_VERSION; measured on jax 0.11.2 (all 65536 patterns: 252
# NaN payloads change, nothing else).
@pytest.mark.parametrize("version", ["0.10.2", "0.11.2"])
@pytest.mark.parametrize("fmt", [(8, 23), (11, 52)], ids=str)
def test_bf16_nan_payload_follows_the_reference_jaxlib(fmt, version, monkeypatch):
  import jax
  # The plugin sets the variable from jaxlib when it starts: start it first, so that the
  # monkeypatch restores that value afterwards (not an unset variable).
  jax.devices("mlx")
  monkeypatch.setenv("JAXMLX_XLA_CPU_VERSION", version)
  x = cases(jnp.bfloat16)
  e, m = fmt
  got = np.asarray(jax.jit(lambda x: lax.reduce_precision(x, exponent_bits=e, mantissa_bits=m))(
      jax.device_put(x, jax.devices("mlx")[0])))
  bits = x.view(np.uint16)
  want = bits.copy()
  if version.startswith("0.11"):
    nan = np.isnan(x.astype(np.float32))
    want[nan] = (bits[nan] & 0x8000) | 0x7fc0
  assert (want != bits).sum() == (252 if version.startswith("0.11") else 0)
  np.testing.assert_array_equal(got.view(np.uint16), want)
