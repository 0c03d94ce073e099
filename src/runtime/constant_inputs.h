// How a program's constants enter its traced graph (graph replay, runtime/executable.cc).
// Constants are made and evaluated once and given to the traced function as inputs. A splat
// constant (one element broadcast to the constant's shape: lower_constant's splats, hoisted
// broadcast_in_dims of scalars) is given as that compact array instead, and broadcast again
// inside the trace. With MLX's fusion (kFused, Metal's default) the broadcast then joins the
// fused kernel, which reads the constant as one scalar; a broadcast array made outside the graph
// is a full-shape kernel input read through its zero strides, which costs the kernel an index
// computation per element for each such input and keeps it off its contiguous variant
// (bench/README.md, "Splat constants as scalars of fused kernels").
// Equal small inputs are given once: jax writes a constant at each use (an adam step of a
// 3-layer MLP has 85 stablehlo.constant ops of 18 values: 24 zeros, 7 of each beta), and every
// input of a traced function is an array each replay maps and each evaluation visits.
#pragma once

#include <cstddef>
#include <optional>
#include <vector>

#include "mlx/array.h"

namespace jaxmlx::runtime {

class ConstantInputs {
 public:
  ConstantInputs() = default;
  // From the program's constants before they are evaluated (evaluation drops the broadcast that
  // made a splat). `compact`: pass splats as their element; otherwise every constant as itself.
  // `device`: an input of at most 8 bytes is a device_copy (device_scalars.h) of its value.
  ConstantInputs(const std::vector<mlx::core::array>& constants, bool compact,
                 bool device = false);

  // What the traced function is given for the constants: each distinct value once (an array of
  // at most kMaxSharedBytes, row-contiguous, is compared by its bytes; any other is its own).
  // Evaluated.
  const std::vector<mlx::core::array>& inputs() const { return inputs_; }
  // Which of inputs() stands for constant `i`.
  size_t input_index(size_t i) const { return index_.at(i); }
  const mlx::core::array& input(size_t i) const { return inputs_[input_index(i)]; }
  // Inside the trace: the value standing for constant `i`, from the traced input `traced` given
  // for it (input(i)).
  mlx::core::array expand(size_t i, const mlx::core::array& traced) const;

  static constexpr size_t kMaxSharedBytes = 256;

 private:
  std::vector<mlx::core::array> inputs_;
  std::vector<size_t> index_;  // per constant: its position in inputs_
  // Per constant: the shape its input is broadcast to in the trace (a splat's), or none.
  std::vector<std::optional<mlx::core::Shape>> broadcast_;
};

}  // namespace jaxmlx::runtime
