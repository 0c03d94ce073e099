#include "lower/emulated_types.h"

#include <cstdlib>
#include <limits>
#include <string_view>

#include "lower/dtypes.h"
#include "lower/elementwise_internal.h"
#include "lower/float_bits.h"
#include "lower/util.h"
#include "mlx/ops.h"

namespace jaxmlx::lower {

namespace {

using E = ir::ElementType;
using K = ir::OpKind;

// Ops that compute on element values; everything else moves storage or has regions (select
// only chooses between its operands' elements).
bool is_compute(K k) {
  if (k == K::kSelect) return false;
  if (ir::op_kind_is_elementwise(k)) return true;
  switch (k) {
    case K::kDot: case K::kDotGeneral: case K::kConvolution: case K::kFft: case K::kIota:
    case K::kCholesky: case K::kTriangularSolve: case K::kBatchNormGrad:
    case K::kBatchNormInference: case K::kBatchNormTraining:
      return true;
    default: return false;
  }
}

bool is_subbyte_int(E t) { return ir::is_integer(t) && ir::element_bit_width(t) < 8; }
bool is_wide(E t) { return t == E::kF64 || t == E::kC128; }

// Ops whose value on a signed sub-byte int depends on bits above its width in int8 storage:
// they run on the zero-extended (unsigned) value instead.
// popcnt matches XLA's CPU, which counts the sign-extended byte for s4 (popcnt(s4 -1) == 8)
// but the 2 bits of s2.
bool needs_unsigned_bits(K k, E t) {
  return k == K::kShiftRightLogical || k == K::kCountLeadingZeros ||
         (k == K::kPopcnt && t == E::kS2);
}

// Ops XLA's CPU runs on the bits, without flushing denormal inputs (see flush_denormal).
bool keeps_denormals(K k) { return k == K::kAbs || k == K::kNegate || k == K::kSign; }

// The type `t` computes in for `op`, or nullopt when it computes natively (or not at all).
std::optional<E> compute_type(E t, K k) {
  // XLA's CPU computes the narrow floats f16 holds exactly in f16 (one rounding to f16 per
  // op, then to the narrow type), and e8m0 in f32.
  if (fbits::is_narrow_float(t)) return t == E::kF8E8M0FNU ? E::kF32 : E::kF16;
  if (is_subbyte_int(t)) {
    // XLA's arithmetic shift of an unsigned sub-byte int fills with its top bit, as if signed.
    if (k == K::kShiftRightArithmetic) return E::kS8;
    return ir::is_unsigned_int(t) || needs_unsigned_bits(k, t) ? E::kU8 : E::kS8;
  }
  if (t == E::kF64 && f64_downcast_enabled()) return E::kF32;
  if (t == E::kC128 && f64_downcast_enabled()) return E::kC64;
  return std::nullopt;
}

// f32 denormals -> signed zero. XLA's CPU computes narrow-float ops in f32 with denormals
// flushed (inputs and results); only e8m0 has values (2^-127) in that range.
mx::array flush_denormal(const mx::array& x) {
  mx::array tiny = float_scalar(std::numeric_limits<float>::min(), mx::float32);
  return mx::where(mx::less(mx::abs(x), tiny), mx::multiply(x, float_scalar(0, mx::float32)), x);
}

// Storage of `t` -> an array of compute type `c`.
mx::array to_compute(const mx::array& x, E t, E c, K k) {
  if (fbits::is_narrow_float(t)) {
    mx::array f = fbits::narrow_to_f32(x, t);
    if (c == E::kF16) return mx::astype(f, mx::float16);  // exact
    return t == E::kF8E8M0FNU && !keeps_denormals(k) ? flush_denormal(f) : f;
  }
  if (t == E::kF64) return fbits::f64_bits_to_f32(x);
  if (t == E::kC128) {
    mx::array re = fbits::f64_bits_to_f32(mx::take(x, 0, -1));
    mx::array im = fbits::f64_bits_to_f32(mx::take(x, 1, -1));
    return ew::make_complex(re, im);
  }
  // Sub-byte ints: the value wrapped to its width (host transfers may leave the high bits).
  mx::array v = fbits::wrap_subbyte(x, t);
  if (c == E::kS8 && ir::is_unsigned_int(t))  // its bits as the same-width signed int
    return fbits::wrap_subbyte(mx::view(v, mx::int8), t == E::kU4 ? E::kS4 : E::kS2);
  if (c == E::kU8)
    v = mx::bitwise_and(mx::view(v, mx::uint8),
                        int_scalar((1 << ir::element_bit_width(t)) - 1, mx::uint8));
  return v;
}

// A result of compute type `c` -> the storage of `t`.
mx::array to_storage(const mx::array& y, E t, E c, K k) {
  if (fbits::is_narrow_float(t)) {
    bool flush = t == E::kF8E8M0FNU && y.dtype() == mx::float32 && !keeps_denormals(k);
    return fbits::f32_to_narrow(flush ? flush_denormal(y) : y, t);
  }
  if (t == E::kF64) return fbits::f32_to_f64_bits(y);
  if (t == E::kC128)
    return mx::stack({fbits::f32_to_f64_bits(mx::real(y)), fbits::f32_to_f64_bits(mx::imag(y))},
                     -1);
  mx::array v = y;
  if (k == K::kCountLeadingZeros)  // counted over 8 bits; the type has fewer
    v = mx::subtract(v, int_scalar(8 - ir::element_bit_width(t), v.dtype()));
  mx::Dtype st = *storage_dtype(t);
  if ((c == E::kU8) != (st == mx::uint8)) v = mx::view(mx::astype(v, c == E::kU8 ? mx::uint8 : mx::int8), st);
  return fbits::wrap_subbyte(mx::astype(v, st), t);
}

// `v` with its type's element type replaced by `c` (same shape).
ir::Value retyped(const ir::Value& v, E c) {
  // Interned per thread: the device worker is the only thread lowering; pointers stay valid.
  thread_local ir::TypeArena arena;
  ir::Value out = v;
  out.type = arena.tensor(c, v.type->dims);
  return out;
}

}  // namespace

bool f64_downcast_enabled() {
  static const bool enabled = [] {
    const char* v = std::getenv("JAX_MLX_F64");
    return v != nullptr && std::string_view(v) == "downcast";
  }();
  return enabled;
}

std::optional<StatusOr<Values>> lower_emulated(LowerContext& ctx, const ir::Op& op,
                                               const Values& in, const LowerFn& rule) {
  if (!is_compute(op.kind) || !op.regions.empty() || in.size() != op.operands.size())
    return std::nullopt;
  auto plain_tensor = [](const ir::Value& v) {
    return v.type && v.type->ranked && v.type->is_tensor && !v.type->is_tuple() &&
           !v.type->is_token();
  };
  bool any = false;
  for (const auto* vals : {&op.operands, &op.results})
    for (const ir::Value& v : *vals) {
      if (!plain_tensor(v)) return std::nullopt;
      any = any || compute_type(v.type->dtype, op.kind).has_value();
    }
  if (!any) return std::nullopt;
  // convert handles narrow floats and sub-byte ints exactly itself (one rounding, as XLA).
  if (op.kind == K::kConvert && !is_wide(op.operands[0].type->dtype) &&
      !is_wide(op.results[0].type->dtype))
    return std::nullopt;
  ir::Op copy;
  copy.kind = op.kind;
  copy.attrs = op.attrs;
  copy.loc = op.loc;
  copy.generic_name = op.generic_name;
  Values args;
  for (size_t i = 0; i < op.operands.size(); ++i) {
    const ir::Value& v = op.operands[i];
    std::optional<E> c = compute_type(v.type->dtype, op.kind);
    copy.operands.push_back(c ? retyped(v, *c) : v);
    args.push_back(c ? to_compute(in[i], v.type->dtype, *c, op.kind) : in[i]);
  }
  for (const ir::Value& v : op.results) {
    std::optional<E> c = compute_type(v.type->dtype, op.kind);
    copy.results.push_back(c ? retyped(v, *c) : v);
  }
  StatusOr<Values> out = rule(ctx, copy, args);
  if (!out.ok() || out->size() != op.results.size()) return out;
  for (size_t i = 0; i < op.results.size(); ++i) {
    E t = op.results[i].type->dtype;
    if (std::optional<E> c = compute_type(t, op.kind))
      (*out)[i] = to_storage((*out)[i], t, *c, op.kind);
  }
  return out;
}

StatusOr<Values> apply_rule(LowerContext& ctx, const ir::Op& op, const Values& in,
                            const LowerFn& rule) {
  std::optional<StatusOr<Values>> emulated = lower_emulated(ctx, op, in, rule);
  return emulated ? std::move(*emulated) : rule(ctx, op, in);
}

}  // namespace jaxmlx::lower
