"""Differential tests of stablehlo.sort and ApproxTopK (src/lower/sort.cc) against jax's CPU.

jnp.sort / argsort (stable and not, descending) on every dtype with edge values (NaN, ±inf,
-0.0, extremes: ties everywhere), along each axis of 3-D arrays, on empty and size-1 dims;
lax.sort with several operands and num_keys; lexsort, unique, median, percentile; lax.top_k,
approx_max_k / approx_min_k; comparators jax never emits (the sorting-network fallback, through
a primitive that lowers to stablehlo.sort with a hand-written comparator); and the cumulative
reductions, which jax lowers to reduce_window on this platform.

Values and indices are compared bit for bit, except where noted: sorts with is_stable=False
may order ties differently (XLA's CPU uses an unstable std::sort there), so their indices are
checked to be a permutation that orders the values exactly like CPU's.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax
from jax._src import core
from jax._src.interpreters import mlir
from jax._src.lib.mlir import ir
from jax._src.lib.mlir.dialects import hlo

from tests.ops.edge_values import rand, values
from tests.ops.harness import check, run_on

INTS = [np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32, np.uint64]
FLOATS = [np.float16, jnp.bfloat16, np.float32]
ALL = [np.bool_] + INTS + FLOATS + [np.complex64]
REAL = [np.bool_] + INTS + FLOATS


def ids(dts):
  return [np.dtype(d).name for d in dts]


def edge(dt, shape, offset=0):
  """Edge values (NaN, ±inf, ±0, extremes) in a shuffled order, with repeats (ties)."""
  x = values(dt, shape, offset).ravel()
  rng = np.random.default_rng(int(np.prod(shape)) + offset)
  return x[rng.permutation(x.size)].reshape(shape)


# ---- jnp.sort / jnp.argsort -------------------------------------------------------------------


@pytest.mark.parametrize("shape", [(0,), (1,), (7,), (61,)], ids=str)
@pytest.mark.parametrize("dt", ALL, ids=ids(ALL))
def test_sort_1d(dt, shape):
  check(jnp.sort, edge(dt, shape), exact=True)


@pytest.mark.parametrize("shape", [(0,), (1,), (7,), (61,)], ids=str)
@pytest.mark.parametrize("dt", ALL, ids=ids(ALL))
def test_argsort_1d(dt, shape):
  check(jnp.argsort, edge(dt, shape))


@pytest.mark.parametrize("axis", [0, 1, 2, -1])
@pytest.mark.parametrize("dt", [np.bool_, np.int8, np.uint16, np.int32, np.int64, np.uint64,
                                np.float16, jnp.bfloat16, np.float32, np.complex64],
                         ids=ids([np.bool_, np.int8, np.uint16, np.int32, np.int64, np.uint64,
                                  np.float16, jnp.bfloat16, np.float32, np.complex64]))
def test_sort_3d_axes(dt, axis):
  x = edge(dt, (4, 5, 6), 3)
  check(lambda a: (jnp.sort(a, axis=axis), jnp.argsort(a, axis=axis)), x, exact=True)


@pytest.mark.parametrize("shape,axis", [((3, 0, 2), 1), ((3, 0, 2), 2), ((3, 0, 2), 0),
                                        ((4, 1), 1), ((1, 4), 0), ((1, 1, 1), 2), ((2, 1, 5), 1)],
                         ids=str)
def test_sort_empty_and_unit_dims(shape, axis):
  x = edge(np.float32, shape)
  check(lambda a: (jnp.sort(a, axis=axis), jnp.argsort(a, axis=axis)), x, exact=True)


@pytest.mark.parametrize("dt", [np.int8, np.int64, np.uint32, np.uint64, np.float16,
                                jnp.bfloat16, np.float32],
                         ids=ids([np.int8, np.int64, np.uint32, np.uint64, np.float16,
                                  jnp.bfloat16, np.float32]))
@pytest.mark.parametrize("descending", [False, True], ids=["asc", "desc"])
def test_argsort_stable(dt, descending):
  x = edge(dt, (3, 40), 5)
  check(lambda a: (jnp.argsort(a, axis=-1, stable=True, descending=descending),
                   jnp.sort(a, axis=-1, descending=descending)), x, exact=True)


def canonical(x):
  """x with the distinctions a sort comparator ignores removed (-0.0 == 0.0, one NaN): the
  order of such ties is unspecified for unstable sorts."""
  x = np.asarray(x)
  if x.dtype.kind in "fV" or x.dtype == jnp.bfloat16:
    x = x.astype(np.float32)
    return np.where(np.isnan(x), np.float32(np.nan), np.where(x == 0, np.float32(0), x))
  return x


def assert_same_canonical(got, want):
  for g, w in zip(jax.tree_util.tree_leaves(got), jax.tree_util.tree_leaves(want)):
    assert g.dtype == w.dtype and g.shape == w.shape
    np.testing.assert_array_equal(canonical(g), canonical(w))


def _check_unstable(fn, x, axis):
  """fn returns indices of an unstable sort: a permutation ordering x like CPU's, up to ties."""
  cpu, mlx = jax.devices("cpu")[0], jax.devices("mlx")[0]
  want = run_on(cpu, fn, x)
  got = run_on(mlx, fn, x)
  assert got.dtype == want.dtype and got.shape == want.shape
  np.testing.assert_array_equal(np.sort(got, axis=axis), np.sort(want, axis=axis))
  if x.size:
    g, w = np.take_along_axis(x, got, axis), np.take_along_axis(x, want, axis)
    assert_same_canonical(g, w)


