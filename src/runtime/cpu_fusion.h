// CPU fusion without a compiler: while a program (or a loop body) is traced for graph replay on
// MLX's CPU, chains of elementwise MLX primitives become one FusedElementwise primitive each
// (runtime/fused_elementwise.h). On MLX's CPU every primitive costs a scheduler task and a pass
// over memory however small it is; MLX's own fusion (JAXMLX_COMPILE=1) builds each fused kernel
// with the host C++ compiler, seconds per kernel. Results are bit for bit the unfused ones.
//
// What a chain is: runtime/elementwise_chains.h; chains most of whose inputs are strided windows
// stay unfused here. JAXMLX_CPU_FUSION=0 turns it off;
// it is read when each program is compiled.
#pragma once

#include <vector>

#include "mlx/array.h"

namespace jaxmlx::runtime {

// JAXMLX_CPU_FUSION (default on): read at each call.
bool cpu_fusion_enabled();

// Rewrites the graph behind `outputs` (a trace's outputs, not evaluated), replacing each fusible
// chain of CPU primitives by one FusedElementwise array; `outputs` entries that were a chain's
// last op are replaced too. Returns how many chains it fused.
int fuse_cpu_elementwise(std::vector<mlx::core::array>& outputs);

}  // namespace jaxmlx::runtime
