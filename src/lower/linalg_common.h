// Helpers shared by the linalg family's files (linalg.cc, linalg_householder.cc): the dtype a
// factorization computes in, the CPU stream MLX's LAPACK-backed routines need, and the
// backend_config of our own custom calls ("jaxmlx.eigh" and friends, emitted by
// python/jax_plugins/mlx/linalg_rules.py).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>

#include "lower/lowering.h"
#include "mlx/device.h"
#include "mlx/ops.h"

namespace jaxmlx::lower::linalg {

// MLX's cholesky, tri_inv/solve_triangular, lu_factor, qr, svd, eigh and eig have no Metal (and
// mostly no CUDA) kernel: they throw on a GPU stream. Running them on the CPU device works on
// every backend (unified memory on Apple silicon) and is what MLX itself recommends.
inline const mx::Device kCpu = mx::Device::cpu;

// The dtype an operand of element type `t` is factorized in: f32 for f16/bf16/f32 (half floats
// are widened and the results rounded back once), complex64 for c64 when `allow_complex`;
// everything else (f64, c128, integers) is refused naming the op and the type.
StatusOr<mx::Dtype> compute_dtype(const LowerContext& ctx, const ir::Op& op, ir::ElementType t,
                                  bool allow_complex);

// `key=value` pairs separated by commas ("lower=1,lo=0,hi=4"), as our Python rules write them.
StatusOr<std::map<std::string, int64_t, std::less<>>> parse_config(const LowerContext& ctx,
                                                                   const ir::Op& op);

// A (batch..., 1, 1) mask, true where every element of the (batch..., m, n) matrix is finite:
// LAPACK routines fed NaN/inf may fail (MLX then throws at eval), so callers factor a clean
// stand-in and turn the bad batch entries into NaN, as jax's CPU rules do when info != 0.
mx::array all_finite(const mx::array& a);
// `x` where `ok`, else NaN (ok broadcasts against x).
mx::array nan_unless(const mx::array& ok, const mx::array& x);

// The storage dtype of result `i` of `op`.
StatusOr<mx::Dtype> result_dtype(const LowerContext& ctx, const ir::Op& op, size_t i);

}  // namespace jaxmlx::lower::linalg

namespace jaxmlx::lower {
// Qr and ProductOfElementaryHouseholderReflectors (linalg_householder.cc); called by
// register_linalg.
void register_linalg_householder(Registry& r);
}  // namespace jaxmlx::lower