@pytest.mark.parametrize("dt", [np.int8, np.int64, np.uint64, np.float16, jnp.bfloat16,
                                np.float32],
                         ids=ids([np.int8, np.int64, np.uint64, np.float16, jnp.bfloat16,
                                  np.float32]))
@pytest.mark.parametrize("descending", [False, True], ids=["asc", "desc"])
def test_argsort_unstable(dt, descending):
  x = edge(dt, (3, 40), 7)
  _check_unstable(lambda a: jnp.argsort(a, axis=1, stable=False, descending=descending), x, 1)
  x = edge(dt, (12,), 1)  # small: CPU's insertion sort is stable, ours always is
  check(lambda a: jnp.argsort(a, stable=False, descending=descending), x)


@pytest.mark.parametrize("dt", [np.float16, jnp.bfloat16, np.float32],
                         ids=ids([np.float16, jnp.bfloat16, np.float32]))
def test_sort_nan_inf_signed_zero(dt):
  x = np.array([np.nan, -0.0, 0.0, -np.inf, np.inf, -np.nan, 1.0, -0.0, np.nan, 0.0, -1.0,
                np.inf, -np.inf, 0.0], np.float32).astype(dt)
  check(lambda a: (jnp.sort(a), jnp.argsort(a), jnp.sort(a, descending=True),
                   jnp.argsort(a, descending=True)), x, exact=True)


def test_sort_nan_payloads():
  # Every NaN (either sign, any payload) is canonicalized to one NaN: they tie, stably.
  bits = np.array([0x7FC00000, 0xFFC00000, 0x7F800001, 0x3F800000, 0xFF800001, 0x80000000,
                   0x00000000, 0x7FC00001], np.uint32)
  check(lambda a: (jnp.argsort(a), jnp.sort(a)), bits.view(np.float32), exact=True)


def test_sort_int64_extremes():
  # 64-bit keys must sort exactly (not through a float conversion).
  x = np.array([2**63 - 1, -2**63, 2**53 + 1, 2**53, -2**53 - 1, -2**53, 0, -1, 1, 2**62,
                2**63 - 2, -2**63 + 1], np.int64)
  check(lambda a: (jnp.sort(a), jnp.argsort(a), jnp.sort(a.view(jnp.uint64)),
                   jnp.argsort(a.view(jnp.uint64))), x)


def test_sort_float64():
  # f64 lives as raw uint64 storage; sorting needs no f64 arithmetic.
  x = np.array([1.5, -0.0, np.nan, 0.0, -np.inf, 1e300, -1e-300, 1.5 + 2**-52, np.inf, -1.5],
               np.float64)
  check(lambda a: (jnp.sort(a), jnp.argsort(a), jnp.sort(a, descending=True)), x, exact=True)


