#include "lower/float_bits.h"

#include <cmath>
#include <limits>
#include <vector>

#include "lower/elementwise_internal.h"
#include "lower/util.h"
#include "mlx/ops.h"
#include "passes/xla_cpu_version.h"

namespace jaxmlx::lower::fbits {

namespace {

using E = ir::ElementType;

// How a narrow format spends its special encodings.
enum class Kind {
  kIeee,      // all-ones exponent: inf (mantissa 0) or NaN
  kFn,        // no inf; only all-ones exponent+mantissa is NaN
  kFnuz,      // no inf, no -0; 0x80 (sign bit alone) is the one NaN
  kE8M0,      // unsigned powers of two; 0xff is NaN; no zero
  kSaturate,  // no inf, no NaN (f4/f6): overflow saturates
};

struct Format {
  int e, m, bias;
  Kind kind;
  int bits() const { return kind == Kind::kE8M0 ? e + m : 1 + e + m; }
  int emin() const { return kind == Kind::kE8M0 ? -bias : 1 - bias; }  // smallest normal exponent
};

std::optional<Format> format_of(E t) {
  switch (t) {
    case E::kF8E4M3FN: return Format{4, 3, 7, Kind::kFn};
    case E::kF8E5M2: return Format{5, 2, 15, Kind::kIeee};
    case E::kF8E4M3: return Format{4, 3, 7, Kind::kIeee};
    case E::kF8E3M4: return Format{3, 4, 3, Kind::kIeee};
    case E::kF8E4M3FNUZ: return Format{4, 3, 8, Kind::kFnuz};
    case E::kF8E5M2FNUZ: return Format{5, 2, 16, Kind::kFnuz};
    case E::kF8E4M3B11FNUZ: return Format{4, 3, 11, Kind::kFnuz};
    case E::kF8E8M0FNU: return Format{8, 0, 127, Kind::kE8M0};
    case E::kF4E2M1FN: return Format{2, 1, 1, Kind::kSaturate};
    case E::kF6E2M3FN: return Format{2, 3, 1, Kind::kSaturate};
    case E::kF6E3M2FN: return Format{3, 2, 3, Kind::kSaturate};
    default: return std::nullopt;
  }
}

// The f32 value of one bit pattern (host side, for the decode table).
float decode_one(const Format& f, uint32_t code) {
  const uint32_t sign_bit = f.kind == Kind::kE8M0 ? 0 : (code >> (f.e + f.m)) & 1;
  const uint32_t field = (code >> f.m) & ((1u << f.e) - 1);
  const uint32_t mant = code & ((1u << f.m) - 1);
  const float nan = std::copysign(std::numeric_limits<float>::quiet_NaN(), sign_bit ? -1.f : 1.f);
  const uint32_t all = (1u << (f.e + f.m)) - 1;  // exponent and mantissa all ones
  switch (f.kind) {
    case Kind::kIeee:
      if (field == (1u << f.e) - 1)
        return mant ? nan : (sign_bit ? -std::numeric_limits<float>::infinity()
                                      : std::numeric_limits<float>::infinity());
      break;
    case Kind::kFn:
      if ((code & all) == all) return nan;
      break;
    case Kind::kFnuz:  // the NaN's pattern is the sign bit's, yet XLA decodes it as +NaN
      if (code == (1u << (f.e + f.m))) return std::numeric_limits<float>::quiet_NaN();
      break;
    case Kind::kE8M0:
      if (code == 0xff) return nan;
      return std::ldexp(1.f, static_cast<int>(field) - f.bias);
    case Kind::kSaturate: break;
  }
  float v = field == 0 ? std::ldexp(static_cast<float>(mant), f.emin() - f.m)
                       : std::ldexp(1.f + std::ldexp(static_cast<float>(mant), -f.m),
                                    static_cast<int>(field) - f.bias);
  return sign_bit ? -v : v;
}

mx::array u32(uint64_t v) { return int_scalar(static_cast<int64_t>(v), mx::uint32); }
mx::array u64(uint64_t v) { return int_scalar(static_cast<int64_t>(v), mx::uint64); }

}  // namespace

bool is_narrow_float(E t) { return format_of(t).has_value(); }

mx::array narrow_to_f32(const mx::array& bits, E t) {
  const Format f = *format_of(t);
  const uint32_t n = 1u << f.bits();
  std::vector<float> table(n);
  for (uint32_t c = 0; c < n; ++c) table[c] = decode_one(f, c);
  mx::array lut(table.begin(), {static_cast<int>(n)}, mx::float32);
  // Storage may carry bits above a sub-byte format's width; only the low ones are the value.
  mx::array idx = mx::bitwise_and(mx::astype(bits, mx::uint32), u32(n - 1));
  return mx::take(lut, idx);
}

mx::array f32_to_narrow(const mx::array& x, E t) {
  using mx::bitwise_and, mx::bitwise_or, mx::right_shift, mx::left_shift, mx::where;
  const Format f = *format_of(t);
  const int sh = 23 - f.m;
  mx::array xi = mx::view(mx::astype(x, mx::float32), mx::uint32);
  mx::array sign = right_shift(xi, u32(31));
  mx::array abs = bitwise_and(xi, u32(0x7fffffff));
  mx::array is_nan = mx::greater(abs, u32(0x7f800000));
  mx::array is_inf = mx::equal(abs, u32(0x7f800000));
  // Normal results: round the f32 bit pattern to m mantissa bits, nearest even (a carry moves
  // into the exponent), then rebias the exponent.
  // e8m0 (no mantissa bits) rounds ties up, away from zero, in XLA and ml_dtypes.
  mx::array odd = f.kind == Kind::kE8M0 ? u32(1)
                                        : bitwise_and(right_shift(abs, u32(sh)), u32(1));
  mx::array r = mx::add(abs, mx::add(u32((1u << (sh - 1)) - 1), odd));
  r = bitwise_and(r, u32(~((1u << sh) - 1)));
  mx::array field = mx::add(mx::astype(right_shift(r, u32(23)), mx::int32),
                            int_scalar(f.bias - 127, mx::int32));
  mx::array code = bitwise_or(left_shift(mx::astype(mx::maximum(field, int_scalar(0, mx::int32)),
                                                    mx::uint32), u32(f.m)),
                              bitwise_and(right_shift(r, u32(sh)), u32((1u << f.m) - 1)));
  if (f.kind != Kind::kE8M0) {
    // Below the normal range: a count of the smallest denormal, rounded nearest even (exact
    // scaling by a power of two, then MLX's round-half-even); 2^m lands on the smallest normal.
    mx::array below = mx::less(abs, u32(static_cast<uint32_t>(f.emin() + 127) << 23));
    mx::array ax = mx::view(abs, mx::float32);
    mx::array n = mx::round(mx::multiply(ax, float_scalar(std::ldexp(1.0, f.m - f.emin()),
                                                          mx::float32)));
    code = where(below, mx::astype(n, mx::uint32), code);
  }
  const uint32_t top = 1u << (f.e + f.m);  // the sign bit's place
  mx::array signed_code = bitwise_or(code, left_shift(sign, u32(f.e + f.m)));
  mx::array special = mx::logical_or(is_nan, is_inf);
  mx::array out = signed_code;
  switch (f.kind) {
    case Kind::kIeee: {
      const uint32_t inf_code = ((1u << f.e) - 1) << f.m;
      mx::array of = mx::logical_or(is_inf, mx::greater_equal(code, u32(inf_code)));
      mx::array sbit = left_shift(sign, u32(f.e + f.m));
      out = where(of, bitwise_or(sbit, u32(inf_code)), out);
      out = where(is_nan, bitwise_or(sbit, u32(inf_code | (1u << (f.m - 1)))), out);
      break;
    }
    case Kind::kFn: {
      mx::array of = mx::logical_or(special, mx::greater(code, u32(top - 2)));
      out = where(of, bitwise_or(left_shift(sign, u32(f.e + f.m)), u32(top - 1)), out);
      break;
    }
    case Kind::kFnuz: {
      mx::array of = mx::logical_or(special, mx::greater(code, u32(top - 1)));
      out = where(mx::equal(code, u32(0)), u32(0), out);  // no -0
      out = where(of, u32(top), out);
      break;
    }
    case Kind::kE8M0: {
      // Below 2^-126 (f32 denormals) only 2^-127 (code 0) is left; 1.5 * 2^-127 rounds up.
      code = where(mx::less(abs, u32(0x00800000)),
                   where(mx::greater_equal(abs, u32(0x00600000)), u32(1), u32(0)), code);
      mx::array bad = mx::logical_or(mx::logical_or(special, mx::greater(code, u32(254))),
                                     mx::logical_or(mx::equal(sign, u32(1)),
                                                    mx::equal(abs, u32(0))));
      out = where(bad, u32(0xff), code);
      break;
    }
    case Kind::kSaturate: {
      mx::array of = mx::logical_or(is_inf, mx::greater(code, u32(top - 1)));
      out = where(of, bitwise_or(left_shift(sign, u32(f.e + f.m)), u32(top - 1)), out);
      out = where(is_nan, u32(top), out);  // XLA's CPU gives the bare sign bit for NaN
      break;
    }
  }
  return mx::astype(out, mx::uint8);
}

mx::array f64_bits_to_f32(const mx::array& bits) {
  using mx::bitwise_and, mx::bitwise_or, mx::right_shift, mx::left_shift, mx::where;
  mx::array u = mx::astype(bits, mx::uint64);
  mx::array sign = right_shift(u, u64(63));
  mx::array abs = bitwise_and(u, u64(0x7fffffffffffffffull));
  mx::array e = right_shift(abs, u64(52));
  mx::array m = bitwise_and(abs, u64((1ull << 52) - 1));
  mx::array is_nan = mx::greater(abs, u64(0x7ff0000000000000ull));
  mx::array is_inf = mx::equal(abs, u64(0x7ff0000000000000ull));
  // f32 normal range: round the pattern at bit 29, nearest even; the carry may reach inf.
  mx::array odd = bitwise_and(right_shift(abs, u64(29)), u64(1));
  mx::array r = bitwise_and(mx::add(abs, mx::add(u64((1ull << 28) - 1), odd)),
                            u64(~((1ull << 29) - 1)));
  mx::array er = right_shift(r, u64(52));
  mx::array normal = bitwise_or(left_shift(mx::subtract(mx::maximum(er, u64(896)), u64(896)),
                                           u64(23)),
                                bitwise_and(right_shift(r, u64(29)), u64(0x7fffff)));
  // Below 2^-126: the count of f32's smallest denormal 2^-149, (2^52 + m) >> (926 - e),
  // rounded nearest even; f64 zeros and denormals are far below and give 0.
  mx::array s = mx::minimum(mx::subtract(u64(926), mx::minimum(e, u64(896))), u64(63));
  mx::array full = bitwise_or(m, u64(1ull << 52));
  mx::array q = right_shift(full, s);
  mx::array rem = bitwise_and(full, mx::subtract(left_shift(u64(1), s), u64(1)));
  mx::array half = left_shift(u64(1), mx::subtract(s, u64(1)));
  mx::array up = mx::logical_or(mx::greater(rem, half),
                                mx::logical_and(mx::equal(rem, half),
                                                mx::equal(bitwise_and(q, u64(1)), u64(1))));
  mx::array den = where(mx::equal(e, u64(0)), u64(0), mx::add(q, mx::astype(up, mx::uint64)));
  mx::array out = where(mx::less(e, u64(897)), den, normal);
  out = where(mx::logical_or(is_inf, mx::greater(er, u64(1150))), u64(0x7f800000), out);
  out = where(is_nan, bitwise_or(u64(0x7fc00000), right_shift(m, u64(29))), out);
  out = bitwise_or(out, left_shift(sign, u64(31)));
  return mx::view(mx::astype(out, mx::uint32), mx::float32);
}

mx::array f32_to_f64_bits(const mx::array& x) {
  using mx::bitwise_and, mx::bitwise_or, mx::right_shift, mx::left_shift, mx::where;
  mx::array b32 = mx::view(mx::astype(x, mx::float32), mx::uint32);
  mx::array b = mx::astype(b32, mx::uint64);
  mx::array sign = right_shift(b, u64(31));
  mx::array e8 = bitwise_and(right_shift(b, u64(23)), u64(0xff));
  mx::array m = bitwise_and(b, u64(0x7fffff));
  mx::array normal = bitwise_or(left_shift(mx::add(e8, u64(896)), u64(52)), left_shift(m, u64(29)));
  mx::array special = bitwise_or(u64(0x7ffull << 52), left_shift(m, u64(29)));
  // f32 denormal m * 2^-149 = 1.f * 2^(p-149) with p the index of m's top set bit.
  mx::array clz = mx::astype(ew::count_leading_zeros(bitwise_and(b32, mx::array(0x7fffffu,
                                                                              mx::uint32))),
                             mx::uint64);
  mx::array p = mx::subtract(u64(31), mx::minimum(clz, u64(31)));
  mx::array den_m = bitwise_and(left_shift(m, mx::subtract(u64(52), p)), u64((1ull << 52) - 1));
  mx::array den = bitwise_or(left_shift(mx::add(p, u64(874)), u64(52)), den_m);
  mx::array out = where(mx::equal(e8, u64(0xff)), special, normal);
  out = where(mx::equal(e8, u64(0)), where(mx::equal(m, u64(0)), u64(0), den), out);
  return bitwise_or(out, left_shift(sign, u64(63)));
}

mx::array wrap_subbyte(const mx::array& x, E t) {
  const int bits = ir::element_bit_width(t);
  if (!ir::is_integer(t) || bits >= 8) return x;
  if (ir::is_unsigned_int(t)) return mx::bitwise_and(x, int_scalar((1 << bits) - 1, x.dtype()));
  mx::array s = int_scalar(8 - bits, mx::int8);
  return mx::right_shift(mx::left_shift(mx::astype(x, mx::int8), s), s);  // arithmetic shift
}

mx::array reduce_precision(const mx::array& x, int exponent_bits, int mantissa_bits) {
  using mx::bitwise_and, mx::bitwise_or, mx::right_shift, mx::where;
  const int nbits = dtype_bits(x.dtype());
  const int src_m = x.dtype() == mx::float32 ? 23 : x.dtype() == mx::bfloat16 ? 7 : 10;
  const int src_e = nbits - 1 - src_m;
  const mx::Dtype ut = unsigned_of(x.dtype());
  auto c = [&](uint64_t v) { return int_scalar(static_cast<int64_t>(v), ut); };
  const uint64_t all = nbits == 32 ? 0xffffffffull : 0xffffull;
  mx::array xi = mx::view(x, ut);
  if (mantissa_bits < src_m) {
    // Add half an ULP of the kept precision (less one, plus the kept last bit: ties to even)
    // and truncate.
    const int shift = src_m - mantissa_bits;
    const uint64_t last = 1ull << shift;
    mx::array last_bit = right_shift(bitwise_and(xi, c(last)), c(shift));
    xi = bitwise_and(mx::add(xi, mx::add(last_bit, c((last >> 1) - 1))), c(~(last - 1) & all));
  }
  if (exponent_bits < src_e) {
    const uint64_t sign_mask = 1ull << (nbits - 1);
    const uint64_t exp_mask = ((1ull << src_e) - 1) << src_m;
    const int64_t bias = (int64_t{1} << (src_e - 1)) - 1;
    const int64_t reduced_bias = (int64_t{1} << (exponent_bits - 1)) - 1;
    mx::array x_exp = bitwise_and(xi, c(exp_mask));
    mx::array overflows = mx::greater(x_exp, c(static_cast<uint64_t>(bias + reduced_bias) << src_m));
    mx::array underflows =
        mx::less_equal(x_exp, c(static_cast<uint64_t>(bias - reduced_bias) << src_m));
    mx::array signed_zero = bitwise_and(xi, c(sign_mask));
    mx::array signed_inf = bitwise_or(signed_zero, c(exp_mask));
    xi = where(overflows, signed_inf, where(underflows, signed_zero, xi));
  }
  mx::array nan = x;
  // XLA's CPU computes bf16 in f32: NaNs come back canonical, except (jaxlib 0.10) when the
  // op is dropped as a no-op (more mantissa bits than bf16 and as many exponent bits): measured.
  const bool no_op = mantissa_bits > src_m && exponent_bits >= src_e;
  if (x.dtype() == mx::bfloat16 && (!no_op || passes::reference_jaxlib_at_least(0, 11)))
    nan = mx::view(bitwise_or(bitwise_and(mx::view(x, ut), c(0x8000)), c(0x7fc0)), x.dtype());
  return where(mx::isnan(x), nan, mx::view(xi, x.dtype()));
}

}  // namespace jaxmlx::lower::fbits
