"""complex64 throughout: every elementwise op jax emits on complex64, and dot/dot_general, on
edge values (inf/NaN parts, signed zeros, branch cuts) against jax's CPU backend.

test_elementwise.py covers the basic complex unary/binary ops over its cycling edge values;
this file adds the ops it does not (expm1, log1p, rsqrt, logistic, conj, the chlo-decomposed
functions), the branch cuts of log/sqrt/pow on the negative real axis with +-0 imaginary parts,
and complex matmuls.

Results are compared part by part (real, imag), with NaN positions exact: the harness's complex
tolerance is relative to |w|, so a 1-ULP difference in one part would fail whenever the other
part is inf.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax

from tests.ops.edge_values import edges, rand
from tests.ops.harness import check

INF, NAN = np.inf, np.nan


def cplx(re, im):
  out = np.zeros(np.broadcast(np.asarray(re), np.asarray(im)).shape, np.complex64)
  out.real, out.imag = re, im  # not re + 1j*im, which turns inf parts into NaN
  return out


def split(fn):
  def wrapped(*xs):
    def parts(y):
      return (lax.real(y), lax.imag(y)) if jnp.iscomplexobj(y) else y
    return jax.tree_util.tree_map(parts, fn(*xs))
  return wrapped


def check_parts(fn, *args, rtol=None, atol=None):
  return check(split(fn), *args, rtol=rtol, atol=atol)


# Every (re, im) pair of these parts: zeros of both signs, tiny, moderate, big, inf, NaN.
PARTS = [0.0, -0.0, 1.0, -1.0, 0.5, -2.5, 1e-3, -1e-3, 3.7, 30.0, -30.0, 1e20, -1e20, INF, -INF,
         NAN]
GRID = cplx(*np.meshgrid(np.array(PARTS, np.float32), np.array(PARTS, np.float32)))
GRID = GRID.reshape(-1)
# The negative real axis (log/sqrt/pow branch cut) approached from both sides, and the
# positive one.
CUT = cplx(np.array([-1.0, -4.0, -0.5, -1e10, -INF, 2.0, 0.0, -0.0] * 2, np.float32),
           np.array([0.0] * 8 + [-0.0] * 8, np.float32))
FINITE = GRID[np.isfinite(GRID.real) & np.isfinite(GRID.imag)]

UNARY = {
    "exp": lax.exp, "log": lax.log, "sqrt": lax.sqrt, "rsqrt": lax.rsqrt, "sin": lax.sin,
    "cos": lax.cos, "tan": lax.tan, "tanh": lax.tanh, "expm1": lax.expm1, "log1p": lax.log1p,
    "abs": lax.abs, "sign": lax.sign, "real": lax.real, "imag": lax.imag, "neg": lax.neg,
    "conj": jnp.conj, "logistic": lax.logistic, "square": jnp.square,
    "reciprocal": jnp.reciprocal,
}
# Measured where MLX's kernels and XLA's differ by more than tolerances.py's few ULP; the
# looser bound is the op's own, and only on the finite grid (non-finite inputs stay exact).
LOOSE = {
    # |z| ~ 30 and ~1e20 parts: exp/trig amplify the ~1 ULP argument difference of cos/sin(b)
    # for large b (both libraries reduce b mod 2pi differently).
    "exp": 1e-5, "sin": 1e-5, "cos": 1e-5, "tan": 1e-5, "tanh": 1e-5, "expm1": 1e-5,
    "logistic": 1e-5,
    # sqrt/rsqrt/log: cancellation in the small part of the result near the axes.
    "sqrt": 1e-5, "rsqrt": 1e-5, "log": 1e-5, "log1p": 1e-5,
}


@pytest.mark.parametrize("name", list(UNARY))
@pytest.mark.parametrize("inputs", ["grid", "cut", "shapes"])
def test_unary(name, inputs):
  fn = UNARY[name]
  t = LOOSE.get(name)
  kw = dict(rtol=t, atol=t) if t else {}
  if inputs == "grid":
    check_parts(fn, GRID, **kw)
  elif inputs == "cut":
    check_parts(fn, CUT, **kw)
  else:
    for shape in [(), (0,), (3, 5)]:
      check_parts(fn, rand(np.complex64, shape, 1), **kw)


def test_sqrt_on_the_negative_real_axis_has_a_zero_real_part():
  # The principal root of a number on the negative real axis (or of +-0) is +0 + i*y, as XLA
  # gives it. MLX's CUDA sqrt goes through polar form, where cos(pi/2) rounds below zero:
  # sqrt(-4 + 0j) had a real part of -8.7e-8 there, sqrt(-0 + 0j) one of -0.
  re = np.array([-1.0, -4.0, -0.5, -1e10, -3e-38, 0.0, -0.0] * 2, np.float32)
  im = np.array([0.0] * 7 + [-0.0] * 7, np.float32)
  check(lambda z: lax.real(lax.sqrt(z)), cplx(re, im), exact=True)


def test_rsqrt_of_signed_zeros_is_plus_infinity():
  # 1 / sqrt(-0 + 0j): CUDA's -0 real part in sqrt (above) made this -inf; XLA gives +inf.
  z = cplx(np.array([0.0, -0.0, 0.0, -0.0], np.float32),
           np.array([0.0, 0.0, -0.0, -0.0], np.float32))
  check(lambda z: lax.real(lax.rsqrt(z)), z, exact=True)


@pytest.mark.parametrize("name", ["exp", "log", "sqrt", "sin", "cos", "tanh", "expm1", "log1p",
                                  "rsqrt", "logistic"])
def test_unary_small_arguments(name):
  # Near zero, expm1/log1p must not cancel (1e-6 in, ~1e-6 out, full relative precision).
  x = cplx(np.array([1e-6, -1e-6, 1e-7, 0.0, 1e-6, -3e-7], np.float32),
           np.array([0.0, 1e-6, -1e-7, 1e-6, 1e-6, 2e-7], np.float32))
  check_parts(UNARY[name], x, rtol=1e-5, atol=1e-12)


BINARY = {"add": lax.add, "sub": lax.sub, "mul": lax.mul, "div": lax.div, "pow": lax.pow,
          "eq": lax.eq, "ne": lax.ne}


# Pairs of moderate values: with 1e20 parts, a product's part is a difference of ~1e37 terms
# and XLA's CPU fuses it into an fma, so its cancellation error (~1e29 absolute) differs from
# ours arbitrarily in relative terms; those parts are checked in test_binary_nonfinite's grid.
MODERATE = FINITE[(np.abs(FINITE.real) < 1e10) & (np.abs(FINITE.imag) < 1e10)]


@pytest.mark.parametrize("name", list(BINARY))
def test_binary_pairs(name):
  a = np.repeat(MODERATE, 4)[:400]
  b = np.tile(np.roll(MODERATE, 3), 4)[:400]
  # pow: |x|^c amplifies the ~2 ULP error of |x| and arg(x) (see test_elementwise.py).
  kw = dict(rtol=3e-4, atol=1e-6) if name == "pow" else {}
  check_parts(BINARY[name], a, b, **kw)


def test_binary_nonfinite():
  e = edges(np.complex64)
  a, b = np.repeat(e, len(e)), np.tile(e, len(e))
  for name in ["add", "sub", "mul", "div", "eq", "ne"]:
    check_parts(BINARY[name], a, b)


def test_pow_branch_cut():
  # x^0.5 and x^(1/3) on the negative real axis from both sides: arg(x) = +-pi.
  y = np.full(CUT.shape, 0.5 + 0j, np.complex64)
  check_parts(lax.pow, CUT, y, rtol=1e-5, atol=1e-6)
  check_parts(lambda x: x ** np.complex64(1 / 3), CUT, rtol=1e-5, atol=1e-6)


def test_complex_from_parts_and_back():
  re = np.array(PARTS, np.float32)
  im = np.roll(re, 5)
  check(lambda a, b: (lax.complex(a, b), lax.real(lax.complex(a, b))), re, im, exact=True)


def test_conj_signed_zero():
  check(lambda z: lax.imag(jnp.conj(z)), CUT, exact=True)


@pytest.mark.parametrize("shapes", [((3, 4), (4, 5)), ((7,), (7,)), ((2, 3, 4), (2, 4, 6)),
                                    ((0, 3), (3, 2)), ((1, 33), (33, 1))], ids=str)
def test_matmul(shapes):
  a, b = rand(np.complex64, shapes[0], 1), rand(np.complex64, shapes[1], 2)
  check_parts(lambda a, b: jnp.matmul(a, b), a, b, rtol=2e-5, atol=2e-5)


def test_dot_general_batched_and_mixed():
  a, b = rand(np.complex64, (2, 3, 5), 3), rand(np.complex64, (2, 5, 4), 4)
  dn = (((2,), (1,)), ((0,), (0,)))
  check_parts(lambda a, b: lax.dot_general(a, b, dn), a, b, rtol=2e-5, atol=2e-5)
  r = rand(np.float32, (5, 4), 5)
  # A real operand promoted to complex by jnp (convert + dot_general).
  check_parts(lambda a, r: jnp.einsum("bik,kj->bij", a, r), a, r, rtol=2e-5, atol=2e-5)


def test_dot_nonfinite():
  # One inf/NaN part poisons its row/column as in XLA (no fast path that skips it).
  a = cplx(np.array([[1, INF], [2, 3]], np.float32), np.array([[0, 0], [NAN, 1]], np.float32))
  b = rand(np.complex64, (2, 3), 6)
  check_parts(lambda a, b: a @ b, a, b, rtol=2e-5, atol=2e-5)
