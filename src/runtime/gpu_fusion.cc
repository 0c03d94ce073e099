#include "runtime/gpu_fusion.h"

#include <cstdlib>
#include <memory>
#include <string_view>
#include <unordered_set>

#include "mlx/primitives.h"
#include "runtime/elementwise_chains.h"
#include "runtime/fused_elementwise.h"

namespace mx = mlx::core;

namespace jaxmlx::runtime {

bool gpu_fusion_enabled() {
  const char* v = std::getenv("JAXMLX_GPU_FUSION");
  return v != nullptr && std::string_view(v) == "1";
}

namespace {

// MLX's Compiled primitive, told apart by its whole kernel: MLX compares Compiled primitives by
// their ops alone (its own fusion runs after the graph is simplified, so it never needed more),
// and simplifying a traced graph merges two arrays of equivalent primitives over the same
// inputs, whichever operands each op reads. The kernel's library name spells out every op, its
// operands, dtypes and results.
class ExactChain final : public mx::Compiled {
 public:
  using mx::Compiled::Compiled;
  bool is_equivalent(const mx::Primitive& other) const override {
    const auto* o = dynamic_cast<const ExactChain*>(&other);
    return o != nullptr && o->lib_name() == lib_name();
  }
};

bool is_kind(mx::Dtype d) {
  return d == mx::float32 || d == mx::int32 || d == mx::uint32 || d == mx::bool_;
}

// What MLX's fused kernels compute as its separate kernels do (the same device functors; its
// compiler fuses unary, binary and ternary primitives and AsType), over the dtypes the CPU's
// fusion takes too. Bit views are no MLX kernel op; integer division is left alone.
bool supports(FusedOp op, mx::Dtype arg, mx::Dtype out) {
  if (!is_kind(arg) || !is_kind(out)) return false;
  const bool number = arg != mx::bool_;
  switch (op) {
    case FusedOp::kView: case FusedOp::kFma: return false;  // no MLX kernel op (Fma: the CPU's)
    case FusedOp::kDivide: case FusedOp::kSqrt: case FusedOp::kRsqrt: case FusedOp::kExp:
    case FusedOp::kLog: case FusedOp::kTanh: case FusedOp::kSigmoid:
      return arg == mx::float32 && out == mx::float32;
    case FusedOp::kAdd: case FusedOp::kSubtract: case FusedOp::kMultiply:
    case FusedOp::kMaximum: case FusedOp::kMinimum: case FusedOp::kSquare:
    case FusedOp::kNegative:
      return number && arg == out;
    case FusedOp::kAbs: return (arg == mx::float32 || arg == mx::int32) && arg == out;
    case FusedOp::kLogicalAnd: case FusedOp::kLogicalOr: case FusedOp::kLogicalNot:
      return arg == mx::bool_ && out == mx::bool_;
    case FusedOp::kBitwiseAnd: case FusedOp::kBitwiseOr: case FusedOp::kBitwiseXor:
      return arg != mx::float32 && arg == out;
    case FusedOp::kLeftShift: case FusedOp::kRightShift:
      return (arg == mx::int32 || arg == mx::uint32) && arg == out;
    case FusedOp::kEqual: case FusedOp::kNotEqual: return out == mx::bool_;
    case FusedOp::kLess: case FusedOp::kLessEqual: case FusedOp::kGreater:
    case FusedOp::kGreaterEqual:
      return number && out == mx::bool_;
    case FusedOp::kSelect: return arg == out;
    case FusedOp::kAsType: return true;
  }
  return false;
}

// A float add, subtract or negation: what a GPU compiler fuses with a multiply feeding it (an
// FMA rounds once where the separate kernels round twice).
bool sums(const mx::array& a) {
  if (a.dtype() != mx::float32) return false;
  const std::string_view n = a.primitive().name();
  return n == "Add" || n == "Subtract" || n == "Negative";
}

// A float value whose last step is no multiply: these ops end in an add, an IEEE division or
// square root (single instructions the compiler does not contract), a comparison or a choice.
// Anything else (a product, a square, exp, tanh, log... whose device code may end in one) is
// read by a sum through memory.
// Views (a broadcast scalar, a reshaped bias) are read from memory: their inputs stay outside.
bool ends_without_product(const mx::array& a) {
  if (a.dtype() != mx::float32) return true;
  const std::string_view n = a.primitive().name();
  return n == "Add" || n == "Subtract" || n == "Negative" || n == "Divide" || n == "Sqrt" ||
         n == "Maximum" || n == "Minimum" || n == "Abs" || n == "Select" || n == "AsType" ||
         n == "Broadcast" || n == "Full" || n == "Reshape" || n == "Squeeze" || n == "ExpandDims";
}

bool separate(const mx::array& reader, const mx::array& operand) {
  return sums(reader) && operand.has_primitive() && !ends_without_product(operand);
}

std::optional<std::vector<mx::array>> make(const mx::Stream& stream,
                                           std::shared_ptr<const FusedProgram> program,
                                           const std::vector<mx::array>& inputs,
                                           const mx::Shape& shape,
                                           const std::vector<mx::Dtype>& dtypes,
                                           const std::vector<mx::array>& members) {
  // The kernel reads each input broadcast to the result's shape, trailing dims aligned: an
  // input of more dims (leading 1s) has no such reading.
  for (const mx::array& in : inputs)
    if (in.ndim() > shape.size()) return std::nullopt;
  // The kernel's tape: the members' own primitives over the program's registers.
  std::vector<mx::array> regs(inputs.begin(), inputs.end());
  std::vector<mx::array> tape;
  for (size_t k = 0; k < program->code.size(); ++k) {
    const FusedInstr& ins = program->code[k];
    std::vector<mx::array> args;
    for (int r : ins.args) args.push_back(regs.at(r));
    tape.emplace_back(shape, ins.dtype, members.at(k).primitive_ptr(), std::move(args));
    regs.push_back(tape.back());
  }
  std::vector<mx::array> results;
  if (program->outputs.empty()) results.push_back(tape.back());
  for (int r : program->outputs) results.push_back(regs.at(r));
  return mx::array::make_arrays(
      std::vector<mx::Shape>(results.size(), shape), dtypes,
      std::make_shared<ExactChain>(stream, inputs, results, std::move(tape),
                                   std::unordered_set<std::uintptr_t>{}),
      inputs);
}

}  // namespace

int fuse_gpu_elementwise(std::vector<mx::array>& outputs, mx::Device::DeviceType device) {
  FusionTarget target;
  target.device = device;
  target.supports = supports;
  target.make = make;
  target.multi_output = true;
  // MLX's own fusion stops at 24 inputs; its kernels take one pointer (and strides) per array.
  target.max_arrays = 24;
  target.max_chain = 256;
  // One op and the views it reads (no-copy primitives here) gain nothing from a kernel build.
  target.min_instructions = 2;
  target.separate = separate;
  return fuse_elementwise_chains(outputs, target);
}

}  // namespace jaxmlx::runtime
