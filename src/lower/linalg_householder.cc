// Lowering rules: linalg family, Householder QR (see lowering.h for the rule contract).
//
// jax lowers qr_p, geqrf_p and householder_product_p for a plugin platform to two custom calls
// with LAPACK's semantics:
//   Qr(a) -> (a', taus)                       geqrf: R in the upper triangle of a', the
//                                             Householder vectors v_j (v_j[j] = 1 implied)
//                                             below it, H_j = I - tau_j v_j v_j^H
//   ProductOfElementaryHouseholderReflectors(a', taus) -> q     orgqr/ungqr: H_0 H_1 ... H_{k-1}
//                                             applied to the first n columns of I
// MLX's qr returns Q and R, not the reflectors, so both are built here from MLX ops, one
// reflector per column (k = min(m, n) steps, each a rank-1 update of the trailing block). They
// run on the default stream: no LAPACK involved, so this also runs on a GPU. Real and complex64;
// f16/bf16 are computed in f32. The same reflectors give jaxmlx.hessenberg (LAPACK gehrd), which
// jax lowers only through LAPACK.
#include <algorithm>

#include "lower/linalg_common.h"
#include "lower/shape_util.h"
#include "lower/util.h"

namespace jaxmlx::lower {

using namespace shape_util;

namespace {

// a[..., r0:r1, c0:c1] of a (batch..., m, n) array.
mx::array block(const mx::array& a, int r0, int r1, int c0, int c1) {
  const int r = a.ndim();
  mx::Shape start(r, 0), stop = a.shape();
  start[r - 2] = r0;
  stop[r - 2] = r1;
  start[r - 1] = c0;
  stop[r - 1] = c1;
  return mx::slice(a, start, stop);
}

// a with a[..., r0:, c0:] (the extent of b) replaced by b.
mx::array put_block(const mx::array& a, const mx::array& b, int r0, int c0) {
  const int r = a.ndim();
  mx::Shape start(r, 0), stop = a.shape();
  start[r - 2] = r0;
  stop[r - 2] = r0 + b.shape(-2);
  start[r - 1] = c0;
  stop[r - 1] = c0 + b.shape(-1);
  return mx::slice_update(a, b, start, stop);
}

mx::array conj_if(const mx::array& a) {
  return a.dtype() == mx::complex64 ? mx::conjugate(a) : a;
}

// c - t * v v^H c for a (batch..., p, q) block c, a (batch..., p, 1) vector v and a
// (batch..., 1, 1) scalar t: the reflector I - t v v^H applied from the left.
mx::array reflect(const mx::array& c, const mx::array& v, const mx::array& t) {
  mx::array w = mx::matmul(conj_if(mx::swapaxes(v, -1, -2)), c);  // (batch..., 1, q)
  return mx::subtract(c, mx::multiply(t, mx::matmul(v, w)));
}

// v_j = [1; tail] as a (batch..., p, 1) column.
mx::array with_unit_head(const mx::array& tail) {
  mx::Shape one_shape = tail.shape();
  one_shape[one_shape.size() - 2] = 1;
  return mx::concatenate({mx::ones(one_shape, tail.dtype()), tail}, -2);
}

// LAPACK's larfg for the column x = [alpha; rest] (each (batch..., ., 1)): returns
// (beta, v tail, tau) with H^H x = [beta; 0], beta real. A column with rest == 0 and a real alpha
// needs no reflection: tau = 0, beta = alpha.
struct Reflector {
  mx::array head, tail, tau;
};
Reflector householder(const mx::array& alpha, const mx::array& rest) {
  const bool cplx = alpha.dtype() == mx::complex64;
  mx::array zero = mx::array(0.0f);
  mx::array ar = cplx ? mx::real(alpha) : alpha;
  mx::array ai = cplx ? mx::imag(alpha) : mx::zeros_like(alpha);
  mx::array xnorm2 = mx::sum(mx::square(mx::abs(rest)), -2, /*keepdims=*/true);
  mx::array skip = mx::logical_and(mx::equal(xnorm2, zero), mx::equal(ai, zero));
  mx::array nrm = mx::sqrt(mx::add(mx::add(mx::square(ar), mx::square(ai)), xnorm2));
  mx::array beta = mx::where(mx::greater_equal(ar, zero), mx::negative(nrm), nrm);  // real
  mx::array beta_c = mx::astype(beta, alpha.dtype());
  mx::array safe_beta = mx::where(skip, mx::ones_like(beta_c), beta_c);
  mx::array tau = mx::where(skip, mx::zeros_like(alpha),
                            mx::divide(mx::subtract(beta_c, alpha), safe_beta));
  mx::array denom = mx::where(skip, mx::ones_like(alpha), mx::subtract(alpha, beta_c));
  // When skipping, rest is all zeros already, so dividing by 1 keeps it.
  return {mx::where(skip, alpha, beta_c), mx::divide(rest, denom), tau};
}

// The compute dtype of operand 0 (a rank >= 2 static matrix).
StatusOr<mx::Dtype> qr_compute_dtype(LowerContext& ctx, const ir::Op& op) {
  const ir::Type& t = operand_type(op, 0);
  if (!is_static(t)) return ctx.unsupported(op, "dynamic shape");
  if (t.rank() < 2) return ctx.malformed(op, "operand must have rank >= 2");
  return linalg::compute_dtype(ctx, op, t.dtype, /*allow_complex=*/true);
}

// geqrf's step j on `a` (batch..., m, n): the reflector H_j that zeroes column j below its
// diagonal, applied (as H_j^H: conj(tau)) to the columns after it, and stored packed in column j.
// Returns tau_j (batch...).
mx::array reduce_column(mx::array& a, int j) {
  const int m = a.shape(-2), n = a.shape(-1);
  Reflector h = householder(block(a, j, j + 1, j, j + 1), block(a, j + 1, m, j, j + 1));
  if (j + 1 < n) {
    mx::array c = block(a, j, m, j + 1, n);
    a = put_block(a, reflect(c, with_unit_head(h.tail), conj_if(h.tau)), j, j + 1);
  }
  a = put_block(a, mx::concatenate({h.head, h.tail}, -2), j, j);
  return mx::squeeze(h.tau, {-2, -1});
}

// Qr (LAPACK geqrf): (batch..., m, n) -> (packed a', taus (batch..., min(m, n))).
StatusOr<Values> lower_qr(LowerContext& ctx, const ir::Op& op, const Values& in) {
  if (in.size() != 1 || op.results.size() != 2) return ctx.malformed(op, "Qr takes 1 and gives 2");
  ASSIGN_OR_RETURN(mx::Dtype ct, qr_compute_dtype(ctx, op));
  ASSIGN_OR_RETURN(mx::Dtype out, linalg::result_dtype(ctx, op, 0));
  mx::array a = mx::astype(in[0], ct);
  const int k = std::min(a.shape(-2), a.shape(-1));
  Values taus;
  for (int j = 0; j < k; ++j) taus.push_back(reduce_column(a, j));
  mx::array tau = k == 0 ? mx::zeros(storage_shape(result_type(op, 1)), ct) : mx::stack(taus, -1);
  return Values{mx::astype(a, out), mx::astype(tau, out)};
}

// jaxmlx.geqp3 (LAPACK geqp3, QR with column pivoting): (a (batch..., m, n), jpvt (batch..., n))
// -> (packed a' as Qr's, jpvt' (1-based), taus (batch..., min(m, n))). As LAPACK: the columns with
// jpvt != 0 move to the front in their order and are factored first, unpivoted; then each step
// swaps in the remaining column whose part below the factored rows has the largest norm (the
// first on ties). LAPACK downdates its column norms from step to step and recomputes one that
// lost accuracy; here each step's norms are the trailing block's own, so the pivots agree except
// between columns whose norms tie within rounding. Pivots differ per matrix of a batch: columns
// are permuted with take_along_axis.
StatusOr<Values> lower_geqp3(LowerContext& ctx, const ir::Op& op, const Values& in) {
  if (in.size() != 2 || op.results.size() != 3) return ctx.malformed(op, "geqp3: 2 -> 3");
  ASSIGN_OR_RETURN(mx::Dtype ct, qr_compute_dtype(ctx, op));
  ASSIGN_OR_RETURN(mx::Dtype out, linalg::result_dtype(ctx, op, 0));
  mx::array a = mx::astype(in[0], ct);
  const mx::Dtype index_dtype = in[1].dtype();
  const int m = a.shape(-2), n = a.shape(-1), k = std::min(m, n);
  if (in[1].ndim() != a.ndim() - 1 || in[1].shape(-1) != n)
    return ctx.malformed(op, "geqp3: jpvt must be (batch..., n)");
  mx::Shape row_shape = in[1].shape();  // (batch..., n)
  mx::array iota = mx::broadcast_to(mx::arange(n, mx::int32), row_shape);
  // The fixed columns first, in order: sort by (free, position).
  mx::array free = mx::astype(mx::equal(in[1], mx::array(0, index_dtype)), mx::int32);
  mx::array perm = mx::astype(mx::argsort(mx::add(mx::multiply(free, mx::array(n)), iota), -1),
                              mx::int32);
  mx::array fixed = mx::sum(mx::subtract(mx::array(1), free), -1, /*keepdims=*/true);
  auto permute_columns = [&](const mx::array& x, const mx::array& cols) {
    mx::array idx = mx::expand_dims(cols, -2);  // (batch..., 1, n)
    mx::Shape full = x.shape();
    return mx::take_along_axis(x, mx::broadcast_to(idx, full), -1);
  };
  a = permute_columns(a, perm);
  Values taus;
  for (int j = 0; j < k; ++j) {
    if (j + 1 < n) {
      mx::array norms = mx::sum(mx::square(mx::abs(block(a, j, m, j, n))), -2);  // (batch..., n-j)
      mx::array best = mx::astype(mx::argmax(norms, -1, /*keepdims=*/true), mx::int32);
      mx::array q = mx::add(mx::where(mx::less(mx::array(j), fixed), mx::array(0), best),
                            mx::array(j));  // (batch..., 1): the column moved to j
      mx::array j_arr = mx::array(j);
      mx::array swap = mx::where(mx::equal(iota, j_arr), q,
                                 mx::where(mx::equal(iota, q), j_arr, iota));
      a = permute_columns(a, swap);
      perm = mx::take_along_axis(perm, swap, -1);
    }
    taus.push_back(reduce_column(a, j));
  }
  mx::array tau = k == 0 ? mx::zeros(storage_shape(result_type(op, 2)), ct) : mx::stack(taus, -1);
  mx::array jpvt = mx::astype(mx::add(perm, mx::array(1)), index_dtype);
  return Values{mx::astype(a, out), jpvt, mx::astype(tau, out)};
}

// ProductOfElementaryHouseholderReflectors (LAPACK orgqr/ungqr): (a (batch..., m, n), taus
// (batch..., k)) -> the first n columns of H_0 ... H_{k-1}, built right to left; H_i only
// touches rows and columns >= i of the partial product.
StatusOr<Values> lower_householder_product(LowerContext& ctx, const ir::Op& op, const Values& in) {
  if (in.size() != 2 || op.results.size() != 1)
    return ctx.malformed(op, "ProductOfElementaryHouseholderReflectors takes (a, taus)");
  ASSIGN_OR_RETURN(mx::Dtype ct, qr_compute_dtype(ctx, op));
  ASSIGN_OR_RETURN(mx::Dtype out, linalg::result_dtype(ctx, op, 0));
  mx::array a = mx::astype(in[0], ct);
  mx::array taus = mx::astype(in[1], ct);
  const int m = a.shape(-2), n = a.shape(-1), k = taus.shape(-1);
  if (k > std::min(m, n)) return ctx.malformed(op, "more taus than min(m, n)");
  // MLX builds eye with a scatter, which its CUDA backend has no complex64 kernel for: a real
  // identity, converted.
  mx::array q = mx::broadcast_to(mx::astype(mx::eye(m, n, 0, mx::float32), ct), a.shape());
  const int r = taus.ndim();
  for (int i = k - 1; i >= 0; --i) {
    mx::Shape start(r, 0), stop = taus.shape();
    start[r - 1] = i;
    stop[r - 1] = i + 1;
    mx::array t = mx::expand_dims(mx::slice(taus, start, stop), -1);  // (batch..., 1, 1)
    mx::array v = with_unit_head(block(a, i + 1, m, i, i + 1));
    q = put_block(q, reflect(block(q, i, m, i, n), v, t), i, i);
  }
  return Values{mx::astype(q, out)};
}

// LAPACK gehd2's reduction of (batch..., n, n) `a` (compute dtype) to upper Hessenberg form:
// returns (packed a', taus (batch..., n - 1)). H_j reduces column j below its subdiagonal; a'
// holds the Hessenberg matrix on and above the first subdiagonal and v_j's tail below it (for
// reals the last tau is 0; for complex it makes the last subdiagonal entry real).
std::pair<mx::array, mx::array> hessenberg_reduce(mx::array a, const mx::Shape& tau_shape) {
  const int n = a.shape(-1);
  mx::Shape one = a.shape();
  one.pop_back();
  one.back() = 1;
  Values taus;
  for (int j = 0; j + 1 < n; ++j) {
    Reflector h = householder(block(a, j + 1, j + 2, j, j + 1), block(a, j + 2, n, j, j + 1));
    mx::array v = with_unit_head(h.tail);  // (batch..., n-j-1, 1)
    // From the right on all rows: a[:, j+1:] -= tau (a[:, j+1:] v) v^H.
    mx::array right = block(a, 0, n, j + 1, n);
    mx::array av_h = mx::matmul(mx::matmul(right, v), conj_if(mx::swapaxes(v, -1, -2)));
    right = mx::subtract(right, mx::multiply(h.tau, av_h));
    a = put_block(a, right, 0, j + 1);
    // Then H^H from the left on the trailing rows.
    a = put_block(a, reflect(block(a, j + 1, n, j + 1, n), v, conj_if(h.tau)), j + 1, j + 1);
    a = put_block(a, mx::concatenate({h.head, h.tail}, -2), j + 1, j);
    taus.push_back(mx::reshape(h.tau, one));
  }
  mx::array tau = taus.empty() ? mx::zeros(tau_shape, a.dtype()) : mx::concatenate(taus, -1);
  return {a, tau};
}

// jaxmlx.hessenberg (LAPACK gehrd with ilo = 1, ihi = n): (batch..., n, n) -> (a', taus).
StatusOr<Values> lower_hessenberg(LowerContext& ctx, const ir::Op& op, const Values& in) {
  if (in.size() != 1 || op.results.size() != 2) return ctx.malformed(op, "hessenberg: 1 -> 2");
  ASSIGN_OR_RETURN(mx::Dtype ct, qr_compute_dtype(ctx, op));
  ASSIGN_OR_RETURN(mx::Dtype out, linalg::result_dtype(ctx, op, 0));
  auto [a, tau] = hessenberg_reduce(mx::astype(in[0], ct), storage_shape(result_type(op, 1)));
  return Values{mx::astype(a, out), mx::astype(tau, out)};
}

// a with its last two axes reversed (J a J, J the exchange matrix).
mx::array flip2(const mx::array& a) {
  const int n = a.shape(-1);
  mx::array rev = mx::arange(n - 1, -1, -1, mx::int32);
  return mx::take(mx::take(a, rev, -1), rev, -2);
}

// jaxmlx.tridiagonal (LAPACK sytrd/hetrd): (a', d, e, taus); config lower. The reduction of a
// Hermitian matrix is its Hessenberg reduction, read from the `lower` triangle; the upper form
// (reflectors from the last column back) is the lower one of J a J, flipped back. The triangle
// not read keeps the input, as LAPACK leaves it.
StatusOr<Values> lower_tridiagonal(LowerContext& ctx, const ir::Op& op, const Values& in) {
  if (in.size() != 1 || op.results.size() != 4) return ctx.malformed(op, "tridiagonal: 1 -> 4");
  ASSIGN_OR_RETURN(mx::Dtype ct, qr_compute_dtype(ctx, op));
  ASSIGN_OR_RETURN(auto cfg, linalg::parse_config(ctx, op));
  const bool lower = cfg["lower"] != 0;
  mx::array a = mx::astype(in[0], ct);
  const int n = a.shape(-1);
  mx::array strict_lower = mx::tri(n, n, -1, mx::bool_);
  mx::array half = lower ? a : mx::swapaxes(a, -1, -2);  // the triangle read, as a lower one
  mx::array low = mx::where(strict_lower, half, mx::zeros({}, ct));
  mx::array diag = mx::where(mx::eye(n, mx::bool_), half, mx::zeros({}, ct));
  if (ct == mx::complex64) diag = mx::astype(mx::real(diag), ct);  // hetrd ignores imag(a_ii)
  mx::array full = mx::add(mx::add(low, diag), conj_if(mx::swapaxes(low, -1, -2)));
  if (!lower) full = flip2(full);
  auto [r, tau] = hessenberg_reduce(full, storage_shape(result_type(op, 3)));
  if (!lower) {
    // hetrd's upper reflectors (v and tau) are the conjugates of the flipped lower ones.
    r = conj_if(flip2(r));
    tau = conj_if(mx::take(tau, mx::arange(n - 2, -1, -1, mx::int32), -1));
  }
  mx::array d = mx::diagonal(r, 0, -2, -1);
  mx::array e = mx::diagonal(r, lower ? -1 : 1, -2, -1);
  if (ct == mx::complex64) {  // real by construction; drop the rounding residue as hetrd does
    d = mx::real(d);
    e = mx::real(e);
    r = mx::where(mx::eye(n, mx::bool_), mx::astype(mx::expand_dims(d, -1), ct), r);
  }
  // Keep the triangle LAPACK does not touch.
  mx::array untouched = lower ? mx::transpose(strict_lower) : strict_lower;
  r = mx::where(untouched, a, r);
  Values res{r, d, e, tau};
  for (size_t i = 0; i < res.size(); ++i) {
    ASSIGN_OR_RETURN(mx::Dtype dt, linalg::result_dtype(ctx, op, i));
    res[i] = mx::astype(res[i], dt);
  }
  return res;
}

}  // namespace

void register_linalg_householder(Registry& r) {
  r.add_custom_call("jaxmlx.hessenberg", lower_hessenberg);
  r.add_custom_call("jaxmlx.geqp3", lower_geqp3);
  r.add_custom_call("jaxmlx.tridiagonal", lower_tridiagonal);
  r.add_custom_call("Qr", lower_qr);
  r.add_custom_call("ProductOfElementaryHouseholderReflectors", lower_householder_product);
}

}  // namespace jaxmlx::lower
