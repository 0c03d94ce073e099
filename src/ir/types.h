// Types of our program IR: tensors (ranked, with an element type), tokens, tuples, functions.
//
// Types are immutable and interned in a TypeArena owned by the Module: compare them by pointer
// (`a == b` for `const Type*`), and keep `const Type*` for as long as the Module lives. The arena
// is not thread-safe to intern into; reading interned types from many threads is fine.
#pragma once

#include <cstdint>
#include <deque>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace jaxmlx::ir {

// Element types, in StableHLO's spelling (printed as MLIR does: i1, i8, ui8, f32, ...).
enum class ElementType : uint8_t {
  kPred,  // i1
  kS2, kS4, kS8, kS16, kS32, kS64,
  kU2, kU4, kU8, kU16, kU32, kU64,
  kF4E2M1FN, kF6E2M3FN, kF6E3M2FN,
  kF8E3M4, kF8E4M3, kF8E4M3FN, kF8E4M3FNUZ, kF8E4M3B11FNUZ, kF8E5M2, kF8E5M2FNUZ, kF8E8M0FNU,
  kBF16, kF16, kF32, kF64, kTF32,
  kC64, kC128,  // complex<f32>, complex<f64>
  kIndex,
  kQuantized,   // !quant.uniform<...>; parameters in Type::quant
  kToken,       // !stablehlo.token (the whole type; no dims)
  kTuple,       // tuple<...>; members in Type::members
  kFunction,    // (inputs) -> results; members are inputs, results in Type::results
  kFuture,      // !stablehlo.future<...>; members in Type::members
  kNone,        // none (VHLO's "no value" marker, e.g. an absent dot algorithm)
  kOther,       // a type of another dialect; spelled in Type::text
};

// Dimension size for a dynamic ('?') dimension, as MLIR's ShapedType::kDynamic.
inline constexpr int64_t kDynamic = std::numeric_limits<int64_t>::min();

std::string_view element_type_name(ElementType t);  // "f32", "i1", "ui8", "complex<f32>", ...
int element_bit_width(ElementType t);                // 1 for pred, 64 for c64's... see .cc; 0 if none
int element_storage_bytes(ElementType t);            // bytes per element in dense storage; 0 if none
bool is_float(ElementType t);
bool is_complex(ElementType t);
bool is_signed_int(ElementType t);    // s2..s64
bool is_unsigned_int(ElementType t);  // u2..u64
inline bool is_integer(ElementType t) { return is_signed_int(t) || is_unsigned_int(t); }

struct Type;

// Uniform quantization parameters (!quant.uniform). Per-tensor when quantized_dimension < 0.
struct QuantParams {
  bool is_signed = true;
  const Type* storage = nullptr;    // scalar integer type
  const Type* expressed = nullptr;  // scalar float type
  int64_t storage_min = 0, storage_max = 0;
  int32_t quantized_dimension = -1;
  std::vector<double> scales;
  std::vector<int64_t> zero_points;
  bool operator==(const QuantParams&) const = default;
};

struct Type {
  ElementType dtype = ElementType::kF32;
  bool ranked = true;                 // false: tensor<*xT>
  bool is_tensor = true;              // false: a bare scalar element type (attr types, tuples)
  std::vector<int64_t> dims;          // kDynamic for '?'
  std::vector<int64_t> bounds;        // #stablehlo.bounds encoding (kDynamic = no bound); may be empty
  std::vector<const Type*> members;   // tuple members, function inputs, future members
  std::vector<const Type*> results;   // function results
  std::shared_ptr<const QuantParams> quant;  // when dtype == kQuantized
  std::string text;                   // spelling of kOther types

  bool has_dynamic_dims() const;
  int64_t rank() const { return static_cast<int64_t>(dims.size()); }
  // Product of dims; -1 if any is dynamic, the product overflows int64 or the type is not a
  // ranked tensor.
  int64_t num_elements() const;
  bool is_token() const { return dtype == ElementType::kToken; }
  bool is_tuple() const { return dtype == ElementType::kTuple; }

  bool operator==(const Type& o) const;
};

// MLIR spelling: "tensor<4x?xf32>", "tensor<i1>", "!stablehlo.token", "tuple<tensor<f32>>",
// "(tensor<f32>) -> tensor<f32>", "f32" (a scalar element type), "complex<f32>".
std::string type_to_string(const Type& t);

// Owns and deduplicates types. Pointers stay valid for the arena's lifetime.
class TypeArena {
 public:
  const Type* intern(Type t);
  const Type* tensor(ElementType dtype, std::vector<int64_t> dims);
  const Type* scalar(ElementType dtype);  // a bare element type, e.g. an attribute's "i64"
  size_t size() const { return types_.size(); }

 private:
  std::deque<Type> types_;
  std::unordered_multimap<size_t, const Type*> index_;
};

}  // namespace jaxmlx::ir
