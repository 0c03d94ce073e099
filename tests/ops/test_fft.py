"""Differential tests of stablehlo.fft (src/lower/fft.cc) against jax's CPU backend.

Every jnp.fft transform (fft/ifft/rfft/irfft, the 2-d and n-d forms) over odd, even, length-1
and empty sizes, with n/s (truncating and zero-padding), axes and the three norm modes, on
float32 and complex64 inputs, plus gradients through rfft/irfft.

Tolerance: MLX (pocketfft) and XLA's CPU (ducc) use different factorizations, so results differ
by rounding that grows like log2(n) relative to the largest output magnitude, not to each
element (a near-zero bin carries the absolute error of the whole transform). Each comparison
uses atol = 4 * eps32 * (log2(N) + 1) * max|expected| with N the transform size, rtol = 0.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from tests.ops.edge_values import rand
from tests.ops.harness import assert_same, run_on

EPS32 = float(np.finfo(np.float32).eps)


def check_fft(fn, x, n_transform):
  """Runs fn on cpu and mlx and compares with the log-n tolerance above (per output leaf)."""
  want = run_on(jax.devices("cpu")[0], fn, x)
  got = run_on(jax.devices("mlx")[0], fn, x)
  scale = max([float(np.max(np.abs(w))) for w in jax.tree_util.tree_leaves(want) if w.size] + [1.0])
  atol = 4 * EPS32 * (math.log2(max(n_transform, 1)) + 1) * scale
  assert_same(got, want, rtol=0, atol=atol)
  return got


NORMS = [None, "ortho", "forward"]
C64, F32 = np.complex64, np.float32
# (shape, n): n=None keeps the length; smaller truncates, larger zero-pads.
SHAPES_1D = [((1,), None), ((7,), None), ((8,), None), ((3, 5), None), ((2, 16), None),
             ((4, 6), 3), ((4, 6), 11), ((5,), 1), ((0, 6), None), ((3, 64), None)]


def ids1(p):
  return f"{p[0]}-n{p[1]}"


@pytest.mark.parametrize("norm", NORMS, ids=str)
@pytest.mark.parametrize("shape_n", SHAPES_1D, ids=ids1)
@pytest.mark.parametrize("name", ["fft", "ifft"])
def test_fft_ifft(name, shape_n, norm):
  shape, n = shape_n
  f = getattr(jnp.fft, name)
  check_fft(lambda x: f(x, n=n, norm=norm), rand(C64, shape, 1), n or shape[-1])


@pytest.mark.parametrize("norm", NORMS, ids=str)
@pytest.mark.parametrize("shape_n", SHAPES_1D, ids=ids1)
def test_rfft(shape_n, norm):
  shape, n = shape_n
  check_fft(lambda x: jnp.fft.rfft(x, n=n, norm=norm), rand(F32, shape, 2), n or shape[-1])


@pytest.mark.parametrize("norm", NORMS, ids=str)
@pytest.mark.parametrize("shape_n", [((5,), None), ((4,), 7), ((4,), 6), ((3, 9), None),
                                     ((3, 9), 16), ((2, 5), 1), ((1,), None), ((1,), 2),
                                     ((0, 5), None), ((2, 33), 64)], ids=ids1)
def test_irfft(shape_n, norm):
  shape, n = shape_n
  out_n = n or 2 * (shape[-1] - 1)
  check_fft(lambda x: jnp.fft.irfft(x, n=n, norm=norm), rand(C64, shape, 3), out_n)


def test_fft_on_float32_input():
  # jnp.fft.fft of a real array converts it to complex64 first.
  check_fft(jnp.fft.fft, rand(F32, (3, 10), 4), 10)


@pytest.mark.parametrize("axis", [0, 1, -1])
def test_fft_axis(axis):
  check_fft(lambda x: jnp.fft.fft(x, axis=axis), rand(C64, (4, 6, 5), 5), 6)
  check_fft(lambda x: jnp.fft.rfft(x.real, axis=axis), rand(C64, (4, 6, 5), 5), 6)


ND = [((4, 6), None, None), ((3, 5), (4, 4), None), ((2, 3, 5), None, None),
      ((2, 3, 5), (3, 2), (0, 2)), ((6, 4, 3), None, (1, 0)), ((1, 1), None, None),
      ((7, 1), None, None), ((2, 0, 4), None, None), ((2, 4, 6, 5), None, (1, 2, 3))]


def idsn(p):
  return f"{p[0]}-s{p[1]}-axes{p[2]}"


def ntransform(shape, s, axes, ndim2=None):
  if s is not None:
    return math.prod(s)
  if axes is None:
    axes = range(len(shape) - (ndim2 or len(shape)), len(shape))
  return math.prod(shape[a] for a in axes)


@pytest.mark.parametrize("norm", NORMS, ids=str)
@pytest.mark.parametrize("case", ND, ids=idsn)
@pytest.mark.parametrize("name", ["fftn", "ifftn"])
def test_fftn(name, case, norm):
  shape, s, axes = case
  if axes is None and len(shape) > 3 and s is None:
    axes = (-3, -2, -1)  # XLA's fft handles at most 3 trailing dims
  f = getattr(jnp.fft, name)
  check_fft(lambda x: f(x, s=s, axes=axes, norm=norm), rand(C64, shape, 6),
            ntransform(shape, s, axes))


@pytest.mark.parametrize("norm", NORMS, ids=str)
@pytest.mark.parametrize("case", ND, ids=idsn)
def test_rfftn(case, norm):
  shape, s, axes = case
  if axes is None and len(shape) > 3:
    axes = (-3, -2, -1)
  check_fft(lambda x: jnp.fft.rfftn(x, s=s, axes=axes, norm=norm), rand(F32, shape, 7),
            ntransform(shape, s, axes))


@pytest.mark.parametrize("norm", NORMS, ids=str)
@pytest.mark.parametrize("case", [((4, 5), None, None), ((3, 4), (3, 6), None),
                                  ((2, 3, 4), None, None), ((2, 3, 4), (5, 7), (0, 2)),
                                  ((3, 1), None, None), ((3, 2), (3, 1), None),
                                  ((2, 0, 3), None, None)], ids=idsn)
def test_irfftn(case, norm):
  shape, s, axes = case
  out_s = s
  if out_s is None:
    ax = axes or tuple(range(len(shape)))
    out_s = [shape[a] for a in ax[:-1]] + [2 * (shape[ax[-1]] - 1)]
  check_fft(lambda x: jnp.fft.irfftn(x, s=s, axes=axes, norm=norm), rand(C64, shape, 8),
            math.prod(out_s))


@pytest.mark.parametrize("name", ["fft2", "ifft2", "rfft2", "irfft2"])
@pytest.mark.parametrize("shape", [(4, 6), (3, 5, 7), (1, 2)], ids=str)
def test_2d(name, shape):
  f = getattr(jnp.fft, name)
  x = rand(F32 if name == "rfft2" else C64, shape, 9)
  check_fft(f, x, shape[-2] * 2 * shape[-1])


def test_grad_rfft_irfft():
  x = rand(F32, (3, 10), 10)

  def loss(x):
    y = jnp.fft.rfft(x)
    z = jnp.fft.irfft(y * jnp.arange(y.shape[-1], dtype=np.float32), n=x.shape[-1])
    return jnp.sum(jnp.abs(y) ** 2) + jnp.sum(z * x)

  check_fft(jax.grad(loss), x, 10)


def test_grad_fft_complex():
  x = rand(F32, (2, 9), 11)
  check_fft(jax.grad(lambda x: jnp.sum(jnp.abs(jnp.fft.fftn(x.astype(C64), norm="ortho")))),
            x, 18)


def test_inverse_round_trip_values():
  # Self-check of the mlx result (not only agreement with cpu): ifft(fft(x)) == x.
  x = rand(C64, (4, 12), 12)
  got = check_fft(lambda x: jnp.fft.ifft(jnp.fft.fft(x)), x, 12)
  np.testing.assert_allclose(got, x, atol=1e-5)
