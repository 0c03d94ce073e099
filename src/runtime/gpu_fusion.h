// GPU fusion without contracted multiply-adds: while a program (or a loop body) is traced for
// graph replay on an MLX GPU, chains of elementwise primitives become one mx::Compiled primitive
// each, the fused kernel MLX's own mx::compile builds (one launch instead of one per op; MLX
// caches the built kernels, on CUDA on disk as well). MLX's own fusion (JAXMLX_COMPILE=1) fuses
// whatever it can, and its CUDA kernels then contract a multiply feeding an add into one FMA
// (1-4 ULP away from jax's CPU backend; jax.random's samplers stop being bit-exact). Here a
// chain never holds an add, a subtract or a negation of a value that may end in a multiply
// (a product, a square, an exp...): that value goes through memory, as unfused, and every result
// keeps the unfused bits. Only f32/i32/u32/bool arithmetic, comparisons, selects and
// conversions are fused (runtime/elementwise_chains.h says what a chain is).
//
// JAXMLX_GPU_FUSION=1 turns it on (default off: each new chain shape is a kernel build, about a
// second each with CUDA's NVRTC on the first run of a program); read when a program is compiled.
#pragma once

#include <vector>

#include "mlx/array.h"
#include "mlx/device.h"

namespace jaxmlx::runtime {

// JAXMLX_GPU_FUSION (default off).
bool gpu_fusion_enabled();

// Rewrites the graph behind `outputs` (a trace's outputs, not evaluated): each chain of
// `device`'s elementwise primitives becomes one mx::Compiled array (several results where the
// chain's values are read elsewhere); `outputs` entries that were a chain's result are replaced
// too. Returns how many chains it fused. `device` is the GPU but for tests (MLX's CPU builds
// Compiled kernels with the host compiler).
int fuse_gpu_elementwise(std::vector<mlx::core::array>& outputs,
                         mlx::core::Device::DeviceType device = mlx::core::Device::gpu);

}  // namespace jaxmlx::runtime
