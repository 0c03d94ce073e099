"""Lowering rules for the linalg primitives jax lowers only through LAPACK / cuSOLVER.

For a plugin platform jax has no rule for eigh, eig, svd (its default is the TPU one, built on
eigh), schur, hessenberg or tridiagonal, and lowers lu and lu_pivots_to_permutation to loops of
gathers and scatters. These rules emit our own custom calls instead, which
src/lower/linalg.cc implements with MLX's routines:

    jaxmlx.eigh(a) -> (v, w)                  backend_config "lower=L,lo=I[,hi=J]"
    jaxmlx.svd(a) -> (s[, u, vt])             "full=F,uv=U,lo=I[,hi=J]"
    jaxmlx.eig(a) -> (w[, vr])                "vr=R"
    jaxmlx.lu(a) -> (lu, pivots, permutation)
    jaxmlx.lu_pivots_to_permutation(p) -> permutation
    jaxmlx.hessenberg(a) -> (a', taus)        LAPACK gehrd's packed form
    jaxmlx.tridiagonal(a) -> (a', d, e, taus) LAPACK sytrd/hetrd's, "lower=L"
    jaxmlx.geqp3(a, jpvt) -> (a', jpvt', taus) LAPACK geqp3's (QR with column pivoting)

tridiagonal_solve with perturb_singular=True (eigh_tridiagonal's inverse iteration), which jax
refuses on platforms without jaxlib's CPU or GPU kernel, is that kernel's algorithm in jax ops.

(backend_config is a string of comma-separated integer settings; without hi, every eigenvalue or
singular value. With symbolic dims (jax.export with shape polymorphism) the result shapes follow
the operands as shape operands, `indices_of_shape_operands`, which jax's shape refinement reads
when the export is called; the targets are registered as stable for jax.export, see TARGETS.)
cholesky, triangular_solve and qr need no rule here: jax's default lowerings
(stablehlo.cholesky, stablehlo.triangular_solve, the Qr / ProductOfElementaryHouseholderReflectors
custom calls) are implemented in C++.
hessenberg, tridiagonal and geqp3 are built from Householder reflectors in C++; schur (which needs a
QR-iteration eigensolver MLX lacks) raises NotImplementedError naming the primitive.
"""

from __future__ import annotations

from jax._src import core
from jax._src.interpreters import mlir
from jax._src.lax import linalg as lax_linalg


def _custom_call(ctx, target, operands, config=""):
  result_types = [mlir.aval_to_ir_type(ctx.module_context, a) for a in ctx.avals_out]
  result_shapes = None
  if any(not core.is_constant_shape(a.shape) for a in (*ctx.avals_in, *ctx.avals_out)):
    # Symbolic dims (jax.export with shape polymorphism): the result shapes travel as operands
    # (indices_of_shape_operands) that jax's shape refinement reads when the exported function
    # is called at concrete shapes; src/lower/linalg.cc then sees static types and reads only
    # the leading operands.
    result_shapes = [mlir.eval_dynamic_shape_as_tensor(ctx, a.shape) for a in ctx.avals_out]
  op = mlir.custom_call(target, result_types=result_types, operands=list(operands),
                        backend_config=config, api_version=1, result_shapes=result_shapes)
  return op.results


def _eigh_rule(ctx, operand, *, lower, sort_eigenvalues, subset_by_index, algorithm):
  # MLX (LAPACK syevd) always sorts ascending, which also serves sort_eigenvalues=False; the
  # algorithm choice (QR, Jacobi, QDWH) does not change the result's definition.
  del sort_eigenvalues, algorithm
  # Without a subset, no hi: linalg.cc takes n (which may be a symbolic dim here).
  subset = "lo=0" if subset_by_index is None else "lo={},hi={}".format(*subset_by_index)
  return _custom_call(ctx, "jaxmlx.eigh", [operand], f"lower={int(lower)},{subset}")


def _svd_rule(ctx, operand, *, full_matrices, compute_uv, subset_by_index, algorithm=None):
  del algorithm  # every algorithm computes the same decomposition
  m, n = ctx.avals_in[0].shape[-2:]
  if m == 0 or n == 0:
    return mlir.lower_fun(lax_linalg._empty_svd, multiple_results=True)(
        ctx, operand, full_matrices=full_matrices, compute_uv=compute_uv)
  subset = "lo=0" if subset_by_index is None else "lo={},hi={}".format(*subset_by_index)
  config = f"full={int(full_matrices)},uv={int(compute_uv)},{subset}"
  return _custom_call(ctx, "jaxmlx.svd", [operand], config)


