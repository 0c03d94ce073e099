// Lowering rules: shape family, part 1 (see lowering.h for the rule contract): constant, iota,
// broadcast_in_dim, broadcast, reshape, transpose, reverse, concatenate, and the dynamic_*
// forms whose result shapes are static. Slicing and padding are in shape_slice.cc.
//
// Shape ops move data only, so they work on every storage form (f64 as raw uint64 bits, c128
// with its trailing storage dim), not only on types MLX computes in natively.
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <numeric>

#include "lower/shape_util.h"

namespace jaxmlx::lower {

using namespace shape_util;

namespace {

// An MLX-owned array holding a copy of `nbytes` bytes.
mx::array array_from_bytes(const uint8_t* p, size_t nbytes, const mx::Shape& shape,
                           mx::Dtype dt) {
  void* buf = std::malloc(std::max<size_t>(nbytes, 1));
  if (nbytes > 0) std::memcpy(buf, p, nbytes);  // p may be null for an empty array
  return mx::array(buf, shape, dt, [](void* q) { std::free(q); });
}

// Dense bytes in storage form: bools as 0/1 (MLIR may store true as 0xFF), sub-byte ints
// sign- or zero-extended into their byte.
std::vector<uint8_t> normalized_bytes(ir::ElementType et, std::span<const uint8_t> data) {
  std::vector<uint8_t> out(data.begin(), data.end());
  int bits = 0;
  if (et == ir::ElementType::kPred) {
    for (uint8_t& b : out) b = b != 0;
  } else if ((bits = ir::element_bit_width(et)) < 8 && ir::is_integer(et)) {
    const int shift = 8 - bits;
    for (uint8_t& b : out) {
      b = ir::is_signed_int(et) ? static_cast<uint8_t>(static_cast<int8_t>(b << shift) >> shift)
                                : static_cast<uint8_t>(b & ((1u << bits) - 1));
    }
  }
  return out;
}

StatusOr<Values> lower_constant(LowerContext& ctx, const ir::Op& op, const Values&) {
  const auto* dense = op.attr<ir::DenseElementsAttr>("value");
  const ir::Type& t = result_type(op);
  if (dense == nullptr || dense->type == nullptr) return ctx.malformed(op, "no dense value");
  auto dt = storage_dtype(t.dtype);
  if (!dt || !is_static(t)) return ctx.unsupported(op, "constant of type " + type_to_string(t));
  mx::Shape shape = storage_shape(t);
  const int64_t n = t.num_elements();
  if (n == 0) return Values{mx::zeros(shape, *dt)};
  const size_t elem = mx::size_of(*dt) * std::max(1, storage_trailing_dim(t.dtype));
  const size_t want = elem * (dense->splat ? 1 : static_cast<size_t>(n));
  if (dense->data.size() != want)
    return ctx.malformed(op, "dense data has " + std::to_string(dense->data.size()) +
                                 " bytes, expected " + std::to_string(want));
  std::vector<uint8_t> bytes = normalized_bytes(t.dtype, dense->data);
  if (!dense->splat) return Values{array_from_bytes(bytes.data(), bytes.size(), shape, *dt)};
  // A splat is one element broadcast (a view), never a materialized full array.
  mx::Shape one(shape.size(), 1);
  if (trailing_rank(t)) one.back() = shape.back();
  mx::array e = array_from_bytes(bytes.data(), bytes.size(), one, *dt);
  return Values{mx::broadcast_to(e, shape)};
}

// 0, 1, ..., n-1 as a 1-d array of element type `et` in storage form; nullopt if unsupported.
std::optional<mx::array> iota_vector(ir::ElementType et, int64_t n) {
  auto dt = storage_dtype(et);
  if (!dt) return std::nullopt;
  const int nn = static_cast<int>(n);
  if (et == ir::ElementType::kF64) {
    std::vector<double> v(n);
    std::iota(v.begin(), v.end(), 0.0);
    return array_from_bytes(reinterpret_cast<const uint8_t*>(v.data()), n * 8, {nn}, mx::uint64);
  }
  if (!is_native(et)) return std::nullopt;
  if (ir::is_float(et) || ir::is_complex(et))
    return mx::astype(mx::arange(0.0, static_cast<double>(n), 1.0, mx::float32), *dt);
  mx::Dtype wide = mx::size_of(*dt) == 8 ? *dt : mx::int32;
  return mx::astype(mx::arange(0.0, static_cast<double>(n), 1.0, wide), *dt);
}

StatusOr<Values> iota_of(LowerContext& ctx, const ir::Op& op, const ir::Type& t, int64_t dim) {
  if (!is_static(t) || dim < 0 || dim >= t.rank())
    return ctx.malformed(op, "bad iota_dimension or dynamic result");
  std::optional<mx::array> v = iota_vector(t.dtype, t.dims[dim]);
  if (!v) return ctx.unsupported(op, "iota of " + type_to_string(t));
  mx::Shape shape = storage_shape(t);
  mx::Shape ones(shape.size(), 1);
  ones[dim] = shape[dim];
  return Values{mx::broadcast_to(mx::reshape(*v, ones), shape)};
}

StatusOr<Values> lower_iota(LowerContext& ctx, const ir::Op& op, const Values&) {
  return iota_of(ctx, op, result_type(op), op.get_i64("iota_dimension"));
}

StatusOr<Values> lower_dynamic_iota(LowerContext& ctx, const ir::Op& op, const Values&) {
  return iota_of(ctx, op, result_type(op), op.get_i64("iota_dimension"));
}

// spec: broadcast_in_dim — operand dim i goes to result dim broadcast_dimensions[i]; size-1
// operand dims stretch. The dims need not be sorted, so transpose into result order first.
StatusOr<Values> broadcast_in_dim(LowerContext& ctx, const ir::Op& op, const mx::array& x,
                                  const std::vector<int64_t>& dims) {
  const ir::Type& t = result_type(op);
  const ir::Type& in_t = operand_type(op, 0);
  if (!is_static(t) || !is_static(in_t)) return ctx.unsupported(op, "dynamic shapes");
  if (static_cast<int64_t>(dims.size()) != in_t.rank())
    return ctx.malformed(op, "broadcast_dimensions size != operand rank");
  const int r = static_cast<int>(dims.size());
  std::vector<int> order(r);
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](int a, int b) { return dims[a] < dims[b]; });
  mx::array y = x;
  if (!std::is_sorted(dims.begin(), dims.end())) {
    std::vector<int> perm = order;
    if (trailing_rank(t)) perm.push_back(r);
    y = mx::transpose(y, perm);
  }
  mx::Shape shape = storage_shape(t);
  mx::Shape ones(shape.size(), 1);
  if (trailing_rank(t)) ones.back() = shape.back();
  for (int i = 0; i < r; ++i) {
    if (dims[i] < 0 || dims[i] >= t.rank()) return ctx.malformed(op, "bad broadcast dimension");
    ones[dims[i]] = static_cast<int>(in_t.dims[i]);
  }
  // Nothing stretched: only size-1 dims come or go, a reshape (one view, or none at all).
  if (ones == shape) return Values{reshape_view(y, shape)};
  // numpy's broadcasting aligns trailing dims: where every operand dim larger than 1 already
  // lands there (a bias [n] onto [b, s, n], a [1, 1] keepdims scalar anywhere), broadcast_to
  // takes the operand as it is, without a reshape first.
  bool aligned = true;
  for (int i = 0; i < r; ++i)
    aligned = aligned && (in_t.dims[order[i]] == 1 || dims[order[i]] == t.rank() - r + i);
  if (!aligned) return Values{mx::broadcast_to(reshape_view(y, ones), shape)};
  // Leading size-1 dims mean nothing to that alignment: a pending reshape that only adds or
  // drops them (jax's bias [n] -> [1, 1, n] before [1, 1, n] -> [b, s, n]) is skipped.
  while (is_pending_reshape(y) && y.inputs()[0].ndim() <= shape.size() &&
         without_leading_ones(y.inputs()[0].shape()) == without_leading_ones(y.shape())) {
    mx::array in = y.inputs()[0];
    y = std::move(in);
  }
  return Values{mx::broadcast_to(y, shape)};
}