def test_sort_complex128():
  # c128 lives as raw uint64 pairs; its real/imag keys are read from them without f64 compute.
  z = edge(np.complex64, (3, 19), 4).astype(np.complex128)
  z[0, :4] = [complex(1.0, -0.0), complex(1.0, 0.0), complex(-0.0, 2.0), complex(0.0, 2.0)]
  check(lambda a: (jnp.sort(a, axis=1), jnp.argsort(a, axis=1), jnp.sort(a, axis=0)), z,
        exact=True)


# ---- lax.sort: several operands, num_keys -----------------------------------------------------


@pytest.mark.parametrize("num_keys", [1, 2, 3])
@pytest.mark.parametrize("dts", [(np.int8, np.float32, np.int32), (np.bool_, np.uint64, np.int16),
                                 (jnp.bfloat16, np.int64, np.float16),
                                 (np.uint8, np.complex64, np.uint32)],
                         ids=lambda d: "-".join(np.dtype(t).name for t in d))
@pytest.mark.parametrize("stable", [True, False], ids=["stable", "unstable"])
def test_lax_sort_multi(dts, num_keys, stable):
  shape = (5, 23)
  ops = [rand(dts[0], shape, 1, -3, 3), edge(dts[1], shape, 2), rand(dts[2], shape, 3, -2, 3)]
  # A payload operand that is not a key: the stable order must carry it along.
  ops.append(np.broadcast_to(np.arange(23, dtype=np.int32), shape).copy())
  fn = lambda *a: lax.sort(a, dimension=1, is_stable=stable, num_keys=num_keys)
  if stable:
    check(fn, *ops, exact=True)
  else:  # ties in the keys (±0, NaNs included) may come in any order: compare keys only
    cpu, mlx = jax.devices("cpu")[0], jax.devices("mlx")[0]
    keys = lambda *a: fn(*a)[:num_keys]
    assert_same_canonical(run_on(mlx, keys, *ops), run_on(cpu, keys, *ops))


@pytest.mark.parametrize("dimension", [0, 1, 2])
def test_lax_sort_multi_3d(dimension):
  a = rand(np.int32, (4, 6, 5), 4, -2, 2)
  b = edge(np.float32, (4, 6, 5), 1)
  check(lambda x, y: lax.sort((x, y), dimension=dimension, num_keys=2), a, b, exact=True)


@pytest.mark.parametrize("nkeys", [1, 2, 3])
def test_lexsort(nkeys):
  keys = [rand(np.int16, (30,), s, -2, 3) for s in range(nkeys)]
  check(lambda *k: jnp.lexsort(k), *keys)


def test_lexsort_2d_axis0():
  keys = [rand(np.int32, (9, 4), 1, -2, 2), edge(np.float32, (9, 4), 2)]
  check(lambda a, b: jnp.lexsort((a, b), axis=0), *keys)


# ---- users of sort ----------------------------------------------------------------------------


@pytest.mark.parametrize("dt", [np.int32, np.uint8, np.float32, np.int64],
                         ids=ids([np.int32, np.uint8, np.float32, np.int64]))
def test_unique(dt):
  x = rand(dt, (40,), 2, -5, 5)
  check(lambda a: jnp.unique(a, size=40, fill_value=0), x)
  check(lambda a: jnp.unique(a, size=12, return_counts=True, return_index=True), x)


# The sort-based statistics run without x64: with it, jnp computes their interpolation in f64,
# which this platform refuses (f64 compute).
@pytest.fixture
def no_x64():
  with jax.enable_x64(False):
    yield


@pytest.mark.usefixtures("no_x64")
@pytest.mark.parametrize("axis", [None, 0, 1])
def test_median(axis):
  x = rand(np.float32, (7, 10), 3, scale=4.0)
  check(lambda a: jnp.median(a, axis=axis), x)


@pytest.mark.usefixtures("no_x64")
@pytest.mark.parametrize("q", [0.0, 12.5, 50.0, 99.0, 100.0], ids=str)
@pytest.mark.parametrize("method", ["linear", "lower", "higher", "nearest", "midpoint"])
def test_percentile(q, method):
  x = rand(np.float32, (5, 11), 4, scale=3.0)
  check(lambda a: jnp.percentile(a, q, axis=1, method=method), x)


