"""Differential tests of dot_general / dot (src/lower/dot.cc) against jax's CPU backend.

Matmuls of every float dtype and complex64 over odd shapes (vectors, empty M/N/K), batched
einsums with arbitrary dimension numbers, preferred_element_type (bf16/f16 inputs with an f32
result), and exact integer dots whose values make a float computation inexact (> 2^24).
"""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax

from tests.ops.edge_values import rand
from tests.ops.harness import check

FLOATS = [np.float16, jnp.bfloat16, np.float32, np.complex64]
INTS = [np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32, np.uint64]

# Summation order differs between MLX and XLA: a dot of length K may differ by ~K ULP.
TOL = {"float16": 4e-3, "bfloat16": 2e-2, "float32": 2e-5, "complex64": 2e-5}


def ids(dts):
  return [np.dtype(d).name for d in dts]


def tol(dt):
  t = TOL[np.dtype(dt).name]
  return {"rtol": t, "atol": t}


SHAPES = [((3, 4), (4, 5)), ((1, 7), (7, 1)), ((7,), (7,)), ((5, 3), (3,)), ((3,), (3, 6)),
          ((16, 33), (33, 17)), ((2, 1), (1, 2))]


@pytest.mark.parametrize("shapes", SHAPES, ids=str)
@pytest.mark.parametrize("dt", FLOATS, ids=ids(FLOATS))
def test_matmul_floats(dt, shapes):
  a, b = rand(dt, shapes[0], 1), rand(dt, shapes[1], 2)
  check(lambda a, b: (a @ b, jnp.dot(a, b)), a, b, **tol(dt))


@pytest.mark.parametrize("spec,sa,sb", [("bqhd,bkhd->bhqk", (2, 4, 3, 8), (2, 5, 3, 8)),
                                         ("hbqd,bhkd->bhqk", (3, 2, 4, 8), (2, 3, 5, 8))],
                         ids=["heads-apart", "heads-swapped"])
@pytest.mark.parametrize("dt", FLOATS, ids=ids(FLOATS))
def test_several_batch_dims(dt, spec, sa, sb):
  # Float products keep each batch dim in MLX's matmul (lower/dot.cc), strided views included.
  a, b = rand(dt, sa, 5), rand(dt, sb, 6)
  check(lambda a, b: jnp.einsum(spec, a, b), a, b, **tol(dt))


@pytest.mark.parametrize("shapes", [((0, 3), (3, 4)), ((3, 0), (0, 4)), ((3, 4), (4, 0)),
                                    ((0,), (0,)), ((2, 0, 3), (2, 3, 5))], ids=str)
@pytest.mark.parametrize("dt", [np.float32, np.int32, jnp.bfloat16],
                         ids=ids([np.float32, np.int32, jnp.bfloat16]))
def test_empty_dims(dt, shapes):
  a, b = rand(dt, shapes[0], 1), rand(dt, shapes[1], 2)
  check(lambda a, b: jnp.matmul(a, b), a, b)


EINSUMS = [
    ("bij,bjk->bik", (2, 3, 4), (2, 4, 5)),
    ("ijk,ikl->jl", (3, 2, 4), (3, 4, 5)),
    ("abc,cd->abd", (2, 3, 4), (4, 5)),
    ("bhqd,bhkd->bhqk", (2, 3, 4, 8), (2, 3, 5, 8)),
    ("bqhd,bkhd->bhqk", (2, 4, 3, 8), (2, 5, 3, 8)),  # batch dims apart, strided in both
    ("hbqd,bhkd->bhqk", (3, 2, 4, 8), (2, 3, 5, 8)),  # batch dims in the other order
    ("bhqk,bkhd->bqhd", (2, 3, 4, 5), (2, 5, 3, 8)),  # attention's weights times values
    ("abcd,cbde->bcae", (2, 3, 4, 5), (4, 3, 5, 6)),  # free dims around the batch dims
    ("i,i->", (9,), (9,)),
    ("i,j->ij", (3,), (4,)),
    ("bi,bi->b", (4, 6), (4, 6)),
    ("ij,kj->ik", (3, 5), (4, 5)),
    ("ji,jk->ik", (5, 3), (5, 4)),
    ("bij,jb->ib", (3, 4, 5), (5, 3)),
    ("xyz,zyw->xw", (2, 3, 4), (4, 3, 2)),
]