def _eig_rule(ctx, operand, *, compute_left_eigenvectors, compute_right_eigenvectors,
              enable_eigvec_derivs=False, implementation=None, **_):
  del enable_eigvec_derivs, implementation
  if compute_left_eigenvectors:
    raise NotImplementedError(
        "jax-mlx: eig with compute_left_eigenvectors=True is not supported on the mlx platform "
        "(MLX's eig computes right eigenvectors only)")
  return _custom_call(ctx, "jaxmlx.eig", [operand], f"vr={int(compute_right_eigenvectors)}")


def _lu_rule(ctx, operand):
  return _custom_call(ctx, "jaxmlx.lu", [operand])


def _lu_pivots_to_permutation_rule(ctx, pivots, *, permutation_size):
  return _custom_call(ctx, "jaxmlx.lu_pivots_to_permutation", [pivots],
                      f"size={permutation_size}")


def _hessenberg_rule(ctx, operand):
  return _custom_call(ctx, "jaxmlx.hessenberg", [operand])


def _tridiagonal_rule(ctx, operand, *, lower):
  return _custom_call(ctx, "jaxmlx.tridiagonal", [operand], f"lower={int(lower)}")


def _unsupported(name):
  def rule(ctx, *args, **kwargs):
    raise NotImplementedError(
        f"jax-mlx: {name} is not implemented on the mlx platform (MLX has no {name} routine)")
  return rule


def _geqp3_rule(ctx, a, jpvt, *, use_magma=None, **_):
  del use_magma  # a GPU setting of jax's own lowering
  return _custom_call(ctx, "jaxmlx.geqp3", [a, jpvt])


def _maybe_perturb_pivot(perturb, p, r):
  """jaxlib's MaybePerturbPivot (after LAPACK xLAGTS): grows a pivot |p| < 1 by `perturb`,
  doubling it each time, or scales p and the row r up, until r / p cannot overflow."""
  import jax.numpy as jnp
  from jax import lax
  import numpy as np
  real = np.dtype(jnp.real(p).dtype)
  one, info = real.type(1), np.finfo(real)
  small = one / info.max
  safemin = info.tiny if small < info.tiny else small * (one + info.eps)  # LAPACK's xLAMCH
  bignum = one / safemin
  max_factor = jnp.max(jnp.abs(r))
  perturb = jnp.copysign(jnp.maximum(jnp.abs(perturb), safemin), jnp.real(p))

  def cond(s):
    p, _, _, stop = s
    return jnp.logical_and(jnp.abs(p) < one, jnp.logical_not(stop))

  def body(s):
    p, r, perturb, _ = s
    a = jnp.abs(p)
    grow = jnp.where(a < safemin, (a == 0) | (max_factor * safemin > a), max_factor > a * bignum)
    scale = (a < safemin) & jnp.logical_not(grow)
    big = jnp.asarray(bignum, p.dtype)  # jax's strict dtype promotion: no real * complex
    p = jnp.where(grow, p + perturb.astype(p.dtype), jnp.where(scale, p * big, p))
    r = jnp.where(scale, r * big, r)
    return p, r, jnp.where(grow, perturb * 2, perturb), jnp.logical_not(grow)

  p, r, _, _ = lax.while_loop(cond, body, (p, r, perturb, jnp.asarray(False)))
  return p, r


