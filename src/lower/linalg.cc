// Lowering rules: linalg family (see lowering.h for the rule contract).
//
// stablehlo.cholesky and stablehlo.triangular_solve (jax's default lowerings of cholesky_p and
// triangular_solve_p), and the custom calls our Python rules (linalg_rules.py) emit for the
// primitives jax only lowers through LAPACK/cuSOLVER: jaxmlx.eigh, jaxmlx.svd, jaxmlx.eig,
// jaxmlx.lu and jaxmlx.lu_pivots_to_permutation. Each runs MLX's LAPACK-backed routine on the CPU
// stream (see linalg_common.h). jax's Qr / ProductOfElementaryHouseholderReflectors custom calls,
// jaxmlx.hessenberg and jaxmlx.tridiagonal live in linalg_householder.cc; schur is refused in
// Python (linalg_rules.py).
//
// complex64: eigh, svd and eig use MLX's complex routines; cholesky and triangular_solve, which
// MLX has only for reals, are built here (a column loop; a real 2n x 2n solve), and so is lu.
//
// Failure semantics follow jax's CPU rules, which replace a whole batch entry by NaN when LAPACK
// reports info != 0: a cholesky of a matrix that is not positive definite, and eigh/svd/eig of
// a matrix with non-finite entries, give NaN for that matrix.
#include <limits>
#include <string>

#include "lower/linalg_common.h"
#include "lower/shape_util.h"
#include "lower/util.h"
#include "mlx/linalg.h"

