// An exactly rounded f32 fused multiply-add: one primitive on MLX's CPU, built from ordinary MLX
// ops on GPUs (no f64: Metal has none).
#pragma once

#include <cstddef>

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
//
// On MLX's CPU the result is one "Fma" primitive computing std::fmaf, which is correctly rounded
// by definition (hardware FMA, or glibc's exact software fmaf) and so exact everywhere; the CPU's
// elementwise fusion (runtime/fused_elementwise.h) evaluates it inside chains. On MLX's CUDA
// backend it is one kernel calling CUDA's fmaf (lower/cuda_kernels.h); on Metal, emulated_fma
// below (~45 MLX ops; MLX has no FMA op).
mx::array exact_fma(const mx::array& a, const mx::array& b, const mx::array& c);

// out[k] = std::fmaf(a[k], b[k], c[k]) for k < n: what the Fma primitive and the CPU's fused
// chains compute. On x86-64 Linux the loop is built twice (GCC's target_clones), with and
// without the FMA instructions, and the loader picks the one the CPU runs: there fmaf is one
// vector instruction, elsewhere a libm call; both are exactly rounded, so the bits agree.
void fma_loop(const float* a, const float* b, const float* c, float* out, size_t n);

// The emulation described above, on any device (exact_fma on GPUs; tests compare it with
// std::fmaf on the CPU).
mx::array emulated_fma(const mx::array& a, const mx::array& b, const mx::array& c);

}  // namespace jaxmlx::lower
