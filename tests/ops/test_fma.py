"""f32 multiply-add chains are fused as XLA:CPU fuses them, and the fused result is exact.

XLA:CPU compiles with LLVM's fp-contract=fast: an f32 multiply whose only use is an add or
subtract becomes one FMA (a single rounding). passes/contract_fma.cc rewrites the same patterns
into jaxmlx.fma custom calls and lower/fma.cc computes an exactly rounded FMA from f32 ops
(Dekker product, TwoSum, Boldo-Melquiond round-to-odd). Checked here:
  - exactness against a reference independent of both backends: the product in float64 (exact
    for f32 operands), the sum rounded to odd in float64, then rounded to f32 (round-to-odd
    makes the double rounding innocent), itself checked against exact rational arithmetic;
  - bit-exactness against jax's CPU backend for each contracted pattern, and for the patterns
    XLA leaves alone (a product with two uses, f16/bf16, which XLA computes op by op).
"""

from __future__ import annotations

from fractions import Fraction

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest

from tests.ops.harness import run_on, xla_cpu_contracts_f16


@pytest.fixture(autouse=True)
def contract_everywhere(monkeypatch):
  # By default only jax.random's samplers are contracted (the exact FMA is ~45 MLX ops where
  # MLX does not fuse them); these tests check the contraction itself, on plain functions.
  # The plugin reads the variable at each compile.
  monkeypatch.setenv("JAX_MLX_CONTRACT_FMA", "all")


def fma_reference(a, b, c):
  """round_f32(a*b + c) with one rounding, via float64 round-to-odd."""
  a, b, c = (np.asarray(x, np.float32).astype(np.float64) for x in (a, b, c))
  with np.errstate(all="ignore"):
    p = a * b  # exact: 24 + 24 significant bits fit in 53
    s = p + c
    bb = s - p
    err = (p - (s - bb)) + (c - bb)
    even = (s.view(np.int64) & 1) == 0
    nudge = np.isfinite(s) & (err != 0) & even
    s = np.where(nudge, np.nextafter(s, np.where(err > 0, np.inf, -np.inf)), s)
    return s.astype(np.float32)


def round_to_f32(x: Fraction) -> np.float32:
  """Exact rational -> nearest f32 (ties to even), with subnormals and overflow."""
  if x == 0:
    return np.float32(0.0)
  sign = -1 if x < 0 else 1
  m = abs(x)
  e = m.numerator.bit_length() - m.denominator.bit_length()
  if Fraction(2) ** e > m:
    e -= 1
  ulp = Fraction(2) ** (max(e, -126) - 23)
  n = round(m / ulp)  # Fraction.__round__ rounds half to even
  v = n * ulp
  if v >= Fraction(2) ** 128:
    return np.float32(sign * np.inf)
  return np.float32(sign * float(v))


def operands(n=20000, seed=0, with_edges=True):
  rng = np.random.default_rng(seed)
  f = np.float32
  a = rng.standard_normal(n).astype(f)
  b = rng.standard_normal(n).astype(f)
  c = rng.standard_normal(n).astype(f)
  # Wide exponents, and addends that cancel the product's leading bits (the hard cases).
  wide = (rng.standard_normal(n) * 2.0 ** rng.integers(-60, 60, n)).astype(f)
  cancel = (-(a.astype(np.float64) * b) * (1 + rng.integers(-8, 8, n) * 2.0 ** -24)).astype(f)
  # Ties: a*b has 2 significant bits past c's ulp, exactly half of it.
  tie_a = (1 + rng.integers(0, 2 ** 11, n) * 2.0 ** -11).astype(f)
  tie_b = np.full(n, 1 + 2.0 ** -12, f)
  tie_c = (rng.integers(1, 2 ** 10, n) * 2.0 ** -20).astype(f)
  edges = np.array([0.0, -0.0, 1.0, -1.0, np.inf, -np.inf, np.nan, 3.4028235e38, -3.4028235e38,
                    1.1754944e-38, 1e-45, 2.0 ** -75, 2.0 ** 64, 0.1, 1 / 3], f)
  if not with_edges:  # XLA:CPU flushes subnormals to zero: keep them out of CPU comparisons
    edges = edges[(edges == 0) | ~(np.abs(edges) < 1.1754944e-38)]
  ea, eb, ec = (x.ravel() for x in np.meshgrid(edges, edges, edges))
  return (np.concatenate([a, wide, a, tie_a, ea]), np.concatenate([b, b, b, tie_b, eb]),
          np.concatenate([c, c, cancel, tie_c, ec]))


