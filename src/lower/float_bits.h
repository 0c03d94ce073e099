// Bit-level float conversions for element types MLX lacks, built only from integer and f32 MLX
// ops so they run on every device (Metal has no f64): the 8/6/4-bit floats (stored as uint8 raw
// bits, dtypes.h) to and from f32, f64 raw bits (uint64) to and from f32, and XLA's
// reduce_precision. Each takes and returns lazy arrays; none evaluates anything.
#pragma once

#include <optional>

#include "ir/types.h"
#include "lower/lowering.h"

namespace jaxmlx::lower::fbits {

// True for the narrow float types stored as uint8 raw bits (f8 family, f6, f4).
bool is_narrow_float(ir::ElementType t);

// Exact: every narrow float value is an f32 value (NaN -> quiet NaN of the same sign).
mx::array narrow_to_f32(const mx::array& bits, ir::ElementType t);
// f32 -> raw bits of `t`, rounding to nearest even on the bit pattern and handling overflow,
// inf, NaN and -0 per type as XLA's CPU convert (and ml_dtypes) do: IEEE types overflow to inf;
// "fn" types have no inf (overflow and inf give NaN, except f4/f6 which saturate); "fnuz" types
// have one NaN (0x80) and no -0; e8m0 has no sign and no zero (<= 0 gives NaN).
mx::array f32_to_narrow(const mx::array& x, ir::ElementType t);

// f64 raw bits (uint64) -> f32, rounded to nearest even (overflow to inf, NaN kept, values below
// f32's range to its denormals or zero).
mx::array f64_bits_to_f32(const mx::array& bits);
// f32 -> f64 raw bits (uint64), exact (f32 denormals become f64 normals).
mx::array f32_to_f64_bits(const mx::array& x);

// Sub-byte integers (s2/s4/u2/u4) in their int8/uint8 storage: the low bits sign- or
// zero-extended, i.e. the value wrapped into the type's width. Other types pass through.
mx::array wrap_subbyte(const mx::array& x, ir::ElementType t);

// spec: reduce_precision — x (f16, bf16 or f32) rounded to `mantissa_bits` (nearest even) and
// clamped to the range of `exponent_bits` (overflow to inf, values below its normal range to
// a signed zero), NaN kept: XLA's bit-level algorithm, bit-exact.
mx::array reduce_precision(const mx::array& x, int exponent_bits, int mantissa_bits);

}  // namespace jaxmlx::lower::fbits