@pytest.mark.parametrize("spec,sa,sb", EINSUMS, ids=[e[0] for e in EINSUMS])
@pytest.mark.parametrize("dt", [np.float32, np.int32], ids=ids([np.float32, np.int32]))
def test_einsum(dt, spec, sa, sb):
  a, b = rand(dt, sa, 3), rand(dt, sb, 4)
  check(lambda a, b: jnp.einsum(spec, a, b), a, b, **(tol(dt) if dt == np.float32 else {}))


DIMS = [
    ((((1,), (0,)), ((), ())), (3, 4), (4, 5)),
    ((((2,), (1,)), ((0,), (0,))), (2, 3, 4), (2, 4, 5)),
    ((((1,), (2,)), ((0,), (0,))), (2, 3, 4), (2, 5, 3)),
    ((((0, 2), (1, 0)), ((), ())), (4, 3, 5), (5, 4, 2)),
    ((((2,), (0,)), ((1,), (2,))), (4, 3, 5), (5, 2, 3)),
    ((((0,), (1,)), ((2, 1), (0, 2))), (3, 2, 4), (4, 3, 2)),
]


@pytest.mark.parametrize("dims,sa,sb", DIMS, ids=[str(d[0]) for d in DIMS])
def test_dot_general_dimension_numbers(dims, sa, sb):
  a, b = rand(np.float32, sa, 5), rand(np.float32, sb, 6)
  check(lambda a, b: lax.dot_general(a, b, dims), a, b, **tol(np.float32))


# Operands whose dims lie in memory as [batch, cols, rows] of the product's matrix (contracting
# before free on the lhs, free before contracting on the rhs) with several dims to a side: they
# are reshaped as they lie and transposed (a strided view MLX's matmul takes as is, no copy).
SWAPPED = [
    ((((0, 1), (0, 1)), ((), ())), (4, 6, 8), (4, 6, 5)),            # jax's weight gradient
    ((((0,), (0,)), ((), ())), (4, 3, 5), (4, 6)),                   # two free lhs dims
    ((((1,), (2,)), ((), ())), (5, 4), (2, 3, 4)),                   # two free rhs dims first
    ((((1, 2), (1, 2)), ((0,), (0,))), (2, 3, 4, 5), (2, 3, 4, 6)),  # batched, two contracting
    ((((2, 3), (2, 3)), ((0,), (0,))), (2, 5, 3, 4), (2, 6, 3, 4)),  # batched, rhs free first
]


@pytest.mark.parametrize("dims,sa,sb", SWAPPED, ids=[str(d[0]) for d in SWAPPED])
@pytest.mark.parametrize("dt", FLOATS, ids=ids(FLOATS))
def test_operands_taken_transposed_as_they_lie(dt, dims, sa, sb):
  a, b = rand(dt, sa, 7), rand(dt, sb, 8)
  check(lambda a, b: lax.dot_general(a, b, dims), a, b, **tol(dt))
  # The same of operands the program computes (a reversal's view, a product) rather than reads.
  check(lambda a, b: lax.dot_general(jnp.flip(a, 0), b * 2, dims), a, b, **tol(dt))


# ---- preferred_element_type -----------------------------------------------------------------


@pytest.mark.parametrize("dt", [np.float16, jnp.bfloat16], ids=ids([np.float16, jnp.bfloat16]))
def test_half_inputs_f32_result(dt):
  a, b = rand(dt, (8, 64), 7), rand(dt, (64, 8), 8)
  # Products of half floats are exact in f32, so an f32 computation matches XLA closely.
  check(lambda a, b: (lax.dot(a, b, preferred_element_type=jnp.float32),
                      jnp.matmul(a, b, preferred_element_type=jnp.float32)), a, b,
        rtol=1e-5, atol=1e-5)


