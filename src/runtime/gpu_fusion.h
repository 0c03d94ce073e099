// GPU fusion without contracted multiply-adds: while a program (or a loop body) is traced for
// graph replay on an MLX GPU, chains of elementwise primitives become one mx::Compiled primitive
// each, the fused kernel MLX's own mx::compile builds (one launch instead of one per op; MLX
// caches the built kernels, on CUDA on disk as well). MLX's own fusion (JAXMLX_COMPILE=1) fuses
// whatever it can, and its CUDA kernels then contract a multiply feeding an add into one FMA
// (1-4 ULP away from jax's CPU backend; jax.random's samplers stop being bit-exact). Here every
// result keeps the unfused bits: on CUDA a kernel computes f32 adds, subtracts, products and
// squares with our rounded functors (rounded_ops.h), which no compiler contracts, so products
// and sums share kernels; what MLX's device library computes (exp, log, tanh, sigmoid, rsqrt,
// pow) and negations never read another of those in one kernel. On Metal (kSplit) a chain never
// holds an add, a subtract or a negation of a value that may end in a multiply (a product, a
// square, an exp...): that value goes through memory, as unfused. Only f32/i32/u32/bool
// arithmetic, comparisons, selects and conversions are fused (runtime/elementwise_chains.h says
// what a chain is). An op whose result is only read broadcast by such chains (a layer norm's
// row mean and inverse deviation, [n, 1] read over [n, d]) is computed again in each kernel
// reading it, as MLX's own fusion does, instead of in a kernel of its own: the same value from
// the same operands (FusionTarget::sink_into_broadcasts).
//
// JAXMLX_GPU_FUSION: on by default with MLX's CUDA backend, off on Metal (where graph replay is
// not the default either); `1`/`0` turn it on or off; read when a program is compiled. Each new
// chain is a kernel build, about a second each with CUDA's NVRTC on a program's first run on a
// machine (MLX keeps the built kernels on disk for later processes).
#pragma once

#include <vector>

#include "mlx/array.h"
#include "mlx/device.h"

namespace jaxmlx::runtime {

// How a fused kernel computes f32 +, -, * and squares.
enum class FusedArithmetic {
  kAuto,     // kRounded for CUDA and the host compiler, kSplit on Metal
  kRounded,  // our rounded functors (rounded_ops.h), never contracted: products and sums share
             // kernels
  kSplit,    // MLX's functors: a sum never shares a kernel with a product it reads
};

// JAXMLX_GPU_FUSION (default: on with MLX's CUDA backend).
bool gpu_fusion_enabled();
// JAXMLX_GPU_FUSION=1, set explicitly: on MLX's CPU too, the CUDA rewrite runs there instead of
// the CPU fusion (its kernels built by the host compiler), to see a CUDA run's chains without a
// GPU; read when a program is compiled.
bool gpu_fusion_forced();

// Rewrites the graph behind `outputs` (a trace's outputs, not evaluated): each chain of
// `device`'s elementwise primitives becomes one mx::Compiled array (several results where the
// chain's values are read elsewhere); `outputs` entries that were a chain's result are replaced
// too. Returns how many chains it fused. `device` is the GPU but for tests (MLX's CPU builds
// Compiled kernels with the host compiler).
int fuse_gpu_elementwise(std::vector<mlx::core::array>& outputs,
                         mlx::core::Device::DeviceType device = mlx::core::Device::gpu,
                         FusedArithmetic arithmetic = FusedArithmetic::kAuto);

}  // namespace jaxmlx::runtime
