// Value-level building blocks of the elementwise family with XLA's exact semantics, shared by
// elementwise.cc (rules and registration), elementwise_int.cc and elementwise_compare.cc.
// Each takes and returns lazy MLX arrays of the op's storage dtype; none evaluates anything.
#pragma once

#include "lower/lowering.h"

namespace jaxmlx::lower::ew {

// Integer divide/remainder: truncating; x/0 = -1 (all ones), x%0 = x, INT_MIN/-1 = INT_MIN,
// INT_MIN%-1 = 0 (spec: divide, remainder; XLA's elemental emitter).
mx::array int_divide(const mx::array& a, const mx::array& b);
mx::array int_remainder(const mx::array& a, const mx::array& b);
// Float remainder with C fmod semantics (sign of the dividend, exact).
mx::array float_remainder(const mx::array& a, const mx::array& b);
// Float max/min: NaN if either is NaN; -0.0 < +0.0.
mx::array float_max(const mx::array& a, const mx::array& b);
mx::array float_min(const mx::array& a, const mx::array& b);
// Integer power by squaring over every exponent bit; negative exponents give 0 unless |a|==1.
mx::array int_power(const mx::array& a, const mx::array& b);
// Shifts with amounts >= width (as unsigned) giving 0, or the sign fill for arithmetic.
mx::array shift_left(const mx::array& a, const mx::array& b);
mx::array shift_right_logical(const mx::array& a, const mx::array& b);
mx::array shift_right_arithmetic(const mx::array& a, const mx::array& b);
mx::array popcount(const mx::array& a);
mx::array count_leading_zeros(const mx::array& a);
// True where a float's sign bit is set (-0.0 and -NaN included).
mx::array sign_bit(const mx::array& a);
// Reinterprets same-size data as `d`, or casts when that is exact (unsigned<->signed twins).
mx::array bit_view(const mx::array& a, mx::Dtype d);

// complex64 from f32 parts, and XLA's complex multiply / divide / power formulas.
mx::array make_complex(const mx::array& re, const mx::array& im);
mx::array complex_multiply(const mx::array& a, const mx::array& b);
mx::array complex_divide(const mx::array& a, const mx::array& b);
mx::array complex_power(const mx::array& a, const mx::array& b);
// complex64 expm1 / log1p / rsqrt / logistic (MLX's ops take real inputs only), and sqrt with
// the principal root's real part never below +0.
mx::array complex_expm1(const mx::array& z);
mx::array complex_log1p(const mx::array& z);
mx::array complex_sqrt(const mx::array& z);
mx::array complex_rsqrt(const mx::array& z);
mx::array complex_logistic(const mx::array& z);
// complex64 abs / tanh / tan with XLA's NaN results where C99 (MLX) differs.
mx::array complex_abs(const mx::array& z);
mx::array complex_tanh(const mx::array& z);
mx::array complex_tan(const mx::array& z);

// The compare rule (compare is registered by elementwise.cc).
StatusOr<Values> lower_compare(LowerContext& ctx, const ir::Op& op, const Values& in);

}  // namespace jaxmlx::lower::ew