def test_f32_inputs_bf16_result():
  a, b = rand(np.float32, (4, 6), 9), rand(np.float32, (6, 3), 10)
  check(lambda a, b: lax.dot(a, b, preferred_element_type=jnp.bfloat16), a, b)


# ---- exact integer dots ---------------------------------------------------------------------


@pytest.mark.parametrize("dt", INTS, ids=ids(INTS))
def test_int_matmul(dt):
  a, b = rand(dt, (5, 7), 11), rand(dt, (7, 3), 12)
  check(lambda a, b: (a @ b, jnp.dot(a[0], b[:, 0])), a, b)


@pytest.mark.parametrize("dt", [np.int32, np.int64, np.uint32, np.int16],
                         ids=ids([np.int32, np.int64, np.uint32, np.int16]))
def test_int_matmul_large_values(dt):
  info = np.iinfo(dt)
  rng = np.random.default_rng(13)
  hi = min(info.max, 2**40)
  a = rng.integers(max(info.min, -hi), hi, (6, 40), dtype=np.int64).astype(dt)
  b = rng.integers(max(info.min, -hi), hi, (40, 5), dtype=np.int64).astype(dt)
  # Products overflow and wrap: exact modular results, which no float path reproduces.
  check(lambda a, b: lax.dot(a, b, preferred_element_type=dt), a, b)


def test_int32_exact_above_2_24():
  a = np.full((2, 300), 2**20 + 1, np.int32)
  b = np.full((300, 2), 3, np.int32)
  a[0, 0] = 7
  check(lambda a, b: lax.dot(a, b), a, b)


@pytest.mark.parametrize("k", [1, 100, 1024, 1025, 3000])
def test_int8_to_int32(k):
  a, b = rand(np.int8, (4, k), k, -128, 128), rand(np.int8, (k, 3), k + 1, -128, 128)
  a[0] = -128
  b[:, 0] = -128
  check(lambda a, b: lax.dot(a, b, preferred_element_type=jnp.int32), a, b)


@pytest.mark.parametrize("k", [255, 300, 600])
def test_uint8_to_int32(k):
  a = np.full((3, k), 255, np.uint8)
  b = np.full((k, 2), 255, np.uint8)
  a[1, ::2] = 17
  check(lambda a, b: (lax.dot(a, b, preferred_element_type=jnp.int32),
                      lax.dot(a, b, preferred_element_type=jnp.uint32)), a, b)


def test_int8_wraps_in_int8():
  a, b = rand(np.int8, (4, 50), 20, -128, 128), rand(np.int8, (50, 4), 21, -128, 128)
  check(lambda a, b: lax.dot(a, b), a, b)


def test_int8_mixed_signedness():
  a, b = rand(np.int8, (3, 700), 22, -128, 128), rand(np.uint8, (700, 2), 23, 0, 256)
  check(lambda a, b: lax.dot(a, b.astype(jnp.int8), preferred_element_type=jnp.int32), a, b)


def test_int_batched_einsum():
  a, b = rand(np.int32, (2, 3, 4), 24, -1000, 1000), rand(np.int32, (2, 4, 5), 25, -1000, 1000)
  check(lambda a, b: jnp.einsum("bij,bjk->bik", a, b), a, b)


def test_bool_dot():
  a, b = rand(np.bool_, (3, 5), 26), rand(np.bool_, (5, 4), 27)
  check(lambda a, b: (jnp.dot(a, b), lax.dot(a, b, preferred_element_type=jnp.int32)), a, b)


def test_int_to_float_preferred():
  a, b = rand(np.int8, (3, 5), 28), rand(np.int8, (5, 4), 29)
  check(lambda a, b: lax.dot(a, b, preferred_element_type=jnp.float32), a, b)


# ---- in context ----------------------------------------------------------------------------


def test_mlp_layer():
  x, w = rand(np.float32, (8, 16), 30), rand(np.float32, (16, 32), 31)
  bias = rand(np.float32, (32,), 32)
  check(lambda x, w, b: jnp.maximum(x @ w + b, 0).sum(axis=1), x, w, bias, rtol=1e-5, atol=1e-5)