StatusOr<Values> lower_broadcast_in_dim(LowerContext& ctx, const ir::Op& op, const Values& in) {
  return broadcast_in_dim(ctx, op, in[0], op.get_i64s("broadcast_dimensions"));
}

StatusOr<Values> lower_dynamic_broadcast_in_dim(LowerContext& ctx, const ir::Op& op,
                                                const Values& in) {
  return broadcast_in_dim(ctx, op, in[0], op.get_i64s("broadcast_dimensions"));
}

// Old form: result shape is broadcast_sizes ++ operand shape, i.e. numpy-style leading dims.
StatusOr<Values> lower_broadcast(LowerContext& ctx, const ir::Op& op, const Values& in) {
  const ir::Type& t = result_type(op);
  if (!is_static(t)) return ctx.unsupported(op, "dynamic shapes");
  return Values{mx::broadcast_to(in[0], storage_shape(t))};
}

StatusOr<Values> lower_reshape(LowerContext& ctx, const ir::Op& op, const Values& in) {
  const ir::Type& t = result_type(op);
  if (!is_static(t)) return ctx.unsupported(op, "dynamic result shape");
  const mx::Shape shape = storage_shape(t);
  size_t count = 1;
  for (int n : shape) count *= static_cast<size_t>(n);
  if (count != in[0].size())
    return ctx.malformed(op, "the result holds another number of elements than the operand");
  std::vector<int> dims(in[0].ndim());
  std::iota(dims.begin(), dims.end(), 0);
  return Values{permuted_view(in[0], dims, shape)};
}