namespace jaxmlx::lower {

using namespace shape_util;

namespace linalg {

StatusOr<mx::Dtype> compute_dtype(const LowerContext& ctx, const ir::Op& op, ir::ElementType t,
                                  bool allow_complex) {
  switch (t) {
    case ir::ElementType::kF16:
    case ir::ElementType::kBF16:
    case ir::ElementType::kF32:
      return mx::float32;
    case ir::ElementType::kC64:
      if (allow_complex) return mx::complex64;
      return ctx.unsupported(op, "complex64 operand (MLX's routine for this op is real-only)");
    default:
      if (!is_native(t)) return ctx.unsupported(op, non_native_reason(t));
      return ctx.unsupported(op, std::string(ir::element_type_name(t)) + " operand");
  }
}

StatusOr<std::map<std::string, int64_t, std::less<>>> parse_config(const LowerContext& ctx,
                                                                   const ir::Op& op) {
  std::map<std::string, int64_t, std::less<>> out;
  std::string_view s = op.get_string("backend_config");
  while (!s.empty()) {
    size_t comma = s.find(',');
    std::string_view item = s.substr(0, comma);
    s = comma == std::string_view::npos ? std::string_view() : s.substr(comma + 1);
    size_t eq = item.find('=');
    if (eq == std::string_view::npos) return ctx.malformed(op, "backend_config item without '='");
    try {
      out[std::string(item.substr(0, eq))] = std::stoll(std::string(item.substr(eq + 1)));
    } catch (const std::exception&) {
      return ctx.malformed(op, "backend_config value is not an integer");
    }
  }
  return out;
}

mx::array all_finite(const mx::array& a) {
  mx::array f = mx::isfinite(a);
  return mx::all(f, {-2, -1}, /*keepdims=*/true);
}

mx::array nan_unless(const mx::array& ok, const mx::array& x) {
  const float q = std::numeric_limits<float>::quiet_NaN();
  // Complex results are NaN in both parts, as jax's CPU rules make them.
  mx::array nan = x.dtype() == mx::complex64 ? mx::array(mx::complex64_t{q, q})
                                             : mx::astype(mx::array(q), x.dtype());
  return mx::where(ok, x, nan);
}

StatusOr<mx::Dtype> result_dtype(const LowerContext& ctx, const ir::Op& op, size_t i) {
  auto dt = storage_dtype(result_type(op, i).dtype);
  if (!dt) return ctx.unsupported(op, "result type " + type_to_string(result_type(op, i)));
  return *dt;
}

}  // namespace linalg

namespace {

using linalg::kCpu;

// Rank >= 2 and static: every rule here works on (batch..., m, n) matrices.
Status require_matrix(const LowerContext& ctx, const ir::Op& op, const ir::Type& t) {
  if (!is_static(t)) return ctx.unsupported(op, "dynamic shape");
  if (t.rank() < 2) return ctx.malformed(op, "operand must have rank >= 2");
  return Status();
}

// a[..., lo:hi] along `axis` (-1 or -2), every other dim whole.
mx::array slice_axis(const mx::array& a, int axis, int lo, int hi) {
  const int r = a.ndim(), ax = axis < 0 ? r + axis : axis;
  mx::Shape start(r, 0), stop = a.shape();
  start[ax] = lo;
  stop[ax] = hi;
  return mx::slice(a, start, stop);
}

// `a` with its last two dims swapped.
mx::array mT(const mx::array& a) { return mx::swapaxes(a, -1, -2); }

mx::array cast_out(const mx::array& a, mx::Dtype dt) {
  return a.dtype() == dt ? a : mx::astype(a, dt);
}

// MLX's cholesky is real-only: the complex (Hermitian) factor column by column, from the `lower`
// triangle (an upper one is the lower triangle of a^H). A failed column has a NaN diagonal.
mx::array complex_cholesky(mx::array a, bool lower) {
  if (!lower) a = mx::conjugate(mT(a));
  const int n = a.shape(-1);
  mx::array l = mx::zeros_like(a);
  mx::array rows = mx::reshape(mx::arange(n, mx::int32), {n, 1});
  for (int j = 0; j < n; ++j) {
    // col = a[:, j] - l[:, :j] conj(l[j, :j])^T, then divided by sqrt(col[j]) (real).
    mx::array col = slice_axis(a, -1, j, j + 1);
    if (j > 0) {
      mx::array lj = mx::conjugate(mT(slice_axis(slice_axis(l, -2, j, j + 1), -1, 0, j)));
      col = mx::subtract(col, mx::matmul(slice_axis(l, -1, 0, j), lj));
    }
    mx::array djj = mx::sqrt(mx::real(slice_axis(col, -2, j, j + 1)));
    col = mx::where(mx::less(rows, mx::array(j)), mx::zeros({}, a.dtype()),
                    mx::divide(col, mx::astype(djj, a.dtype())));
    mx::Shape start(a.ndim(), 0), stop = a.shape();
    start[a.ndim() - 1] = j;
    stop[a.ndim() - 1] = j + 1;
    l = mx::slice_update(l, col, start, stop);
  }
  return lower ? l : mx::conjugate(mT(l));
}

// spec: cholesky. Only the `lower` triangle of the operand is read; the other triangle of the
// result is implementation-defined (MLX zeroes it).
StatusOr<Values> lower_cholesky(LowerContext& ctx, const ir::Op& op, const Values& in) {
  const ir::Type& t = operand_type(op, 0);
  RETURN_IF_ERROR(require_matrix(ctx, op, t));
  ASSIGN_OR_RETURN(mx::Dtype ct, linalg::compute_dtype(ctx, op, t.dtype, /*complex=*/true));
  ASSIGN_OR_RETURN(mx::Dtype out, linalg::result_dtype(ctx, op, 0));
  if (t.dims.back() == 0) return Values{in[0]};
  const bool lower = op.get_bool("lower");
  mx::array a = mx::astype(in[0], ct);
  mx::array f = ct == mx::complex64 ? complex_cholesky(a, lower)
                                    : mx::linalg::cholesky(a, /*upper=*/!lower, kCpu);
  // MLX ignores potrf's info: a failed factorization leaves a diagonal entry <= 0 (or NaN) where
  // it stopped. XLA leaves the result implementation-defined; jax's CPU rule gives NaN.
  mx::array d = mx::real(mx::diagonal(f, 0, -2, -1));
  mx::array ok = mx::expand_dims(mx::all(mx::greater(d, mx::array(0.0f)), -1, true), -1);
  return Values{cast_out(linalg::nan_unless(ok, f), out)};
}

// The triangle of `a` that `lower` selects, with a unit diagonal when `unit` (spec: the other
// triangle, and the diagonal when unit_diagonal, are not read).
mx::array triangle(const mx::array& a, bool lower, bool unit) {
  const int n = a.shape(-1);
  mx::array keep = mx::tri(n, n, lower ? 0 : -1, mx::bool_);
  if (!lower) keep = mx::logical_not(keep);
  mx::array zero = mx::zeros({}, a.dtype());
  mx::array t = mx::where(keep, a, zero);
  if (unit) t = mx::where(mx::eye(n, mx::bool_), mx::ones({}, a.dtype()), t);
  return t;
}

// a x = b for complex a (its triangle already masked): MLX's solvers are real-only, so solve the
// real system [[ar, -ai], [ai, ar]] [xr; xi] = [br; bi] (LU with partial pivoting).
mx::array complex_solve(const mx::array& a, const mx::array& b) {
  mx::array ar = mx::real(a), ai = mx::imag(a);
  mx::array m = mx::concatenate({mx::concatenate({ar, mx::negative(ai)}, -1),
                                 mx::concatenate({ai, ar}, -1)}, -2);
  mx::array rhs = mx::concatenate({mx::real(b), mx::imag(b)}, -2);
  mx::array x = mx::linalg::solve(m, rhs, kCpu);
  const int n = a.shape(-1);
  mx::array xr = slice_axis(x, -2, 0, n), xi = slice_axis(x, -2, n, 2 * n);
  return mx::add(mx::astype(xr, mx::complex64),
                 mx::multiply(mx::astype(xi, mx::complex64), mx::array(mx::complex64_t{0, 1})));
}

// spec: triangular_solve. Solves op(a) x = b (left_side) or x op(a) = b, op per transpose_a.
StatusOr<Values> lower_triangular_solve(LowerContext& ctx, const ir::Op& op, const Values& in) {
  const ir::Type& ta = operand_type(op, 0);
  const ir::Type& tb = operand_type(op, 1);
  RETURN_IF_ERROR(require_matrix(ctx, op, ta));
  RETURN_IF_ERROR(require_matrix(ctx, op, tb));
  ASSIGN_OR_RETURN(mx::Dtype ct, linalg::compute_dtype(ctx, op, ta.dtype, /*complex=*/true));
  ASSIGN_OR_RETURN(mx::Dtype out, linalg::result_dtype(ctx, op, 0));
  const auto transpose = static_cast<ir::Transpose>(op.get_enum("transpose_a", 1));
  if (transpose == ir::Transpose::kInvalid) return ctx.malformed(op, "transpose_a is invalid");
  bool left = op.get_bool("left_side");
  bool lower = op.get_bool("lower");
  if (ta.dims.back() == 0 || tb.dims[tb.rank() - 1] == 0 || tb.dims[tb.rank() - 2] == 0)
    return Values{mx::zeros(storage_shape(result_type(op)), out)};
  mx::array a = triangle(mx::astype(in[0], ct), lower, op.get_bool("unit_diagonal"));
  mx::array b = mx::astype(in[1], ct);
  // A transposed triangle flips lower/upper; ADJOINT also conjugates (a no-op for reals).
  if (transpose != ir::Transpose::kNoTranspose) {
    a = mT(a);
    lower = !lower;
    if (transpose == ir::Transpose::kAdjoint && ct == mx::complex64) a = mx::conjugate(a);
  }
  // x a = b  <=>  a^T x^T = b^T.
  if (!left) {
    a = mT(a);
    lower = !lower;
    b = mT(b);
  }
  // A zero on the diagonal (a singular triangle): LAPACK's trsm divides by it and returns
  // inf/NaN, which jax relies on (its determinant gradient filters singular matrices by
  // isnan/isinf of a triangular solve), but MLX's inversion throws. Solve with 1 there and make
  // that matrix's solution NaN.
  const int n = a.shape(-1);
  mx::array pivot_zero = mx::logical_and(mx::eye(n, mx::bool_), mx::equal(a, mx::zeros({}, ct)));
  mx::array singular = mx::any(pivot_zero, std::vector<int>{-2, -1}, /*keepdims=*/true);
  a = mx::where(pivot_zero, mx::ones({}, ct), a);
  mx::array x = ct == mx::complex64 ? complex_solve(a, b)
                                    : mx::linalg::solve_triangular(a, b, /*upper=*/!lower, kCpu);
  x = mx::where(singular, mx::full({}, std::numeric_limits<float>::quiet_NaN(), ct), x);
  if (!left) x = mT(x);
  return Values{cast_out(x, out)};
}

// jaxmlx.eigh(a) -> (v, w); config lower, lo, hi: eigenvalues ascending (LAPACK's order, which
// also satisfies sort_eigenvalues), eigenvectors as columns, only indices [lo, hi) kept.
StatusOr<Values> lower_eigh(LowerContext& ctx, const ir::Op& op, const Values& in) {
  const ir::Type& t = operand_type(op, 0);
  RETURN_IF_ERROR(require_matrix(ctx, op, t));
  if (op.results.size() != 2) return ctx.malformed(op, "jaxmlx.eigh gives (v, w)");
  ASSIGN_OR_RETURN(mx::Dtype ct, linalg::compute_dtype(ctx, op, t.dtype, /*complex=*/true));
  ASSIGN_OR_RETURN(auto cfg, linalg::parse_config(ctx, op));
  ASSIGN_OR_RETURN(mx::Dtype vdt, linalg::result_dtype(ctx, op, 0));
  ASSIGN_OR_RETURN(mx::Dtype wdt, linalg::result_dtype(ctx, op, 1));
  const int n = static_cast<int>(t.dims.back());
  const int lo = static_cast<int>(cfg["lo"]);
  const int hi = cfg.count("hi") ? static_cast<int>(cfg["hi"]) : n;
  if (lo < 0 || hi > n || lo > hi) return ctx.malformed(op, "bad subset_by_index");
  if (n == 0 || lo == hi)
    return Values{mx::zeros(storage_shape(result_type(op, 0)), vdt),
                  mx::zeros(storage_shape(result_type(op, 1)), wdt)};
  mx::array a = mx::astype(in[0], ct);
  mx::array ok = linalg::all_finite(a);
  a = mx::where(ok, a, mx::zeros({}, ct));
  auto [w, v] = mx::linalg::eigh(a, cfg["lower"] ? "L" : "U", kCpu);
  if (lo != 0 || hi != n) {
    w = slice_axis(w, -1, lo, hi);
    v = slice_axis(v, -1, lo, hi);
  }
  v = linalg::nan_unless(ok, v);
  w = linalg::nan_unless(mx::squeeze(ok, -1), w);
  return Values{cast_out(v, vdt), cast_out(w, wdt)};
}

// The reduced SVD of a real m x n matrix, m != n, without the full m x m (or n x n) factor MLX's
// svd always computes: a 400000 x 2 matrix's full U would be 640 GB (jnp.linalg.pinv of such a
// matrix crashed the process). QR first, then the SVD of the small k x k triangle:
//   tall  a = Q R,      R = Ur S Vt   ->  U = Q Ur,  Vt
//   wide  a^T = Q R,    R = Ur S Vt   ->  U = Vt^T,  Vt = (Q Ur)^T
// Returns {U (m x k), S (k), Vt (k x n)} like mx::linalg::svd's full form restricted to k.
std::vector<mx::array> reduced_svd_via_qr(const mx::array& a, int m, int n) {
  const bool tall = m > n;
  mx::array x = tall ? a : mx::swapaxes(a, -1, -2);
  auto [q, r] = mx::linalg::qr(x, kCpu);
  auto small = mx::linalg::svd(r, true, kCpu);
  mx::array qu = mx::matmul(q, small[0]);
  if (tall) return {qu, small[1], small[2]};
  return {mx::swapaxes(small[2], -1, -2), small[1], mx::swapaxes(qu, -1, -2)};
}

// jaxmlx.svd(a) -> (s) or (s, u, vt); config full, uv, lo, hi. MLX returns the full U (m x m)
// and Vt (n x n); the reduced forms and index subsets are slices of them.
StatusOr<Values> lower_svd(LowerContext& ctx, const ir::Op& op, const Values& in) {
  const ir::Type& t = operand_type(op, 0);
  RETURN_IF_ERROR(require_matrix(ctx, op, t));
  ASSIGN_OR_RETURN(mx::Dtype ct, linalg::compute_dtype(ctx, op, t.dtype, /*complex=*/true));
  ASSIGN_OR_RETURN(auto cfg, linalg::parse_config(ctx, op));
  const bool uv = cfg["uv"] != 0;
  if (op.results.size() != (uv ? 3u : 1u)) return ctx.malformed(op, "jaxmlx.svd result count");
  const int m = static_cast<int>(t.dims[t.rank() - 2]), n = static_cast<int>(t.dims.back());
  const int k = std::min(m, n);
  const int lo = static_cast<int>(cfg["lo"]);
  const int hi = cfg.count("hi") ? static_cast<int>(cfg["hi"]) : k;
  if (lo < 0 || hi > k || lo > hi) return ctx.malformed(op, "bad subset_by_index");
  if (k == 0) return ctx.malformed(op, "empty svd is lowered in Python");
  mx::array a = mx::astype(in[0], ct);
  mx::array ok = linalg::all_finite(a);
  a = mx::where(ok, a, mx::zeros({}, ct));
  const bool reduced = uv && !(cfg["full"] != 0 && lo == 0 && hi == k);
  auto r = reduced && m != n && !mx::issubdtype(ct, mx::complexfloating)
               ? reduced_svd_via_qr(a, m, n)
               : mx::linalg::svd(a, uv, kCpu);
  mx::array s = uv ? r[1] : r[0];
  if (lo != 0 || hi != k) s = slice_axis(s, -1, lo, hi);
  Values res{linalg::nan_unless(mx::squeeze(ok, -1), s)};
  if (uv) {
    // Columns of U / rows of Vt: [lo, hi) of a subset, else the first k (reduced) or all (full).
    const bool full = cfg["full"] != 0 && lo == 0 && hi == k;
    mx::array u = full ? r[0] : slice_axis(r[0], -1, lo, hi);
    mx::array vt = full ? r[2] : slice_axis(r[2], -2, lo, hi);
    res.push_back(linalg::nan_unless(ok, u));
    res.push_back(linalg::nan_unless(ok, vt));
  }
  for (size_t i = 0; i < res.size(); ++i) {
    ASSIGN_OR_RETURN(mx::Dtype dt, linalg::result_dtype(ctx, op, i));
    if (res[i].shape() != storage_shape(result_type(op, i)))
      return ctx.malformed(op, "jaxmlx.svd result " + std::to_string(i) + " has the wrong shape");
    res[i] = cast_out(res[i], dt);
  }
  return res;
}

// jaxmlx.eig(a) -> (w) or (w, vr); config vr. Eigenvalues in MLX's (LAPACK geev's) order, right
// eigenvectors as unit-norm columns. Results are complex64 whatever the real input.
StatusOr<Values> lower_eig(LowerContext& ctx, const ir::Op& op, const Values& in) {
  const ir::Type& t = operand_type(op, 0);
  RETURN_IF_ERROR(require_matrix(ctx, op, t));
  ASSIGN_OR_RETURN(mx::Dtype ct, linalg::compute_dtype(ctx, op, t.dtype, /*complex=*/true));
  ASSIGN_OR_RETURN(auto cfg, linalg::parse_config(ctx, op));
  const bool vr = cfg["vr"] != 0;
  if (op.results.size() != (vr ? 2u : 1u)) return ctx.malformed(op, "jaxmlx.eig result count");
  for (size_t i = 0; i < op.results.size(); ++i)
    if (result_type(op, i).dtype != ir::ElementType::kC64)
      return ctx.unsupported(op, "eig results must be complex64");
  if (t.dims.back() == 0) {
    Values res;
    for (size_t i = 0; i < op.results.size(); ++i)
      res.push_back(mx::zeros(storage_shape(result_type(op, i)), mx::complex64));
    return res;
  }
  mx::array a = mx::astype(in[0], ct);
  mx::array ok = linalg::all_finite(a);
  a = mx::where(ok, a, mx::zeros({}, ct));
  if (!vr) {
    mx::array w = mx::linalg::eigvals(a, kCpu);
    return Values{linalg::nan_unless(mx::squeeze(ok, -1), mx::astype(w, mx::complex64))};
  }
  auto [w, v] = mx::linalg::eig(a, kCpu);
  // MLX 0.32's eig of a complex matrix returns the conjugates of the right eigenvectors (real
  // input is right as is); test_eig[complex64] checks A v = v w.
  if (ct == mx::complex64) v = mx::conjugate(v);
  return Values{linalg::nan_unless(mx::squeeze(ok, -1), mx::astype(w, mx::complex64)),
                linalg::nan_unless(ok, mx::astype(v, mx::complex64))};
}

// LAPACK pivots (row i was swapped with row piv[i], in order) -> the permutation p with
// a[p] = l @ u. One where() per pivot: pivots are data, and MLX has no sequential scan.
mx::array pivots_to_permutation(const mx::array& piv, int m) {
  const int k = piv.shape(-1);
  mx::Shape shape = piv.shape();
  shape.back() = m;
  mx::array iota = mx::arange(m, mx::int32);
  mx::array perm = mx::broadcast_to(iota, shape);
  mx::array p = mx::clip(mx::astype(piv, mx::int32), mx::array(0), mx::array(m - 1));
  const int r = piv.ndim();
  for (int i = 0; i < k; ++i) {
    mx::Shape start(r, 0), stop = p.shape();
    start[r - 1] = i;
    stop[r - 1] = i + 1;
    mx::array pj = mx::slice(p, start, stop);  // (batch..., 1)
    mx::array at_i = mx::slice(perm, start, stop);
    mx::array at_j = mx::take_along_axis(perm, pj, -1);
    perm = mx::where(mx::equal(iota, mx::array(i)), at_j,
                     mx::where(mx::equal(iota, pj), at_i, perm));
  }
  return perm;
}

// Right-looking LU with partial pivoting, one column per step, for complex64 (MLX's lu_factor is
// real-only). The pivot is the first row maximizing |re| + |im|, LAPACK's izamax; a zero pivot
// leaves its column unscaled, as getrf does. Returns (lu, pivots as int32).
std::pair<mx::array, mx::array> complex_lu(mx::array a) {
  const int m = a.shape(-2), n = a.shape(-1), k = std::min(m, n);
  mx::array rows = mx::reshape(mx::arange(m, mx::int32), {m, 1});
  mx::array zero = mx::zeros({}, a.dtype());
  Values pivots;
  for (int j = 0; j < k; ++j) {
    mx::array col = slice_axis(slice_axis(a, -1, j, j + 1), -2, j, m);  // (batch..., m-j, 1)
    mx::array mag = mx::add(mx::abs(mx::real(col)), mx::abs(mx::imag(col)));
    mx::array p = mx::add(mx::argmax(mag, -2, /*keepdims=*/true), mx::array(j, mx::uint32));
    p = mx::astype(p, mx::int32);  // (batch..., 1, 1)
    mx::array row_j = slice_axis(a, -2, j, j + 1);
    mx::array row_p = mx::take_along_axis(a, mx::broadcast_to(p, row_j.shape()), -2);
    a = mx::where(mx::equal(rows, mx::array(j)), row_p,
                  mx::where(mx::equal(rows, p), row_j, a));
    pivots.push_back(mx::squeeze(p, {-2, -1}));
    // Scale the column below the pivot, then update the trailing block.
    mx::array piv = slice_axis(slice_axis(a, -2, j, j + 1), -1, j, j + 1);
    mx::array below = slice_axis(slice_axis(a, -2, j + 1, m), -1, j, j + 1);
    mx::array nonzero = mx::not_equal(piv, zero);
    below = mx::where(nonzero, mx::divide(below, mx::where(nonzero, piv, mx::ones_like(piv))),
                      below);
    mx::Shape start(a.ndim(), 0), stop = a.shape();
    start[a.ndim() - 2] = j + 1;
    start[a.ndim() - 1] = j;
    stop[a.ndim() - 1] = j + 1;
    if (j + 1 < m) a = mx::slice_update(a, below, start, stop);
    if (j + 1 < n && j + 1 < m) {
      mx::array urow = slice_axis(slice_axis(a, -2, j, j + 1), -1, j + 1, n);
      mx::array trail = slice_axis(slice_axis(a, -2, j + 1, m), -1, j + 1, n);
      start[a.ndim() - 1] = j + 1;
      stop[a.ndim() - 1] = n;
      a = mx::slice_update(a, mx::subtract(trail, mx::matmul(below, urow)), start, stop);
    }
  }
  return {a, mx::stack(pivots, -1)};
}

// jaxmlx.lu(a) -> (lu, pivots, permutation), jax's lu_p: LAPACK getrf's packed factors and its
// 0-based pivots (int32), and the permutation they imply.
StatusOr<Values> lower_lu(LowerContext& ctx, const ir::Op& op, const Values& in) {
  const ir::Type& t = operand_type(op, 0);
  RETURN_IF_ERROR(require_matrix(ctx, op, t));
  if (op.results.size() != 3) return ctx.malformed(op, "jaxmlx.lu gives (lu, pivots, perm)");
  ASSIGN_OR_RETURN(mx::Dtype ct, linalg::compute_dtype(ctx, op, t.dtype, /*complex=*/true));
  ASSIGN_OR_RETURN(mx::Dtype out, linalg::result_dtype(ctx, op, 0));
  const int m = static_cast<int>(t.dims[t.rank() - 2]), n = static_cast<int>(t.dims.back());
  mx::Shape piv_shape = storage_shape(result_type(op, 1));
  if (std::min(m, n) == 0) {
    mx::array perm = mx::broadcast_to(mx::arange(m, mx::int32), storage_shape(result_type(op, 2)));
    return Values{in[0], mx::zeros(piv_shape, mx::int32), perm};
  }
  auto [lu, piv] = ct == mx::complex64 ? complex_lu(in[0])
                                       : mx::linalg::lu_factor(mx::astype(in[0], ct), kCpu);
  piv = mx::astype(piv, mx::int32);
  return Values{cast_out(lu, out), piv, pivots_to_permutation(piv, m)};
}

// jaxmlx.lu_pivots_to_permutation(pivots) -> permutation; config size (the permutation length).
StatusOr<Values> lower_lu_pivots_to_permutation(LowerContext& ctx, const ir::Op& op,
                                                const Values& in) {
  const ir::Type& t = operand_type(op, 0);
  if (!is_static(t) || t.rank() < 1) return ctx.unsupported(op, "dynamic or scalar pivots");
  if (t.dtype != ir::ElementType::kS32) return ctx.malformed(op, "pivots must be int32");
  const int m = static_cast<int>(result_type(op).dims.back());
  return Values{pivots_to_permutation(in[0], m)};
}

}  // namespace

void register_linalg(Registry& r) {
  r.add(ir::OpKind::kCholesky, lower_cholesky);
  r.add(ir::OpKind::kTriangularSolve, lower_triangular_solve);
  r.add_custom_call("jaxmlx.eigh", lower_eigh);
  r.add_custom_call("jaxmlx.svd", lower_svd);
  r.add_custom_call("jaxmlx.eig", lower_eig);
  r.add_custom_call("jaxmlx.lu", lower_lu);
  r.add_custom_call("jaxmlx.lu_pivots_to_permutation", lower_lu_pivots_to_permutation);
  register_linalg_householder(r);
}

}  // namespace jaxmlx::lower
