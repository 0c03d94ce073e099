// Platform-specific (MLX's CUDA backend, and the host compiler for tests): see rounded_ops.h.
#include "runtime/rounded_ops.h"

#include <stdexcept>
#include <string>

namespace mx = mlx::core;

namespace jaxmlx::runtime {
namespace {

thread_local int t_library_naming = 0;

// Tape members only: MLX's fused kernel computes them from their names, never from eval_*.
class TapeOnly : public mx::UnaryPrimitive {
 public:
  using mx::UnaryPrimitive::UnaryPrimitive;
  void eval_cpu(const std::vector<mx::array>&, mx::array&) override { unreachable(); }
  void eval_gpu(const std::vector<mx::array>&, mx::array&) override { unreachable(); }

 private:
  [[noreturn]] void unreachable() const {
    throw std::logic_error(std::string("jax-mlx: ") + name() +
                           " is a fused kernel's op, evaluated only inside one");
  }
};

class Rounded final : public TapeOnly {
 public:
  Rounded(mx::Stream stream, RoundedOp op) : TapeOnly(stream), op_(op) {}
  const char* name() const override {
    switch (op_) {
      case RoundedOp::kAdd: return "JaxmlxRn1Add";
      case RoundedOp::kSubtract: return "JaxmlxRn1Subtract";
      case RoundedOp::kMultiply: return "JaxmlxRn1Multiply";
      case RoundedOp::kSquare: return "JaxmlxRn1Square";
    }
    return "JaxmlxRn1";
  }
  bool is_equivalent(const mx::Primitive& other) const override {
    const auto* o = dynamic_cast<const Rounded*>(&other);
    return o != nullptr && o->op_ == op_;
  }

 private:
  RoundedOp op_;
};

// The functors, as a statement list ending in a declaration whose initializer MLX's line
// completes: `JaxmlxRn1Defs{}(tmp_X);` (or `()(tmp_X)`). Local classes: the line sits inside the
// kernel's loop body, ahead of every line that uses them.
constexpr const char* kCudaSource =
    "0; "
    "struct JaxmlxRn1Add { __device__ float operator()(float a, float b) const "
    "{ return __fadd_rn(a, b); } }; "
    "struct JaxmlxRn1Subtract { __device__ float operator()(float a, float b) const "
    "{ return __fsub_rn(a, b); } }; "
    "struct JaxmlxRn1Multiply { __device__ float operator()(float a, float b) const "
    "{ return __fmul_rn(a, b); } }; "
    "struct JaxmlxRn1Square { __device__ float operator()(float a) const "
    "{ return __fmul_rn(a, a); } }; "
    "struct JaxmlxRn1Defs { "
    "__device__ float operator()(float) const { return 0.0f; } "
    "__device__ float operator()(int) const { return 0.0f; } "
    "__device__ float operator()(unsigned int) const { return 0.0f; } "
    "__device__ float operator()(bool) const { return 0.0f; } }; "
    "float jaxmlx_rn1 = JaxmlxRn1Defs";

constexpr const char* kHostSource =
    "0; "
    "struct JaxmlxRn1Add { float operator()(float a, float b) const { return a + b; } }; "
    "struct JaxmlxRn1Subtract { float operator()(float a, float b) const { return a - b; } }; "
    "struct JaxmlxRn1Multiply { float operator()(float a, float b) const { return a * b; } }; "
    "struct JaxmlxRn1Square { float operator()(float a) const { return a * a; } }; "
    "struct JaxmlxRn1Defs { "
    "float operator()(float) const { return 0.0f; } "
    "float operator()(int) const { return 0.0f; } "
    "float operator()(unsigned int) const { return 0.0f; } "
    "float operator()(bool) const { return 0.0f; } }; "
    "float jaxmlx_rn1 = JaxmlxRn1Defs";

class Definitions final : public TapeOnly {
 public:
  explicit Definitions(mx::Stream stream)
      : TapeOnly(stream), host_(stream.device == mx::Device::cpu) {}
  const char* name() const override {
    if (t_library_naming > 0) return "JaxmlxRn1Defs";
    return host_ ? kHostSource : kCudaSource;
  }
  bool is_equivalent(const mx::Primitive& other) const override {
    return dynamic_cast<const Definitions*>(&other) != nullptr;
  }

 private:
  bool host_;
};

}  // namespace

LibraryNaming::LibraryNaming() { ++t_library_naming; }
LibraryNaming::~LibraryNaming() { --t_library_naming; }

mx::array rounded_op(const mx::Stream& stream, RoundedOp op, const mx::Shape& shape,
                     std::vector<mx::array> operands) {
  return mx::array(shape, mx::float32, std::make_shared<Rounded>(stream, op), std::move(operands));
}

mx::array rounded_definitions(const mx::Stream& stream, const mx::Shape& shape,
                              const mx::array& operand) {
  return mx::array(shape, mx::float32, std::make_shared<Definitions>(stream), {operand});
}

}  // namespace jaxmlx::runtime
