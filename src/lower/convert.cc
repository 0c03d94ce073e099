// Lowering rules: convert family (see lowering.h for the rule contract): stablehlo.convert with
// XLA's semantics (float->int saturates, NaN->0; ->pred is x != 0; complex->real takes the real
// part) and stablehlo.bitcast_convert (same-width views, width changes via a trailing dim;
// sub-byte types pack little-endian, element 0 in the least significant bits).
// Types MLX lacks convert exactly through their bits (float_bits.h): narrow floats via f32,
// sub-byte ints wrap (int sources) or saturate (float sources) to their width, and the exact
// f64 cases (f64 -> f32, narrower -> f64). stablehlo.reduce_precision lives here too: it is a
// conversion to a smaller format and back.
#include <limits>
#include <optional>
#include <vector>

#include "lower/dtypes.h"
#include "lower/elementwise_internal.h"
#include "lower/float_bits.h"
#include "lower/lowering.h"
#include "lower/util.h"
#include "mlx/ops.h"

namespace jaxmlx::lower {

namespace {

using E = ir::ElementType;

// Integer -> integer with C's modular semantics. The width change happens in the source's
// signedness and the sign change is a view: mx::compile miscompiles unsigned->signed->float
// chains of astype (MLX #3338, PITFALLS 2.3).
mx::array int_to_int(const mx::array& x, mx::Dtype to) {
  bool from_unsigned = is_unsigned_dtype(x.dtype());
  if (from_unsigned == is_unsigned_dtype(to)) return mx::astype(x, to);
  mx::array resized = mx::astype(x, from_unsigned ? unsigned_of(to) : signed_of(to));
  return mx::view(resized, to);
}

// Float (f16/bf16/f32) -> integer of `bits` (<= the storage width): truncate toward zero,
// saturate to the range, NaN -> 0.
mx::array float_to_int(const mx::array& x, mx::Dtype to, int bits) {
  // f32 holds every bound exactly (powers of two) and every f16/bf16 value.
  mx::array f = mx::astype(x, mx::float32);
  bool is_unsigned = is_unsigned_dtype(to);
  double hi_bound = std::ldexp(1.0, is_unsigned ? bits : bits - 1);  // first value too big
  double lo_bound = is_unsigned ? 0.0 : -std::ldexp(1.0, bits - 1);  // smallest value
  mx::array too_big = mx::greater_equal(f, float_scalar(hi_bound, mx::float32));
  mx::array too_small = mx::less(f, float_scalar(lo_bound, mx::float32));
  mx::array bad = mx::logical_or(mx::logical_or(too_big, too_small), mx::isnan(f));
  // Cast only in-range values (out-of-range float->int casts are undefined in C++).
  mx::array cast = mx::astype(mx::where(bad, float_scalar(0, mx::float32), f), to);
  int64_t max_v = is_unsigned ? static_cast<int64_t>((~0ull) >> (64 - bits))
                              : static_cast<int64_t>((~0ull) >> (65 - bits));
  int64_t min_v = is_unsigned ? 0 : -max_v - 1;
  mx::array r = mx::where(too_big, int_scalar(max_v, to), cast);
  return mx::where(too_small, int_scalar(min_v, to), r);
}

mx::array real_to_complex(const mx::array& x, E from) {
  // Via f32 (int->f32 rounds to nearest); MLX's f32->complex64 cast sets imag to 0.
  mx::array f = from == E::kPred || ir::is_integer(from) || x.dtype() != mx::float32
                    ? mx::astype(x, mx::float32)
                    : x;
  return mx::astype(f, mx::complex64);
}

// `f` (f32) with the sign bit of `half` (its f16/bf16 source). MLX's CUDA backend widens a
// negative f16 NaN to a positive f32 one (the GPU's canonical NaN); XLA keeps the sign into f8.
mx::array with_sign_of(const mx::array& f, const mx::array& half) {
  mx::array top = mx::right_shift(mx::view(half, mx::uint16), int_scalar(15, mx::uint16));
  mx::array sign = mx::left_shift(mx::astype(top, mx::uint32), int_scalar(31, mx::uint32));
  mx::array bits = mx::bitwise_and(mx::view(f, mx::uint32), int_scalar(0x7fffffff, mx::uint32));
  return mx::view(mx::bitwise_or(bits, sign), mx::float32);
}

// True when every value of `t` is exactly an f32 (so converting through f32 rounds once).
bool exact_in_f32(E t) {
  return t == E::kPred || t == E::kF16 || t == E::kBF16 || t == E::kF32 ||
         fbits::is_narrow_float(t) || (ir::is_integer(t) && ir::element_bit_width(t) <= 16);
}

mx::array convert(const mx::array& x, E from, E to, mx::Dtype to_dtype) {
  if (from == to) return x;
  if (fbits::is_narrow_float(to)) {
    // Via f32: exact from every narrower type; one extra rounding from wide ints (> 2^24).
    mx::array f = convert(x, from, E::kF32, mx::float32);
    if (from == E::kF16 || from == E::kBF16) f = with_sign_of(f, x);
    mx::array bits = fbits::f32_to_narrow(f, to);
    // XLA narrows everything but f32/f64 to e5m2 (f16's top byte) through f16: every NaN
    // becomes 0x7f.
    if (to == E::kF8E5M2 && from != E::kF32 && from != E::kF64)
      bits = mx::where(mx::isnan(f), int_scalar(0x7f, mx::uint8), bits);
    return bits;
  }
  if (fbits::is_narrow_float(from)) {
    mx::array f = fbits::narrow_to_f32(x, from);
    if (to != E::kF16 && to != E::kBF16) return convert(f, E::kF32, to, to_dtype);
    // XLA gives the canonical quiet NaN of the sign; MLX's f32 -> f16/bf16 casts do not.
    const int64_t nan_bits = to == E::kF16 ? 0x7e00 : 0x7fc0;
    mx::array sign = mx::astype(ew::sign_bit(f), mx::uint16);
    mx::array nan = mx::bitwise_or(mx::left_shift(sign, int_scalar(15, mx::uint16)),
                                   int_scalar(nan_bits, mx::uint16));
    return mx::where(mx::isnan(f), mx::view(nan, to_dtype), mx::astype(f, to_dtype));
  }
  if (from == E::kF64) return convert(fbits::f64_bits_to_f32(x), E::kF32, to, to_dtype);
  if (to == E::kF64) return fbits::f32_to_f64_bits(convert(x, from, E::kF32, mx::float32));
  if (ir::is_integer(from) && ir::element_bit_width(from) < 8)
    return convert(fbits::wrap_subbyte(x, from), from == E::kS2 || from == E::kS4 ? E::kS8 : E::kU8,
                   to, to_dtype);
  if (ir::is_integer(to) && ir::element_bit_width(to) < 8 && to_dtype.size() == 1) {
    if (ir::is_float(from) || ir::is_complex(from)) {
      mx::array f = ir::is_complex(from) ? mx::real(x) : x;
      return float_to_int(f, to_dtype, ir::element_bit_width(to));
    }
    return fbits::wrap_subbyte(convert(x, from, ir::is_signed_int(to) ? E::kS8 : E::kU8,
                                       to_dtype), to);
  }
  if (to == E::kPred) {
    mx::array zero = ir::is_complex(from) ? mx::zeros_like(x) : int_scalar(0, x.dtype());
    if (ir::is_float(from)) zero = float_scalar(0, x.dtype());
    return mx::not_equal(x, zero);
  }
  if (ir::is_complex(to)) return ir::is_complex(from) ? x : real_to_complex(x, from);
  if (ir::is_complex(from)) return convert(mx::real(x), E::kF32, to, to_dtype);
  if (from == E::kPred) return mx::astype(x, to_dtype);
  if (ir::is_integer(from) && ir::is_integer(to)) return int_to_int(x, to_dtype);
  if (ir::is_float(from) && ir::is_integer(to)) return float_to_int(x, to_dtype, dtype_bits(to_dtype));
  // int->float and float->float: MLX's casts round to nearest even.
  return mx::astype(x, to_dtype);
}

// Conversions that are exact (or a single rounding, as XLA's) through the bit helpers.
bool convertible(E from, E to) {
  auto ok = [](E t) { return is_native(t) || fbits::is_narrow_float(t) || ir::is_integer(t); };
  if (from == E::kF64) return to == E::kF32 || to == E::kF64;
  if (to == E::kF64) return exact_in_f32(from);
  return ok(from) && ok(to);
}

StatusOr<Values> lower_convert(LowerContext& ctx, const ir::Op& op, const Values& in) {
  if (in.size() != 1) return ctx.malformed(op, "convert takes 1 operand");
  E from = element_type(op.operands[0]);
  E to = element_type(op.results[0]);
  if (!convertible(from, to)) RETURN_IF_ERROR(require_native(ctx, op));
  std::optional<mx::Dtype> to_dtype = storage_dtype(to);
  if (!to_dtype) return ctx.unsupported(op, "result type has no storage form");
  return Values{convert(in[0], from, to, *to_dtype)};
}

// Element types whose storage holds their exact bits at their own width (f64 as u64 bits,
// 8-bit floats as u8 bits), so a bitcast is a plain reinterpretation of the storage.
bool bitcastable(E t) {
  if (t == E::kPred || t == E::kC128) return false;
  std::optional<mx::Dtype> d = storage_dtype(t);
  return d && static_cast<int>(d->size()) * 8 == ir::element_bit_width(t);
}

// Types narrower than a byte, one per storage byte in its low bits (sub-byte ints, f4, f6).
bool packed_in_bytes(E t) {
  std::optional<mx::Dtype> d = storage_dtype(t);
  return t != E::kPred && d && d->size() == 1 && ir::element_bit_width(t) < 8;
}

// The bits of `x` (storage of `t`) as an unsigned int of t's width (uint8 below a byte; bits
// above the width, which host transfers may leave in sub-byte storage, are cleared).
mx::array raw_bits(const mx::array& x, E t) {
  const int w = ir::element_bit_width(t);
  if (w >= 8) return mx::view(x, unsigned_of(x.dtype()));
  return mx::bitwise_and(mx::view(x, mx::uint8), int_scalar((1 << w) - 1, mx::uint8));
}

// The storage (dtype `st`) of `t` from its bits in the low bits of the unsigned `u`.
mx::array from_raw_bits(const mx::array& u, E t, mx::Dtype st) {
  const int w = ir::element_bit_width(t);
  if (w >= 8) return mx::view(u, st);  // same size
  mx::array b = mx::bitwise_and(mx::astype(u, mx::uint8), int_scalar((1 << w) - 1, mx::uint8));
  return st == mx::uint8 ? b : fbits::wrap_subbyte(mx::view(b, st), t);  // signed: sign-extend
}

// spec: bitcast_convert between types of different widths, one of them under a byte. XLA packs
// sub-byte elements little-endian, element 0 in the least significant bits (as jax's CPU):
// a wider operand splits into a trailing dim of ratio pieces, a narrower one's last dim joins.
mx::array bitcast_packed(const mx::array& x, E from, E to, mx::Dtype to_dtype) {
  const int wf = ir::element_bit_width(from), wt = ir::element_bit_width(to);
  mx::array u = raw_bits(x, from);
  if (wf > wt) {
    std::vector<mx::array> parts;
    for (int k = 0; k < wf / wt; ++k)
      parts.push_back(from_raw_bits(mx::right_shift(u, int_scalar(k * wt, u.dtype())), to,
                                    to_dtype));
    return mx::stack(parts, -1);
  }
  // Narrower pieces: shift each into place in an unsigned accumulator of the result's width.
  const mx::Dtype acc = wt >= 8 ? unsigned_of(to_dtype) : mx::uint8;
  const int r = wt / wf, last = x.ndim() - 1;
  std::optional<mx::array> sum;
  for (int k = 0; k < r; ++k) {
    mx::array piece = mx::astype(mx::take(u, k, last), acc);
    piece = mx::left_shift(piece, int_scalar(k * wf, acc));
    sum = sum ? mx::bitwise_or(*sum, piece) : piece;
  }
  return from_raw_bits(*sum, to, to_dtype);
}

StatusOr<Values> lower_bitcast_convert(LowerContext& ctx, const ir::Op& op, const Values& in) {
  if (in.size() != 1) return ctx.malformed(op, "bitcast_convert takes 1 operand");
  E from = element_type(op.operands[0]);
  E to = element_type(op.results[0]);
  for (E t : {from, to})
    if (!bitcastable(t) && !packed_in_bytes(t))
      return ctx.unsupported(op, std::string(ir::element_type_name(t)) + " bitcast");
  mx::Dtype to_dtype = *storage_dtype(to);
  const mx::array& x = in[0];
  mx::Shape out_shape(op.results[0].type->dims.begin(), op.results[0].type->dims.end());
  const int wf = ir::element_bit_width(from), wt = ir::element_bit_width(to);
  if (packed_in_bytes(from) || packed_in_bytes(to)) {
    if (wf % wt != 0 && wt % wf != 0)
      return ctx.malformed(op, "bit widths are not multiples of each other");
    if (wf == wt) return Values{from_raw_bits(raw_bits(x, from), to, to_dtype)};
    if (wf < wt && (x.ndim() == 0 || x.shape(-1) != wt / wf))
      return ctx.malformed(op, "the operand's last dim must be the width ratio");
    return Values{mx::reshape(bitcast_packed(x, from, to, to_dtype), out_shape)};
  }
  if (x.dtype().size() == to_dtype.size()) return Values{ew::bit_view(x, to_dtype)};
  // spec: a wider operand gains a trailing dim of the ratio; a narrower one loses its last dim.
  // MLX views are little-endian reinterpretations of the last dim, as XLA's CPU bitcast is.
  mx::array src = x.dtype().size() > to_dtype.size() ? mx::expand_dims(x, -1) : x;
  return Values{mx::reshape(mx::view(src, to_dtype), out_shape)};
}

StatusOr<Values> lower_reduce_precision(LowerContext& ctx, const ir::Op& op, const Values& in) {
  if (in.size() != 1) return ctx.malformed(op, "reduce_precision takes 1 operand");
  RETURN_IF_ERROR(require_native(ctx, op));
  const int e = static_cast<int>(op.get_i64("exponent_bits"));
  const int m = static_cast<int>(op.get_i64("mantissa_bits"));
  if (e < 1 || m < 0) return ctx.malformed(op, "exponent_bits must be >= 1, mantissa_bits >= 0");
  E t = element_type(op.operands[0]);
  if (t != E::kF16 && t != E::kBF16 && t != E::kF32)
    return ctx.unsupported(op, std::string(ir::element_type_name(t)) + " operand");
  return Values{fbits::reduce_precision(in[0], e, m)};
}

}  // namespace

void register_convert(Registry& r) {
  r.add(ir::OpKind::kReducePrecision, lower_reduce_precision);
  r.add(ir::OpKind::kConvert, lower_convert);
  r.add(ir::OpKind::kBitcastConvert, lower_bitcast_convert);
}

}  // namespace jaxmlx::lower
