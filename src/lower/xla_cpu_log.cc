// XLA:CPU's f32 log and log1p (see xla_cpu_log.h). The operation order and the FMAs follow the
// machine code XLA:CPU emits for jnp.log / jnp.log1p (jaxlib 0.10, x86-64 with FMA), read from
// XLA_FLAGS=--xla_dump_to dumps: every fmul whose only use is an fadd/fsub is one FMA.
#include "lower/xla_cpu_log.h"

#include <cstdint>

#include "lower/fma.h"
#include "lower/util.h"
#include "mlx/ops.h"

namespace jaxmlx::lower {
namespace {

// An f32 constant from its bit pattern (an integer leaf stays exact in compiled kernels).
mx::array f32c(uint32_t bits) {
  return mx::view(mx::array(static_cast<int32_t>(bits), mx::int32), mx::float32);
}

mx::array bcast(const mx::array& c, const mx::array& like) {
  return mx::broadcast_to(c, like.shape());
}

// fma with broadcast constants: exact_fma wants operands of one shape.
mx::array fma(const mx::array& a, const mx::array& b, const mx::array& c) {
  mx::Shape s = mx::broadcast_shapes(mx::broadcast_shapes(a.shape(), b.shape()), c.shape());
  return exact_fma(mx::broadcast_to(a, s), mx::broadcast_to(b, s), mx::broadcast_to(c, s));
}

}  // namespace

mx::array xla_cpu_log_f32(const mx::array& x) {
  const mx::array one = f32c(0x3F800000), zero = f32c(0);
  // Clamp below to the smallest normal (NaN too; the special cases below restore it).
  mx::array xc = mx::where(mx::greater(x, f32c(0x00800000)), x, f32c(0x00800000));
  mx::array bits = mx::view(xc, mx::int32);
  mx::array e = mx::astype(mx::right_shift(bits, int_scalar(23, mx::int32)) -
                               int_scalar(127, mx::int32), mx::float32);
  mx::array m = mx::view((bits & int_scalar(0x807FFFFF, mx::int32)) |
                             int_scalar(0x3F000000, mx::int32), mx::float32);  // [0.5, 1)
  mx::array small = mx::less(m, f32c(0x3F3504F3));                           // m < sqrt(1/2)
  mx::array e2 = (one + e) - mx::where(small, one, zero);
  mx::array r = (m - one) + mx::where(small, m, zero);  // in [sqrt(1/2) - 1, sqrt(2) - 1)
  mx::array r2 = r * r;
  mx::array r3 = r2 * r;
  mx::array a = fma(r, f32c(0x3D9021BB), f32c(0xBDEBD1B8));
  mx::array b = fma(r, f32c(0xBDFE5D4F), f32c(0x3E11E9BF));
  mx::array c = fma(r, f32c(0x3E4CCEAC), f32c(0xBE7FFFFC));
  a = fma(a, r, f32c(0x3DEF251A));
  b = fma(b, r, f32c(0xBE2AAE50));
  c = fma(c, r, f32c(0x3EAAAAAA));
  a = fma(a, r3, b);
  a = fma(a, r3, c);
  mx::array y = fma(a, r3, e2 * f32c(0xB95E8083));            // + e * log(2)_lo
  mx::array res = (r - r2 * f32c(0x3F000000)) + y;            // r - r^2/2 (exact product)
  res = fma(e2, f32c(0x3F318000), res);                       // + e * log(2)_hi
  // x < 0 or NaN -> NaN, x == 0 -> -inf, x == +inf -> +inf.
  res = mx::where(mx::greater(x, zero), res, f32c(0xFFFFFFFF));
  res = mx::where(mx::equal(x, zero), f32c(0xFF800000), res);
  return mx::where(mx::equal(x, f32c(0x7F800000)), f32c(0x7F800000), res);
}

mx::array xla_cpu_log1p_f32(const mx::array& x) {
  const mx::array one = f32c(0x3F800000);
  mx::array large = xla_cpu_log_f32(x + one);
  // |x| < sqrt(2) - 1: x - x^2/2 + x^3 * P(x)/Q(x), P and Q of degree 6 by Horner.
  static constexpr uint32_t kP[] = {0x3EFF40C5, 0x40D284FA, 0x41EF4B9C,
                                    0x4273CC76, 0x426473AD, 0x41A05101};
  static constexpr uint32_t kQ[] = {0x417101AD, 0x42A6185B, 0x435DC32D,
                                    0x439A8CA3, 0x43586D8A, 0x42707982};
  mx::array p = bcast(f32c(0x383DE04B), x), q = bcast(one, x);
  for (int i = 0; i < 6; ++i) {
    p = fma(p, x, f32c(kP[i]));
    q = fma(q, x, f32c(kQ[i]));
  }
  mx::array x2 = x * x;
  mx::array t = (x * x2) * (p / q);
  mx::array small = x + (t - x2 * f32c(0x3F000000));  // XLA fuses -x2/2 + t: the product is exact
  return mx::where(mx::less(mx::abs(x), f32c(0x3ED413CD)), small, large);
}

}  // namespace jaxmlx::lower
