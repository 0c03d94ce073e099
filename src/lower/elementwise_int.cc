// Elementwise building blocks with XLA's integer and float-edge semantics (see the header).
#include "lower/elementwise_internal.h"
#include "lower/util.h"
#include "mlx/ops.h"

namespace jaxmlx::lower::ew {

mx::array bit_view(const mx::array& a, mx::Dtype d) {
  return a.dtype() == d ? a : mx::view(a, d);
}

mx::array sign_bit(const mx::array& a) {
  mx::Dtype s = signed_of(a.dtype());
  return mx::less(bit_view(a, s), int_scalar(0, s));
}

namespace {

// |x| as the unsigned twin (INT_MIN -> 2^(n-1)), for a signed integer array.
mx::array unsigned_abs(const mx::array& x) {
  mx::Dtype u = unsigned_of(x.dtype());
  mx::array neg = mx::less(x, int_scalar(0, x.dtype()));
  return mx::astype(mx::where(neg, mx::negative(x), x), u);
}

}  // namespace

mx::array int_divide(const mx::array& a, const mx::array& b) {
  mx::Dtype t = a.dtype();
  mx::array b_zero = mx::equal(b, int_scalar(0, t));
  if (is_unsigned_dtype(t)) {
    // Divide by a safe divisor: integer division by zero traps on the CPU.
    mx::array q = mx::floor_divide(a, mx::where(b_zero, int_scalar(1, t), b));
    return mx::where(b_zero, int_scalar(-1, t), q);
  }
  mx::Dtype u = unsigned_of(t);
  mx::array ub = unsigned_abs(b);
  mx::array uq = mx::floor_divide(unsigned_abs(a), mx::where(b_zero, int_scalar(1, u), ub));
  mx::array q_neg = mx::not_equal(mx::less(a, int_scalar(0, t)), mx::less(b, int_scalar(0, t)));
  // Back to signed with a view: the magnitude 2^(n-1) (INT_MIN/-1) wraps to INT_MIN.
  mx::array q = bit_view(mx::where(q_neg, mx::negative(uq), uq), t);
  return mx::where(b_zero, int_scalar(-1, t), q);
}

mx::array int_remainder(const mx::array& a, const mx::array& b) {
  mx::Dtype t = a.dtype();
  mx::array b_zero = mx::equal(b, int_scalar(0, t));
  if (is_unsigned_dtype(t)) {
    mx::array r = mx::remainder(a, mx::where(b_zero, int_scalar(1, t), b));
    return mx::where(b_zero, a, r);
  }
  mx::Dtype u = unsigned_of(t);
  mx::array ub = mx::where(b_zero, int_scalar(1, u), unsigned_abs(b));
  mx::array ur = mx::remainder(unsigned_abs(a), ub);
  // The remainder takes the dividend's sign.
  mx::array r = bit_view(mx::where(mx::less(a, int_scalar(0, t)), mx::negative(ur), ur), t);
  return mx::where(b_zero, a, r);
}

mx::array float_remainder(const mx::array& a, const mx::array& b) {
  // MLX's remainder is Python's modulo; on non-negative operands it equals fmod exactly.
  mx::array r = mx::remainder(mx::abs(a), mx::abs(b));
  return mx::where(sign_bit(a), mx::negative(r), r);
}

mx::array float_max(const mx::array& a, const mx::array& b) {
  mx::array zero = float_scalar(0, a.dtype());
  mx::array any_nan = mx::logical_or(mx::isnan(a), mx::isnan(b));
  mx::array both_zero = mx::logical_and(mx::equal(a, zero), mx::equal(b, zero));
  // For two zeros a + b is +0 unless both are -0: exactly max's answer.
  mx::array m = mx::where(both_zero, mx::add(a, b), mx::maximum(a, b));
  return mx::where(any_nan, mx::add(a, b), m);
}

mx::array float_min(const mx::array& a, const mx::array& b) {
  mx::array zero = float_scalar(0, a.dtype());
  mx::array any_nan = mx::logical_or(mx::isnan(a), mx::isnan(b));
  mx::array both_zero = mx::logical_and(mx::equal(a, zero), mx::equal(b, zero));
  // For two zeros -((-a) + (-b)) is -0 unless both are +0.
  mx::array z = mx::negative(mx::add(mx::negative(a), mx::negative(b)));
  mx::array m = mx::where(both_zero, z, mx::minimum(a, b));
  return mx::where(any_nan, mx::add(a, b), m);
}

mx::array int_power(const mx::array& a, const mx::array& b) {
  mx::Dtype t = a.dtype();
  mx::Dtype u = unsigned_of(t);
  int bits = dtype_bits(t);
  // Multiply in the unsigned twin: wrapping is then well defined and bit-identical.
  mx::array base = mx::astype(a, u);
  mx::array e = mx::astype(b, u);
  mx::array acc = mx::ones_like(base);
  mx::array one = int_scalar(1, u);
  for (int i = 0; i < bits; ++i) {
    mx::array bit = mx::not_equal(mx::bitwise_and(e, one), int_scalar(0, u));
    acc = mx::where(bit, mx::multiply(acc, base), acc);
    if (i + 1 < bits) {
      base = mx::multiply(base, base);
      e = mx::right_shift(e, one);
    }
  }
  mx::array r = bit_view(acc, t);
  if (is_unsigned_dtype(t)) return r;
  // Negative exponents: 1 and -1 keep their (parity-correct) power, everything else is 0.
  mx::array neg_exp = mx::less(b, int_scalar(0, t));
  mx::array unit = mx::logical_or(mx::equal(a, int_scalar(1, t)), mx::equal(a, int_scalar(-1, t)));
  return mx::where(mx::logical_and(neg_exp, mx::logical_not(unit)), int_scalar(0, t), r);
}

namespace {

// Amount as the unsigned twin is >= width: covers negative amounts too.
mx::array out_of_range(const mx::array& b) {
  mx::Dtype u = unsigned_of(b.dtype());
  return mx::greater_equal(mx::astype(b, u), int_scalar(dtype_bits(b.dtype()), u));
}

enum class Shift { kLeft, kRightLogical, kRightArithmetic };

mx::array shift(const mx::array& a, const mx::array& b, Shift kind) {
  mx::Dtype t = a.dtype();
  int bits = dtype_bits(t);
  // Logical shifts run in the unsigned twin, arithmetic in the signed one.
  mx::Dtype w = kind == Shift::kRightArithmetic ? signed_of(t) : unsigned_of(t);
  mx::array x = mx::astype(a, w);
  auto shift_by = [&](const mx::array& amount) {
    return kind == Shift::kLeft ? mx::left_shift(x, amount) : mx::right_shift(x, amount);
  };
  mx::array fill = kind == Shift::kRightArithmetic
                       ? mx::right_shift(x, int_scalar(bits - 1, w))
                       : mx::zeros_like(x);
  if (std::optional<int64_t> k = splat_int_constant(b)) {
    // Constant amount: no masking needed (PITFALLS 2.2).
    uint64_t amount = static_cast<uint64_t>(*k) & (bits == 64 ? ~0ull : ((1ull << bits) - 1));
    mx::array r = amount >= static_cast<uint64_t>(bits)
                      ? fill
                      : shift_by(int_scalar(static_cast<int64_t>(amount), w));
    return bit_view(r, t);
  }
  mx::array oob = out_of_range(b);
  mx::array amount = mx::where(oob, int_scalar(0, w), mx::astype(b, w));
  return bit_view(mx::where(oob, fill, shift_by(amount)), t);
}

}  // namespace

mx::array shift_left(const mx::array& a, const mx::array& b) { return shift(a, b, Shift::kLeft); }
mx::array shift_right_logical(const mx::array& a, const mx::array& b) {
  return shift(a, b, Shift::kRightLogical);
}
mx::array shift_right_arithmetic(const mx::array& a, const mx::array& b) {
  return shift(a, b, Shift::kRightArithmetic);
}

mx::array popcount(const mx::array& a) {
  mx::Dtype t = a.dtype();
  mx::Dtype u = unsigned_of(t);
  int bits = dtype_bits(t);
  auto c = [&](uint64_t v) { return int_scalar(static_cast<int64_t>(v), u); };
  mx::array x = mx::astype(a, u);
  // SWAR: 2-bit, 4-bit, then byte counts; then fold the bytes together.
  x = mx::subtract(x, mx::bitwise_and(mx::right_shift(x, c(1)), c(0x5555555555555555ull)));
  x = mx::add(mx::bitwise_and(x, c(0x3333333333333333ull)),
              mx::bitwise_and(mx::right_shift(x, c(2)), c(0x3333333333333333ull)));
  x = mx::bitwise_and(mx::add(x, mx::right_shift(x, c(4))), c(0x0f0f0f0f0f0f0f0full));
  for (int s = 8; s < bits; s *= 2) x = mx::add(x, mx::right_shift(x, c(s)));
  return bit_view(mx::bitwise_and(x, c(0x7f)), t);
}

mx::array count_leading_zeros(const mx::array& a) {
  mx::Dtype t = a.dtype();
  mx::Dtype u = unsigned_of(t);
  int bits = dtype_bits(t);
  mx::array x = mx::astype(a, u);
  mx::array zero = int_scalar(0, u);
  mx::array n = mx::zeros_like(x);
  // Binary search: if the top s bits are zero, count them and shift them out.
  for (int s = bits / 2; s >= 1; s /= 2) {
    mx::array top_zero = mx::equal(mx::right_shift(x, int_scalar(bits - s, u)), zero);
    n = mx::where(top_zero, mx::add(n, int_scalar(s, u)), n);
    x = mx::where(top_zero, mx::left_shift(x, int_scalar(s, u)), x);
  }
  mx::array last_zero = mx::equal(mx::right_shift(x, int_scalar(bits - 1, u)), zero);
  n = mx::where(last_zero, mx::add(n, int_scalar(1, u)), n);
  return bit_view(n, t);
}

}  // namespace jaxmlx::lower::ew