@pytest.mark.usefixtures("no_x64")
def test_median_with_nan():
  x = np.array([[1.0, np.nan, 3.0, 2.0], [4.0, -0.0, 0.0, -np.inf]], np.float32)
  check(lambda a: (jnp.median(a, axis=1), jnp.nanmedian(a, axis=1)), x)


# ---- top_k ------------------------------------------------------------------------------------


@pytest.mark.parametrize("k", [1, 3, 17])
@pytest.mark.parametrize("dt", INTS + FLOATS, ids=ids(INTS + FLOATS))
def test_top_k(dt, k):
  x = edge(dt, (3, 17), 4)  # edge values: ties must go to the lowest index
  check(lambda a: lax.top_k(a, k), x, exact=True)


def test_top_k_nan_and_zeros():
  x = np.array([0.0, -0.0, np.nan, 1.0, np.inf, -np.nan, 0.0, -np.inf, np.nan, 1.0], np.float32)
  check(lambda a: [lax.top_k(a, k) for k in (1, 2, 5, 10)], x, exact=True)


def test_top_k_1d_large():
  x = rand(np.int32, (2000,), 5, -50, 50)
  check(lambda a: lax.top_k(a, 100), x)


# approx_max_k / approx_min_k: on CPU (and here) an exact top-k: a sort by the comparator and a
# slice, or for k=1 a reduce whose ties go to the LAST index. XLA's CPU sorts are unstable there
# (except f32 max-k, rewritten to its TopK kernel), so with ties only the values and the
# indices' consistency are comparable; distinct values are compared exactly. No NaN: XLA's
# comparator is a plain IEEE compare, under which NaN is unordered.
def _distinct(dt, shape, seed):
  """Distinct values per row (exact in f16/bf16: small integers and halves), ±inf included."""
  rng = np.random.default_rng(seed)
  rows = [rng.permutation(np.arange(shape[-1], dtype=np.float32) - shape[-1] // 2) / 2
          for _ in range(int(np.prod(shape[:-1])))]
  x = np.stack(rows).reshape(shape)
  x[..., 1] = np.inf
  x[..., 4] = -np.inf
  return x.astype(dt)


def _tied(dt, shape, seed):
  x = np.round(rand(np.float32, shape, seed, scale=4.0) * 2)  # coarse values: many ties
  x.flat[::7] = np.inf
  x.flat[3::11] = -np.inf
  x.flat[5::13] = -0.0
  return x.astype(dt)


def _check_topk_ties(fn, x, axis):
  """fn returns (values, indices) of a top-k whose tie order is unspecified."""
  cpu, mlx = jax.devices("cpu")[0], jax.devices("mlx")[0]
  (wv, wi), (gv, gi) = run_on(cpu, fn, x), run_on(mlx, fn, x)
  assert gi.dtype == wi.dtype and gi.shape == wi.shape
  assert_same_canonical(gv, wv)
  np.testing.assert_array_equal(np.take_along_axis(x, gi, axis).view(np.uint8),
                                gv.view(np.uint8))
  s = np.sort(gi, axis=axis)
  assert (np.diff(s, axis=axis) > 0).all(), "indices repeat"


@pytest.mark.parametrize("k", [1, 4, 50])
@pytest.mark.parametrize("dt", FLOATS, ids=ids(FLOATS))
@pytest.mark.parametrize("fn", ["max", "min"])
def test_approx_k(fn, dt, k):
  f = lax.approx_max_k if fn == "max" else lax.approx_min_k
  x = _distinct(dt, (4, 50), 6)
  check(lambda a: (f(a, k), f(a.T, k, reduction_dimension=0)), x, exact=True)


@pytest.mark.parametrize("k", [1, 4])
@pytest.mark.parametrize("dt", FLOATS, ids=ids(FLOATS))
@pytest.mark.parametrize("fn", ["max", "min"])
def test_approx_k_ties(fn, dt, k):
  f = lax.approx_max_k if fn == "max" else lax.approx_min_k
  x = _tied(dt, (4, 50), 6)
  _check_topk_ties(lambda a: f(a, k), x, 1)
  _check_topk_ties(lambda a: f(a, k, reduction_dimension=0), x.T.copy(), 0)
  if k == 1:  # a reduce: ties go to the last index, exactly
    check(lambda a: f(a, 1), x, exact=True)
  if fn == "max" and dt == np.float32:  # XLA's TopK kernel: stable, exactly
    check(lambda a: f(a, k), x, exact=True)


@pytest.mark.parametrize("fn", ["max", "min"])
def test_approx_k_not_aggregated(fn):
  f = lax.approx_max_k if fn == "max" else lax.approx_min_k
  check(lambda a: f(a, 5, aggregate_to_topk=False), _distinct(np.float32, (3, 40), 7), exact=True)
  _check_topk_ties(lambda a: f(a, 5, aggregate_to_topk=False), _tied(np.float32, (3, 40), 7), 1)


# ---- comparators jax does not emit: the sorting-network fallback ------------------------------

_custom_sort_p = core.Primitive("jaxmlx_test_custom_sort")
_custom_sort_p.multiple_results = True
_custom_sort_p.def_abstract_eval(lambda *avals, **_: list(avals))


def _custom_sort_lowering(ctx, *operands, comparator, dimension, is_stable):
  sort = hlo.SortOp([mlir.aval_to_ir_type(ctx.module_context, a) for a in ctx.avals_out], list(operands),
                    dimension=mlir.i64_attr(dimension), is_stable=ir.BoolAttr.get(is_stable))
  scalars = [a.update(shape=()) for a in ctx.avals_in]
  types = [mlir.aval_to_ir_type(ctx.module_context, a) for a in scalars]
  block = sort.comparator.blocks.append(*[t for t in types for _ in (0, 1)])
  with ir.InsertionPoint(block):
    lower = mlir.lower_fun(comparator, multiple_results=False)
    sub = ctx.replace(primitive=None, avals_in=[a for a in scalars for _ in (0, 1)],
                      avals_out=[core.ShapedArray((), np.bool_)])
    out = lower(sub, *block.arguments)
    hlo.return_(mlir.ir_tree_registry.flatten(out)[0])
  return sort.results


mlir.register_lowering(_custom_sort_p, _custom_sort_lowering)


def custom_sort(comparator, *operands, dimension=-1, is_stable=True):
  """stablehlo.sort with `comparator(lhs0, rhs0, lhs1, rhs1, ...)` as its body."""
  return _custom_sort_p.bind(*operands, comparator=comparator, dimension=dimension % operands[0].ndim,
                             is_stable=is_stable)


def _cmp_diff(a, b):  # a - b < 0: an order on small ints, not in the keyed form
  return (a - b) < 0


def _cmp_not_ge(a, b):  # not (b <= a) == a < b without NaN
  return jnp.logical_not(b <= a)


def _cmp_select(a0, b0, a1, b1):  # lexicographic via select: (a0, then descending a1)
  return jnp.where(a0 == b0, a1 > b1, a0 < b0)


def _cmp_abs(a, b):  # a key that is a function of the operand: recognized (fast path)
  return jnp.abs(a) < jnp.abs(b)


def _cmp_mod_desc(a0, b0, a1, b1):  # keys (a0 % 4 ascending, a1 descending): recognized
  k0, l0 = a0 % 4, b0 % 4
  return (k0 < l0) | ((k0 == l0) & (a1 > b1))


@pytest.mark.parametrize("n", [1, 2, 5, 16, 33])
@pytest.mark.parametrize("cmp", [_cmp_diff, _cmp_not_ge, _cmp_abs], ids=lambda f: f.__name__)
def test_custom_comparator_one_operand(cmp, n):
  x = rand(np.int32, (3, n), n, -4, 5)
  idx = np.broadcast_to(np.arange(n, dtype=np.int32), (3, n)).copy()
  cmp2 = lambda a, b, i, j: cmp(a, b)
  check(lambda a, i: custom_sort(cmp2, a, i, dimension=1), x, idx)
  check(lambda a, i: custom_sort(cmp2, a, i, dimension=0), x, idx)


@pytest.mark.parametrize("cmp", [_cmp_select, _cmp_mod_desc], ids=lambda f: f.__name__)
@pytest.mark.parametrize("stable", [True, False], ids=["stable", "unstable"])
def test_custom_comparator_two_keys(cmp, stable):
  a = rand(np.int32, (4, 29), 1, -3, 4)
  b = rand(np.float32, (4, 29), 2, scale=2.0).round(1)
  idx = np.broadcast_to(np.arange(29, dtype=np.int32), (4, 29)).copy()
  cmp3 = lambda a0, b0, a1, b1, i, j: cmp(a0, b0, a1, b1)
  fn = lambda x, y, i: custom_sort(cmp3, x, y, i, dimension=1, is_stable=stable)
  if stable:
    check(fn, a, b, idx)
  else:  # ties in (a, b) only: compare the keys
    check(lambda *v: fn(*v)[:2], a, b, idx)


def test_custom_comparator_float_fallback():
  # A float comparator through the network: (|a| descending, then a ascending).
  x = edge(np.float32, (2, 24), 2)
  x = np.where(np.isnan(x), 7.0, x).astype(np.float32)  # the comparator is no order with NaN
  cmp = lambda a, b, i, j: (jnp.abs(a) > jnp.abs(b)) | ((jnp.abs(a) == jnp.abs(b)) & (a - b < 0))
  idx = np.broadcast_to(np.arange(24, dtype=np.int32), (2, 24)).copy()
  check(lambda a, i: custom_sort(cmp, a, i), x, idx)


# ---- cumulative reductions (jax lowers them to reduce_window on this platform) ----------------

CUM = {
    "cumsum": lambda a, axis, reverse: lax.cumsum(a, axis, reverse),
    "cumprod": lambda a, axis, reverse: lax.cumprod(a, axis, reverse),
    "cummax": lambda a, axis, reverse: lax.cummax(a, axis, reverse),
    "cummin": lambda a, axis, reverse: lax.cummin(a, axis, reverse),
}


@pytest.mark.parametrize("reverse", [False, True], ids=["fwd", "rev"])
@pytest.mark.parametrize("axis", [0, 1])
@pytest.mark.parametrize("dt", [np.int8, np.int32, np.uint32, np.int64, np.uint64],
                         ids=ids([np.int8, np.int32, np.uint32, np.int64, np.uint64]))
@pytest.mark.parametrize("op", list(CUM))
def test_cumulative_int(op, dt, axis, reverse):
  # Integers are exact (sums and products wrap identically in any order).
  x = rand(dt, (5, 9), 3, -3, 4)
  check(lambda a: CUM[op](a, axis, reverse), x)


@pytest.mark.parametrize("reverse", [False, True], ids=["fwd", "rev"])
@pytest.mark.parametrize("dt", [np.float16, np.float32], ids=ids([np.float16, np.float32]))
@pytest.mark.parametrize("op", list(CUM) + ["cumlogsumexp"])
def test_cumulative_float(op, dt, reverse):
  x = rand(dt, (4, 33), 5, scale=1.5)
  if op == "cumlogsumexp":
    fn = lambda a: lax.cumlogsumexp(a, 1, reverse)
  else:
    fn = lambda a: CUM[op](a, 1, reverse)
  # Sums (and logsumexp, products) may be added in another order than XLA's: a few ULP of the
  # running value, relative to the magnitudes summed (inputs in [-1.5, 1.5], 33 terms).
  tol = {np.float16: 1e-2, np.float32: 1e-5}[dt]
  exact = op in ("cummax", "cummin")
  check(fn, x, rtol=None if exact else tol, atol=None if exact else tol, exact=exact)


def test_cumulative_jnp():
  x = rand(np.float32, (6, 7), 8, scale=1.0)
  check(lambda a: (jnp.cumsum(a, axis=0), jnp.cumprod(a, axis=1), jnp.cumsum(a)), x,
        rtol=1e-5, atol=1e-5)  # summation order, as above
  i = rand(np.int32, (6, 7), 9)
  check(lambda a: (jnp.cumsum(a, axis=1), jnp.cumprod(a, axis=0), jnp.cumsum(a)), i)
