// FusedElementwise: an MLX primitive that evaluates a chain of elementwise MLX primitives on the
// CPU in one pass, with no host compiler (MLX's own CPU fusion builds each kernel with one).
//
// The program is a list of instructions over registers: registers 0..num_inputs-1 are the
// primitive's inputs, read broadcast numpy-style to the output shape with whatever strides they
// have; register num_inputs + i is instruction i's result, and the program's outputs (or the
// last instruction) are the primitive's results, all of one shape. Each instruction applies
// MLX's own scalar functor (mlx/backend/cpu/binary_ops.h, unary_ops.h; shifts, bool ops and
// selects as equivalent byte and bit arithmetic that vectorizes; our Fma primitive's std::fmaf) in the dtype the replaced
// primitive computed in, so results are bit for bit those of the primitives it replaces: on
// x86-64 MLX's CPU kernels run the same functors one element at a time (simd width 1); where
// MLX's kernels are vectorized (Accelerate, NEON), only ops that round exactly (arithmetic,
// sqrt, comparisons) are fused. Evaluation goes in chunks of kChunk elements through scratch
// slots that stay in cache (reused once a value is dead): one pass over memory instead of one
// per primitive, and one scheduler task instead of one per primitive.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "mlx/array.h"
#include "mlx/primitives.h"

namespace jaxmlx::runtime {

// Operations a fused program can hold, named after the MLX primitives they replace.
enum class FusedOp : uint8_t {
  // same dtype in and out
  kAdd, kSubtract, kMultiply, kDivide, kMaximum, kMinimum, kPower,
  kLogicalAnd, kLogicalOr, kBitwiseAnd, kBitwiseOr, kBitwiseXor, kLeftShift, kRightShift,
  kNegative, kAbs, kSqrt, kRsqrt, kExp, kLog, kTanh, kSigmoid, kSquare, kLogicalNot,
  // operand dtype in, bool out
  kEqual, kNotEqual, kLess, kLessEqual, kGreater, kGreaterEqual,
  // bool condition, two operands of the result dtype
  kSelect,
  // f32 a*b + c rounded once (the "Fma" primitive of lower/fma.cc: std::fmaf)
  kFma,
  // operand bits reinterpreted as the result dtype of the same size (MLX's View)
  kView,
  // operand dtype in, result dtype out
  kAsType,
};

// The MLX primitive name `op` replaces ("Add", ...; MLX names a View by its dtype too, "View
// float32": kView is "View").
const char* fused_op_name(FusedOp op);

// One step: result register = op(args) in `dtype` (the result's), operands in `arg_dtype`.
struct FusedInstr {
  FusedOp op;
  mlx::core::Dtype dtype;
  mlx::core::Dtype arg_dtype;
  std::vector<int> args;  // register numbers
};

struct FusedProgram {
  int num_inputs = 0;
  std::vector<FusedInstr> code;
  // The registers of the primitive's results, in output order (instruction results, ascending);
  // empty: the last instruction's alone.
  std::vector<int> outputs;

  // Whether `op` over operands of `arg` giving `out` is something this evaluator computes.
  static bool supports(FusedOp op, mlx::core::Dtype arg, mlx::core::Dtype out);
};

// One instruction over n elements: args[i] points at operand i's values, dst at the result's.
using FusedKernel = void (*)(const void* const* args, void* dst, int n);

class FusedElementwise final : public mlx::core::Primitive {
 public:
  // `program` must be valid: supports() holds for every instruction and registers refer back.
  FusedElementwise(mlx::core::Stream stream, std::shared_ptr<const FusedProgram> program);

  void eval_cpu(const std::vector<mlx::core::array>& inputs,
                std::vector<mlx::core::array>& outputs) override;
  void eval_gpu(const std::vector<mlx::core::array>& inputs,
                std::vector<mlx::core::array>& outputs) override;
  const char* name() const override { return "FusedElementwise"; }
  bool is_equivalent(const mlx::core::Primitive& other) const override;

  const FusedProgram& program() const { return *program_; }

  // How the program runs (kernels, scratch slots, results): made once, shared with the tasks
  // dispatched (no copy per run).
  struct Plan;

 private:
  std::shared_ptr<const FusedProgram> program_;
  std::shared_ptr<const Plan> plan_;
};

}  // namespace jaxmlx::runtime
