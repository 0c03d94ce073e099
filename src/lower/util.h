// Small helpers shared by the lowering rules: element types of IR values, refusing types MLX
// lacks, typed scalar constants, and signed/unsigned twins of integer dtypes.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "lower/lowering.h"
#include "mlx/array.h"
#include "mlx/dtype.h"

namespace jaxmlx::lower {

// The element type of an IR value (its tensor type's dtype).
inline ir::ElementType element_type(const ir::Value& v) { return v.type->dtype; }

// Why an op cannot compute in a type MLX lacks ("f64 compute is not supported (...)").
std::string non_native_reason(ir::ElementType t);
// OK when every operand and result of `op` has a type MLX computes in natively; otherwise
// ctx.unsupported naming the first offending type.
Status require_native(const LowerContext& ctx, const ir::Op& op);

// A 0-d array of dtype `d` holding `v`; integers wrap into unsigned types (-1 -> all ones).
mx::array int_scalar(int64_t v, mx::Dtype d);
mx::array float_scalar(double v, mx::Dtype d);

// Bit width of an MLX dtype (8 for bool).
int dtype_bits(mx::Dtype d);
// The same-width unsigned / signed integer dtype (float16 -> uint16, float32 -> int32, ...).
mx::Dtype unsigned_of(mx::Dtype d);
mx::Dtype signed_of(mx::Dtype d);
bool is_unsigned_dtype(mx::Dtype d);

// Whether a float matmul whose lhs has `lhs_rows` rows (M) should get a row-major rhs: on the
// CPU, MLX hands a transposed rhs (a [K, N] view of an [N, K] array) to BLAS as it is, and the
// reference BLAS of MLX's Linux wheels multiplies by one 2.2-2.6x slower than by a row-major rhs
// (bench/blas_orientation.py: 128x784 by 784x512 transposed 41 ms, row-major 18 ms). A row-major
// copy costs K*N, less than it saves from 4 rows on (one row by 384x1152: 0.35 ms transposed,
// 0.49 ms with the copy). Off the CPU, never (Metal's and CUDA's matmuls take either).
bool row_major_rhs_pays(int64_t lhs_rows);

// Whether MLX's default device is a GPU of its CUDA backend (where some of its kernels differ from
// Metal's: lower/convolution.cc, lower/attention.cc).
bool on_cuda_gpu();

// The value of `a` when it is a constant whose elements are all equal (a data array, or a
// broadcast of one) and is integral; nullopt otherwise. Never evaluates anything.
std::optional<int64_t> splat_int_constant(const mx::array& a);
// The same for bool constants.
std::optional<bool> splat_bool_constant(const mx::array& a);
// The same for floating-point constants (float32, float16, bfloat16), as a double: the sign of
// a zero and infinities are kept; a NaN splat gives nullopt. Never evaluates anything.
std::optional<double> splat_float_constant(const mx::array& a);

// While a program is traced for mx::compile its constants enter as the trace's inputs:
// placeholders without data, so that no constant is baked into a kernel. For as long as it
// lives, this scope tells the two functions above which placeholder stands for which constant
// (`values[i]` for `placeholders[i]`), so that rules decide on constant values (an identity
// init, a constant start) when traced as they do when run eagerly. One per thread; nests.
class TracedConstants {
 public:
  TracedConstants(const std::vector<mx::array>& placeholders, const std::vector<mx::array>& values);
  ~TracedConstants();
  TracedConstants(const TracedConstants&) = delete;
  TracedConstants& operator=(const TracedConstants&) = delete;

  // The constant `a` stands for, when it is one of the innermost scope's placeholders.
  static std::optional<mx::array> lookup(const mx::array& a);

 private:
  std::unordered_map<std::uintptr_t, mx::array> values_;
  TracedConstants* outer_;
};

}  // namespace jaxmlx::lower
