"""Differential tests of the shape family (src/lower/shape.cc, shape_slice.cc) against jax's CPU.

Shape ops only move data, so results are compared bit for bit (exact=True: NaN payloads, -0.0)
over every dtype: constants (dense and splat), iota, broadcast_in_dim, reshape, transpose,
slice (strided, reversed), dynamic_slice / dynamic_update_slice with out-of-range starts (the
spec clamps them), concatenate, pad (negative edges crop, interior dilates), reverse.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax

from tests.ops.edge_values import values
from tests.ops.harness import check

ALL = [np.bool_, np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32,
       np.uint64, np.float16, jnp.bfloat16, np.float32, np.complex64]
SOME = [np.bool_, np.int8, np.uint32, np.int64, jnp.bfloat16, np.float32, np.complex64]


def ids(dts):
  return [np.dtype(d).name for d in dts]


def x_of(dt, shape, offset=0):
  return values(dt, shape, offset)


# ---- constants and iota --------------------------------------------------------------------


@pytest.mark.parametrize("dt", ALL, ids=ids(ALL))
def test_dense_constant(dt):
  c = x_of(dt, (3, 4), 5)
  check(lambda x: (x, jnp.asarray(c)), np.zeros((), np.int32), exact=True)


@pytest.mark.parametrize("dt", ALL, ids=ids(ALL))
def test_splat_constant(dt):
  c = x_of(dt, (), 1)
  check(lambda x: jnp.full((2, 5), c, dtype=dt), np.zeros((), np.int32), exact=True)


@pytest.mark.parametrize("val", [np.nan, -0.0, np.inf, 1.0 / 3.0, 1e-45])
def test_float_splat_constant_bits(val):
  check(lambda x: jnp.full((4,), val, np.float32), np.zeros((), np.int32), exact=True)


IOTA = [np.int8, np.int32, np.int64, np.uint8, np.uint32, np.float16, jnp.bfloat16, np.float32]


@pytest.mark.parametrize("dt", IOTA, ids=ids(IOTA))
def test_iota(dt):
  check(lambda x: (lax.iota(dt, 9), lax.broadcasted_iota(dt, (3, 4, 2), 1),
                   lax.broadcasted_iota(dt, (3, 4), 0)), np.zeros((), np.int32), exact=True)


@pytest.mark.parametrize("n", [0, 1, 300, 3000])
def test_iota_lengths(n):
  check(lambda x: (jnp.arange(n, dtype=jnp.int32) + x, lax.iota(jnp.float16, n),
                   lax.iota(jnp.uint8, n)), np.int32(1), exact=True)


# ---- broadcast, reshape, transpose ----------------------------------------------------------


@pytest.mark.parametrize("dt", ALL, ids=ids(ALL))
def test_broadcast_to(dt):
  x = x_of(dt, (3, 1))
  check(lambda a: (jnp.broadcast_to(a, (2, 3, 4)), jnp.broadcast_to(a[0, 0], (5,))), x,
        exact=True)


@pytest.mark.parametrize("dims,shape,out", [
    ((0,), (3,), (3, 4)), ((1,), (4,), (3, 4)), ((0, 2), (2, 5), (2, 3, 5)),
    ((1, 2), (1, 5), (2, 3, 5)), ((), (), (2, 2)), ((0, 1), (1, 1), (0, 4)),
])
def test_broadcast_in_dim(dims, shape, out):
  x = x_of(np.float32, shape)
  check(lambda a: lax.broadcast_in_dim(a, out, dims), x, exact=True)


@pytest.mark.parametrize("dt", ALL, ids=ids(ALL))
def test_reshape(dt):
  x = x_of(dt, (2, 3, 4))
  check(lambda a: (a.reshape(4, 6), a.reshape(-1), a.reshape(2, 1, 12, 1), a.reshape(24, 1)),
        x, exact=True)


@pytest.mark.parametrize("shape,new", [((), (1, 1)), ((0, 3), (3, 0)), ((5,), (5,)),
                                       ((1, 7), (7,))])
def test_reshape_edges(shape, new):
  check(lambda a: a.reshape(new), x_of(np.int32, shape), exact=True)


@pytest.mark.parametrize("perm", [(0, 1, 2), (2, 1, 0), (1, 0, 2), (0, 2, 1), (2, 0, 1),
                                  (1, 2, 0)])
@pytest.mark.parametrize("dt", SOME, ids=ids(SOME))
def test_transpose(dt, perm):
  check(lambda a: jnp.transpose(a, perm), x_of(dt, (2, 3, 4)), exact=True)


def test_transpose_empty_and_2d():
  check(lambda a, b: (a.T, b.T), x_of(np.float32, (0, 3)), x_of(np.int8, (5, 7)), exact=True)


# Chains of transposes and reshapes that add or drop size-1 dims: lowered as one view of the
# chain's source (lower/shape_util.h, permuted_view), whatever the hops in between. Equal sizes
# (3 and 3) make a dim taken for another a wrong value, not a wrong shape.
VIEW_CHAINS = {
    "unit-then-swap": ((3, 3), lambda a: a.reshape(1, 3, 3).transpose(0, 2, 1).reshape(3, 1, 3)
                       .transpose(1, 2, 0)),
    "swap-then-drop": ((1, 3, 3), lambda a: a.transpose(2, 0, 1).reshape(3, 3).T),
    "heads-of-one-token": ((1, 1, 3, 3), lambda a: a.transpose(0, 2, 1, 3).reshape(3, 1, 3)
                           .reshape(1, 3, 1, 3).transpose(0, 1, 3, 2)),
    "ones-everywhere": ((1, 1, 3, 1, 3, 1), lambda a: a.transpose(5, 4, 3, 2, 1, 0).reshape(3, 3)
                        .T.reshape(1, 3, 1, 3)),
    "moved-ones": ((3, 1, 3), lambda a: a.transpose(1, 0, 2).reshape(1, 1, 3, 3)
                   .transpose(0, 3, 1, 2).reshape(3, 3, 1)),
    "back-in-order": ((1, 3, 1, 3), lambda a: a.transpose(2, 3, 0, 1).reshape(3, 1, 3)
                      .transpose(1, 2, 0)),
    "merged-at-the-end": ((1, 3, 1, 3), lambda a: a.transpose(3, 1, 0, 2).reshape(9)),
    "split-in-between": ((1, 9), lambda a: a.reshape(1, 3, 3).transpose(0, 2, 1).reshape(3, 1, 3)),
    "three-dims": ((2, 1, 3, 1, 2), lambda a: a.transpose(4, 3, 2, 1, 0).reshape(2, 3, 2)
                   .transpose(2, 0, 1).reshape(1, 2, 2, 1, 3)),
    # Reshapes of strided views (a slice, a transpose, a broadcast) that only split their dims:
    # one reshape of the view (shape_util.h, only_splits); one that merges them stays two.
    "split-slice": ((2, 12), lambda a: a[:, 2:10].reshape(2, 2, 4).reshape(2, 2, 1, 2, 2)),
    "split-strided-slice": ((3, 12), lambda a: a[:, ::2].reshape(3, 1, 6).reshape(3, 2, 3, 1)),
    "split-transpose": ((6, 4), lambda a: a.T.reshape(4, 2, 3).reshape(2, 2, 2, 3)),
    "merge-after-split": ((6, 4), lambda a: a.T.reshape(4, 2, 3).reshape(8, 3)),
    "split-broadcast": ((6,), lambda a: jnp.broadcast_to(a, (3, 6)).reshape(3, 2, 3)
                        .reshape(3, 1, 2, 3)),
    "token-heads": ((1, 1, 96), lambda a: a[..., 32:64].reshape(1, 1, 4, 8)
                    .transpose(0, 2, 1, 3)),
}


@pytest.mark.parametrize("name", list(VIEW_CHAINS))
@pytest.mark.parametrize("dt", [np.float32, np.int8, np.complex64], ids=ids([np.float32, np.int8,
                                                                              np.complex64]))
def test_chains_of_transposes_and_size_one_reshapes(dt, name):
  shape, f = VIEW_CHAINS[name]
  # As a result (copied out of the view) and read by a kernel through the view's strides.
  check(lambda a: (f(a), f(a) == jnp.flip(f(a))), x_of(dt, shape), exact=True)


def test_size_one_reshapes_of_arrays_made_in_the_program():
  # An iota (MLX's arange) or a constant has no input to look through: such a chain ends there.
  # jnp.geomspace reshapes an iota to [n, 1, 1] (it once crashed the compile here).
  def f(a):
    i = lax.iota(np.float32, 6).reshape(6, 1, 1)
    j = jnp.arange(4, dtype=np.int32).reshape(1, 4, 1).transpose(2, 1, 0)
    k = jnp.full((3,), 2.5, np.float32).reshape(1, 3, 1).transpose(0, 2, 1)
    return i, j, k, jnp.geomspace(a, a + 1.0, 2, endpoint=False, axis=-1)
  check(f, np.array([[1.0, 2.0], [3.0, 4.0]], np.float32), rtol=1e-6, atol=0)


# ---- slice, reverse --------------------------------------------------------------------------

SLICES = {
    "basic": lambda a: a[1:3, 2:5],
    "step2": lambda a: a[::2],
    "step3_cols": lambda a: a[:, 1::3],
    "neg_step": lambda a: a[::-1, ::-2],
    "last": lambda a: a[-1],
    "empty": lambda a: a[2:2, :],
    "ellipsis": lambda a: a[..., 4:],
    "scalar": lambda a: a[3, 4],
}


@pytest.mark.parametrize("name", list(SLICES))
@pytest.mark.parametrize("dt", SOME, ids=ids(SOME))
def test_slice(dt, name):
  check(SLICES[name], x_of(dt, (5, 7)), exact=True)


def test_lax_slice_strides():
  x = x_of(np.float32, (6, 9, 4))
  check(lambda a: (lax.slice(a, (1, 0, 1), (6, 9, 4), (2, 4, 3)),
                   lax.slice(a, (0, 0, 0), (0, 9, 4))), x, exact=True)


@pytest.mark.parametrize("dims", [(0,), (1,), (0, 1), (0, 2), ()])
@pytest.mark.parametrize("dt", [np.float32, np.int16, np.complex64, np.bool_],
                         ids=ids([np.float32, np.int16, np.complex64, np.bool_]))
def test_reverse(dt, dims):
  check(lambda a: lax.rev(a, dims), x_of(dt, (3, 4, 5)), exact=True)


def test_reverse_empty():
  check(lambda a: lax.rev(a, (0, 1)), x_of(np.float32, (0, 3)), exact=True)


# ---- dynamic_slice, dynamic_update_slice -----------------------------------------------------

STARTS = [(0, 0), (1, 2), (3, 5), (4, 6), (100, 100), (-1, -3), (-100, 2), (2, -100)]


@pytest.mark.parametrize("start", STARTS)
def test_dynamic_slice(start):
  x = x_of(np.float32, (5, 7))
  i, j = (np.int32(s) for s in start)
  check(lambda a, i, j: lax.dynamic_slice(a, (i, j), (2, 3)), x, i, j, exact=True)


@pytest.mark.parametrize("idx_dt", [np.int8, np.int64, np.uint8, np.uint32, np.uint64],
                         ids=ids([np.int8, np.int64, np.uint8, np.uint32, np.uint64]))
@pytest.mark.parametrize("start", [0, 3, 200])
def test_dynamic_slice_index_dtypes(idx_dt, start):
  x = x_of(np.int32, (300, 3))
  i = np.array(start).astype(idx_dt)
  check(lambda a, i: lax.dynamic_slice(a, (i, idx_dt(0)), (4, 3)), x, i, exact=True)


@pytest.mark.parametrize("dt", ALL, ids=ids(ALL))
def test_dynamic_slice_dtypes(dt):
  x = x_of(dt, (4, 6))
  check(lambda a, i: (lax.dynamic_slice(a, (i, i), (2, 2)), lax.dynamic_index_in_dim(a, i, 1)),
        x, np.int32(3), exact=True)


def test_dynamic_slice_full_and_empty():
  x = x_of(np.float32, (4, 5))
  check(lambda a, i: (lax.dynamic_slice(a, (i, i), (4, 5)), lax.dynamic_slice(a, (i, i), (0, 2))),
        x, np.int32(2), exact=True)


@pytest.mark.parametrize("start", STARTS)
def test_dynamic_update_slice(start):
  x = x_of(np.float32, (5, 7))
  u = x_of(np.float32, (2, 3), 7)
  i, j = (np.int32(s) for s in start)
  check(lambda a, u, i, j: lax.dynamic_update_slice(a, u, (i, j)), x, u, i, j, exact=True)


@pytest.mark.parametrize("dt", ALL, ids=ids(ALL))
def test_dynamic_update_slice_dtypes(dt):
  x = x_of(dt, (4, 6))
  u = x_of(dt, (3, 2), 3)
  check(lambda a, u, i: lax.dynamic_update_slice(a, u, (i, i - 1)), x, u, np.int32(2),
        exact=True)


# Starts known when the program is compiled (jax emits them as constants) are clamped by the
# plugin itself; the others with MLX ops. Both kinds in one slice, out-of-range constants
# included (PITFALLS 2.11: clamping, never wrapping).
@pytest.mark.parametrize("start", STARTS)
def test_dynamic_slices_with_constant_starts(start):
  x = x_of(np.float32, (5, 7))
  u = x_of(np.float32, (2, 3), 7)
  c0, c1 = start
  check(lambda a, u, i: (lax.dynamic_slice(a, (np.int32(c0), np.int32(c1)), (2, 3)),
                         lax.dynamic_slice(a, (i, np.int32(c1)), (2, 3)),
                         lax.dynamic_slice(a, (np.int32(c0), i), (2, 3)),
                         lax.dynamic_update_slice(a, u, (np.int32(c0), np.int32(c1))),
                         lax.dynamic_update_slice(a, u, (i, np.int32(c1))),
                         lax.dynamic_update_slice(a, u, (np.int32(c0), i))),
        x, u, np.int32(1), exact=True)


@pytest.mark.parametrize("idx_dt", [np.int8, np.uint8, np.int64, np.uint64],
                         ids=ids([np.int8, np.uint8, np.int64, np.uint64]))
def test_dynamic_slices_with_constant_starts_of_every_width(idx_dt):
  x = x_of(np.int32, (300, 3))
  # The largest start below the sign bit. XLA:CPU reads an unsigned *constant* start with the top
  # bit set as negative (uint8 255 slices from 0) but the same value passed at run time as
  # unsigned (from 255): its constant folding and its kernels disagree, and we follow the spec
  # (unsigned) for both, so that case is left out.
  big = np.iinfo(np.dtype(idx_dt).str.replace("u", "i")).max
  check(lambda a, i: (lax.dynamic_slice(a, (idx_dt(big), idx_dt(1)), (4, 2)),
                      lax.dynamic_slice(a, (i, idx_dt(big)), (4, 2)),
                      lax.dynamic_update_slice(a, a[:4, :2] * 3, (idx_dt(big), i))),
        x, idx_dt(2), exact=True)


def test_dynamic_update_slice_edges():
  # The updates are moved, not computed: arithmetic on x's NaN would give CUDA's 0x7FFFFFFF
  # (README, known differences) where XLA's CPU keeps 0x7FC00000, and the bits are compared.
  x = x_of(np.float32, (4, 5))
  check(lambda a, i: (lax.dynamic_update_slice(a, lax.rev(a, (0, 1)), (i, i)),
                      lax.dynamic_update_slice(a, a[:0], (i, i)),
                      lax.dynamic_update_slice(a[0, 0], a[1, 1], ())), x, np.int32(3), exact=True)


# ---- concatenate ------------------------------------------------------------------------------


@pytest.mark.parametrize("dt", ALL, ids=ids(ALL))
def test_concatenate(dt):
  a, b = x_of(dt, (2, 3)), x_of(dt, (4, 3), 5)
  check(lambda a, b: (jnp.concatenate([a, b, a]), jnp.concatenate([a.T, b.T], axis=1)), a, b,
        exact=True)


def test_concatenate_empty_and_single():
  a, e = x_of(np.float32, (2, 3)), x_of(np.float32, (0, 3))
  check(lambda a, e: (jnp.concatenate([e, a, e]), jnp.concatenate([a]),
                      jnp.concatenate([e, e])), a, e, exact=True)


def test_stack_and_hstack():
  a, b = x_of(np.int8, (3,)), x_of(np.int8, (3,), 2)
  check(lambda a, b: (jnp.stack([a, b], axis=1), jnp.hstack([a, b]), jnp.vstack([a, b])), a, b,
        exact=True)


# ---- pad --------------------------------------------------------------------------------------

PADS = [
    [(1, 2, 0)], [(0, 0, 0)], [(-1, 0, 0)], [(0, -2, 0)], [(0, 0, 2)], [(-2, 1, 1)],
    [(2, -3, 1)], [(-1, -1, 3)], [(-3, -2, 0)], [(-7, 0, 1)], [(3, 3, 0)], [(-9, 1, 1)],
]


@pytest.mark.parametrize("cfg", PADS, ids=[str(p) for p in PADS])
def test_pad_1d(cfg):
  x = x_of(np.float32, (5,))
  check(lambda a, v: lax.pad(a, v, cfg), x, np.float32(-9.5), exact=True)


PADS_2D = [
    [(1, 0, 0), (0, 2, 0)], [(0, 0, 1), (0, 0, 2)], [(-1, 1, 1), (2, -2, 0)],
    [(-1, -1, 0), (-2, -2, 1)], [(2, 2, 2), (-3, 0, 2)],
]


@pytest.mark.parametrize("cfg", PADS_2D, ids=[str(p) for p in PADS_2D])
@pytest.mark.parametrize("dt", SOME, ids=ids(SOME))
def test_pad_2d(dt, cfg):
  x = x_of(dt, (3, 4))
  v = x_of(dt, (), 4)
  check(lambda a, v: lax.pad(a, v, cfg), x, v, exact=True)


# float64 runs as MLX's own float64 (on the CPU); complex128 is stored as (re, im) pairs, a
# trailing storage dim, which MLX's Pad cannot fill with one scalar (the slice-update path).
@pytest.mark.parametrize("cfg", PADS_2D[:3], ids=[str(p) for p in PADS_2D[:3]])
@pytest.mark.parametrize("dt", [np.float64, np.complex128], ids=ids([np.float64, np.complex128]))
def test_pad_2d_wide(dt, cfg):
  x = x_of(dt, (3, 4))
  v = x_of(dt, (), 4)
  check(lambda a, v: lax.pad(a, v, cfg), x, v, exact=True)


def test_pad_empty_operand():
  x = x_of(np.float32, (0, 3))
  check(lambda a, v: (lax.pad(a, v, [(2, 1, 3), (0, 0, 0)]),
                      lax.pad(a, v, [(0, 0, 0), (1, -1, 1)])),
        x, np.float32(7), exact=True)


def test_jnp_pad_modes():
  x = x_of(np.float32, (4, 5))
  check(lambda a: (jnp.pad(a, ((1, 2), (0, 3))),
                   jnp.pad(a, 2, constant_values=np.float32(-1.0))), x,
        exact=True)


# ---- combinations -------------------------------------------------------------------------------


def test_roll_and_tile():
  x = x_of(np.int32, (3, 4))
  check(lambda a: (jnp.roll(a, 2, axis=1), jnp.tile(a, (2, 3)), jnp.repeat(a, 2, axis=0)), x)


def test_scalar_ops():
  check(lambda a: (a.reshape(1, 1), jnp.broadcast_to(a, (2,)), jnp.expand_dims(a, 0)),
        np.float32(2.5), exact=True)


def test_dynamic_update_slice_in_loop():
  x = x_of(np.int32, (6, 5))

  def f(a):
    body = lambda i, acc: lax.dynamic_update_slice(acc, a[i][None] * 2, (i, 0))
    return lax.fori_loop(0, 6, body, jnp.zeros_like(a))

  check(f, x)


def test_dynamic_slice_in_scan():
  x = x_of(np.float32, (7, 3))
  check(lambda a: lax.scan(lambda c, i: (c, lax.dynamic_slice(a, (i, 0), (2, 3))), 0,
                           jnp.arange(7))[1], x, exact=True)
