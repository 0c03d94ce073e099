// complex64 multiply, divide, power, expm1, log1p, rsqrt and logistic with XLA's formulas, so
// that results agree with XLA on non-finite parts too (MLX uses std::complex, whose C99
// recovery rules differ, and has no complex expm1/log1p/rsqrt).
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

// e^(x+iy) - 1 = (expm1(x) cos y + (cos y - 1)) + i e^x sin y, with cos y - 1 = -2 sin^2(y/2)
// so that small |z| keeps its relative precision.
mx::array complex_expm1(const mx::array& z) {
  mx::array x = mx::real(z), y = mx::imag(z);
  mx::array s = mx::sin(mx::multiply(y, f32(0.5)));
  mx::array cos_m1 = mx::multiply(f32(-2), mx::multiply(s, s));
  mx::array re = mx::add(mx::multiply(mx::expm1(x), mx::cos(y)), cos_m1);
  // A zero imaginary part stays exact (e^x may be inf, and inf * sin(0) would be NaN).
  mx::array im = mx::where(mx::equal(y, f32(0)), y, mx::multiply(mx::exp(x), mx::sin(y)));
  return make_complex(re, im);
}

// |z| is NaN when either part is NaN (XLA), even if the other is inf (C99 hypot says inf).
mx::array complex_abs(const mx::array& z) {
  mx::array any_nan = mx::logical_or(mx::isnan(mx::real(z)), mx::isnan(mx::imag(z)));
  return mx::where(any_nan, f32(std::numeric_limits<float>::quiet_NaN()), mx::abs(z));
}

// XLA's tanh/tan give NaN parts where C99 (MLX) keeps an exact zero: tanh(+-0 + NaN i),
// tanh(x + inf i) for finite x (real part), and tan(z) = -i tanh(iz) mirrored.
mx::array complex_tanh(const mx::array& z) {
  mx::array x = mx::real(z), y = mx::imag(z), t = mx::tanh(z);
  mx::array nan = f32(std::numeric_limits<float>::quiet_NaN());
  mx::array zero_nan = mx::logical_and(mx::equal(x, f32(0)), mx::isnan(y));
  mx::array inf_y = mx::logical_and(mx::isfinite(x), mx::logical_not(mx::isfinite(y)));
  mx::array re = mx::where(mx::logical_or(zero_nan, inf_y), nan, mx::real(t));
  mx::array im = mx::where(zero_nan, nan, mx::imag(t));
  return make_complex(re, im);
}

mx::array complex_tan(const mx::array& z) {
  // tan(x + iy) = -i tanh(-y + ix): complex_tanh's cases with the parts swapped.
  mx::array x = mx::real(z), y = mx::imag(z), t = mx::tan(z);
  mx::array nan = f32(std::numeric_limits<float>::quiet_NaN());
  mx::array zero_nan = mx::logical_and(mx::equal(y, f32(0)), mx::isnan(x));
  mx::array inf_x = mx::logical_and(mx::isfinite(y), mx::logical_not(mx::isfinite(x)));
  mx::array re = mx::where(zero_nan, nan, mx::real(t));
  mx::array im = mx::where(mx::logical_or(zero_nan, inf_x), nan, mx::imag(t));
  return make_complex(re, im);
}

// log(1+z) = log|1+z| + i atan2(y, 1+x), with log|1+z| = log(mx) + log1p((mn/mx)^2)/2 over the
// larger (mx) and smaller (mn) of |1+x|, |y|; log(mx) is taken as log1p(x) when mx is |1+x|
// (exact for small x).
mx::array complex_log1p(const mx::array& z) {
  using mx::abs, mx::maximum, mx::minimum, mx::where;
  mx::array x = mx::real(z), y = mx::imag(z), one = f32(1);
  mx::array xp1 = mx::add(x, one);
  mx::array axp1 = abs(xp1), ay = abs(y);
  mx::array mx_ = maximum(axp1, ay), mn = minimum(axp1, ay);
  mx::array r = mx::divide(mn, mx_);
  mx::array log_mx = mx::log1p(where(mx::greater_equal(xp1, ay), x, mx::subtract(mx_, one)));
  mx::array tail = mx::log1p(where(mx::equal(mn, mx_), one, mx::multiply(r, r)));
  mx::array re = mx::add(log_mx, mx::multiply(f32(0.5), tail));
  return make_complex(re, mx::arctan2(y, xp1));
}

mx::array complex_sqrt(const mx::array& z) {
  // The principal root's real part is >= 0. MLX's CUDA sqrt goes through polar form, where
  // cos(pi/2) rounds below 0: sqrt(-0 + 0j) has real part -0 (-inf in 1 / sqrt) and sqrt(-4 + 0j)
  // -8.7e-8. Those become +0, as in XLA's; NaN stays.
  mx::array s = mx::sqrt(z);
  mx::array re = mx::real(s);
  return make_complex(mx::where(mx::less_equal(re, f32(0)), f32(0), re), mx::imag(s));
}

mx::array complex_rsqrt(const mx::array& z) {
  return complex_divide(mx::ones_like(z), complex_sqrt(z));
}

mx::array complex_logistic(const mx::array& z) {
  mx::array one = mx::ones_like(z);
  return complex_divide(one, mx::add(one, mx::exp(mx::negative(z))));
}

}  // namespace jaxmlx::lower::ew
