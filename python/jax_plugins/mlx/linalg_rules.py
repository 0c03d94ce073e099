"""Lowering rules for the linalg primitives jax lowers only through LAPACK / cuSOLVER.

For a plugin platform jax has no rule for eigh, eig, svd (its default is the TPU one, built on
eigh), schur, hessenberg or tridiagonal, and lowers lu and lu_pivots_to_permutation to loops of
gathers and scatters. These rules emit our own custom calls instead, which
src/lower/linalg.cc implements with MLX's routines:

    jaxmlx.eigh(a) -> (v, w)                  backend_config "lower=L,lo=I,hi=J"
    jaxmlx.svd(a) -> (s[, u, vt])             "full=F,uv=U,lo=I,hi=J"
    jaxmlx.eig(a) -> (w[, vr])                "vr=R"
    jaxmlx.lu(a) -> (lu, pivots, permutation)
    jaxmlx.lu_pivots_to_permutation(p) -> permutation
    jaxmlx.hessenberg(a) -> (a', taus)        LAPACK gehrd's packed form
    jaxmlx.tridiagonal(a) -> (a', d, e, taus) LAPACK sytrd/hetrd's, "lower=L"
    jaxmlx.geqp3(a, jpvt) -> (a', jpvt', taus) LAPACK geqp3's (QR with column pivoting)

(backend_config is a string of comma-separated integer settings.) cholesky, triangular_solve
and qr need no rule here: jax's default lowerings (stablehlo.cholesky, stablehlo.triangular_solve,
the Qr / ProductOfElementaryHouseholderReflectors custom calls) are implemented in C++.
hessenberg, tridiagonal and geqp3 are built from Householder reflectors in C++; schur (which needs a
QR-iteration eigensolver MLX lacks) raises NotImplementedError naming the primitive.
"""

from __future__ import annotations

from jax._src import core
from jax._src.interpreters import mlir
from jax._src.lax import linalg as lax_linalg


def _custom_call(ctx, target, operands, config=""):
  if any(not core.is_constant_shape(a.shape) for a in (*ctx.avals_in, *ctx.avals_out)):
    raise NotImplementedError(f"jax-mlx: {target} with dynamic shapes is not supported")
  result_types = [mlir.aval_to_ir_type(ctx.module_context, a) for a in ctx.avals_out]
  op = mlir.custom_call(target, result_types=result_types, operands=list(operands),
                        backend_config=config, api_version=1)
  return op.results


def _eigh_rule(ctx, operand, *, lower, sort_eigenvalues, subset_by_index, algorithm):
  # MLX (LAPACK syevd) always sorts ascending, which also serves sort_eigenvalues=False; the
  # algorithm choice (QR, Jacobi, QDWH) does not change the result's definition.
  del sort_eigenvalues, algorithm
  n = ctx.avals_in[0].shape[-1]
  lo, hi = (0, n) if subset_by_index is None else subset_by_index
  return _custom_call(ctx, "jaxmlx.eigh", [operand], f"lower={int(lower)},lo={lo},hi={hi}")


def _svd_rule(ctx, operand, *, full_matrices, compute_uv, subset_by_index, algorithm=None):
  del algorithm  # every algorithm computes the same decomposition
  m, n = ctx.avals_in[0].shape[-2:]
  if m == 0 or n == 0:
    return mlir.lower_fun(lax_linalg._empty_svd, multiple_results=True)(
        ctx, operand, full_matrices=full_matrices, compute_uv=compute_uv)
  lo, hi = (0, min(m, n)) if subset_by_index is None else subset_by_index
  config = f"full={int(full_matrices)},uv={int(compute_uv)},lo={lo},hi={hi}"
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


def register(platform: str) -> None:
  """Registers the rules above for `platform` (jax consults them before its defaults)."""
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
  geqp3_p = getattr(lax_linalg, "geqp3_p", None)  # column-pivoted QR (jax >= 0.4.36)
  if geqp3_p is not None:
    rules[geqp3_p] = _geqp3_rule
  for prim, rule in rules.items():
    mlir.register_lowering(prim, rule, platform=platform)
