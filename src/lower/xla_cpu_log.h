// XLA:CPU's f32 log and log1p, bit for bit.
//
// XLA:CPU does not call libm: it inlines its own polynomial log (the Cephes/Eigen plog: split
// x = m * 2^e with m in [sqrt(1/2), sqrt(2)), a degree-8 polynomial in m - 1 evaluated as three
// interleaved Horner chains) and a log1p that uses a Cephes rational function for |x| < sqrt(2)-1
// and log(1 + x) elsewhere; LLVM then contracts each single-use product into an FMA. MLX's log
// and log1p are more accurate, so they differ from jax's CPU backend by an ULP in 4-8% of
// arguments (tools/rng_ulp.py). These functions replay XLA's arithmetic, FMA for FMA (exact_fma),
// which costs ~30x the ops of mx::log: use them only where bit-exactness with XLA:CPU is the
// point (jax.random's samplers, see fma.cc).
#pragma once

#include "mlx/array.h"

namespace jaxmlx::lower {

namespace mx = mlx::core;

mx::array xla_cpu_log_f32(const mx::array& x);
mx::array xla_cpu_log1p_f32(const mx::array& x);

}  // namespace jaxmlx::lower