StatusOr<Values> lower_transpose(LowerContext& ctx, const ir::Op& op, const Values& in) {
  const ir::Type& t = result_type(op);
  const std::vector<int64_t> dims = op.get_i64s("permutation");
  if (operand_type(op, 0).rank() != t.rank() || !is_permutation(dims, t.rank()))
    return ctx.malformed(op, "permutation is not one of the operand's and the result's dims");
  std::vector<int> perm = to_ints(dims);
  if (trailing_rank(t)) perm.push_back(static_cast<int>(perm.size()));
  return Values{permuted_view(in[0], perm, storage_shape(t))};
}

StatusOr<Values> lower_reverse(LowerContext& ctx, const ir::Op& op, const Values& in) {
  std::vector<int> dims = to_ints(op.get_i64s("dimensions"));
  if (dims.empty()) return Values{in[0]};
  for (int d : dims)
    if (d < 0 || d >= result_type(op).rank()) return ctx.malformed(op, "bad reverse dimension");
  return Values{mx::flip(in[0], dims)};
}

StatusOr<Values> lower_concatenate(LowerContext& ctx, const ir::Op& op, const Values& in) {
  if (in.empty()) return ctx.malformed(op, "no operands");
  const int dim = static_cast<int>(op.get_i64("dimension"));
  if (dim < 0 || dim >= result_type(op).rank()) return ctx.malformed(op, "bad dimension");
  if (in.size() == 1) return Values{in[0]};
  return Values{mx::concatenate(in, dim)};
}

// A tuple is not an array: our IR keeps values flat, so get_tuple_element/tuple only survive
// where the passes left them (they are handled by control_flow.cc when needed).

}  // namespace

void register_shape_slice(Registry& r);  // shape_slice.cc

void register_shape(Registry& r) {
  using K = ir::OpKind;
  r.add(K::kConstant, lower_constant);
  r.add(K::kIota, lower_iota);
  r.add(K::kDynamicIota, lower_dynamic_iota);
  r.add(K::kBroadcastInDim, lower_broadcast_in_dim);
  r.add(K::kDynamicBroadcastInDim, lower_dynamic_broadcast_in_dim);
  r.add(K::kBroadcast, lower_broadcast);
  r.add(K::kReshape, lower_reshape);
  r.add(K::kDynamicReshape, lower_reshape);
  r.add(K::kTranspose, lower_transpose);
  r.add(K::kReverse, lower_reverse);
  r.add(K::kConcatenate, lower_concatenate);
  register_shape_slice(r);
}

}  // namespace jaxmlx::lower
