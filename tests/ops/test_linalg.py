"""Differential tests of linear algebra (src/lower/linalg*.cc, jax_plugins/mlx/linalg_rules.py).

Results that are unique are compared with jax's CPU backend directly: cholesky, triangular
solves, LU (partial pivoting picks the same rows), Householder QR, Hessenberg and tridiagonal
reductions (the same LAPACK reflector conventions), eigenvalues, singular values, solve / inv / det / slogdet / pinv / lstsq /
matrix_power / norm. Eigenvectors and singular vectors are unique only up to sign or phase, so
those are checked by their defining properties (residuals, orthonormality) and |<v_mlx, v_cpu>|
= 1 per column. Matrices are small (<= 16) and well conditioned; f16/bf16 inputs are computed in
f32 on mlx, and compared with CPU's f32 result rounded to the input dtype (LAPACK on CPU has no
half-float routines).

Tolerances: factorizations reorder floating-point work (MLX's LAPACK calls, our MLX-op
Householder loop, XLA's CPU kernels), so f32 results agree to ~n*eps*cond, not to a few ULP:
LINALG_TOL below is 1e-4 relative for f32/c64, and two roundings' worth for f16/bf16.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import jax.scipy.linalg as jsl
import numpy as np
import pytest
from jax import lax
from jax._src.lax import linalg as lax_linalg  # geqrf and householder_product are not public

from tests.ops.edge_values import rand
from tests.ops.harness import assert_same, check, run_on

LINALG_TOL = {"float32": 1e-4, "complex64": 1e-4, "float16": 8e-3, "bfloat16": 6e-2}


def tol(dt):
  t = LINALG_TOL[np.dtype(dt).name]
  return {"rtol": t, "atol": t}


def ids(dts):
  return [np.dtype(d).name for d in dts]


def cpu():
  return jax.devices("cpu")[0]


def mlx():
  return jax.devices("mlx")[0]


def general(shape, dt=np.float32, seed=0):
  """A well-conditioned general matrix (diagonally dominated by n)."""
  a = rand(np.complex64 if np.dtype(dt).kind == "c" else np.float32, shape, seed)
  n = shape[-1]
  if len(shape) >= 2 and shape[-2] == n:
    a = a + n * np.eye(n, dtype=a.dtype)
  return a.astype(dt)


def spd(shape, dt=np.float32, seed=0):
  """A Hermitian positive definite matrix with eigenvalues >= n."""
  x = rand(np.complex64 if np.dtype(dt).kind == "c" else np.float32, shape, seed)
  n = shape[-1]
  h = x @ np.conj(np.swapaxes(x, -1, -2)) + n * np.eye(n, dtype=x.dtype)
  return h.astype(dt)


def check_lowp(fn, *args, **kw):
  """fn on mlx with half-float args vs fn on CPU with the same values in f32, rounded back.

  jax >= 0.11 refuses f16/bf16 in its linalg functions before any backend runs ("TypeError: svd
  does not support float16"): where the CPU backend raises, the plugin must raise the same.
  """
  dt = args[0].dtype
  if jax.__version_info__ >= (0, 11):
    try:
      run_on(cpu(), fn, *args)
    except TypeError as refused:
      with pytest.raises(TypeError) as on_mlx:
        run_on(mlx(), fn, *args)
      assert str(on_mlx.value) == str(refused)
      return None
  want = run_on(cpu(), fn, *[a.astype(np.float32) for a in args])
  want = jax.tree_util.tree_map(lambda w: w.astype(dt) if w.dtype == np.float32 else w, want)
  got = run_on(mlx(), fn, *args)
  assert_same(got, want, **(kw or tol(dt)))
  return got


# ---- cholesky --------------------------------------------------------------------------------

SQUARE = [(0, 0), (1, 1), (2, 2), (5, 5), (16, 16), (3, 4, 4), (2, 3, 5, 5)]
HALF = [np.float16, jnp.bfloat16]


CPLX = [np.float32, np.complex64]


@pytest.mark.parametrize("dt", CPLX, ids=ids(CPLX))
@pytest.mark.parametrize("shape", SQUARE, ids=str)
def test_cholesky(shape, dt):
  x = spd(shape, dt)
  check(lambda a: (lax.linalg.cholesky(a), jnp.linalg.cholesky(a)), x, **tol(dt))


@pytest.mark.parametrize("dt", CPLX, ids=ids(CPLX))
@pytest.mark.parametrize("lower", [True, False])
def test_cholesky_scipy(lower, dt):
  x = spd((2, 6, 6), dt, seed=3)
  check(lambda a: jsl.cholesky(a, lower=lower), x, **tol(dt))


@pytest.mark.parametrize("dt", HALF, ids=ids(HALF))
@pytest.mark.parametrize("shape", [(1, 1), (4, 4), (2, 5, 5)], ids=str)
def test_cholesky_half(dt, shape):
  check_lowp(jnp.linalg.cholesky, spd(shape).astype(dt))


@pytest.mark.parametrize("dt", CPLX, ids=ids(CPLX))
def test_cholesky_not_positive_definite(dt):
  # jax's CPU rule turns a failed factorization (potrf info != 0) into NaN for that matrix only.
  x = np.stack([spd((3, 3)), np.array([[1, 2, 0], [2, 1, 0], [0, 0, 1]], np.float32),
                -np.eye(3, dtype=np.float32)]).astype(dt)
  got = check(jnp.linalg.cholesky, x, **tol(dt))
  assert np.isnan(got[1:]).any() and not np.isnan(got[0]).any()


# ---- triangular_solve ------------------------------------------------------------------------

@pytest.mark.parametrize("unit", [False, True])
@pytest.mark.parametrize("transpose", [False, True])
@pytest.mark.parametrize("lower", [False, True])
@pytest.mark.parametrize("left", [False, True])
@pytest.mark.parametrize("batch", [(), (2,)], ids=str)
def test_triangular_solve(batch, left, lower, transpose, unit):
  n, k = 5, 3
  # The other triangle holds large junk: the solve must not read it.
  a = general(batch + (n, n)) + np.triu(np.full((n, n), 40.0, np.float32), 1) * (1 if lower else 0)
  a = a + np.tril(np.full((n, n), 40.0, np.float32), -1) * (0 if lower else 1)
  b = rand(np.float32, batch + ((n, k) if left else (k, n)), 7)
  f = lambda a, b: lax.linalg.triangular_solve(a, b, left_side=left, lower=lower,
                                               transpose_a=transpose, unit_diagonal=unit)
  check(f, a, b, **tol(np.float32))


@pytest.mark.parametrize("conjugate", [False, True])
@pytest.mark.parametrize("transpose", [False, True])
@pytest.mark.parametrize("left", [False, True])
def test_triangular_solve_complex(left, transpose, conjugate):
  n, k = 4, 2
  a = np.tril(general((2, n, n), np.complex64, seed=3)) + np.triu(np.full((n, n), 9j), 1)
  b = rand(np.complex64, (2,) + ((n, k) if left else (k, n)), 8)
  f = lambda a, b: lax.linalg.triangular_solve(a.astype(np.complex64), b, left_side=left,
                                               lower=True, transpose_a=transpose,
                                               conjugate_a=conjugate)
  check(f, a.astype(np.complex64), b, **tol(np.complex64))


@pytest.mark.parametrize("shape", [((0, 0), (0, 3)), ((1, 1), (1, 1)), ((4, 4), (4, 0)),
                                   ((16, 16), (16, 16))], ids=str)
def test_solve_triangular_scipy(shape):
  a, b = np.tril(general(shape[0])), rand(np.float32, shape[1], 2)
  check(lambda a, b: jsl.solve_triangular(a, b, lower=True, trans="C"), a, b, **tol(np.float32))


@pytest.mark.parametrize("dt", HALF, ids=ids(HALF))
def test_triangular_solve_half(dt):
  a, b = np.tril(general((4, 4))).astype(dt), rand(np.float32, (4, 2), 1).astype(dt)
  check_lowp(lambda a, b: jsl.solve_triangular(a, b, lower=True), a, b)


# ---- QR (Qr + ProductOfElementaryHouseholderReflectors) --------------------------------------

QR_SHAPES = [(0, 0), (1, 1), (4, 4), (6, 3), (3, 6), (16, 16), (2, 5, 3), (3, 0)]
QR_DTYPES = [np.float32, np.complex64]


@pytest.mark.parametrize("mode", ["reduced", "complete", "r"])
@pytest.mark.parametrize("dt", QR_DTYPES, ids=ids(QR_DTYPES))
@pytest.mark.parametrize("shape", QR_SHAPES, ids=str)
def test_qr(shape, dt, mode):
  # Same Householder convention as LAPACK's geqrf/orgqr, so Q and R match CPU's directly.
  x = general(shape, dt)
  got = check(lambda a: jnp.linalg.qr(a, mode=mode), x, **tol(dt))
  if mode != "r":
    q, r = got
    np.testing.assert_allclose(q @ r, x, atol=1e-4 * max(1, shape[-1]))
    eye = np.eye(q.shape[-1])
    np.testing.assert_allclose(np.conj(np.swapaxes(q, -1, -2)) @ q, np.broadcast_to(
        eye, q.shape[:-2] + eye.shape), atol=1e-5)


def test_geqrf_and_householder_product():
  x = general((2, 6, 4), seed=5)
  check(lambda a: lax_linalg.geqrf(a), x, **tol(np.float32))
  a, taus = lax_linalg.geqrf(x)
  check(lambda a, t: lax_linalg.householder_product(a, t[..., :3]), np.asarray(a),
        np.asarray(taus), **tol(np.float32))


def test_qr_rank_deficient():
  # A zero column needs no reflection (tau = 0), exercising the larfg shortcut.
  x = general((5, 4))
  x[:, 1] = 0
  x[2:, 2] = 0
  check(lambda a: jnp.linalg.qr(a), x, **tol(np.float32))


@pytest.mark.parametrize("dt", QR_DTYPES, ids=ids(QR_DTYPES))
@pytest.mark.parametrize("shape", QR_SHAPES, ids=str)
def test_qr_with_column_pivoting(shape, dt):
  # jax.scipy.linalg.qr(pivoting=True): LAPACK geqp3 on jax's CPU, our jaxmlx.geqp3 here. The
  # permutation must be the same (exact: it is an int array), Q and R within tolerance.
  x = rand(np.complex64 if np.dtype(dt).kind == "c" else np.float32, shape, seed=3)
  q, r, p = check(lambda a: lax.linalg.qr(a, pivoting=True, full_matrices=False), x, **tol(dt))
  assert p.dtype == np.int32
  np.testing.assert_allclose(q @ r, np.take_along_axis(x, p[..., None, :], -1), atol=1e-4)
  if shape[-2] and shape[-1] > 1:  # |R|'s diagonal does not increase: the pivoting's point
    d = np.abs(np.diagonal(r, axis1=-2, axis2=-1))
    assert np.all(np.diff(d, axis=-1) <= 1e-5), d


def test_qr_with_column_pivoting_of_rank_deficient_matrices():
  # A zero column stays zero under every reflection: it is pivoted last and needs no reflector,
  # as in LAPACK. (A column that is a multiple of another leaves a residue of rounding errors,
  # whose reflector is arbitrary: not compared.)
  x = rand(np.float32, (3, 6, 5), seed=4)
  x[0, :, 1] = 0
  x[1, :, 4] = 0
  x[2, :, 0] = x[2, :, 3] = 0
  _, _, p = check(lambda a: jsl.qr(a, pivoting=True, mode="economic"), x, **tol(np.float32))
  assert p[0, -1] == 1 and p[1, -1] == 4 and sorted(p[2, -2:]) == [0, 3], p


def test_geqp3_keeps_fixed_columns_first():
  # LAPACK's jpvt: a column with jpvt != 0 moves to the front (in order) and is not pivoted;
  # the rest pivot freely. Each matrix of the batch fixes other columns.
  x = rand(np.float32, (3, 5, 4), seed=6)
  jpvt = np.array([[0, 1, 0, 1], [0, 0, 0, 0], [3, 0, 0, 7]], np.int32)
  a, p, taus = check(lax_linalg.geqp3, x, jpvt, **tol(np.float32))
  assert p[0, :2].tolist() == [2, 4] and p[2, :2].tolist() == [1, 4], p  # 1-based


def test_qr_with_column_pivoting_derivative():
  x = rand(np.float32, (5, 4), seed=7)
  t = rand(np.float32, (5, 4), seed=8)
  check(lambda a, da: jax.jvp(lambda b: jsl.qr(b, pivoting=True, mode="economic")[:2], (a,),
                              (da,)), x, t, **tol(np.float32))


@pytest.mark.parametrize("dt", HALF, ids=ids(HALF))
def test_qr_half(dt):
  check_lowp(lambda a: jnp.linalg.qr(a)[1], general((5, 3)).astype(dt))


# ---- eigh ------------------------------------------------------------------------------------

EIGH_SHAPES = [(0, 0), (1, 1), (4, 4), (16, 16), (3, 5, 5)]


def assert_same_columns_up_to_phase(v, v_cpu, atol):
  # Per column: |<v, v_cpu>| = 1 (unit vectors equal up to a sign or phase).
  inner = np.abs(np.sum(np.conj(v) * v_cpu, axis=-2))
  np.testing.assert_allclose(inner, np.ones_like(inner), atol=atol)


@pytest.mark.parametrize("lower", [True, False])
@pytest.mark.parametrize("dt", QR_DTYPES, ids=ids(QR_DTYPES))
@pytest.mark.parametrize("shape", EIGH_SHAPES, ids=str)
def test_eigh(shape, dt, lower):
  x = spd(shape, dt, seed=1) - 2 * shape[-1] * np.eye(shape[-1], dtype=dt)  # mixed signs
  f = lambda a: lax.linalg.eigh(a, lower=lower, symmetrize_input=False)
  v_cpu, w_cpu = run_on(cpu(), f, x)
  v, w = run_on(mlx(), f, x)
  assert v.dtype == v_cpu.dtype and w.dtype == w_cpu.dtype and v.shape == v_cpu.shape
  assert_same(w, w_cpu, **tol(dt))
  assert np.all(np.diff(w, axis=-1) >= 0), "eigenvalues must ascend"
  np.testing.assert_allclose(x @ v, v * w[..., None, :], atol=1e-4 * max(1, shape[-1]) ** 2)
  assert_same_columns_up_to_phase(v, v_cpu, 1e-4)


def test_eigh_subset_by_index():
  # CPU has no subset_by_index: compare with the slice of its full decomposition.
  x = spd((2, 6, 6), seed=2)
  v, w = run_on(mlx(), lambda a: lax.linalg.eigh(a, subset_by_index=(1, 4)), x)
  v_cpu, w_cpu = run_on(cpu(), lambda a: lax.linalg.eigh(a), x)
  assert_same(w, w_cpu[..., 1:4], **tol(np.float32))
  assert_same_columns_up_to_phase(v, v_cpu[..., 1:4], 1e-4)


@pytest.mark.parametrize("dt", HALF, ids=ids(HALF))
def test_eigvalsh_half(dt):
  check_lowp(jnp.linalg.eigvalsh, spd((2, 4, 4)).astype(dt))


def test_eigh_non_finite_gives_nan():
  x = np.stack([spd((3, 3)), spd((3, 3), seed=1)])
  x[1, 0, 1] = x[1, 1, 0] = np.nan
  check(jnp.linalg.eigvalsh, x, **tol(np.float32))


# ---- svd -------------------------------------------------------------------------------------

SVD_SHAPES = [(1, 1), (4, 4), (6, 3), (3, 6), (16, 16), (2, 4, 3), (0, 3), (3, 0)]


@pytest.mark.parametrize("full", [True, False])
@pytest.mark.parametrize("dt", QR_DTYPES, ids=ids(QR_DTYPES))
@pytest.mark.parametrize("shape", SVD_SHAPES, ids=str)
def test_svd(shape, dt, full):
  x = general(shape, dt, seed=4)
  u_cpu, s_cpu, vt_cpu = run_on(cpu(), lambda a: jnp.linalg.svd(a, full_matrices=full), x)
  u, s, vt = run_on(mlx(), lambda a: jnp.linalg.svd(a, full_matrices=full), x)
  assert (u.shape, s.shape, vt.shape) == (u_cpu.shape, s_cpu.shape, vt_cpu.shape)
  assert (u.dtype, s.dtype, vt.dtype) == (u_cpu.dtype, s_cpu.dtype, vt_cpu.dtype)
  assert_same(s, s_cpu, **tol(dt))
  k = s.shape[-1]
  recon = (u[..., :, :k] * s[..., None, :]) @ vt[..., :k, :]
  np.testing.assert_allclose(recon, x, atol=1e-4 * max(1, max(shape[-2:])))
  for m in (u, np.conj(np.swapaxes(vt, -1, -2))):
    eye = np.eye(m.shape[-1])
    np.testing.assert_allclose(np.conj(np.swapaxes(m, -1, -2)) @ m,
                               np.broadcast_to(eye, m.shape[:-2] + eye.shape), atol=1e-5)
  assert_same_columns_up_to_phase(u[..., :, :k], u_cpu[..., :, :k], 1e-3)


@pytest.mark.parametrize("shape", [(5, 5), (7, 3), (2, 3, 6)], ids=str)
def test_svd_values_only(shape):
  check(lambda a: jnp.linalg.svd(a, compute_uv=False), general(shape, seed=5), **tol(np.float32))


def test_svd_subset_by_index():
  x = general((6, 4), seed=6)
  u, s, vt = run_on(mlx(), lambda a: lax.linalg.svd(a, full_matrices=False,
                                                    subset_by_index=(1, 3)), x)
  u_cpu, s_cpu, vt_cpu = run_on(cpu(), lambda a: lax.linalg.svd(a, full_matrices=False), x)
  assert_same(s, s_cpu[1:3], **tol(np.float32))
  assert_same_columns_up_to_phase(u, u_cpu[:, 1:3], 1e-4)
  assert_same_columns_up_to_phase(vt.T, vt_cpu[1:3].T, 1e-4)


@pytest.mark.parametrize("dt", HALF, ids=ids(HALF))
def test_svd_half(dt):
  check_lowp(lambda a: jnp.linalg.svd(a, compute_uv=False), general((5, 3), seed=2).astype(dt))


# ---- eig -------------------------------------------------------------------------------------

def sort_complex(w):
  return np.sort_complex(np.round(w.astype(np.complex128), 4)) if w.size else w


@pytest.mark.parametrize("dt", QR_DTYPES, ids=ids(QR_DTYPES))
@pytest.mark.parametrize("shape", [(0, 0), (1, 1), (4, 4), (8, 8), (2, 5, 5)], ids=str)
def test_eig(shape, dt):
  # Eigenvalue order is not specified (MLX's and LAPACK's differ): compare sorted values.
  x = rand(dt, shape, 9)
  w_cpu, v_cpu = run_on(cpu(), jnp.linalg.eig, x)
  w, v = run_on(mlx(), jnp.linalg.eig, x)
  assert (w.dtype, v.dtype, w.shape, v.shape) == (w_cpu.dtype, v_cpu.dtype, w_cpu.shape,
                                                  v_cpu.shape)
  for i in np.ndindex(w.shape[:-1]):
    np.testing.assert_allclose(sort_complex(w[i]), sort_complex(w_cpu[i]), atol=2e-3)
  np.testing.assert_allclose(x @ v, v * w[..., None, :], atol=1e-4 * max(1, shape[-1]))
  np.testing.assert_allclose(np.linalg.norm(v, axis=-2), np.ones(w.shape), atol=1e-5)


def test_eigvals():
  x = rand(np.float32, (6, 6), 3)
  w_cpu = run_on(cpu(), jnp.linalg.eigvals, x)
  w = run_on(mlx(), jnp.linalg.eigvals, x)
  np.testing.assert_allclose(sort_complex(w), sort_complex(w_cpu), atol=2e-3)


def test_eig_left_eigenvectors_refused():
  f = lambda a: lax.linalg.eig(a, compute_left_eigenvectors=True)
  with pytest.raises(NotImplementedError, match="compute_left_eigenvectors"):
    jax.jit(f).lower(jax.device_put(np.eye(3, dtype=np.float32), mlx()))


# ---- LU --------------------------------------------------------------------------------------

LU_SHAPES = [(0, 0), (1, 1), (4, 4), (5, 3), (3, 5), (16, 16), (2, 6, 6)]


@pytest.mark.parametrize("dt", CPLX, ids=ids(CPLX))
@pytest.mark.parametrize("shape", LU_SHAPES, ids=str)
def test_lu(shape, dt):
  # Partial pivoting picks the same rows as LAPACK: pivots and permutation bit-exact.
  check(lax.linalg.lu, rand(dt, shape, 11), **tol(dt))


@pytest.mark.parametrize("shape", [(4, 4), (2, 5, 5)], ids=str)
def test_lu_factor_scipy(shape):
  check(jsl.lu_factor, rand(np.float32, shape, 12), **tol(np.float32))


def test_lu_singular():
  x = np.array([[0, 0, 0], [1, 2, 3], [2, 4, 6]], np.float32)
  check(lax.linalg.lu, x, **tol(np.float32))


@pytest.mark.parametrize("size", [4, 6])
def test_lu_pivots_to_permutation(size):
  piv = np.array([[3, 1, 3, 3], [0, 2, 2, 3]], np.int32)
  check(lambda p: lax.linalg.lu_pivots_to_permutation(p, size), piv)


@pytest.mark.parametrize("dt", HALF, ids=ids(HALF))
def test_lu_half(dt):
  check_lowp(lambda a: lax.linalg.lu(a)[0], general((4, 4)).astype(dt))


# ---- jnp.linalg built on the above -----------------------------------------------------------

SOLVE_SHAPES = [(1, 1), (4, 4), (16, 16), (3, 5, 5)]


@pytest.mark.parametrize("dt", CPLX, ids=ids(CPLX))
@pytest.mark.parametrize("shape", SOLVE_SHAPES, ids=str)
def test_solve_inv(shape, dt):
  a, b = general(shape, dt, seed=1), rand(dt, shape[:-1] + (2,), 2)
  check(lambda a, b: (jnp.linalg.solve(a, b), jnp.linalg.inv(a)), a, b, **tol(dt))


@pytest.mark.parametrize("dt", CPLX, ids=ids(CPLX))
@pytest.mark.parametrize("shape", SOLVE_SHAPES + [(0, 0)], ids=str)
def test_det_slogdet(shape, dt):
  a = (general(shape, dt, seed=3) / max(1, shape[-1])).astype(dt)  # keep det moderate
  check(lambda a: (jnp.linalg.det(a), *jnp.linalg.slogdet(a)), a, **tol(dt))


@pytest.mark.parametrize("shape", [(4, 4), (6, 3), (3, 6), (2, 4, 5)], ids=str)
def test_pinv(shape):
  check(jnp.linalg.pinv, general(shape, seed=4), **tol(np.float32))


@pytest.mark.parametrize("shape", [((6, 3), (6,)), ((6, 3), (6, 2)), ((4, 4), (4, 1))], ids=str)
def test_lstsq(shape):
  a, b = general(shape[0], seed=5), rand(np.float32, shape[1], 6)
  check(lambda a, b: jnp.linalg.lstsq(a, b)[:3], a, b, **tol(np.float32))


@pytest.mark.parametrize("power", [0, 1, 3, -2])
def test_matrix_power(power):
  check(lambda a: jnp.linalg.matrix_power(a, power), general((4, 4), seed=6) / 4,
        **tol(np.float32))


@pytest.mark.parametrize("ord", [2, -2, "nuc", "fro", 1, np.inf])
def test_matrix_norm(ord):
  check(lambda a: jnp.linalg.norm(a, ord=ord, axis=(-2, -1)), rand(np.float32, (2, 5, 4), 7),
        **tol(np.float32))


def test_cond_and_matrix_rank():
  a = general((5, 5), seed=8)
  check(lambda a: (jnp.linalg.cond(a), jnp.linalg.matrix_rank(a)), a, **tol(np.float32))


def test_cho_solve():
  a, b = spd((5, 5), seed=9), rand(np.float32, (5, 2), 10)
  check(lambda a, b: jsl.cho_solve(jsl.cho_factor(a), b), a, b, **tol(np.float32))


# ---- gradients -------------------------------------------------------------------------------

GRADS = {
    "cholesky": (lambda a: jnp.sum(jnp.linalg.cholesky(a) ** 2), spd),
    "solve": (lambda a: jnp.sum(jnp.linalg.solve(a, jnp.arange(a.shape[-1], dtype=a.dtype))),
              general),
    "inv": (lambda a: jnp.sum(jnp.linalg.inv(a)), general),
    "det": (lambda a: jnp.sum(jnp.linalg.det(a / a.shape[-1])), general),
    "eigh": (lambda a: jnp.sum(jnp.linalg.eigvalsh(a) ** 3), spd),
    "eigh_vectors": (lambda a: jnp.sum(jnp.abs(jnp.linalg.eigh(a)[1][..., 0])), spd),
    "svd": (lambda a: jnp.sum(jnp.linalg.svd(a, compute_uv=False)), general),
    "qr": (lambda a: jnp.sum(jnp.abs(jnp.linalg.qr(a)[1])), general),
    "triangular_solve": (lambda a: jnp.sum(jsl.solve_triangular(a, jnp.ones(a.shape[-1], a.dtype),
                                                               lower=True)), general),
}


@pytest.mark.parametrize("shape", [(4, 4), (2, 3, 3)], ids=str)
@pytest.mark.parametrize("name", list(GRADS))
def test_grad(name, shape):
  f, make = GRADS[name]
  a = make(shape, seed=13)
  if name == "triangular_solve":
    a = np.tril(a)
  check(jax.grad(f), a, rtol=5e-4, atol=5e-4)  # derivatives chain several solves


# ---- hessenberg (jaxmlx.hessenberg, LAPACK gehrd's convention) ------------------------------

@pytest.mark.parametrize("dt", CPLX, ids=ids(CPLX))
@pytest.mark.parametrize("shape", [(1, 1), (2, 2), (5, 5), (12, 12), (2, 4, 4)], ids=str)
def test_hessenberg(shape, dt):
  # Same reflectors as gehrd: the packed result, taus, H and Q match CPU's directly.
  x = rand(dt, shape, 14)
  check(lax_linalg.hessenberg, x, **tol(dt))
  if len(shape) == 2:
    h, q = check(lambda a: jsl.hessenberg(a, calc_q=True), x, **tol(dt))
    np.testing.assert_allclose(q @ h @ np.conj(q.T), x, atol=1e-4 * shape[-1])
    np.testing.assert_array_equal(np.tril(h, -2), 0)


@pytest.mark.parametrize("lower", [True, False])
@pytest.mark.parametrize("dt", CPLX, ids=ids(CPLX))
@pytest.mark.parametrize("shape", [(1, 1), (2, 2), (5, 5), (12, 12), (2, 4, 4)], ids=str)
def test_tridiagonal(shape, dt, lower):
  # LAPACK sytrd/hetrd's packed form, d, e and taus, directly; the unread triangle is kept.
  x = rand(dt, shape, 15)
  check(lambda a: lax.linalg.tridiagonal(a, lower=lower), x, **tol(dt))


# ---- tridiagonal_solve(perturb_singular=True), eigh_tridiagonal's eigenvectors -----------------

def tridiagonal_system(n, dt, batch=(), k=3, seed=0):
  rng = np.random.default_rng(seed)
  draw = lambda *s: (rng.standard_normal(s) + (1j * rng.standard_normal(s) if np.dtype(dt).kind
                                                   == "c" else 0)).astype(dt)
  dl, d, du, b = draw(*batch, n), draw(*batch, n), draw(*batch, n), draw(*batch, n, k)
  dl[..., :1] = 0  # jax's convention: dl[0] and du[-1] are not read as matrix entries
  du[..., -1:] = 0
  return dl, d, du, b


def solve_perturbed(dl, d, du, b):
  with jax.numpy_dtype_promotion("strict"):  # as jax's own tests trace it
    return lax_linalg.tridiagonal_solve(dl, d, du, b, perturb_singular=True)


@pytest.mark.parametrize("dt", QR_DTYPES, ids=ids(QR_DTYPES))
@pytest.mark.parametrize("n,batch", [(0, ()), (1, ()), (2, ()), (3, (2,)), (9, ()), (7, (2, 3))],
                         ids=str)
def test_tridiagonal_solve_perturbed(n, batch, dt):
  # jax's CPU backend runs jaxlib's kernel (LAPACK xLAGTF + xLAGTS with perturbed pivots); ours
  # the same steps in jax ops (python/jax_plugins/mlx/linalg_rules.py): the same roundings.
  check(solve_perturbed, *tridiagonal_system(n, dt, batch), exact=True)


def test_tridiagonal_solve_perturbed_of_singular_matrices():
  # T - lambda I for an eigenvalue lambda of T, zero pivots perturbed from eps * max|U| up, and
  # an all-zero matrix (every pivot grown from the smallest normal float until b / p fits).
  n = 6
  lam = 2 - 2 * np.cos(np.pi * 2 / (n + 1))  # of the [-1, 2, -1] Toeplitz matrix
  dl, du = np.full(n, -1, np.float32), np.full(n, -1, np.float32)
  dl[0] = du[-1] = 0
  b = np.ones((n, 2), np.float32)
  x = check(solve_perturbed, dl, np.full(n, 2 - lam, np.float32), du, b, exact=True)
  assert np.all(np.isfinite(x)), x
  z = np.zeros(4, np.float32)
  x = check(solve_perturbed, z, z, z, np.array([[3.0], [0.5], [-2.0], [1e-3]], np.float32),
            exact=True)
  assert np.all(np.isfinite(x)), x


@pytest.mark.parametrize("dt", QR_DTYPES, ids=ids(QR_DTYPES))
@pytest.mark.parametrize("n", [1, 2, 8, 30])
def test_eigh_tridiagonal_eigenvectors(n, dt):
  # Inverse iteration with the perturbed solve: jax refuses it on platforms other than CPU and
  # GPU. Eigenvalues as jax's CPU backend's, eigenvectors up to a sign or phase.
  rng = np.random.default_rng(n)
  a = rng.uniform(size=n).astype(dt)  # a Hermitian matrix's real diagonal, in b's dtype
  b = (rng.uniform(size=n - 1) + (0.5j * rng.uniform(size=n - 1) if dt == np.complex64 else 0)
       ).astype(dt)
  def f(a, b):
    with jax.numpy_dtype_promotion("strict"):
      return jsl.eigh_tridiagonal(a, b, eigvals_only=False)
  w_cpu, v_cpu = run_on(cpu(), f, a, b)
  w, v = run_on(mlx(), f, a, b)
  assert_same(w, w_cpu, **tol(dt))
  assert v.dtype == v_cpu.dtype
  assert_same_columns_up_to_phase(v, v_cpu, atol=1e-4)
  t = np.diag(a) + np.diag(b, 1) + np.diag(np.conj(b), -1)
  np.testing.assert_allclose(t @ v, v * w[None, :], atol=1e-5 * n)


# ---- what is refused -------------------------------------------------------------------------

@pytest.mark.parametrize("name,fn", [
    ("schur", lambda a: jsl.schur(a)),
], ids=["schur"])
def test_unimplemented_raise_naming_the_op(name, fn):
  with pytest.raises(NotImplementedError, match=name):
    jax.jit(fn).lower(jax.device_put(np.eye(3, dtype=np.float32), mlx()))


@pytest.mark.parametrize("name,fn,dt", [
    ("cholesky", jnp.linalg.cholesky, np.float64),
    ("triangular_solve", lambda a: jsl.solve_triangular(a, a), np.float64),
    ("f64", lambda a: lax.linalg.eigh(a, symmetrize_input=False), np.float64),
], ids=["cholesky-f64", "trsolve-f64", "eigh-f64"])
def test_refused_types_name_the_op(name, fn, dt):
  x = spd((3, 3)).astype(dt)
  with pytest.raises(Exception, match=name):
    jax.jit(fn)(jax.device_put(x, mlx()))


@pytest.mark.parametrize("shape", [(100000, 2), (2, 100000), (3, 40, 5)])
def test_reduced_svd_of_very_unequal_sides(shape):
  # The reduced SVD must not build the full m x m factor: for 100000 x 2 that is 40 GB (jax's
  # linalg_test testPinv crashed the process this way). pinv uses it. jax's CPU backend itself
  # runs out of memory here (its LAPACK call asks for an m x m workspace), so the reference is
  # numpy's reduced SVD in float64.
  a = np.random.default_rng(11).standard_normal(shape).astype(np.float32)
  mlx = jax.devices("mlx")[0]
  u, s, vt = jax.jit(lambda x: jnp.linalg.svd(x, full_matrices=False))(jax.device_put(a, mlx))
  np.testing.assert_allclose(np.asarray(s), np.linalg.svd(a.astype(np.float64), compute_uv=False),
                             rtol=1e-4)
  rec = np.einsum("...ik,...k,...kj->...ij", np.asarray(u), np.asarray(s), np.asarray(vt))
  np.testing.assert_allclose(rec, a, atol=1e-3 * np.abs(a).max())
  p = jax.jit(jnp.linalg.pinv)(jax.device_put(a, mlx))
  np.testing.assert_allclose(np.asarray(p), np.linalg.pinv(a.astype(np.float64)), rtol=1e-3,
                             atol=1e-6)


# ---- singular triangles ----------------------------------------------------------------------

@pytest.mark.parametrize("dt", CPLX, ids=ids(CPLX))
def test_triangular_solve_singular_is_not_finite(dt):
  # LAPACK's trsm divides by the zero pivot (inf/NaN) where MLX's inversion throws; the plugin
  # returns NaN for that matrix and solves the others of the batch normally.
  a = np.stack([np.array([[1, 1], [0, 0]], np.float32), np.array([[2, 1], [0, 3]], np.float32)])
  b = np.ones((2, 2, 1), np.float32)
  a, b = a.astype(dt), b.astype(dt)
  f = lambda a, b: lax.linalg.triangular_solve(a, b, left_side=True)
  want, got = run_on(cpu(), f, a, b), run_on(mlx(), f, a, b)
  assert not np.all(np.isfinite(want[0])) and not np.all(np.isfinite(got[0]))
  assert_same(got[1], want[1], **tol(dt))


@pytest.mark.parametrize("rank", [1, 2, 3])
def test_det_grad_of_singular_matrices(rank):
  # jax's det gradient (cofactor solve) filters singular matrices by isnan/isinf of a
  # triangular solve: rank n-1 keeps its cofactors, lower ranks give zeros.
  rng = np.random.default_rng(rank)
  u, v = rng.standard_normal((2, 3, rank)), rng.standard_normal((2, rank, 3))
  a = (u @ v).astype(np.float32)
  check(jax.grad(lambda a: jnp.linalg.det(a).sum()), a, rtol=1e-4, atol=1e-5)