def same_bits(got, want):
  got, want = np.asarray(got, np.float32), np.asarray(want, np.float32)
  nan = np.isnan(got) & np.isnan(want)
  return nan | (got.view(np.uint32) == want.view(np.uint32))


def check_bits(fn, *args):
  """fn on mlx and on jax's CPU backend: the same f32 bits (any NaN matches any NaN: x86 and
  MLX disagree on the sign of a NaN made from inf - inf)."""
  got = run_on(jax.devices("mlx")[0], fn, *args)
  want = run_on(jax.devices("cpu")[0], fn, *args)
  ok = same_bits(got, want)
  assert ok.all(), [tuple(x[~ok][:5]) for x in (*args, got, want)]


def test_reference_is_exact():
  a, b, c = operands(400, seed=1)
  def exact(x, y, z):
    if x * y == 0 and z == 0:  # IEEE: -0 only for (-0) + (-0); Fractions have no -0
      return np.float32(-0.0 if np.signbit(x) != np.signbit(y) and np.signbit(z) else 0.0)
    return round_to_f32(Fraction(float(x)) * Fraction(float(y)) + Fraction(float(z)))
  want = [exact(x, y, z)
          for x, y, z in zip(a, b, c) if np.isfinite(x) and np.isfinite(y) and np.isfinite(z)]
  fin = np.isfinite(a) & np.isfinite(b) & np.isfinite(c)
  got = fma_reference(a, b, c)[fin]
  ok = same_bits(got, np.array(want, np.float32))
  # f32 products of finite operands can overflow f32 but never f64, so both agree everywhere.
  assert ok.all(), list(zip(a[fin][~ok], b[fin][~ok], c[fin][~ok]))


def emulation_in_range(a, b):
  """Where lower/fma.h promises exactness: a*b's rounding error is not lost to underflow, and
  a*b does not overflow f32 on its own (unless an operand is infinite or NaN)."""
  with np.errstate(all="ignore"):
    p = np.abs(a.astype(np.float64) * b)
  return ((p >= 2.0 ** -102) | (p == 0) | ~np.isfinite(p)) & ~(np.isfinite(p) & (p >= 2.0 ** 128))


def test_fma_is_exact_on_mlx():
  a, b, c = operands()
  got = run_on(jax.devices("mlx")[0], lambda a, b, c: a * b + c, a, b, c)
  ok = same_bits(got, fma_reference(a, b, c)) | ~emulation_in_range(a, b)
  assert ok.all(), list(zip(a[~ok], b[~ok], c[~ok], got[~ok]))[:10]


PATTERNS = {
    "a*b+c": lambda a, b, c: a * b + c,
    "c+a*b": lambda a, b, c: c + a * b,
    "a*b-c": lambda a, b, c: a * b - c,
    "c-a*b": lambda a, b, c: c - a * b,
    "-(a*b)+c": lambda a, b, c: -(a * b) + c,
    "a*b+c*a": lambda a, b, c: a * b + c * a,  # both products: XLA fuses the left one
    "a*b-c*a": lambda a, b, c: a * b - c * a,
    "horner": lambda a, b, c: ((a * c + b) * c + a) * c + b,
    "two uses": lambda a, b, c: (lambda m: (m + c) * (m - b))(a * b),  # not contracted
    "mul of sum": lambda a, b, c: (a + b) * c,
}


@pytest.mark.parametrize("pattern", PATTERNS, ids=list(PATTERNS))
def test_patterns_match_cpu(pattern):
  a, b, c = operands(5000, with_edges=False)
  with np.errstate(all="ignore"):
    want = PATTERNS[pattern](*(x.astype(np.float64) for x in (a, b, c)))
  keep = (emulation_in_range(a, b) & emulation_in_range(a, c) & emulation_in_range(c, c) &
          ~((want != 0) & (np.abs(want) < 2.0 ** -100)))  # no subnormal intermediates
  check_bits(PATTERNS[pattern], a[keep], b[keep], c[keep])


