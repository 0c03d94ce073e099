// Attribute values of our IR: plain C++ values decoded from VHLO, named as StableHLO's textual
// form names them (`comparison_direction`, `dimension_numbers`, `broadcast_dimensions`, ...).
//
// An Attribute is a small value type (a variant). Dense element data is a view (span) into bytes
// owned by the Module (the input artifact, or a Module-owned buffer for data the reader had to
// rewrite, such as bit-packed i1): an Attribute must not outlive its Module.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <variant>
#include <vector>

#include "ir/types.h"

namespace jaxmlx::ir {

// ---- Enums (StableHLO's names and numbering, which equal VHLO's v1 numbering). -------------
enum class ComparisonDirection : uint8_t { kEQ, kNE, kGE, kGT, kLE, kLT };
enum class ComparisonType : uint8_t { kNoType, kFloat, kTotalOrder, kSigned, kUnsigned };
enum class Precision : uint8_t { kDefault, kHigh, kHighest };
enum class FftType : uint8_t { kFFT, kIFFT, kRFFT, kIRFFT };
enum class RngAlgorithm : uint8_t { kDefault, kThreeFry, kPhilox };
enum class RngDistribution : uint8_t { kUniform = 1, kNormal = 2 };
enum class Transpose : uint8_t { kInvalid, kNoTranspose, kTranspose, kAdjoint };
enum class CustomCallApiVersion : uint8_t {
  kUnspecified, kOriginal, kStatusReturning, kStatusReturningUnified, kTypedFfi
};
enum class ResultAccuracyMode : uint8_t { kDefault, kHighest, kTolerance };

// Which enum an EnumAttr holds.
enum class EnumKind : uint8_t {
  kComparisonDirection, kComparisonType, kPrecision, kFftType, kRngAlgorithm,
  kRngDistribution, kTranspose, kCustomCallApiVersion, kResultAccuracyMode
};

std::string_view enum_kind_name(EnumKind k);  // "comparison_direction", "precision", ...
// The StableHLO spelling of a value ("LT", "HIGHEST", "THREE_FRY"); "" when out of range.
std::string_view enum_value_name(EnumKind k, int64_t value);
// Number of values of an enum (RngDistribution counts 0..2 with 0 unused).
int enum_value_count(EnumKind k);

struct Attribute;
struct NamedAttribute;

// ---- Value structs. -------------------------------------------------------------------------
struct UnitAttr {  // presence-only flag, e.g. use_global_device_ids
  bool operator==(const UnitAttr&) const = default;
};
struct IntAttr {  // IntegerAttr: value + its type (i32, i64, ui32, ...)
  int64_t value = 0;
  ElementType type = ElementType::kS64;
  bool operator==(const IntAttr&) const = default;
};
struct FloatAttr {  // FloatAttr: exact bit pattern in `type`'s format, plus the value as double
  uint64_t bits = 0;
  ElementType type = ElementType::kF32;
  double value = 0;
  bool operator==(const FloatAttr& o) const { return bits == o.bits && type == o.type; }
};
struct StringAttr {
  std::string value;
  bool operator==(const StringAttr&) const = default;
};
struct SymbolRefAttr {  // @callee (without the '@')
  std::string name;
  bool operator==(const SymbolRefAttr&) const = default;
};
struct EnumAttr {
  EnumKind kind;
  int32_t value;
  bool operator==(const EnumAttr&) const = default;
};
struct I64ArrayAttr {  // array<i64: ...> (DenseI64ArrayAttr)
  std::vector<int64_t> values;
  bool operator==(const I64ArrayAttr&) const = default;
};
struct BoolArrayAttr {  // array<i1: ...> (DenseBoolArrayAttr)
  std::vector<bool> values;
  bool operator==(const BoolArrayAttr&) const = default;
};
// dense<...> : tensor<...>. `data` holds every element little-endian, one storage unit per
// element (i1 as one byte 0/1; sub-byte types one byte each); a splat holds one element.
struct DenseElementsAttr {
  const Type* type = nullptr;
  std::span<const uint8_t> data;
  bool splat = false;
  bool operator==(const DenseElementsAttr& o) const;
  // Element i as int64 (sign- or zero-extended per the element type); integer/pred types only.
  int64_t int_at(int64_t i) const;
  int64_t num_elements() const { return type ? type->num_elements() : 0; }
};
struct TypeAttr {
  const Type* type = nullptr;
  bool operator==(const TypeAttr&) const = default;
};
struct GatherDims {  // #stablehlo.gather<...> (also dynamic_gather)
  std::vector<int64_t> offset_dims, collapsed_slice_dims, operand_batching_dims,
      start_indices_batching_dims, start_index_map;
  int64_t index_vector_dim = 0;
  bool operator==(const GatherDims&) const = default;
};
struct ScatterDims {  // #stablehlo.scatter<...>
  std::vector<int64_t> update_window_dims, inserted_window_dims, input_batching_dims,
      scatter_indices_batching_dims, scatter_dims_to_operand_dims;
  int64_t index_vector_dim = 0;
  bool operator==(const ScatterDims&) const = default;
};
struct DotDims {  // #stablehlo.dot<...>
  std::vector<int64_t> lhs_batching_dimensions, rhs_batching_dimensions,
      lhs_contracting_dimensions, rhs_contracting_dimensions;
  bool operator==(const DotDims&) const = default;
};
struct ConvDims {  // #stablehlo.conv<...>
  int64_t input_batch_dimension = 0, input_feature_dimension = 0;
  std::vector<int64_t> input_spatial_dimensions;
  int64_t kernel_input_feature_dimension = 0, kernel_output_feature_dimension = 0;
  std::vector<int64_t> kernel_spatial_dimensions;
  int64_t output_batch_dimension = 0, output_feature_dimension = 0;
  std::vector<int64_t> output_spatial_dimensions;
  bool operator==(const ConvDims&) const = default;
};
struct DotAlgorithm {  // #stablehlo.dot_algorithm<...>
  const Type* lhs_precision_type = nullptr;
  const Type* rhs_precision_type = nullptr;
  const Type* accumulation_type = nullptr;
  int64_t lhs_component_count = 0, rhs_component_count = 0, num_primitive_operations = 0;
  bool allow_imprecise_accumulation = false;
  bool operator==(const DotAlgorithm&) const = default;
};
struct ChannelHandle {  // #stablehlo.channel_handle<handle = h, type = t>
  int64_t handle = 0, type = 0;
  bool operator==(const ChannelHandle&) const = default;
};
struct ResultAccuracy {  // #stablehlo.result_accuracy<...>; atol/rtol as f64 bit patterns
  uint64_t atol_bits = 0, rtol_bits = 0;
  int64_t ulps = 0;
  ResultAccuracyMode mode = ResultAccuracyMode::kDefault;
  bool operator==(const ResultAccuracy&) const = default;
};
struct OutputOperandAlias {  // #stablehlo.output_operand_alias<...>
  std::vector<int64_t> output_tuple_indices;
  int64_t operand_index = 0;
  std::vector<int64_t> operand_tuple_indices;
  bool operator==(const OutputOperandAlias&) const = default;
};
struct ArrayAttr {
  std::vector<Attribute> items;
  bool operator==(const ArrayAttr& o) const;
};
struct DictAttr {
  std::vector<NamedAttribute> entries;
  const Attribute* find(std::string_view name) const;
  bool operator==(const DictAttr& o) const;
};
// An attribute the reader did not decode (another dialect's, or a VHLO one we keep as-is, such
// as mesh/axis attributes): its dialect, a short description, and its encoded bytes if any.
struct OpaqueAttr {
  std::string dialect;
  std::string text;
  std::span<const uint8_t> bytes;
  bool operator==(const OpaqueAttr& o) const { return dialect == o.dialect && text == o.text; }
};

using AttrValue =
    std::variant<UnitAttr, bool, IntAttr, FloatAttr, StringAttr, SymbolRefAttr, EnumAttr,
                 I64ArrayAttr, BoolArrayAttr, DenseElementsAttr, TypeAttr, GatherDims, ScatterDims,
                 DotDims, ConvDims, DotAlgorithm, ChannelHandle, ResultAccuracy,
                 OutputOperandAlias, ArrayAttr, DictAttr, OpaqueAttr>;

struct Attribute {
  AttrValue value;

  Attribute();
  template <typename T>
    requires(!std::is_same_v<std::decay_t<T>, Attribute> &&
             std::is_constructible_v<AttrValue, T>)
  Attribute(T v) : value(std::move(v)) {}  // NOLINT: implicit from any alternative

  template <typename T>
  bool is() const { return std::holds_alternative<T>(value); }
  template <typename T>
  const T* as() const { return std::get_if<T>(&value); }
  bool operator==(const Attribute& o) const { return value == o.value; }
};

struct NamedAttribute {
  std::string name;
  Attribute value;
  bool operator==(const NamedAttribute&) const = default;
};

// Defined here, not in the struct: clang needs NamedAttribute complete (DictAttr holds a vector).
inline Attribute::Attribute() : value(UnitAttr{}) {}

// MLIR-like text of an attribute value ("3 : i64", "array<i64: 1, 2>", "#stablehlo.dot<...>",
// "dense<...> : tensor<4xf32>" (data summarized for large tensors)).
std::string attr_to_string(const Attribute& a);

}  // namespace jaxmlx::ir
