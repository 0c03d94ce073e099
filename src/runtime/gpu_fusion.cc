#include "runtime/gpu_fusion.h"

#include <cstdlib>
#include <initializer_list>
#include <memory>
#include <optional>
#include <string_view>
#include <unordered_set>

#include "lower/util.h"
#include "mlx/ops.h"
#include "mlx/primitives.h"
#include "runtime/elementwise_chains.h"
#include "runtime/fused_elementwise.h"
#include "runtime/rounded_ops.h"

namespace mx = mlx::core;

namespace jaxmlx::runtime {

bool gpu_fusion_enabled() {
  const char* v = std::getenv("JAXMLX_GPU_FUSION");
  if (v != nullptr && *v != '\0') return std::string_view(v) == "1";
  return lower::on_cuda_gpu();
}

bool gpu_fusion_forced() {
  const char* v = std::getenv("JAXMLX_GPU_FUSION");
  return v != nullptr && std::string_view(v) == "1";
}

namespace {

// Levels of operands per fused kernel, as MLX's own fusion (max_compile_depth in
// mlx/compile.cpp): MLX's CUDA backend builds each new kernel with NVRTC in 34 variants (index
// widths, ranks), so a long chain of adds (a GRU's weight gradients summed over its unrolled
// steps) made large kernels in many lengths. JAXMLX_FUSION_MAX_DEPTH (read at each compile; 0:
// no bound) for A/B runs.
size_t fusion_max_depth() {
  const char* v = std::getenv("JAXMLX_FUSION_MAX_DEPTH");
  return v != nullptr && *v != '\0' ? std::strtoul(v, nullptr, 10) : 11;
}

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
  // MLX's name spells the tape's names, which for rounded ops' definitions is source text
  // except while naming a library (rounded_ops.h).
  const char* name() const override {
    LibraryNaming naming;
    return mx::Compiled::name();
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
    case FusedOp::kLog: case FusedOp::kTanh: case FusedOp::kSigmoid: case FusedOp::kPower:
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

// The f32 ops a kernel computes with our rounded functors (rounded_ops.h) under kRounded.
std::optional<RoundedOp> rounded(FusedOp op) {
  switch (op) {
    case FusedOp::kAdd: return RoundedOp::kAdd;
    case FusedOp::kSubtract: return RoundedOp::kSubtract;
    case FusedOp::kMultiply: return RoundedOp::kMultiply;
    case FusedOp::kSquare: return RoundedOp::kSquare;
    default: return std::nullopt;
  }
}

bool named(const mx::array& a, std::initializer_list<std::string_view> names) {
  const std::string_view n = a.primitive().name();
  for (std::string_view m : names)
    if (n == m) return true;
  return false;
}

// A float op whose device code may add its operand without rounding the operand first: a GPU
// compiler fuses that add with a multiply feeding it (an FMA rounds once where the separate
// kernels round twice). Under kSplit: MLX's add, subtract and negation. Under kRounded the
// adds and subtracts are rounded instructions, but MLX's functors for exp, log, tanh, sigmoid,
// rsqrt and pow are device library code, and a negation folds into whatever add reads it.
bool sums(FusedArithmetic arithmetic, const mx::array& a) {
  if (a.dtype() != mx::float32) return false;
  if (arithmetic == FusedArithmetic::kSplit) return named(a, {"Add", "Subtract", "Negative"});
  return !named(a, {"Add", "Subtract", "Multiply", "Square", "Divide", "Sqrt", "Maximum",
                    "Minimum", "Abs", "Select", "AsType"});
}

// A float value whose last step is no unrounded multiply: these ops end in an add, an IEEE
// division or square root (single instructions the compiler does not contract), a comparison
// or a choice, and under kRounded a rounded product too. Anything else (a product, a square,
// exp, tanh, log... whose device code may end in one) is read by a sum through memory.
// Views (a broadcast scalar, a reshaped bias) are read from memory: their inputs stay outside.
bool ends_without_product(FusedArithmetic arithmetic, const mx::array& a) {
  if (a.dtype() != mx::float32) return true;
  if (arithmetic == FusedArithmetic::kRounded && named(a, {"Multiply", "Square"})) return true;
  return named(a, {"Add", "Subtract", "Negative", "Divide", "Sqrt", "Maximum", "Minimum", "Abs",
                   "Select", "AsType", "Broadcast", "Full", "Reshape", "Squeeze", "ExpandDims"});
}

bool separate(FusedArithmetic arithmetic, const mx::array& reader, const mx::array& operand) {
  return sums(arithmetic, reader) && operand.has_primitive() &&
         !ends_without_product(arithmetic, operand);
}

// The evaluated 0-d array that `a` is a view of: a broadcast of it, through any reshapes and
// transposes after it (jax's scatter of a splat cotangent reshapes the broadcast), or nullopt.
std::optional<mx::array> splat_scalar(const mx::array& a) {
  const mx::array* v = &a;
  for (int hops = 0; hops < 8 && v->has_primitive() && v->inputs().size() == 1; ++hops) {
    if (named(*v, {"Broadcast"})) {
      const mx::array& in = v->inputs()[0];
      if (in.ndim() == 0 && !in.has_primitive()) return in;
      return std::nullopt;
    }
    if (!named(*v, {"Reshape", "Squeeze", "ExpandDims", "Transpose"})) return std::nullopt;
    v = &v->inputs()[0];
  }
  return std::nullopt;
}

std::optional<std::vector<mx::array>> make(FusedArithmetic arithmetic, const mx::Stream& stream,
                                           std::shared_ptr<const FusedProgram> program,
                                           const std::vector<mx::array>& inputs,
                                           const mx::Shape& shape,
                                           const std::vector<mx::Dtype>& dtypes,
                                           const std::vector<mx::array>& members) {
  // The kernel reads each input broadcast to the result's shape, trailing dims aligned. An input
  // of more dims (what a reshape dropping leading 1s read: a bias gradient summed with keepdims)
  // is read through a reshape of it; the tape reads the arrays the kernel is given.
  // A broadcast of an evaluated scalar (a splat constant, runtime/constant_inputs.h), also
  // through views of it (splat_scalar), is read as that scalar, also where other readers share
  // the broadcast (then it is no adapter of the chain): MLX runs a kernel whose inputs all have
  // its shape or are scalars on its contiguous variant, and a broadcast input keeps it on the
  // strided one (an index computation per element, no vectorized loads). The kernel's inputs are
  // distinct arrays (MLX declares a variable per input); `regs` holds what each of the
  // program's input registers reads.
  std::vector<mx::array> operands, regs;
  std::unordered_set<std::uintptr_t> given;
  auto read = [&](mx::array a) {
    if (given.insert(a.id()).second) operands.push_back(a);
    regs.push_back(std::move(a));
  };
  for (const mx::array& in : inputs) {
    if (std::optional<mx::array> scalar = splat_scalar(in)) {
      read(*scalar);
      continue;
    }
    if (in.ndim() <= shape.size()) {
      read(in);
      continue;
    }
    const size_t extra = in.ndim() - shape.size();
    for (size_t d = 0; d < extra; ++d)
      if (in.shape(d) != 1) return std::nullopt;
    read(mx::reshape(in, mx::Shape(in.shape().begin() + extra, in.shape().end()), stream));
  }
  // The kernel's tape: the members' own primitives over the program's registers.
  std::vector<mx::array> tape;
  bool defined = false;
  for (size_t k = 0; k < program->code.size(); ++k) {
    const FusedInstr& ins = program->code[k];
    std::vector<mx::array> args;
    for (int r : ins.args) args.push_back(regs.at(r));
    std::optional<RoundedOp> op = rounded(ins.op);
    if (arithmetic == FusedArithmetic::kRounded && op && ins.dtype == mx::float32) {
      // The functors' definitions go first; they read an input (MLX writes an op's line
      // from its operands).
      if (!defined) {
        if (operands.empty()) return std::nullopt;
        tape.insert(tape.begin(), rounded_definitions(stream, shape, operands.front()));
        defined = true;
      }
      tape.push_back(rounded_op(stream, *op, shape, std::move(args)));
    } else {
      tape.emplace_back(shape, ins.dtype, members.at(k).primitive_ptr(), std::move(args));
    }
    regs.push_back(tape.back());
  }
  std::vector<mx::array> results;
  if (program->outputs.empty()) results.push_back(tape.back());
  for (int r : program->outputs) results.push_back(regs.at(r));
  std::shared_ptr<ExactChain> chain;
  {
    LibraryNaming naming;  // MLX names the kernel from its tape's names here
    chain = std::make_shared<ExactChain>(stream, operands, results, std::move(tape),
                                         std::unordered_set<std::uintptr_t>{});
  }
  return mx::array::make_arrays(std::vector<mx::Shape>(results.size(), shape), dtypes,
                                std::move(chain), operands);
}

}  // namespace

int fuse_gpu_elementwise(std::vector<mx::array>& outputs, mx::Device::DeviceType device,
                         FusedArithmetic arithmetic) {
  if (arithmetic == FusedArithmetic::kAuto)
    arithmetic = device == mx::Device::cpu || lower::on_cuda_gpu() ? FusedArithmetic::kRounded
                                                                    : FusedArithmetic::kSplit;
  FusionTarget target;
  target.device = device;
  target.supports = supports;
  target.make = [arithmetic](const auto&... args) { return make(arithmetic, args...); };
  target.multi_output = true;
  // MLX's own fusion stops at 24 inputs; its kernels take one pointer (and strides) per array.
  target.max_arrays = 24;
  target.max_chain = 256;
  target.max_depth = fusion_max_depth();
  // One op and the views it reads (no-copy primitives here) gain nothing from a kernel build.
  target.min_instructions = 2;
  target.sink_into_broadcasts = true;  // a row's mean joins the kernel that reads it broadcast
  target.separate = [arithmetic](const auto&... args) { return separate(arithmetic, args...); };
  return fuse_elementwise_chains(outputs, target);
}

}  // namespace jaxmlx::runtime
