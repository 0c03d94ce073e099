"""jax.random on the mlx platform is bit-exact with jax's CPU backend.

Three key implementations take two paths through our lowering:
  threefry2x32 (jax's default): a private @threefry2x32 func of shifts/adds/xors (inlined),
  rbg / unsafe_rbg: stablehlo.rng_bit_generator (algorithm DEFAULT, which XLA:CPU runs as
  Philox), with threefry for split/fold_in under rbg.
The raw key data goes in as a uint32 array and is wrapped inside the jitted function, so both
backends see the same program. Raw bits, keys, integer samplers and float samplers are compared
bit for bit, except where a test states a ULP bound and why (see check_exact).
rng_bit_generator is also checked directly for each algorithm, output width, odd shapes and both
state sizes.

How float samplers are made exact (measured with tools/rng_ulp.py over 1e6 draws each):
  - XLA:CPU contracts every f32 product whose only use is an add/subtract into an FMA (LLVM
    fp-contract=fast); passes/contract_fma.cc does the same and lower/fma.cc computes the FMA
    exactly. That alone makes uniform with bounds exact (it was 34% off by 1 ULP or more).
  - XLA:CPU inlines its own polynomial log and log1p (not libm); inside jax.random's samplers
    our f32 log/log1p replay them FMA for FMA (lower/xla_cpu_log.h, scoped by rng.cc), which
    makes normal, exponential, gumbel, laplace, logistic exact.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest
from jax import lax

from tests.ops.harness import assert_same, run_on, xla_cpu_contracts_f16
from tests.stablehlo_text import run_stablehlo

IMPLS = ["threefry2x32", "rbg", "unsafe_rbg"]
SHAPES = [(), (1,), (7,), (4, 6), (3, 5, 2)]


def key_data(impl, seed=0):
  """The raw uint32 key data of jax.random.key(seed, impl=impl), as numpy."""
  with jax.default_device(jax.devices("cpu")[0]):
    return np.asarray(jax.random.key_data(jax.random.key(seed, impl=impl)))


def wrap(k, impl):
  return jax.random.wrap_key_data(k, impl=impl)


def ulp_distance(got, want):
  """|got - want| in units in the last place (distance of the ordered encodings); NaN == NaN."""
  got, want = np.asarray(got), np.asarray(want)
  ints = {2: np.int16, 4: np.int32, 8: np.int64}[want.dtype.itemsize]
  def ordered(x):
    i = x.view(ints).astype(np.int64)
    return np.where(i < 0, -(i & np.iinfo(ints).max), i)
  d = np.abs(ordered(got) - ordered(want))
  return np.where(np.isnan(got.astype(np.float64)) & np.isnan(want.astype(np.float64)), 0, d)


def check_exact(fn, *args, max_ulp=0):
  """Runs fn on both backends; integers and bools bit for bit, floats within max_ulp ULP."""
  want = run_on(jax.devices("cpu")[0], fn, *args)
  got = run_on(jax.devices("mlx")[0], fn, *args)
  assert jax.tree_util.tree_structure(got) == jax.tree_util.tree_structure(want)
  for i, (g, w) in enumerate(zip(jax.tree_util.tree_leaves(got), jax.tree_util.tree_leaves(want))):
    assert g.dtype == w.dtype and g.shape == w.shape, (i, g.dtype, w.dtype, g.shape, w.shape)
    if np.dtype(w.dtype).kind == "f" or w.dtype == ml_dtypes.bfloat16:
      d = ulp_distance(g, w)
      assert d.size == 0 or d.max() <= max_ulp, f"output {i}: {d.max()} ULP > {max_ulp}"
    else:
      assert_same([g], [w], exact=True, err_msg=f"output {i}")


@pytest.fixture
def x64():
  # uint64 draws and int64 randint keep their width (only in the tests that ask for it: with x64
  # on, samplers given Python floats compute in f64, which MLX lacks).
  with jax.enable_x64(True):
    yield


# Each test jits one function drawing for several shapes, to keep compiles (the slow part on a
# small machine) few.

@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("dtype", [np.uint8, np.uint16, np.uint32, np.uint64])
def test_bits(impl, dtype, x64):
  shapes = SHAPES + [(0,), (2, 0)]
  check_exact(lambda k: [jax.random.bits(wrap(k, impl), s, dtype) for s in shapes],
              key_data(impl, 3))


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("dtype", [np.float32, np.float16, ml_dtypes.bfloat16])
def test_uniform(impl, dtype):
  def draws(k):
    k = wrap(k, impl)
    return ([jax.random.uniform(k, s, dtype) for s in SHAPES] +
            [jax.random.uniform(k, (5, 3), dtype, -2.5, 7.0)])
  check_exact(draws, key_data(impl, 1))


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("dtype", [np.float32, np.float16, ml_dtypes.bfloat16])
def test_normal(impl, dtype):
  check_exact(lambda k: [jax.random.normal(wrap(k, impl), s, dtype) for s in SHAPES],
              key_data(impl, 2))


@pytest.mark.parametrize("impl", IMPLS)
def test_bernoulli(impl):
  p = np.linspace(0, 1, 7, dtype=np.float32)
  check_exact(lambda k, p: [jax.random.bernoulli(wrap(k, impl), 0.3, s) for s in SHAPES] +
              [jax.random.bernoulli(wrap(k, impl), p, (5, 7))], key_data(impl, 4), p)


@pytest.mark.parametrize("impl", IMPLS)
def test_categorical(impl):
  logits = np.log(np.array([[0.1, 0.2, 0.3, 0.4], [0.7, 0.1, 0.1, 0.1]], np.float32))
  check_exact(lambda k, l: (jax.random.categorical(wrap(k, impl), l),
                            jax.random.categorical(wrap(k, impl), l, shape=(9, 2)),
                            jax.random.categorical(wrap(k, impl), l, axis=0)),
              key_data(impl, 5), logits)


@pytest.mark.parametrize("impl", IMPLS)
def test_permutation(impl):
  x = np.arange(33 * 3, dtype=np.float32).reshape(33, 3)
  check_exact(lambda k, x: [jax.random.permutation(wrap(k, impl), n) for n in (1, 2, 10, 33)] +
              [jax.random.permutation(wrap(k, impl), x, axis=0),
               jax.random.permutation(wrap(k, impl), x, independent=True)],
              key_data(impl, 6), x)


@pytest.mark.parametrize("impl", IMPLS)
def test_split(impl):
  check_exact(lambda k: [jax.random.key_data(jax.random.split(wrap(k, impl), n))
                         for n in (2, 3, 8)], key_data(impl, 7))


@pytest.mark.parametrize("impl", IMPLS)
def test_fold_in(impl):
  def fold(k, d):
    k = wrap(k, impl)
    a, b = jax.random.split(k)  # a chain: split, fold in, then draw
    return (jax.random.key_data(jax.random.fold_in(k, 42)),
            jax.random.key_data(jax.random.fold_in(k, d)),
            jax.random.normal(jax.random.fold_in(a, 3), (5,)), jax.random.uniform(b, (2, 3)))
  check_exact(fold, key_data(impl, 8), np.uint32(0xDEADBEEF))


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("dtype", [np.int32, np.int8, np.uint8, np.int64, np.uint32])
def test_randint(impl, dtype, x64):
  info = np.iinfo(dtype)
  check_exact(lambda k: [jax.random.randint(wrap(k, impl), s, lo, hi, dtype)
                         for s in [(), (6,), (3, 5)]
                         for lo, hi in [(0, 100), (info.min, info.max)]], key_data(impl, 9))


@pytest.mark.parametrize("impl", IMPLS)
def test_exponential_gumbel(impl):
  check_exact(lambda k: (jax.random.exponential(wrap(k, impl), (9,)),
                         jax.random.gumbel(wrap(k, impl), (3, 3))), key_data(impl, 10))


# truncated_normal is the one float sampler that is not bit-exact. It draws
# erf_inv(uniform(erf(lo/sqrt2), erf(hi/sqrt2))) * sqrt2. XLA:CPU computes erf with its own
# elemental kernel (an HLO erf op: XLA's rational approximation, constant-folded by its HLO
# evaluator when the bounds are constants), while jax hands us erf as a stablehlo.composite whose
# decomposition is chlo's polynomial; the endpoints differ in the last bit, which moves every
# sample (the rest of the sampler, erf_inv included, is exact). Measured with tools/rng_ulp.py
# over 1e6 draws (bounds -1, 2, constant or traced): 2% bit-equal, 88% within 8 ULP, largest
# absolute difference 7.2e-7 (the largest ULP counts are samples next to 0, where an ULP is tiny).
TRUNC_NORMAL_ABS = 1e-6


@pytest.mark.parametrize("impl", IMPLS)
def test_truncated_normal(impl):  # erf arrives as a stablehlo.composite
  fn = lambda k: jax.random.truncated_normal(wrap(k, impl), -1.0, 2.0, (4, 3))
  got = run_on(jax.devices("mlx")[0], fn, key_data(impl, 11))
  want = run_on(jax.devices("cpu")[0], fn, key_data(impl, 11))
  np.testing.assert_allclose(got, want, rtol=0, atol=TRUNC_NORMAL_ABS)


# 1e5 draws per sampler, compared bit for bit (tools/rng_ulp.py runs 1e6 of each).
MANY = {
    "uniform": lambda k, n: jax.random.uniform(k, (n,), minval=-2.5, maxval=7.0),
    "normal": lambda k, n: jax.random.normal(k, (n,)),
    "exponential": lambda k, n: jax.random.exponential(k, (n,)),
    "gumbel": lambda k, n: jax.random.gumbel(k, (n,)),
    "laplace": lambda k, n: jax.random.laplace(k, (n,)),
    "logistic": lambda k, n: jax.random.logistic(k, (n,)),
    "cauchy": lambda k, n: jax.random.cauchy(k, (n,)),
    "gamma": lambda k, n: jax.random.gamma(k, 2.5, (n // 10,)),
    "normal_f16": lambda k, n: jax.random.normal(k, (n,), jnp.float16),
}


@pytest.mark.parametrize("sampler", MANY, ids=list(MANY))
def test_many_draws_bit_exact(sampler):
  check_exact(lambda k: MANY[sampler](wrap(k, "threefry2x32"), 100_000),
              key_data("threefry2x32", 13))


@pytest.mark.parametrize("impl", IMPLS)
def test_choice(impl):  # without replacement: a sort of random keys
  check_exact(lambda k: (jax.random.choice(wrap(k, impl), 10, (4,), replace=False),
                         jax.random.choice(wrap(k, impl), 10, (6,))), key_data(impl, 12))


def test_vmapped_keys():
  keys = np.stack([key_data("threefry2x32", s) for s in range(5)])
  check_exact(jax.vmap(lambda k: jax.random.normal(wrap(k, "threefry2x32"), (3,))), keys)


# ---- stablehlo.rng_bit_generator directly --------------------------------------------------

ALGORITHMS = [lax.RandomAlgorithm.RNG_DEFAULT, lax.RandomAlgorithm.RNG_THREE_FRY,
              lax.RandomAlgorithm.RNG_PHILOX]
STATES = [
    np.array([0, 0], np.uint64),
    np.array([0x0123456789ABCDEF, 0xFEDCBA9876543210], np.uint64),
    np.array([7, 2**64 - 3], np.uint64),  # the 64-bit counter wraps
]


@pytest.mark.parametrize("algorithm", ALGORITHMS, ids=lambda a: a.name)
@pytest.mark.parametrize("dtype", [np.uint8, np.uint16, np.uint32, np.uint64])
def test_rng_bit_generator(algorithm, dtype, x64):
  # jax passes the u64[2] state as u32[4]; both the new states and the draws must match.
  shapes = [(), (1,), (5,), (4,), (3, 5), (2, 3), (3, 4, 5), (7, 3), (1, 1, 3), (0,), (2, 0, 3)]
  check_exact(lambda *ks: [lax.rng_bit_generator(k, s, dtype, algorithm)
                           for k in ks for s in shapes],
              *[st.view(np.uint32) for st in STATES])


def test_rng_bit_generator_sequence():
  # Threading the state through several draws, as a training loop's data pipeline does.
  def draws(k):
    outs = []
    for shape in [(3,), (4, 2), (5,)]:
      k, x = lax.rng_bit_generator(k, shape, np.uint32)
      outs.append(x)
    return k, outs
  check_exact(draws, STATES[1].view(np.uint32))


# ---- programs jax.lax cannot express: Philox with a u64[3] state ------------------------------

@pytest.mark.parametrize("algorithm", ["DEFAULT", "PHILOX"])
@pytest.mark.parametrize("out", ["5xui32", "3x4xui64", "7xui16", "ui8", "2x3xui32"])
def test_philox_three_word_state(algorithm, out, x64):
  # u64[3]: key, then a 128-bit counter (low, high); a low word of 2^64-1 carries into high.
  text = f"""module @m {{
    func.func public @main(%s: tensor<3xui64>) -> (tensor<3xui64>, tensor<{out}>) {{
      %0, %1 = stablehlo.rng_bit_generator %s, algorithm = {algorithm}
          : (tensor<3xui64>) -> (tensor<3xui64>, tensor<{out}>)
      return %0, %1 : tensor<3xui64>, tensor<{out}>
    }}
  }}"""
  for state in (np.array([1, 2, 3], np.uint64), np.array([5, 2**64 - 1, 9], np.uint64)):
    want = run_stablehlo(text, "cpu", state)
    got = run_stablehlo(text, "mlx", state)
    for g, w in zip(got, want):
      np.testing.assert_array_equal(g, w)


# jaxlib 0.11's XLA:CPU contracts an f16 multiply-add into one FMA rounded once to f16
# (passes/contract_fma.h); jaxlib 0.10's rounds the product and the sum, except on an x86 host
# with AVX512-FP16, where it contracts too. The plugin follows JAXMLX_XLA_CPU_VERSION (set from the
# installed jaxlib). Under the other version than the installed one, jax's CPU backend is no
# reference, so the draws are checked against numpy models of both roundings, built from the
# same raw bits.
@pytest.mark.parametrize("version", ["0.10.2", "0.11.2"])
@pytest.mark.parametrize("impl", IMPLS)
def test_f16_uniform_rounding_follows_the_reference_jaxlib(version, impl, monkeypatch):
  # The plugin sets the variable from jaxlib when it starts: start it first, so that the
  # monkeypatch restores that value afterwards (not an unset variable).
  jax.devices("mlx")
  monkeypatch.setenv("JAXMLX_XLA_CPU_VERSION", version)
  lo, hi, shape = -2.5, 7.0, (4000,)
  k = key_data(impl, 1)
  got = run_on(jax.devices("mlx")[0],
               lambda k: jax.random.uniform(wrap(k, impl), shape, jnp.float16, lo, hi), k)
  bits = run_on(jax.devices("cpu")[0],
                lambda k: jax.random.bits(wrap(k, impl), shape, jnp.uint16), k)
  got = got.view(np.uint16)
  fl = ((bits >> 6) | np.float16(1).view(np.uint16)).view(np.float16) - np.float16(1)
  scale = np.float16(hi) - np.float16(lo)
  each_op = np.maximum(np.float16(lo), fl * scale + np.float16(lo))
  once = np.maximum(np.float32(lo), fl.astype(np.float32) * np.float32(scale) +
                    np.float32(lo)).astype(np.float16)
  assert (each_op != once).mean() > 0.2  # the two models differ: the test can fail
  want = once if xla_cpu_contracts_f16(version) else each_op
  np.testing.assert_array_equal(got, want.view(np.uint16))
