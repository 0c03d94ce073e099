// Lowering rules: elementwise family (see lowering.h for the rule contract): arithmetic, math,
// bitwise, shifts, compare, select, clamp and the complex parts. XLA's exact semantics; the
// subtle integer and float-edge cases live in elementwise_int.cc, compare in
// elementwise_compare.cc.
#include <cmath>
#include <functional>
#include <limits>
#include <optional>

#include "lower/dtypes.h"
#include "lower/elementwise_internal.h"
#include "lower/lowering.h"
#include "lower/shape_util.h"
#include "lower/util.h"
#include "mlx/ops.h"

namespace jaxmlx::lower {

namespace {

using E = ir::ElementType;

// Which operand element kinds a rule accepts.
enum Kinds : unsigned { kPred = 1, kInt = 2, kFloat = 4, kComplex = 8 };
constexpr unsigned kReal = kInt | kFloat;
constexpr unsigned kNumeric = kInt | kFloat | kComplex;
constexpr unsigned kLogic = kPred | kInt;
constexpr unsigned kFloating = kFloat | kComplex;

unsigned kind_of(E t) {
  if (t == E::kPred) return kPred;
  if (ir::is_integer(t)) return kInt;
  if (ir::is_complex(t)) return kComplex;
  if (ir::is_float(t)) return kFloat;
  return 0;
}

using Body = std::function<mx::array(const Values&, E)>;

// A rule for an op computed by `body` from its operands, after checking that every type is
// native and that the first operand's element kind is one `allowed`.
LowerFn rule(unsigned allowed, Body body) {
  return [allowed, body = std::move(body)](LowerContext& ctx, const ir::Op& op,
                                           const Values& in) -> StatusOr<Values> {
    RETURN_IF_ERROR(require_native(ctx, op));
    if (op.operands.empty() || in.size() != op.operands.size())
      return ctx.malformed(op, "operand count mismatch");
    E t = element_type(op.operands[0]);
    if ((kind_of(t) & allowed) == 0)
      return ctx.unsupported(op, std::string(ir::element_type_name(t)) + " operands");
    return Values{body(in, t)};
  };
}

bool is_unsigned(E t) { return ir::is_unsigned_int(t); }

// The operand of a float max (min) that is not a constant -inf (+inf): max(x, -inf) is x
// exactly, NaN and signed zeros included (jax's softmax takes max(-inf, max-reduce)).
std::optional<mx::array> beside_infinity(const Values& in, bool is_max) {
  for (int i = 0; i < 2; ++i) {
    std::optional<double> v = splat_float_constant(in[i]);
    if (v && std::isinf(*v) && (*v < 0) == is_max && in[1 - i].shape() == in[i].shape())
      return in[1 - i];
  }
  return std::nullopt;
}

// A float max (min) with a constant c that is not NaN, nor -0 for max (+0 for min): jax's relu,
// max(x, 0), and clips. float_max's answer in 3 ops instead of ~11: c where x <= c (x >= c for
// min; a zero x against c = +0 gives +0, as max(-0, +0) must), else x + -0, which is x exactly
// (-0 included) and quiets a NaN as float_max's `a + b` does.
std::optional<mx::array> beside_constant(const Values& in, bool is_max) {
  for (int i = 0; i < 2; ++i) {
    std::optional<double> v = splat_float_constant(in[i]);
    if (!v || in[1 - i].shape() != in[i].shape()) continue;
    if (*v == 0 && std::signbit(*v) == is_max) continue;  // max with -0, min with +0
    const mx::array& x = in[1 - i];
    mx::array c = float_scalar(*v, x.dtype());
    mx::array keep_c = is_max ? mx::less_equal(x, c) : mx::greater_equal(x, c);
    return mx::where(keep_c, c, mx::add(x, float_scalar(-0.0, x.dtype())));
  }
  return std::nullopt;
}

mx::array lower_max(const Values& in, E t) {
  if (t == E::kPred) return mx::logical_or(in[0], in[1]);
  if (!ir::is_float(t)) return mx::maximum(in[0], in[1]);
  if (std::optional<mx::array> x = beside_infinity(in, /*is_max=*/true)) return *x;
  if (std::optional<mx::array> x = beside_constant(in, /*is_max=*/true)) return *x;
  return ew::float_max(in[0], in[1]);
}

mx::array lower_min(const Values& in, E t) {
  if (t == E::kPred) return mx::logical_and(in[0], in[1]);
  if (!ir::is_float(t)) return mx::minimum(in[0], in[1]);
  if (std::optional<mx::array> x = beside_infinity(in, /*is_max=*/false)) return *x;
  if (std::optional<mx::array> x = beside_constant(in, /*is_max=*/false)) return *x;
  return ew::float_min(in[0], in[1]);
}

mx::array lower_sign(const Values& in, E t) {
  const mx::array& x = in[0];
  if (is_unsigned(t)) return mx::astype(mx::not_equal(x, int_scalar(0, x.dtype())), x.dtype());
  if (ir::is_integer(t)) return mx::sign(x);
  if (ir::is_complex(t)) {
    // Each part over |x| (not a complex division): XLA's answer for inf parts, e.g. (0, NaN).
    mx::array mag = mx::abs(x);
    mx::array zero = float_scalar(0, mag.dtype());
    mx::array unit = ew::make_complex(mx::divide(mx::real(x), mag), mx::divide(mx::imag(x), mag));
    return mx::where(mx::equal(mag, zero), mx::zeros_like(x), unit);
  }
  // NaN stays NaN and -0.0 stays -0.0 (MLX's sign maps both to 0).
  mx::array keep = mx::logical_or(mx::isnan(x), mx::equal(x, float_scalar(0, x.dtype())));
  return mx::where(keep, x, mx::sign(x));
}

mx::array lower_round_afz(const Values& in, E) {
  const mx::array& x = in[0];
  // x - trunc(x) is exact, so the half-way test is too (x + 0.5 would round).
  mx::array t = mx::trunc(x);
  mx::array frac = mx::abs(mx::subtract(x, t));
  mx::array up = mx::greater_equal(frac, float_scalar(0.5, x.dtype()));
  mx::array step = mx::where(ew::sign_bit(x), float_scalar(-1, x.dtype()),
                             float_scalar(1, x.dtype()));
  return mx::where(up, mx::add(t, step), t);
}

mx::array lower_cbrt(const Values& in, E) {
  mx::array x = mx::astype(in[0], mx::float32);
  mx::array ax = mx::abs(x);
  mx::array y = mx::power(ax, float_scalar(1.0 / 3.0, mx::float32));
  // One Newton step removes pow's error from the rounded 1/3 exponent; written as
  // y - (y - ax/y^2)/3 so that y^3 never overflows near FLT_MAX.
  mx::array resid = mx::subtract(y, mx::divide(ax, mx::multiply(y, y)));
  y = mx::subtract(y, mx::divide(resid, float_scalar(3, mx::float32)));
  mx::array special = mx::logical_or(mx::equal(ax, float_scalar(0, mx::float32)),
                                     mx::logical_not(mx::isfinite(ax)));
  y = mx::where(special, ax, y);
  return mx::astype(mx::where(ew::sign_bit(x), mx::negative(y), y), in[0].dtype());
}

mx::array lower_complex(const Values& in, E) { return ew::make_complex(in[0], in[1]); }

StatusOr<Values> lower_select(LowerContext& ctx, const ir::Op& op, const Values& in) {
  if (in.size() != 3) return ctx.malformed(op, "select takes 3 operands");
  // Select moves storage unchanged, so types MLX lacks are fine here.
  mx::array pred = in[0];
  E t = element_type(op.operands[1]);
  if (storage_trailing_dim(t) != 0 && pred.ndim() > 0) pred = mx::expand_dims(pred, -1);
  return Values{mx::where(pred, in[1], in[2])};
}

StatusOr<Values> lower_clamp(LowerContext& ctx, const ir::Op& op, const Values& in) {
  RETURN_IF_ERROR(require_native(ctx, op));
  if (in.size() != 3) return ctx.malformed(op, "clamp takes 3 operands");
  E t = element_type(op.operands[1]);
  if (ir::is_complex(t)) return ctx.unsupported(op, "complex operands");
  // spec: clamp(min, x, max) = min(max(x, min), max); min/max may be scalars.
  mx::array lo = mx::broadcast_to(in[0], in[1].shape());
  mx::array hi = mx::broadcast_to(in[2], in[1].shape());
  mx::array r = lower_max({in[1], lo}, t);
  return Values{lower_min({r, hi}, t)};
}

void register_arithmetic(Registry& r) {
  r.add(ir::OpKind::kAdd, rule(kPred | kNumeric, [](const Values& in, E t) {
    return t == E::kPred ? mx::logical_or(in[0], in[1]) : mx::add(in[0], in[1]);
  }));
  r.add(ir::OpKind::kSubtract, rule(kNumeric, [](const Values& in, E) {
    return mx::subtract(in[0], in[1]);
  }));
  r.add(ir::OpKind::kMultiply, rule(kPred | kNumeric, [](const Values& in, E t) {
    if (t == E::kPred) return mx::logical_and(in[0], in[1]);
    return ir::is_complex(t) ? ew::complex_multiply(in[0], in[1]) : mx::multiply(in[0], in[1]);
  }));
  r.add(ir::OpKind::kDivide, rule(kNumeric, [](const Values& in, E t) {
    if (ir::is_complex(t)) return ew::complex_divide(in[0], in[1]);
    return ir::is_integer(t) ? ew::int_divide(in[0], in[1]) : mx::divide(in[0], in[1]);
  }));
  r.add(ir::OpKind::kRemainder, rule(kReal, [](const Values& in, E t) {
    return ir::is_integer(t) ? ew::int_remainder(in[0], in[1])
                             : ew::float_remainder(in[0], in[1]);
  }));
  r.add(ir::OpKind::kPower, rule(kNumeric, [](const Values& in, E t) {
    if (ir::is_complex(t)) return ew::complex_power(in[0], in[1]);
    return ir::is_integer(t) ? ew::int_power(in[0], in[1]) : mx::power(in[0], in[1]);
  }));
  r.add(ir::OpKind::kMaximum, rule(kPred | kReal, lower_max));
  r.add(ir::OpKind::kMinimum, rule(kPred | kReal, lower_min));
  r.add(ir::OpKind::kAtan2, rule(kFloat, [](const Values& in, E) {
    return mx::arctan2(in[0], in[1]);
  }));
  r.add(ir::OpKind::kNegate, rule(kNumeric, [](const Values& in, E) {
    // Of a pending reshape (a sum's dropped dims, passes/negated_sum.h): negated before it, so
    // that a broadcast taking the sum back over those dims still finds the reshape to undo
    // (shape_util.h: reshape_view).
    if (shape_util::is_pending_reshape(in[0]))
      return mx::reshape(mx::negative(in[0].inputs()[0]), in[0].shape());
    return mx::negative(in[0]);
  }));
  r.add(ir::OpKind::kAbs, rule(kNumeric, [](const Values& in, E t) {
    if (ir::is_complex(t)) return ew::complex_abs(in[0]);
    return is_unsigned(t) ? in[0] : mx::abs(in[0]);
  }));
  r.add(ir::OpKind::kSign, rule(kNumeric, lower_sign));
  r.add(ir::OpKind::kClamp, lower_clamp);
  r.add(ir::OpKind::kSelect, lower_select);
}

void register_bitwise(Registry& r) {
  r.add(ir::OpKind::kAnd, rule(kLogic, [](const Values& in, E t) {
    return t == E::kPred ? mx::logical_and(in[0], in[1]) : mx::bitwise_and(in[0], in[1]);
  }));
  r.add(ir::OpKind::kOr, rule(kLogic, [](const Values& in, E t) {
    return t == E::kPred ? mx::logical_or(in[0], in[1]) : mx::bitwise_or(in[0], in[1]);
  }));
  r.add(ir::OpKind::kXor, rule(kLogic, [](const Values& in, E t) {
    return t == E::kPred ? mx::not_equal(in[0], in[1]) : mx::bitwise_xor(in[0], in[1]);
  }));
  r.add(ir::OpKind::kNot, rule(kLogic, [](const Values& in, E t) {
    return t == E::kPred ? mx::logical_not(in[0]) : mx::bitwise_invert(in[0]);
  }));
  r.add(ir::OpKind::kShiftLeft, rule(kInt, [](const Values& in, E) {
    return ew::shift_left(in[0], in[1]);
  }));
  r.add(ir::OpKind::kShiftRightLogical, rule(kInt, [](const Values& in, E) {
    return ew::shift_right_logical(in[0], in[1]);
  }));
  r.add(ir::OpKind::kShiftRightArithmetic, rule(kInt, [](const Values& in, E) {
    return ew::shift_right_arithmetic(in[0], in[1]);
  }));
  r.add(ir::OpKind::kPopcnt, rule(kInt, [](const Values& in, E) { return ew::popcount(in[0]); }));
  r.add(ir::OpKind::kCountLeadingZeros, rule(kInt, [](const Values& in, E) {
    return ew::count_leading_zeros(in[0]);
  }));
}

// A unary math op on floats (and complex when `allowed` says so).
void add_math(Registry& r, ir::OpKind kind, unsigned allowed,
              mx::array (*fn)(const mx::array&, mx::StreamOrDevice)) {
  r.add(kind, rule(allowed, [fn](const Values& in, E) { return fn(in[0], {}); }));
}

void register_math(Registry& r) {
  add_math(r, ir::OpKind::kExponential, kFloating, mx::exp);
  r.add(ir::OpKind::kExponentialMinusOne, rule(kFloating, [](const Values& in, E t) {
    return ir::is_complex(t) ? ew::complex_expm1(in[0]) : mx::expm1(in[0]);
  }));
  add_math(r, ir::OpKind::kLog, kFloating, mx::log);
  r.add(ir::OpKind::kLogPlusOne, rule(kFloating, [](const Values& in, E t) {
    return ir::is_complex(t) ? ew::complex_log1p(in[0]) : mx::log1p(in[0]);
  }));
  r.add(ir::OpKind::kLogistic, rule(kFloating, [](const Values& in, E t) {
    return ir::is_complex(t) ? ew::complex_logistic(in[0]) : mx::sigmoid(in[0]);
  }));
  r.add(ir::OpKind::kSqrt, rule(kFloating, [](const Values& in, E t) {
    return ir::is_complex(t) ? ew::complex_sqrt(in[0]) : mx::sqrt(in[0]);
  }));
  r.add(ir::OpKind::kRsqrt, rule(kFloating, [](const Values& in, E t) {
    return ir::is_complex(t) ? ew::complex_rsqrt(in[0]) : mx::rsqrt(in[0]);
  }));
  add_math(r, ir::OpKind::kSine, kFloating, mx::sin);
  add_math(r, ir::OpKind::kCosine, kFloating, mx::cos);
  r.add(ir::OpKind::kTan, rule(kFloating, [](const Values& in, E t) {
    return ir::is_complex(t) ? ew::complex_tan(in[0]) : mx::tan(in[0]);
  }));
  r.add(ir::OpKind::kTanh, rule(kFloating, [](const Values& in, E t) {
    return ir::is_complex(t) ? ew::complex_tanh(in[0]) : mx::tanh(in[0]);
  }));
  add_math(r, ir::OpKind::kFloor, kFloat, mx::floor);
  add_math(r, ir::OpKind::kCeil, kFloat, mx::ceil);
  r.add(ir::OpKind::kCbrt, rule(kFloat, lower_cbrt));
  // MLX's round is round-half-to-even.
  r.add(ir::OpKind::kRoundNearestEven, rule(kFloat, [](const Values& in, E) {
    return mx::round(in[0]);
  }));
  r.add(ir::OpKind::kRoundNearestAfz, rule(kFloat, lower_round_afz));
  r.add(ir::OpKind::kIsFinite, rule(kFloat, [](const Values& in, E) {
    return mx::isfinite(in[0]);
  }));
  r.add(ir::OpKind::kReal, rule(kFloating, [](const Values& in, E t) {
    return ir::is_complex(t) ? mx::real(in[0]) : in[0];
  }));
  r.add(ir::OpKind::kImag, rule(kFloating, [](const Values& in, E t) {
    return ir::is_complex(t) ? mx::imag(in[0]) : mx::zeros_like(in[0]);
  }));
  r.add(ir::OpKind::kComplex, rule(kFloat, lower_complex));
}

}  // namespace

void register_elementwise(Registry& r) {
  register_arithmetic(r);
  register_bitwise(r);
  register_math(r);
  r.add(ir::OpKind::kCompare, ew::lower_compare);
}

}  // namespace jaxmlx::lower
