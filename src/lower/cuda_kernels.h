// Elementwise kernels of our own on MLX's CUDA backend (platform-specific: only where
// on_cuda_gpu(); elsewhere every function here returns nullopt and the caller takes its portable
// path). Each is one kernel launch where the portable path is dozens of MLX ops, each its own
// launch with ~5 µs of MLX's host cost on an H200 (bench/README.md, "Exact kernels on CUDA"):
//   cuda_fma:       round(±a*b ± c) once, with CUDA's fmaf (IEEE's fusedMultiplyAdd, correctly
//                   rounded), where emulated_fma (lower/fma.h) takes ~45 ops;
//   cuda_threefry:  Threefry-2x32, 20 rounds, where threefry2x32_ops takes ~160.
// Integer arithmetic and an explicit fmaf leave a compiler nothing to contract or reorder, so the
// bits are those of the CPU primitives (CpuFma, CpuThreefry) by construction; tests/ops/test_fma.py
// and tests/test_random.py check them against jax's CPU backend when run on CUDA.
//
// Built with MLX's custom-kernel API (mx::fast::cuda_kernel; NVRTC compiles each source once per
// process, MLX caches the PTX on disk). Operands may be of the result's shape (read through any
// strides: MLX makes a non-contiguous one row-major first) or single elements (read at 0), so
// jax's broadcast scalars (polynomial coefficients, one key) need no copy.
// JAXMLX_CUDA_KERNELS=0 (read at each call, that is at each compile) turns them off.
#pragma once

#include <array>
#include <optional>

#include "mlx/array.h"

namespace jaxmlx::lower {

namespace mx = mlx::core;

// round(sa*a*b + sc*c) with sa, sc = -1 when neg_product / neg_addend: f32 or f16 operands of
// one dtype (f16: an f32 FMA of the widened operands rounded once to f16, as LLVM computes a half
// FMA), each of the result's shape or a single element. nullopt off CUDA or for anything else.
std::optional<mx::array> cuda_fma(const mx::array& a, const mx::array& b, const mx::array& c,
                                  bool neg_product = false, bool neg_addend = false);

// (y0, y1) = threefry2x32((k0, k1), (x0, x1)), all uint32, broadcasting together like
// threefry2x32_ops. With `key_pair`, k0 is one u32[2] key (k0[0], k0[1]) and k1 is unused.
// nullopt off CUDA, for other dtypes, or when an operand is neither a single element nor of the
// result's shape after broadcasting (then it is broadcast, and MLX copies it).
std::optional<std::array<mx::array, 2>> cuda_threefry(const mx::array& k0, const mx::array& k1,
                                                      const mx::array& x0, const mx::array& x1,
                                                      bool key_pair = false);

}  // namespace jaxmlx::lower
