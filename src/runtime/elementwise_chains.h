// Finding the elementwise chains of a traced MLX graph and replacing each by one fused array, for
// a target that says which primitives it can fuse and builds what replaces a chain: CPU fusion
// (cpu_fusion.h) and GPU fusion through MLX's Compiled kernels (gpu_fusion.h). (A CUDA target
// built on mx::fast::cuda_kernel was measured and dropped: bench/README.md, "Elementwise fusion
// on CUDA".)
//
// A chain: elementwise primitives of one shape, each read only by the chain (or its last op),
// plus the views feeding them that a fused kernel reads through strides instead (Broadcast,
// Full, reshapes of leading 1s). The chain's inputs are the arrays it reads from outside; its
// program (runtime/fused_elementwise.h) computes the last op from them. With multi_output, a
// member read elsewhere too stays in the chain as one more result (threefry's two words, read
// by every round; adam's moments, read by the update): fewer, larger chains.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <vector>

#include "mlx/array.h"
#include "runtime/fused_elementwise.h"

namespace jaxmlx::runtime {

struct FusionTarget {
  mlx::core::Device::DeviceType device = mlx::core::Device::cpu;
  // Whether the target computes `op` over operands of `arg` giving `out` exactly as MLX does.
  std::function<bool(FusedOp op, mlx::core::Dtype arg, mlx::core::Dtype out)> supports;
  // The arrays computing `program` over `inputs`, one per program output (all of the chain's
  // shape, of `dtypes`), or nullopt to leave the chain as it is. `members`: the arrays the
  // program's instructions replace, in program order.
  std::function<std::optional<std::vector<mlx::core::array>>(
      const mlx::core::Stream& stream, std::shared_ptr<const FusedProgram> program,
      const std::vector<mlx::core::array>& inputs, const mlx::core::Shape& shape,
      const std::vector<mlx::core::Dtype>& dtypes, const std::vector<mlx::core::array>& members)>
      make;
  // Leave chains most of whose inputs are strided windows unfused (cpu_fusion.cc says why).
  bool skip_windows = false;
  size_t max_chain = 1024;  // instructions per fused program
  // At most this many levels of operands below a chain's last op (0: no bound). A sequence of
  // adds (a gradient summed over a loop's steps) is then cut into chains of this many ops.
  size_t max_depth = 0;
  // Whether a fused program may have several results: members read outside the chain join it
  // (as results) instead of ending it, unless that would close a cycle.
  bool multi_output = false;
  // Whether the instruction `reader` and its operand `operand` must stay in different chains
  // (a GPU compiler contracts a multiply feeding an add into one FMA: gpu_fusion.cc); unset:
  // any may share one.
  std::function<bool(const mlx::core::array& reader, const mlx::core::array& operand)> separate;
  // Chains of fewer instructions (views read through strides not counted) stay as they are.
  size_t min_instructions = 1;
  // At most this many arrays, inputs plus results, per chain (a kernel's argument slots); a
  // chain that needs more is cut from its last op in halves until it fits. 0: no bound.
  size_t max_arrays = 0;
  // Whether an instruction whose one reader is a Broadcast of its result (a row's mean [n, 1]
  // broadcast over [n, d]), read only by instructions, is computed at the broadcast's shape
  // from its operands broadcast there, so that the chain reading it takes it in: one kernel
  // less where the small op ran alone. Each element computes the same value from the same
  // operands (the same bits); the op runs once per element of the larger shape.
  bool sink_into_broadcasts = false;
};

// Rewrites the graph behind `outputs` (a trace's outputs, not evaluated): each chain of `target`'s
// device becomes the array target.make returns; `outputs` entries that were a chain's last op are
// replaced too. Returns how many chains it fused. Throws std::logic_error if the rewritten graph
// reads its own result (a fusion bug: MLX's recursive walks would overflow the stack on it); the
// trace that called it then fails, and the program runs without a traced graph (executable.cc).
int fuse_elementwise_chains(std::vector<mlx::core::array>& outputs, const FusionTarget& target);

// Whether the graph behind `outputs` has no cycle: an iterative walk, any depth.
bool graph_is_acyclic(const std::vector<mlx::core::array>& outputs);

}  // namespace jaxmlx::runtime