@pytest.mark.parametrize("shape", [(), (0,), (7,), (3, 1, 5)])
def test_shapes(shape):
  rng = np.random.default_rng(3)
  a, b, c = (rng.standard_normal(shape).astype(np.float32) for _ in range(3))
  check_bits(lambda a, b, c: a * b + c, a, b, c)


def test_broadcast_operands():
  rng = np.random.default_rng(4)
  a = rng.standard_normal((4, 5)).astype(np.float32)
  r = rng.standard_normal(5).astype(np.float32)
  check_bits(lambda a: a * np.float32(0.1) + np.float32(1 / 3), a)
  check_bits(lambda a, r: a * r - r[::-1], a, r)


@pytest.mark.parametrize("version", ["0.10.2", "0.11.2"])
@pytest.mark.parametrize("dtype", [np.float16, ml_dtypes.bfloat16], ids=["f16", "bf16"])
def test_half_floats_contracted_as_the_reference_jaxlib(dtype, version, monkeypatch):
  # XLA:CPU of jaxlib 0.10 rounds f16/bf16 products to the type before adding: nothing is
  # contracted, the result is the separately rounded product plus c. jaxlib >= 0.11 contracts an
  # f16 multiply-add into an f32 FMA rounded once to f16 (measured on jax 0.11.2, where this test
  # expected 0.10's rounding and failed on 34 % of the elements; 0.10 does too on an x86 host
  # with AVX512-FP16, where it computes f16 natively); bf16 is still rounded twice.
  # (CPU itself differs from these models only where it flushes subnormals.)
  monkeypatch.setenv("JAXMLX_XLA_CPU_VERSION", version)
  a, b, c = (x.astype(dtype) for x in operands(5000, seed=5, with_edges=False))
  keep = np.isfinite(a.astype(np.float32) * b.astype(np.float32) + c.astype(np.float32))
  a, b, c = a[keep], b[keep], c[keep]
  got = run_on(jax.devices("mlx")[0], lambda a, b, c: a * b + c, a, b, c)
  f32 = lambda x: x.astype(np.float32)
  separate = (f32((f32(a) * f32(b)).astype(dtype)) + f32(c)).astype(dtype)
  fused = (f32(a) * f32(b) + f32(c)).astype(dtype)  # the f16 product is exact in f32
  want = fused if (dtype == np.float16 and xla_cpu_contracts_f16(version)) else separate
  np.testing.assert_array_equal(got.view(np.uint16), want.view(np.uint16))
  assert (fused != separate).any()  # the two models differ on these inputs


def test_inside_loops_and_branches():
  a, b, c = (x[:64] for x in operands(64, seed=6, with_edges=False))

  def f(a, b, c):
    body = lambda i, x: x * b + c
    y = jax.lax.fori_loop(0, 5, body, a)
    return jax.lax.cond(y[0] > 0, lambda: y * a - c, lambda: c - y * a)
  check_bits(f, a, b, c)


def test_default_contracts_only_random_samplers(monkeypatch):
  # Unset: plain code keeps separately rounded multiply and add (MLX's own, fast), while
  # jax.random's samplers are still bit-exact with the CPU backend.
  monkeypatch.delenv("JAX_MLX_CONTRACT_FMA")
  a, b, c = operands(5000, with_edges=False)
  with np.errstate(all="ignore"):
    separate = (a * b) + c  # numpy f32: two roundings
  keep = np.isfinite(separate) & (np.abs(separate) >= 2.0 ** -100)  # no NaN signs, subnormals
  a, b, c, separate = a[keep], b[keep], c[keep], separate[keep]
  got = run_on(jax.devices("mlx")[0], lambda a, b, c: a * b + c, a, b, c)
  np.testing.assert_array_equal(got.view(np.uint32), separate.view(np.uint32))
  key = jax.random.key(7)
  sample = lambda k: jax.random.uniform(k, (4096,), minval=-2.5, maxval=7.0)
  got = run_on(jax.devices("mlx")[0], sample, key)
  want = run_on(jax.devices("cpu")[0], sample, key)
  np.testing.assert_array_equal(got.view(np.uint32), want.view(np.uint32))
