// Lowering rules: reduce family (see lowering.h for the rule contract).
//
// stablehlo.reduce with any body. Bodies that are one commutative op on the two block args
// (add, multiply, maximum, minimum, and, or) lower to MLX's reductions, combined once with
// the init value (XLA folds the init in exactly once). Every other body — variadic argmax/argmin
// reduces, bitwise and/or/xor on integers, types MLX lacks — runs by tree reduction: halve the
// reduced axis and apply the body to the halves, log2(n) region calls (XLA assumes the body is
// associative, so any schedule is valid).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <numeric>
#include <optional>

#include "lower/shape_util.h"
#include "lower/window_util.h"
#include "passes/argminmax.h"

namespace jaxmlx::lower {

using namespace shape_util;
using window_util::apply_body_elementwise;  // the body on whole arrays, captures and emulation

namespace {

// The kind of the single binary op a reduce body applies to its two block args, if that is
// all the body does (`return op(a, b)` or `return op(b, a)`).
std::optional<ir::OpKind> match_binary_body(const ir::Region& region) {
  if (region.blocks.size() != 1) return std::nullopt;
  const ir::Block& b = region.entry();
  if (b.args.size() != 2 || b.ops.size() != 2) return std::nullopt;
  const ir::Op& f = b.ops[0];
  const ir::Op& ret = b.ops[1];
  if (ret.kind != ir::OpKind::kReturn || ret.operands.size() != 1 || f.results.size() != 1 ||
      f.operands.size() != 2 || !(ret.operands[0] == f.results[0]))
    return std::nullopt;
  const bool direct = f.operands[0] == b.args[0] && f.operands[1] == b.args[1];
  const bool swapped = f.operands[0] == b.args[1] && f.operands[1] == b.args[0];
  if (!direct && !swapped) return std::nullopt;
  return f.kind;
}

bool is_half_float(mx::Dtype dt) { return dt == mx::float16 || dt == mx::bfloat16; }

// Keys that order f32 (int32 keys) or f16/bf16 (int16) values totally: a float's bits as they
// are when its sign is clear, its magnitude bits flipped when set (-0 -> -1 below +0 -> 0, -inf
// lowest), and every NaN the largest key (`nan_high`) or the smallest.
mx::array total_order_keys(const mx::array& x, bool nan_high) {
  const mx::Dtype kt = x.dtype() == mx::float32 ? mx::int32 : mx::int16;
  const int64_t hi = kt == mx::int32 ? INT32_MAX : INT16_MAX;
  const mx::array bits = mx::view(x, kt);
  const mx::array flipped = mx::where(mx::less(bits, int_scalar(0, kt)),
                                      mx::bitwise_xor(bits, int_scalar(hi, kt)), bits);
  return mx::where(mx::isnan(x), int_scalar(nan_high ? hi : -hi - 1, kt), flipped);
}

// f32 max (or min) over `axes`, with IEEE-754 maximum's signed zeros as XLA has them: +0 > -0,
// and NaN winning. MLX's float max returns whichever zero it met first, so the reduction runs on
// total_order_keys instead, every NaN the extreme key, so that it wins. One pass over `x` (a max
// of the floats and another of their bits took two). The NaN that comes out is the quiet one,
// 0x7FC00000.
mx::array signed_zero_extreme(const mx::array& x, const std::vector<int>& axes, bool is_max) {
  const mx::Dtype i32 = mx::int32;
  const mx::array flip = int_scalar(INT32_MAX, i32);
  const mx::array nan_key = int_scalar(is_max ? INT32_MAX : INT32_MIN, i32);
  const mx::array zero = int_scalar(0, i32);
  mx::array key = total_order_keys(x, is_max);
  key = is_max ? mx::max(key, axes) : mx::min(key, axes);
  mx::array out = mx::where(mx::less(key, zero), mx::bitwise_xor(key, flip), key);
  out = mx::where(mx::equal(key, nan_key), int_scalar(0x7FC00000, i32), out);
  return mx::view(out, mx::float32);
}

// f32 max (or min) folded with `init` (not the identity): XLA folds the init in once, with
// the same signed-zero order.
mx::array signed_zero_extreme(const mx::array& x, const mx::array& init,
                              const std::vector<int>& axes, bool is_max) {
  mx::array r = signed_zero_extreme(x, axes, is_max);
  mx::array both_zero = mx::logical_and(mx::equal(r, mx::zeros({}, mx::float32)),
                                        mx::equal(init, mx::zeros({}, mx::float32)));
  // For two zeros r + init is +0 unless both are -0 (max's answer); min's is -(-r + -init).
  mx::array zeros = is_max ? mx::add(r, init) : mx::negative(mx::add(mx::negative(r),
                                                                       mx::negative(init)));
  return mx::where(both_zero, zeros, is_max ? mx::maximum(r, init) : mx::minimum(r, init));
}

// Whether `init` is the identity of the single-op body `k` in dtype `out`, so that folding it
// in changes nothing: MLX's reductions start from that identity themselves (a float sum from
// +0, so it never returns -0 and adding +0 is exact; max from -inf; `and` from true; ...).
bool init_is_identity(ir::OpKind k, const mx::array& init, mx::Dtype out) {
  if (out == mx::bool_) {
    std::optional<bool> v = splat_bool_constant(init);
    return v && ((k == ir::OpKind::kAnd && *v) || (k == ir::OpKind::kOr && !*v));
  }
  if (out == mx::complex64) return false;
  if (mx::issubdtype(out, mx::floating)) {
    std::optional<double> v = splat_float_constant(init);
    if (!v) return false;
    switch (k) {
      case ir::OpKind::kAdd: return *v == 0 && !std::signbit(*v);
      case ir::OpKind::kMultiply: return *v == 1;
      case ir::OpKind::kMaximum: return std::isinf(*v) && *v < 0;
      case ir::OpKind::kMinimum: return std::isinf(*v) && *v > 0;
      default: return false;
    }
  }
  std::optional<int64_t> v = splat_int_constant(init);
  if (!v) return false;
  const int bits = dtype_bits(out);
  const bool is_unsigned = is_unsigned_dtype(out);
  switch (k) {
    case ir::OpKind::kAdd: return *v == 0;
    case ir::OpKind::kMultiply: return *v == 1;
    case ir::OpKind::kMaximum:
      return is_unsigned ? *v == 0 : bits == 64 ? *v == INT64_MIN : *v == -(int64_t{1} << (bits - 1));
    case ir::OpKind::kMinimum:
      // splat_int_constant wraps unsigned values into int64: all ones is -1.
      return is_unsigned ? (bits == 64 ? *v == -1 : *v == (int64_t{1} << bits) - 1)
                         : bits == 64 ? *v == INT64_MAX : *v == (int64_t{1} << (bits - 1)) - 1;
    default: return false;
  }
}

// MLX reduction for a single-op body over `axes`, combined with `init`; nullopt when MLX has
// no exact equivalent (the caller then uses the tree reduction).
std::optional<mx::array> fast_reduce(ir::OpKind k, const mx::array& x, const mx::array& init,
                                     const std::vector<int>& axes, mx::Dtype out) {
  const bool is_bool = out == mx::bool_;
  const bool is_cplx = out == mx::complex64;
  // Half floats accumulate in f32 and round once at the end.
  const mx::Dtype acc = is_half_float(out) ? mx::float32 : out;
  const bool identity = init_is_identity(k, init, out);
  mx::array xa = mx::astype(x, acc), ia = mx::astype(init, acc);
  switch (k) {
    case ir::OpKind::kAdd:
      if (is_bool) return std::nullopt;
      // Integer sums come back widened; the cast wraps them exactly like XLA's.
      if (identity) return mx::astype(mx::sum(xa, axes), out);
      return mx::astype(mx::add(mx::astype(mx::sum(xa, axes), acc), ia), out);
    case ir::OpKind::kMultiply:
      if (is_bool) return std::nullopt;
      if (identity) return mx::astype(mx::prod(xa, axes), out);
      return mx::astype(mx::multiply(mx::astype(mx::prod(xa, axes), acc), ia), out);
    case ir::OpKind::kMaximum:
    case ir::OpKind::kMinimum: {
      if (is_cplx) return std::nullopt;
      const bool is_max = k == ir::OpKind::kMaximum;
      if (acc == mx::float32) {
        return mx::astype(identity ? signed_zero_extreme(xa, axes, is_max)
                                   : signed_zero_extreme(xa, ia, axes, is_max), out);
      }
      mx::array r = is_max ? mx::max(xa, axes) : mx::min(xa, axes);  // MLX's propagate NaN
      if (identity) return mx::astype(r, out);
      return mx::astype(is_max ? mx::maximum(r, ia) : mx::minimum(r, ia), out);
    }
    case ir::OpKind::kAnd:
      if (!is_bool) return std::nullopt;
      if (identity) return mx::all(xa, axes);
      return mx::logical_and(mx::all(xa, axes), ia);
    case ir::OpKind::kOr:
      if (!is_bool) return std::nullopt;
      if (identity) return mx::any(xa, axes);
      return mx::logical_or(mx::any(xa, axes), ia);
    default:
      return std::nullopt;
  }
}

// Applies the body pairwise along `axis` until one element is left; odd lengths carry their
// last element over to the next round instead of padding (the init value is used only once).
StatusOr<Values> tree_reduce(LowerContext& ctx, const ir::Region& body, Values xs, int axis) {
  const size_t n = xs.size();
  int len = xs[0].shape(axis);
  while (len > 1) {
    const int h = len / 2;
    Values args, rest;
    args.reserve(2 * n);
    for (size_t i = 0; i < n; ++i) {
      mx::Shape start(xs[i].ndim(), 0), mid = xs[i].shape();
      mid[axis] = h;
      args.push_back(mx::slice(xs[i], start, mid));
    }
    for (size_t i = 0; i < n; ++i) {
      mx::Shape start(xs[i].ndim(), 0), stop = xs[i].shape();
      start[axis] = h;
      stop[axis] = 2 * h;
      args.push_back(mx::slice(xs[i], start, stop));
      if (len % 2) {
        start[axis] = 2 * h;
        stop[axis] = len;
        rest.push_back(mx::slice(xs[i], start, stop));
      }
    }
    ASSIGN_OR_RETURN(Values out, apply_body_elementwise(ctx, body, args));
    if (out.size() != n) return invalid_argument("reduce body returned the wrong value count");
    for (size_t i = 0; i < n; ++i) {
      // A body may return a broadcastable (e.g. constant) value; keep the halves' shape.
      mx::Shape shape = args[i].shape();
      out[i] = mx::broadcast_to(mx::astype(out[i], args[i].dtype()), shape);
      xs[i] = len % 2 ? mx::concatenate({out[i], rest[i]}, axis) : out[i];
    }
    len = h + len % 2;
  }
  return xs;
}

StatusOr<Values> lower_reduce(LowerContext& ctx, const ir::Op& op, const Values& in) {
  const size_t n = op.results.size();
  if (in.size() != 2 * n || op.regions.size() != 1 || op.regions[0].empty())
    return ctx.malformed(op, "reduce needs N inputs, N init values and a body");
  const ir::Type& t = operand_type(op, 0);
  if (!is_static(t)) return ctx.unsupported(op, "dynamic operand shape");
  const int rank = static_cast<int>(t.rank());
  for (size_t i = 0; i < n; ++i)
    if (operand_type(op, i).dims != t.dims || operand_type(op, n + i).rank() != 0)
      return ctx.malformed(op, "reduce operands must share one shape and init values be scalars");
  std::vector<int> axes = to_ints(op.get_i64s("dimensions"));
  std::vector<bool> reduced(rank, false);
  for (int a : axes) {
    if (a < 0 || a >= rank || reduced[a]) return ctx.malformed(op, "bad reduce dimension");
    reduced[a] = true;
  }
  // Inputs and inits in the result's storage dtype (bodies may compute in a wider type).
  Values xs, inits;
  std::vector<mx::Dtype> out_dt;
  for (size_t i = 0; i < n; ++i) {
    auto dt = storage_dtype(result_type(op, i).dtype);
    if (!dt) return ctx.unsupported(op, "result type " + type_to_string(result_type(op, i)));
    out_dt.push_back(*dt);
    const bool cast = is_native(result_type(op, i).dtype) && in[i].dtype() != *dt;
    xs.push_back(cast ? mx::astype(in[i], *dt) : in[i]);
    inits.push_back(cast ? mx::astype(in[n + i], *dt) : in[n + i]);
  }
  int64_t count = 1;
  for (int a : axes) count *= t.dims[a];
  // No reduced dims: XLA returns the operands unchanged (the init value is not folded in).
  if (axes.empty()) return xs;
  // Nothing to reduce: every result element is its init value.
  if (count == 0) {
    Values res;
    for (size_t i = 0; i < n; ++i)
      res.push_back(mx::broadcast_to(inits[i], storage_shape(result_type(op, i))));
    return res;
  }
  // One element per result (every reduced dim of size 1): XLA's simplifier makes the reduce a
  // reshape of its operands, whatever the init and the body (jaxlib 0.10.2: lax.reduce of an
  // f32[3,1] from 5.0 with add over dim 1 is the operand, -0 and NaN payloads kept). jax's bounds
  // checks reduce their one-component index vectors so.
  if (count == 1) {
    Values res;
    for (size_t i = 0; i < n; ++i)
      res.push_back(reshape_view(xs[i], storage_shape(result_type(op, i))));
    return res;
  }
  if (n == 1 && is_native(t.dtype) && !axes.empty()) {
    if (auto k = match_binary_body(op.regions[0])) {
      if (auto r = fast_reduce(*k, xs[0], inits[0], axes, out_dt[0])) return Values{*r};
    }
  }
  // Tree path: move the reduced dims to one axis after the kept ones (before a c128 operand's
  // trailing dim; operands of other types beside it have none).
  std::vector<int> perm;
  mx::Shape flat;
  for (int d = 0; d < rank; ++d)
    if (!reduced[d]) perm.push_back(d), flat.push_back(static_cast<int>(t.dims[d]));
  const int axis = static_cast<int>(perm.size());
  for (int a : axes) perm.push_back(a);
  flat.push_back(static_cast<int>(count));
  for (size_t i = 0; i < n; ++i) {
    std::vector<int> p = perm;
    mx::Shape f = flat;
    for (int j = rank; j < static_cast<int>(xs[i].ndim()); ++j)
      p.push_back(j), f.push_back(xs[i].shape(j));
    xs[i] = mx::reshape(permute(xs[i], p), f);
  }
  ASSIGN_OR_RETURN(Values red, tree_reduce(ctx, op.regions[0], xs, axis));
  // Fold the init values in once: body(init, reduced).
  Values args = inits;
  for (size_t i = 0; i < n; ++i) args.push_back(mx::squeeze(red[i], axis));
  ASSIGN_OR_RETURN(Values res, apply_body_elementwise(ctx, op.regions[0], args));
  if (res.size() != n) return ctx.malformed(op, "reduce body returned the wrong value count");
  for (size_t i = 0; i < n; ++i)
    res[i] = mx::broadcast_to(mx::astype(res[i], out_dt[i]), storage_shape(result_type(op, i)));
  return res;
}

// Keys that order f32/f16/bf16 values as jax's argmax / argmin compares them, for one MLX
// argmax / argmin: total_order_keys with +0 and -0 one key (jax finds them equal: the first of
// them is the extreme) and every NaN the key that wins (the first NaN is jax's result).
// Elementwise, so a GPU fuses it into one kernel ahead of the arg-reduction, where a separate
// NaN search (isnan, any, an argmax of bools, a select) was three kernels more.
mx::array argminmax_keys(const mx::array& x, bool is_max) {
  const mx::array keys = total_order_keys(x, is_max);
  return mx::where(mx::equal(x, mx::zeros({}, x.dtype())), mx::zeros({}, keys.dtype()), keys);
}

// jax's argmax / argmin reduce, recognized by passes/argminmax.cc: the index of the first NaN if
// any, else the first index of the extreme (MLX's argmax / argmin pick the first on every
// backend); the value is the element at that index.
StatusOr<Values> lower_argminmax(LowerContext& ctx, const ir::Op& op, const Values& in,
                                 bool is_max) {
  // Results: (value, index), or the index alone (passes/argminmax.h).
  const size_t n = op.results.size();
  if (in.size() != 1 || (n != 1 && n != 2)) return ctx.malformed(op, "argmax/argmin shape");
  const ir::Type& t = operand_type(op, 0);
  const int axis = static_cast<int>(op.get_i64("dimension", -1));
  if (axis < 0 || axis >= static_cast<int>(t.rank()) || !is_static(t))
    return ctx.malformed(op, "bad argmax/argmin dimension");
  auto index_dt = storage_dtype(result_type(op, n - 1).dtype);
  if (!index_dt) return ctx.unsupported(op, "index type " + type_to_string(result_type(op, n - 1)));
  const mx::array& x = in[0];
  // Bools order false < true as uint8 (MLX's bool ordering is not something to rely on).
  mx::array keys = x.dtype() == mx::bool_ ? mx::astype(x, mx::uint8) : x;
  const bool float_keys = x.dtype() == mx::float32 || is_half_float(x.dtype());
  if (float_keys) keys = argminmax_keys(x, is_max);
  mx::array idx = is_max ? mx::argmax(keys, axis) : mx::argmin(keys, axis);
  if (ir::is_float(t.dtype) && !float_keys) {
    mx::array nan = mx::isnan(x);
    idx = mx::where(mx::any(nan, axis), mx::argmax(nan, axis), idx);
  }
  // MLX's indices are uint32; below 2^31 their int32 bits are the same (a view, not a kernel).
  const bool same_bits = idx.dtype() == mx::uint32 && *index_dt == mx::int32 &&
                         t.dims[axis] <= std::numeric_limits<int32_t>::max();
  mx::array index = same_bits ? mx::view(idx, mx::int32) : mx::astype(idx, *index_dt);
  if (n == 1) return Values{index};
  mx::array value = mx::squeeze(mx::take_along_axis(x, mx::expand_dims(idx, axis), axis), axis);
  return Values{value, index};
}

}  // namespace

void register_reduce(Registry& r) {
  r.add(ir::OpKind::kReduce, lower_reduce);
  r.add_custom_call(passes::kArgmaxTarget, [](LowerContext& ctx, const ir::Op& op,
                                              const Values& in) {
    return lower_argminmax(ctx, op, in, /*is_max=*/true);
  });
  r.add_custom_call(passes::kArgminTarget, [](LowerContext& ctx, const ir::Op& op,
                                              const Values& in) {
    return lower_argminmax(ctx, op, in, /*is_max=*/false);
  });
}

}  // namespace jaxmlx::lower
