// complex64 multiply, divide and power with XLA's formulas, so that results agree with XLA on
// non-finite parts too (MLX uses std::complex, whose C99 recovery rules differ).
#include <limits>

#include "lower/elementwise_internal.h"
#include "lower/util.h"
#include "mlx/ops.h"

namespace jaxmlx::lower::ew {

namespace {

mx::array f32(double v) { return float_scalar(v, mx::float32); }
mx::array inf() { return f32(std::numeric_limits<float>::infinity()); }

// |v| with the sign of s.
mx::array copysign(const mx::array& v, const mx::array& s) {
  mx::array m = mx::abs(v);
  return mx::where(sign_bit(s), mx::negative(m), m);
}

mx::array is_inf(const mx::array& x) { return mx::equal(mx::abs(x), inf()); }

}  // namespace

mx::array make_complex(const mx::array& re, const mx::array& im) {
  // Pack (re, im) pairs and reinterpret: exact for inf/NaN parts, unlike re + i*im.
  mx::array pairs = mx::stack({re, im}, -1);
  return mx::squeeze(mx::view(pairs, mx::complex64), -1);
}

mx::array complex_multiply(const mx::array& a, const mx::array& b) {
  mx::array ar = mx::real(a), ai = mx::imag(a), br = mx::real(b), bi = mx::imag(b);
  return make_complex(mx::subtract(mx::multiply(ar, br), mx::multiply(ai, bi)),
                      mx::add(mx::multiply(ar, bi), mx::multiply(ai, br)));
}

// Smith's algorithm, then XLA's fix-ups where both parts came out NaN: zero denominator,
// infinite numerator over a finite denominator, finite numerator over an infinite one.
mx::array complex_divide(const mx::array& a, const mx::array& b) {
  using mx::add, mx::subtract, mx::multiply, mx::divide, mx::where;
  mx::array ar = mx::real(a), ai = mx::imag(a), br = mx::real(b), bi = mx::imag(b);
  mx::array r1 = divide(br, bi), d1 = add(bi, multiply(r1, br));
  mx::array r2 = divide(bi, br), d2 = add(br, multiply(r2, bi));
  mx::array lt = mx::less(mx::abs(br), mx::abs(bi));
  mx::array cr = where(lt, divide(add(multiply(r1, ar), ai), d1),
                       divide(add(multiply(r2, ai), ar), d2));
  mx::array ci = where(lt, divide(subtract(multiply(r1, ai), ar), d1),
                       divide(subtract(ai, multiply(r2, ar)), d2));
  mx::array zero = f32(0), one = f32(1);
  mx::array zero_den =
      mx::logical_and(mx::logical_and(mx::equal(br, zero), mx::equal(bi, zero)),
                      mx::logical_or(mx::logical_not(mx::isnan(ar)),
                                     mx::logical_not(mx::isnan(ai))));
  mx::array inf_br = copysign(inf(), br);
  mx::array a_fin = mx::logical_and(mx::isfinite(ar), mx::isfinite(ai));
  mx::array b_fin = mx::logical_and(mx::isfinite(br), mx::isfinite(bi));
  mx::array inf_num = mx::logical_and(mx::logical_or(is_inf(ar), is_inf(ai)), b_fin);
  mx::array ars = copysign(where(is_inf(ar), one, zero), ar);
  mx::array ais = copysign(where(is_inf(ai), one, zero), ai);
  mx::array inf_den = mx::logical_and(mx::logical_or(is_inf(br), is_inf(bi)), a_fin);
  mx::array brs = copysign(where(is_inf(br), one, zero), br);
  mx::array bis = copysign(where(is_inf(bi), one, zero), bi);
  mx::array fix_r = where(
      zero_den, multiply(inf_br, ar),
      where(inf_num, multiply(inf(), add(multiply(ars, br), multiply(ais, bi))),
            where(inf_den, multiply(zero, add(multiply(ar, brs), multiply(ai, bis))), cr)));
  mx::array fix_i = where(
      zero_den, multiply(inf_br, ai),
      where(inf_num, multiply(inf(), subtract(multiply(ais, br), multiply(ars, bi))),
            where(inf_den, multiply(zero, subtract(multiply(ai, brs), multiply(ar, bis))),
                  ci)));
  mx::array both_nan = mx::logical_and(mx::isnan(cr), mx::isnan(ci));
  return make_complex(where(both_nan, fix_r, cr), where(both_nan, fix_i, ci));
}

// (a+bi)^(c+di) = |x|^c * exp(-d*arg x) * (cos q + i sin q), q = c*arg x + d*ln|x|, with
// XLA's special cases for 0^w, x^0, 1^w and inf^c.
mx::array complex_power(const mx::array& x, const mx::array& y) {
  using mx::multiply, mx::where, mx::equal, mx::logical_and;
  mx::array a = mx::real(x), b = mx::imag(x), c = mx::real(y), d = mx::imag(y);
  mx::array zero = f32(0), one = f32(1);
  mx::array mag = mx::abs(x);
  mx::array arg = mx::arctan2(b, a);
  mx::array coeff = multiply(mx::power(mag, c), mx::exp(multiply(mx::negative(d), arg)));
  mx::array q = mx::add(multiply(c, arg), multiply(d, mx::log(mag)));
  mx::array re = multiply(coeff, mx::cos(q)), im = multiply(coeff, mx::sin(q));
  mx::array d0 = equal(d, zero);
  mx::array case0 = logical_and(logical_and(equal(mag, zero), d0), mx::less_equal(zero, c));
  re = where(case0, where(equal(c, zero), one, zero), re);
  im = where(case0, zero, im);
  mx::array unit = mx::logical_or(logical_and(equal(c, zero), d0),
                                  logical_and(equal(a, one), equal(b, zero)));
  re = where(unit, one, re);
  im = where(unit, zero, im);
  mx::array inf_base = logical_and(logical_and(equal(a, inf()), equal(b, zero)), d0);
  re = where(logical_and(inf_base, mx::greater(c, zero)), inf(),
             where(logical_and(inf_base, mx::less(c, zero)), zero, re));
  im = where(logical_and(inf_base, mx::not_equal(c, zero)), zero, im);
  return make_complex(re, im);
}

}  // namespace jaxmlx::lower::ew
