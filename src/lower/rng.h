// Counter-based generators shared by the rng and custom_call rules (lazy MLX graphs).
#pragma once

#include <array>

#include "mlx/array.h"

namespace jaxmlx::lower {

// Threefry-2x32 with 20 rounds, as jax's threefry2x32 primitive and XLA's THREE_FRY compute it:
// counters (x0, x1) under key (k0, k1); all uint32, broadcasting together. On MLX's CPU one
// Threefry2x32 primitive (a compiled loop, lower/threefry.cc); on CUDA one kernel
// (lower/cuda_kernels.h); elsewhere threefry2x32_ops.
std::array<mlx::core::array, 2> threefry2x32(mlx::core::array x0, mlx::core::array x1,
                                             const mlx::core::array& k0,
                                             const mlx::core::array& k1);

// The same with both key words in one u32[2] key (key[0], key[1]): jax's keys, read in place.
std::array<mlx::core::array, 2> threefry2x32(mlx::core::array x0, mlx::core::array x1,
                                             const mlx::core::array& key);

// The same as ~160 MLX ops (adds, rotations, xors), on any device.
std::array<mlx::core::array, 2> threefry2x32_ops(mlx::core::array x0, mlx::core::array x1,
                                                 const mlx::core::array& k0,
                                                 const mlx::core::array& k1);

}  // namespace jaxmlx::lower
