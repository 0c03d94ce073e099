// Rounded f32 arithmetic inside MLX's fused kernels (mx::Compiled), for GPU fusion
// (gpu_fusion.h).
//
// MLX builds a Compiled primitive's kernel from source: one line per op of its tape, spelled
// `<primitive name>{}(operands)` on CUDA (`()(...)` with the host compiler), the name being that
// of one of MLX's device functors (`Multiply`, `Add`). Those functors are plain `x * y`, `x + y`,
// and CUDA's compiler contracts a product feeding a sum into one FMA (NVRTC's default
// --fmad=true; MLX passes no option to change it): one rounding where MLX's separate kernels
// round twice. CUDA's `__fmul_rn`, `__fadd_rn` and `__fsub_rn` are never contracted.
//
// So a tape may hold, in place of MLX's f32 Add, Subtract, Multiply and Square, our own
// primitives named after functors of ours that call those intrinsics (`JaxmlxRn1Add`...), whose
// definitions one more tape element puts into the kernel's source ahead of them: its name, as
// the source is written, is the text `0; struct JaxmlxRn1Add {...}; ...; float jaxmlx_rn1 =
// JaxmlxRn1Defs`, so its line declares the functors and an unused float. While MLX builds a
// Compiled primitive's library name (the kernel's C++ name and its disk cache key, made in the
// constructor from the same names), that element is named `JaxmlxRn1Defs`: construct the
// Compiled primitive inside a LibraryNaming scope. The `1` is the source's version: change the
// functors' source and it must change too, or a kernel cached on disk by an older build is
// loaded.
//
// Same bits as MLX's separate kernels, which compute each of these ops as one correctly rounded
// instruction. With the host compiler (MLX's CPU, for tests) the functors are plain C++
// operators: MLX builds with -std=c++17, where GCC does not contract.
//
// This depends on how MLX 0.32 writes a fused kernel's source (mlx/backend/cuda/compiled.cpp,
// mlx/backend/cpu/compiled.cpp); the pinned version is the one tested. Not for Metal.
#pragma once

#include "mlx/array.h"
#include "mlx/primitives.h"

namespace jaxmlx::runtime {

enum class RoundedOp { kAdd, kSubtract, kMultiply, kSquare };

// While one is alive on a thread, the definitions element is named by an identifier.
class LibraryNaming {
 public:
  LibraryNaming();
  ~LibraryNaming();
  LibraryNaming(const LibraryNaming&) = delete;
  LibraryNaming& operator=(const LibraryNaming&) = delete;
};

// The tape element computing `op` over `operands` (one for kSquare, two otherwise), f32.
mlx::core::array rounded_op(const mlx::core::Stream& stream, RoundedOp op, const mlx::core::Shape& shape,
                            std::vector<mlx::core::array> operands);

// The tape element whose line defines the functors; it must come before any rounded op. Its
// operand is any array the kernel reads (f32, i32, u32 or bool); its value is unused.
mlx::core::array rounded_definitions(const mlx::core::Stream& stream, const mlx::core::Shape& shape,
                                     const mlx::core::array& operand);

}  // namespace jaxmlx::runtime