def _tridiagonal_solve_perturbed(dl, d, du, b):
  """jaxlib's SolveWithGaussianEliminationWithPivotingAndPerturbSingular (LAPACK xLAGTF +
  xLAGTS) for one system: row-pivoted LU of the tridiagonal matrix, with tiny pivots of U
  perturbed by eps * max|U| in the back substitution so that a singular matrix (inverse
  iteration's T - lambda I) gives a finite solution. dl, d, du: (n,), b: (n, k)."""
  import jax.numpy as jnp
  from jax import lax
  n = d.shape[0]
  if n == 0:
    return b
  real = jnp.real(d).dtype
  eps = jnp.finfo(real).eps
  zero = jnp.zeros((), d.dtype)
  if n == 1:
    p, r = _maybe_perturb_pivot(eps * jnp.abs(d[0]), d[0], b[0])
    return (r / p)[None]  # divided, where the rows of larger systems multiply by 1 / p

  def forward(carry, k):
    u0, u1, xk, scale1, max_u = carry
    sub, dg, sup, rhs = dl[k + 1], d[k + 1], du[k + 1], b[k + 1]
    inner = k < n - 2
    scale2 = jnp.abs(sub) + jnp.abs(dg) + jnp.where(inner, jnp.abs(sup), 0)
    piv1 = jnp.where(u0 == zero, 0, jnp.abs(u0) / scale1)
    piv2 = jnp.abs(sub) / scale2
    keep = (sub == zero) | (piv2 <= piv1)
    factor_keep = jnp.where(sub == zero, zero, sub / jnp.where(u0 == zero, 1, u0))
    factor_swap = u0 / jnp.where(sub == zero, 1, sub)
    # Row k as final, then row k + 1 as carried.
    row_u = jnp.where(keep, jnp.stack([u0, u1, zero]),
                      jnp.stack([sub, dg, jnp.where(inner, sup, zero)]))
    row_x = jnp.where(keep, xk, rhs)
    nu0 = jnp.where(keep, dg - factor_keep * u1, u1 - factor_swap * dg)
    nu1 = jnp.where(keep, sup, jnp.where(inner, -factor_swap * sup, zero))
    nx = jnp.where(keep, rhs - factor_keep * xk, xk - factor_swap * rhs)
    nscale = jnp.where(keep, scale2, jnp.abs(nu0) + jnp.abs(nu1))
    max_u = jnp.where(inner, jnp.maximum(max_u, jnp.max(jnp.abs(row_u))), max_u)
    return (nu0, nu1, nx, nscale, max_u), (row_u, row_x)

  init = (d[0], du[0], b[0], jnp.abs(d[0]) + jnp.abs(du[0]),
          jnp.maximum(jnp.abs(d[0]), jnp.abs(du[0])))
  (un0, _, xn, _, max_u), (u, x) = lax.scan(forward, init, jnp.arange(n - 1))
  max_u = jnp.maximum(max_u, jnp.abs(un0))
  perturb = eps * max_u

  # Back substitution, last row first; x_{k+1} and x_{k+2} carried.
  p, r = _maybe_perturb_pivot(perturb, un0, xn)
  x_last = r * (1 / p)

  def backward(carry, k):
    x1, x2 = carry  # rows k + 1 and k + 2 of the solution
    r = x[k] - u[k, 1] * x1 - u[k, 2] * x2
    p, r = _maybe_perturb_pivot(perturb, u[k, 0], r)
    xk = r * (1 / p)
    return (xk, x1), xk

  _, rows = lax.scan(backward, (x_last, jnp.zeros_like(x_last)), jnp.arange(n - 1),
                     reverse=True)
  return jnp.concatenate([rows, x_last[None]], 0)


def _tridiagonal_solve_rule(ctx, dl, d, du, b, *, perturb_singular):
  # jax refuses perturb_singular on platforms without jaxlib's CPU or GPU kernel; ours runs the
  # same algorithm in jax ops. Without it, jax's own default rule.
  import jax
  if not perturb_singular:
    return mlir.lower_fun(lax_linalg._tridiagonal_solve_jax, multiple_results=False)(
        ctx, dl, d, du, b, perturb_singular=False)
  impl = _tridiagonal_solve_perturbed
  for _ in range(ctx.avals_in[1].ndim - 1):
    impl = jax.vmap(impl)
  return mlir.lower_fun(impl, multiple_results=False)(ctx, dl, d, du, b)


# Our custom call targets. Their operands, results and backend_config formats are a stable
# interface (src/lower/linalg.cc keeps reading every form these rules ever wrote), so jax.export
# may serialize them, as it does LAPACK's and cuSOLVER's targets: without this, exporting any
# program with linear algebra on our platform fails ("custom calls whose targets have no
# compatibility guarantees").
TARGETS = ("jaxmlx.eigh", "jaxmlx.svd", "jaxmlx.eig", "jaxmlx.lu",
           "jaxmlx.lu_pivots_to_permutation", "jaxmlx.hessenberg", "jaxmlx.tridiagonal",
           "jaxmlx.geqp3")


def _allow_export() -> None:
  try:
    from jax._src.export import _export
  except ImportError:  # a jax without jax.export: nothing to allow
    return
  stable = getattr(_export, "_CUSTOM_CALL_TARGETS_GUARANTEED_STABLE", None)
  if isinstance(stable, set):
    stable.update(TARGETS)


def register(platform: str) -> None:
  """Registers the rules above for `platform` (jax consults them before its defaults)."""
  _allow_export()
  rules = {
      lax_linalg.eigh_p: _eigh_rule,
      lax_linalg.svd_p: _svd_rule,
      lax_linalg.eig_p: _eig_rule,
      lax_linalg.lu_p: _lu_rule,
      lax_linalg.lu_pivots_to_permutation_p: _lu_pivots_to_permutation_rule,
      lax_linalg.schur_p: _unsupported("schur"),
      lax_linalg.hessenberg_p: _hessenberg_rule,
      lax_linalg.tridiagonal_p: _tridiagonal_rule,
  }
  if hasattr(lax_linalg, "tridiagonal_solve_p") and hasattr(lax_linalg, "_tridiagonal_solve_jax"):
    rules[lax_linalg.tridiagonal_solve_p] = _tridiagonal_solve_rule
  geqp3_p = getattr(lax_linalg, "geqp3_p", None)  # column-pivoted QR (jax >= 0.4.36)
  if geqp3_p is not None:
    rules[geqp3_p] = _geqp3_rule
  for prim, rule in rules.items():
    mlir.register_lowering(prim, rule, platform=platform)