def test_attention_scores():
  q, k = rand(np.float32, (2, 4, 8), 33), rand(np.float32, (2, 6, 8), 34)
  check(lambda q, k: jnp.einsum("bqd,bkd->bqk", q, k) / np.float32(8**0.5), q, k, rtol=1e-5,
        atol=1e-5)


def test_grad_of_matmul():
  import jax
  x, w = rand(np.float32, (6, 5), 35), rand(np.float32, (5, 3), 36)
  check(jax.grad(lambda a, w: jnp.sum(jnp.tanh(a @ w)), argnums=(0, 1)), x, w, rtol=1e-5,
        atol=1e-5)


# transpose(dot_general(a, b)) with the rhs's free dims first is computed as dot_general(b, a)
# (passes/transposed_dot.h); other permutations stay transposes of the product.
TRANSPOSED = [
    ((3, 4), (3, 5), (((0,), (0,)), ((), ())), (1, 0)),              # jax's weight gradient
    ((4, 3), (3, 5), (((1,), (0,)), ((), ())), (1, 0)),
    ((2, 3, 4), (2, 4, 5), (((2,), (1,)), ((0,), (0,))), (0, 2, 1)),  # batch dim stays first
    ((2, 3, 4), (2, 4, 5), (((2,), (1,)), ((0,), (0,))), (2, 1, 0)),  # batch dim moves: kept
    ((3, 6, 4), (4, 2, 5), (((2,), (0,)), ((), ())), (2, 3, 0, 1)),  # two free dims a side
]


@pytest.mark.parametrize("sa,sb,dims,perm", TRANSPOSED, ids=str)
@pytest.mark.parametrize("dt", [np.float32, jnp.bfloat16], ids=ids([np.float32, jnp.bfloat16]))
def test_transposed_products(dt, sa, sb, dims, perm):
  a, b = rand(dt, sa, 37), rand(dt, sb, 38)
  check(lambda a, b: lax.transpose(lax.dot_general(a, b, dims), perm), a, b, **tol(dt))


# Operands that are chains of transposes and size-1 reshapes (lower/shape_util.h, permuted_view
# takes them as one view of the chain's source): jnp.matmul drops a batch dim of size 1 after the
# heads' transposes ([1, H, 1, D] -> [H, 1, D]) and adds it back to the product. Sizes all 4 and
# small integers: any dim taken for another changes the exact values, not the shapes.
def heads_of_one_token(x, c):  # x [1, 1, 16], c [1, 4, 4, 4]: decode's q k^T
  return x.reshape(1, 1, 4, 4).transpose(0, 2, 1, 3) @ c.transpose(0, 1, 3, 2)


def cache_times_token(x, c):  # c [1, H, S, D] against the token's heads as a column
  return c @ x.reshape(1, 1, 4, 4).transpose(0, 2, 3, 1)


def unit_dims_contracted(x, c):  # a size-1 dim among the contracting ones
  q = x.reshape(4, 1, 4, 1).transpose(1, 3, 2, 0)  # [1, 1, 4, 4]
  return lax.dot_general(q, c[0].transpose(2, 1, 0)[None], (((0, 3), (0, 1)), ((), ())))


def einsum_over_unit_batch(x, c):
  return jnp.einsum("bhqd,bhkd->bhqk", x.reshape(1, 4, 1, 4), c.transpose(0, 1, 3, 2))


UNIT_VIEWS = [heads_of_one_token, cache_times_token, unit_dims_contracted,
              einsum_over_unit_batch]


@pytest.mark.parametrize("f", UNIT_VIEWS, ids=lambda f: f.__name__)
@pytest.mark.parametrize("dt", [np.float32, np.int32], ids=ids([np.float32, np.int32]))
def test_products_of_views_with_size_one_dims(dt, f):
  rng = np.random.default_rng(39)
  x = rng.integers(-4, 5, (1, 1, 16)).astype(dt)
  c = rng.integers(-4, 5, (1, 4, 4, 4)).astype(dt)
  check(f, x, c, exact=True)
