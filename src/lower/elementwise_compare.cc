// stablehlo.compare: every direction and comparison type (spec: compare).
#include "lower/elementwise_internal.h"
#include "lower/util.h"
#include "mlx/ops.h"

namespace jaxmlx::lower::ew {

namespace {

using Dir = ir::ComparisonDirection;
using CmpType = ir::ComparisonType;

mx::array compare_with(Dir dir, const mx::array& a, const mx::array& b) {
  switch (dir) {
    case Dir::kEQ: return mx::equal(a, b);
    case Dir::kNE: return mx::not_equal(a, b);
    case Dir::kGE: return mx::greater_equal(a, b);
    case Dir::kGT: return mx::greater(a, b);
    case Dir::kLE: return mx::less_equal(a, b);
    case Dir::kLT: return mx::less(a, b);
  }
  return mx::equal(a, b);
}

// Integer keys that order floats totally: -NaN < -inf < ... < -0 < +0 < ... < inf < NaN.
mx::array total_order_key(const mx::array& x) {
  mx::Dtype s = signed_of(x.dtype());
  mx::array k = bit_view(x, s);
  // Negative floats: flip every bit but the sign, so larger magnitudes sort lower.
  int64_t max_pos = static_cast<int64_t>((~0ull) >> (65 - dtype_bits(s)));
  mx::array flipped = mx::bitwise_xor(k, int_scalar(max_pos, s));
  return mx::where(mx::less(k, int_scalar(0, s)), flipped, k);
}

}  // namespace

StatusOr<Values> lower_compare(LowerContext& ctx, const ir::Op& op, const Values& in) {
  RETURN_IF_ERROR(require_native(ctx, op));
  int dir_value = op.get_enum("comparison_direction", -1);
  if (dir_value < 0 || dir_value > static_cast<int>(Dir::kLT))
    return ctx.malformed(op, "missing or bad comparison_direction");
  Dir dir = static_cast<Dir>(dir_value);
  auto type = static_cast<CmpType>(op.get_enum("compare_type", 0));
  ir::ElementType t = element_type(op.operands[0]);
  mx::array a = in[0], b = in[1];
  if (ir::is_complex(t)) {
    if (dir != Dir::kEQ && dir != Dir::kNE)
      return ctx.malformed(op, "complex compare supports only EQ and NE");
    return Values{compare_with(dir, a, b)};
  }
  if (ir::is_float(t)) {
    if (type == CmpType::kTotalOrder) {
      a = total_order_key(a);
      b = total_order_key(b);
    }
    return Values{compare_with(dir, a, b)};
  }
  if (t == ir::ElementType::kPred) {
    // Order false < true through uint8 (MLX's bool ordering is not something to rely on).
    return Values{compare_with(dir, mx::astype(a, mx::uint8), mx::astype(b, mx::uint8))};
  }
  // Integers: SIGNED/UNSIGNED may ask for the other interpretation of the bits.
  if (type == CmpType::kSigned && ir::is_unsigned_int(t)) {
    a = bit_view(a, signed_of(a.dtype()));
    b = bit_view(b, signed_of(b.dtype()));
  } else if (type == CmpType::kUnsigned && ir::is_signed_int(t)) {
    a = bit_view(a, unsigned_of(a.dtype()));
    b = bit_view(b, unsigned_of(b.dtype()));
  }
  return Values{compare_with(dir, a, b)};
}

}  // namespace jaxmlx::lower::ew
