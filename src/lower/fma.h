// An exactly rounded f32 fused multiply-add built from ordinary MLX ops (no f64: Metal has none).
#pragma once

#include "mlx/array.h"

namespace jaxmlx::lower {

namespace mx = mlx::core;

// round(a*b + c) with one rounding to nearest-even, for float32 arrays of one shape; what a
// hardware FMA (and so XLA:CPU's contracted multiply-add) returns, including infinities, NaNs
// and signed zeros. Exact whenever a*b's rounding error is a normal float or zero (|a*b| >= 2^-102
// or a product of at most 24 significant bits) and a*b does not overflow on its own; deep in the
// subnormal range the emulation may differ in the last bit of a subnormal result, and when a*b
// overflows but a*b + c would not (c within 2^104 of -a*b) it returns an infinity, and when
// c + RN(a*b) lies within an ulp of the largest float it returns RN(c + RN(a*b)).
//
// How: Dekker's exact product a*b = p + e with a bit-mask split (every partial product is exact,
// so a backend contracting them into FMAs cannot change the result), Knuth's TwoSum
// c + p = t + t', and Boldo-Melquiond's emulation fma = RN(t + RO(t' + e)), where RO rounds to
// odd (computed by TwoSum and a one-ulp nudge of the integer encoding).
mx::array exact_fma(const mx::array& a, const mx::array& b, const mx::array& c);

}  // namespace jaxmlx::lower
