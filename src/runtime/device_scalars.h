// Small values that GPU kernels read, kept in GPU memory.
//
// On MLX's CUDA backend every allocation of at most 8 bytes (a scalar: a program's constant, a
// splat's element, the 1 and 0 that MLX's weightless layer norm reads as its weight and bias, a
// scalar an MLX op makes such as a mean's 1/n) comes from MLX's pool of small buffers: managed
// memory that MLX advises the GPU to access where it lies (cudaMemAdviseSetAccessedBy, no
// migration). The CPU wrote those values, so they lie in host memory and a kernel reads them over
// the bus, each thread block on its own. A value here is instead read from a 16-byte buffer a GPU
// kernel wrote (memory MLX's allocator gives a kernel's output), through a view: the host never
// reads it, so it never moves to managed memory.
//
// JAXMLX_DEVICE_SCALARS: `1`/`0` turn it on or off (on the CPU too, for tests: the same values,
// other buffers); by default on with MLX's CUDA backend. Read when a program is compiled; applies
// to replayed graphs (JAXMLX_COMPILE=replay, CUDA's default).
#pragma once

#include <vector>

#include "mlx/array.h"

namespace jaxmlx::runtime {

bool device_scalars_enabled();

// Whether `a` is a value of MLX's pool of small buffers: evaluated, no primitive, in a buffer of
// at most 8 bytes.
bool in_small_buffer(const mlx::core::array& a);

// `a` (in_small_buffer) as an evaluated array of its shape, dtype and bytes that views a 16-byte
// buffer a kernel wrote. Evaluates.
mlx::core::array device_copy(const mlx::core::array& a);

// In the graph behind `outputs` (a trace's outputs, not evaluated), each rank-0 input that is
// in_small_buffer becomes a reshape (no kernel) of a device_copy of it: a view, which MLX's
// compile never reads on the host (it reads every evaluated rank-0 array of a traced graph to
// merge equal scalars; a read of GPU memory moves it to managed memory). Equal values share one
// copy. Returns how many inputs it replaced.
int place_scalars_on_device(std::vector<mlx::core::array>& outputs);

}  // namespace jaxmlx::runtime
