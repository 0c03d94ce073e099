// Lowering rules: dot family (see lowering.h for the rule contract): dot_general and dot.
//
// Any dimension numbers become one batched matmul: lhs -> [B, M, K], rhs -> [B, K, N] (float
// products keep each batch dim, [B1, ..., M, K]; without batch dims [M, K] x [K, N] where that
// needs fewer reshapes).
// Float results compute in f32 (or complex64) and round once, so bf16/f16 inputs with an f32
// result (preferred_element_type) are exact in f32 (PITFALLS 2.7). Integer results are exact:
// MLX matmul is float-only, so 8-bit operands use f32 matmuls over K chunks small enough that
// every partial sum is an exact f32 integer, and wider ones multiply and sum in the integer
// type (wrapping as XLA does). precision_config and the dot algorithm are ignored: the CPU
// computes everything at full f32 precision.
#include <algorithm>
#include <cstdlib>
#include <numeric>

#include "lower/shape_util.h"

namespace jaxmlx::lower {

using namespace shape_util;

namespace {

constexpr int64_t kMaxChunkElements = int64_t{1} << 24;  // B*M*kc*N bound for integer dots

// Largest |value| an 8-bit (or bool) operand can hold; 0 for wider types.
int64_t small_int_bound(ir::ElementType t) {
  switch (t) {
    case ir::ElementType::kPred: return 1;
    case ir::ElementType::kS8: case ir::ElementType::kS4: case ir::ElementType::kS2: return 128;
    case ir::ElementType::kU8: case ir::ElementType::kU4: case ir::ElementType::kU2: return 255;
    default: return 0;
  }
}

mx::array k_slice(const mx::array& a, int axis, int k0, int k1) {
  mx::Shape start(3, 0), stop = a.shape();
  start[axis] = k0;
  stop[axis] = k1;
  return mx::slice(a, start, stop);
}

// Exact integer [B,M,K] x [B,K,N] for 8-bit operands: f32 matmuls over K chunks whose partial
// sums stay below 2^24 (so exact), accumulated in `acc`.
mx::array small_int_matmul(const mx::array& l, const mx::array& r, int64_t bound, mx::Dtype acc) {
  const int k = l.shape(2);
  const int kc = static_cast<int>(std::max<int64_t>(1, (int64_t{1} << 24) / bound));
  mx::array lf = mx::astype(l, mx::float32), rf = mx::astype(r, mx::float32);
  std::optional<mx::array> sum;
  for (int k0 = 0; k0 < k; k0 += kc) {
    const int k1 = std::min(k, k0 + kc);
    mx::array part = mx::matmul(k0 == 0 && k1 == k ? lf : k_slice(lf, 2, k0, k1),
                                k0 == 0 && k1 == k ? rf : k_slice(rf, 1, k0, k1));
    part = mx::astype(part, acc);
    sum = sum ? mx::add(*sum, part) : part;
  }
  return *sum;
}

// Exact integer [B,M,K] x [B,K,N] in `acc` (wrapping): broadcast multiply and sum over K
// chunks that keep the [B,M,kc,N] product bounded.
mx::array int_matmul(const mx::array& l, const mx::array& r, mx::Dtype acc) {
  const int b = l.shape(0), m = l.shape(1), k = l.shape(2), n = r.shape(2);
  const int64_t per_k = std::max<int64_t>(int64_t{b} * m * n, 1);
  const int kc = static_cast<int>(std::clamp<int64_t>(kMaxChunkElements / per_k, 1, k));
  mx::array la = mx::astype(l, acc), ra = mx::astype(r, acc);
  std::optional<mx::array> sum;
  for (int k0 = 0; k0 < k; k0 += kc) {
    const int k1 = std::min(k, k0 + kc);
    mx::array lc = mx::expand_dims(k0 == 0 && k1 == k ? la : k_slice(la, 2, k0, k1), 3);
    mx::array rc = mx::expand_dims(k0 == 0 && k1 == k ? ra : k_slice(ra, 1, k0, k1), 1);
    // MLX widens small-int sums; the cast back wraps exactly (modular arithmetic).
    mx::array part = mx::astype(mx::sum(mx::multiply(lc, rc), 2), acc);
    sum = sum ? mx::add(*sum, part) : part;
  }
  return *sum;
}

// The [B,M,K] x [B,K,N] product in the result's element type `out` (float products: any number of
// batch dims, [B1,...,M,K] x [B1,...,K,N]). `r_row_major`: the rhs is
// known to be row-major already (else a float rhs is made so where that pays: util.h).
StatusOr<mx::array> batched_product(LowerContext& ctx, const ir::Op& op, const mx::array& l,
                                    const mx::array& r, ir::ElementType lt, ir::ElementType rt,
                                    ir::ElementType out, bool r_row_major) {
  const mx::Dtype out_dt = *storage_dtype(out);
  if (ir::is_float(out) || ir::is_complex(out)) {
    const mx::Dtype c = ir::is_complex(out) || ir::is_complex(lt) || ir::is_complex(rt)
                            ? mx::complex64 : mx::float32;
    mx::array lc = mx::astype(l, c), rc = mx::astype(r, c);
    if (c == mx::complex64) {
      // Complex operands go in row-major: for a batched product of computed complex operands
      // taken as views (a reversed batch transposed, times `b * 2`; tests/ops/test_dot.py)
      // cuBLASLt found no algorithm on CUDA (status 15, NOT_SUPPORTED), where the same views of
      // a stored complex array multiply fine in MLX alone.
      lc = mx::contiguous(lc), rc = mx::contiguous(rc);
    } else if (!r_row_major && row_major_rhs_pays(l.shape(-2))) {
      rc = mx::contiguous(rc);
    }
    return mx::astype(mx::matmul(lc, rc), out_dt);
  }
  if (ir::is_complex(lt) || ir::is_complex(rt) || ir::is_float(lt) || ir::is_float(rt))
    return ctx.unsupported(op, "float operands with an integer result");
  // Accumulate in at least 32 bits; narrower results wrap the same way modulo 2^bits.
  mx::Dtype acc = mx::size_of(out_dt) >= 4 ? out_dt : mx::int32;
  if (out == ir::ElementType::kPred) acc = mx::int32;
  const int64_t bl = small_int_bound(lt), br = small_int_bound(rt);
  mx::array p = bl > 0 && br > 0 ? small_int_matmul(l, r, bl * br, acc)
                                                            : int_matmul(l, r, acc);
  if (out == ir::ElementType::kPred) return mx::not_equal(p, int_scalar(0, mx::int32));
  return mx::astype(p, out_dt);
}

// An operand as the product's matrix `shape` [lead..., R, C], R over its dims `rows` and C over
// `cols`. Where its dims lie in memory as [batch..., cols..., rows...] (jax's weight gradient
// X^T dY, X [B, S, D] contracting B and S), it is reshaped as it lies ([lead..., C, R]: a view of
// its memory) and its last two dims swapped: a strided view that MLX's matmul reads as a
// transposed operand (BLAS and cuBLAS take one as it is). The permutation `perm` (batch, rows,
// cols) would make that reshape a copy: a kernel and a pass over the operand per call.
mx::array swapped_matrix(const mx::array& x, const std::vector<int64_t>& batch,
                         const std::vector<int>& rows, const std::vector<int>& cols,
                         const std::vector<int>& perm, const mx::Shape& shape) {
  std::vector<int> order(batch.begin(), batch.end());
  order.insert(order.end(), cols.begin(), cols.end());
  order.insert(order.end(), rows.begin(), rows.end());
  bool in_memory_order = !rows.empty() && !cols.empty();
  for (size_t i = 0; in_memory_order && i < order.size(); ++i)
    in_memory_order = order[i] == static_cast<int>(i);
  if (!in_memory_order || (rows.size() == 1 && cols.size() == 1))
    return permuted_view(x, perm, shape);  // a single row and column dim: a transpose either way
  mx::Shape as_laid = shape;
  std::swap(as_laid[as_laid.size() - 1], as_laid[as_laid.size() - 2]);
  return mx::swapaxes(reshape_view(x, as_laid), -1, -2);
}

// The dimension numbers of a dot_general fit its operands: each side's batching and contracting
// dims are distinct dims of that operand, paired dims have one size, and the result has the
// batch, lhs free and rhs free dims in that order (spec: dot_general's constraints).
bool dot_dims_fit(const ir::Type& lt, const ir::Type& rt, const ir::Type& ot,
                  const ir::DotDims& dd) {
  auto side = [](const ir::Type& t, const std::vector<int64_t>& batch,
                 const std::vector<int64_t>& contract) {
    std::vector<bool> used(t.rank(), false);
    for (const auto* dims : {&batch, &contract})
      for (int64_t d : *dims) {
        if (d < 0 || d >= t.rank() || used[d]) return false;
        used[d] = true;
      }
    return true;
  };
  if (!side(lt, dd.lhs_batching_dimensions, dd.lhs_contracting_dimensions) ||
      !side(rt, dd.rhs_batching_dimensions, dd.rhs_contracting_dimensions) ||
      dd.lhs_batching_dimensions.size() != dd.rhs_batching_dimensions.size() ||
      dd.lhs_contracting_dimensions.size() != dd.rhs_contracting_dimensions.size())
    return false;
  for (size_t i = 0; i < dd.lhs_batching_dimensions.size(); ++i)
    if (lt.dims[dd.lhs_batching_dimensions[i]] != rt.dims[dd.rhs_batching_dimensions[i]])
      return false;
  for (size_t i = 0; i < dd.lhs_contracting_dimensions.size(); ++i)
    if (lt.dims[dd.lhs_contracting_dimensions[i]] != rt.dims[dd.rhs_contracting_dimensions[i]])
      return false;
  const size_t free = lt.rank() + rt.rank() - 2 * dd.lhs_contracting_dimensions.size() -
                      dd.lhs_batching_dimensions.size();
  return static_cast<size_t>(ot.rank()) == free;
}

// spec: dot_general — result dims are batch dims, then lhs free dims, then rhs free dims.
StatusOr<Values> dot_general(LowerContext& ctx, const ir::Op& op, const Values& in,
                             const ir::DotDims& dd) {
  const ir::Type& lt = operand_type(op, 0);
  const ir::Type& rt = operand_type(op, 1);
  const ir::Type& ot = result_type(op);
  if (!is_static(lt) || !is_static(rt) || !is_static(ot))
    return ctx.unsupported(op, "dynamic shapes");
  RETURN_IF_ERROR(require_native(ctx, op));
  if (!dot_dims_fit(lt, rt, ot, dd))
    return ctx.malformed(op, "dot_dimension_numbers do not fit the operands and the result");
  auto free_dims = [](const ir::Type& t, const std::vector<int64_t>& a,
                      const std::vector<int64_t>& b) {
    std::vector<int> f;
    for (int d = 0; d < t.rank(); ++d)
      if (std::find(a.begin(), a.end(), d) == a.end() &&
          std::find(b.begin(), b.end(), d) == b.end())
        f.push_back(d);
    return f;
  };
  std::vector<int> lf = free_dims(lt, dd.lhs_batching_dimensions, dd.lhs_contracting_dimensions);
  std::vector<int> rf = free_dims(rt, dd.rhs_batching_dimensions, dd.rhs_contracting_dimensions);
  auto prod = [](const ir::Type& t, const auto& dims) {
    int64_t p = 1;
    for (auto d : dims) p *= t.dims[d];
    return static_cast<int>(p);
  };
  const int b = prod(lt, dd.lhs_batching_dimensions), m = prod(lt, lf), n = prod(rt, rf);
  const int k = prod(lt, dd.lhs_contracting_dimensions);  // rhs's: the same (dot_dims_fit)
  const mx::Shape out_shape = storage_shape(ot);
  // Empty M/N/K: no matmul at all (an empty matmul is a known MLX hazard); K=0 sums nothing.
  if (int64_t{b} * m * n == 0 || k == 0)
    return Values{mx::zeros(out_shape, *storage_dtype(ot.dtype))};
  std::vector<int> lperm = to_ints(dd.lhs_batching_dimensions), rperm;
  lperm.insert(lperm.end(), lf.begin(), lf.end());
  for (int64_t d : dd.lhs_contracting_dimensions) lperm.push_back(static_cast<int>(d));
  rperm = to_ints(dd.rhs_batching_dimensions);
  for (int64_t d : dd.rhs_contracting_dimensions) rperm.push_back(static_cast<int>(d));
  rperm.insert(rperm.end(), rf.begin(), rf.end());
  // Without batch dims a float product may be one 2-D matmul instead: whichever form needs
  // fewer reshapes (each one more MLX node per call). A weight matrix [K, N] goes in as it is
  // in 2-D; activations [1, T, K] (batch 1) and their [1, T, N] result as they are in 3-D.
  const mx::Shape lp = permuted_shape(in[0], lperm), rp = permuted_shape(in[1], rperm);
  auto reshapes = [&](std::initializer_list<std::pair<const mx::Shape&, mx::Shape>> pairs) {
    int n = 0;
    for (const auto& [have, want] : pairs) n += have != want;
    return n;
  };
  const bool float_product = ir::is_float(ot.dtype) || ir::is_complex(ot.dtype);
  const bool plain =
      dd.lhs_batching_dimensions.empty() && float_product &&
      reshapes({{lp, {m, k}}, {rp, {k, n}}, {out_shape, {m, n}}}) <=
          reshapes({{lp, {b, m, k}}, {rp, {b, k, n}}, {out_shape, {b, m, n}}});
  // A float product keeps each batch dim: [B1, ..., Bj, M, K] x [B1, ..., Bj, K, N]. MLX's matmul
  // takes batch dims with any strides, where merging them into one B is a copy whenever they are
  // a strided view (attention's heads, split out of the model dim by a transpose): a kernel and
  // an MLX node per operand, and one more node for the result's reshape.
  mx::Shape lshape{b, m, k}, rshape{b, k, n};
  if (!dd.lhs_batching_dimensions.empty() && float_product) {
    const size_t nb = dd.lhs_batching_dimensions.size();
    lshape = mx::Shape(lp.begin(), lp.begin() + nb);
    rshape = lshape;
    lshape.push_back(m), lshape.push_back(k);
    rshape.push_back(k), rshape.push_back(n);
  }
  if (plain) lshape = {m, k}, rshape = {k, n};
  mx::array l = float_product ? swapped_matrix(in[0], dd.lhs_batching_dimensions, lf,
                                               to_ints(dd.lhs_contracting_dimensions), lperm,
                                               lshape)
                              : permuted_view(in[0], lperm, lshape);
  mx::array r = float_product ? swapped_matrix(in[1], dd.rhs_batching_dimensions,
                                               to_ints(dd.rhs_contracting_dimensions), rf, rperm,
                                               rshape)
                              : permuted_view(in[1], rperm, rshape);
  // A parameter or constant taken in its own order is row-major; anything else may not be.
  const bool r_row_major = !in[1].has_primitive() && is_identity(rperm);
  ASSIGN_OR_RETURN(mx::array p,
                   batched_product(ctx, op, l, r, lt.dtype, rt.dtype, ot.dtype, r_row_major));
  return Values{reshape_view(p, out_shape)};
}

StatusOr<Values> lower_dot_general(LowerContext& ctx, const ir::Op& op, const Values& in) {
  const auto* dd = op.attr<ir::DotDims>("dot_dimension_numbers");
  if (dd == nullptr) return ctx.malformed(op, "no dot_dimension_numbers");
  return dot_general(ctx, op, in, *dd);
}

// Old form: contracts the last lhs dim with the first rhs dim (vector or matrix operands).
StatusOr<Values> lower_dot(LowerContext& ctx, const ir::Op& op, const Values& in) {
  const int64_t lr = operand_type(op, 0).rank(), rr = operand_type(op, 1).rank();
  if (lr < 1 || lr > 2 || rr < 1 || rr > 2)
    return ctx.malformed(op, "dot operands must be 1-d or 2-d");
  ir::DotDims dd;
  dd.lhs_contracting_dimensions = {lr - 1};
  dd.rhs_contracting_dimensions = {0};
  return dot_general(ctx, op, in, dd);
}

}  // namespace

void register_dot(Registry& r) {
  r.add(ir::OpKind::kDotGeneral, lower_dot_general);
  r.add(ir::OpKind::kDot, lower_dot);
}

}  // namespace jaxmlx::lower
