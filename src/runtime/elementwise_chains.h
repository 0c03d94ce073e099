// Finding the elementwise chains of a traced MLX graph and replacing each by one fused array, for
// a target that says which primitives it can fuse and builds what replaces a chain: CPU fusion
// (cpu_fusion.h) is one. (A CUDA target built on mx::fast::cuda_kernel was measured and dropped:
// bench/README.md, "Elementwise fusion on CUDA".)
//
// A chain: elementwise primitives of one shape, each read only by the chain (or its last op),
// plus the views feeding them that a fused kernel reads through strides instead (Broadcast,
// Full, reshapes of leading 1s). The chain's inputs are the arrays it reads from outside; its
// program (runtime/fused_elementwise.h) computes the last op from them.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <vector>

#include "mlx/array.h"
#include "runtime/fused_elementwise.h"

namespace jaxmlx::runtime {

struct FusionTarget {
  mlx::core::Device::DeviceType device;
  // Whether the target computes `op` over operands of `arg` giving `out` exactly as MLX does.
  std::function<bool(FusedOp op, mlx::core::Dtype arg, mlx::core::Dtype out)> supports;
  // The array computing `program` over `inputs` with the chain's last op's shape and dtype, or
  // nullopt to leave the chain as it is.
  std::function<std::optional<mlx::core::array>(
      const mlx::core::Stream& stream, std::shared_ptr<const FusedProgram> program,
      const std::vector<mlx::core::array>& inputs, const mlx::core::Shape& shape,
      mlx::core::Dtype dtype)>
      make;
  // Leave chains most of whose inputs are strided windows unfused (cpu_fusion.cc says why).
  bool skip_windows = false;
  size_t max_chain = 256;  // instructions per fused program
};

// Rewrites the graph behind `outputs` (a trace's outputs, not evaluated): each chain of `target`'s
// device becomes the array target.make returns; `outputs` entries that were a chain's last op are
// replaced too. Returns how many chains it fused.
int fuse_elementwise_chains(std::vector<mlx::core::array>& outputs, const FusionTarget& target);

}  // namespace jaxmlx::runtime
